"""``gpudiag fleet``'s report: one row per node, then the FLEET- findings (issue 19)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpudiag.core.fleet import FleetNode, node_health
from gpudiag.core.fleet_probe import NodeProbe, ProbePlan, merge_pairs
from gpudiag.model import Finding, Snapshot
from gpudiag.render.findings import render_findings, sort_findings
from gpudiag.render.table import format_table
from gpudiag.render.text import PLAIN, Style, safe

FLEET_SCHEMA = "gpudiag-fleet/1"
HEADERS = ("node", "GPUs", "driver", "CUDA", "torch", "NCCL", "OS/image", "health")
#: Widest cell per column, so that the table fits 100 columns.
_WIDTH = (18, 17, 10, 4, 11, 6, 12, 8)


def _cut(text: str, width: int) -> str:
    text = safe(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _gpus(s: Snapshot) -> str:
    nvml = s.sources.get("nvml")
    if nvml is not None and nvml.status != "ok":
        return f"? ({nvml.status})"
    counts: dict[str, int] = {}
    for g in s.gpus:
        if not g.lost:
            name = (g.name or "?").removeprefix("NVIDIA ")
            counts[name] = counts.get(name, 0) + 1
    return " + ".join(f"{n}x {name}" for name, n in counts.items()) or "0"


def node_row(node: FleetNode) -> tuple[str, ...]:
    """The table row of one node (``-`` where a fact was not recorded)."""
    s = node.snapshot
    if s is None:
        cells = (node.label, "-", "-", "-", "-", "-", "-", "NO ANSWER")
    else:
        torch = s.torch.version if s.torch else None
        nccl = s.node.nccl_version if s.node else None
        os_name = s.node.os_name if s.node else None
        cells = (
            node.label,
            _gpus(s),
            s.driver_version or "-",
            s.cuda_driver_version or "-",
            torch or "-",
            nccl or "-",
            os_name or "-",
            ", ".join(node_health(s)) or "ok",
        )
    return tuple(_cut(c, w) for c, w in zip(cells, _WIDTH, strict=True))


@dataclass(frozen=True)
class ProbeView:
    """What ``--probe`` found, for the report: the plan, each node's report, and why a
    node sent none."""

    plan: ProbePlan
    reports: Mapping[int, NodeProbe]
    missing: Mapping[int, str]
    cut_short: bool = False

    def backend(self) -> str | None:
        return next((r.backend for _, r in sorted(self.reports.items()) if r.backend), None)


def _probe_lines(nodes: Sequence[FleetNode], probe: ProbeView) -> list[str]:
    plan = probe.plan
    label = [n.label or n.source for n in nodes]
    lead = probe.reports.get(0)
    heard = len(lead.reach.heard) if lead and lead.reach and lead.reach.ok else 0
    head = (f"Probe: MASTER_ADDR={safe(plan.master_addr)}:{plan.master_port} "
            f"({probe.backend() or 'no backend'}); {heard} of {max(0, len(nodes) - 1)} other "
            "node(s) reached it")  # fmt: skip
    rows = []
    for o in merge_pairs(len(nodes), probe.reports):
        result = f"{o.seconds * 1000:.1f} ms" if o.ok and o.seconds else "ok" if o.ok else "FAILED"
        rows.append((_cut(f"{label[o.a]} - {label[o.b]}", 40), str(o.round + 1), result))
    lines = [head]
    if rows:
        lines += ["", format_table(("pair", "round", "all-reduce 1 MiB"), rows)]
    return [*lines, ""]


def render_fleet(
    nodes: Sequence[FleetNode], findings: Sequence[Finding], *, source: str, style: Style = PLAIN,
    probe: ProbeView | None = None,
) -> str:  # fmt: skip
    """The human report: the node table, the probe's pairs, the findings, and a verdict."""
    lines = [f"gpudiag fleet: {len(nodes)} node{'s' if len(nodes) != 1 else ''} ({source})", ""]
    lines.append(format_table(HEADERS, [node_row(n) for n in nodes]))
    lines.append("")
    if probe is not None:
        lines += _probe_lines(nodes, probe)
    ordered = sort_findings(findings)
    text = render_findings(ordered, style)
    if text:
        lines += [text, ""]
    errors = sum(1 for f in findings if f.severity == "error")
    warnings = sum(1 for f in findings if f.severity == "warning")
    if not findings:
        lines.append("The nodes agree: no difference found.")
    else:
        lines.append(f"{errors} error(s), {warnings} warning(s).")
    return "\n".join(lines) + "\n"


def probe_to_json(nodes: Sequence[FleetNode], probe: ProbeView) -> dict[str, Any]:
    """The ``probe`` object of ``gpudiag fleet --json`` (docs/cli.md)."""
    label = [n.label or n.source for n in nodes]
    rows = []
    for i, _ in enumerate(nodes):
        report = probe.reports.get(i)
        reach = report.reach if report else None
        error = (reach.error if reach and not reach.ok else None) or (
            report.error if report else probe.missing.get(i)
        )
        rows.append({
            "node": label[i], "role": reach.role if reach else None,
            "reached": reach.ok if reach else None,
            "connect_ms": reach.ms if reach else None, "error": error,
        })  # fmt: skip
    pairs = [
        {"nodes": [label[o.a], label[o.b]], "round": o.round + 1, "ok": o.ok,
         "seconds": o.seconds, "error": o.error}
        for o in merge_pairs(len(nodes), probe.reports)
    ]  # fmt: skip
    return {
        "master_addr": probe.plan.master_addr, "master_port": probe.plan.master_port,
        "backend": probe.backend(), "nodes": rows, "pairs": pairs,
    }  # fmt: skip


def fleet_to_json(
    nodes: Sequence[FleetNode], findings: Sequence[Finding], probe: ProbeView | None = None
) -> dict[str, Any]:
    """``gpudiag fleet --json`` (docs/cli.md)."""
    rows = []
    for node in nodes:
        s = node.snapshot
        rows.append(
            {
                "node": node.label,
                "source": node.source,
                "answered": s is not None,
                "error": node.error,
                "hostname": s.hostname if s else None,
                "gpu_count": None if s is None else sum(1 for g in s.gpus if not g.lost),
                "gpu_models": None if s is None else sorted({g.name for g in s.gpus if g.name}),
                "driver_version": s.driver_version if s else None,
                "cuda_driver_version": s.cuda_driver_version if s else None,
                "torch_version": s.torch.version if s and s.torch else None,
                "nccl_version": s.node.nccl_version if s and s.node else None,
                "os_name": s.node.os_name if s and s.node else None,
                "health": [] if s is None else node_health(s),
            }
        )
    ordered = sort_findings(findings)
    return {
        "schema": FLEET_SCHEMA,
        "nodes": rows,
        "probe": None if probe is None else probe_to_json(nodes, probe),
        "findings": [f.to_json() for f in ordered],
        "errors": sum(1 for f in findings if f.severity == "error"),
        "warnings": sum(1 for f in findings if f.severity == "warning"),
    }
