"""Reconciling NVML, torch and GPUtil: joins, and a finding for each disagreement."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpudiag.core.inventory import build_inventory, inventory_findings
from gpudiag.findings.catalog import titles
from gpudiag.model import Snapshot, SourceStatus, TorchDevice, TorchInfo, uuid_key

from .conftest import load_fixture

#: The codes this area owns (gpudiag/findings/catalog.py).
CODES = titles("inventory")


def _codes(snap: Snapshot) -> list[tuple[str, str]]:
    return [(f.code, f.severity) for f in inventory_findings(snap)]


@pytest.mark.parametrize(
    ("uuid", "key"),
    [
        ("GPU-9942190A-aa31-4ff1-4aa9-c388d80f85f1", "9942190a-aa31-4ff1-4aa9-c388d80f85f1"),
        ("9942190a-aa31-4ff1-4aa9-c388d80f85f1", "9942190a-aa31-4ff1-4aa9-c388d80f85f1"),
        ("MIG-4b3a", "4b3a"),
        (" gpu-ab ", "ab"),
        ("", None),
        (None, None),
    ],
)
def test_uuid_key_normalises_prefix_and_case(uuid: str | None, key: str | None) -> None:
    assert uuid_key(uuid) == key


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a100x8", []),
        ("mixed4", []),
        ("a100_mig", []),
        ("gpu_lost", [("SRC-NVML-GPU-LOST", "error")]),
        ("no_driver", [("SRC-NVML-UNAVAILABLE", "warning"), ("SRC-GPUTIL-UNAVAILABLE", "info")]),
    ],
)
def test_fixture_findings(name: str, expected: list[tuple[str, str]]) -> None:
    assert _codes(load_fixture(name)) == expected


def test_rows_join_the_three_sources_by_uuid() -> None:
    snap = load_fixture("mixed4")
    inv = build_inventory(snap)
    assert [r.gpu.nvml_index for r in inv.rows if r.gpu] == [0, 1, 2, 3]
    assert all(r.seen_by == ("nvml", "torch", "gputil") for r in inv.rows)
    # torch's cuda:0 is the first RTX 3090, nvidia-smi index 1 (FASTEST_FIRST).
    assert [r.torch_devices[0].cuda_ordinal for r in inv.rows] == [2, 0, 3, 1]


def test_torch_only_gpus_still_get_a_row() -> None:
    snap = load_fixture("a100x8")
    no_nvml = replace(
        snap, gpus=(), sources={**snap.sources, "nvml": SourceStatus("unavailable", "x")}
    )
    inv = build_inventory(no_nvml)
    assert len(inv.rows) == 8
    assert inv.rows[0].seen_by == ("torch", "gputil")
    assert inv.rows[0].uuid == "GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1"


def _torch(snap: Snapshot, **changes: object) -> Snapshot:
    assert snap.torch is not None
    return replace(snap, torch=replace(snap.torch, **changes))


def test_cpu_only_torch_on_a_gpu_node() -> None:
    snap = _torch(
        load_fixture("a100x8"),
        version="2.13.0+cpu",
        cuda_version=None,
        cpu_only=True,
        cuda_available=False,
        device_count=0,
        devices=(),
    )
    (finding,) = inventory_findings(snap)
    assert finding.code == "INV-TORCH-SEES-NONE"
    assert finding.severity == "error"
    assert finding.message == (
        "NVML sees 8 GPU(s) but torch sees 0: torch 2.13.0+cpu is a CPU-only build."
    )
    assert finding.predicts == "AssertionError: Torch not compiled with CUDA enabled"


@pytest.mark.parametrize(
    ("driver_cuda", "wanted"),
    [
        ("11.4", "whl/cu118"),  # minor-version compatibility runs cu118 (a cu124 would not)
        ("12.2", "whl/cu121"),
        ("12.4", "whl/cu124"),
        ("13.0", "whl/cu130"),
        ("10.2", "upgrade the NVIDIA driver first"),
    ],
)
def test_cpu_only_fix_names_a_build_the_driver_runs(driver_cuda: str, wanted: str) -> None:
    # issue 20: the fix suggested cu124 to a machine whose driver is CUDA 11.4.
    snap = _torch(
        replace(load_fixture("a100x8"), cuda_driver_version=driver_cuda),
        version="2.13.0+cpu", cuda_version=None, cpu_only=True, cuda_available=False,
        device_count=0, devices=(),
    )  # fmt: skip
    (finding,) = [f for f in inventory_findings(snap) if f.code == "INV-TORCH-SEES-NONE"]
    assert wanted in (finding.fix or "")
    assert driver_cuda in (finding.fix or "")


def test_empty_cuda_visible_devices_hides_everything() -> None:
    snap = _torch(load_fixture("a100x8"), device_count=0, cuda_available=False, devices=())
    snap = replace(snap, env={"CUDA_VISIBLE_DEVICES": "", "CUDA_DEVICE_ORDER": None})
    (finding,) = [f for f in inventory_findings(snap) if f.code.startswith("INV")]
    assert finding.code == "INV-TORCH-SEES-NONE"
    assert finding.severity == "info"
    assert "CUDA_VISIBLE_DEVICES='' hides every GPU" in finding.message


def test_driver_older_than_torch_runtime() -> None:
    snap = _torch(
        load_fixture("mixed4"),
        version="2.6.0+cu126",
        cuda_version="12.6",
        cuda_available=False,
        device_count=0,
        devices=(),
        error="CUDA initialization: The NVIDIA driver on your system is too old",
    )
    (finding,) = [f for f in inventory_findings(snap) if f.code.startswith("INV")]
    assert finding.severity == "error"
    assert "the driver supports CUDA 12.2 but torch 2.6.0+cu126 needs the CUDA 12.6 runtime" in (
        finding.message
    )
    assert finding.predicts is not None
    assert "CUDA driver version is insufficient for CUDA runtime version" in finding.predicts


def test_torch_count_and_order_disagreements() -> None:
    snap = load_fixture("mixed4")
    assert snap.torch is not None
    devs = snap.torch.devices
    # torch numbers the GPUs in PCI order, but the snapshot's driver order says otherwise.
    swapped = tuple(
        replace(d, cuda_ordinal=i) for i, d in enumerate(sorted(devs, key=lambda d: d.name or ""))
    )
    codes = _codes(_torch(snap, devices=swapped))
    assert ("INV-TORCH-ORDER-MISMATCH", "warning") in codes
    fewer = _torch(snap, device_count=3, devices=devs[:3])
    assert _codes(fewer) == [("INV-TORCH-COUNT-MISMATCH", "warning")]


def test_torch_device_unknown_to_nvml() -> None:
    snap = load_fixture("a100x8")
    assert snap.torch is not None
    stranger = TorchDevice(
        cuda_ordinal=0, name="NVIDIA H100", uuid="deadbeef-0000-0000-0000-000000000000"
    )
    codes = _codes(_torch(snap, devices=(stranger, *snap.torch.devices[1:])))
    assert ("INV-TORCH-UUID-UNKNOWN", "warning") in codes


def test_gputil_disagreement() -> None:
    snap = load_fixture("a100x8")
    assert snap.gputil is not None
    assert _codes(replace(snap, gputil=snap.gputil[:6])) == [("INV-GPUTIL-MISMATCH", "warning")]
    (finding,) = inventory_findings(replace(snap, gputil=snap.gputil[:6]))
    assert finding.message == (
        "GPUtil (nvidia-smi) lists 6 GPU(s), NVML 8; not in GPUtil's list: nvidia-smi index 6, 7."
    )


@pytest.mark.parametrize(
    ("source", "status", "reason", "code", "severity"),
    [
        ("nvml", "error", "driver/library version mismatch: …", "SRC-NVML-ERROR", "error"),
        (
            "torch",
            "unavailable",
            "torch is not installed (ModuleNotFoundError)",
            "SRC-TORCH-UNAVAILABLE",
            "warning",
        ),
        ("torch", "error", "torch query timed out after 120 s", "SRC-TORCH-ERROR", "error"),
        ("gputil", "unavailable", "nvidia-smi not found on PATH", "SRC-GPUTIL-UNAVAILABLE", "info"),
        ("gputil", "error", "GPUtil could not parse nvidia-smi", "SRC-GPUTIL-ERROR", "warning"),
    ],
)
def test_each_source_failure_is_its_own_finding(
    source: str, status: str, reason: str, code: str, severity: str
) -> None:
    snap = load_fixture("a100x8")
    sources = {**snap.sources, source: SourceStatus(status, reason)}  # type: ignore[arg-type]
    changes: dict[str, object] = {"sources": sources}
    if source == "torch":
        changes["torch"] = None
    if source == "gputil":
        changes["gputil"] = None
    findings = inventory_findings(replace(snap, **changes))
    assert [(f.code, f.severity) for f in findings] == [(code, severity)]
    assert reason in findings[0].message


def test_codes_are_all_declared() -> None:
    emitted = {
        "SRC-NVML-UNAVAILABLE",
        "SRC-NVML-ERROR",
        "SRC-NVML-GPU-LOST",
        "SRC-TORCH-UNAVAILABLE",
        "SRC-TORCH-ERROR",
        "SRC-GPUTIL-UNAVAILABLE",
        "SRC-GPUTIL-ERROR",
        "INV-NO-GPUS",
        "INV-TORCH-SEES-NONE",
        "INV-TORCH-COUNT-MISMATCH",
        "INV-TORCH-UUID-UNKNOWN",
        "INV-TORCH-ORDER-MISMATCH",
        "INV-GPUTIL-MISMATCH",
    }
    assert set(CODES) == emitted


def test_no_gpus_with_working_nvml() -> None:
    snap = replace(load_fixture("a100x8"), gpus=(), gputil=(), torch=TorchInfo(device_count=0))
    assert ("INV-NO-GPUS", "warning") in _codes(snap)


def test_a_reason_ending_in_a_period_is_not_doubled() -> None:
    snap = load_fixture("a100x8")
    reason = "torch could not initialise CUDA: CUDA initialization: driver too old."
    sources = {**snap.sources, "torch": SourceStatus("error", reason)}
    (finding,) = inventory_findings(replace(snap, sources=sources, torch=None))
    assert finding.message == f"torch failed: {reason}"
