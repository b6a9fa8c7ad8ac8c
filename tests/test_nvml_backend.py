"""The NVML backend against the fake NVML (real pynvml error classes) and for real."""

from __future__ import annotations

import ctypes
import json

import pynvml
import pytest

from gpudiag.backends.nvml import collect_nvml
from gpudiag.snapshot import snapshot_from_json

from .conftest import fixture_path
from .fake_nvml import FakeNvml

GPU_FIXTURES = ["a100x8", "mixed4", "a100_mig", "gpu_lost"]


def _raw(name: str) -> dict:
    return json.loads(fixture_path(name).read_text())


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_backend_reproduces_the_snapshot_gpus(name: str) -> None:
    raw = _raw(name)
    fake = FakeNvml(raw)
    result = collect_nvml(fake)
    expected = snapshot_from_json(raw)
    assert result.status.status == "ok"
    assert result.driver_version == expected.driver_version
    assert result.cuda_driver_version == expected.cuda_driver_version
    assert result.gpus == expected.gpus
    assert fake.shutdown_calls == 1 and not fake.initialised


def test_mig_instances_are_read_with_their_ids() -> None:
    result = collect_nvml(FakeNvml(_raw("a100_mig")))
    gpu0 = result.gpus[0]
    assert gpu0.mig_enabled is True
    assert [
        (m.gpu_instance_id, m.compute_instance_id, m.memory_total_mib) for m in gpu0.mig_devices
    ] == [
        (1, 0, 19968),
        (7, 0, 4864),
        (8, 0, 4864),
        (9, 0, 4864),
    ]
    assert all(m.uuid.startswith("MIG-") for m in gpu0.mig_devices)
    assert result.gpus[1].mig_devices == ()


@pytest.mark.parametrize(
    ("code", "status", "words"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "unavailable", "NVML library not found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "unavailable", "driver not loaded"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "error", "driver/library version mismatch"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "error", "no permission"),
        (pynvml.NVML_ERROR_UNKNOWN, "error", "NVML init failed"),
    ],
)
def test_init_failures_become_a_source_status(code: int, status: str, words: str) -> None:
    result = collect_nvml(FakeNvml(_raw("a100x8"), init_error=code))
    assert result.status.status == status
    assert words in (result.status.reason or "")
    assert result.gpus == ()


def test_gpu_lost_mid_query_is_isolated_to_that_gpu() -> None:
    # GPU 1 answers three calls (uuid, pci, name), then falls off the bus.
    result = collect_nvml(FakeNvml(_raw("a100x8"), lost=[1], lost_after=3))
    assert result.status.status == "ok"
    lost = result.gpus[1]
    assert lost.lost is True
    assert lost.uuid is not None and lost.name == "NVIDIA A100-SXM4-80GB"
    assert lost.memory_total_mib is None
    assert lost.errors == {"memory": "GPU is lost"}
    # Its neighbours are complete.
    assert [g.lost for g in result.gpus] == [False, True] + [False] * 6
    assert result.gpus[2].memory_total_mib == 81920


def test_gpu_lost_at_handle_has_no_uuid() -> None:
    result = collect_nvml(FakeNvml(_raw("a100x8"), lost=[5]))
    assert result.gpus[5].lost is True
    assert result.gpus[5].uuid is None
    assert result.gpus[5].errors == {"handle": "GPU is lost"}


def test_unsupported_functions_leave_fields_none_with_the_reason() -> None:
    fake = FakeNvml(
        _raw("a100x8"),
        unsupported=[
            "nvmlDeviceGetAttributes",
            "nvmlDeviceGetRemappedRows",
            "nvmlDeviceGetPowerUsage",
        ],
    )
    gpu = collect_nvml(fake).gpus[0]
    assert gpu.multiprocessor_count is None
    assert gpu.remapped_rows_failure is None
    assert gpu.power_draw_w is None
    assert gpu.errors == {
        "multiprocessor_count": "Not Supported",
        "remapped_rows": "Not Supported",
        "power_draw": "Not Supported",
        # Schema 1.2: an A100 has no NVSwitch fabric info (nvmlDeviceGetGpuFabricInfo is
        # Hopper and later), as the fixture recorded.
        "fabric": "Not Supported",
    }
    assert gpu.lost is False
    assert gpu.memory_total_mib == 81920


def test_processes_and_throttle_reasons() -> None:
    raw = _raw("a100x8")
    raw["gpus"][0]["throttle_reasons"] = ["SW Power Cap", "HW Thermal Slowdown"]
    gpu0, _, _, gpu3 = collect_nvml(FakeNvml(raw)).gpus[:4]
    assert gpu0.throttle_reasons == ("SW Power Cap", "HW Thermal Slowdown")
    assert [(p.pid, p.used_memory_mib, p.name) for p in gpu3.processes] == [
        (48213, 30204, "python")
    ]


def test_real_pynvml_on_this_machine_reports_no_driver() -> None:
    # No fake: the real nvidia-ml-py against a machine without libnvidia-ml.
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        pass
    else:
        pytest.skip("this machine has an NVIDIA driver; the no-driver path needs one without")
    result = collect_nvml()
    assert result.status.status == "unavailable"
    assert result.status.reason is not None
    assert result.status.reason.startswith("NVML library not found")
    assert result.gpus == ()


def test_health_reads_the_throttle_names_the_backend_writes() -> None:
    # The snapshot carries nvidia-smi's names; health matches on them.
    from gpudiag.backends.nvml import CLOCK_EVENT_REASONS
    from gpudiag.core import health

    written = {name for _, name in CLOCK_EVENT_REASONS}
    assert set(health._SLOWDOWN_REASONS) | {health._POWER_CAP} <= written
