"""A finding: one diagnosis, with a stable code (:mod:`gpudiag.findings.catalog`).

Frozen and keyword-only (issue 16: 115 of 153 calls passed fields by position, so a
new field or a swapped ``fix``/``predicts`` went unnoticed). A leaf module: it imports
nothing of gpudiag's, so :mod:`gpudiag.model` can re-export it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One diagnosis. Keyword-only: ``Finding(code=..., severity=..., message=...)``.

    Attributes:
        code: stable identifier, documented in ``docs/findings.md``.
        severity: ``error``, ``warning`` or ``info``.
        message: what is wrong, in one or two sentences.
        fix: what to do about it, or None when there is nothing to do.
        predicts: the PyTorch/CUDA/NCCL error text this foresees, or None.
        subject: what the finding is about (a GPU UUID, an env var...), or None.
        predicts_also: other texts of the same failure: what other torch versions
            print (``torch < 2.8: …``), or what a script that takes another path
            hits first. ``predicts`` is the snapshot's torch version's text.
    """

    code: str
    severity: Severity
    message: str
    fix: str | None = None
    predicts: str | None = None
    subject: str | None = None
    predicts_also: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """The finding as a JSON object (``docs/findings.md``)."""
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
            "predicts": self.predicts,
            "predicts_also": list(self.predicts_also),
            "subject": self.subject,
        }
