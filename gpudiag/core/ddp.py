"""Predict DistributedDataParallel / launcher failures from the environment.

Pure: reads a mapping of environment variables, a :class:`Resolution` and a
snapshot. Sources of the rules (torch 2.13 unless said otherwise):

* ``torch/distributed/rendezvous.py::_env_rendezvous_handler``: env:// reads
  ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` in that order and
  raises ``ValueError`` for the first one missing or empty.
* ``torchrun`` (``torch/distributed/run.py``) sets ``RANK``, ``LOCAL_RANK``,
  ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` and
  ``TORCHELASTIC_RUN_ID`` in every worker; all local workers inherit the same
  ``CUDA_VISIBLE_DEVICES``.
* ``torch.cuda.set_device(local_rank)`` with ``local_rank`` >= the visible count
  fails with ``CUDA error: invalid device ordinal``.
* NCCL (``init.cc``) refuses two ranks of one communicator on one GPU:
  ``Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx``.
* ``ProcessGroupNCCL`` (``ProcessGroupNCCL.cpp``) refuses a machine with no GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpudiag.core.dataparallel import (
    INVALID_ORDINAL,
    cvd_phrase,
    describe_device,
    describe_devices,
    gpu_by_nvml_index,
)
from gpudiag.errors import GpudiagInputError
from gpudiag.model import Finding, Resolution, Severity, Snapshot

CODES: dict[str, str] = {
    "DDP-PLAN": "which physical GPU each local rank will use",
    "DDP-BAD-ENV": "a launcher variable that is not an integer",
    "DDP-NPROC-MISMATCH": "--nproc-per-node disagrees with LOCAL_WORLD_SIZE",
    "DDP-NCCL-NO-GPU": "backend nccl with no visible GPU",
    "DDP-TOO-MANY-RANKS": "more ranks per node than visible GPUs",
    "DDP-DUPLICATE-GPU": "several ranks on one GPU: NCCL 'Duplicate GPU detected'",
    "DDP-LOCAL-RANK-INVALID": "LOCAL_RANK is not a visible device",
    "DDP-LAUNCHER-ENV-MISSING": "RANK, WORLD_SIZE, MASTER_ADDR or MASTER_PORT missing",
    "DDP-NOT-LAUNCHED": "no launcher variables: not running under torchrun or Slurm yet",
    "DDP-SLURM-MISMATCH": "torchrun and Slurm variables disagree",
    "DDP-SLURM-NESTED": "torchrun started inside several Slurm tasks per node",
    "DDP-GPU-ALLOCATION": "more ranks per node than GPUs Slurm allocated",
}

#: Variables whose presence means a launcher (torchrun, Slurm) is involved.
LAUNCHER_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
)
ENV_RENDEZVOUS_ORDER = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_INT_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_PORT",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_GPUS_ON_NODE",
)
NCCL_NOT_BUILT = "RuntimeError: Distributed package doesn't have NCCL built in"
NCCL_NO_GPU = "ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!"


def has_launcher_env(env: Mapping[str, str]) -> bool:
    """Whether any torchrun or Slurm variable is set."""
    return any(k in env for k in LAUNCHER_VARS) or any(k.startswith("SLURM_") for k in env)


def env_missing_text(var: str) -> str:
    """The ValueError env:// rendezvous raises for a missing variable."""
    return (
        "ValueError: Error initializing torch.distributed using env:// rendezvous: "
        f"environment variable {var} expected, but not set"
    )


def duplicate_gpu_text(pci_bus_id: str | None) -> str:
    """NCCL's duplicate-GPU error as torch surfaces it.

    NCCL prints the bus id as the hex number its digits spell
    (``busIdToInt64``: ``00000000:1A:00.0`` → ``1a000``).
    """
    dev = "<busId>"
    if pci_bus_id:
        digits = "".join(c for c in pci_bus_id if c not in ":.")
        try:
            dev = f"{int(digits, 16):x}"
        except ValueError:
            dev = "<busId>"
    return (
        "torch.distributed.DistBackendError: NCCL error ... invalid usage ... "
        f"Duplicate GPU detected : rank 1 and rank 0 both on CUDA device {dev}"
    )


def _ints(env: Mapping[str, str], out: list[Finding]) -> dict[str, int]:
    values: dict[str, int] = {}
    for var in _INT_VARS:
        raw = env.get(var)
        if raw is None or raw == "":
            continue
        try:
            values[var] = int(raw.strip())
        except ValueError:
            torch_reads = var in ("RANK", "WORLD_SIZE", "MASTER_PORT", "LOCAL_RANK")
            out.append(
                Finding(
                    "DDP-BAD-ENV",
                    "error",
                    f"{var}={raw!r} is not an integer"
                    + (" (torch and training scripts int() it)." if torch_reads else "."),
                    f"Unset {var} or set it to an integer; let torchrun or srun set it.",
                    f"ValueError: invalid literal for int() with base 10: {raw!r}"
                    if torch_reads
                    else None,
                    subject=var,
                )
            )
    return values


def validate_ddp(
    resolution: Resolution,
    snapshot: Snapshot,
    *,
    env: Mapping[str, str],
    nproc_per_node: int | None,
    backend: str | None,
    set_device: int | None = None,
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

    Raises:
        GpudiagInputError: an unknown backend or a non-positive ``nproc_per_node``.
    """
    if backend is not None and backend not in ("nccl", "gloo"):
        raise GpudiagInputError(f"--backend must be nccl or gloo, not {backend!r}")
    if nproc_per_node is not None and nproc_per_node < 1:
        raise GpudiagInputError(f"--nproc-per-node must be at least 1, got {nproc_per_node}")
    out: list[Finding] = []
    v = _ints(env, out)
    devices = resolution.devices
    n = len(devices)
    where = cvd_phrase(resolution)
    under_torchrun = "TORCHELASTIC_RUN_ID" in env or "LOCAL_WORLD_SIZE" in env
    in_launch = "RANK" in env
    under_srun = "SLURM_PROCID" in env or "SLURM_STEP_ID" in env

    nproc: int | None = nproc_per_node
    nproc_source = "--nproc-per-node"
    for var in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", "SLURM_GPUS_ON_NODE"):
        if nproc is None and var in v:
            nproc, nproc_source = v[var], var
    if (
        nproc_per_node is not None
        and "LOCAL_WORLD_SIZE" in v
        and v["LOCAL_WORLD_SIZE"] != nproc_per_node
    ):
        out.append(
            Finding(
                "DDP-NPROC-MISMATCH",
                "warning",
                f"--nproc-per-node {nproc_per_node} disagrees with LOCAL_WORLD_SIZE="
                f"{v['LOCAL_WORLD_SIZE']} set by the running launcher.",
                "Check the value passed to torchrun --nproc-per-node.",
                subject="LOCAL_WORLD_SIZE",
            )
        )

    effective_backend = backend or ("nccl" if n > 0 else "gloo")
    if effective_backend == "nccl" and n == 0:
        cpu_only = snapshot.torch is not None and snapshot.torch.cpu_only
        out.append(
            Finding(
                "DDP-NCCL-NO-GPU",
                "error",
                f"Backend nccl needs GPUs, but none is visible ({where}).",
                "Use backend='gloo' for CPU training, or make GPUs visible to the job.",
                NCCL_NOT_BUILT if cpu_only else NCCL_NO_GPU,
            )
        )

    if n > 0 and nproc is not None and nproc > n:
        severity: Severity = "error" if effective_backend == "nccl" else "warning"
        out.append(
            Finding(
                "DDP-TOO-MANY-RANKS",
                severity,
                f"{nproc} ranks per node ({nproc_source}) but only {n} GPU(s) visible {where}: "
                f"{describe_devices(devices, snapshot)}. Local ranks {n}..{nproc - 1} fail at "
                "torch.cuda.set_device(local_rank); code that wraps with "
                "local_rank % device_count() instead puts two ranks on one GPU, which NCCL "
                "refuses ('Duplicate GPU detected').",
                f"Use --nproc-per-node {n} (one rank per visible GPU), or make {nproc} GPUs "
                "visible.",
                INVALID_ORDINAL,
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
                "DDP-DUPLICATE-GPU",
                "error",
                f"Every one of the {nproc} ranks calls torch.cuda.set_device({set_device}), so "
                f"all of them use {describe_device(dev, snapshot)}; NCCL refuses two ranks on "
                "one GPU.",
                "Call torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) in each rank.",
                duplicate_gpu_text(gpu.pci_bus_id if gpu else None),
                subject=dev.uuid,
            )
        )

    local_rank = v.get("LOCAL_RANK")
    local_rank_var = "LOCAL_RANK"
    if local_rank is None and not under_torchrun and "SLURM_LOCALID" in v:
        local_rank, local_rank_var = v["SLURM_LOCALID"], "SLURM_LOCALID"
    if local_rank is not None and n > 0 and local_rank >= n:
        one_each = n == 1 and under_srun
        out.append(
            Finding(
                "DDP-LOCAL-RANK-INVALID",
                "error",
                f"{local_rank_var}={local_rank} but only {n} GPU(s) are visible {where}: "
                f"{describe_devices(devices, snapshot)}; torch.cuda.set_device({local_rank}) "
                "fails."
                + (
                    " Slurm seems to give each task its own GPU (one visible), so every task "
                    "must use cuda:0."
                    if one_each
                    else ""
                ),
                "Use torch.cuda.set_device(local_rank % torch.cuda.device_count()) when each "
                "task sees only its own GPUs, or run one rank per visible GPU.",
                INVALID_ORDINAL,
                subject=local_rank_var,
            )
        )

    missing = [var for var in ENV_RENDEZVOUS_ORDER if not env.get(var)]
    if missing and in_launch:
        out.append(
            Finding(
                "DDP-LAUNCHER-ENV-MISSING",
                "error",
                f"RANK is set but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                "not: init_process_group(init_method='env://') cannot rendezvous.",
                "Launch with torchrun (it sets all four), or export "
                + ", ".join(missing)
                + " in the job script.",
                env_missing_text(missing[0]),
                subject=missing[0],
            )
        )
    elif missing and under_srun and not under_torchrun:
        out.append(
            Finding(
                "DDP-LAUNCHER-ENV-MISSING",
                "warning",
                f"Running under srun without torchrun, and {', '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not set: env:// rendezvous needs them.",
                "Run torchrun inside srun, or export RANK=$SLURM_PROCID, "
                "WORLD_SIZE=$SLURM_NTASKS, LOCAL_RANK=$SLURM_LOCALID, MASTER_ADDR=<first node "
                "of $SLURM_JOB_NODELIST> and MASTER_PORT=<free port>.",
                env_missing_text(missing[0]),
                subject=missing[0],
            )
        )
    elif missing:
        out.append(
            Finding(
                "DDP-NOT-LAUNCHED",
                "info",
                "No launcher variables are set (not under torchrun or srun yet); that is normal "
                "before a launch. A script that calls init_process_group directly under plain "
                "python would fail.",
                f"Launch with torchrun --nproc-per-node {nproc or max(n, 1)} train.py.",
                env_missing_text(missing[0]),
            )
        )

    _slurm_rules(v, env, under_torchrun, nproc, nproc_source, out)

    if n > 0 and nproc is not None and nproc <= n and not any(f.severity == "error" for f in out):
        plan = "; ".join(
            f"local rank {r} -> {describe_device(devices[r], snapshot)}" for r in range(nproc)
        )
        out.append(
            Finding(
                "DDP-PLAN",
                "info",
                f"{nproc} rank(s) per node ({nproc_source}), each calling "
                f"torch.cuda.set_device(local_rank) {where}: {plan}.",
                None,
            )
        )
    return out


def _slurm_rules(
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
                    "DDP-SLURM-NESTED",
                    "warning",
                    f"torchrun (LOCAL_WORLD_SIZE={lws}) runs inside {tasks_per_node} Slurm "
                    f"tasks per node (SLURM_NTASKS_PER_NODE): {tasks_per_node * lws} processes "
                    "per node compete for the same GPUs and rendezvous.",
                    "Either srun --ntasks-per-node=1 torchrun --nproc-per-node=<GPUs>, or "
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
                        "DDP-SLURM-MISMATCH",
                        severity,
                        f"{ours}={v[ours]} but {slurm}={v[slurm]}: the job's ranks disagree "
                        "with the tasks Slurm started"
                        + (
                            "; rendezvous waits for ranks that never come and times out."
                            if hangs
                            else "."
                        ),
                        f"Derive {ours} from {slurm} (export {ours}=${slurm}) or use torchrun.",
                        "torch.distributed.DistStoreError: Timed out ... waiting for clients"
                        if hangs
                        else None,
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
                "DDP-GPU-ALLOCATION",
                "warning",
                f"{nproc} ranks per node ({nproc_source}) but Slurm allocated "
                f"{gpus_on_node} GPU(s) on this node (SLURM_GPUS_ON_NODE).",
                f"Request {nproc} GPUs per node (--gpus-per-node={nproc}) or run "
                f"{gpus_on_node} rank(s) per node.",
                subject="SLURM_GPUS_ON_NODE",
            )
        )
