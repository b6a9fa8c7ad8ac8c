"""The result of ``gpudiag lint``: findings at file positions, JSON like ``check --json``."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudiag.lint.codes import LintFinding
from gpudiag.model import SEVERITIES

if TYPE_CHECKING:  # importing gpudiag.core.check costs start-up time lint alone never needs
    from gpudiag.core.check import Report

#: Version of the ``gpudiag lint --json`` document (docs/lint.md).
LINT_SCHEMA = "gpudiag-lint/1"
WIDTH = 100


@dataclass(frozen=True)
class LintReport:
    """Findings over one or more files; ``check`` is the ``--check`` report, if any."""

    files: tuple[str, ...]
    findings: tuple[LintFinding, ...]
    check: Report | None = None

    @property
    def ok(self) -> bool:
        return not any(f.finding.severity == "error" for f in self.findings)

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.finding.severity == severity)

    def exit_code(self, *, strict: bool = False) -> int:
        """0 clean (warnings allowed), 1 errors, or warnings under ``strict`` (as ``check``)."""
        if self.count("error") or (strict and self.count("warning")):
            return 1
        return 0

    def to_json(self) -> dict[str, object]:
        """``check --json``'s document, each finding with ``path``, ``line``, ``col``."""
        if self.check is not None:
            doc = self.check.to_json()
            checks = ["lint", *self.check.checks]
        else:
            doc = {
                "cuda_visible_devices": None,
                "cuda_device_order": None,
                "certain": True,
                "cuinit_error": None,
                "visible": [],
            }
            checks = ["lint"]
        return {
            "schema": LINT_SCHEMA,
            "ok": self.ok,
            "cuda_visible_devices": doc["cuda_visible_devices"],
            "cuda_device_order": doc["cuda_device_order"],
            "certain": doc["certain"],
            "cuinit_error": doc.get("cuinit_error"),
            "visible": doc["visible"],
            "checks": checks,
            "counts": {s: self.count(s) for s in SEVERITIES},
            "findings": [f.to_json() for f in self.findings],
            "files": list(self.files),
        }


def escape(text: str) -> str:
    """Make text safe for a terminal: control and format characters become escapes."""
    out: list[str] = []
    for ch in text:
        if ch == " " or unicodedata.category(ch)[0] not in ("C", "Z"):
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)


def _wrap(head: str, text: str, indent: str) -> list[str]:
    # The head (``path:line:col: CODE [severity] ``) is never split, so editors and CI
    # annotations find the location and code on the first line, whatever the path's length;
    # the first line holds at least one word, the rest wraps at WIDTH.
    import textwrap  # only when findings are printed: start-up time

    words = text.split()
    first = head + (words.pop(0) if words else "")
    while words and len(first) + 1 + len(words[0]) <= WIDTH:
        first += " " + words.pop(0)
    rest = textwrap.wrap(
        " ".join(words),
        width=WIDTH,
        initial_indent=indent,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [first.rstrip(), *rest]


def render_finding(f: LintFinding) -> list[str]:
    """``path:line:col: CODE [severity] message`` then ``predicts:`` and ``fix:``, wrapped."""
    head = f"{escape(f.path)}:{f.line}:{f.col}: {f.finding.code} [{f.finding.severity}] "
    lines = _wrap(head, escape(f.finding.message), "    ")
    if f.finding.predicts:
        lines += _wrap("    predicts: ", escape(f.finding.predicts), "        ")
    if f.finding.fix:
        lines += _wrap("    fix: ", escape(f.finding.fix), "        ")
    return lines


def verdict(report: LintReport, *, strict: bool = False) -> str:
    counts = ", ".join(
        f"{report.count(s)} {s if s == 'info' else s + ('s' if report.count(s) != 1 else '')}"
        for s in SEVERITIES
    )
    n = len(report.files)
    files = f"{n} file{'s' if n != 1 else ''} checked"
    if report.exit_code(strict=strict) == 0:
        return f"OK: {counts} ({files})"
    if report.count("error"):
        return f"FAILED: {counts} ({files})"
    return f"FAILED (--strict, warnings count): {counts} ({files})"


def render_lint(report: LintReport, *, strict: bool = False) -> str:
    """Every finding in file order, a blank line between them, then the verdict."""
    parts: list[str] = []
    for f in report.findings:
        parts.extend(render_finding(f))
        parts.append("")
    parts.append(verdict(report, strict=strict))
    return "\n".join(parts)


def lint_json(report: LintReport) -> str:
    import json

    return json.dumps(report.to_json(), indent=2)
