"""Plain-text rendering of findings, shared by ``list`` and ``check``.

Findings wrap to the terminal's width with a hanging indent and are escaped
(:func:`gpudiag.render.text.safe`). The core words them as they are shown: nothing
here rewrites a finding's text.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpudiag.model import SEVERITIES, Finding
from gpudiag.render.text import PLAIN, SEVERITY_COLOUR, Style, safe, wrap

_HEADINGS = {"error": "Errors", "warning": "Warnings", "info": "Info"}


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Errors first, then warnings, then info; stable within a severity."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: rank[f.severity])


def _block(finding: Finding, style: Style) -> list[str]:
    width = style.width
    code = style.paint(finding.code, SEVERITY_COLOUR[finding.severity], bold=True)
    head = wrap(f"{finding.code}: {safe(finding.message)}", width, indent="  ")
    head[0] = head[0].replace(finding.code, code, 1)
    lines = head
    if finding.predicts and style.verbosity >= 1:
        lines += wrap(f"predicts: {safe(finding.predicts)}", width, indent="    ")
    for other in finding.predicts_also if style.verbosity >= 1 else ():
        lines += wrap(f"also: {safe(other)}", width, indent="    ")
    if finding.fix and style.verbosity >= 1:
        lines += wrap(f"fix: {safe(finding.fix)}", width, indent="    ")
    return lines


def render_findings(findings: Iterable[Finding], style: Style = PLAIN) -> str:
    """Findings grouped by severity under ``Errors (n):`` headings, each with
    its ``predicts:`` and ``fix:`` lines; empty text when there are none.

    With ``style.verbosity`` 0 (``-q``) only errors are shown, without their
    ``predicts``/``fix`` lines.
    """
    items = list(findings)
    parts: list[str] = []
    for severity in SEVERITIES:
        if style.verbosity == 0 and severity != "error":
            continue
        group = [f for f in items if f.severity == severity]
        if not group:
            continue
        if parts:
            parts.append("")
        heading = f"{_HEADINGS[severity]} ({len(group)}):"
        parts.append(style.paint(heading, SEVERITY_COLOUR[severity], bold=True))
        for finding in group:
            parts.extend(_block(finding, style))
    return "\n".join(parts)
