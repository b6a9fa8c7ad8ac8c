"""GPU health and software-compatibility findings, from NVML facts in a snapshot.

Pure. Per-GPU findings are restricted to the physical GPUs the job will see
(the :class:`Resolution`): a sick GPU the job cannot touch is not its problem.
A lost GPU is always reported, because it shifts CUDA's numbering for everyone.

Sources: NVIDIA's NVML reference (``nvmlDeviceGetComputeMode``,
``nvmlDeviceGetTotalEccErrors``, ``nvmlDeviceGetRetiredPagesPendingStatus``,
``nvmlDeviceGetRemappedRows``, ``nvmlDeviceGetCurrentClocksEventReasons``),
NVIDIA's "CUDA Compatibility" guide (minor-version compatibility, PTX JIT) and
the CUDA C Programming Guide ("Binary Compatibility": a cubin for ``sm_XY``
runs on ``X.Z`` with ``Z >= Y``; ``sm_XYa`` only on ``X.Y``; PTX JIT-compiles
for any later capability). torch's own checks are ``torch/cuda/__init__.py``
(``_check_capability``, ``_check_cubins``, ``is_bf16_supported``) and
``torch/amp/autocast_mode.py``.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence

from gpudiag.core.grouping import (
    GpuGroup,
    PerGpu,
    group_by,
    group_label,
    group_subject,
    merge_per_gpu,
)
from gpudiag.errors import GpudiagInputError
from gpudiag.findings.texts import (
    ARCH_INCOMPATIBLE,
    AUTOCAST_DISABLED,
    BF16_UNSUPPORTED,
    BUSY,
    ECC_ERROR,
    INSUFFICIENT_DRIVER,
    NO_KERNEL,
    OUT_OF_MEMORY,
    PTX_UNSUPPORTED_TOOLCHAIN,
)
from gpudiag.model import Finding, Gpu, Resolution, Severity, Snapshot

CODES: dict[str, str] = {
    "HEALTH-GPU-LOST": "a GPU has fallen off the bus; CUDA numbering shifts",
    "HEALTH-FOREIGN-PROCESSES": "GPU memory held by other processes",
    "HEALTH-ECC-UNCORRECTABLE": "uncorrectable ECC errors on a GPU",
    "HEALTH-RETIRED-PAGES-PENDING": "memory pages wait for retirement until a GPU reset",
    "HEALTH-ROW-REMAP-FAILURE": "row remapping failed: the GPU's memory is unreliable",
    "HEALTH-COMPUTE-MODE": "compute mode Exclusive_Process or Prohibited",
    "HEALTH-THROTTLE": "clocks are being throttled",
    "HEALTH-PERSISTENCE-OFF": "persistence mode is off",
    "HEALTH-DRIVER-TOO-OLD": "torch's CUDA runtime is newer than the driver supports",
    "HEALTH-ARCH-UNSUPPORTED": "torch has no kernels for a GPU's compute capability",
    "HEALTH-ARCH-PTX-JIT": "torch has only PTX for a GPU: kernels are JIT-compiled",
    "HEALTH-AMP-BF16": "bf16 autocast on a GPU without native bf16 (below 8.0)",
    "HEALTH-AMP-FP16": "fp16 autocast on a GPU without fast fp16 (no tensor cores)",
    "HEALTH-AMP-NO-GPU": "autocast on CUDA with no GPU: torch disables it",
}

#: Clock event reasons (as ``gpudiag.backends.nvml`` names them) that slow a job.
_SLOWDOWN_REASONS = (
    "HW Slowdown",
    "HW Thermal Slowdown",
    "HW Power Brake Slowdown",
    "SW Thermal Slowdown",
)
_POWER_CAP = "SW Power Cap"

#: Jetson (integrated) GPUs: binaries are not shared with discrete GPUs of the
#: same major version (torch's DEVICE_REQUIREMENT excludes them likewise).
_INTEGRATED_CC = {53, 62, 72, 87}
#: torch's DEVICE_REQUIREMENT: sm_101 code runs on 11.0 (Thor's renumbering).
_EXTRA_TARGETS = {101: {110}}

_ARCH_RE = re.compile(r"^(sm|compute)_(\d+)([af]?)$")


def parse_cc(text: str | None) -> int | None:
    """``"8.6"`` → 86, ``"10.0"`` → 100; None when unknown or malformed."""
    if not text:
        return None
    match = re.fullmatch(r"\s*(\d+)\.(\d)\s*", text)
    if match is None:
        return None
    return int(match.group(1)) * 10 + int(match.group(2))


def arch_runs_on(entry: str, device_cc: int) -> str | None:
    """How one ``torch.cuda.get_arch_list()`` entry serves a device.

    Returns ``"cubin"`` (native code runs), ``"ptx"`` (the driver can JIT it) or
    None. ``sm_XY`` runs on the same major with minor >= Y; ``sm_XYa`` only on
    X.Y; ``sm_XYf`` on the family (same major, minor >= Y); ``compute_XY`` is PTX
    for any capability >= X.Y (``compute_XYa`` only X.Y).
    """
    match = _ARCH_RE.match(entry.strip().lower())
    if match is None:
        return None
    kind, number, suffix = match.group(1), int(match.group(2)), match.group(3)
    if kind == "compute":
        ok = device_cc == number if suffix == "a" else device_cc >= number
        return "ptx" if ok else None
    if device_cc in _EXTRA_TARGETS.get(number, set()):
        return "cubin"
    if suffix == "a" or number in _INTEGRATED_CC or device_cc in _INTEGRATED_CC:
        return "cubin" if device_cc == number else None
    same_major = device_cc // 10 == number // 10 and device_cc % 10 >= number % 10
    return "cubin" if same_major else None


def _version(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    match = re.match(r"\s*(\d+)\.(\d+)", text)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


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
        raise GpudiagInputError(f"--amp must be bf16 or fp16, not {amp!r}")
    out: list[Finding] = []
    out += _lost(snapshot)
    gpus = _visible_gpus(snapshot, resolution)
    out += merge_per_gpu([f for gpu in gpus for f in _gpu_health(gpu)])
    off = [g for g in gpus if g.persistence_mode is False]
    if off:
        out.append(
            Finding(
                "HEALTH-PERSISTENCE-OFF",
                "info",
                "Persistence mode is off on "
                + ", ".join(f"physical GPU {g.nvml_index}" for g in off)
                + ": the driver tears the GPU state down when no process uses it, so every "
                "job start pays a second or more of initialisation.",
                "sudo nvidia-smi -pm 1 (or run nvidia-persistenced) on the node.",
            )
        )
    out += _driver(snapshot)
    out += _arch(snapshot, gpus)
    if amp is not None:
        out += _amp(amp, gpus, resolution)
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
                "HEALTH-GPU-LOST",
                "error",
                f"Physical GPU {gpu.nvml_index} is lost (fallen off the bus, usually Xid 79): "
                f"CUDA enumerates only {len(alive)} of {len(snapshot.gpus)} GPUs.{shift}",
                "Drain the node; check dmesg for Xid errors; reset the GPU "
                f"(nvidia-smi -r -i {gpu.nvml_index}) or reboot. Until then address GPUs by "
                "UUID in CUDA_VISIBLE_DEVICES.",
                None,
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
    if gpu.processes:
        used = sum(p.used_memory_mib or 0 for p in gpu.processes)
        procs = ", ".join(
            ("pid redacted" if p.pid is None else f"pid {p.pid}")
            + (f" {p.name}" if p.name else "")
            + (f" ({p.used_memory_mib} MiB)" if p.used_memory_mib is not None else "")
            for p in gpu.processes
        )
        free = (
            f" {gpu.memory_total_mib - (gpu.memory_used_mib or used)} MiB of "
            f"{gpu.memory_total_mib} MiB free."
            if gpu.memory_total_mib is not None
            else ""
        )
        params: tuple[Hashable, ...] = (len(gpu.processes), procs, used, free)
        out.append(
            PerGpu(gpu, "HEALTH-FOREIGN-PROCESSES", "warning", _in_use, params, OUT_OF_MEMORY)
        )
    elif (
        gpu.memory_used_mib is not None
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


def _driver(snapshot: Snapshot) -> list[Finding]:
    info = snapshot.torch
    if info is None or info.cpu_only:
        return []
    runtime = _version(info.cuda_version)
    driver = _version(snapshot.cuda_driver_version)
    if runtime is None or driver is None or runtime <= driver:
        return []
    where = (
        f"torch {info.version or '?'} is built with CUDA {info.cuda_version}, but driver "
        f"{snapshot.driver_version or '?'} supports CUDA up to {snapshot.cuda_driver_version}"
    )
    if runtime[0] > driver[0]:
        return [
            Finding(
                "HEALTH-DRIVER-TOO-OLD",
                "error",
                f"{where}: a newer major CUDA version needs a newer driver, so torch finds no "
                "usable GPU (torch.cuda.is_available() is False).",
                f"Upgrade the NVIDIA driver to one supporting CUDA {info.cuda_version}, or "
                f"install a torch build for CUDA {snapshot.cuda_driver_version} or older.",
                INSUFFICIENT_DRIVER,
            )
        ]
    # Same major: CUDA's minor-version compatibility (CUDA Compatibility guide) runs
    # the binaries, but PTX newer than the driver cannot be JIT-compiled.
    return [
        Finding(
            "HEALTH-DRIVER-TOO-OLD",
            "warning",
            f"{where}: CUDA minor-version compatibility runs torch's prebuilt kernels, but "
            "anything JIT-compiled from PTX (torch.compile/Triton, extensions, GPUs served "
            "only by PTX) can fail.",
            f"Upgrade the driver to one supporting CUDA {info.cuda_version}, or use a torch "
            f"build for CUDA {snapshot.cuda_driver_version}.",
            PTX_UNSUPPORTED_TOOLCHAIN,
        )
    ]


def _arch(snapshot: Snapshot, gpus: Sequence[Gpu]) -> list[Finding]:
    info = snapshot.torch
    if info is None or info.cpu_only or not info.arch_list:
        return []
    out: list[Finding] = []
    arch_text = " ".join(info.arch_list)
    served: list[tuple[Gpu, int, str]] = []
    for gpu in gpus:
        cc = parse_cc(gpu.compute_capability)
        if cc is None:
            continue
        kinds = {arch_runs_on(a, cc) for a in info.arch_list}
        if "cubin" in kinds:
            continue
        served.append((gpu, cc, "ptx" if "ptx" in kinds else "none"))
    # One finding per (capability, kind, model), listing every GPU it applies to.
    groups: dict[tuple[int, str, str | None], list[Gpu]] = {}
    for gpu, cc, kind in served:
        groups.setdefault((cc, kind, gpu.name), []).append(gpu)
    for (cc, kind, model), members in groups.items():
        label = group_label(members)
        first = members[0]
        name = model or "this GPU"
        if kind == "ptx":
            out.append(
                Finding(
                    "HEALTH-ARCH-PTX-JIT",
                    "warning",
                    f"torch {info.version or '?'} ships no native kernels for {label} "
                    f"(compute capability {first.compute_capability}, sm_{cc}); its PTX "
                    f"({arch_text}) is JIT-compiled by the driver on first use: minutes of "
                    "start-up, slower kernels.",
                    f"Install a torch build whose arch list includes sm_{cc} (or "
                    f"sm_{cc // 10}x), or keep the JIT cache (CUDA_CACHE_MAXSIZE) warm.",
                    None,
                    subject=group_subject(members),
                )
            )
            continue
        out.append(
            Finding(
                "HEALTH-ARCH-UNSUPPORTED",
                "error",
                f"torch {info.version or '?'} has no kernels for {label}: compute "
                f"capability {first.compute_capability} (sm_{cc}) is not covered by its arch "
                f"list ({arch_text}).",
                f"Install a torch build that supports sm_{cc} (see "
                "https://pytorch.org/get-started/locally/), or use other GPUs.",
                f"{ARCH_INCOMPATIBLE.format(name=name, cc=cc)} Then {NO_KERNEL}",
                subject=group_subject(members),
            )
        )
    return out


def _amp(amp: str, gpus: Sequence[Gpu], resolution: Resolution) -> list[Finding]:
    if not resolution.devices:
        return [
            Finding(
                "HEALTH-AMP-NO-GPU",
                "warning",
                f"--amp {amp}: torch.autocast('cuda') with no visible GPU does nothing; torch "
                "warns and disables autocast.",
                "Make a GPU visible, or use torch.autocast('cpu', dtype=torch.bfloat16) on "
                "purpose.",
                AUTOCAST_DISABLED,
            )
        ]
    out: list[Finding] = []
    known = [(g, cc) for g in gpus if (cc := parse_cc(g.compute_capability)) is not None]
    needs = 80 if amp == "bf16" else 70
    slow = [g for g, cc in known if cc < needs]
    for members in group_by(slow, lambda g: g.compute_capability):
        label = group_label(members)
        cc_text = members[0].compute_capability
        these = "this GPU" if len(members) == 1 else "these GPUs"
        has = "has" if len(members) == 1 else "have"
        if amp == "bf16":
            out.append(
                Finding(
                    "HEALTH-AMP-BF16",
                    "warning",
                    f"{label} {has} compute capability {cc_text}: no native "
                    "bfloat16 (needs 8.0+). Recent torch emulates it slowly (cuDNN has no bf16 "
                    "convolutions there); older torch refuses bf16 autocast.",
                    "Use --amp fp16 (torch.autocast('cuda', dtype=torch.float16) with a "
                    f"GradScaler) on {these}, or run on compute capability 8.0+ GPUs.",
                    BF16_UNSUPPORTED,
                    subject=group_subject(members),
                )
            )
        else:
            out.append(
                Finding(
                    "HEALTH-AMP-FP16",
                    "warning",
                    f"{label} {has} compute capability {cc_text}: no tensor "
                    "cores (need 7.0+), so fp16 autocast brings little or no speed-up"
                    + (
                        " and fp16 arithmetic runs at a small fraction of fp32 speed"
                        if parse_cc(cc_text) == 61
                        else ""
                    )
                    + ".",
                    f"Train in fp32 on {these}, or use compute capability 7.0+ GPUs for AMP.",
                    None,
                    subject=group_subject(members),
                )
            )
    return out
