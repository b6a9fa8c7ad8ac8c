"""Render a check :class:`~gpudiag.core.check.Report` for people or as JSON."""

from __future__ import annotations

import json

from gpudiag.core.check import Report
from gpudiag.model import SEVERITIES
from gpudiag.render.findings import render_findings
from gpudiag.render.text import PLAIN, Style, wrap


def _mapping(report: Report, style: Style) -> str:
    snapshot = report.snapshot
    if snapshot is None:
        return ""
    from gpudiag.render.mapping import render_mapping

    return render_mapping(report.resolution, snapshot, style)


def verdict(report: Report, *, strict: bool = False) -> str:
    """The last line: ``OK`` or ``FAILED`` and the counts."""
    counts = ", ".join(
        f"{report.count(s)} {s if s == 'info' else s + ('s' if report.count(s) != 1 else '')}"
        for s in SEVERITIES
    )
    if report.exit_code(strict=strict) == 0:
        return f"OK: {counts}"
    if report.count("error"):
        return f"FAILED: {counts}"
    return f"FAILED (--strict, warnings count): {counts}"


def render_report(report: Report, *, strict: bool = False, style: Style = PLAIN) -> str:
    """Mapping table, findings grouped by severity, then the verdict line.

    ``-q`` (``style.verbosity`` 0): the errors and the verdict line only.
    """
    line = verdict(report, strict=strict)
    colour = "red" if report.exit_code(strict=strict) else "green"
    painted = style.paint(line.split(":", 1)[0], colour, bold=True) + ":" + line.split(":", 1)[1]
    if style.verbosity == 0:
        errors = render_findings(report.findings, style)
        return "\n".join(([errors, ""] if errors else []) + [painted])
    parts = [_mapping(report, style), ""]
    if report.snapshot is not None:
        from gpudiag.render.inventory import not_asked_line

        asked = not_asked_line(report.snapshot)
        if asked:
            parts += [*wrap(asked, style.width), ""]
    if report.findings:
        parts += [render_findings(report.findings, style), ""]
    parts.append(painted)
    return "\n".join(parts)


def report_json(report: Report) -> str:
    """The ``gpudiag check --json`` document, pretty-printed."""
    return json.dumps(report.to_json(), indent=2)
