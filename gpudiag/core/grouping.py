"""One finding for many GPUs: labels, subjects and merging of per-GPU findings.

Issue 13: the bf16 warning on an 8-GPU V100 node was printed 8 times. A finding
that says the same about several GPUs is reported once and lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpudiag.model import Finding, Gpu, Severity, short_uuid


def gpu_label(gpu: Gpu) -> str:
    """``physical GPU 1 (NVIDIA A100-SXM4-80GB, GPU-3ceaaf30-8142-…)`` with the full UUID."""
    return f"physical GPU {gpu.nvml_index} ({gpu.name or 'unknown model'}, {gpu.uuid})"


def group_label(gpus: Sequence[Gpu]) -> str:
    """One GPU as :func:`gpu_label`; several as one phrase listing them all.

    ``physical GPUs 0, 1, 2 (3x Tesla V100-SXM2-32GB: GPU-aaaa…, GPU-bbbb…, GPU-cccc…)``:
    a finding that is the same for many GPUs is reported once (issue: the bf16
    warning on an 8-GPU V100 node was printed 8 times).
    """
    if len(gpus) == 1:
        return gpu_label(gpus[0])
    names = sorted({g.name or "unknown model" for g in gpus})
    model = f"{len(gpus)}x {names[0]}" if len(names) == 1 else ", ".join(names)
    uuids = ", ".join(short_uuid(g.uuid) for g in gpus)
    return f"physical GPUs {', '.join(str(g.nvml_index) for g in gpus)} ({model}: {uuids})"


def group_subject(gpus: Sequence[Gpu]) -> str | None:
    """The subject of a grouped finding: the UUID, or the UUIDs joined by commas."""
    return ",".join(g.uuid or f"nvml:{g.nvml_index}" for g in gpus) or None


def group_by(gpus: Sequence[Gpu], key: Callable[[Gpu], object]) -> list[list[Gpu]]:
    """GPUs with the same key, in the order their first member appears."""
    groups: dict[object, list[Gpu]] = {}
    for gpu in gpus:
        groups.setdefault(key(gpu), []).append(gpu)
    return list(groups.values())


def merge_same(items: Sequence[tuple[Gpu, Finding]]) -> list[Finding]:
    """Per-GPU findings that say the same thing about several GPUs become one.

    Two findings are the same when they differ only in the GPU's label (and the
    ``-i N`` of an nvidia-smi command in the fix); the merged one lists the GPUs
    (``nvidia-smi -i`` takes a comma-separated list).
    """
    groups: dict[tuple[str, Severity, str, str, str | None], list[tuple[Gpu, Finding]]] = {}
    for gpu, f in items:
        key = (
            f.code,
            f.severity,
            f.message.replace(gpu_label(gpu), "\0"),
            (f.fix or "").replace(f"-i {gpu.nvml_index}", "-i \0"),
            f.predicts,
        )
        groups.setdefault(key, []).append((gpu, f))
    out: list[Finding] = []
    for (code, severity, message, fix, predicts), members in groups.items():
        if len(members) == 1:
            out.append(members[0][1])
            continue
        gpus = [g for g, _ in members]
        label = group_label(gpus)
        for singular, plural in ((" is ", " are "), (" has ", " have ")):
            message = message.replace("\0" + singular, label + plural)
        ids = ",".join(str(g.nvml_index) for g in gpus)
        out.append(
            Finding(
                code,
                severity,
                message.replace("\0", label),
                fix.replace("\0", ids) or None,
                predicts,
                subject=group_subject(gpus),
            )
        )
    return out
