"""Render a check :class:`~gpudiag.core.check.Report` for people or as JSON."""

from __future__ import annotations

import json

from gpudiag.core.check import Report
from gpudiag.model import SEVERITIES
from gpudiag.render.findings import render_findings


def _mapping(report: Report) -> str:
    snapshot = report.snapshot
    if snapshot is None:
        return ""
    from gpudiag.render.mapping import render_mapping

    return render_mapping(report.resolution, snapshot)


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


def render_report(report: Report, *, strict: bool = False) -> str:
    """Mapping table, findings grouped by severity, then the verdict line."""
    parts = [_mapping(report), ""]
    if report.findings:
        parts += [render_findings(report.findings), ""]
    parts.append(verdict(report, strict=strict))
    return "\n".join(parts)


def report_json(report: Report) -> str:
    """The ``gpudiag check --json`` document, pretty-printed."""
    return json.dumps(report.to_json(), indent=2)
