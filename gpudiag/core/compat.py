"""Can the installed torch run on the GPUs the job will see, with this driver?

Pure: findings from the snapshot's torch facts (CUDA version, compiled architectures) and
NVML's (driver, compute capabilities). Sources: NVIDIA's "CUDA Compatibility" guide
(minor-version compatibility, PTX JIT) and the CUDA C Programming Guide ("Binary
Compatibility": a cubin for ``sm_XY`` runs on ``X.Z`` with ``Z >= Y``; ``sm_XYa`` only on
``X.Y``; PTX JIT-compiles for any later capability). torch's own checks are
``torch/cuda/__init__.py`` (``_check_capability``, ``_check_cubins``, ``is_bf16_supported``)
and ``torch/amp/autocast_mode.py``. :mod:`gpudiag.core.health` reports them with the GPUs'
health.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpudiag.core.grouping import group_by, group_label, group_subject
from gpudiag.findings.texts import (
    ARCH_INCOMPATIBLE,
    AUTOCAST_DISABLED,
    BF16_UNSUPPORTED,
    INSUFFICIENT_DRIVER,
    NO_KERNEL,
    PTX_UNSUPPORTED_TOOLCHAIN,
)
from gpudiag.model import Finding, Gpu, Resolution, Snapshot

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


def driver_findings(snapshot: Snapshot) -> list[Finding]:
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
    # Minor-version compatibility exists from CUDA 11 on (NVIDIA's "CUDA Compatibility"
    # guide, "Minor Version Compatibility"): a CUDA 10.2 torch on a 10.1 driver fails
    # like a newer major does (issue 20: it was called compatible).
    if runtime[0] > driver[0] or runtime[0] < 11:
        return [
            Finding(
                code="HEALTH-DRIVER-TOO-OLD",
                severity="error",
                message=f"{where}: "
                + (
                    "a newer major CUDA version needs a newer driver"
                    if runtime[0] > driver[0]
                    else f"CUDA {runtime[0]} has no minor-version compatibility (CUDA 11 "
                    "brought it)"
                )
                + ", so torch finds no usable GPU (torch.cuda.is_available() is False).",
                fix=f"Upgrade the NVIDIA driver to one supporting CUDA {info.cuda_version}, or "
                f"install a torch build for CUDA {snapshot.cuda_driver_version} or older.",
                predicts=INSUFFICIENT_DRIVER,
            )
        ]
    # Same major: CUDA's minor-version compatibility (CUDA Compatibility guide) runs
    # the binaries, but PTX newer than the driver cannot be JIT-compiled.
    return [
        Finding(
            code="HEALTH-DRIVER-TOO-OLD",
            severity="warning",
            message=f"{where}: CUDA minor-version compatibility runs torch's prebuilt kernels, but "
            "anything JIT-compiled from PTX (torch.compile/Triton, extensions, GPUs served "
            "only by PTX) can fail.",
            fix=f"Upgrade the driver to one supporting CUDA {info.cuda_version}, or use a torch "
            f"build for CUDA {snapshot.cuda_driver_version}.",
            predicts=PTX_UNSUPPORTED_TOOLCHAIN,
        )
    ]


def arch_findings(snapshot: Snapshot, gpus: Sequence[Gpu]) -> list[Finding]:
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
                    code="HEALTH-ARCH-PTX-JIT",
                    severity="warning",
                    message=f"torch {info.version or '?'} ships no native kernels for {label} "
                    f"(compute capability {first.compute_capability}, sm_{cc}); its PTX "
                    f"({arch_text}) is JIT-compiled by the driver on first use: minutes of "
                    "start-up, slower kernels.",
                    fix=f"Install a torch build whose arch list includes sm_{cc} (or "
                    f"sm_{cc // 10}x), or keep the JIT cache (CUDA_CACHE_MAXSIZE) warm.",
                    predicts=None,
                    subject=group_subject(members),
                )
            )
            continue
        out.append(
            Finding(
                code="HEALTH-ARCH-UNSUPPORTED",
                severity="error",
                message=f"torch {info.version or '?'} has no kernels for {label}: compute "
                f"capability {first.compute_capability} (sm_{cc}) is not covered by its arch "
                f"list ({arch_text}).",
                fix=f"Install a torch build that supports sm_{cc} (see "
                "https://pytorch.org/get-started/locally/), or use other GPUs.",
                predicts=f"{ARCH_INCOMPATIBLE.format(name=name, cc=cc)} Then {NO_KERNEL}",
                subject=group_subject(members),
            )
        )
    return out


def amp_findings(amp: str, gpus: Sequence[Gpu], resolution: Resolution) -> list[Finding]:
    if not resolution.devices:
        return [
            Finding(
                code="HEALTH-AMP-NO-GPU",
                severity="warning",
                message=f"--amp {amp}: torch.autocast('cuda') with no visible GPU does nothing; "
                "torch "
                "warns and disables autocast.",
                fix="Make a GPU visible, or use torch.autocast('cpu', dtype=torch.bfloat16) on "
                "purpose.",
                predicts=AUTOCAST_DISABLED,
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
                    code="HEALTH-AMP-BF16",
                    severity="warning",
                    message=f"{label} {has} compute capability {cc_text}: no native "
                    "bfloat16 (needs 8.0+). Recent torch emulates it slowly (cuDNN has no bf16 "
                    "convolutions there); older torch refuses bf16 autocast.",
                    fix="Use --amp fp16 (torch.autocast('cuda', dtype=torch.float16) with a "
                    f"GradScaler) on {these}, or run on compute capability 8.0+ GPUs.",
                    predicts=BF16_UNSUPPORTED,
                    subject=group_subject(members),
                )
            )
        else:
            out.append(
                Finding(
                    code="HEALTH-AMP-FP16",
                    severity="warning",
                    message=f"{label} {has} compute capability {cc_text}: no tensor "
                    "cores (need 7.0+), so fp16 autocast brings little or no speed-up"
                    + (
                        " and fp16 arithmetic runs at a small fraction of fp32 speed"
                        if parse_cc(cc_text) == 61
                        else ""
                    )
                    + ".",
                    fix=f"Train in fp32 on {these}, or use compute capability 7.0+ GPUs for AMP.",
                    predicts=None,
                    subject=group_subject(members),
                )
            )
    return out
