"""ruff's conventions in ``gpudiag lint`` (issue 17, build item 4): a suppression acts on
its own line only, and a code it names that is no lint code is reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.lint import lint_source


def _found(text: str) -> list[tuple[int, str]]:
    return [(f.line, f.finding.code) for f in lint_source(text)]


def test_a_suppression_on_another_line_does_not_silence_a_finding() -> None:
    text = (
        "import torch\n"
        "x = 1\n"
        "scaler = torch.cuda.amp.GradScaler()\n"
        "y = 2\n"
        "z = 3  # gpudiag: ignore[LINT-AMP-DEPRECATED]\n"
    )
    assert _found(text) == [(3, "LINT-AMP-DEPRECATED")]


def test_a_suppression_silences_only_its_own_line_of_two_alike() -> None:
    text = (
        "import torch\n"
        "a = torch.cuda.amp.GradScaler()  # gpudiag: ignore[LINT-AMP-DEPRECATED]\n"
        "b = torch.cuda.amp.GradScaler()\n"
    )
    assert _found(text) == [(3, "LINT-AMP-DEPRECATED")]


def test_a_misspelled_code_is_reported_and_suppresses_nothing() -> None:
    text = "import torch\nscaler = torch.cuda.amp.GradScaler()  # gpudiag: ignore[LINT-AMP-DEPRECATD]\n"
    findings = lint_source(text)
    assert [(f.line, f.finding.code, f.finding.severity) for f in findings] == [
        (2, "LINT-AMP-DEPRECATED", "warning"),
        (2, "LINT-IGNORE-UNKNOWN-CODE", "warning"),
    ]
    unknown = findings[1]
    assert unknown.col == text.splitlines()[1].index("#") + 1
    assert "LINT-AMP-DEPRECATD" in unknown.finding.message


def test_each_unknown_code_is_reported_and_the_known_one_still_suppresses() -> None:
    text = (
        "import torch\n"
        "s = torch.cuda.amp.GradScaler()  # gpudiag: ignore[lint-amp-deprecated, NOPE, DP-X]\n"
    )
    findings = lint_source(text)
    assert [f.finding.code for f in findings] == ["LINT-IGNORE-UNKNOWN-CODE"] * 2
    assert ["DP-X" in findings[0].finding.message, "NOPE" in findings[1].finding.message] == [
        True,
        True,
    ]


@pytest.mark.parametrize(
    "comment",
    [
        "# gpudiag: ignore",
        "# gpudiag: ignore[LINT-AMP-DEPRECATED]",
        "# gpudiag: ignore[",
        "# gpudiag: ignore[NOPE",
        "# gpudiag: ignore[NOPE LINT-X]",
        "# gpudiag: ignored",
    ],
)
def test_no_unknown_code_warning_for_a_bare_known_or_malformed_comment(comment: str) -> None:
    text = f"import torch\nx = 1  {comment}\n"
    assert _found(text) == []


def test_the_unknown_code_warning_can_itself_be_suppressed() -> None:
    text = "x = 1  # gpudiag: ignore[NOPE, LINT-IGNORE-UNKNOWN-CODE]\n"
    assert _found(text) == []


# ---------------------------------------------------------------- --select / --ignore

# three findings: LINT-AMP-DEPRECATED (warning), LINT-SAMPLER-SHUFFLE (error),
# LINT-SCALER-FP16-PARAMS (error)
_MIXED = """\
import torch
from torch.utils.data import DataLoader, DistributedSampler
ds = sampler = DistributedSampler([])
model = torch.nn.Linear(1, 1).cuda().half(); opt = torch.optim.SGD(model.parameters())
scaler = torch.cuda.amp.GradScaler()
scaler.step(opt)
loader = DataLoader(ds, sampler=sampler, shuffle=True)
"""


def _lint(tmp_path: Path, *args: str) -> tuple[int, list[str], str]:
    script = tmp_path / "train.py"
    script.write_text(_MIXED, encoding="utf-8")
    result = CliRunner().invoke(main, ["lint", str(script), "--json", *args])
    if result.exit_code == 2:
        return 2, [], result.stderr
    doc = json.loads(result.stdout)
    return result.exit_code, sorted(f["code"] for f in doc["findings"]), result.stderr


def test_without_select_every_finding_is_reported(tmp_path: Path) -> None:
    code, found, _ = _lint(tmp_path)
    assert code == 1
    assert found == ["LINT-AMP-DEPRECATED", "LINT-SAMPLER-SHUFFLE", "LINT-SCALER-FP16-PARAMS"]


@pytest.mark.parametrize(
    ("args", "status", "codes"),
    [
        (["--select", "LINT-AMP-DEPRECATED"], 0, ["LINT-AMP-DEPRECATED"]),
        (["--select", "lint-amp"], 0, ["LINT-AMP-DEPRECATED"]),
        (
            ["--select", "LINT-AMP,LINT-SAMPLER"],
            1,
            ["LINT-AMP-DEPRECATED", "LINT-SAMPLER-SHUFFLE"],
        ),
        (["--select", "LINT-AMP", "--select", "LINT-SCALER"], 1, None),
        (["--ignore", "LINT-SAMPLER-SHUFFLE,LINT-SCALER"], 0, ["LINT-AMP-DEPRECATED"]),
        (["--select", "LINT", "--ignore", "LINT-AMP"], 1, None),
        (["--select", "LINT-SCALER", "--ignore", "LINT-SCALER-FP16-PARAMS"], 0, []),
    ],
)
def test_select_and_ignore_keep_and_drop_codes_and_prefixes(
    tmp_path: Path, args: list[str], status: int, codes: list[str] | None
) -> None:
    code, found, _ = _lint(tmp_path, *args)
    expected = {
        "LINT-AMP": ["LINT-AMP-DEPRECATED", "LINT-SCALER-FP16-PARAMS"],
        "LINT": ["LINT-SAMPLER-SHUFFLE", "LINT-SCALER-FP16-PARAMS"],
    }
    if codes is None:
        codes = expected[args[1]]
    assert (code, found) == (status, codes)


def test_ignored_findings_are_dropped_from_the_text_report(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(_MIXED, encoding="utf-8")
    result = CliRunner().invoke(main, ["lint", str(script), "--ignore", "LINT-SCALER,LINT-SAMPLER"])
    assert result.exit_code == 0
    assert "LINT-AMP-DEPRECATED" in result.stdout
    assert "LINT-SAMPLER-SHUFFLE" not in result.stdout


@pytest.mark.parametrize(
    ("option", "value", "shown"),
    [
        ("--select", "LINT-AMP-DEPRECATD", "LINT-AMP-DEPRECATD"),
        ("--ignore", "LINT-AM", "LINT-AM"),
        ("--select", "LINT-AMP,NOPE", "NOPE"),
        ("--ignore", "lint_amp", "LINT_AMP"),
    ],
)
def test_an_unknown_code_or_prefix_is_one_line_and_exit_2(
    tmp_path: Path, option: str, value: str, shown: str
) -> None:
    script = tmp_path / "train.py"
    script.write_text(_MIXED, encoding="utf-8")
    result = CliRunner().invoke(main, ["lint", str(script), option, value])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"gpudiag: error: {option} {shown}: no such finding code or prefix "
        "(`gpudiag explain` lists them)"
    ]


# ---------------------------------------------------------------- --output-format


def test_output_format_json_is_the_json_document(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(_MIXED, encoding="utf-8")
    old = CliRunner().invoke(main, ["lint", str(script), "--json"])
    new = CliRunner().invoke(main, ["lint", str(script), "--output-format", "json"])
    assert (new.exit_code, new.stdout) == (old.exit_code, old.stdout)
    assert json.loads(new.stdout)["schema"] == "gpudiag-lint/1"


def test_output_format_github_is_one_workflow_command_per_finding(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(_MIXED, encoding="utf-8")
    result = CliRunner().invoke(main, ["lint", str(script), "--output-format", "github"])
    assert result.exit_code == 1
    path = str(script).replace("%", "%25").replace(":", "%3A").replace(",", "%2C")
    lines = result.stdout.splitlines()
    assert [line.split("::")[1] for line in lines] == [
        f"error file={path},line=4,col=9,title=LINT-SCALER-FP16-PARAMS",
        f"warning file={path},line=5,col=10,title=LINT-AMP-DEPRECATED",
        f"error file={path},line=7,col=10,title=LINT-SAMPLER-SHUFFLE",
    ]
    assert lines[1].endswith(
        "::torch.cuda.amp.GradScaler is deprecated since torch 2.4 and warns on every use."
    )


def test_github_format_says_notice_for_info(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text('import os\nimport torch\nos.environ["CUDA_VISIBLE_DEVICES"] = "1"\n')
    result = CliRunner().invoke(main, ["lint", str(script), "--output-format", "github"])
    assert result.exit_code == 0
    assert result.stdout.startswith("::notice file=")
    assert ",title=LINT-CVD-AFTER-IMPORT::" in result.stdout


def test_github_format_escapes_the_path_properties(tmp_path: Path) -> None:
    script = tmp_path / "a,b:c%d.py"
    script.write_text(_MIXED, encoding="utf-8")
    result = CliRunner().invoke(main, ["lint", str(script), "--output-format", "github"])
    first = result.stdout.splitlines()[0]
    assert "a%2Cb%3Ac%25d.py,line=4," in first
    assert first.count("::") == 2


def test_github_escapes_data_and_properties_as_the_actions_toolkit() -> None:
    from gpudiag.lint.github import escape_data, escape_property

    assert escape_data("50% a\r\nb: c, d") == "50%25 a%0D%0Ab: c, d"
    assert escape_property("50% a\r\nb: c, d") == "50%25 a%0D%0Ab%3A c%2C d"
    assert escape_data("\x1b[31m") == "\\x1b[31m"


def test_github_format_with_no_finding_prints_nothing(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["lint", str(script), "--output-format", "github"])
    assert (result.exit_code, result.stdout) == (0, "")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--output-format", "sarif-ish"], "'sarif-ish' is not one of 'text', 'json', 'github'"),
        (["--json", "--output-format", "github"], "--json and --output-format github conflict"),
    ],
)
def test_a_bad_output_format_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], said: str
) -> None:
    script = tmp_path / "train.py"
    script.write_text(_MIXED, encoding="utf-8")
    result = CliRunner().invoke(main, ["lint", str(script), *args])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert said in result.stderr
