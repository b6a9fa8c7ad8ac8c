"""``gpudiag fleet --probe``: the plan every node follows, and each node's report read
back (issue 19). Pure: the worker side is :mod:`gpudiag.probes.fleet_node`, the findings
:mod:`gpudiag.core.fleet_probe_rules`.

The plan: node 0 (the first of the allocation, where torch's rank 0 runs) listens on
``MASTER_ADDR:MASTER_PORT``; every other node connects within the reach phase and is
told where node 0's key-value store is. Then the nodes of a ring (``i`` with ``i+1``,
and the last with the first) run a short all-reduce per pair, in two rounds for an
even ring and three for an odd one, so every pair of neighbours is tested and no node
is in two pairs at once. The first round has two time slots, the others one (torch's
import and the first connections fall into it). Every deadline is a wall-clock time
the parent computes (nodes of a cluster keep their clocks in step), so a dead node only
costs its partners the rest of that round, never a hang.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Seconds of ``--timeout`` kept back for the launcher's start and for sending the
#: results; the smallest ``--timeout`` the probe accepts.
MARGIN_S = 8.0
MIN_TIMEOUT_S = 20.0
#: Share of the remaining time for the reach phase (the rest is the all-reduce rounds).
REACH_SHARE = 0.4
#: The all-reduce each pair runs: 1 MiB of float32, once to warm up, then timed.
ALLREDUCE_BYTES = 1 << 20
ALLREDUCE_ITERS = 5


def ring_rounds(nodes: int) -> list[list[tuple[int, int]]]:
    """The pairs of each round: neighbours of the ring 0, 1, …, n-1, 0."""
    if nodes < 2:
        return []
    if nodes == 2:
        return [[(0, 1)]]
    rounds = [
        [(i, i + 1) for i in range(0, nodes - 1, 2)],
        [(i, i + 1) for i in range(1, nodes - 1, 2)],
    ]
    if nodes % 2 == 0:
        rounds[1].append((0, nodes - 1))  # 0 and n-1 are both free in round 1
    else:
        rounds.append([(0, nodes - 1)])
    return rounds


def pairs_of(nodes: int, node: int) -> list[tuple[int, int, int]]:
    """``(round, a, b)`` for each pair ``node`` is in, in round order."""
    return [(r, a, b) for r, pairs in enumerate(ring_rounds(nodes)) for a, b in pairs
            if node in (a, b)]  # fmt: skip


@dataclass(frozen=True)
class ProbePlan:
    """What every node's task is told (in argv: nothing in it is secret).

    Attributes:
        master_addr, master_port: where node 0 listens, as each node resolves it.
        run_id: a random name for this run's keys in the store.
        nodes: how many nodes the launcher starts.
        reach_end: the wall-clock time (epoch seconds) the reach phase ends.
        slot_s: seconds per all-reduce round; round r ends at ``reach_end + (r+2) * slot_s``
            (the first round has two slots: torch's import and the first connections).
    """

    master_addr: str
    master_port: int
    run_id: str
    nodes: int
    reach_end: float
    slot_s: float

    def round_end(self, round_: int) -> float:
        return self.reach_end + (round_ + 2) * self.slot_s

    @property
    def end(self) -> float:
        """When every node's report must be on its way."""
        return self.round_end(max(0, len(ring_rounds(self.nodes)) - 1))

    def argv(self) -> list[str]:
        return [
            "--master-addr", self.master_addr, "--master-port", str(self.master_port),
            "--run-id", self.run_id, "--reach-end", f"{self.reach_end:.3f}",
            "--slot", f"{self.slot_s:.3f}",
        ]  # fmt: skip


def make_plan(
    master_addr: str, master_port: int, run_id: str, nodes: int, timeout_s: float, now: float
) -> ProbePlan:
    """The plan for a run launched at ``now`` that must finish within ``timeout_s``."""
    budget = max(timeout_s - MARGIN_S, 1.0)
    slots = max(1, len(ring_rounds(nodes))) + 1
    reach_end = now + budget * REACH_SHARE
    return ProbePlan(master_addr, master_port, run_id, nodes, reach_end,
                     budget * (1 - REACH_SHARE) / slots)  # fmt: skip


@dataclass(frozen=True)
class Reach:
    """A node's reach result: node 0 listened (``listen``) or the node connected (``dial``)."""

    role: str
    ok: bool
    ms: float | None = None
    error: str | None = None
    heard: tuple[int, ...] = ()


@dataclass(frozen=True)
class PairRun:
    """One side's report of one pair's all-reduce."""

    peer: int
    round: int
    ok: bool
    seconds: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class NodeProbe:
    """One node's probe report (``probe`` frame), checked field by field."""

    node: int
    backend: str | None = None
    error: str | None = None
    reach: Reach | None = None
    pairs: tuple[PairRun, ...] = ()


def _text(value: Any, limit: int = 300) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) and value >= 0 else None


def read_report(doc: Any, nodes: int) -> NodeProbe | None:
    """The report in a node's ``probe`` frame; None when it is not one."""
    if not isinstance(doc, dict) or type(doc.get("node")) is not int:
        return None
    node = doc["node"]
    if not 0 <= node < nodes:
        return None
    reach = None
    raw = doc.get("reach")
    if isinstance(raw, dict) and raw.get("role") in ("listen", "dial"):
        heard: list[Any] = raw["heard"] if isinstance(raw.get("heard"), list) else []
        heard = [h for h in heard if type(h) is int]
        reach = Reach(
            role=raw["role"], ok=raw.get("ok") is True, ms=_number(raw.get("ms")),
            error=_text(raw.get("error")),
            heard=tuple(sorted({h for h in heard if isinstance(h, int) and 0 <= h < nodes})),
        )  # fmt: skip
    pairs = []
    items: list[Any] = doc["pairs"] if isinstance(doc.get("pairs"), list) else []
    for item in items:
        if not isinstance(item, dict) or type(item.get("peer")) is not int:
            continue
        peer, round_ = item["peer"], item.get("round")
        if 0 <= peer < nodes and peer != node and type(round_) is int:
            ok, seconds, error = item.get("ok") is True, item.get("seconds"), item.get("error")
            pairs.append(PairRun(peer, round_, ok, _number(seconds), _text(error)))
    return NodeProbe(node, _text(doc.get("backend"), 16), _text(doc.get("error")), reach,
                     tuple(pairs))  # fmt: skip


@dataclass(frozen=True)
class PairOutcome:
    """A pair's all-reduce, both sides' reports merged."""

    a: int
    b: int
    round: int
    ok: bool
    seconds: float | None
    error: str | None


def merge_pairs(nodes: int, reports: Mapping[int, NodeProbe]) -> list[PairOutcome]:
    """Every planned pair with what its two nodes said: ok when both say so; the time is
    the slower side's; the error the first side's that has one (or a missing report)."""
    out = []
    for round_, pairs in enumerate(ring_rounds(nodes)):
        for a, b in pairs:
            sides = []
            for me, peer in ((a, b), (b, a)):
                report = reports.get(me)
                runs = report.pairs if report else ()
                run = next((p for p in runs if p.peer == peer and p.round == round_), None)
                sides.append((me, report, run))
            ok = all(run is not None and run.ok for _, _, run in sides)
            times = [run.seconds for _, _, run in sides if run is not None and run.seconds]
            errors = []
            for me, report, run in sides:
                if report is None:
                    errors.append(f"node #{me} sent no probe report")
                elif run is None:
                    errors.append(f"node #{me} did not run it")
                elif run.error:
                    errors.append(run.error)
            error = None if ok else (errors[0] if errors else "failed")
            out.append(PairOutcome(a, b, round_, ok, max(times) if ok and times else None, error))
    return out
