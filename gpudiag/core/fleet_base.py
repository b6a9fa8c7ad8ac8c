"""The machinery of ``gpudiag fleet``'s comparison (issue 19): the nodes, how findings
name them, and the two shapes of a fleet finding: a fact that differs between nodes
(:func:`_skew`, the largest group is "the others") and a per-node test (:func:`_per_node`).

Linear in the nodes. The rules live in :mod:`gpudiag.core.fleet` and
:mod:`gpudiag.core.fleet_rdma`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from gpudiag.model import Finding, Severity, Snapshot

#: How many node names one finding lists before "and N more".
NAMES_SHOWN = 6


@dataclass(frozen=True)
class FleetNode:
    """One node of the comparison: its snapshot, or why there is none.

    ``source`` names where it came from (a file, or the node name Slurm gave);
    ``label`` is how findings and rows name it (:func:`label_nodes`).
    """

    source: str
    snapshot: Snapshot | None
    error: str | None = None
    label: str = ""


def label_nodes(nodes: Sequence[FleetNode]) -> list[FleetNode]:
    """Each node named by its hostname; by ``hostname (source)`` where two share one,
    and by its source where the hostname is unknown."""
    from dataclasses import replace

    counts: dict[str, int] = {}
    for node in nodes:
        if node.snapshot is not None and node.snapshot.hostname:
            counts[node.snapshot.hostname] = counts.get(node.snapshot.hostname, 0) + 1
    out = []
    for node in nodes:
        host = node.snapshot.hostname if node.snapshot is not None else None
        if not host:
            label = node.source
        elif counts[host] > 1 and node.source != host:
            label = f"{host} ({node.source})"
        else:
            label = host
        out.append(replace(node, label=label))
    return out


def names(labels: Sequence[str], limit: int = NAMES_SHOWN) -> str:
    """``a, b and c``; past ``limit``: ``a, b, … and 97 more``."""
    shown = list(labels[:limit])
    if len(labels) > limit:
        return f"{', '.join(shown)} and {len(labels) - limit} more"
    if len(shown) == 1:
        return shown[0]
    return f"{', '.join(shown[:-1])} and {shown[-1]}"


def _nodes(count: int) -> str:
    return f"{count} node" if count == 1 else f"{count} nodes"


def _skew(
    nodes: Sequence[FleetNode],
    value: Callable[[Snapshot], Hashable | None],
    *,
    code: str,
    severity: Severity,
    what: str,
    fix: str,
    shown: Callable[[Hashable], str] = str,
) -> Finding | None:
    """One finding when the nodes that recorded ``value`` disagree on it."""
    groups: dict[Hashable, list[str]] = {}
    for node in nodes:
        if node.snapshot is None:
            continue
        v = value(node.snapshot)
        if v is not None:
            groups.setdefault(v, []).append(node.label)
    if len(groups) < 2:
        return None
    ordered = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    majority_value, majority = ordered[0]
    tied = len(ordered[1][1]) == len(majority)
    parts = []
    for v, labels in ordered[1:] if not tied else ordered:
        verb = "has" if len(labels) == 1 else "have"
        parts.append(f"{names(labels)} {verb} {shown(v)}")
    if not tied:
        parts.append(f"the other {_nodes(len(majority))} {shown(majority_value)}")
    odd = [label for v, labels in ordered[1:] for label in labels]
    return Finding(
        code=code,
        severity=severity,
        message=f"{what} differs between nodes: {'; '.join(parts)}.",
        fix=fix,
        subject=",".join(odd[:NAMES_SHOWN]),
    )


def _per_node(
    nodes: Sequence[FleetNode],
    test: Callable[[Snapshot], str | None],
    *,
    code: str,
    severity: Severity,
    fix: str,
) -> Finding | None:
    """One finding naming every node where ``test`` returns a reason."""
    hits: list[tuple[str, str]] = []
    for node in nodes:
        if node.snapshot is not None:
            reason = test(node.snapshot)
            if reason:
                hits.append((node.label, reason))
    if not hits:
        return None
    shown = "; ".join(f"{label}: {reason}" for label, reason in hits[:NAMES_SHOWN])
    more = f"; and {len(hits) - NAMES_SHOWN} more nodes" if len(hits) > NAMES_SHOWN else ""
    return Finding(
        code=code,
        severity=severity,
        message=f"On {_nodes(len(hits))} of {len(nodes)}: {shown}{more}.",
        fix=fix,
        subject=",".join(label for label, _ in hits[:NAMES_SHOWN]),
    )


def _duplicates(nodes: Sequence[FleetNode], key: Callable[[Snapshot], str | None]) -> list[str]:
    seen: dict[str, list[str]] = {}
    for node in nodes:
        if node.snapshot is not None:
            k = key(node.snapshot)
            if k:
                seen.setdefault(k, []).append(node.source)
    return [f"{k} ({names(v)})" for k, v in seen.items() if len(v) > 1]
