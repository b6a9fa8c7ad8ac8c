"""``gpudiag explain LINT-…`` shows a wrong and a right script (issue 17, build item 4), and
the scripts cannot rot: each wrong one is linted and must get its code at the line it
names, each right one must get no warning or error at all."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.findings.catalog import codes_in
from gpudiag.lint import lint_source
from gpudiag.lint.examples import EXAMPLES, WITHOUT_EXAMPLE

LINT_CODES = [info.code for info in codes_in("lint")]


def test_every_lint_code_has_a_pair_or_a_reason() -> None:
    assert sorted(set(EXAMPLES) | set(WITHOUT_EXAMPLE)) == sorted(LINT_CODES)
    assert set(EXAMPLES) & set(WITHOUT_EXAMPLE) == set()
    assert all(reason.strip() for reason in WITHOUT_EXAMPLE.values())


@pytest.mark.parametrize("code", sorted(EXAMPLES))
def test_the_wrong_script_gets_its_code_at_its_line(code: str) -> None:
    example = EXAMPLES[code]
    found = [(f.line, f.finding.code) for f in lint_source(example.wrong, "wrong.py")]
    assert (example.line, code) in found, found


@pytest.mark.parametrize("code", sorted(EXAMPLES))
def test_the_right_script_gets_no_warning_or_error(code: str) -> None:
    found = lint_source(EXAMPLES[code].right, "right.py")
    assert [
        (f.line, f.finding.code)
        for f in found
        if f.finding.code == code or f.finding.severity != "info"
    ] == []


@pytest.mark.parametrize("code", sorted(EXAMPLES))
def test_the_scripts_fit_80_columns_once_indented(code: str) -> None:
    example = EXAMPLES[code]
    lines = (example.wrong + example.right).splitlines()
    assert [line for line in lines if len(line) > 76] == []
    assert example.wrong != example.right


@pytest.mark.parametrize("code", LINT_CODES)
def test_explain_prints_the_pair_and_no_fixture_path(code: str) -> None:
    result = CliRunner().invoke(main, ["explain", code.lower()], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "tests/" not in out and "fixtures" not in out and ".py.txt" not in out
    assert [line for line in out.splitlines() if len(line) > 80] == []
    assert "**Example:**" not in out  # the doc's one-line example gives way to the pair
    example = EXAMPLES[code]
    wrong_at = out.index(f"- **Wrong:** `gpudiag lint` reports {code} at line {example.line}:")
    right_at = out.index("- **Right:**")
    assert wrong_at < right_at < out.index("- **Fix:**")
    shown = out.splitlines()
    for snippet, start in ((example.wrong, wrong_at), (example.right, right_at)):
        first = out[:start].count("\n") + 2
        body = [line.removeprefix("    ") for line in shown[first : first + snippet.count("\n")]]
        assert "\n".join(body) + "\n" == snippet


def test_explain_of_other_codes_keeps_the_documented_example() -> None:
    out = CliRunner().invoke(main, ["explain", "VIS-ORDER-MIXED"]).stdout
    assert "**Example:**" in out and "**Wrong:**" not in out


def test_findings_md_names_no_lint_fixture() -> None:
    from gpudiag.findings_doc import findings_doc_text, parse_sections

    text = findings_doc_text()
    assert text is not None
    sections = parse_sections(text)
    for code in LINT_CODES:
        assert "tests/fixtures" not in sections[code], code
        assert "expect[" not in sections[code], code
