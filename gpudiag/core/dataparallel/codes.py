"""The one place that builds DataParallel's findings (their codes: the catalogue's
``dataparallel`` area, :mod:`gpudiag.findings.catalog`)."""

from __future__ import annotations

from gpudiag.model import Finding


def _find(
    code: str,
    severity: str,
    message: str,
    fix: str | None,
    predicts: str | None,
    subject: str | None = None,
    also: tuple[str, ...] = (),
) -> Finding:
    return Finding(code, severity, message, fix, predicts, subject, also)  # type: ignore[arg-type]
