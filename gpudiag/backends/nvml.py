"""NVML backend: per-GPU facts through ``pynvml`` (the ``nvidia-ml-py`` package).

Failures are isolated like gpustat's ``core.py`` does: an NVML init failure
makes the whole source unavailable with its reason; a failing field on one GPU
records its reason in ``Gpu.errors`` and leaves that field None; a GPU lost
mid-query (``NVMLError_GpuIsLost``, Xid 79) is marked ``lost`` and its other
fields are not queried. Nothing here raises for the hardware's sake.

The module under test is injectable (``nvml=``): the tests pass a fake driven by
snapshot data that raises the real ``pynvml.NVMLError_*`` classes.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import partial
from typing import Any

from gpudiag.backends.nvml_fields import Fields as _Fields
from gpudiag.backends.nvml_fields import GpuLostError as _GpuLostError
from gpudiag.backends.nvml_fields import as_text as _text
from gpudiag.backends.nvml_fields import error_text as _error_text
from gpudiag.backends.nvml_links import collect_gpu_links, collect_pairs
from gpudiag.model import Gpu, GpuPair, GpuProcess, MigDevice, SourceStatus

_MIB = 1024 * 1024

#: ``nvmlDeviceGetComputeMode`` values, named as ``nvidia-smi -q`` prints them.
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}

#: ``nvmlDeviceGetCurrentClocksEventReasons`` bits, named as ``nvidia-smi -q``
#: prints them under "Clocks Event Reasons" (nvml.h ``nvmlClocksEventReason*``).
CLOCK_EVENT_REASONS = (
    (0x1, "Idle"),
    (0x2, "Applications Clocks Setting"),
    (0x4, "SW Power Cap"),
    (0x8, "HW Slowdown"),
    (0x10, "Sync Boost"),
    (0x20, "SW Thermal Slowdown"),
    (0x40, "HW Thermal Slowdown"),
    (0x80, "HW Power Brake Slowdown"),
    (0x100, "Display Clock Setting"),
)


@dataclass(frozen=True)
class NvmlResult:
    """What NVML reported; ``status`` says whether it could be read at all."""

    status: SourceStatus
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    gpus: tuple[Gpu, ...] = ()
    #: Since schema 1.2: NVML's answers about each pair of GPUs (None: not asked).
    gpu_pairs: tuple[GpuPair, ...] | None = None


def _init_failure(nvml: Any, exc: BaseException) -> SourceStatus:
    """Explain an ``nvmlInit`` failure in the user's terms."""
    text = _error_text(exc)
    if isinstance(exc, nvml.NVMLError_LibraryNotFound):
        return SourceStatus(
            "unavailable",
            # Not "no driver": a container without GPU access, or a machine with no
            # NVIDIA GPU, lacks it too (the HOST- findings tell which).
            "NVML library not found (libnvidia-ml.so.1, which the NVIDIA driver installs, "
            "is missing)",
        )
    if isinstance(exc, nvml.NVMLError_DriverNotLoaded):
        return SourceStatus("unavailable", f"NVIDIA driver not loaded ({text})")
    if isinstance(exc, nvml.NVMLError_LibRmVersionMismatch):
        return SourceStatus(
            "error",
            "driver/library version mismatch: the NVML library and the loaded "
            f"kernel module differ, usually after a driver upgrade without reboot ({text})",
        )
    if isinstance(exc, nvml.NVMLError_NoPermission):
        return SourceStatus("error", f"no permission to open the NVIDIA device files ({text})")
    return SourceStatus("error", f"NVML init failed: {text}")


def _cuda_version_text(raw: int) -> str:
    # nvmlSystemGetCudaDriverVersion returns e.g. 12040 for CUDA 12.4.
    return f"{raw // 1000}.{(raw % 1000) // 10}"


def collect_nvml(nvml: Any = None) -> NvmlResult:
    """Query NVML for the driver and every GPU; never raises for NVML errors.

    Args:
        nvml: the pynvml module, or a stand-in with the same API (tests).
    """
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return NvmlResult(
                SourceStatus("unavailable", "nvidia-ml-py is not installed (import pynvml failed)")
            )
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return NvmlResult(_init_failure(nvml, exc))
    try:
        return _collect_initialised(nvml)
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()


def _collect_initialised(nvml: Any) -> NvmlResult:
    top = _Fields(nvml)
    try:
        driver = top.get("driver_version", lambda: _text(nvml.nvmlSystemGetDriverVersion()))
        cuda_raw = top.get("cuda_driver_version", nvml.nvmlSystemGetCudaDriverVersion_v2)
        count = top.get("device_count", nvml.nvmlDeviceGetCount)
    except _GpuLostError:  # not per-GPU calls; treat like any other error
        driver, cuda_raw, count = None, None, None
    if count is None:
        reason = top.errors.get("device_count", "nvmlDeviceGetCount failed")
        return NvmlResult(
            SourceStatus("error", f"NVML could not count GPUs: {reason}"),
            driver_version=driver,
            cuda_driver_version=None if cuda_raw is None else _cuda_version_text(cuda_raw),
        )
    gpus = tuple(_collect_gpu(nvml, i) for i in range(count))
    return NvmlResult(
        SourceStatus("ok"),
        driver_version=driver,
        cuda_driver_version=None if cuda_raw is None else _cuda_version_text(cuda_raw),
        gpus=gpus,
        gpu_pairs=collect_pairs(nvml, [g.nvml_index for g in gpus if not g.lost]),
    )


def _collect_gpu(nvml: Any, nvml_index: int) -> Gpu:
    f = _Fields(nvml)
    values: dict[str, Any] = {}
    lost = False
    try:
        handle = f.get("handle", lambda: nvml.nvmlDeviceGetHandleByIndex(nvml_index))
        if handle is not None:
            _collect_fields(nvml, handle, f, values)
    except _GpuLostError:
        lost = True
    uuid = values.pop("uuid", None)
    if uuid is None and not lost:
        # A GPU whose UUID cannot be read cannot be joined or addressed: treat it
        # as lost rather than invent a key.
        lost = True
    return Gpu(nvml_index=nvml_index, uuid=uuid, lost=lost, errors=f.errors, **values)


def _collect_fields(nvml: Any, h: Any, f: _Fields, v: dict[str, Any]) -> None:
    v["uuid"] = f.get("uuid", lambda: _text(nvml.nvmlDeviceGetUUID(h)))
    v["pci_bus_id"] = f.get("pci_bus_id", lambda: _text(nvml.nvmlDeviceGetPciInfo(h).busId))
    v["name"] = f.get("name", lambda: _text(nvml.nvmlDeviceGetName(h)))
    mem = f.get("memory", lambda: nvml.nvmlDeviceGetMemoryInfo(h))
    if mem is not None:
        v["memory_total_mib"] = int(mem.total) // _MIB
        v["memory_used_mib"] = int(mem.used) // _MIB
    util = f.get("utilization", lambda: nvml.nvmlDeviceGetUtilizationRates(h))
    if util is not None:
        v["utilization_gpu_percent"] = int(util.gpu)
    v["temperature_c"] = f.get(
        "temperature", lambda: int(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))
    )
    power_mw = f.get("power_draw", lambda: nvml.nvmlDeviceGetPowerUsage(h))
    v["power_draw_w"] = None if power_mw is None else power_mw / 1000.0
    limit_mw = f.get("power_limit", lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h))
    v["power_limit_w"] = None if limit_mw is None else limit_mw / 1000.0
    cc = f.get("compute_capability", lambda: nvml.nvmlDeviceGetCudaComputeCapability(h))
    v["compute_capability"] = None if cc is None else f"{cc[0]}.{cc[1]}"
    attrs = f.get("multiprocessor_count", lambda: nvml.nvmlDeviceGetAttributes(h))
    v["multiprocessor_count"] = None if attrs is None else int(attrs.multiprocessorCount)
    mig = f.get("mig_mode", lambda: nvml.nvmlDeviceGetMigMode(h))
    v["mig_enabled"] = None if mig is None else bool(mig[0] == nvml.NVML_DEVICE_MIG_ENABLE)
    if v["mig_enabled"]:
        v["mig_devices"] = _collect_mig(nvml, h, f)
    v["processes"] = _collect_processes(nvml, h, f)
    v["ecc_uncorrectable_volatile"] = f.get(
        "ecc",
        lambda: int(
            nvml.nvmlDeviceGetTotalEccErrors(
                h, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
            )
        ),
    )
    v["ecc_uncorrectable_aggregate"] = f.get(
        "ecc_aggregate",
        lambda: int(
            nvml.nvmlDeviceGetTotalEccErrors(
                h, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_AGGREGATE_ECC
            )
        ),
    )
    pending = f.get("retired_pages", lambda: nvml.nvmlDeviceGetRetiredPagesPendingStatus(h))
    v["retired_pages_pending"] = None if pending is None else pending == nvml.NVML_FEATURE_ENABLED
    remap = f.get("remapped_rows", lambda: nvml.nvmlDeviceGetRemappedRows(h))
    # (corrected rows, uncorrected rows, remap pending, remap failure occurred)
    v["remapped_rows_failure"] = None if remap is None else bool(remap[3])
    mode = f.get("compute_mode", lambda: nvml.nvmlDeviceGetComputeMode(h))
    v["compute_mode"] = None if mode is None else COMPUTE_MODES.get(mode, f"Unknown({mode})")
    persist = f.get("persistence_mode", lambda: nvml.nvmlDeviceGetPersistenceMode(h))
    v["persistence_mode"] = None if persist is None else persist == nvml.NVML_FEATURE_ENABLED
    reasons = f.get("throttle_reasons", lambda: nvml.nvmlDeviceGetCurrentClocksEventReasons(h))
    v["throttle_reasons"] = (
        None if reasons is None else tuple(n for bit, n in CLOCK_EVENT_REASONS if reasons & bit)
    )
    collect_gpu_links(nvml, h, f, v)  # schema 1.2: PCIe, NUMA, NVLink, fabric


def _collect_mig(nvml: Any, h: Any, f: _Fields) -> tuple[MigDevice, ...]:
    slots = f.get("mig_devices", lambda: nvml.nvmlDeviceGetMaxMigDeviceCount(h))
    out = []
    for slot in range(slots or 0):
        try:
            mh = nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, slot)
        except nvml.NVMLError_NotFound:
            continue  # empty slot: fewer instances than the maximum
        except nvml.NVMLError_GpuIsLost:
            f.errors["mig_devices"] = "GPU is lost"
            raise _GpuLostError() from None
        except nvml.NVMLError as exc:
            f.errors["mig_devices"] = _error_text(exc)
            continue
        sub = _Fields(nvml)
        uuid = sub.get("uuid", partial(_uuid_of, nvml, mh))
        if uuid is None:
            f.errors[f"mig_devices[{slot}]"] = sub.errors.get("uuid", "uuid unreadable")
            continue
        mem = sub.get("memory", partial(nvml.nvmlDeviceGetMemoryInfo, mh))
        out.append(
            MigDevice(
                uuid=uuid,
                gpu_instance_id=sub.get("gi", partial(nvml.nvmlDeviceGetGpuInstanceId, mh)),
                compute_instance_id=sub.get("ci", partial(nvml.nvmlDeviceGetComputeInstanceId, mh)),
                memory_total_mib=None if mem is None else int(mem.total) // _MIB,
            )
        )
    return tuple(out)


def _uuid_of(nvml: Any, handle: Any) -> str:
    return _text(nvml.nvmlDeviceGetUUID(handle))


def _collect_processes(nvml: Any, h: Any, f: _Fields) -> tuple[GpuProcess, ...]:
    procs = f.get("processes", lambda: nvml.nvmlDeviceGetComputeRunningProcesses(h))
    out = []
    for p in procs or ():
        used = getattr(p, "usedGpuMemory", None)
        try:
            name: str | None = _text(nvml.nvmlSystemGetProcessName(p.pid))
        except nvml.NVMLError:
            name = None  # the process may have exited, or be in another namespace
        out.append(
            GpuProcess(
                pid=int(p.pid),
                used_memory_mib=None if used is None else int(used) // _MIB,
                name=name,
            )
        )
    return tuple(out)
