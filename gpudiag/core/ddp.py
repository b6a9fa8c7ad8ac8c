"""Predict DistributedDataParallel / launcher failures from the environment.

Pure: reads a mapping of environment variables, a :class:`Resolution` and a
snapshot. Sources of the rules (torch 2.13 unless said otherwise):

* ``torch/distributed/rendezvous.py::_env_rendezvous_handler``: env:// reads
  ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` in that order and
  raises ``ValueError`` for the first one missing or empty (``if not env_val``),
  then ``int()``s RANK, WORLD_SIZE and MASTER_PORT; ``_create_c10d_store`` raises
  ``ValueError: port must have value from 0 to 65535 but was N.``
* ``torch.cuda.set_device(d)`` is a no-op for a negative ``d`` (its docstring).
* Launcher values are parsed strictly (:func:`gpudiag.launch.ints.read_int`); a bad one is a
  finding, not :class:`GpudiagInputError`: it describes the job, not gpudiag's input.
* ``torchrun`` (``torch/distributed/run.py``) sets ``RANK``, ``LOCAL_RANK``,
  ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` and
  ``TORCHELASTIC_RUN_ID`` in every worker; all local workers inherit the same
  ``CUDA_VISIBLE_DEVICES``.
* ``torch.cuda.set_device(local_rank)`` with ``local_rank`` >= the visible count
  fails with ``CUDA error: invalid device ordinal``: ``torch.AcceleratorError``
  since torch 2.8, recorded on torch 2.11 with 2 ranks on one H100.
* nccl with no visible GPU: a script that calls ``torch.cuda.set_device(local_rank)``
  first fails there with ``No CUDA GPUs are available`` (recorded on torch 2.11),
  before ProcessGroupNCCL's own refusal.
* NCCL (``init.cc``) refuses two ranks of one communicator on one GPU:
  ``Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx``.
* ``ProcessGroupNCCL`` (``ProcessGroupNCCL.cpp``) refuses a machine with no GPU.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpudiag.core.dataparallel import (
    cvd_phrase,
    describe_device,
    describe_devices,
    gpu_by_nvml_index,
    invalid_ordinal_for,
    no_gpu_text,
)
from gpudiag.core.ddp_env import (
    ENV_RENDEZVOUS_ORDER,
    ENV_VARS,
    LAUNCHER_VARS,
    TORCH_READS,
    env_missing_text,
    env_severity,
    range_findings,
    read_ints,
)
from gpudiag.core.ddp_slurm import slurm_rules
from gpudiag.core.launch_rules import (
    launcher_finding,
    mismatch_findings,
    problem_findings,
    ranks_fix,
    rendezvous_findings,
)
from gpudiag.core.visibility.slurm import slurm_binds_per_task
from gpudiag.errors import GpudiagInputError
from gpudiag.findings.texts import NCCL_NO_GPU as NCCL_NO_GPU
from gpudiag.findings.texts import NCCL_NOT_BUILT as NCCL_NOT_BUILT
from gpudiag.findings.texts import duplicate_gpu_text as duplicate_gpu_text
from gpudiag.launch.reader import Launch, read_launch
from gpudiag.launch.table import SETS_TORCH_ENV, has_launcher_vars
from gpudiag.model import Finding, Resolution, Severity, Snapshot

__all__ = [
    "ENV_RENDEZVOUS_ORDER",
    "LAUNCHER_VARS",
    "NCCL_NOT_BUILT",
    "NCCL_NO_GPU",
    "TORCH_READS",
    "duplicate_gpu_text",
    "env_missing_text",
    "has_launcher_env",
    "validate_ddp",
]

#: Variables whose presence means a launcher (torchrun, Slurm) is involved.


def has_launcher_env(env: Mapping[str, str]) -> bool:
    """Whether any launcher's variables are set (torchrun, Slurm, MPI, DeepSpeed...).

    The launchers and their variables: :mod:`gpudiag.launch.table`.
    """
    return has_launcher_vars(env)


def validate_ddp(
    resolution: Resolution,
    snapshot: Snapshot,
    *,
    env: Mapping[str, str],
    nproc_per_node: int | None,
    backend: str | None,
    set_device: int | None = None,
    launcher: str | None = None,
) -> list[Finding]:
    """Predict what a DDP launch does with this environment.

    Args:
        resolution: the devices every local rank sees (torchrun gives all local
            ranks the same ``CUDA_VISIBLE_DEVICES``).
        snapshot: the machine, for names, UUIDs and PCI bus ids.
        env: the launcher environment (``RANK``, ``LOCAL_RANK``, ``SLURM_*``…).
        nproc_per_node: ranks per node; None = from ``LOCAL_WORLD_SIZE``,
            ``SLURM_NTASKS_PER_NODE`` or ``SLURM_GPUS_ON_NODE``, in that order.
        backend: ``nccl``, ``gloo`` or None (torch's default: nccl for CUDA tensors).
        set_device: a fixed ``torch.cuda.set_device(K)`` every rank calls, if any.
        launcher: a canonical launcher name (:mod:`gpudiag.launch.table`) to evaluate
            before it starts; None = the launcher whose variables are in ``env``.

    Raises:
        GpudiagInputError: an unknown backend or a non-positive ``nproc_per_node``.
    """
    if backend is not None and backend not in ("nccl", "gloo"):
        raise GpudiagInputError(f"backend must be nccl or gloo, not {backend!r}")
    if nproc_per_node is not None and nproc_per_node < 1:
        raise GpudiagInputError(f"nproc_per_node must be at least 1, got {nproc_per_node}")
    out: list[Finding] = []
    # Inside a launch: a rank torchrun or a job script started (RANK has a value), or a
    # torchrun worker. Before one, torchrun replaces every launcher variable anyway.
    in_launch = bool(env.get("RANK")) or "TORCHELASTIC_RUN_ID" in env
    launch = read_launch(env, launcher)
    v = read_ints(env, in_launch, out)
    out += problem_findings(launch, ENV_VARS)
    negative_local_rank = range_findings(v, in_launch, out)
    devices = resolution.devices
    n = len(devices)
    where = cvd_phrase(resolution)
    ordinal_text, ordinal_also = invalid_ordinal_for(snapshot)
    under_torchrun = "TORCHELASTIC_RUN_ID" in env or "LOCAL_WORLD_SIZE" in env
    under_srun = "SLURM_PROCID" in env or "SLURM_STEP_ID" in env

    nproc: int | None = nproc_per_node
    nproc_source = "--nproc-per-node"
    own_size = _launcher_value(launch, "local_world_size")
    if nproc is None and own_size is not None:
        # The launcher that started this rank counts its node's ranks (MPI's
        # OMPI_COMM_WORLD_LOCAL_SIZE, DeepSpeed's LOCAL_SIZE...).
        nproc, nproc_source = own_size
    for var in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", "SLURM_GPUS_ON_NODE"):
        # Out-of-range values were dropped; SLURM_GPUS_ON_NODE=0 (a CPU job) plans nothing.
        if nproc is None and v.get(var, 0) >= 1:
            nproc, nproc_source = v[var], var
    if (
        nproc_per_node is not None
        and "LOCAL_WORLD_SIZE" in v
        and v["LOCAL_WORLD_SIZE"] != nproc_per_node
    ):
        out.append(
            Finding(
                code="DDP-NPROC-MISMATCH",
                severity="warning",
                message=f"--nproc-per-node {nproc_per_node} disagrees with LOCAL_WORLD_SIZE="
                f"{v['LOCAL_WORLD_SIZE']} set by the running launcher.",
                fix="Check the value passed to torchrun --nproc-per-node.",
                subject="LOCAL_WORLD_SIZE",
            )
        )

    effective_backend = backend or ("nccl" if n > 0 else "gloo")
    if effective_backend == "nccl" and n == 0:
        cpu_only = snapshot.torch is not None and snapshot.torch.cpu_only
        out.append(
            Finding(
                code="DDP-NCCL-NO-GPU",
                severity="error",
                message=f"Backend nccl needs GPUs, but none is visible ({where}). A script that "
                "calls "
                "torch.cuda.set_device(local_rank) first fails there; one that initialises "
                "the process group first gets NCCL's refusal.",
                fix="Use backend='gloo' for CPU training, or make GPUs visible to the job.",
                predicts=NCCL_NOT_BUILT
                if cpu_only
                else no_gpu_text(snapshot, resolution.cuinit_error),
                predicts_also=() if cpu_only else (f"init_process_group first: {NCCL_NO_GPU}",),
            )
        )

    # Under Slurm's per-task binding each task sees only its own GPUs: ranks per node
    # above the visible count are expected (issue 19); a local rank past them is
    # DDP-LOCAL-RANK-INVALID's to say, with the cuda:0 hint.
    per_task = under_srun and slurm_binds_per_task(env)
    if n > 0 and nproc is not None and nproc > n and not per_task:
        severity: Severity = "error" if effective_backend == "nccl" else "warning"
        out.append(
            Finding(
                code="DDP-TOO-MANY-RANKS",
                severity=severity,
                message=f"{nproc} ranks per node ({nproc_source}) but only {n} GPU(s) visible "
                f"{where}: "
                f"{describe_devices(devices, snapshot)}. Local ranks {n}..{nproc - 1} fail at "
                "torch.cuda.set_device(local_rank); code that wraps with "
                "local_rank % device_count() instead puts two ranks on one GPU, which NCCL "
                "refuses ('Duplicate GPU detected').",
                fix=f"{ranks_fix(launch, n)}, or make {nproc} GPUs visible.",
                predicts=ordinal_text,
                predicts_also=ordinal_also,
            )
        )

    if (
        set_device is not None
        and set_device >= 0
        and nproc is not None
        and nproc > 1
        and effective_backend == "nccl"
        and set_device < n
    ):
        dev = devices[set_device]
        gpu = gpu_by_nvml_index(snapshot, dev.nvml_index)
        out.append(
            Finding(
                code="DDP-DUPLICATE-GPU",
                severity="error",
                message=f"Every one of the {nproc} ranks calls "
                f"torch.cuda.set_device({set_device}), so "
                f"all of them use {describe_device(dev, snapshot)}; NCCL refuses two ranks on "
                "one GPU.",
                fix="Call torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) in each rank.",
                predicts=duplicate_gpu_text(gpu.pci_bus_id if gpu else None),
                subject=dev.uuid,
            )
        )

    if negative_local_rank is not None:
        dup = effective_backend == "nccl" and n > 0
        gpu0 = gpu_by_nvml_index(snapshot, devices[0].nvml_index) if n > 0 else None
        out.append(
            Finding(
                code="DDP-LOCAL-RANK-INVALID",
                severity=env_severity("LOCAL_RANK", in_launch),
                message=f"LOCAL_RANK={negative_local_rank} is negative: "
                f"torch.cuda.set_device({negative_local_rank}) is a no-op for a negative "
                "device, so this rank stays on "
                + (describe_device(devices[0], snapshot) if n > 0 else "cuda:0")
                + " with local rank 0"
                + ("; NCCL refuses two ranks on one GPU." if dup else "."),
                fix="Let torchrun set LOCAL_RANK (0..LOCAL_WORLD_SIZE-1), or derive it from "
                "SLURM_LOCALID under srun.",
                predicts=duplicate_gpu_text(gpu0.pci_bus_id if gpu0 else None) if dup else None,
                subject="LOCAL_RANK",
            )
        )
    local_rank = v.get("LOCAL_RANK")
    local_rank_var = "LOCAL_RANK"
    if (
        local_rank is None
        and negative_local_rank is None
        and not under_torchrun
        and "SLURM_LOCALID" in v
    ):
        local_rank, local_rank_var = v["SLURM_LOCALID"], "SLURM_LOCALID"
    own_rank = _launcher_value(launch, "local_rank")
    if local_rank is None and negative_local_rank is None and own_rank is not None:
        local_rank, local_rank_var = own_rank[0], own_rank[1]
    if local_rank is not None and n > 0 and local_rank >= n:
        one_each = n == 1 and under_srun
        out.append(
            Finding(
                code="DDP-LOCAL-RANK-INVALID",
                severity="error",
                message=f"{local_rank_var}={local_rank} but only {n} GPU(s) are visible {where}: "
                f"{describe_devices(devices, snapshot)}; torch.cuda.set_device({local_rank}) "
                "fails."
                + (
                    " Slurm seems to give each task its own GPU (one visible), so every task "
                    "must use cuda:0."
                    if one_each
                    else ""
                ),
                fix="Use torch.cuda.set_device(local_rank % torch.cuda.device_count()) when each "
                "task sees only its own GPUs, or run one rank per visible GPU.",
                predicts=ordinal_text,
                subject=local_rank_var,
                predicts_also=ordinal_also,
            )
        )

    # Empty values already have a DDP-ENV-EMPTY finding each; these are the unset ones.
    unset = [var for var in ENV_RENDEZVOUS_ORDER if var not in env]
    missing = [var for var in ENV_RENDEZVOUS_ORDER if not env.get(var)]
    if unset and in_launch:
        out.append(
            Finding(
                code="DDP-LAUNCHER-ENV-MISSING",
                severity="error",
                message=(
                    "RANK is set" if env.get("RANK") else "Under torchrun (TORCHELASTIC_RUN_ID)"
                )
                + f" but {', '.join(unset)} {'is' if len(unset) == 1 else 'are'} "
                "not: init_process_group(init_method='env://') cannot rendezvous.",
                fix="Launch with torchrun (it sets all four), or export "
                + ", ".join(unset)
                + " in the job script.",
                predicts=env_missing_text(unset[0]),
                subject=unset[0],
            )
        )
    elif missing and in_launch:
        pass  # only empty values: their DDP-ENV-EMPTY errors say it
    elif missing and launch.launcher in ("openmpi", "mpich", "intelmpi"):
        out += rendezvous_findings(launch, env)  # under or before an MPI launch
    elif missing and launch.inside and launch.launcher not in ("slurm", "env"):
        pass  # Horovod rendezvouses on its own (HOROVOD_GLOO_RENDEZVOUS_ADDR)
    elif (
        missing
        and under_srun
        and not under_torchrun
        # A chosen launcher that sets torch's variables itself (accelerate, torchrun or
        # deepspeed inside srun) needs no "run torchrun" (issue 20): DDP-NOT-LAUNCHED.
        and not (launch.chosen and launch.launcher in SETS_TORCH_ENV)
    ):
        out.append(
            Finding(
                code="DDP-LAUNCHER-ENV-MISSING",
                severity="warning",
                message=f"Running under srun without torchrun, and {', '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not set: env:// rendezvous needs them.",
                fix="Run torchrun inside srun, or export RANK=$SLURM_PROCID, "
                "WORLD_SIZE=$SLURM_NTASKS, LOCAL_RANK=$SLURM_LOCALID, MASTER_ADDR=<first node "
                "of $SLURM_JOB_NODELIST> and MASTER_PORT=<free port>.",
                predicts=env_missing_text(missing[0]),
                subject=missing[0],
            )
        )
    elif missing:
        out.append(
            Finding(
                code="DDP-NOT-LAUNCHED",
                severity="info",
                message=_not_launched_text(env),
                fix=f"Launch with {launch.start_command(nproc or max(n, 1))} train.py.",
                predicts=env_missing_text(missing[0]),
            )
        )

    # Under another launcher inside an allocation (mpirun, deepspeed in sbatch), RANK
    # is that launcher's, not a Slurm task id: DDP-LAUNCHER-MISMATCH compares them.
    other_launcher = launch.launcher not in (None, "slurm", "env", "torchrun")
    slurm_rules(v, env, under_torchrun or other_launcher, nproc, nproc_source, out)
    out += mismatch_findings(launch)
    named = launcher_finding(launch)
    if named is not None:
        out.insert(0, named)

    if (
        n > 0
        and nproc is not None
        and 1 <= nproc <= n
        and not any(f.severity == "error" for f in out)
    ):
        plan = "; ".join(
            f"local rank {r} -> {describe_device(devices[r], snapshot)}" for r in range(nproc)
        )
        out.append(
            Finding(
                code="DDP-PLAN",
                severity="info",
                message=f"{nproc} rank(s) per node ({nproc_source}), each calling "
                f"torch.cuda.set_device(local_rank) {where}: {plan}.",
                fix=None,
            )
        )
    return out


def _launcher_value(launch: Launch, field_name: str) -> tuple[int, str] | None:
    """A count from the launcher that started this rank, when torch's and Slurm's own
    variables (read by :func:`gpudiag.core.ddp_env.read_ints`, with their findings) do
    not already give it."""
    var = launch.var(field_name)
    value = launch.view.value(field_name) if launch.view is not None else None
    if var is None or value is None or var in ENV_VARS:
        return None
    return value, var


def _not_launched_text(env: Mapping[str, str]) -> str:
    """DDP-NOT-LAUNCHED's message, true for the variables that are set."""
    present = [k for k in (*LAUNCHER_VARS, "TORCHELASTIC_RUN_ID") if k in env and k != "RANK"]
    present += sorted(k for k in env if k.startswith("SLURM_"))
    tail = (
        "that is normal before a launch. A script that calls init_process_group directly "
        "under plain python would fail."
    )
    rank = "RANK is set but empty" if env.get("RANK") == "" else "RANK is not set"
    if not present:
        if "RANK" not in env:
            return f"No launcher variables are set (not under torchrun or srun yet); {tail}"
        return f"{rank} and no other launcher variable is set (not launched yet); {tail}"
    shown = ", ".join(present[:6]) + (f" and {len(present) - 6} more" if len(present) > 6 else "")
    return (
        f"{rank}, so this is not a launched rank yet, though {shown} "
        f"{'is' if len(present) == 1 else 'are'} set (torchrun sets RANK and replaces the "
        f"other launcher variables in each worker); {tail}"
    )
