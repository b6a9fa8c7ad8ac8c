"""gpudiag docs [TOPIC]: the manual's pages from the installed package (issue 20)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md") if p.name != "development.md")


def test_lists_every_user_page_with_its_title() -> None:
    result = CliRunner().invoke(main, ["docs"])
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.stdout.splitlines()]
    assert listed == [p.stem for p in PAGES]
    assert "development" not in listed  # for gpudiag's developers, not shipped
    assert all(len(line) <= 80 for line in result.stdout.splitlines())


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_prints_each_page_as_written(page: Path) -> None:
    for spelling in (page.stem, page.stem.upper(), page.name):
        result = CliRunner().invoke(main, ["docs", spelling])
        assert result.exit_code == 0 and result.stdout == page.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("topic", "hint"),
    [("visible", "did you mean visible-devices?"), ("nope\x1b[31m", "`gpudiag docs` lists")],
)
def test_unknown_topic_is_one_line_exit_2(topic: str, hint: str) -> None:
    result = CliRunner().invoke(main, ["docs", topic])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpudiag: error: no documentation page")
    assert hint in lines[0] and "\x1b" not in lines[0]


def test_snapshot_help_names_the_current_schema_and_a_reachable_page() -> None:
    # issue 20: its pointer led to a page the wheel did not ship; issue 18 bumped 1.2.
    from gpudiag.model import SNAPSHOT_SCHEMA

    text = " ".join(CliRunner().invoke(main, ["snapshot", "--help"]).stdout.split())
    assert f"({SNAPSHOT_SCHEMA}," in text and "gpudiag docs snapshot" in text
