"""The facts the walker extracts from a script, in execution order.

Rules (``rules_*.py``) are pure functions of :class:`Facts`. Each :class:`Event`
has a sequence number (its place in the walker's approximation of execution
order) and the *process* it runs in: ``main`` for the script's own process,
``spawn:NAME`` / ``fork:NAME`` for a function started by a multiprocessing
launcher, ``def:NAME`` for a function nothing in the file calls.
"""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass, field

from gpudiag.lint.syntax import assign_counts, unparse
from gpudiag.lint.values import Val

_PREFIX_RE = re.compile(
    r"""['"]module\.?['"]|\[\s*7\s*:|\[\s*len\(\s*['"]module|consume_prefix_in_state_dict"""
)


@dataclass
class Event:
    """One thing the script does."""

    seq: int
    kind: str
    node: ast.AST
    proc: str
    val: Val | None = None
    data: dict[str, object] = field(default_factory=dict)

    @property
    def line(self) -> int:
        return int(getattr(self.node, "lineno", 1))

    @property
    def col(self) -> int:
        return int(getattr(self.node, "col_offset", 0)) + 1

    def text(self, name: str, default: str = "") -> str:
        """A text datum; one held as a syntax node is written out (``unparse``) only
        when a rule asks for it: most events never become a finding."""
        value = self.data.get(name, default)
        if isinstance(value, ast.AST):
            value = self.data[name] = unparse(value)
        return value if isinstance(value, str) else default


#: what a walk of a body did that the statements after its call depend on: a call whose
#: body is not walked again (the walker's bound) still does it (Walker.replay)
SETUP_KINDS = ("set_device", "set_device_via", "init_pg", "init_pg_via", "opaque_setup")


@dataclass(frozen=True)
class Setup:
    """What one body (with the calls it made) set up for the rest of its process."""

    sets_device: bool = False
    opaque: bool = False
    #: the backends of its init_process_group calls (None: not read); empty: none made
    backends: frozenset[str | None] = frozenset()
    inits: bool = False

    def __or__(self, other: Setup) -> Setup:
        return Setup(
            self.sets_device or other.sets_device,
            self.opaque or other.opaque,
            self.backends | other.backends,
            self.inits or other.inits,
        )


@dataclass
class Facts:
    """Everything the rules look at."""

    events: list[Event] = field(default_factory=list)
    #: dotted names the script reads ``.parameters()`` of: its models
    param_owners: set[str] = field(default_factory=set)
    #: the script reads a torchrun / Slurm rank variable (so each rank runs the whole file)
    reads_launcher_rank: bool = False
    #: the script reads LOCAL_RANK (or another node-local rank variable) from the environment
    reads_local_rank_env: bool = False
    #: ... and the read is the file's own, or a test helper's (a project module in a test
    #: folder): a test harness that tells the local rank apart (single_node.py)
    harness_reads_local_rank: bool = False
    source_lines: list[str] = field(default_factory=list)
    by_kind: dict[str, list[Event]] = field(default_factory=dict)
    #: per-file memo for rules (e.g. the parsed CUDA_VISIBLE_DEVICES values)
    cache: dict[str, object] = field(default_factory=dict)
    tree: ast.Module | None = None
    #: frameworks the script (or a project module it calls) uses: deepspeed, accelerate…
    #: (gpudiag.lint.linked.FRAMEWORKS); they set devices up and launch in their own way
    frameworks: set[str] = field(default_factory=set)
    #: the launchers the project's shell scripts start this file with (launch_scripts.py)
    launched_by: frozenset[str] = frozenset()
    #: the file the module was read from (None: source text, stdin)
    path: str | None = None
    #: the event sequence numbers (start, end] of walks of tests that do not run on
    #: current torch (gpudiag.lint.skips)
    skipped: list[tuple[int, int]] = field(default_factory=list)

    @property
    def assign_counts(self) -> dict[str, int]:
        """How many times each dotted name is assigned in the file (loops count twice)."""
        counts = self.cache.get("assign_counts")
        if not isinstance(counts, dict):
            counts = assign_counts(self.tree) if self.tree is not None else {}
            self.cache["assign_counts"] = counts
        return counts

    @property
    def strips_prefix(self) -> bool:
        """The file strips (or adds) the ``module.`` prefix somewhere: a ``"module."``
        string (removeprefix, replace, startswith), ``k[7:]``, or
        ``consume_prefix_in_state_dict_if_present``. Read from the text: faster than
        walking the tree, and a mention in a comment only makes the rules quieter."""
        return any(_PREFIX_RE.search(line) for line in self.source_lines)

    def add(self, ev: Event) -> None:
        self.events.append(ev)
        self.by_kind.setdefault(ev.kind, []).append(ev)

    def of(self, *kinds: str) -> list[Event]:
        """The events of these kinds, in execution order."""
        if len(kinds) == 1:
            return list(self.by_kind.get(kinds[0], ()))
        found = [e for k in kinds for e in self.by_kind.get(k, ())]
        found.sort(key=lambda e: e.seq)
        return found

    def setup_since(self, seq: int) -> Setup | None:
        """What the events after ``seq`` set up (None: nothing). Each kind's events are
        in order, so a kind is looked at from its end only: no scan of the walk."""
        found: dict[str, list[Event]] = {}
        for kind in SETUP_KINDS:
            events = self.by_kind.get(kind)
            at = len(events) if events else 0
            while at and events is not None and events[at - 1].seq > seq:
                at -= 1
            if events and at < len(events):
                found[kind] = events[at:]
        if not found:
            return None
        inits = [*found.get("init_pg", ()), *found.get("init_pg_via", ())]
        return Setup(
            sets_device="set_device" in found or "set_device_via" in found,
            opaque="opaque_setup" in found,
            backends=frozenset(_backend(e) for e in inits),
            inits=bool(inits),
        )

    def first(self, kind: str) -> Event | None:
        events = self.by_kind.get(kind)
        return events[0] if events else None

    # Lookups by process and position, each an index built once per kind: rules ask
    # them once per event, and a scan per event was quadratic (issue 21: a mask and
    # 16,000 device uses took 199 s).

    def _by_proc(self, kind: str) -> dict[str, tuple[list[int], list[Event]]]:
        key = f"by_proc:{kind}"
        cached = self.cache.get(key)
        if isinstance(cached, dict):
            return cached
        index: dict[str, tuple[list[int], list[Event]]] = {}
        for ev in self.by_kind.get(kind, ()):
            seqs, events = index.setdefault(ev.proc, ([], []))
            seqs.append(ev.seq)
            events.append(ev)
        self.cache[key] = index
        return index

    def procs(self, kind: str) -> set[str]:
        """The processes with an event of this kind."""
        return set(self._by_proc(kind))

    def first_in(self, kind: str, proc: str) -> Event | None:
        """The first event of this kind in ``proc``."""
        found = self._by_proc(kind).get(proc)
        return found[1][0] if found else None

    def last_before(self, kind: str, proc: str, seq: int) -> Event | None:
        """The last event of this kind in ``proc`` that runs before ``seq``."""
        found = self._by_proc(kind).get(proc)
        if not found:
            return None
        at = bisect.bisect_left(found[0], seq)
        return found[1][at - 1] if at else None

    def first_after(self, kind: str, proc: str, seq: int) -> Event | None:
        """The first event of this kind in ``proc`` that runs after ``seq``."""
        found = self._by_proc(kind).get(proc)
        if not found:
            return None
        at = bisect.bisect_right(found[0], seq)
        return found[1][at] if at < len(found[1]) else None


def _backend(ev: Event) -> str | None:
    backend = ev.data.get("backend")
    return backend if isinstance(backend, str) else None
