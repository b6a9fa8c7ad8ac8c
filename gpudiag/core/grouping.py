"""One finding for many GPUs: labels, subjects and merging of per-GPU findings.

Issue 13: the bf16 warning on an 8-GPU V100 node was printed 8 times. A finding
that says the same about several GPUs is reported once and lists them.

Issue 16: the merge works on structured data, not on rendered text. A rule
describes a per-GPU finding as a :class:`PerGpu`: its code, severity, a wording
function and the parameters that wording shows besides the GPU. Findings with the
same code, severity, wording, parameters and ``predicts`` merge; the wording is
then rendered once for the :class:`GpuGroup` (label, ``is``/``are``, the ids for
``nvidia-smi -i``). No GPU label is ever searched for in a message.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

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


@dataclass(frozen=True)
class GpuGroup:
    """The GPUs one finding is about, with the words a wording needs for them."""

    gpus: tuple[Gpu, ...]

    @property
    def label(self) -> str:
        """:func:`group_label` of the GPUs."""
        return group_label(self.gpus)

    @property
    def ids(self) -> str:
        """The nvidia-smi indices for ``nvidia-smi -i`` (which takes a comma list)."""
        return ",".join(str(g.nvml_index) for g in self.gpus)

    @property
    def be(self) -> str:
        """``is`` for one GPU, ``are`` for several."""
        return "is" if len(self.gpus) == 1 else "are"

    @property
    def have(self) -> str:
        """``has`` for one GPU, ``have`` for several."""
        return "has" if len(self.gpus) == 1 else "have"

    @property
    def subject(self) -> str | None:
        """One GPU's UUID; several GPUs' :func:`group_subject`."""
        if len(self.gpus) == 1:
            return self.gpus[0].uuid
        return group_subject(self.gpus)


#: A finding's wording for a group of GPUs and its parameters: ``(message, fix)``.
#: It must read nothing of the GPUs but what :class:`GpuGroup` offers, so that every
#: GPU of a merged group is described alike.
Wording = Callable[..., tuple[str, str | None]]


@dataclass(frozen=True)
class PerGpu:
    """One GPU's finding before it is worded.

    Attributes:
        gpu: the GPU it is about.
        code, severity, predicts: as in :class:`~gpudiag.model.Finding`.
        wording: ``wording(group, *params) -> (message, fix)``; its identity is the
            template key of the merge.
        params: what the wording shows besides the GPUs (counts, modes, process
            lists); hashable. GPUs with different parameters are not merged.
    """

    gpu: Gpu
    code: str
    severity: Severity
    wording: Wording
    params: tuple[Hashable, ...] = ()
    predicts: str | None = None

    def key(self) -> tuple[object, ...]:
        """What two GPUs' findings must share to be merged into one."""
        return (self.code, self.severity, self.wording, self.params, self.predicts)


def merge_per_gpu(items: Sequence[PerGpu]) -> list[Finding]:
    """Per-GPU findings that say the same thing about several GPUs become one.

    Groups by :meth:`PerGpu.key`, in the order each group's first member appears,
    and renders each group's wording once, naming all its GPUs.
    """
    groups: dict[tuple[object, ...], list[PerGpu]] = {}
    for item in items:
        groups.setdefault(item.key(), []).append(item)
    out: list[Finding] = []
    for members in groups.values():
        first = members[0]
        group = GpuGroup(tuple(m.gpu for m in members))
        message, fix = first.wording(group, *first.params)
        out.append(
            Finding(
                code=first.code,
                severity=first.severity,
                message=message,
                fix=fix,
                predicts=first.predicts,
                subject=group.subject,
            )
        )
    return out
