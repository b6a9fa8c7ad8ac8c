"""Predict DistributedDataParallel / launcher failures from the environment.

Pure: reads a mapping of environment variables, a :class:`Resolution` and a
snapshot. Sources of the rules (torch 2.13 unless said otherwise):

* ``torch/distributed/rendezvous.py::_env_rendezvous_handler``: env:// reads
  ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` in that order and
  raises ``ValueError`` for the first one missing or empty (``if not env_val``),
  then ``int()``s RANK, WORLD_SIZE and MASTER_PORT; ``_create_c10d_store`` raises
  ``ValueError: port must have value from 0 to 65535 but was N.``
* ``torch.cuda.set_device(d)`` is a no-op for a negative ``d`` (its docstring).
* Launcher values are parsed strictly (:func:`parse_env_int`); a bad one is a
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

import re
from collections.abc import Mapping, Sequence

from gpudiag.core.dataparallel import (
    cvd_phrase,
    describe_device,
    describe_devices,
    gpu_by_nvml_index,
    invalid_ordinal_for,
    no_gpu_text,
)
from gpudiag.core.launch_rules import (
    launcher_finding,
    mismatch_findings,
    problem_findings,
    ranks_fix,
    rendezvous_findings,
)
from gpudiag.core.launchers import (
    Launch,
    has_launcher_vars,
    parse_tasks_per_node,
    read_launch,
)
from gpudiag.errors import GpudiagInputError
from gpudiag.model import Finding, Resolution, Severity, Snapshot
from gpudiag.parsing import is_int_text

CODES: dict[str, str] = {
    "DDP-PLAN": "which physical GPU each local rank will use",
    "DDP-BAD-ENV": "a launcher variable that is not an integer",
    "DDP-ENV-EMPTY": "a launcher variable set to an empty string",
    "DDP-ENV-RANGE": "a launcher variable out of range (negative rank, size < 1, bad port)",
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
_SLURM_INT_VARS = (
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_GPUS_ON_NODE",
)
_INT_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_PORT",
    *_SLURM_INT_VARS,
)
#: Every variable whose value gpudiag checks (an empty value is a finding).
_ENV_VARS = (*LAUNCHER_VARS, *_SLURM_INT_VARS)
#: Read by torch or by every DDP script: a bad value inside a launch is an error.
TORCH_READS = frozenset(LAUNCHER_VARS)
#: Those torch itself int()s (env:// rendezvous; LOCAL_RANK in get_node_local_rank and
#: DeviceMesh), so the int() error is the predicted text.
_PREDICTS_INT = frozenset(("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"))
_STRICT_INT = re.compile(r"[+-]?[0-9]+")
#: Longer digit strings are out of range for any rank, size or port (and int() of more
#: than 4300 digits raises).
_MAX_DIGITS = 18
_BIG = 10**_MAX_DIGITS
_RANGES: dict[str, tuple[int, int]] = {
    "RANK": (0, _BIG),
    "LOCAL_RANK": (0, _BIG),
    "WORLD_SIZE": (1, _BIG),
    "LOCAL_WORLD_SIZE": (1, _BIG),
    # rendezvous.py::_create_c10d_store: `if not 0 <= port < 2**16: raise ValueError`.
    "MASTER_PORT": (0, 65535),
    "SLURM_PROCID": (0, _BIG),
    "SLURM_LOCALID": (0, _BIG),
    "SLURM_NTASKS": (1, _BIG),
    "SLURM_NTASKS_PER_NODE": (1, _BIG),
    "SLURM_GPUS_ON_NODE": (0, _BIG),
}
_RANGE_TEXT = {
    var: "a port from 0 to 65535" if var == "MASTER_PORT" else f"an integer >= {low}"
    for var, (low, _) in _RANGES.items()
}
NCCL_NOT_BUILT = "RuntimeError: Distributed package doesn't have NCCL built in"
NCCL_NO_GPU = "ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!"


def has_launcher_env(env: Mapping[str, str]) -> bool:
    """Whether any launcher's variables are set (torchrun, Slurm, MPI, DeepSpeed...).

    The launchers and their variables: :mod:`gpudiag.core.launchers`.
    """
    return has_launcher_vars(env)


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


def _show(raw: str) -> str:
    """``repr`` of a value, shortened so a 5000-character value cannot flood the report."""
    if len(raw) <= 40:
        return repr(raw)
    return f"{raw[:20]!r}... ({len(raw)} characters)"


def parse_env_int(raw: str) -> int | None:
    """Parse a launcher integer strictly: ASCII digits with an optional sign, nothing else.

    No whitespace, underscores or non-ASCII digits (``'²'``, ``'٣'``), and at most
    18 digits (:func:`gpudiag.parsing.is_int_text`), so it never raises (``int()`` of
    5000 digits does).
    None when the value is not such an integer.
    """
    return int(raw) if is_int_text(raw) else None


def _int_error(raw: str) -> str | None:
    """What Python's ``int()`` (what torch and training scripts call) raises, or None."""
    try:
        int(raw)
    except ValueError as exc:
        return f"ValueError: {exc}"
    return None


def _severity(var: str, in_launch: bool) -> Severity:
    """Errors only for variables torch reads, and only inside a launch (RANK set)."""
    return "error" if in_launch and var in TORCH_READS else "warning"


def _ints(env: Mapping[str, str], in_launch: bool, out: list[Finding]) -> dict[str, int]:
    """Strictly parsed launcher integers; a finding for each empty or malformed one."""
    values: dict[str, int] = {}
    for var in _ENV_VARS:
        raw = env.get(var)
        if raw is None:
            continue
        severity = _severity(var, in_launch)
        if raw == "":
            out.append(_empty_finding(var, severity))
            continue
        if var not in _INT_VARS:
            continue
        if var == "SLURM_NTASKS_PER_NODE":
            raw_node = env.get("SLURM_NODEID")
            node_id = parse_env_int(raw_node) if raw_node else None
            tasks = parse_tasks_per_node(raw, node_id)
            if isinstance(tasks, bool):
                continue  # valid, but differs per node and this node is unknown
            if tasks is not None:
                values[var] = tasks
                continue
            out.append(
                Finding(
                    "DDP-BAD-ENV",
                    "warning",
                    f"{var}={_show(raw)} is not a Slurm task count (Slurm writes N, or N(xM) "
                    "for N tasks on each of M nodes); torch does not read it, so gpudiag "
                    "ignores it.",
                    f"Unset {var} or let sbatch/srun set it (--ntasks-per-node).",
                    subject=var,
                )
            )
            continue
        value = parse_env_int(raw)
        if value is not None:
            values[var] = value
            continue
        int_error = _int_error(raw)
        if _STRICT_INT.fullmatch(raw):
            # Only digits, but more than any rank, size or port can have.
            out.append(
                Finding(
                    "DDP-ENV-RANGE",
                    severity,
                    f"{var} has {len(raw.lstrip('+-'))} digits: far out of range (it must be "
                    f"{_RANGE_TEXT[var]}).",
                    f"Unset {var} or set it to {_RANGE_TEXT[var]}; let torchrun or srun set it.",
                    int_error if var in _PREDICTS_INT else None,
                    subject=var,
                )
            )
        elif int_error is None:
            # Python's int() takes it (' 3', '1_0', '٣'): torch would too.
            out.append(
                Finding(
                    "DDP-BAD-ENV",
                    "warning",
                    f"{var}={_show(raw)} is not a plain integer (ASCII digits, optional sign): "
                    "Python's int() accepts it, so torch may too, but shells and Slurm do not; "
                    "gpudiag ignores it.",
                    f"Set {var} to plain digits, or let torchrun or srun set it.",
                    subject=var,
                )
            )
        else:
            if var in TORCH_READS:
                reader = " (torch and training scripts int() it)"
                if not in_launch:
                    reader += "; torchrun replaces it in each worker, but a rank started "
                    reader += "without torchrun would fail"
            else:
                reader = "; torch does not read it, so gpudiag ignores it"
            out.append(
                Finding(
                    "DDP-BAD-ENV",
                    severity,
                    f"{var}={_show(raw)} is not an integer{reader}.",
                    f"Unset {var} or set it to an integer; let torchrun or srun set it.",
                    int_error if var in _PREDICTS_INT else None,
                    subject=var,
                )
            )
    return values


def _empty_finding(var: str, severity: Severity) -> Finding:
    if var in ENV_RENDEZVOUS_ORDER:
        effect = (
            "init_process_group(init_method='env://') treats an empty value as unset "
            "(it tests `not value`)"
        )
        predicts: str | None = env_missing_text(var)
    elif var in TORCH_READS:
        effect = "int() of it fails in torch and in training scripts"
        predicts = "ValueError: invalid literal for int() with base 10: ''"
        if var not in _PREDICTS_INT:
            effect, predicts = "a script that int()s it fails", None
    else:
        effect, predicts = "torch does not read it, so gpudiag ignores it", None
    return Finding(
        "DDP-ENV-EMPTY",
        severity,
        f"{var} is set to an empty string: {effect}.",
        f"Unset {var} or give it a value; let torchrun or srun set it.",
        predicts,
        subject=var,
    )


def _range_findings(v: dict[str, int], in_launch: bool, out: list[Finding]) -> int | None:
    """Drop out-of-range values from ``v`` with a finding each; return a negative LOCAL_RANK."""
    negative_local_rank: int | None = None
    for var, (low, high) in _RANGES.items():
        if var not in v or low <= v[var] <= high:
            continue
        value = v.pop(var)
        if var == "LOCAL_RANK" and value < 0:
            negative_local_rank = value
            continue
        predicts = None
        if var == "MASTER_PORT":
            predicts = f"ValueError: port must have value from 0 to 65535 but was {value}."
        out.append(
            Finding(
                "DDP-ENV-RANGE",
                _severity(var, in_launch),
                f"{var}={value} is out of range: it must be {_RANGE_TEXT[var]}"
                + (
                    "."
                    if var in TORCH_READS
                    else "; torch does not read it, so gpudiag ignores it."
                ),
                f"Set {var} to {_RANGE_TEXT[var]}, or let torchrun or srun set it.",
                predicts,
                subject=var,
            )
        )
    if v.get("MASTER_PORT") == 0:
        out.append(
            Finding(
                "DDP-ENV-RANGE",
                "warning",
                "MASTER_PORT=0: torch accepts it, but rank 0's store then listens on a random "
                "port that the other ranks cannot know, so only a single-rank job works.",
                "Set MASTER_PORT to a fixed free port (e.g. 29500) on every rank.",
                subject="MASTER_PORT",
            )
        )
    pairs = (
        ("RANK", "WORLD_SIZE"),
        ("LOCAL_RANK", "LOCAL_WORLD_SIZE"),
        ("SLURM_PROCID", "SLURM_NTASKS"),
        ("SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
    )
    for rank_var, size_var in pairs:
        if rank_var in v and size_var in v and v[rank_var] >= v[size_var]:
            torch_pair = rank_var in TORCH_READS
            out.append(
                Finding(
                    "DDP-ENV-RANGE",
                    _severity(rank_var, in_launch),
                    f"{rank_var}={v[rank_var]} but {size_var}={v[size_var]}: ranks run from 0 "
                    f"to {size_var}-1"
                    + (
                        ", so this rank does not belong to the group and rendezvous cannot "
                        "complete."
                        if rank_var == "RANK"
                        else "."
                        if torch_pair
                        else "; torch does not read them."
                    ),
                    f"Let torchrun or srun set {rank_var} and {size_var} instead of exporting "
                    "them by hand.",
                    subject=rank_var,
                )
            )
    if "LOCAL_WORLD_SIZE" in v and "WORLD_SIZE" in v and v["LOCAL_WORLD_SIZE"] > v["WORLD_SIZE"]:
        out.append(
            Finding(
                "DDP-ENV-RANGE",
                _severity("LOCAL_WORLD_SIZE", in_launch),
                f"LOCAL_WORLD_SIZE={v['LOCAL_WORLD_SIZE']} but WORLD_SIZE={v['WORLD_SIZE']}: "
                "a node cannot run more ranks than the whole job has.",
                "Let torchrun set WORLD_SIZE and LOCAL_WORLD_SIZE (--nnodes, --nproc-per-node).",
                subject="LOCAL_WORLD_SIZE",
            )
        )
    return negative_local_rank


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
        launcher: a canonical launcher name (``gpudiag.core.launchers``) to evaluate
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
    v = _ints(env, in_launch, out)
    out += problem_findings(launch, _ENV_VARS)
    negative_local_rank = _range_findings(v, in_launch, out)
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
                f"Backend nccl needs GPUs, but none is visible ({where}). A script that calls "
                "torch.cuda.set_device(local_rank) first fails there; one that initialises "
                "the process group first gets NCCL's refusal.",
                "Use backend='gloo' for CPU training, or make GPUs visible to the job.",
                NCCL_NOT_BUILT if cpu_only else no_gpu_text(snapshot, resolution.cuinit_error),
                predicts_also=() if cpu_only else (f"init_process_group first: {NCCL_NO_GPU}",),
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
                f"{ranks_fix(launch, n)}, or make {nproc} GPUs visible.",
                ordinal_text,
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

    if negative_local_rank is not None:
        dup = effective_backend == "nccl" and n > 0
        gpu0 = gpu_by_nvml_index(snapshot, devices[0].nvml_index) if n > 0 else None
        out.append(
            Finding(
                "DDP-LOCAL-RANK-INVALID",
                _severity("LOCAL_RANK", in_launch),
                f"LOCAL_RANK={negative_local_rank} is negative: "
                f"torch.cuda.set_device({negative_local_rank}) is a no-op for a negative "
                "device, so this rank stays on "
                + (describe_device(devices[0], snapshot) if n > 0 else "cuda:0")
                + " with local rank 0"
                + ("; NCCL refuses two ranks on one GPU." if dup else "."),
                "Let torchrun set LOCAL_RANK (0..LOCAL_WORLD_SIZE-1), or derive it from "
                "SLURM_LOCALID under srun.",
                duplicate_gpu_text(gpu0.pci_bus_id if gpu0 else None) if dup else None,
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
                ordinal_text,
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
                "DDP-LAUNCHER-ENV-MISSING",
                "error",
                ("RANK is set" if env.get("RANK") else "Under torchrun (TORCHELASTIC_RUN_ID)")
                + f" but {', '.join(unset)} {'is' if len(unset) == 1 else 'are'} "
                "not: init_process_group(init_method='env://') cannot rendezvous.",
                "Launch with torchrun (it sets all four), or export "
                + ", ".join(unset)
                + " in the job script.",
                env_missing_text(unset[0]),
                subject=unset[0],
            )
        )
    elif missing and in_launch:
        pass  # only empty values: their DDP-ENV-EMPTY errors say it
    elif missing and launch.launcher in ("openmpi", "mpich", "intelmpi"):
        out += rendezvous_findings(launch, env)  # under or before an MPI launch
    elif missing and launch.inside and launch.launcher not in ("slurm", "env"):
        pass  # Horovod rendezvouses on its own (HOROVOD_GLOO_RENDEZVOUS_ADDR)
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
                _not_launched_text(env),
                f"Launch with {launch.start_command(nproc or max(n, 1))} train.py.",
                env_missing_text(missing[0]),
            )
        )

    # Under another launcher inside an allocation (mpirun, deepspeed in sbatch), RANK
    # is that launcher's, not a Slurm task id: DDP-LAUNCHER-MISMATCH compares them.
    other_launcher = launch.launcher not in (None, "slurm", "env", "torchrun")
    _slurm_rules(v, env, under_torchrun or other_launcher, nproc, nproc_source, out)
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
                "DDP-PLAN",
                "info",
                f"{nproc} rank(s) per node ({nproc_source}), each calling "
                f"torch.cuda.set_device(local_rank) {where}: {plan}.",
                None,
            )
        )
    return out


def _launcher_value(launch: Launch, field_name: str) -> tuple[int, str] | None:
    """A count from the launcher that started this rank, when torch's and Slurm's own
    variables (read by :func:`_ints`, with their findings) do not already give it."""
    var = launch.var(field_name)
    value = launch.view.value(field_name) if launch.view is not None else None
    if var is None or value is None or var in _ENV_VARS:
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
