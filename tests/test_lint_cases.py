"""Table-driven: every script in tests/fixtures/lint/ gets exactly the findings its
``# expect[CODE]`` comments name, on those lines; ``neg_*`` scripts (correct code,
modelled on tutorials and reported fixes) get none besides the info they name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpudiag.lint.source import lint_file

CASES = Path(__file__).resolve().parent / "fixtures" / "lint"
EXPECT_RE = re.compile(r"#\s*expect\[([A-Z0-9,\s-]+)\]")


def _expected(path: Path) -> set[tuple[int, str]]:
    out: set[tuple[int, str]] = set()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        for m in EXPECT_RE.finditer(line):
            out |= {(number, c.strip()) for c in m.group(1).split(",") if c.strip()}
    return out


@pytest.mark.parametrize(
    "path", sorted(CASES.glob("*.py.txt")), ids=lambda p: p.name.removesuffix(".py.txt")
)
def test_script(path: Path) -> None:
    findings, _, _ = lint_file(path)
    got = {(f.line, f.finding.code) for f in findings}
    assert got == _expected(path), "\n".join(
        f"{f.line}:{f.col} {f.finding.code} {f.finding.message}" for f in findings
    )


def test_every_positive_names_a_finding_and_every_negative_is_clean() -> None:
    for path in CASES.glob("*.py.txt"):
        codes = {c for _, c in _expected(path)}
        severities = {f.finding.severity for f in lint_file(path)[0]}
        if path.name.startswith("pos_"):
            assert codes, path.name
        else:
            assert severities <= {"info"}, path.name
