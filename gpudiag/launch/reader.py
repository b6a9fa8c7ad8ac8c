"""One reader of the launcher environment: every launcher's variables, as a :class:`Launch`.

Pure: a mapping of environment variables in, a :class:`Launch` out. Each launcher
hands a rank its place through its own variables (the table:
:mod:`gpudiag.launch.table`); this module reads them all into one description
(which launcher, global and local rank and sizes, node, torch's rendezvous
address), strictly parsed by :func:`read_field`, the one reading that ``check``
and ``probe`` share.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpudiag.launch.ints import FIELD_MINIMUM, parse_env_int, read_int
from gpudiag.launch.table import FIELDS, SPECS, LauncherSpec, present_launchers

_TASKS_ITEM = re.compile(r"([0-9]+)(?:\(x([0-9]+)\))?")


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
        count = parse_env_int(m.group(1))
        repeat = parse_env_int(m.group(2)) if m.group(2) is not None else 1
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


def read_field(
    env: Mapping[str, str], var: str, field_name: str
) -> tuple[int | None, Problem | None]:
    """One launcher variable for ``field_name`` (``rank``...): its value, or why not.

    The one reading of a launcher variable (:func:`gpudiag.launch.ints.read_int`),
    shared by :func:`read_launch` (check) and :func:`gpudiag.launch.process.detect_launch`
    (probe). ``(None, None)`` when the variable is unset.
    """
    raw = env.get(var)
    if raw is None:
        return None, None
    if var == "SLURM_NTASKS_PER_NODE":
        tasks = parse_tasks_per_node(raw, parse_env_int(env.get("SLURM_NODEID", "")))
        if tasks is None:
            return None, Problem(var, raw, "not a Slurm task count (N or N(xM))")
        return (tasks if not isinstance(tasks, bool) else None), None
    text = read_int(raw)
    if text.value is None:
        return None, Problem(var, raw, text.reason)
    if text.value < FIELD_MINIMUM[field_name]:
        return None, Problem(var, raw, f"below {FIELD_MINIMUM[field_name]}")
    return text.value, None


def read_view(env: Mapping[str, str], name: str, problems: list[Problem]) -> LauncherView:
    """One launcher's variables, strictly parsed; what cannot be used goes to ``problems``."""
    spec = SPECS[name]
    values: dict[str, int | None] = {}
    for field_name in FIELDS:
        var = spec.var(field_name)
        value, problem = read_field(env, var, field_name) if var else (None, None)
        if problem is not None:
            problems.append(problem)
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
    port = parse_env_int(env.get("MASTER_PORT", ""))
    port = port if port is not None and 1 <= port <= 65535 else None
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
