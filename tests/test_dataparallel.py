"""DataParallel prediction rules, table-driven over the snapshot fixtures."""

from __future__ import annotations

from typing import Any

import pytest

from gpudiag.core.dataparallel import (
    DeviceProps,
    chunks_used,
    predict_imbalance,
    validate_dataparallel,
)
from gpudiag.core.visibility import resolve_visible
from gpudiag.errors import GpudiagInputError
from gpudiag.findings.catalog import titles
from gpudiag.model import Finding

from .conftest import load_fixture

#: The codes this area owns (gpudiag/findings/catalog.py).
CODES = titles("dataparallel")


def run(
    fixture: str,
    visible: str | None,
    order: str | None = None,
    **kw: Any,
) -> list[Finding]:
    snap = load_fixture(fixture)
    res = resolve_visible(visible, order, snap)
    args: dict[str, Any] = {
        "device_ids": None,
        "output_device": None,
        "set_device": None,
        "module_device": None,
        "batch_size": None,
    }
    args.update(kw)
    return validate_dataparallel(res, snap, **args)


def codes(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.code, f.severity) for f in findings]


# ----------------------------------------------------------------- the seeds


def test_seed_visible_12_device_ids_12_invalid_device_id() -> None:
    out = run("a100x8", "1,2", device_ids=[1, 2])
    assert codes(out) == [("DP-INVALID-DEVICE-ID", "error")]
    f = out[0]
    assert f.predicts == "AssertionError: Invalid device id"
    assert f.fix == (
        "under CUDA_VISIBLE_DEVICES=1,2, physical GPUs 1 and 2 are cuda:0 and cuda:1: "
        "use device_ids=[0,1]."
    )
    assert "GPU-3ceaaf30-8142-c8ea-91d9-3080f9b439fc" in f.message
    assert "NVIDIA A100-SXM4-80GB" in f.message


def test_seed_module_on_default_device_mismatch() -> None:
    out = run("a100x8", "0,1,2,3", device_ids=[1, 2, 3])
    assert codes(out) == [("DP-MODULE-DEVICE-MISMATCH", "error")]
    assert out[0].predicts == (
        "RuntimeError: module must have its parameters and buffers on device cuda:1 "
        "(device_ids[0]) but found one of them on device: cuda:0"
    )
    assert "device_ids=[0,1,2,3]" in (out[0].fix or "")
    assert "model.to('cuda:1')" in (out[0].fix or "")


def test_seed_visible_12_device_ids_01_ok_shows_physical() -> None:
    out = run("a100x8", "1,2", device_ids=[0, 1])
    assert codes(out) == [("DP-DEVICES", "info")]
    msg = out[0].message
    assert "cuda:0 = physical GPU 1 (NVIDIA A100-SXM4-80GB, GPU-3ceaaf30" in msg
    assert "cuda:1 = physical GPU 2 (NVIDIA A100-SXM4-80GB, GPU-9dfb369b" in msg


# ----------------------------------------------------------------- every rule


CASES: list[tuple[str, str, str | None, dict[str, Any], list[tuple[str, str]], str | None]] = [
    # (id, fixture, visible, kwargs, expected codes, expected predicts of the first)
    ("default-all", "a100x8", None, {"device_ids": None}, [("DP-DEVICES", "info")], None),
    (
        "empty-list",
        "a100x8",
        None,
        {"device_ids": []},
        [("DP-EMPTY-DEVICE-IDS", "error")],
        "IndexError: list index out of range",
    ),
    (
        "negative-first",
        "a100x8",
        None,
        {"device_ids": [-1, 0]},
        [("DP-NEGATIVE-FIRST-ID", "error")],
        "RuntimeError: Device index must not be negative",
    ),
    (
        "negative-later",
        "a100x8",
        None,
        {"device_ids": [0, -1]},
        [("DP-INVALID-DEVICE-ID", "error")],
        "AssertionError: Invalid device id",
    ),
    (
        "too-big",
        "a100x8",
        "0,1",
        {"device_ids": [0, 1, 2]},
        [("DP-INVALID-DEVICE-ID", "error")],
        "AssertionError: Invalid device id",
    ),
    (
        "duplicate",
        "a100x8",
        None,
        {"device_ids": [0, 1, 1]},
        [("DP-DUPLICATE-DEVICE-ID", "warning"), ("DP-DEVICES", "info")],
        None,
    ),
    (
        "output-outside",
        "a100x8",
        None,
        {"device_ids": [0, 1], "output_device": 3},
        [("DP-OUTPUT-DEVICE-OUTSIDE", "warning"), ("DP-DEVICES", "info")],
        None,
    ),
    (
        "output-invalid",
        "a100x8",
        "0,1",
        {"device_ids": [0, 1], "output_device": 5},
        [("DP-OUTPUT-DEVICE-INVALID", "error")],
        "RuntimeError: CUDA error: invalid device ordinal",
    ),
    (
        "output-single-id-not-gathered",
        "a100x8",
        "0,1",
        {"device_ids": [0], "output_device": 5},
        [("DP-DEVICES", "info")],
        None,
    ),
    (
        "output-cpu",
        "a100x8",
        "0,1",
        {"device_ids": [0, 1], "output_device": -1},
        [("DP-OUTPUT-DEVICE-CPU", "info"), ("DP-DEVICES", "info")],
        "FutureWarning: Using -1 to represent CPU tensor is deprecated. Please use a device "
        'object or string instead, e.g., "cpu".',
    ),
    (
        "cuda0-context",
        "a100x8",
        None,
        {"device_ids": [1, 2], "module_device": "cuda:1"},
        [("DP-CUDA0-CONTEXT", "warning"), ("DP-DEVICES", "info")],
        None,
    ),
    (
        "set-device-avoids-cuda0",
        "a100x8",
        None,
        {"device_ids": [1, 2], "set_device": 1},
        [("DP-DEVICES", "info")],
        None,
    ),
    (
        "main-card-missing-set-device",
        "a100x8",
        None,
        {"device_ids": [0, 1], "set_device": 1},
        [("DP-MODULE-DEVICE-MISMATCH", "error")],
        "RuntimeError: module must have its parameters and buffers on device cuda:0 "
        "(device_ids[0]) but found one of them on device: cuda:1",
    ),
    (
        "module-on-cpu",
        "a100x8",
        None,
        {"device_ids": [0, 1], "module_device": "cpu"},
        [("DP-MODULE-DEVICE-MISMATCH", "error")],
        "RuntimeError: module must have its parameters and buffers on device cuda:0 "
        "(device_ids[0]) but found one of them on device: cpu",
    ),
    (
        "single-id-moves-module",
        "a100x8",
        None,
        {"device_ids": [3], "module_device": "cpu", "set_device": 3},
        [("DP-DEVICES", "info")],
        None,
    ),
    (
        "set-device-invalid",
        "a100x8",
        "1,2",
        {"device_ids": [0, 1], "set_device": 2},
        [("DP-SET-DEVICE-INVALID", "error")],
        "RuntimeError: CUDA error: invalid device ordinal",
    ),
    (
        "set-device-negative",
        "a100x8",
        "1,2",
        {"device_ids": [0, 1], "set_device": -1},
        [("DP-SET-DEVICE-NEGATIVE", "warning"), ("DP-DEVICES", "info")],
        None,
    ),
    (
        "module-device-invalid",
        "a100x8",
        "1,2",
        {"device_ids": [0, 1], "module_device": "cuda:4"},
        [("DP-MODULE-DEVICE-INVALID", "error")],
        "RuntimeError: CUDA error: invalid device ordinal",
    ),
    (
        "batch-too-small",
        "a100x8",
        None,
        {"device_ids": [0, 1, 2, 3], "batch_size": 3},
        [("DP-BATCH-TOO-SMALL", "warning"), ("DP-DEVICES", "info")],
        None,
    ),
    (
        "batch-5-on-4-uses-3",
        "a100x8",
        None,
        {"device_ids": [0, 1, 2, 3], "batch_size": 5},
        [("DP-BATCH-TOO-SMALL", "warning"), ("DP-DEVICES", "info")],
        None,
    ),
    (
        "batch-ok",
        "a100x8",
        None,
        {"device_ids": [0, 1, 2, 3], "batch_size": 7},
        [("DP-DEVICES", "info")],
        None,
    ),
    (
        "imbalance-mixed",
        "mixed4",
        None,
        {"device_ids": None},
        [("DP-IMBALANCE", "warning"), ("DP-DEVICES", "info")],
        "UserWarning: There is an imbalance between your GPUs. You may want to exclude GPU 2 "
        "which has less than 75% of the memory or cores of GPU 0. You can do so by setting the "
        "device_ids argument to DataParallel, or by setting the CUDA_VISIBLE_DEVICES "
        "environment variable.",
    ),
    (
        "mixed-fastest-first-3090s-balanced",
        "mixed4",
        None,
        {"device_ids": [1, 0]},
        [("DP-MODULE-DEVICE-MISMATCH", "error")],
        None,
    ),
    (
        "cpu-fallback",
        "no_driver",
        None,
        {"device_ids": None, "module_device": "cpu"},
        [("DP-CPU-FALLBACK", "warning")],
        None,
    ),
    (
        "explicit-ids-no-gpu",
        "no_driver",
        None,
        {"device_ids": [0, 1]},
        [("DP-NO-VISIBLE-GPU", "error")],
        "AssertionError: Torch not compiled with CUDA enabled",
    ),
    (
        "hidden-by-empty-cvd",
        "a100x8",
        "",
        {"device_ids": [0]},
        [("DP-NO-VISIBLE-GPU", "error")],
        "RuntimeError: No CUDA GPUs are available",
    ),
    (
        "lost-gpu-shifts",
        "gpu_lost",
        None,
        {"device_ids": [0, 1, 3]},
        [("DP-INVALID-DEVICE-ID", "error")],
        # torch counts the lost GPU (NVML), so its bounds assert passes and CUDA's
        # property table, which lacks it, asserts.
        "RuntimeError: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED",
    ),
]


@pytest.mark.parametrize(
    ("fixture", "visible", "kw", "expected", "predicts"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_rules(
    fixture: str,
    visible: str | None,
    kw: dict[str, Any],
    expected: list[tuple[str, str]],
    predicts: str | None,
) -> None:
    out = run(fixture, visible, **kw)
    assert codes(out) == expected
    if predicts is not None:
        assert next(f.predicts for f in out if f.predicts) == predicts
    for f in out:
        assert f.code in CODES
        if f.severity != "info":
            assert f.fix


def test_mixed_pci_order_imbalance_names_logical_ids() -> None:
    # PCI order: 1080Ti, 3090, 1080Ti, 3090 -> device_ids=[1,0]: cuda:0 is the 1080 Ti.
    out = run("mixed4", None, "PCI_BUS_ID", device_ids=[1, 0], module_device="cuda:1")
    imb = [f for f in out if f.code == "DP-IMBALANCE"]
    assert len(imb) == 1
    assert "exclude GPU 0 which has less than 75% of the memory or cores of GPU 1" in (
        imb[0].predicts or ""
    )


def test_lost_gpu_fix_maps_nvidia_smi_numbers() -> None:
    out = run("gpu_lost", None, device_ids=[0, 1, 3])
    assert "use device_ids=[0,1,2]" in (out[0].fix or "")


def test_batch_idle_names_devices() -> None:
    out = run("a100x8", None, device_ids=[0, 1, 2, 3], batch_size=5)
    assert "cuda:3 get no work" in out[0].message


@pytest.mark.parametrize(
    ("batch", "n", "used"), [(1, 4, 1), (3, 4, 3), (5, 4, 3), (6, 4, 3), (7, 4, 4), (8, 8, 8)]
)
def test_chunks_used(batch: int, n: int, used: int) -> None:
    assert chunks_used(batch, n) == used


@pytest.mark.parametrize(
    ("ids", "props", "expected"),
    [
        ([0, 1], [(100, 10), (75, 10)], None),  # exactly 75%: torch needs strictly below
        ([0, 1], [(100, 10), (74, 10)], (1, 0)),
        ([0, 1], [(100, 10), (100, 7)], (1, 0)),  # memory equal, SMs below
        ([0, 1, 2], [(50, 10), (100, 10), (50, 10)], (0, 1)),  # first minimum wins
        ([2, 0], [(100, 10), (100, 10)], None),
        ([0, 1], [(None, 10), (10, 10)], None),
    ],
)
def test_predict_imbalance(
    ids: list[int], props: list[tuple[int | None, int]], expected: tuple[int, int] | None
) -> None:
    assert predict_imbalance(ids, [DeviceProps(m, s) for m, s in props]) == expected


@pytest.mark.parametrize(
    "kw", [{"module_device": "gpu0"}, {"module_device": "cuda:-1"}, {"batch_size": 0}]
)
def test_bad_input(kw: dict[str, Any]) -> None:
    with pytest.raises(GpudiagInputError):
        run("a100x8", None, device_ids=[0, 1], **kw)


def test_sm_count_falls_back_to_torch_where_nvml_has_none() -> None:
    # Recorded on an H100 (driver 580): NVML answered "Not Supported" for the SM
    # count while torch gave 132.
    import json
    from pathlib import Path

    from gpudiag.core.dataparallel import device_props
    from gpudiag.snapshot import snapshot_from_json

    table = json.loads((Path(__file__).parent / "truth" / "h100-driver-580.json").read_text())
    snapshot = snapshot_from_json(table["snapshot"])
    assert snapshot.gpus[0].multiprocessor_count is None
    (device,) = resolve_visible(None, None, snapshot).devices
    assert device_props(device, snapshot).multiprocessor_count == 132
