"""Plain-text rendering of findings, shared by ``list`` and ``check``."""

from __future__ import annotations

from collections.abc import Iterable

from gpudiag.model import SEVERITIES, Finding

_HEADINGS = {"error": "Errors", "warning": "Warnings", "info": "Info"}


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Errors first, then warnings, then info; stable within a severity."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: rank[f.severity])


def _block(finding: Finding) -> list[str]:
    lines = [f"  {finding.code}: {finding.message}"]
    if finding.predicts:
        lines.append(f"      predicts: {finding.predicts}")
    for other in finding.predicts_also:
        lines.append(f"      also: {other}")
    if finding.fix:
        lines.append(f"      fix: {finding.fix}")
    return lines


def render_findings(findings: Iterable[Finding]) -> str:
    """Findings grouped by severity under ``Errors (n):`` headings, each with
    its ``predicts:`` and ``fix:`` lines; empty text when there are none."""
    items = list(findings)
    parts: list[str] = []
    for severity in SEVERITIES:
        group = [f for f in items if f.severity == severity]
        if not group:
            continue
        if parts:
            parts.append("")
        parts.append(f"{_HEADINGS[severity]} ({len(group)}):")
        for finding in group:
            parts.extend(_block(finding))
    return "\n".join(parts)
