"""GPU health and software-compatibility findings, from NVML facts in a snapshot.

Pure. Per-GPU findings are restricted to the physical GPUs the job will see
(the :class:`Resolution`): a sick GPU the job cannot touch is not its problem.
A lost GPU is always reported, because it shifts CUDA's numbering for everyone.

Sources: NVIDIA's NVML reference (``nvmlDeviceGetComputeMode``,
``nvmlDeviceGetTotalEccErrors``, ``nvmlDeviceGetRetiredPagesPendingStatus``,
``nvmlDeviceGetRemappedRows``, ``nvmlDeviceGetCurrentClocksEventReasons``). Software
compatibility (driver, architectures, AMP) is :mod:`gpudiag.core.compat`; it is reported
here, with the GPUs' health.
"""

from __future__ import annotations

from collections.abc import Hashable

from gpudiag.core.compat import amp_findings, arch_findings, driver_findings
from gpudiag.core.compat import parse_cc as parse_cc  # core/precision.py imports it from here
from gpudiag.core.grouping import (
    GpuGroup,
    PerGpu,
    merge_per_gpu,
)
from gpudiag.errors import GpudiagInputError
from gpudiag.findings.texts import BUSY, ECC_ERROR, OUT_OF_MEMORY
from gpudiag.model import Finding, Gpu, Resolution, Severity, Snapshot

#: Clock event reasons (as ``gpudiag.backends.nvml`` names them) that slow a job.
_SLOWDOWN_REASONS = (
    "HW Slowdown",
    "HW Thermal Slowdown",
    "HW Power Brake Slowdown",
    "SW Thermal Slowdown",
)
_POWER_CAP = "SW Power Cap"


def _visible_gpus(snapshot: Snapshot, resolution: Resolution) -> list[Gpu]:
    wanted = {d.nvml_index for d in resolution.devices}
    return [g for g in snapshot.gpus if g.nvml_index in wanted and not g.lost]


def health_findings(
    snapshot: Snapshot, resolution: Resolution, *, amp: str | None
) -> list[Finding]:
    """Health, driver and capability findings for the GPUs the job will see.

    Args:
        snapshot: the machine.
        resolution: the visible devices (per-GPU findings are limited to them).
        amp: ``bf16`` or ``fp16`` when the job uses autocast; None otherwise.

    Raises:
        GpudiagInputError: an ``amp`` other than bf16/fp16.
    """
    if amp is not None and amp not in ("bf16", "fp16"):
        raise GpudiagInputError(f"amp must be bf16 or fp16, not {amp!r}")
    out: list[Finding] = []
    out += _lost(snapshot)
    gpus = _visible_gpus(snapshot, resolution)
    out += merge_per_gpu([f for gpu in gpus for f in _gpu_health(gpu)])
    off = [g for g in gpus if g.persistence_mode is False]
    if off:
        out.append(
            Finding(
                code="HEALTH-PERSISTENCE-OFF",
                severity="info",
                message="Persistence mode is off on "
                + ", ".join(f"physical GPU {g.nvml_index}" for g in off)
                + ": the driver tears the GPU state down when no process uses it, so every "
                "job start pays a second or more of initialisation.",
                fix="sudo nvidia-smi -pm 1 (or run nvidia-persistenced) on the node.",
            )
        )
    out += driver_findings(snapshot)
    out += arch_findings(snapshot, gpus)
    if amp is not None:
        out += amp_findings(amp, gpus, resolution)
    return out


def _lost(snapshot: Snapshot) -> list[Finding]:
    out: list[Finding] = []
    lost = [g for g in snapshot.gpus if g.lost]
    if not lost:
        return out
    alive = [g for g in snapshot.gpus if not g.lost]
    for gpu in lost:
        after = [g.nvml_index for g in alive if g.nvml_index > gpu.nvml_index]
        shift = (
            f" nvidia-smi indices after it no longer match: {', '.join(map(str, after))} "
            "shift down by one in CUDA's numbering."
            if after
            else ""
        )
        out.append(
            Finding(
                code="HEALTH-GPU-LOST",
                severity="error",
                message=f"Physical GPU {gpu.nvml_index} is lost (fallen off the bus, usually Xid "
                "79): "
                f"CUDA enumerates only {len(alive)} of {len(snapshot.gpus)} GPUs.{shift}",
                fix="Drain the node; check dmesg for Xid errors; reset the GPU "
                f"(nvidia-smi -r -i {gpu.nvml_index}) or reboot. Until then address GPUs by "
                "UUID in CUDA_VISIBLE_DEVICES.",
                predicts=None,
                subject=gpu.uuid or f"nvml:{gpu.nvml_index}",
            )
        )
    return out


# Wordings of the per-GPU findings (gpudiag.core.grouping.PerGpu): each renders a
# message and fix for one GPU or a merged group of them.


def _in_use(g: GpuGroup, count: int, procs: str, used: int, free: str) -> tuple[str, str]:
    return (
        f"{g.label} {g.be} in use by {count} other process(es): {procs}, "
        f"{used} MiB in total.{free} The job shares its memory and compute.",
        "Pick idle GPUs with CUDA_VISIBLE_DEVICES, or wait for / stop those processes.",
    )


def _memory_used(g: GpuGroup, used_mib: int, total_mib: int) -> tuple[str, str]:
    return (
        f"{g.label} {g.have} {used_mib} MiB of {total_mib} MiB in use, "
        "by processes NVML does not list here (another container or user).",
        "Pick idle GPUs with CUDA_VISIBLE_DEVICES, or ask who uses this GPU.",
    )


def _ecc_volatile(g: GpuGroup, volatile: int) -> tuple[str, str]:
    return (
        f"{g.label} {g.have} {volatile} uncorrectable ECC error(s) since the last driver "
        "load: kernels touching the bad memory fail, and results may be corrupt.",
        f"Drain the node and reset the GPU (nvidia-smi -r -i {g.ids}); "
        "report it to the admins if errors return.",
    )


def _ecc_aggregate(g: GpuGroup, aggregate: int) -> tuple[str, str]:
    return (
        f"{g.label} {g.have} had {aggregate} uncorrectable ECC error(s) over its lifetime "
        "(none since the last driver load).",
        "Watch it: nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER.",
    )


def _pages_pending(g: GpuGroup) -> tuple[str, str]:
    return (
        f"{g.label} {g.have} memory pages pending retirement: the bad pages stay in use "
        "until the GPU is reset.",
        f"Reset the GPU (nvidia-smi -r -i {g.ids}) or reboot the node.",
    )


def _remap_failure(g: GpuGroup) -> tuple[str, str]:
    return (
        f"{g.label} failed to remap a bad memory row: its memory can no longer be "
        "repaired in the field.",
        "Take the GPU out of service and report it (RMA).",
    )


def _prohibited(g: GpuGroup) -> tuple[str, str]:
    return (
        f"{g.label} {g.be} in compute mode Prohibited: no process may create a CUDA context.",
        f"sudo nvidia-smi -i {g.ids} -c DEFAULT, or use another GPU.",
    )


def _exclusive(g: GpuGroup, mode: str, taken: bool) -> tuple[str, str]:
    return (
        f"{g.label} {g.be} in compute mode {mode}: only one process may use it"
        + (
            ", and another process already does."
            if taken
            else "; a second process (another rank, a DataLoader worker touching "
            "CUDA, another user) fails."
        ),
        f"Use one process per GPU, or sudo nvidia-smi -i {g.ids} -c DEFAULT.",
    )


def _throttled(g: GpuGroup, slow: str, temperature_c: object) -> tuple[str, str]:
    return (
        f"{g.label} clocks are throttled now: {slow}"
        + (f" (temperature {temperature_c} C)" if temperature_c else "")
        + ". Timings and throughput will be lower than expected.",
        "Check cooling, power delivery and nvidia-smi -q -d PERFORMANCE; move the job "
        "to another GPU if it persists.",
    )


def _power_cap(g: GpuGroup, power_limit_w: float | None) -> tuple[str, str]:
    return (
        f"{g.label} {g.be} at the software power cap"
        + (f" ({power_limit_w:g} W)" if power_limit_w else "")
        + ": clocks are reduced to stay within the power limit.",
        "Normal under full load; if the GPU is idle, check nvidia-smi -q -d POWER.",
    )


def _gpu_health(gpu: Gpu) -> list[PerGpu]:
    out: list[PerGpu] = []
    # This job's own processes (schema 1.4, TOPO-MEMORY-OWN-JOB) are not "other" ones.
    others = [p for p in gpu.processes if p.this_job is not True]
    if others:
        used = sum(p.used_memory_mib or 0 for p in others)
        procs = ", ".join(
            ("pid redacted" if p.pid is None else f"pid {p.pid}")
            + (f" {p.name}" if p.name else "")
            + (f" ({p.used_memory_mib} MiB)" if p.used_memory_mib is not None else "")
            for p in others
        )
        free = (
            f" {gpu.memory_total_mib - (gpu.memory_used_mib or used)} MiB of "
            f"{gpu.memory_total_mib} MiB free."
            if gpu.memory_total_mib is not None
            else ""
        )
        params: tuple[Hashable, ...] = (len(others), procs, used, free)
        out.append(
            PerGpu(gpu, "HEALTH-FOREIGN-PROCESSES", "warning", _in_use, params, OUT_OF_MEMORY)
        )
    elif (
        not gpu.processes
        and gpu.memory_used_mib is not None
        and gpu.memory_total_mib
        and gpu.memory_used_mib > max(1024, gpu.memory_total_mib // 10)
    ):
        params = (gpu.memory_used_mib, gpu.memory_total_mib)
        out.append(
            PerGpu(gpu, "HEALTH-FOREIGN-PROCESSES", "warning", _memory_used, params, OUT_OF_MEMORY)
        )
    volatile = gpu.ecc_uncorrectable_volatile or 0
    aggregate = gpu.ecc_uncorrectable_aggregate or 0
    if volatile > 0:
        out.append(
            PerGpu(gpu, "HEALTH-ECC-UNCORRECTABLE", "error", _ecc_volatile, (volatile,), ECC_ERROR)
        )
    elif aggregate > 0:
        out.append(PerGpu(gpu, "HEALTH-ECC-UNCORRECTABLE", "warning", _ecc_aggregate, (aggregate,)))
    if gpu.retired_pages_pending:
        out.append(PerGpu(gpu, "HEALTH-RETIRED-PAGES-PENDING", "warning", _pages_pending))
    if gpu.remapped_rows_failure:
        out.append(PerGpu(gpu, "HEALTH-ROW-REMAP-FAILURE", "error", _remap_failure, (), ECC_ERROR))
    mode = gpu.compute_mode
    if mode == "Prohibited":
        out.append(PerGpu(gpu, "HEALTH-COMPUTE-MODE", "error", _prohibited, (), BUSY))
    elif mode in ("Exclusive_Process", "Exclusive_Thread"):
        taken = bool(gpu.processes)
        severity: Severity = "error" if taken else "warning"
        out.append(PerGpu(gpu, "HEALTH-COMPUTE-MODE", severity, _exclusive, (mode, taken), BUSY))
    reasons = gpu.throttle_reasons or ()
    slow = [r for r in reasons if r in _SLOWDOWN_REASONS]
    if slow:
        params = (", ".join(slow), gpu.temperature_c)
        out.append(PerGpu(gpu, "HEALTH-THROTTLE", "warning", _throttled, params))
    elif _POWER_CAP in reasons:
        out.append(PerGpu(gpu, "HEALTH-THROTTLE", "info", _power_cap, (gpu.power_limit_w,)))
    return out
