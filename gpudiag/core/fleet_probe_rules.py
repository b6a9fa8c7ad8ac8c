"""The ``FLEET-PROBE-`` findings of ``gpudiag fleet --probe`` (issue 19): pure functions of
the plan and the nodes' reports (:mod:`gpudiag.core.fleet_probe`).

A node already named elsewhere is not blamed again: one that gave no snapshot
(``FLEET-NODE-NO-ANSWER``) or could not reach the rendezvous address
(``FLEET-PROBE-UNREACHABLE``) explains its partners' failed pairs. Otherwise a node is
blamed for failing all-reduces when every pair it is in failed while its partners
succeeded with their other neighbour, and for slowness when even its fastest pair is
several times slower than the pairs without it; where no single node explains a
failure (two nodes, or neighbours that both fail), the pair is named.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from gpudiag.core.fleet import FleetNode
from gpudiag.core.fleet_probe import NodeProbe, PairOutcome, ProbePlan, merge_pairs
from gpudiag.model import Finding

#: A node is slow when its fastest pair takes this many times the median of the pairs
#: without it, and at least SLOW_MIN_S more (below that, timing noise).
SLOW_RATIO = 4.0
SLOW_MIN_S = 0.02
SHOWN = 6


def _joined(parts: Sequence[str]) -> str:
    more = f"; and {len(parts) - SHOWN} more" if len(parts) > SHOWN else ""
    return "; ".join(parts[:SHOWN]) + more


def probe_findings(
    nodes: Sequence[FleetNode], plan: ProbePlan, reports: Mapping[int, NodeProbe],
    missing: Mapping[int, str], *, cut_short: bool = False,
) -> list[Finding]:  # fmt: skip
    """FLEET-PROBE- findings; ``nodes`` are labelled, one per planned node, in order.
    ``cut_short``: the launcher ended the step before the plan did (srun does when a
    node's task fails to start): a report it cut off is that node's doing, not this one's."""
    label = [n.label or n.source for n in nodes]
    silent = {i for i, n in enumerate(nodes) if n.snapshot is None}
    where = f"MASTER_ADDR={plan.master_addr}:{plan.master_port}"
    out: list[Finding] = []
    lead = reports.get(0)
    listening = lead is not None and lead.reach is not None and lead.reach.ok
    excused = set(silent)
    if lead is not None and lead.reach is not None and not lead.reach.ok:
        out.append(Finding(
            code="FLEET-PROBE-NO-LISTENER", severity="error",
            message=f"{label[0]}, the first node (where torch's rank 0 runs and hosts the "
                    f"store), cannot listen on {where}: {lead.reach.error}. No node can "
                    "meet there: the job's rendezvous fails the same way.",
            fix="set MASTER_ADDR to the first node's own address (scontrol show hostnames "
                "$SLURM_JOB_NODELIST | head -n1) and MASTER_PORT to a free port",
            subject=label[0],
        ))  # fmt: skip
        excused |= set(range(len(nodes)))
    unreachable = []
    for i, report in sorted(reports.items()):
        if i and report.reach is not None and not report.reach.ok and i not in excused:
            unreachable.append(i)
            excused.add(i)
    if unreachable:
        cause = ("" if listening or 0 not in silent else
                 f" ({label[0]}, which listens there, gave no answer)")  # fmt: skip
        shown = [f"{label[i]}: {reports[i].reach.error}" for i in unreachable]  # type: ignore[union-attr]
        out.append(Finding(
            code="FLEET-PROBE-UNREACHABLE", severity="error",
            message=f"{len(unreachable)} of {len(nodes)} nodes cannot open a TCP connection "
                    f"to {where}{cause}: {_joined(shown)}. Their ranks would never reach "
                    "rank 0's store.",
            fix="check the route and firewall between those nodes and the first one (nc -vz "
                "ADDR PORT from the node; the port must be open to every node of the job), "
                "and that MASTER_ADDR resolves to the same address everywhere",
            subject=",".join(label[i] for i in unreachable[:SHOWN]),
        ))  # fmt: skip
    outcomes = merge_pairs(len(nodes), reports)
    if cut_short and silent:
        excused |= {i for i in range(len(nodes)) if i not in reports}
    failed = _failures(nodes, label, outcomes, reports, missing, excused)
    if failed:
        out.append(failed)
    slow = _slow(label, outcomes, excused)
    if slow:
        out.append(slow)
    return out


def _failures(
    nodes: Sequence[FleetNode], label: Sequence[str], outcomes: Sequence[PairOutcome],
    reports: Mapping[int, NodeProbe], missing: Mapping[int, str], excused: set[int],
) -> Finding | None:  # fmt: skip
    blamed: dict[int, str] = {}
    for i in range(len(nodes)):
        if i in excused:
            continue
        if i not in reports:
            blamed[i] = missing.get(i, "no probe report")
        elif reports[i].error:
            blamed[i] = str(reports[i].error)
    mine: dict[int, list[PairOutcome]] = {}
    for o in outcomes:
        mine.setdefault(o.a, []).append(o)
        mine.setdefault(o.b, []).append(o)
    for i, pairs in mine.items():
        if i in excused or i in blamed or any(o.ok for o in pairs):
            continue
        partners = [o.b if o.a == i else o.a for o in pairs]
        if any(any(q.ok for q in mine.get(p, ())) for p in partners):
            blamed[i] = "every all-reduce with it failed: " + "; ".join(
                f"with {label[o.b if o.a == i else o.a]}: {o.error}" for o in pairs)  # fmt: skip
    loose = [o for o in outcomes if not o.ok and not ({o.a, o.b} & (excused | set(blamed)))]
    if not blamed and not loose:
        return None
    parts = [f"{label[i]}: {why}" for i, why in sorted(blamed.items())]
    parts += [f"{label[o.a]} with {label[o.b]}: {o.error}" for o in loose]
    subject = [label[i] for i in sorted(blamed)] + [f"{label[o.a]}-{label[o.b]}" for o in loose]
    return Finding(
        code="FLEET-PROBE-FAILED", severity="error",
        message=f"The short all-reduce between neighbouring nodes failed: {_joined(parts)}. "
                "The job's first collective would hang or fail the same way.",
        fix="run the job without that node (sbatch --exclude=NAME), and check its network "
            "(NCCL_DEBUG=INFO, GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME, firewalls between "
            "the nodes) and its torch install",
        subject=",".join(subject[:SHOWN]),
    )  # fmt: skip


def _slow(
    label: Sequence[str], outcomes: Sequence[PairOutcome], excused: set[int]
) -> Finding | None:
    timed = [(o.a, o.b, o.seconds) for o in outcomes if o.ok and o.seconds is not None]
    hits, who = [], []
    for i in sorted({n for a, b, _ in timed for n in (a, b)} - excused):
        own = [t for a, b, t in timed if i in (a, b)]
        others = [t for a, b, t in timed if i not in (a, b)]
        if not own or not others:
            continue
        fastest, usual = min(own), statistics.median(others)
        if fastest > SLOW_RATIO * usual and fastest - usual > SLOW_MIN_S:
            who.append(label[i])
            hits.append(f"{label[i]} takes {fastest * 1000:.0f} ms at best, against "
                        f"{usual * 1000:.1f} ms for the pairs without it")  # fmt: skip
    if not hits:
        return None
    return Finding(
        code="FLEET-PROBE-SLOW", severity="warning",
        message=f"All-reduces of 1 MiB are much slower with some nodes: {_joined(hits)}. "
                "Every collective of the job runs at the pace of its slowest link.",
        fix="check that node's network link (speed, errors: ethtool, ibstat) and load; "
            "exclude it (sbatch --exclude=NAME) if it stays slow",
        subject=",".join(who[:SHOWN]),
    )  # fmt: skip
