"""One model of the launchers that start a job's ranks.

Pure: a mapping of environment variables in, a :class:`Launch` out. Each launcher
hands a rank its place through its own variables; this module reads them all
into one description (which launcher, global and local rank and sizes, node,
torch's rendezvous address), strictly parsed. Where the variables come from
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

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpudiag.errors import GpudiagInputError
from gpudiag.parsing import is_int_text

#: Canonical launcher names, innermost first: when several launchers' variables are
#: present (torchrun inside srun), the first one here started this process.
LAUNCHER_NAMES = (
    "torchrun",
    "accelerate",
    "deepspeed",
    "horovod",
    "openmpi",
    "intelmpi",
    "mpich",
    "slurm",
    "env",
)
_ALIASES = {
    "torch": "torchrun",
    "torch.distributed.run": "torchrun",
    "accelerate-launch": "accelerate",
    "horovodrun": "horovod",
    "ompi": "openmpi",
    "open-mpi": "openmpi",
    "impi": "intelmpi",
    "intel-mpi": "intelmpi",
    "hydra": "mpich",
    "srun": "slurm",
}
#: Those ``check --launcher`` accepts (``env`` means "exported by hand").
CHOOSABLE = tuple(n for n in LAUNCHER_NAMES if n != "env")
MPI_FAMILY = frozenset(("openmpi", "mpich", "intelmpi"))
#: Launchers that start their own workers on each node, so their sizes naturally
#: differ from the Slurm task counts of the step they run in.
SPAWNS_WORKERS = frozenset(("torchrun", "accelerate", "deepspeed", "horovod"))
#: Launchers that set torch's RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.
SETS_TORCH_ENV = frozenset(("torchrun", "accelerate", "deepspeed"))
#: torchrun's default ``--master-port`` (torch/distributed/run.py), used by
#: ``gpudiag probe`` under a one-node MPI launch that exports no MASTER_PORT.
DEFAULT_MASTER_PORT = 29500
FIELDS = ("rank", "world_size", "local_rank", "local_world_size", "node_rank")


@dataclass(frozen=True)
class LauncherSpec:
    """Where one launcher puts each fact (None: it does not say)."""

    name: str
    title: str
    rank: str | None
    world_size: str | None
    local_rank: str | None
    local_world_size: str | None
    node_rank: str | None
    start: str  # how to start N ranks per node, for fixes ('{n}' is replaced)

    def var(self, field_name: str) -> str | None:
        value: str | None = getattr(self, field_name)
        return value


_TORCH = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")
_HYDRA = (
    "PMI_RANK",
    "PMI_SIZE",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    None,
    "mpiexec -n {n} on one node, mpiexec -ppn {n} on several",
)
SPECS: dict[str, LauncherSpec] = {
    "torchrun": LauncherSpec("torchrun", "torchrun", *_TORCH, "torchrun --nproc-per-node {n}"),
    "accelerate": LauncherSpec(
        "accelerate", "accelerate launch", *_TORCH, "accelerate launch --num_processes {n}"
    ),
    "deepspeed": LauncherSpec(
        "deepspeed",
        "DeepSpeed",
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_SIZE",
        "CROSS_RANK",
        "deepspeed --num_gpus {n}",
    ),
    "horovod": LauncherSpec(
        "horovod",
        "Horovod (horovodrun)",
        "HOROVOD_RANK",
        "HOROVOD_SIZE",
        "HOROVOD_LOCAL_RANK",
        "HOROVOD_LOCAL_SIZE",
        "HOROVOD_CROSS_RANK",
        "horovodrun -np {n} -H localhost:{n} on one node",
    ),
    "openmpi": LauncherSpec(
        "openmpi",
        "Open MPI (mpirun/mpiexec)",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        None,
        "mpirun -n {n} on one node, mpirun --map-by ppr:{n}:node on several",
    ),
    # MPICH and Intel MPI both start ranks with the Hydra process manager.
    "mpich": LauncherSpec("mpich", "MPICH (mpiexec.hydra)", *_HYDRA),
    "intelmpi": LauncherSpec("intelmpi", "Intel MPI (mpiexec.hydra)", *_HYDRA),
    "slurm": LauncherSpec(
        "slurm",
        "Slurm (srun)",
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "SLURM_LOCALID",
        "SLURM_NTASKS_PER_NODE",
        "SLURM_NODEID",
        "srun --ntasks-per-node={n}",
    ),
    "env": LauncherSpec(
        "env", "exported RANK/WORLD_SIZE", *_TORCH, "torchrun --nproc-per-node {n}"
    ),
}

_TASKS_ITEM = re.compile(r"([0-9]+)(?:\(x([0-9]+)\))?")
_MINIMUM = {"rank": 0, "world_size": 1, "local_rank": 0, "local_world_size": 1, "node_rank": 0}


def _int_or_none(text: str) -> int | None:
    return int(text) if is_int_text(text) else None


def canonical_launcher(name: str) -> str:
    """``--launcher`` text → a canonical name.

    Raises:
        GpudiagInputError: an unknown launcher.
    """
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in CHOOSABLE:
        raise GpudiagInputError(
            f"--launcher must be one of {', '.join(CHOOSABLE)}, not {name.strip()!r}"
        )
    return key


def parse_tasks_per_node(raw: str, node_id: int | None = None) -> int | bool | None:
    """``SLURM_NTASKS_PER_NODE`` / ``SLURM_TASKS_PER_NODE`` → tasks on this node.

    Slurm writes ``N``, or ``N(xM)`` for N tasks on each of M nodes, comma-separated
    (``2(x3),1``). Returns the count when it is the same on every node (or when
    ``node_id``, Slurm's ``SLURM_NODEID``, picks one); True when valid but differing per
    node with no usable node id; None when it is not in Slurm's format.
    """
    counts: list[tuple[int, int]] = []
    for part in raw.split(","):
        m = _TASKS_ITEM.fullmatch(part)
        if m is None:
            return None
        count = _int_or_none(m.group(1))
        repeat = _int_or_none(m.group(2)) if m.group(2) is not None else 1
        if count is None or repeat is None or repeat < 1:
            return None
        counts.append((count, repeat))
    if len({c for c, _ in counts}) == 1:
        return counts[0][0]
    if node_id is not None and node_id >= 0:
        first = 0
        for count, repeat in counts:
            if node_id < first + repeat:
                return count
            first += repeat
    return True


@dataclass(frozen=True)
class Problem:
    """A launcher variable that could not be used (empty, not an integer, out of range)."""

    var: str
    raw: str
    reason: str


@dataclass(frozen=True)
class LauncherView:
    """What one launcher's variables say (a field is None where it says nothing usable)."""

    name: str
    rank: int | None = None
    world_size: int | None = None
    local_rank: int | None = None
    local_world_size: int | None = None
    node_rank: int | None = None

    @property
    def spec(self) -> LauncherSpec:
        return SPECS[self.name]

    def value(self, field_name: str) -> int | None:
        value: int | None = getattr(self, field_name)
        return value


@dataclass(frozen=True)
class Launch:
    """This process's place in a job, as its launcher describes it.

    Attributes:
        launcher: the launcher that started this process (innermost), or None.
        view: its variables' values; None when no launcher is present.
        others: other launchers whose variables are also present (outer launchers,
            or variables exported by hand), for cross-checks.
        master_addr, master_port: torch's env:// rendezvous, when set and valid.
        problems: variables of any launcher that could not be used.
        chosen: True when the launcher came from ``check --launcher`` (before a launch).
    """

    launcher: str | None
    view: LauncherView | None
    others: tuple[LauncherView, ...] = ()
    master_addr: str | None = None
    master_port: int | None = None
    problems: tuple[Problem, ...] = field(default=())
    chosen: bool = False

    @property
    def title(self) -> str:
        return SPECS[self.launcher].title if self.launcher else "no launcher"

    @property
    def inside(self) -> bool:
        """True when this process is a launched rank (its launcher gave it a rank)."""
        return self.view is not None and self.view.rank is not None

    def var(self, field_name: str) -> str | None:
        """The variable this launcher uses for ``field_name`` (``rank``...)."""
        return SPECS[self.launcher].var(field_name) if self.launcher else None

    def start_command(self, n: int) -> str:
        """How to start ``n`` ranks per node with this launcher."""
        return SPECS[self.launcher or "torchrun"].start.format(n=n)


def present_launchers(env: Mapping[str, str]) -> list[str]:
    """Launchers whose own variables are set, innermost first."""
    names: list[str] = []
    elastic = "TORCHELASTIC_RUN_ID" in env
    if elastic:
        accelerate = any(k.startswith("ACCELERATE_") for k in env)
        names.append("accelerate" if accelerate else "torchrun")
    elif "CROSS_RANK" in env or "CROSS_SIZE" in env:
        names.append("deepspeed")
    if any(k in env for k in ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK")):
        names.append("horovod")
    if any(k in env for k in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")):
        names.append("openmpi")
    if any(k in env for k in ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID")):
        names.append("intelmpi" if any(k.startswith("I_MPI_") for k in env) else "mpich")
    if "SLURM_PROCID" in env or "SLURM_STEP_ID" in env:
        names.append("slurm")
    torch_vars = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    if (not names or names[0] not in SETS_TORCH_ENV) and any(k in env for k in torch_vars):
        names.append("env")
    return names


def has_launcher_vars(env: Mapping[str, str]) -> bool:
    """Whether any launcher's variables (or torch's rendezvous variables) are set."""
    return (
        bool(present_launchers(env))
        or "MASTER_ADDR" in env
        or "MASTER_PORT" in env
        or any(k.startswith("SLURM_") for k in env)
    )


def read_view(env: Mapping[str, str], name: str, problems: list[Problem]) -> LauncherView:
    """One launcher's variables, strictly parsed; what cannot be used goes to ``problems``."""
    spec = SPECS[name]
    values: dict[str, int | None] = {}
    for field_name in FIELDS:
        var = spec.var(field_name)
        raw = env.get(var) if var else None
        if var is None or raw is None:
            values[field_name] = None
            continue
        value: int | None
        if var == "SLURM_NTASKS_PER_NODE":
            node_raw = env.get("SLURM_NODEID", "")
            tasks = parse_tasks_per_node(raw, int(node_raw) if is_int_text(node_raw) else None)
            value = tasks if isinstance(tasks, int) and not isinstance(tasks, bool) else None
            if tasks is None:
                problems.append(Problem(var, raw, "not a Slurm task count (N or N(xM))"))
            values[field_name] = value
            continue
        if raw == "":
            problems.append(Problem(var, raw, "empty"))
            values[field_name] = None
            continue
        if not is_int_text(raw):
            problems.append(Problem(var, raw, "not a plain integer"))
            values[field_name] = None
            continue
        value = int(raw)
        if value < _MINIMUM[field_name]:
            problems.append(Problem(var, raw, f"below {_MINIMUM[field_name]}"))
            value = None
        values[field_name] = value
    for rank_field, size_field in (("rank", "world_size"), ("local_rank", "local_world_size")):
        rank, size = values[rank_field], values[size_field]
        if rank is not None and size is not None and rank >= size:
            var = spec.var(rank_field) or rank_field
            problems.append(Problem(var, str(rank), f"not below {spec.var(size_field)}={size}"))
            values[rank_field] = None
    return LauncherView(name, **values)


def read_launch(env: Mapping[str, str], launcher: str | None = None) -> Launch:
    """Every launcher's variables in ``env``, as one :class:`Launch`.

    Args:
        env: the process environment.
        launcher: a canonical launcher name to evaluate before it starts
            (``check --launcher``); None = whichever launcher's variables are set.
    """
    problems: list[Problem] = []
    names = present_launchers(env)
    chosen = False
    if launcher is not None and (not names or names[0] != launcher):
        # Before the launch: the chosen launcher has no variables yet; what is set
        # belongs to an outer launcher (an sbatch allocation) or was exported by hand.
        names = [launcher, *[n for n in names if n != launcher]]
        chosen = True
    views = [read_view(env, name, problems) for name in names]
    if chosen:
        views[0] = LauncherView(launcher or "env")
    addr = env.get("MASTER_ADDR") or None
    port_raw = env.get("MASTER_PORT", "")
    port = int(port_raw) if is_int_text(port_raw) and 1 <= int(port_raw) <= 65535 else None
    seen: set[str] = set()
    unique = []
    for p in problems:
        if p.var not in seen:
            seen.add(p.var)
            unique.append(p)
    return Launch(
        launcher=names[0] if names else None,
        view=views[0] if views else None,
        others=tuple(views[1:]),
        master_addr=addr,
        master_port=port,
        problems=tuple(unique),
        chosen=chosen,
    )


@dataclass(frozen=True)
class DeepSpeedDevices:
    """What DeepSpeed's runner does with the devices before it starts workers.

    Attributes:
        spec: the ``CUDA_VISIBLE_DEVICES`` every worker on this node gets, or None
            when the runner refuses to start (``error``).
        how: why, in words (which flag or variable produced it).
        ignored: the user's ``CUDA_VISIBLE_DEVICES`` when the runner dropped it.
        error: the exception the runner raises, or None.
    """

    spec: str | None
    how: str
    ignored: str | None = None
    error: str | None = None


def deepspeed_devices(
    machine_gpus: int,
    visible: str | None,
    *,
    include: str | None = None,
    exclude: str | None = None,
    num_gpus: int | None = None,
) -> DeepSpeedDevices:
    """The ``CUDA_VISIBLE_DEVICES`` DeepSpeed's one-node runner gives its workers.

    Follows ``deepspeed/launcher/runner.py`` ``main`` (DeepSpeed 0.19.8) with no
    hostfile: a non-empty ``CUDA_VISIBLE_DEVICES`` becomes ``--include
    localhost:<value>`` unless ``--include``/``--exclude``/``--num_gpus`` is given,
    in which case it is ignored; either way it is deleted before the runner counts
    the GPUs, so slots are numbered over the whole machine (``machine_gpus``).
    ``parse_resource_filter`` then keeps the included slots (or drops the excluded
    ones); ``--num_gpus N`` takes slots ``0..N-1``; ``launch.py`` joins the slots into
    each worker's ``CUDA_VISIBLE_DEVICES``.
    """
    include = include or ""
    exclude = exclude or ""
    ignored = None
    how = ""
    if visible:
        if include or exclude or (num_gpus is not None and num_gpus > 0):
            ignored = visible
        else:
            include = f"localhost:{visible}"
            how = f"CUDA_VISIBLE_DEVICES={visible} became --include {include}"
    if num_gpus is not None and (include or exclude):
        return DeepSpeedDevices(
            None,
            "--num_gpus with --include/--exclude",
            ignored,
            "ValueError: Cannot specify num_nodes/gpus with include/exclude",
        )
    if machine_gpus == 0:
        return DeepSpeedDevices(
            None,
            "no GPU on this machine",
            ignored,
            "RuntimeError: Unable to proceed, no GPU resources available",
        )
    if include and exclude:
        return DeepSpeedDevices(
            None,
            "--include with --exclude",
            ignored,
            "ValueError: include_str and exclude_str are mutually exclusive.",
        )
    slots = list(range(machine_gpus))
    spec_text = include or exclude
    if spec_text:
        picked: list[int] = []
        for node in spec_text.split("@"):
            host, _, slot_text = node.partition(":")
            if host != "localhost":
                return DeepSpeedDevices(
                    None,
                    f"host {host!r} in {spec_text!r}",
                    ignored,
                    f"ValueError: Hostname '{host}' not found in hostfile",
                )
            if not slot_text:
                picked += slots
                continue
            for item in slot_text.split(","):
                if not is_int_text(item.strip()):
                    return DeepSpeedDevices(
                        None,
                        f"slot {item!r} in {spec_text!r}",
                        ignored,
                        f"ValueError: invalid literal for int() with base 10: {item!r}",
                    )
                slot = int(item)
                if slot not in slots:
                    return DeepSpeedDevices(
                        None,
                        f"slot {slot} in {spec_text!r}: the machine has {machine_gpus} GPU(s)",
                        ignored,
                        f"ValueError: No slot '{slot}' specified on host 'localhost'",
                    )
                picked.append(slot)
        chosen = sorted(set(picked))
        if exclude:
            chosen = [s for s in slots if s not in chosen]
            how = how or f"--exclude {exclude}"
        else:
            how = how or f"--include {include}"
        if not chosen:
            # launch.py then indexes an empty node list (recorded from DeepSpeed 0.19.8).
            return DeepSpeedDevices(
                None,
                f"--exclude {exclude} leaves no GPU",
                ignored,
                "IndexError: list index out of range",
            )
        return DeepSpeedDevices(",".join(str(s) for s in chosen), how, ignored)
    if num_gpus is not None and num_gpus > 0:
        # apply_num_nodes_and_gpus: range(num_gpus), not checked against the machine.
        return DeepSpeedDevices(
            ",".join(str(s) for s in range(num_gpus)), f"--num_gpus {num_gpus}", ignored
        )
    return DeepSpeedDevices(",".join(str(s) for s in slots), "every GPU (no flag)", ignored)
