"""The lint's finding codes (from the catalogue; docs/findings.md) and its result types."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from gpudiag.findings.catalog import titles
from gpudiag.lint import shown
from gpudiag.model import Finding, Severity

#: ``{code: title}`` of every lint rule: the catalogue's ``lint`` area, so a code
#: and its title are declared once (gpudiag/findings/catalog.py).
CODES: dict[str, str] = titles("lint")


@dataclass(frozen=True)
class LintFinding:
    """A :class:`~gpudiag.model.Finding` at a place in a file (1-based line and column)."""

    path: str
    line: int
    col: int
    finding: Finding

    def to_json(self) -> dict[str, object]:
        """The finding's JSON object plus ``path``, ``line`` and ``col``."""
        out = self.finding.to_json()
        out.update({"path": self.path, "line": self.line, "col": self.col})
        return out


@dataclass(frozen=True)
class Hit:
    """A rule's result before it is given its file: where, and what."""

    line: int
    col: int
    finding: Finding

    def as_info(self, note: str) -> Hit:
        """This hit made info, ``note`` (why it is not certain) after its message."""
        finding = replace(self.finding, severity="info", message=f"{self.finding.message} {note}")
        return Hit(self.line, self.col, finding)


def demote(hits: list[Hit], note_of: Callable[[Hit], str | None]) -> list[Hit]:
    """``hits``, each warning or error for which ``note_of`` gives a note made info with it
    (info hits are not asked)."""
    out: list[Hit] = []
    for h in hits:
        note = note_of(h) if h.finding.severity != "info" else None
        out.append(h if note is None else h.as_info(note))
    return out


def hit(
    line: int,
    col: int,
    code: str,
    severity: Severity,
    message: str,
    fix: str | None,
    predicts: str | None,
    subject: str | None = None,
) -> Hit:
    # the rules bound what they quote (gpudiag.lint.shown); this cuts any long run
    # they missed, so no finding repeats a megabyte of the script (issue 21)
    return Hit(
        line,
        col,
        Finding(
            code=code,
            severity=severity,
            message=shown.message(message),
            fix=None if fix is None else shown.message(fix),
            predicts=None if predicts is None else shown.message(predicts),
            subject=None if subject is None else shown.text(subject),
        ),
    )
