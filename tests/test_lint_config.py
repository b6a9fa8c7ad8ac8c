"""``[tool.gpudiag.lint]`` in pyproject.toml (issue 17, build item 4): found as ruff finds
its own table, ``--config``/``--isolated``, every key, the command line's precedence, and
one line and exit 2 for anything the table gets wrong."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.lint import config as config_module
from gpudiag.lint.source import MAX_LINT_BYTES

# LINT-AMP-DEPRECATED (warning) on line 2
AMP = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"
# LINT-SAMPLER-SHUFFLE (error) on line 3
SHUFFLE = (
    "from torch.utils.data import DataLoader, DistributedSampler\nds = s = DistributedSampler([])\n"
    "loader = DataLoader(ds, sampler=s, shuffle=True)\n"
)


def _project(root: Path, table: str, files: dict[str, str] | None = None) -> Path:
    """A project under ``root`` with ``table`` as its pyproject.toml's lint table."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(f'[project]\nname = "p"\n\n[tool.gpudiag.lint]\n{table}')
    for name, text in (files or {"train.py": AMP + SHUFFLE.replace("from", "\nfrom", 1)}).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _run(*args: str) -> tuple[int, list[tuple[str, str]], str]:
    """(exit status, sorted (file name, code) found, stderr) of ``lint ARGS --json``."""
    result = CliRunner().invoke(main, ["lint", *args, "--json"])
    if result.exit_code == 2:
        return 2, [], result.stderr
    doc = json.loads(result.stdout)
    found = sorted((Path(f["path"]).name, f["code"]) for f in doc["findings"])
    return result.exit_code, found, result.stderr


def _bad(*args: str) -> str:
    """The one line of a run that must be bad input."""
    result = CliRunner().invoke(main, ["lint", *args])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpudiag: error: "), lines
    return lines[0]


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder outside every project of the test (no table above it)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


BOTH = [("train.py", "LINT-AMP-DEPRECATED"), ("train.py", "LINT-SAMPLER-SHUFFLE")]
AMP_ONLY = [("train.py", "LINT-AMP-DEPRECATED")]


# ---------------------------------------------------------------- finding the table


def test_the_table_above_the_first_path_is_read(tmp_path: Path, elsewhere: Path) -> None:
    proj = _project(tmp_path / "proj", 'select = ["LINT-AMP"]\n')
    (proj / "src").mkdir()
    (proj / "train.py").rename(proj / "src" / "train.py")
    assert _run(str(proj / "src" / "train.py")) == (0, AMP_ONLY, "")
    assert _run(str(proj / "src")) == (0, AMP_ONLY, "")
    assert _run(str(proj)) == (0, AMP_ONLY, "")


def test_a_nearer_pyproject_without_the_table_is_passed_over(
    tmp_path: Path, elsewhere: Path
) -> None:
    proj = _project(tmp_path / "proj", 'select = ["LINT-AMP"]\n')
    sub = proj / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[project]\nname = "sub"\n[tool.ruff]\nline-length = 9\n')
    (sub / "train.py").write_text((proj / "train.py").read_text())
    assert _run(str(sub / "train.py")) == (0, AMP_ONLY, "")
    # not TOML at all, and no mention of the table: not parsed, passed over too
    (sub / "pyproject.toml").write_text("[[[ not toml\n")
    assert _run(str(sub / "train.py")) == (0, AMP_ONLY, "")


def test_the_nearest_table_wins(tmp_path: Path, elsewhere: Path) -> None:
    proj = _project(tmp_path / "proj", 'select = ["LINT-AMP"]\n')
    inner = _project(proj / "inner", 'select = ["LINT-SAMPLER"]\n')
    assert _run(str(inner / "train.py")) == (1, [("train.py", "LINT-SAMPLER-SHUFFLE")], "")
    assert _run(str(proj / "train.py")) == (0, AMP_ONLY, "")


def test_without_a_table_above_the_path_the_working_folders_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = _project(tmp_path / "proj", 'select = ["LINT-AMP"]\n')
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "train.py").write_text((proj / "train.py").read_text())
    monkeypatch.chdir(proj)
    assert _run(str(loose / "train.py")) == (0, AMP_ONLY, "")
    monkeypatch.chdir(tmp_path)
    assert _run(str(loose / "train.py")) == (1, BOTH, "")


def test_config_names_the_file_and_isolated_reads_none(tmp_path: Path, elsewhere: Path) -> None:
    proj = _project(tmp_path / "proj", 'select = ["LINT-AMP"]\n')
    other = tmp_path / "other.toml"
    other.write_text('[tool.gpudiag.lint]\nselect = ["LINT-SAMPLER"]\n')
    script = str(proj / "train.py")
    assert _run(script, "--config", str(other)) == (1, [("train.py", "LINT-SAMPLER-SHUFFLE")], "")
    assert _run(script, "--isolated") == (1, BOTH, "")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--config", "missing.toml"], "--config missing.toml: No such file or directory"),
        (["--config", "."], "--config .: not a regular file"),
        (["--config", "plain.toml"], "--config plain.toml: it has no [tool.gpudiag.lint] table"),
        (["--config", "plain.toml", "--isolated"], "--config and --isolated conflict"),
    ],
)
def test_a_bad_config_option_is_one_line(elsewhere: Path, args: list[str], said: str) -> None:
    (elsewhere / "plain.toml").write_text("[tool.ruff]\nline-length = 9\n[tool.gpudiag]\nx = 1\n")
    (elsewhere / "train.py").write_text(AMP)
    assert said in _bad("train.py", *args)


# ---------------------------------------------------------------- bad tables


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('selec = ["LINT"]\n', "unknown key 'selec' in [tool.gpudiag.lint] (known: select,"),
        ('select = ["LINT-AMP-DEPRECATD"]\n', "select LINT-AMP-DEPRECATD: no such finding code"),
        ('ignore = ["NOPE"]\n', "ignore NOPE: no such finding code or prefix"),
        ('select = "LINT-AMP"\n', "select must be a list of strings"),
        ("ignore = [1]\n", "ignore must be a list of strings"),
        ('exclude = [""]\n', "exclude has an empty pattern"),
        ('per-file-ignores = {"tests/*" = ["LINT-X"]}\n', "'tests/*' LINT-X: no such finding"),
        ('per-file-ignores = ["tests/*"]\n', "per-file-ignores must be a table"),
        ('output-format = "sarif2"\n', "output-format must be one of text, json, github, sarif"),
        ('strict = "yes"\n', "strict must be true or false"),
        ("force-exclude = 1\n", "force-exclude must be true or false"),
        ("select = [\n", "pyproject.toml: not valid TOML: "),
        ("x = " + "[" * 3000 + "]" * 3000 + "\n", "nests arrays or tables too deeply"),
    ],
)
def test_a_bad_table_is_one_line_and_exit_2(
    tmp_path: Path, elsewhere: Path, table: str, said: str
) -> None:
    proj = _project(tmp_path / "proj", table)
    line = _bad(str(proj / "train.py"))
    assert said in line, line
    assert line.startswith("gpudiag: error: ../proj/pyproject.toml: ")


def test_the_table_must_be_a_table(tmp_path: Path, elsewhere: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.gpudiag]\nlint = "strict"\n')
    (tmp_path / "train.py").write_text(AMP)
    assert "tool.gpudiag.lint must be a table" in _bad(str(tmp_path / "train.py"))


def test_a_config_that_is_not_utf8_or_too_large_is_one_line(
    tmp_path: Path, elsewhere: Path
) -> None:
    (tmp_path / "train.py").write_text(AMP)
    (tmp_path / "pyproject.toml").write_bytes(b'[tool.gpudiag.lint]\nselect = ["\xff"]\n')
    assert "pyproject.toml: not UTF-8 text (byte 31)" in _bad(str(tmp_path / "train.py"))
    big = b"[tool.gpudiag.lint]\n" + b"#" * config_module.MAX_CONFIG_BYTES
    (tmp_path / "pyproject.toml").write_bytes(big)
    assert "too large for a pyproject.toml" in _bad(str(tmp_path / "train.py"))


def test_a_pyproject_that_is_no_regular_file_is_passed_over(
    tmp_path: Path, elsewhere: Path
) -> None:
    os.mkfifo(tmp_path / "pyproject.toml")  # a FIFO would block a read: never opened
    (tmp_path / "train.py").write_text(AMP)
    assert _run(str(tmp_path / "train.py")) == (0, AMP_ONLY, "")


def test_python_310_without_a_toml_reader(
    tmp_path: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config_module, "_toml_loads", lambda: None)
    proj = _project(tmp_path / "proj", 'select = ["LINT-AMP"]\n')
    line = _bad(str(proj / "train.py"))
    assert "needs the tomli package: pip install tomli (or lint with --isolated)" in line
    assert _run(str(proj / "train.py"), "--isolated") == (1, BOTH, "")
    # a pyproject.toml that cannot hold the table is never parsed: no reader needed
    (proj / "pyproject.toml").write_text('[project]\nname = "gpudiag"\n[project.scripts]\n'
                                         'gpudiag = "gpudiag.cli:main"\n')  # fmt: skip
    assert _run(str(proj / "train.py")) == (1, BOTH, "")


def test_toml_loads_prefers_tomllib() -> None:
    loads = config_module._toml_loads()
    assert loads is not None
    assert loads('a = {b = ["c"]}') == {"a": {"b": ["c"]}}


# ---------------------------------------------------------------- the keys


@pytest.mark.parametrize(
    ("table", "args", "status", "found"),
    [
        ('select = ["LINT-AMP"]\n', [], 0, AMP_ONLY),
        ('ignore = ["LINT-SAMPLER"]\n', [], 0, AMP_ONLY),
        ("select = []\n", [], 1, BOTH),  # an empty list: every code, as with none
        # --select replaces the table's select and its ignore (ruff's "highest select")
        ('select = ["LINT-AMP"]\n', ["--select", "LINT-SAMPLER"], 1, BOTH[1:]),
        ('ignore = ["LINT-SAMPLER"]\n', ["--select", "LINT"], 1, BOTH),
        # --ignore adds to the table's ignore
        ('ignore = ["LINT-SAMPLER"]\n', ["--ignore", "LINT-AMP"], 0, []),
        ('select = ["LINT-AMP", "LINT-SAMPLER"]\n', ["--ignore", "LINT-AMP"], 1, BOTH[1:]),
    ],
)
def test_select_and_ignore_from_the_table_and_the_command_line(
    tmp_path: Path,
    elsewhere: Path,
    table: str,
    args: list[str],
    status: int,
    found: list[tuple[str, str]],
) -> None:
    proj = _project(tmp_path / "proj", table)
    assert _run(str(proj / "train.py"), *args) == (status, found, "")


def test_exclude_prunes_the_walk_before_anything_is_read(tmp_path: Path, elsewhere: Path) -> None:
    proj = _project(
        tmp_path / "proj",
        'exclude = ["third_party", "./build/", "gen/*.py", "*_pb2.py"]\n',
        {
            "train.py": AMP,
            "third_party/lib/big.py": "x = 1\n" * (MAX_LINT_BYTES // 6 + 10),  # over the limit
            "build/out.py": AMP,
            "gen/a.py": AMP,
            "gen/keep.txt": "",
            "pkg/model_pb2.py": AMP,
            "pkg/model.py": AMP,
        },
    )
    os.mkfifo(proj / "third_party" / "pipe.py")  # would be refused (bad input) if met
    code, found, _ = _run(str(proj))
    assert code == 0
    assert found == [("model.py", "LINT-AMP-DEPRECATED"), ("train.py", "LINT-AMP-DEPRECATED")]
    # without the table, the walk meets them: exit 2 for the FIFO
    assert "FIFO" in _bad(str(proj), "--isolated")


def test_exclude_leaves_named_files_unless_force_exclude(tmp_path: Path, elsewhere: Path) -> None:
    proj = _project(tmp_path / "proj", 'exclude = ["gen"]\n', {"gen/a.py": AMP})
    named = str(proj / "gen" / "a.py")
    assert _run(named) == (0, [("a.py", "LINT-AMP-DEPRECATED")], "")
    # as ruff: a folder named on the command line is walked; exclude prunes below it
    assert _run(str(proj / "gen")) == (0, [("a.py", "LINT-AMP-DEPRECATED")], "")
    line = _bad(str(proj))
    assert "that [tool.gpudiag.lint] exclude leaves: nothing to lint" in line
    (proj / "pyproject.toml").write_text(
        '[tool.gpudiag.lint]\nexclude = ["gen"]\nforce-exclude = true\n'
    )
    # pre-commit passes only excluded files: nothing to lint, and that is fine
    result = CliRunner().invoke(main, ["lint", named])
    assert result.exit_code == 0
    assert result.stdout.strip() == "OK: 0 errors, 0 warnings, 0 info (0 files checked)"


def test_per_file_ignores_drop_codes_in_matching_files(tmp_path: Path, elsewhere: Path) -> None:
    proj = _project(
        tmp_path / "proj",
        'per-file-ignores = { "tests/*" = ["LINT-AMP"], "legacy.py" = ["LINT"], '
        '"!src/*" = ["LINT-SAMPLER-SHUFFLE"] }\n',
        {
            "tests/unit/test_a.py": AMP + SHUFFLE,
            "src/legacy.py": AMP,
            "src/train.py": AMP + SHUFFLE,
            "other.py": SHUFFLE,
        },
    )
    assert _run(str(proj)) == (
        1,
        [("train.py", "LINT-AMP-DEPRECATED"), ("train.py", "LINT-SAMPLER-SHUFFLE")],
        "",
    )


def test_output_format_and_strict_from_the_table(tmp_path: Path, elsewhere: Path) -> None:
    proj = _project(
        tmp_path / "proj", 'output-format = "github"\nstrict = true\n', {"train.py": AMP}
    )
    script = str(proj / "train.py")
    result = CliRunner().invoke(main, ["lint", script])
    assert result.exit_code == 1  # strict: a warning fails
    assert result.stdout.startswith("::warning file=")
    result = CliRunner().invoke(main, ["lint", script, "--no-strict", "--output-format", "text"])
    assert result.exit_code == 0
    assert "LINT-AMP-DEPRECATED [warning]" in result.stdout
    result = CliRunner().invoke(main, ["lint", script, "--json"])  # --json wins, no conflict
    assert json.loads(result.stdout)["schema"] == "gpudiag-lint/1"
    result = CliRunner().invoke(main, ["lint", script, "--isolated"])
    assert result.exit_code == 0 and "OK: 0 errors, 1 warning" in result.stdout


def test_patterns_match_relative_to_the_tables_folder(tmp_path: Path) -> None:
    cfg = config_module.LintConfig(
        root=str(tmp_path),
        exclude=("build", "docs/*.py", "/abs/*"),
        per_file_ignores=(("!src/*", frozenset({"LINT"})),),
    )
    assert cfg.excluded(tmp_path / "build")
    assert cfg.excluded(tmp_path / "a" / "build")  # a bare name: any folder of that name
    assert cfg.excluded(tmp_path / "docs" / "x" / "y.py")  # `*` also matches `/`
    assert not cfg.excluded(tmp_path / "src" / "docs" / "y.py")
    assert not cfg.excluded(tmp_path.parent / "docs" / "y.py")  # outside the root
    assert cfg.excluded("/abs/x.py")
    assert cfg.excluded_named(str(tmp_path / "build" / "deep" / "x.py"))
    assert cfg.ignored_in(str(tmp_path / "src" / "a.py")) == frozenset()
    assert cfg.ignored_in(str(tmp_path / "b.py")) == {"LINT"}


def test_json_document_is_unchanged_by_a_table(tmp_path: Path, elsewhere: Path) -> None:
    proj = _project(tmp_path / "proj", 'ignore = ["LINT-SAMPLER"]\n')
    with_table = CliRunner().invoke(main, ["lint", str(proj / "train.py"), "--json"])
    isolated = CliRunner().invoke(
        main, ["lint", str(proj / "train.py"), "--json", "--isolated", "--ignore", "LINT-SAMPLER"]
    )
    assert with_table.stdout == isolated.stdout
    assert set(json.loads(with_table.stdout)) == set(json.loads(isolated.stdout))
