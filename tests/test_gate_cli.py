"""Gate conventions: one rule for unwritable output, --json-out, --ignore, GPUDIAG_* settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main

from .conftest import fixture_path

A100 = str(fixture_path("a100x8"))
LOST = str(fixture_path("gpu_lost"))


def _gpudiag(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUDIAG_")}
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "gpudiag", *args],
        capture_output=kwargs.pop("capture_output", True),
        text=True,
        timeout=60,
        env=env,
        **kwargs,
    )


def _into_closed_pipe(args: list[str]) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before a byte is written (`| true`)
    try:
        return _gpudiag(args, capture_output=False, stdout=write_end, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [["list", "--snapshot", A100], ["check", "--snapshot", A100, "--json"], ["--help"],
     ["--version"], ["list", "--help"]],
)  # fmt: skip
def test_broken_pipe_is_exit_2_and_one_line(args: list[str]) -> None:
    proc = _into_closed_pipe(args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == ["gpudiag: error: cannot write output: Broken pipe"]


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["list", "--snapshot", A100]])
def test_full_disk_is_exit_2_and_one_line(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        proc = _gpudiag(args, capture_output=False, stdout=full, stderr=subprocess.PIPE)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith("gpudiag: error: cannot write output: ")


@pytest.mark.parametrize("args", [["list", "--snapshot", A100], ["--version"]])
def test_closed_stdout_is_exit_2_and_one_line(args: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c",
         "import os, sys, runpy; os.close(1); sys.argv = ['gpudiag', *sys.argv[1:]]; "
         "runpy.run_module('gpudiag', run_name='__main__')", *args],
        capture_output=False, stderr=subprocess.PIPE, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("gpudiag: error: cannot write output: ")


@pytest.mark.parametrize("command", ["list", "check"])
def test_json_out_beside_the_human_report(tmp_path: Path, command: str) -> None:
    out = tmp_path / "report.json"
    human = CliRunner().invoke(main, [command, "--snapshot", A100, "--json-out", str(out)])
    machine = CliRunner().invoke(main, [command, "--snapshot", A100, "--json"])
    assert human.exit_code == machine.exit_code == 0
    assert not human.output.lstrip().startswith("{")  # stdout stays the human report
    assert json.loads(out.read_text()) == json.loads(machine.output)


def test_json_out_unwritable_is_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["list", "--snapshot", A100, "--json-out", str(tmp_path / "no" / "x.json")]
    )
    assert result.exit_code == 2
    assert result.output.startswith("gpudiag: error: cannot write ")


def test_ignore_drops_accepted_findings_and_changes_the_exit_status() -> None:
    runner = CliRunner()
    assert runner.invoke(main, ["check", "--snapshot", LOST]).exit_code == 1
    result = runner.invoke(
        main, ["check", "--snapshot", LOST, "--json", "--ignore", "HEALTH-GPU-LOST"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert "HEALTH-GPU-LOST" not in {f["code"] for f in doc["findings"]}
    assert doc["ok"] is True
    assert result.stderr.strip() == "gpudiag: ignored 1 finding(s): HEALTH-GPU-LOST"
    strict = runner.invoke(main, ["check", "--snapshot", A100, "--strict"])
    assert strict.exit_code == 1
    both = runner.invoke(
        main, ["check", "--snapshot", A100, "--strict", "--ignore", "health-foreign-processes"]
    )
    assert both.exit_code == 0, both.output


def test_ignore_on_list_and_repeatable() -> None:
    result = CliRunner().invoke(
        main,
        ["list", "--snapshot", str(fixture_path("mixed4")), "--json",
         "--ignore", "VIS-ORDER-MIXED", "--ignore", "VIS-INDEX-MISMATCH,VIS-TORCH-NVML-ORDER"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    codes = {f["code"] for f in json.loads(result.stdout)["findings"]}
    assert not codes & {"VIS-ORDER-MIXED", "VIS-INDEX-MISMATCH", "VIS-TORCH-NVML-ORDER"}


@pytest.mark.parametrize("code", ["NOPE-CODE", "health", "X" * 5000])
def test_unknown_ignore_code_is_bad_input(code: str) -> None:
    result = CliRunner().invoke(main, ["check", "--snapshot", A100, "--ignore", code])
    assert result.exit_code == 2
    assert result.output.startswith("gpudiag: error: --ignore ")
    assert len(result.output) < 200


def test_gpudiag_environment_settings() -> None:
    runner = CliRunner()
    strict = runner.invoke(main, ["check", "--snapshot", A100], env={"GPUDIAG_CHECK_STRICT": "1"})
    assert strict.exit_code == 1
    as_json = runner.invoke(
        main, ["list"], env={"GPUDIAG_LIST_SNAPSHOT": A100, "GPUDIAG_LIST_JSON": "1"}
    )
    assert as_json.exit_code == 0 and json.loads(as_json.stdout)["schema"] == "gpudiag-list/1"
    ignored = runner.invoke(
        main,
        ["check", "--snapshot", LOST],
        env={"GPUDIAG_CHECK_IGNORE": "HEALTH-GPU-LOST VIS-TORCH-COUNT"},
    )
    assert ignored.exit_code == 0, ignored.output
    # An option on the command line wins over the environment.
    visible = runner.invoke(
        main, ["list", "--snapshot", A100, "--json", "--visible", "1"],
        env={"GPUDIAG_LIST_VISIBLE": "2"},
    )  # fmt: skip
    assert json.loads(visible.stdout)["resolution"]["spec"] == "1"
    bad = runner.invoke(main, ["probe", "single"], env={"GPUDIAG_PROBE_TIMEOUT": "1e10"})
    assert bad.exit_code == 2


def test_undecodable_bytes_in_argv_are_bad_input() -> None:
    # Found by the fuzz bench: Python turns undecodable argv bytes into lone
    # surrogates (PEP 383), which crashed the first print.
    proc = subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"gpudiag", b"list", b"--snapshot",
         os.fsencode(A100), b"--visible", b"\xff"],
        capture_output=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.decode().strip().splitlines() == [
        "gpudiag: error: argument '\\\\udcff' is not valid UTF-8 text"
    ]
    result = CliRunner().invoke(main, ["list", "--snapshot", A100, "--visible", "\ud800"])
    assert result.exit_code == 2


def test_undecodable_bytes_in_the_environment_never_crash() -> None:
    env = {**os.environ, "SLURM_JOB_GPUS": "\udcff", "GPUDIAG_CHECK_VISIBLE": "\udcff"}
    proc = subprocess.run(
        [sys.executable, "-m", "gpudiag", "check", "--snapshot", A100],
        capture_output=True, timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode in (0, 1, 2), proc.stderr
    assert b"Traceback" not in proc.stderr
