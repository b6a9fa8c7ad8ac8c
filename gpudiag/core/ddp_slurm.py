"""DDP rules about Slurm: torchrun nested in several tasks per node, ranks that
disagree with Slurm's task ids, more ranks than the GPUs Slurm allocated.

Pure: the strictly read values of :mod:`gpudiag.core.ddp_env`; Slurm's variables
are documented in srun(1) (``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``,
``SLURM_NTASKS_PER_NODE``, ``SLURM_GPUS_ON_NODE``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpudiag.findings.texts import STORE_TIMEOUT
from gpudiag.model import Finding, Severity


def slurm_rules(
    v: Mapping[str, int],
    env: Mapping[str, str],
    under_torchrun: bool,
    nproc: int | None,
    nproc_source: str,
    out: list[Finding],
) -> None:
    tasks_per_node = v.get("SLURM_NTASKS_PER_NODE")
    if under_torchrun and tasks_per_node is not None and tasks_per_node > 1:
        lws = v.get("LOCAL_WORLD_SIZE")
        if lws is not None and lws > 1:
            out.append(
                Finding(
                    code="DDP-SLURM-NESTED",
                    severity="warning",
                    message=f"torchrun (LOCAL_WORLD_SIZE={lws}) runs inside {tasks_per_node} Slurm "
                    f"tasks per node (SLURM_NTASKS_PER_NODE): {tasks_per_node * lws} processes "
                    "per node compete for the same GPUs and rendezvous.",
                    fix="Either srun --ntasks-per-node=1 torchrun --nproc-per-node=<GPUs>, or "
                    "srun --ntasks-per-node=<GPUs> python train.py without torchrun.",
                    subject="SLURM_NTASKS_PER_NODE",
                )
            )
    if not under_torchrun:
        pairs: Sequence[tuple[str, str, Severity]] = (
            ("RANK", "SLURM_PROCID", "warning"),
            ("LOCAL_RANK", "SLURM_LOCALID", "warning"),
            ("WORLD_SIZE", "SLURM_NTASKS", "error"),
        )
        for ours, slurm, severity in pairs:
            if ours in v and slurm in v and v[ours] != v[slurm]:
                hangs = ours == "WORLD_SIZE"
                out.append(
                    Finding(
                        code="DDP-SLURM-MISMATCH",
                        severity=severity,
                        message=f"{ours}={v[ours]} but {slurm}={v[slurm]}: the job's ranks "
                        "disagree "
                        "with the tasks Slurm started"
                        + (
                            "; rendezvous waits for ranks that never come and times out."
                            if hangs
                            else "."
                        ),
                        fix=f"Derive {ours} from {slurm} (export {ours}=${slurm}) or use torchrun.",
                        predicts=STORE_TIMEOUT if hangs else None,
                        subject=ours,
                    )
                )
    gpus_on_node = v.get("SLURM_GPUS_ON_NODE")
    if (
        gpus_on_node is not None
        and nproc is not None
        and nproc_source != "SLURM_GPUS_ON_NODE"
        and nproc > gpus_on_node
    ):
        out.append(
            Finding(
                code="DDP-GPU-ALLOCATION",
                severity="warning",
                message=f"{nproc} ranks per node ({nproc_source}) but Slurm allocated "
                f"{gpus_on_node} GPU(s) on this node (SLURM_GPUS_ON_NODE).",
                fix=f"Request {nproc} GPUs per node (--gpus-per-node={nproc}) or run "
                f"{gpus_on_node} rank(s) per node.",
                subject="SLURM_GPUS_ON_NODE",
            )
        )
