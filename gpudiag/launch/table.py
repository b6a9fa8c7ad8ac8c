"""The table of launchers: one row per launcher, read by check, probe and lint.

Each row (:class:`LauncherSpec`) says where the launcher puts a rank's place
(rank, world size, local rank, local size, node), how its presence is detected,
how to start N ranks per node with it, and how it passes torch's rendezvous
variables on. Adding a launcher is one row in :data:`ROWS` plus its tests
(``tests/test_launch_table.py`` walks every row). Where the variables come from
(read in each launcher's own source or documentation, and recorded from a real
run where one can run here; ``docs/launchers.md``):

* torchrun: ``torch/distributed/run.py`` and
  ``torch/distributed/elastic/agent/server/local_elastic_agent.py`` (torch 2.13):
  ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``,
  ``MASTER_ADDR``, ``MASTER_PORT``, ``TORCHELASTIC_RUN_ID``.
* accelerate launch (accelerate 1.x ``accelerate/utils/launch.py``,
  ``prepare_multi_gpu_env``): runs torchrun, so torchrun's variables, plus
  ``ACCELERATE_*`` (``ACCELERATE_MIXED_PRECISION``, ``ACCELERATE_USE_CPU``...);
  ``--gpu_ids`` becomes ``CUDA_VISIBLE_DEVICES``. Recorded from accelerate 1.15.
* DeepSpeed (``deepspeed/launcher/launch.py`` ``main``, DeepSpeed 0.19.8): ``RANK``,
  ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``, plus ``CROSS_RANK``
  (the node), ``CROSS_SIZE`` (nodes) and ``LOCAL_SIZE`` (ranks on this node), and
  ``CUDA_VISIBLE_DEVICES`` from ``--include``/``--exclude``/``--num_gpus``
  (``deepspeed/launcher/runner.py``; :func:`deepspeed_devices`). Recorded from 0.19.8.
* Open MPI (docs.open-mpi.org v5.0.x, "Environment variables set for MPI
  applications"): ``OMPI_COMM_WORLD_RANK``, ``OMPI_COMM_WORLD_SIZE``,
  ``OMPI_COMM_WORLD_LOCAL_RANK``, ``OMPI_COMM_WORLD_LOCAL_SIZE``;
  ``OMPI_COMM_WORLD_NODE_RANK`` is a rank across all jobs on the node, not a node
  number. Recorded from Open MPI 5.0.11's ``mpiexec``.
* MPICH and Intel MPI (both use the Hydra process manager): ``PMI_RANK``,
  ``PMI_SIZE``, ``MPI_LOCALRANKID``, ``MPI_LOCALNRANKS``. Recorded from MPICH 5.0.2's
  ``mpiexec.hydra``; Intel MPI is told apart by its ``I_MPI_*`` variables.
* Horovod (``horovod/runner/gloo_run.py``, the gloo launcher's worker command):
  ``HOROVOD_RANK``, ``HOROVOD_SIZE``, ``HOROVOD_LOCAL_RANK``, ``HOROVOD_LOCAL_SIZE``,
  ``HOROVOD_CROSS_RANK`` (the node), ``HOROVOD_CROSS_SIZE``, and its own rendezvous
  ``HOROVOD_GLOO_RENDEZVOUS_ADDR``/``_PORT``. Over MPI, horovodrun runs mpirun and
  the MPI variables apply.
* Slurm (``srun``): ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``,
  ``SLURM_NTASKS_PER_NODE`` (``N`` or ``N(xM)``), ``SLURM_NODEID``.

None of the MPI launchers, Horovod or srun sets torch's ``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR`` or ``MASTER_PORT``: ``init_process_group('env://')`` needs them
from the job script.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

#: torchrun's default ``--master-port`` (torch/distributed/run.py), used by
#: ``gpudiag probe`` under a one-node MPI launch that exports no MASTER_PORT.
DEFAULT_MASTER_PORT = 29500
FIELDS = ("rank", "world_size", "local_rank", "local_world_size", "node_rank")
#: torch's own variables (torchrun sets them; a job script may export them).
TORCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")

#: ``detect(env, found)``: whether this launcher's variables are in ``env``;
#: ``found`` holds the rows already detected (innermost first).
Detect = Callable[[Mapping[str, str], Sequence[str]], bool]


@dataclass(frozen=True)
class LauncherSpec:
    """One launcher: where it puts each fact (None: it does not say), and how to use it.

    Attributes:
        name, title: canonical ``--launcher`` name; words for messages.
        rank, world_size, local_rank, local_world_size, node_rank: its variables.
        start: how to start N ranks per node, for fixes (``{n}`` is replaced).
        detect: whether its variables are set (see :data:`Detect`).
        sets_torch_env: it sets torch's RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.
        spawns_workers: it starts its own workers on each node, so its sizes
            naturally differ from the Slurm task counts of the step it runs in.
        mpi: an MPI launcher (ranks meet on the loopback by default on one node).
        export: how to pass MASTER_ADDR/MASTER_PORT to every rank (check's fix).
        export_hint: the same, as the tail of probe's one-line refusal.
        run_id: variables every rank of one job step shares, for a store key prefix
            (``run_id_prefix-<value>-<value>``; an unset one reads ``0``).
        aliases: other spellings ``--launcher`` accepts.
    """

    name: str
    title: str
    rank: str | None
    world_size: str | None
    local_rank: str | None
    local_world_size: str | None
    node_rank: str | None
    start: str
    detect: Detect = lambda env, found: False
    sets_torch_env: bool = False
    spawns_workers: bool = False
    mpi: bool = False
    export: str | None = None
    export_hint: str = ""
    run_id: tuple[str, ...] = ()
    run_id_prefix: str | None = None
    aliases: tuple[str, ...] = ()

    def var(self, field_name: str) -> str | None:
        value: str | None = getattr(self, field_name)
        return value

    def variables(self) -> dict[str, str]:
        """Field name -> variable, for the fields this launcher sets."""
        return {f: v for f in FIELDS if (v := self.var(f)) is not None}

    def run_id_for(self, env: Mapping[str, str]) -> str:
        """A store key prefix every rank of one job step computes alike."""
        prefix = self.run_id_prefix or self.name
        return "-".join((prefix, *(env.get(v, "0") for v in self.run_id)))


def _any_of(*names: str) -> Callable[[Mapping[str, str]], bool]:
    return lambda env: any(k in env for k in names)


def _prefixed(prefix: str, env: Mapping[str, str]) -> bool:
    return any(k.startswith(prefix) for k in env)


_elastic = _any_of("TORCHELASTIC_RUN_ID")
_hydra = _any_of("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID")
_HYDRA_VARS = ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", None)
_HYDRA_START = "mpiexec -n {n} on one node, mpiexec -ppn {n} on several"
_HYDRA_EXPORT = "mpiexec -genv MASTER_ADDR <rank 0 host> -genv MASTER_PORT 29500 ..."
_HYDRA_HINT = "; mpiexec passes them on with -genv MASTER_ADDR <host> -genv MASTER_PORT <port>"
_TORCHRUN_RUN_ID = ("TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT")

#: The launchers, innermost first: when several launchers' variables are present
#: (torchrun inside srun), the first one here started this process.
ROWS: tuple[LauncherSpec, ...] = (
    LauncherSpec(
        "torchrun", "torchrun", *TORCH_VARS, "torchrun --nproc-per-node {n}",
        detect=lambda env, found: _elastic(env) and not _prefixed("ACCELERATE_", env),
        sets_torch_env=True, spawns_workers=True, run_id=_TORCHRUN_RUN_ID,
        aliases=("torch", "torch.distributed.run"),
    ),
    LauncherSpec(
        "accelerate", "accelerate launch", *TORCH_VARS, "accelerate launch --num_processes {n}",
        detect=lambda env, found: _elastic(env) and _prefixed("ACCELERATE_", env),
        sets_torch_env=True, spawns_workers=True, run_id=_TORCHRUN_RUN_ID,
        run_id_prefix="torchrun", aliases=("accelerate-launch",),
    ),
    LauncherSpec(
        "deepspeed", "DeepSpeed",
        "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK",
        "deepspeed --num_gpus {n}",
        detect=lambda env, found: not _elastic(env) and _any_of("CROSS_RANK", "CROSS_SIZE")(env),
        sets_torch_env=True, spawns_workers=True, run_id_prefix="deepspeed",
    ),
    LauncherSpec(
        "horovod", "Horovod (horovodrun)",
        "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
        "HOROVOD_CROSS_RANK",
        "horovodrun -np {n} -H localhost:{n} on one node",
        detect=lambda env, found: _any_of("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK")(
            env
        ),
        spawns_workers=True, aliases=("horovodrun",),
    ),
    LauncherSpec(
        "openmpi", "Open MPI (mpirun/mpiexec)",
        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE", None,
        "mpirun -n {n} on one node, mpirun --map-by ppr:{n}:node on several",
        detect=lambda env, found: _any_of("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")(env),
        mpi=True,
        export="mpirun -x MASTER_ADDR=<rank 0 host> -x MASTER_PORT=29500 ...",
        export_hint="; mpirun passes them on with -x MASTER_ADDR -x MASTER_PORT",
        run_id=("PMIX_NAMESPACE",), aliases=("ompi", "open-mpi"),
    ),
    # MPICH and Intel MPI both start ranks with the Hydra process manager; Intel
    # MPI is told apart by its I_MPI_* variables.
    LauncherSpec(
        "intelmpi", "Intel MPI (mpiexec.hydra)", *_HYDRA_VARS, _HYDRA_START,
        detect=lambda env, found: _hydra(env) and _prefixed("I_MPI_", env),
        mpi=True, export=_HYDRA_EXPORT, export_hint=_HYDRA_HINT,
        run_id=("I_MPI_HYDRA_UUID",), aliases=("impi", "intel-mpi"),
    ),
    LauncherSpec(
        "mpich", "MPICH (mpiexec.hydra)", *_HYDRA_VARS, _HYDRA_START,
        detect=lambda env, found: _hydra(env) and not _prefixed("I_MPI_", env),
        mpi=True, export=_HYDRA_EXPORT, export_hint=_HYDRA_HINT, aliases=("hydra",),
    ),
    LauncherSpec(
        "slurm", "Slurm (srun)",
        "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_NODEID",
        "srun --ntasks-per-node={n}",
        detect=lambda env, found: _any_of("SLURM_PROCID", "SLURM_STEP_ID")(env),
        run_id=("SLURM_JOB_ID", "SLURM_STEP_ID"), aliases=("srun",),
    ),
    # RANK/WORLD_SIZE exported by hand (or by a launcher gpudiag does not know),
    # unless the innermost launcher is one that sets them itself.
    LauncherSpec(
        "env", "exported RANK/WORLD_SIZE", *TORCH_VARS, "torchrun --nproc-per-node {n}",
        detect=lambda env, found: (not found or found[0] not in SETS_TORCH_ENV)
        and _any_of(*TORCH_VARS[:4])(env),
    ),
)  # fmt: skip

SPECS: dict[str, LauncherSpec] = {row.name: row for row in ROWS}
#: Who started a probe, as its report says: a row of the table, or ``self``
#: (gpudiag started its own workers). tests/test_launch_table.py holds it to ROWS.
Launcher = Literal[
    "self",
    "torchrun",
    "accelerate",
    "deepspeed",
    "horovod",
    "openmpi",
    "mpich",
    "intelmpi",
    "slurm",
    "env",
]
#: Canonical launcher names, innermost first.
LAUNCHER_NAMES = tuple(SPECS)
#: Those ``check --launcher`` accepts (``env`` means "exported by hand").
CHOOSABLE = tuple(n for n in LAUNCHER_NAMES if n != "env")
MPI_FAMILY: frozenset[str] = frozenset(row.name for row in ROWS if row.mpi)
SPAWNS_WORKERS: frozenset[str] = frozenset(row.name for row in ROWS if row.spawns_workers)
SETS_TORCH_ENV: frozenset[str] = frozenset(row.name for row in ROWS if row.sets_torch_env)
_ALIASES = {alias: row.name for row in ROWS for alias in row.aliases}


def variables_of(field_name: str) -> frozenset[str]:
    """Every launcher's variable for ``field_name`` (``rank``, ``local_rank``...)."""
    return frozenset(v for row in ROWS if (v := row.var(field_name)) is not None)


def canonical_launcher(name: str) -> str | None:
    """A launcher's name or alias (any case) → its canonical name; None when unknown.

    The caller words the refusal: :class:`gpudiag.core.request.CheckRequest` names the
    input as it was given (``--launcher``, ``GPUDIAG_CHECK_LAUNCHER`` or ``launcher=``).
    """
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    return key if key in CHOOSABLE else None


def present_launchers(env: Mapping[str, str]) -> list[str]:
    """Launchers whose own variables are set, innermost first (each row's ``detect``)."""
    names: list[str] = []
    for row in ROWS:
        if row.detect(env, names):
            names.append(row.name)
    return names


def has_launcher_vars(env: Mapping[str, str]) -> bool:
    """Whether any launcher's variables (or torch's rendezvous variables) are set."""
    return (
        bool(present_launchers(env))
        or "MASTER_ADDR" in env
        or "MASTER_PORT" in env
        or any(k.startswith("SLURM_") for k in env)
    )
