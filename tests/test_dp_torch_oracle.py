"""Differential oracle: the REAL ``torch.nn.DataParallel`` versus gpudiag's prediction.

A child process imports the installed (CPU) torch and fakes only the CUDA
device table: ``torch.cuda.is_available``, ``device_count``, ``current_device``,
``_lazy_init`` and the ``_get_device_properties`` binding that
``torch.cuda.get_device_properties`` calls after its own ``Invalid device id``
assert. Everything else is torch's code, unmodified: ``DataParallel.__init__``,
``torch._utils._get_device_index``/``_get_devices_properties``, the real
``get_device_properties`` bounds assert, ``torch.device('cuda', -1)``,
``_check_balance`` and its warning, the single-id ``module.to``, and the
parameter-device check at the top of ``DataParallel.forward`` (the forward is
stopped right after it, at ``scatter``, which needs real CUDA). The fake module
reports its parameters on ``cuda:K`` without allocating anything.

What this cannot cover (real CUDA needed; see ``tests/gpu_harness/dp_harness.py``):
``torch.cuda.set_device`` errors, ``.to('cuda:K')`` on a missing device, the
gather to an invalid ``output_device``, context memory on cuda:0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import product
from typing import Any

import pytest

from gpudiag.core.dataparallel import chunks_used, validate_dataparallel
from gpudiag.model import (
    Gpu,
    Resolution,
    Snapshot,
    TorchDevice,
    TorchInfo,
    VisibleDevice,
)

_MIB = 1024 * 1024

CHILD = r"""
import json, sys, types, warnings
import torch
import torch.cuda as tc
from torch.nn.parallel import DataParallel

cases = json.load(sys.stdin)
state = {"n": 0, "props": [], "current": 0}
tc.is_available = lambda: state["n"] > 0
tc.device_count = lambda: state["n"]
tc.current_device = lambda: state["current"]
tc._lazy_init = lambda: None
def _props(i):
    mem_mib, sms = state["props"][i]
    return types.SimpleNamespace(total_memory=mem_mib * 1024 * 1024,
                                 multi_processor_count=sms, name=f"fake{i}")
tc._get_device_properties = _props

class Stop(Exception):
    pass

class FakeModule(torch.nn.Module):
    def __init__(self, device):
        super().__init__()
        self.fake_device = device
    def to(self, *args, **kwargs):
        self.fake_device = torch.device(args[0])
        return self
    def parameters(self, recurse=True):
        yield types.SimpleNamespace(device=self.fake_device)
    def buffers(self, recurse=True):
        return iter(())
    def forward(self, *inputs):
        return "cpu-ran"

def stop(*args, **kwargs):
    raise Stop()

results = []
for case in cases:
    state.update(n=case["n"], props=case["props"], current=case["current"])
    dev = torch.device("cpu") if case["module"] == "cpu" else torch.device("cuda", case["module"])
    outcome = "ok"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            dp = DataParallel(FakeModule(dev), device_ids=case["ids"],
                              output_device=case["out"])
            dp.scatter = stop
            result = dp(torch.zeros(4))
            outcome = "cpu" if result == "cpu-ran" else "ok"
        except Stop:
            outcome = "ok"
        except Exception as exc:
            outcome = f"{type(exc).__name__}: {exc}"
    texts = [" ".join(str(w.message).split()) for w in caught
             if "imbalance" in str(w.message)]
    results.append({"outcome": outcome, "warnings": texts})
chunks = {f"{b},{n}": len(torch.empty(b).chunk(n)) for b in range(1, 21) for n in range(1, 9)}
json.dump({"results": results, "chunks": chunks}, sys.stdout)
"""

TABLES: dict[str, list[tuple[int, int]]] = {
    "uniform": [(81920, 108)] * 4,
    "memory": [(24576, 82), (24576, 82), (11264, 28), (11264, 28)],
    "sms": [(16000, 80), (16000, 56), (16000, 80), (16000, 59)],
    "border": [(100, 10), (75, 10), (74, 10), (100, 10)],
}
IDS: list[list[int] | None] = [
    None,
    [],
    [0],
    [1],
    [0, 1],
    [1, 0],
    [1, 2],
    [0, 1, 1],
    [-1, 0],
    [0, -1],
    [2, 3],
    [0, 4],
    [0, 2, 1],
    [3],
]


def _grid() -> list[dict[str, Any]]:
    cases = []
    for n, table, ids, module, out in product(
        (0, 1, 2, 4), TABLES, IDS, (0, 1, "cpu"), (None, 0, 1, -1)
    ):
        if n == 0 and module != "cpu":
            continue  # no GPU: a CUDA module could not exist
        if isinstance(module, int) and module >= n:
            continue  # .to('cuda:K') itself fails first: needs real CUDA
        current = module if isinstance(module, int) else 0
        cases.append(
            {
                "n": n,
                "props": TABLES[table][:n],
                "current": current,
                "ids": ids,
                "module": module,
                "out": out,
            }
        )
    return cases


def _machine(n: int, props: list[tuple[int, int]]) -> tuple[Snapshot, Resolution]:
    uuids = [f"GPU-00000000-0000-0000-0000-00000000000{i}" for i in range(n)]
    gpus = tuple(
        Gpu(
            nvml_index=i,
            uuid=uuids[i],
            name=f"fake{i}",
            memory_total_mib=props[i][0],
            multiprocessor_count=props[i][1],
        )
        for i in range(n)
    )
    torch_info = TorchInfo(
        version="2.13.0",
        cuda_version="12.4",
        cpu_only=False,
        cuda_available=n > 0,
        device_count=n,
        devices=tuple(
            TorchDevice(
                cuda_ordinal=i,
                uuid=uuids[i][4:],
                memory_total_mib=props[i][0],
                multiprocessor_count=props[i][1],
            )
            for i in range(n)
        ),
    )
    snap = Snapshot(driver_version="550.0", cuda_driver_version="12.4", gpus=gpus, torch=torch_info)
    res = Resolution(
        spec=None,
        order="FASTEST_FIRST",
        devices=tuple(VisibleDevice(i, i, uuids[i], entry=str(i)) for i in range(n)),
    )
    return snap, res


# Codes whose ``predicts`` is raised inside DataParallel.__init__ or at the top of
# its forward: the part of torch this oracle executes.
_ORACLE_CODES = {
    "DP-EMPTY-DEVICE-IDS",
    "DP-NEGATIVE-FIRST-ID",
    "DP-INVALID-DEVICE-ID",
    "DP-MODULE-DEVICE-MISMATCH",
}


def _prediction(case: dict[str, Any]) -> tuple[str, list[str]]:
    snap, res = _machine(case["n"], case["props"])
    module = case["module"]
    findings = validate_dataparallel(
        res,
        snap,
        device_ids=case["ids"],
        output_device=case["out"],
        set_device=None if module == "cpu" else module,
        module_device="cpu" if module == "cpu" else f"cuda:{module}",
        batch_size=None,
    )
    found = {f.code for f in findings}
    if found & {"DP-CPU-FALLBACK", "DP-NO-VISIBLE-GPU"}:
        outcome = "cpu"
    else:
        raised = [f for f in findings if f.code in _ORACLE_CODES]
        outcome = (raised[0].predicts or "?") if raised else "ok"
    warns = [
        (f.predicts or "").removeprefix("UserWarning: ")
        for f in findings
        if f.code == "DP-IMBALANCE"
    ]
    return outcome, warns


@pytest.fixture(scope="module")
def torch_results() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    cases = _grid()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    return cases, data["results"], data["chunks"]


def test_grid_is_large_and_varied(
    torch_results: tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]],
) -> None:
    cases, results, _ = torch_results
    assert len(cases) == len(results) > 500
    kinds = {r["outcome"].split(":")[0] for r in results}
    # The grid must reach every behaviour it claims to compare.
    assert {"ok", "cpu", "AssertionError", "RuntimeError", "IndexError"} <= kinds
    assert any(r["warnings"] for r in results)


def test_dataparallel_matches_torch(
    torch_results: tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]],
) -> None:
    cases, results, _ = torch_results
    mismatches = []
    for case, actual in zip(cases, results, strict=True):
        predicted = _prediction(case)
        if predicted != (actual["outcome"], actual["warnings"]):
            mismatches.append((case, predicted, actual))
    assert mismatches == [], f"{len(mismatches)} mismatches, first: {mismatches[:3]}"


def test_chunk_count_matches_torch(
    torch_results: tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]],
) -> None:
    _, _, chunks = torch_results
    ours = {f"{b},{n}": chunks_used(b, n) for b in range(1, 21) for n in range(1, 9)}
    assert ours == chunks
