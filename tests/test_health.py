"""Health rules: each one on a fixture, or a fixture with one field changed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpudiag.core.compat import arch_runs_on, parse_cc
from gpudiag.core.health import health_findings
from gpudiag.core.visibility import resolve_visible
from gpudiag.errors import GpudiagInputError
from gpudiag.findings.catalog import titles
from gpudiag.model import Finding, Snapshot

from .conftest import load_fixture

#: The codes this area owns (gpudiag/findings/catalog.py).
CODES = titles("health")


def with_gpu(snap: Snapshot, nvml_index: int, **changes: Any) -> Snapshot:
    gpus = tuple(replace(g, **changes) if g.nvml_index == nvml_index else g for g in snap.gpus)
    return replace(snap, gpus=gpus)


def run(snap: Snapshot, visible: str | None = None, amp: str | None = None) -> list[Finding]:
    return health_findings(snap, resolve_visible(visible, None, snap), amp=amp)


def codes(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.code, f.severity) for f in findings]


A100 = load_fixture("a100x8")
MIXED = load_fixture("mixed4")
LOST = load_fixture("gpu_lost")
NO_DRIVER = load_fixture("no_driver")
MIG = load_fixture("a100_mig")

CASES: list[tuple[str, Snapshot, str | None, str | None, list[tuple[str, str]]]] = [
    ("clean", A100, "0,1", None, []),
    ("foreign-process", A100, "3", None, [("HEALTH-FOREIGN-PROCESSES", "warning")]),
    ("foreign-process-not-visible", A100, "0,1", None, []),
    (
        "unlisted-memory-use",
        with_gpu(A100, 0, memory_used_mib=40000),
        "0",
        None,
        [("HEALTH-FOREIGN-PROCESSES", "warning")],
    ),
    (
        "ecc-volatile",
        with_gpu(A100, 0, ecc_uncorrectable_volatile=2, ecc_uncorrectable_aggregate=2),
        "0",
        None,
        [("HEALTH-ECC-UNCORRECTABLE", "error")],
    ),
    (
        "ecc-aggregate",
        with_gpu(A100, 0, ecc_uncorrectable_aggregate=1),
        "0",
        None,
        [("HEALTH-ECC-UNCORRECTABLE", "warning")],
    ),
    (
        "pages-pending",
        with_gpu(A100, 0, retired_pages_pending=True),
        "0",
        None,
        [("HEALTH-RETIRED-PAGES-PENDING", "warning")],
    ),
    (
        "remap-failure",
        with_gpu(A100, 0, remapped_rows_failure=True),
        "0",
        None,
        [("HEALTH-ROW-REMAP-FAILURE", "error")],
    ),
    (
        "prohibited",
        with_gpu(A100, 0, compute_mode="Prohibited"),
        "0",
        None,
        [("HEALTH-COMPUTE-MODE", "error")],
    ),
    (
        "exclusive-free",
        with_gpu(A100, 0, compute_mode="Exclusive_Process"),
        "0",
        None,
        [("HEALTH-COMPUTE-MODE", "warning")],
    ),
    (
        "exclusive-taken",
        with_gpu(A100, 3, compute_mode="Exclusive_Process"),
        "3",
        None,
        [("HEALTH-FOREIGN-PROCESSES", "warning"), ("HEALTH-COMPUTE-MODE", "error")],
    ),
    ("lost", LOST, None, None, [("HEALTH-GPU-LOST", "error")]),
    (
        "thermal-throttle",
        with_gpu(A100, 0, throttle_reasons=("HW Thermal Slowdown",)),
        "0",
        None,
        [("HEALTH-THROTTLE", "warning")],
    ),
    (
        "power-cap-info",
        with_gpu(A100, 0, throttle_reasons=("SW Power Cap",)),
        "0",
        None,
        [("HEALTH-THROTTLE", "info")],
    ),
    ("idle-not-throttle", with_gpu(A100, 0, throttle_reasons=("Idle",)), "0", None, []),
    ("persistence-off", MIXED, None, None, [("HEALTH-PERSISTENCE-OFF", "info")]),
    (
        "driver-major-too-old",
        replace(A100, cuda_driver_version="11.8"),
        "0",
        None,
        [("HEALTH-DRIVER-TOO-OLD", "error")],
    ),
    (
        "driver-minor-too-old",
        replace(A100, cuda_driver_version="12.2"),
        "0",
        None,
        [("HEALTH-DRIVER-TOO-OLD", "warning")],
    ),
    (
        # CUDA 10 has no minor-version compatibility (issue 20): 10.2 on a 10.1 driver fails.
        "driver-cuda10-minor-too-old",
        replace(
            A100,
            cuda_driver_version="10.1",
            torch=replace(A100.torch, cuda_version="10.2"),  # type: ignore[arg-type]
        ),
        "0",
        None,
        [("HEALTH-DRIVER-TOO-OLD", "error")],
    ),
    (
        "arch-unsupported",
        replace(A100, torch=replace(A100.torch, arch_list=("sm_70", "sm_75", "sm_90"))),  # type: ignore[arg-type]
        "0",
        None,
        [("HEALTH-ARCH-UNSUPPORTED", "error")],
    ),
    (
        "arch-ptx-only",
        replace(A100, torch=replace(A100.torch, arch_list=("sm_70", "compute_75"))),  # type: ignore[arg-type]
        "0",
        None,
        [("HEALTH-ARCH-PTX-JIT", "warning")],
    ),
    (
        "arch-sm90a-not-for-a100",
        replace(A100, torch=replace(A100.torch, arch_list=("sm_90a",))),  # type: ignore[arg-type]
        "0",
        None,
        [("HEALTH-ARCH-UNSUPPORTED", "error")],
    ),
    (
        "arch-sm80-runs-on-86",
        replace(MIXED, torch=replace(MIXED.torch, arch_list=("sm_61", "sm_80"))),  # type: ignore[arg-type]
        None,
        None,
        [("HEALTH-PERSISTENCE-OFF", "info")],
    ),
    (
        "bf16-on-1080ti",
        MIXED,
        None,
        "bf16",
        # One finding for both GTX 1080 Ti (same capability), not one per GPU.
        [
            ("HEALTH-PERSISTENCE-OFF", "info"),
            ("HEALTH-AMP-BF16", "warning"),
        ],
    ),
    ("bf16-on-a100", A100, "0", "bf16", []),
    (
        "bf16-on-v100",
        LOST,
        "0",
        "bf16",
        [("HEALTH-GPU-LOST", "error"), ("HEALTH-AMP-BF16", "warning")],
    ),
    (
        "fp16-on-1080ti-only-visible",
        MIXED,
        "2",
        "fp16",
        [("HEALTH-PERSISTENCE-OFF", "info"), ("HEALTH-AMP-FP16", "warning")],
    ),
    ("amp-no-gpu", NO_DRIVER, None, "fp16", [("HEALTH-AMP-NO-GPU", "warning")]),
    ("mig-clean", MIG, None, "bf16", []),
]


@pytest.mark.parametrize(
    ("snap", "visible", "amp", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_rules(
    snap: Snapshot, visible: str | None, amp: str | None, expected: list[tuple[str, str]]
) -> None:
    out = run(snap, visible, amp)
    assert codes(out) == expected
    for f in out:
        assert f.code in CODES
        assert f.fix


def test_predicts() -> None:
    out = run(replace(A100, cuda_driver_version="11.8"), "0")
    assert out[0].predicts == (
        "RuntimeError: CUDA driver version is insufficient for CUDA runtime version"
    )
    snap = replace(A100, torch=replace(A100.torch, arch_list=("sm_70",)))  # type: ignore[arg-type]
    out = run(snap, "0")
    assert (out[0].predicts or "").startswith(
        "UserWarning: NVIDIA A100-SXM4-80GB with CUDA capability sm_80 is not compatible "
        "with the current PyTorch installation."
    )
    out = run(with_gpu(A100, 0, compute_mode="Prohibited"), "0")
    assert out[0].predicts == (
        "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable"
    )


def test_lost_gpu_message_names_shift() -> None:
    out = run(LOST)
    assert "CUDA enumerates only 3 of 4 GPUs" in out[0].message
    assert "3 shift down by one" in out[0].message


@pytest.mark.parametrize(
    ("entry", "cc", "expected"),
    [
        ("sm_80", 80, "cubin"),
        ("sm_80", 86, "cubin"),
        ("sm_86", 80, None),
        ("sm_80", 90, None),
        ("sm_90a", 90, "cubin"),
        ("sm_90a", 91, None),
        ("sm_100f", 103, "cubin"),
        ("compute_62", 70, "ptx"),
        ("compute_80", 75, None),
        ("compute_90a", 100, None),
        ("sm_80", 87, None),  # Jetson Orin does not run discrete-GPU cubins
        ("sm_87", 87, "cubin"),
        ("sm_101", 110, "cubin"),
        ("bogus", 80, None),
    ],
)
def test_arch_runs_on(entry: str, cc: int, expected: str | None) -> None:
    assert arch_runs_on(entry, cc) == expected


@pytest.mark.parametrize(
    ("text", "expected"), [("8.6", 86), ("10.0", 100), ("12.1", 121), (None, None), ("x", None)]
)
def test_parse_cc(text: str | None, expected: int | None) -> None:
    assert parse_cc(text) == expected


def test_bad_amp() -> None:
    with pytest.raises(GpudiagInputError):
        run(A100, "0", amp="fp8")
