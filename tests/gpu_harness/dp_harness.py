"""Run the real ``torch.nn.DataParallel`` on real GPUs and compare with gpudiag.

Usage (on a machine with NVIDIA GPUs)::

    python -m tests.gpu_harness.dp_harness            # prints a table, exit 1 on mismatch

For each ``CUDA_VISIBLE_DEVICES`` value of the grid, one child process (the
value must be set before CUDA initialises) runs every (device_ids, set_device,
module_device) case: ``torch.cuda.set_device``, moving an ``nn.Linear`` to the
module device, wrapping it in DataParallel and one forward. The first exception
(type and first line of its message) and torch's imbalance warning are
compared with gpudiag's prediction from the live snapshot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from itertools import product
from typing import Any

CHILD = r"""
import json, sys, warnings
import torch
cases = json.load(sys.stdin)
results = []
for case in cases:
    outcome = "ok"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            torch.cuda.set_device(0) if torch.cuda.is_available() else None
            if case["set_device"] is not None:
                torch.cuda.set_device(case["set_device"])
            model = torch.nn.Linear(4, 4)
            dev = case["module_device"]
            model = model.cuda() if dev is None else model.to(dev)
            dp = torch.nn.DataParallel(model, device_ids=case["device_ids"])
            dp(torch.randn(8, 4))
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            # As a traceback names it: torch.AcceleratorError, not AcceleratorError.
            cls = type(exc)
            name = cls.__qualname__ if cls.__module__ == "builtins" else (
                f"{cls.__module__}.{cls.__qualname__}")
            outcome = f"{name}: {first}".rstrip(": ")
    warns = [" ".join(str(w.message).split()) for w in caught if "imbalance" in str(w.message)]
    results.append({"outcome": outcome, "warnings": warns})
json.dump(results, sys.stdout)
"""

DEVICE_IDS: list[list[int] | None] = [None, [], [0], [0, 1], [1, 0], [1, 2], [-1, 0], [0, -1]]
SET_DEVICE: list[int | None] = [None, 0, 1, 3]
MODULE_DEVICE: list[str | None] = [None, "cpu", "cuda:1"]


@dataclass(frozen=True)
class Row:
    """One compared case."""

    visible: str | None
    case: dict[str, Any]
    predicted: str
    actual: str

    @property
    def match(self) -> bool:
        return self.predicted.splitlines()[0] == self.actual


def visibles(n_gpus: int) -> list[str | None]:
    """The CUDA_VISIBLE_DEVICES values of the grid for a machine with n GPUs."""
    out: list[str | None] = [None, "0", ""]
    if n_gpus >= 2:
        out.append("1,0")
    if n_gpus >= 3:
        out.append("1,2")
    return out


def predict(snapshot: Any, visible: str | None, case: dict[str, Any]) -> str:
    """gpudiag's predicted first exception ("ok" when none)."""
    from gpudiag.core.dataparallel import validate_dataparallel
    from gpudiag.core.visibility import resolve_visible

    res = resolve_visible(visible, os.environ.get("CUDA_DEVICE_ORDER"), snapshot)
    findings = validate_dataparallel(
        res,
        snapshot,
        device_ids=case["device_ids"],
        output_device=None,
        set_device=case["set_device"],
        module_device=case["module_device"],
        batch_size=None,
    )
    raised = [f for f in findings if f.severity == "error" and f.predicts]
    return raised[0].predicts if raised and raised[0].predicts else "ok"


def run_grid() -> list[Row]:
    """Run every case on this machine's GPUs; needs CUDA."""
    from gpudiag.machine import load_machine

    snapshot = load_machine(None)
    cases = [
        {"device_ids": ids, "set_device": sd, "module_device": md}
        for ids, sd, md in product(DEVICE_IDS, SET_DEVICE, MODULE_DEVICE)
    ]
    rows: list[Row] = []
    for visible in visibles(len(snapshot.gpus)):
        env = dict(os.environ)
        env.pop("CUDA_VISIBLE_DEVICES", None)
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        proc = subprocess.run(
            [sys.executable, "-c", CHILD],
            input=json.dumps(cases),
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"harness child failed: {proc.stderr[-2000:]}")
        for case, result in zip(cases, json.loads(proc.stdout), strict=True):
            rows.append(Row(visible, case, predict(snapshot, visible, case), result["outcome"]))
    return rows


def main() -> int:
    """Print the predicted-versus-actual table; 1 when any case differs."""
    from tabulate import tabulate

    rows = run_grid()
    table = [
        [
            "unset" if r.visible is None else repr(r.visible),
            r.case["device_ids"],
            r.case["set_device"],
            r.case["module_device"],
            r.predicted.splitlines()[0][:70],
            r.actual[:70],
            "yes" if r.match else "NO",
        ]
        for r in rows
    ]
    print(
        tabulate(
            table,
            headers=["CVD", "device_ids", "set_device", "module", "predicted", "actual", "match"],
        )
    )
    bad = sum(not r.match for r in rows)
    print(f"\n{len(rows) - bad}/{len(rows)} cases match")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
