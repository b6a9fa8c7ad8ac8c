"""Plain-text rendering of findings, shared by every command."""

from __future__ import annotations

from collections.abc import Iterable

from gpudiag.model import SEVERITIES, Finding


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Errors first, then warnings, then info; stable within a severity."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: rank[f.severity])


def render_findings(findings: Iterable[Finding]) -> str:
    """One block per finding: ``[severity] CODE: message`` then its predicts/fix lines."""
    lines: list[str] = []
    for f in sort_findings(findings):
        lines.append(f"[{f.severity}] {f.code}: {f.message}")
        if f.predicts:
            lines.append(f"    predicts: {f.predicts}")
        if f.fix:
            lines.append(f"    fix: {f.fix}")
    return "\n".join(lines)


def findings_summary(findings: Iterable[Finding]) -> str:
    """E.g. ``1 error, 2 warnings, 0 info``."""
    items = list(findings)
    counts = {s: sum(1 for f in items if f.severity == s) for s in SEVERITIES}
    errors = counts["error"]
    warnings = counts["warning"]
    return (
        f"{errors} error{'s' if errors != 1 else ''}, "
        f"{warnings} warning{'s' if warnings != 1 else ''}, {counts['info']} info"
    )
