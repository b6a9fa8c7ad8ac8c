"""A syntax error that a newer Python would not raise is info, not an error
(gpudiag/lint/newer_syntax.py; a fifth held-out corpus of issue 17: lerobot, which
requires Python >= 3.12, got five false LINT-PARSE-ERROR errors on PEP 695 syntax)."""

from __future__ import annotations

import sys

import pytest

from gpudiag.lint import lint_source
from gpudiag.lint.newer_syntax import newer_syntax


def _error(text: str) -> SyntaxError:
    try:
        compile(text, "<test>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        return exc
    return SyntaxError("invalid syntax", ("<test>", 1, 1, text.splitlines()[0], 1, 1))


@pytest.mark.parametrize(
    ("line", "running", "expected"),
    [
        ("type FeatureDict = dict[str, int]", (3, 11), ("3.12", "type statement (PEP 695)")),
        ("type Pair[T] = tuple[T, T]", (3, 11), ("3.12", "type statement (PEP 695)")),
        ("def load[T: int](path, obj: T) -> T:", (3, 11), ("3.12", "type parameters (PEP 695)")),
        ("class Pipeline[TIn, TOut](Base):", (3, 11), ("3.12", "type parameters (PEP 695)")),
        ("except* ValueError:", (3, 10), ("3.11", "except* (PEP 654)")),
        ("greeting = t'hello {name}'", (3, 13), ("3.14", "template strings (PEP 750)")),
        # the Python lint runs on has it: a failure there is the file's
        ("type FeatureDict = dict[str, int]", (3, 12), None),
        ("except* ValueError:", (3, 11), None),
        # not newer syntax: a typo, Python 2, a name that starts with type
        ("def broken(:", (3, 11), None),
        ("print 'hello'", (3, 11), None),
        ("typed = [1, 2", (3, 11), None),
        ("except Exception, e:", (3, 11), None),
        ("x = 'don't'", (3, 11), None),
    ],
)
def test_newer_syntax_by_line(
    line: str, running: tuple[int, int], expected: tuple[str, str] | None
) -> None:
    exc = SyntaxError("invalid syntax")
    assert newer_syntax(exc, line, running) == expected


def test_an_f_string_error_before_3_12_may_be_pep_701() -> None:
    exc = SyntaxError("f-string: unmatched '['")
    assert newer_syntax(exc, 'f"{d["k"]}"', (3, 11)) == ("3.12", "f-string syntax (PEP 701)")
    assert newer_syntax(exc, 'f"{d["k"]}"', (3, 12)) is None


def _parse_findings(text: str) -> list[tuple[str, str]]:
    return [
        (f.finding.severity, f.finding.message)
        for f in lint_source(text)
        if f.finding.code == "LINT-PARSE-ERROR"
    ]


def test_a_pep_695_file_is_info_below_3_12_and_parses_above() -> None:
    text = "from typing import Any\n\ntype FeatureDict = dict[str, dict[str, Any]]\n"
    found = _parse_findings(text)
    if sys.version_info < (3, 12):
        assert [severity for severity, _ in found] == ["info"]
        assert "Python 3.12's type statement (PEP 695)" in found[0][1]
    else:
        assert found == []


def test_a_real_syntax_error_stays_an_error() -> None:
    found = _parse_findings("def train(model:\n    model.cuda()\n")
    assert [severity for severity, _ in found] == ["error"]
    assert "newer than" not in found[0][1]
    # and what the running Python really rejects, on a line with no newer syntax
    assert _error("def broken(:\n").lineno == 1
