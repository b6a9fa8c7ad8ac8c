"""The result of ``gpudiag lint``: findings at file positions, JSON like ``check --json``."""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpudiag.lint import shown
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
        out: dict[str, object] = _valid_text(
            {
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
        )
        return out


def shown_text(text: str) -> str:
    """``text`` as valid Unicode: a file name's undecodable bytes, which Python holds as
    lone surrogates (PEP 383: byte 0xff is U+DCFF), are written as Python writes bytes
    (a backslash, ``x``, ``ff``); any other lone surrogate as its ``u`` escape. JSON and
    terminals then get valid UTF-8 (issue 21: ``lint --json`` wrote lone surrogates)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def _valid_text(value: Any) -> Any:
    """``value`` (this module's JSON document: a few levels of dicts and lists, never
    the script's) with :func:`shown_text` applied to every string, keys included."""
    if isinstance(value, str):
        return shown_text(value)
    if isinstance(value, dict):
        return {shown_text(str(k)): _valid_text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_valid_text(v) for v in value]
    return value


#: For the other machine-readable formats (SARIF): the same cleaning as ``--json``'s.
valid_text = _valid_text


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
    first, rest = _split(len(head), text, indent)
    return [(head + first).rstrip(), *rest]


@functools.lru_cache(maxsize=256)
def _split(head_len: int, text: str, indent: str) -> tuple[str, tuple[str, ...]]:
    """The words of ``text`` that fit on the first line after a head of ``head_len``
    characters, and the lines after it. Memoized: one script's findings repeat the same
    texts, and 60,000 findings were seconds of wrapping (issue 21)."""
    import textwrap  # only when findings are printed: start-up time

    words = text.split()
    first = words.pop(0) if words else ""
    while words and head_len + len(first) + 1 + len(words[0]) <= WIDTH:
        first += " " + words.pop(0)
    rest = textwrap.wrap(
        " ".join(words),
        width=WIDTH,
        initial_indent=indent,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return first, tuple(rest)


@functools.lru_cache(maxsize=256)
def _shown(text: str) -> str:
    """A message, predicts or fix as printed: long runs cut, controls escaped (memoized)."""
    return escape(shown.message(text))


def render_finding(f: LintFinding) -> list[str]:
    """``path:line:col: CODE [severity] message`` then ``predicts:`` and ``fix:``, wrapped."""
    head = f"{_shown_path(f.path)}:{f.line}:{f.col}: {f.finding.code} [{f.finding.severity}] "
    # `--check` findings come from check's validators: long runs (a 4,000-digit number)
    # are cut here as check's own output cuts them (issue 21)
    lines = _wrap(head, _shown(f.finding.message), "    ")
    if f.finding.predicts:
        lines += _wrap("    predicts: ", _shown(f.finding.predicts), "        ")
    if f.finding.fix:
        lines += _wrap("    fix: ", _shown(f.finding.fix), "        ")
    return lines


@functools.lru_cache(maxsize=64)
def _shown_path(path: str) -> str:
    return escape(shown_text(path))


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
