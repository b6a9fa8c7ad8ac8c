"""``gpudiag.api.check`` / ``guard`` on snapshots, with a fake in-process torch."""

from __future__ import annotations

import os
import sys
import types

import pytest

from gpudiag import api
from gpudiag.api import GpuConfigError, check, guard
from gpudiag.core.check import Report

from .conftest import fixture_path, load_fixture


def test_check_same_report_as_core() -> None:
    report = check(snapshot=str(fixture_path("a100x8")), visible="1,2", device_ids=[0, 1], env={})
    assert isinstance(report, Report)
    assert report.ok is True
    assert [d.nvml_index for d in report.resolution.devices] == [1, 2]
    assert [f.code for f in report.findings if f.code.startswith("DP-")] == ["DP-DEVICES"]


def test_check_accepts_snapshot_object() -> None:
    report = check(snapshot=load_fixture("a100x8"), visible="1,2", device_ids=[1, 2], env={})
    assert report.ok is False
    assert [f.code for f in report.errors] == ["DP-INVALID-DEVICE-ID"]


def test_check_env_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "0")
    report = check(snapshot=load_fixture("a100x8"))
    assert "ddp" in report.checks
    assert [f.code for f in report.errors] == ["DDP-LAUNCHER-ENV-MISSING"]


def test_guard_raises_with_fixes() -> None:
    with pytest.raises(GpuConfigError) as info:
        guard(snapshot=load_fixture("a100x8"), device_ids=[8], env={})
    text = str(info.value)
    assert text.splitlines()[0] == "gpudiag found 1 problem(s) in the GPU configuration:"
    assert "DP-INVALID-DEVICE-ID" in text
    assert "predicts: AssertionError: Invalid device id" in text
    assert "fix: " in text
    assert isinstance(info.value, RuntimeError)
    assert info.value.report.ok is False


def test_guard_expect_gpus() -> None:
    with pytest.raises(GpuConfigError, match="CHECK-EXPECT-GPUS"):
        guard(snapshot=load_fixture("a100x8"), expect_gpus=4, env={})
    assert guard(snapshot=load_fixture("a100x8"), expect_gpus=8, env={}).ok is True


def test_guard_strict_warnings() -> None:
    snap = load_fixture("mixed4")
    report = guard(snapshot=snap, dataparallel=True, env={})
    assert "DP-IMBALANCE" in [f.code for f in report.findings]
    with pytest.raises(GpuConfigError, match="DP-IMBALANCE"):
        guard(snapshot=snap, dataparallel=True, env={}, strict=True)


def _fake_torch(initialised: bool, uuids: list[str]) -> types.ModuleType:
    torch = types.ModuleType("torch")
    cuda = types.SimpleNamespace(
        is_initialized=lambda: initialised,
        device_count=lambda: len(uuids),
        get_device_properties=lambda i: types.SimpleNamespace(uuid=uuids[i]),
    )
    torch.cuda = cuda  # type: ignore[attr-defined]
    return torch


A100_0 = "9942190a-aa31-4ff1-4aa9-c388d80f85f1"
A100_1 = "3ceaaf30-8142-c8ea-91d9-3080f9b439fc"


def test_guard_torch_not_initialised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(False, []))
    report = guard(snapshot=load_fixture("a100x8"), env={})
    assert [f.code for f in report.findings if f.code.startswith("API-")] == []


def test_guard_after_init_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    all8 = [d.uuid for d in load_fixture("a100x8").torch.devices]  # type: ignore[union-attr]
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(True, [str(u) for u in all8]))
    report = guard(snapshot=load_fixture("a100x8"), env={})
    assert [(f.code, f.severity) for f in report.findings if f.code.startswith("API-")] == [
        ("API-CUDA-ALREADY-INITIALISED", "warning")
    ]


def test_guard_cvd_changed_after_init(monkeypatch: pytest.MonkeyPatch) -> None:
    # CUDA initialised while CUDA_VISIBLE_DEVICES was "0,1"; the script then set it to "1".
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(True, [A100_0, A100_1]))
    monkeypatch.setattr(api, "CVD_AT_IMPORT", "0,1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    with pytest.raises(GpuConfigError) as info:
        guard(snapshot=load_fixture("a100x8"), visible="1", env={})
    codes = [f.code for f in info.value.report.findings]
    assert "VIS-CVD-CHANGED" in codes
    assert "API-CUDA-ALREADY-INITIALISED" in codes


def test_guard_never_imports_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    guard(snapshot=load_fixture("a100x8"), env={})
    assert "torch" not in sys.modules


def test_guard_after_init_on_a_mig_node_joins_mig_uuids(monkeypatch: pytest.MonkeyPatch) -> None:
    # torch reports a MIG device's UUID without its "MIG-" prefix; it is the same device.
    snap = load_fixture("a100_mig")
    (device,) = guard(snapshot=snap, env={}).resolution.devices
    assert device.mig_uuid is not None
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(True, [device.mig_uuid[4:]]))
    report = guard(snapshot=snap, env={})
    assert [(f.code, f.severity) for f in report.findings if f.code.startswith("API-")] == [
        ("API-CUDA-ALREADY-INITIALISED", "warning")
    ]


def test_cvd_at_import_is_captured_by_the_package_not_the_lazy_api() -> None:
    import subprocess

    code = (
        "import os, gpudiag; os.environ['CUDA_VISIBLE_DEVICES'] = '2,3'; "
        "import gpudiag.api as a; print(a.CVD_AT_IMPORT)"
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "0,1"
