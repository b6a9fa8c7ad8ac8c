"""``gpudiag lint -`` reads the script from stdin (issue 17, build item 4), bounded as a
file is, reported under ``--stdin-filename``; ``-`` beside other paths is bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.lint import stdin as stdin_module
from gpudiag.lint.source import MAX_LINT_BYTES

from .pinned import DUPLICATE_MASK_SCRIPT, FIXTURES

AMP = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"


def _lint(args: list[str], data: bytes | str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["lint", *args], input=data)
    return result.exit_code, result.stdout, result.stderr


def test_dash_lints_stdin_shown_as_dash() -> None:
    code, out, err = _lint(["-"], AMP)
    assert (code, err) == (0, "")
    assert out.startswith("-:2:10: LINT-AMP-DEPRECATED [warning] ")
    assert out.rstrip().endswith("OK: 0 errors, 1 warning, 0 info (1 file checked)")


def test_stdin_filename_is_the_path_reported() -> None:
    code, out, _ = _lint(["-", "--stdin-filename", "src/train.py", "--json"], AMP)
    doc = json.loads(out)
    assert code == 0
    assert doc["files"] == ["src/train.py"]
    assert [(f["path"], f["line"], f["code"]) for f in doc["findings"]] == [
        ("src/train.py", 2, "LINT-AMP-DEPRECATED")
    ]


def test_stdin_filename_alone_reads_stdin_as_ruff() -> None:
    code, out, _ = _lint(["--stdin-filename", "x.py", "--output-format", "github"], AMP)
    assert code == 0
    assert out.startswith("::warning file=x.py,line=2,col=10,title=LINT-AMP-DEPRECATED::")


def test_stdin_is_decoded_as_python_decodes_a_file() -> None:
    latin = (
        b"# -*- coding: latin-1 -*-\nimport torch\ns = '\xe9'\nx = torch.cuda.amp.GradScaler()\n"
    )
    code, out, _ = _lint(["-", "--json"], latin)
    assert code == 0
    assert [f["line"] for f in json.loads(out)["findings"]] == [4]
    code, out, _ = _lint(["-", "--json"], b"x = '\xff'\n")
    (parse,) = json.loads(out)["findings"]
    assert (code, parse["code"], parse["path"]) == (1, "LINT-PARSE-ERROR", "-")
    code, out, _ = _lint(["-"], "def train(:\n    pass\n")
    assert code == 1 and out.startswith("-:1:")
    code, out, _ = _lint(["-"], b"")
    assert (code, out.strip()) == (0, "OK: 0 errors, 0 warnings, 0 info (1 file checked)")


def test_stdin_over_the_limit_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stdin_module, "MAX_LINT_BYTES", 64)
    assert _lint(["-"], "x = 1\n" * 10)[0] == 0  # 60 bytes: read
    code, out, err = _lint(["-"], "x = 1\n" * 11)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "gpudiag: error: cannot lint stdin: more than lint's limit of 0 MiB per file"
    ]


def test_a_real_pipe_over_the_limit_is_refused() -> None:
    data = b"#" * (MAX_LINT_BYTES + 1)
    proc = subprocess.run(
        [sys.executable, "-m", "gpudiag", "lint", "-"],
        input=data,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.decode().splitlines() == [
        "gpudiag: error: cannot lint stdin: more than lint's limit of 4 MiB per file"
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "gpudiag", "lint", "-", "--stdin-filename", "t.py"],
        input=AMP.encode(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout.decode().startswith("t.py:2:10: LINT-AMP-DEPRECATED")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["-", "train.py"], "- (read stdin) must be the only path"),
        (["train.py", "-"], "- (read stdin) must be the only path"),
        (["-", "-"], "- (read stdin) must be the only path"),
        (["train.py", "--stdin-filename", "x.py"], "--stdin-filename names what - reads"),
        (["-", "--stdin-filename", " "], "--stdin-filename needs a file name"),
    ],
)
def test_dash_beside_other_paths_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], said: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(AMP)
    code, out, err = _lint(args, AMP)
    assert (code, out) == (2, "")
    assert err.startswith(f"gpudiag: error: {said}")
    assert len(err.splitlines()) == 1


def test_stdin_uses_the_table_above_stdin_filename_and_its_per_file_ignores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = tmp_path / "proj"
    (proj / "tests").mkdir(parents=True)
    (proj / "pyproject.toml").write_text(
        '[tool.gpudiag.lint]\nper-file-ignores = { "tests/*" = ["LINT-AMP"] }\nexclude = ["gen"]\n'
    )
    monkeypatch.chdir(tmp_path)
    code, out, _ = _lint(["-", "--stdin-filename", "proj/tests/t.py", "--json"], AMP)
    assert (code, json.loads(out)["findings"]) == (0, [])
    code, out, _ = _lint(["-", "--stdin-filename", "proj/t.py", "--json"], AMP)
    assert [f["code"] for f in json.loads(out)["findings"]] == ["LINT-AMP-DEPRECATED"]
    code, out, _ = _lint(["-", "--stdin-filename", "t.py", "--json"], AMP)  # no table here
    assert [f["code"] for f in json.loads(out)["findings"]] == ["LINT-AMP-DEPRECATED"]
    # exclude covers stdin only with force-exclude, as a named file
    code, out, _ = _lint(["-", "--stdin-filename", "proj/gen/a.py", "--json"], AMP)
    assert len(json.loads(out)["findings"]) == 1
    with (proj / "pyproject.toml").open("a") as handle:
        handle.write("force-exclude = true\n")
    code, out, _ = _lint(["-", "--stdin-filename", "proj/gen/a.py", "--json"], AMP)
    assert (code, json.loads(out)["findings"], json.loads(out)["files"]) == (0, [], [])


def test_stdin_with_check_feeds_the_values_to_check() -> None:
    snapshot = str(FIXTURES / "a100x8.json")
    code, out, _ = _lint(["-", "--check", "--snapshot", snapshot, "--json"], DUPLICATE_MASK_SCRIPT)
    doc = json.loads(out)
    assert code == 1
    assert doc["checks"][0] == "lint" and len(doc["checks"]) > 1
    assert doc["cuinit_error"] == "CUDA_ERROR_INVALID_DEVICE"
    assert all(f["path"] == "-" for f in doc["findings"])


def test_a_stdin_filename_too_long_for_the_system_is_still_a_name() -> None:
    name = "d/" * 3000 + "x.py"  # the pyproject.toml search meets ENAMETOOLONG
    code, out, _ = _lint(["-", "--stdin-filename", name, "--json"], AMP)
    assert code == 0
    assert json.loads(out)["files"] == [name]
