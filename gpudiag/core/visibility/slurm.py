"""Slurm's GPU allocation versus what ``CUDA_VISIBLE_DEVICES`` exposes."""

from __future__ import annotations

from collections.abc import Mapping

from gpudiag.core.visibility.entries import C_SPACE
from gpudiag.core.visibility.entries import quote_value as _q
from gpudiag.model import Finding, Resolution, Snapshot, short_uuid
from gpudiag.parsing import int_or_none


def slurm_binds_per_task(env: Mapping[str, str]) -> bool:
    """Slurm gives each task its own GPUs: ``--gpus-per-task`` or ``--gpu-bind``.

    srun(1), OUTPUT ENVIRONMENT VARIABLES: ``SLURM_GPUS_PER_TASK`` is set only with
    ``--gpus-per-task``, ``SLURM_GPU_BIND`` only with ``--gpu-bind``. Each task's
    ``CUDA_VISIBLE_DEVICES`` is then its own share of the step's GPUs (issue 19).
    """
    return bool(env.get("SLURM_GPUS_PER_TASK", "").strip() or env.get("SLURM_GPU_BIND", "").strip())


def slurm_findings(
    env: Mapping[str, str], resolution: Resolution, snapshot: Snapshot
) -> list[Finding]:
    """Slurm's GPU allocation versus what ``CUDA_VISIBLE_DEVICES`` exposes.

    ``SLURM_STEP_GPUS`` (else ``SLURM_JOB_GPUS``) lists the allocated GPUs as
    node-wide indices (the gres.conf/NVML numbering) or, with some
    configurations, UUIDs. Under ``ConstrainDevices=yes`` a job sees only its
    GPUs, renumbered from 0, so indices beyond the visible inventory are compared
    by count only.
    """
    name = "SLURM_STEP_GPUS" if env.get("SLURM_STEP_GPUS") else "SLURM_JOB_GPUS"
    value = env.get(name)
    if not value:
        return []
    entries = [e.strip(C_SPACE) for e in value.split(",") if e.strip(C_SPACE)]
    exposed = [d for d in resolution.devices]
    exposed_text = (
        ", ".join(
            f"nvidia-smi {d.nvml_index}" + (f" ({short_uuid(d.mig_uuid)})" if d.mig_uuid else "")
            for d in exposed
        )
        or "none"
    )
    by_uuid = {(g.uuid or "").lower(): g.nvml_index for g in snapshot.gpus if g.uuid is not None}
    migs = {m.uuid.lower(): g.nvml_index for g in snapshot.gpus for m in g.mig_devices}
    wanted: set[int] = set()
    constrained = False
    for entry in entries:
        # Strict: '²'.isdigit() is True but int('²') raises, and int() refuses
        # over 4,300 digits; such an entry is then "not a GPU of this machine".
        index = int_or_none(entry, minimum=0) if entry[:1] not in "+-" else None
        if index is not None:
            if index >= len(snapshot.gpus):
                constrained = True
            wanted.add(index)
        elif entry.lower() in by_uuid:
            wanted.add(by_uuid[entry.lower()])
        elif entry.lower() in migs:
            wanted.add(migs[entry.lower()])
        else:
            return [
                Finding(
                    code="VIS-SLURM-MISMATCH",
                    severity="warning",
                    message=f"{name}={_q(value)} names {_q(entry)}, which is not a GPU of "
                    f"this machine; CUDA_VISIBLE_DEVICES exposes {exposed_text}.",
                    fix="Run gpudiag inside the job step (srun), and let Slurm set "
                    "CUDA_VISIBLE_DEVICES instead of overriding it.",
                    subject=name,
                )
            ]
    have = {d.nvml_index for d in exposed}
    if slurm_binds_per_task(env) and (have <= wanted or (constrained and len(have) <= len(wanted))):
        # Slurm set this task's share itself: not an override (issue 19's false alarm).
        return []
    if constrained:
        if len(wanted) == len(have):
            return []
        detail = f"Slurm allocated {len(wanted)} GPU(s) but CUDA exposes {len(have)}"
    elif wanted == have:
        return []
    else:
        detail = (
            f"Slurm allocated nvidia-smi GPU(s) {', '.join(map(str, sorted(wanted)))} but "
            f"CUDA_VISIBLE_DEVICES exposes {exposed_text}"
        )
    return [
        Finding(
            code="VIS-SLURM-MISMATCH",
            severity="warning",
            message=f"{name}={_q(value)}: {detail}; the job may use GPUs it was not given, "
            "or leave its own idle.",
            fix="Do not override CUDA_VISIBLE_DEVICES inside a Slurm job; request GPUs "
            "with --gpus/--gres and use cuda:0..N-1.",
            subject=name,
        )
    ]
