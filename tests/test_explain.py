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
    subprocess.run(
        [sys.executable, "-c", "import setuptools, wheel"], capture_output=True, check=False
    ).returncode
    != 0,
    reason="building a wheel needs setuptools and wheel in this environment",
)
def test_explain_works_from_an_installed_wheel(tmp_path: Path) -> None:
    # Build the wheel from a copy of the checkout (no build/ left in the tree).
    src = tmp_path / "src"
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(tmp_path / "s.tar"), "HEAD"],
        check=True,
        timeout=60,
    )
    src.mkdir()
    subprocess.run(["tar", "-xf", str(tmp_path / "s.tar"), "-C", str(src)], check=True)
    for name in ("setup.py", "MANIFEST.in", "gpudiag/findings_doc.py", "docs/findings.md"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes((ROOT / name).read_bytes())  # the working tree's version
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(src),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
        ],
        check=True,
        timeout=300,
        capture_output=True,
    )
    wheel = next((tmp_path / "dist").glob("gpudiag-*.whl"))
    target = tmp_path / "installed"
    with zipfile.ZipFile(wheel) as zf:
        assert "gpudiag/_docs/findings.md" in zf.namelist()
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
