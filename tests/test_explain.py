"""``gpudiag explain`` and ``--version``: documentation that travels with the install."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.findings.catalog import AREAS, CATALOG
from gpudiag.findings_doc import findings_doc_text, parse_sections

from .wheel import build_wheel, can_build_wheels

ROOT = Path(__file__).resolve().parent.parent


def test_explain_prints_the_section() -> None:
    result = CliRunner().invoke(main, ["explain", "vis-order-mixed"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "VIS-ORDER-MIXED"
    assert any(line.startswith("- **Severity:**") for line in lines)
    assert "### " not in result.stdout  # one section, not the next


def test_explain_lists_every_catalogued_code_by_area() -> None:
    result = CliRunner().invoke(main, ["explain"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    areas = [line.split(":")[0] for line in lines if line and not line.startswith(" ")]
    assert areas == list(AREAS)
    rows = [line.split() for line in lines if line.startswith("  ") and line[2] != " "]
    assert [row[0] for row in rows] == list(CATALOG)
    for code, severity, *title in rows:
        assert severity == CATALOG[code].severity, code
        assert CATALOG[code].title.startswith(" ".join(title)), code
    text = findings_doc_text()
    assert text is not None
    assert set(CATALOG) == set(parse_sections(text))


def test_explain_knows_every_catalogued_code() -> None:
    for code in CATALOG:
        result = CliRunner().invoke(main, ["explain", code.lower()])
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines()[0] == code


def test_explain_unknown_code_exit_2_with_suggestion() -> None:
    result = CliRunner().invoke(main, ["explain", "VIS-ORDER-MIXD\x1b[2J"])
    assert result.exit_code == 2
    assert "did you mean VIS-ORDER-MIXED" in result.stderr
    assert "\x1b" not in result.stderr and len(result.stderr.splitlines()) == 1


def test_version_names_python_torch_and_driver() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("gpudiag, version ")
    assert lines[1].startswith("Python ")
    assert lines[2].startswith("torch ")
    assert lines[3].startswith("NVIDIA driver")


def test_help_points_at_explain_not_repository_paths() -> None:
    for args in (["--help"], ["list", "--help"], ["check", "--help"], ["probe", "--help"],
                 ["snapshot", "--help"], ["explain", "--help"]):  # fmt: skip
        out = CliRunner().invoke(main, args).stdout
        assert "docs/" not in out and "tests/" not in out, args
    assert "gpudiag explain CODE" in CliRunner().invoke(main, ["--help"]).stdout


@pytest.mark.skipif(
    not can_build_wheels(), reason="building a wheel needs setuptools and wheel here"
)
def test_explain_and_docs_work_from_an_installed_wheel(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    target = tmp_path / "installed"
    shipped = {p.name for p in (ROOT / "docs").glob("*.md")} - {"development.md"}
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        assert {f"gpudiag/_docs/{n}" for n in shipped} <= names  # every user page
        assert "gpudiag/_docs/development.md" not in names
        zf.extractall(target)
    env = {**os.environ, "PYTHONPATH": str(target)}
    proc = subprocess.run(
        [sys.executable, "-c",
         "import gpudiag, sys; print(gpudiag.__file__); "
         "from gpudiag.cli import main; sys.argv = ['gpudiag', 'explain', 'DP-DEVICES']; main()"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    first, code = proc.stdout.splitlines()[:2]
    assert first.startswith(str(target))  # the wheel's gpudiag, not the checkout's
    assert code == "DP-DEVICES"
    # gpudiag docs: every page, from the wheel (the checkout is not on the path).
    proc = subprocess.run(
        [sys.executable, "-c",
         "import sys; from gpudiag.cli import main; "
         "sys.argv = ['gpudiag', 'docs', 'visible-devices']; main()"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (target / "gpudiag" / "_docs" / "visible-devices.md").read_text()
    assert proc.stdout == (ROOT / "docs" / "visible-devices.md").read_text()
