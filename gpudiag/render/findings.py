"""Plain-text rendering of findings, shared by ``list`` and ``check``.

Findings wrap to the terminal's width with a hanging indent, are escaped
(:func:`gpudiag.render.text.safe`), and name each GPU once: the core's
``GPU 3 (nvidia-smi index 3)`` reads ``GPU 3`` here, since gpudiag's GPU
numbers are nvidia-smi's (the ``GPU`` column of ``gpudiag list``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpudiag.model import SEVERITIES, Finding
from gpudiag.render.text import PLAIN, SEVERITY_COLOUR, Style, safe, wrap

_HEADINGS = {"error": "Errors", "warning": "Warnings", "info": "Info"}

# "GPU 3 (nvidia-smi index 3)" → "GPU 3"; "GPU 3 (nvidia-smi index 3, X)" → "GPU 3 (X)".
_TWICE = re.compile(r"GPU (\d+) \(nvidia-smi index \1(?:\)|, )")


def name_gpus_once(text: str) -> str:
    """Drop the nvidia-smi index repeated after a GPU number that already is one."""

    def shorter(match: re.Match[str]) -> str:
        number = match.group(1)
        return f"GPU {number}" if match.group(0).endswith(")") else f"GPU {number} ("

    return _TWICE.sub(shorter, text)


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Errors first, then warnings, then info; stable within a severity."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: rank[f.severity])


def _block(finding: Finding, style: Style) -> list[str]:
    width = style.width
    code = style.paint(finding.code, SEVERITY_COLOUR[finding.severity], bold=True)
    head = wrap(f"{finding.code}: {name_gpus_once(safe(finding.message))}", width, indent="  ")
    head[0] = head[0].replace(finding.code, code, 1)
    lines = head
    if finding.predicts and style.verbosity >= 1:
        lines += wrap(f"predicts: {safe(finding.predicts)}", width, indent="    ")
    for other in finding.predicts_also if style.verbosity >= 1 else ():
        lines += wrap(f"also: {safe(other)}", width, indent="    ")
    if finding.fix and style.verbosity >= 1:
        lines += wrap(f"fix: {name_gpus_once(safe(finding.fix))}", width, indent="    ")
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
