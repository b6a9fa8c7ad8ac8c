"""What each torch version makes of CUDA_VISIBLE_DEVICES, and the texts it raises.

Sources: the shipped ``torch/cuda/__init__.py`` of every torch release 1.12–2.13
(its ``_parse_visible_devices`` / ``_device_count_nvml`` run against a one-GPU
NVML), pytorch PRs #84879 (1.13: NVML count), #92315 (2.0: list parser, UUIDs),
#175355 (2.12: ``device_count()`` asks CUDA once initialised), #152023 (2.8:
``torch.AcceleratorError``), and the table recorded on torch 2.11 / driver 580
(``tests/truth/h100-driver-580.json``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpudiag.core.dataparallel import validate_dataparallel
from gpudiag.core.visibility import resolve_visible, torch_view
from gpudiag.model import Finding, Snapshot, TorchInfo
from gpudiag.snapshot import snapshot_from_json

from .conftest import load_fixture

_TRUTH = Path(__file__).parent / "truth" / "h100-driver-580.json"


def h100(torch_version: str | None = "2.11.0+cu130") -> Snapshot:
    """The recorded H100 (one GPU), with the torch version of the case."""
    snapshot = snapshot_from_json(json.loads(_TRUTH.read_text())["snapshot"])
    info = snapshot.torch if snapshot.torch is not None else TorchInfo()
    return replace(snapshot, torch=replace(info, version=torch_version))


UUID = "GPU-300c76ef-ae2f-3ead-5bb1-9379b683f3fb"


@pytest.mark.parametrize(
    ("version", "spec", "count"),
    [
        # 1.12: no parser of its own, device_count() asks CUDA.
        ("1.12.1", "GPU-300c76ef", None),
        ("1.12.1", "1,0", None),
        # 1.13: a set of integers; UUIDs read as -1 (issue #90543).
        ("1.13.1", "GPU-300c76ef", 0),
        ("1.13.1", f"MIG-{UUID[4:]}", 0),
        ("1.13.1", "0,0", 1),
        ("1.13.1", "1,0", 1),
        ("1.13.1", "0,-1,1", 1),
        ("1.13.1", "", 0),
        ("1.13.1", None, 1),
        ("1.13.1", "+0", 0),  # no sign in 1.13's _strtoul
        # 2.0 and later: a list; UUID prefixes matched via NVML; MIG- asks CUDA.
        ("2.0.1", "GPU-300c76ef", 1),
        ("2.0.1", f"MIG-{UUID[4:]}", None),
        ("2.11.0", "0,0", 0),
        ("2.11.0", "1,0", 0),
        ("2.11.0", "0,-1,1", 1),
        ("2.11.0", "GPU-300C76EF", 0),  # recorded
        ("2.11.0", "4294967296", 0),  # recorded
        ("2.11.0", "GPU-", 1),  # recorded
        ("2.13.0", "+0", 1),
    ],
)
def test_torch_count_by_version(version: str, spec: str | None, count: int | None) -> None:
    view = torch_view(spec, h100(version))
    assert view.raises is None
    assert view.count == count


def test_nvml_index_mapping_arrived_in_2_1() -> None:
    # _get_nvml_device_index: PR #94568, first shipped in 2.1.
    assert torch_view("0", h100("2.0.1")).nvml_indices is None
    assert torch_view("0", h100("2.1.2")).nvml_indices == (0,)


def test_torch_113_raises_where_int_rejects_a_digit() -> None:
    assert torch_view("²", h100("1.13.1")).raises == (
        "ValueError: invalid literal for int() with base 10: '²'"
    )


def _dp(snapshot: Snapshot, spec: str | None, **kw: object) -> list[Finding]:
    args: dict[str, object] = {
        "device_ids": None,
        "output_device": None,
        "set_device": None,
        "module_device": None,
        "batch_size": None,
    }
    args.update(kw)
    return validate_dataparallel(resolve_visible(spec, None, snapshot), snapshot, **args)  # type: ignore[arg-type]


def test_dataparallel_default_ids_come_from_torchs_count() -> None:
    # torch counts 0 devices for an upper-case UUID the driver accepts: the
    # default device_ids is [] and DataParallel.__init__ raises IndexError.
    (finding,) = _dp(h100(), "GPU-300C76EF")
    assert finding.code == "DP-EMPTY-DEVICE-IDS"
    assert finding.predicts == "IndexError: list index out of range"
    assert "device_ids=[0]" not in (finding.message + (finding.fix or ""))


@pytest.mark.parametrize(
    ("version", "code", "predicts"),
    [
        # Before 2.12 get_device_properties' bound is torch's NVML count (0)...
        ("2.11.0+cu130", "DP-INVALID-DEVICE-ID", "AssertionError: Invalid device id"),
        # ...from 2.12, CUDA's own count once initialised (1): the call works.
        ("2.13.0+cu130", "DP-DEVICES", None),
    ],
)
def test_explicit_ids_with_an_upper_case_uuid(
    version: str, code: str, predicts: str | None
) -> None:
    findings = _dp(h100(version), "GPU-300C76EF", device_ids=[0])
    assert findings[0].code == code
    assert findings[0].predicts == predicts


def test_dot_cuda_with_no_visible_gpu_raises() -> None:
    # The harness's 129th case on torch 2.11: CUDA_VISIBLE_DEVICES='', default
    # device_ids, no set_device, model.cuda().
    (finding,) = _dp(h100(), "")
    assert finding.code == "DP-NO-VISIBLE-GPU"
    assert finding.severity == "error"
    assert finding.predicts == "RuntimeError: No CUDA GPUs are available"
    # A model left on the CPU is DataParallel's silent CPU fallback.
    (cpu,) = _dp(h100(), "", module_device="cpu")
    assert cpu.code == "DP-CPU-FALLBACK"


@pytest.mark.parametrize(
    ("version", "predicts", "also"),
    [
        (
            "2.11.0+cu130",
            "torch.AcceleratorError: CUDA error: invalid device ordinal",
            ("torch < 2.8: RuntimeError: CUDA error: invalid device ordinal",),
        ),
        (
            "2.7.1+cu126",
            "RuntimeError: CUDA error: invalid device ordinal",
            ("torch >= 2.8: torch.AcceleratorError: CUDA error: invalid device ordinal",),
        ),
    ],
)
def test_set_device_past_the_visible_count_quotes_the_versions_class(
    version: str, predicts: str, also: tuple[str, ...]
) -> None:
    (finding,) = _dp(h100(version), None, set_device=1)
    assert finding.code == "DP-SET-DEVICE-INVALID"
    assert finding.predicts == predicts
    assert finding.predicts_also == also


def test_fixture_versions_are_read() -> None:
    # a100x8 records torch 2.4.1: the pre-2.8 class.
    snapshot = load_fixture("a100x8")
    (finding,) = _dp(snapshot, "0,1", set_device=2)
    assert finding.predicts == "RuntimeError: CUDA error: invalid device ordinal"
