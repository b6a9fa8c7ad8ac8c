"""``gpudiag lint --select/--ignore``: which finding codes a run reports (docs/lint.md).

As ruff's options of the same names: a value is a code or a prefix of codes ending
at a ``-`` (``LINT-AMP`` selects ``LINT-AMP-DEPRECATED``; ``LINT`` every lint code).
A value that is neither is bad input: a typo would otherwise select nothing, or
ignore nothing, in silence (issue 17, build item 4).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from gpudiag.errors import GpudiagInputError
from gpudiag.lint.report import LintReport

_PART_RE = re.compile(r"[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*")


def covers(prefix: str, code: str) -> bool:
    """Whether a ``--select``/``--ignore`` value (a code, or a prefix ending at a ``-``)
    covers ``code``."""
    return code == prefix or code.startswith(prefix + "-")


def parse_codes(option: str, values: Iterable[str]) -> frozenset[str]:
    """``--select``/``--ignore`` values (repeatable, comma-separated) as upper-case
    codes or prefixes, each matching at least one catalogued code.

    Raises:
        GpudiagInputError: a value that is no finding code and no prefix of one.
    """
    from gpudiag.findings.catalog import CATALOG

    wanted: set[str] = set()
    for value in values:
        for part in value.replace(",", " ").split():
            wanted.add(part.upper().rstrip("-"))
    for item in sorted(wanted):
        if not _PART_RE.fullmatch(item) or not any(covers(item, c) for c in CATALOG):
            shown = item if len(item) <= 60 else item[:57] + "…"
            raise GpudiagInputError(
                f"{option} {shown}: no such finding code or prefix (`gpudiag explain` lists them)"
            )
    return frozenset(wanted)


def selected(report: LintReport, select: frozenset[str], ignore: frozenset[str]) -> LintReport:
    """The report with only the findings ``select`` covers (all, when empty), less those
    ``ignore`` covers; the exit status and counts follow from what is kept."""
    if not select and not ignore:
        return report
    kept = tuple(
        f
        for f in report.findings
        if (not select or any(covers(p, f.finding.code) for p in select))
        and not any(covers(p, f.finding.code) for p in ignore)
    )
    return dataclasses.replace(report, findings=kept)
