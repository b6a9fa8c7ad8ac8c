"""Issue 21, the command line under hostile input and hostile output:

- click's usage errors are one escaped line and exit 2 (an extra argument holding
  an OSC sequence used to reach the terminal raw, over three lines);
- a reader that closes the pipe in the middle of a large report is exit 2 under
  ``PYTHONUNBUFFERED=1`` too (it was exit 0 with the report cut short);
- an OSError is reported by its own text and file, never as "cannot write
  output" unless standard output is what failed;
- output files: an empty or a very long name gets a readable one-line refusal.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main

from .conftest import clear_launch_env, fixture_path

A100 = str(fixture_path("a100x8"))
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e")


@pytest.fixture(autouse=True)
def _no_launcher_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_launch_env(monkeypatch, "GPUDIAG_")


USAGE_ERRORS = [
    ["list", "a\x1b]0;pwn\x07b"],  # "Got unexpected extra argument"
    ["check", "--snapshot", A100, "x\x1b[2J"],
    ["explain", "DP-DEVICES", "\x1b[31mred"],
    ["check", "--bad\x1b]0;t\x07opt"],  # "No such option"
    ["li\x1bst"],  # "No such command"
    ["check", "--order", "X\x1b[31m\u202e"],  # a bad choice
    ["list", "--snapshot"],  # "requires an argument"
    ["--bogus\x07"],  # the group's own options
    ["--local_rank=\x1bx", "list"],
    ["probe", "nope\x1b[1m"],
    ["check", "--json-out", "/"],  # click.Path: a directory
    ["snapshot", "-o", "/tmp"],
]


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=lambda a: repr(a)[:40])
def test_usage_errors_are_one_escaped_line_exit_2(args: list[str]) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gpudiag: error: "), lines
    assert not any(c in result.stderr for c in RAW_CONTROLS), repr(result.stderr)


def test_the_extra_argument_is_shown_escaped_with_where_to_look() -> None:
    result = CliRunner().invoke(main, ["list", "a\x1b]0;pwn\x07b"], prog_name="gpudiag")
    assert result.stderr == (
        "gpudiag: error: Got unexpected extra argument (a\\x1b]0;pwn\\x07b) "
        "(see 'gpudiag list --help')\n"
    )


def test_a_bare_gpudiag_still_prints_the_help() -> None:
    result = CliRunner().invoke(main, [])
    assert result.exit_code == 2
    assert "Commands:" in result.output


def _big_snapshot(tmp_path: Path, gpus: int = 2000) -> str:
    doc = json.loads(Path(A100).read_text())
    rows = []
    for i in range(gpus):
        gpu = copy.deepcopy(doc["gpus"][i % len(doc["gpus"])])
        gpu["nvml_index"] = i
        gpu["uuid"] = f"GPU-{uuid.UUID(int=i + 1)}"
        gpu["pci_bus_id"] = f"{i // 256:08X}:{i % 256:02X}:00.0"
        rows.append(gpu)
    doc["gpus"] = rows
    if doc.get("torch"):
        doc["torch"]["devices"] = []
    path = tmp_path / "big.json"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("unbuffered", ["1", ""])
@pytest.mark.parametrize("args", [["list", "--json"], ["list"], ["check", "--json"]])
def test_a_pipe_closed_mid_report_is_exit_2(
    tmp_path: Path, args: list[str], unbuffered: str
) -> None:
    # The report (over 170 KB) is one write(2), larger than the pipe (64 KiB):
    # once its first byte has arrived, the writer is blocked inside that write
    # when the reader goes away (`| head -c1`).
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUDIAG_")}
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpudiag", *args, "--snapshot", _big_snapshot(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        assert proc.stdout.read(1)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert code == 2, err
    assert err.splitlines() == ["gpudiag: error: cannot write output: Broken pipe"]


def test_an_oserror_that_is_not_the_output_says_what_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gpudiag.machine

    def failing(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))

    monkeypatch.setattr(gpudiag.machine, "load_machine", failing)
    result = CliRunner().invoke(main, ["check", "--snapshot", A100])
    assert result.exit_code == 2
    assert result.stderr == f"gpudiag: error: {os.strerror(errno.ENOMEM)}\n"


def test_an_oserror_names_its_file_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpudiag.machine

    def failing(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", "/run/x\x1b[2Jy")

    monkeypatch.setattr(gpudiag.machine, "load_machine", failing)
    result = CliRunner().invoke(main, ["list", "--snapshot", A100])
    assert result.exit_code == 2
    assert result.stderr == "gpudiag: error: /run/x\\x1b[2Jy: Permission denied\n"


@pytest.mark.parametrize(
    "args", [["check", "--snapshot", A100, "--json-out"], ["snapshot", "--no-torch", "-o"]]
)
def test_an_empty_output_name_is_refused_plainly(args: list[str]) -> None:
    result = CliRunner().invoke(main, [*args, ""])
    assert result.exit_code == 2
    # was "cannot write : Device or resource busy" (a rename over ".")
    assert result.stderr == "gpudiag: error: cannot write '': an empty file name\n"


def test_a_long_output_name_keeps_its_reason(tmp_path: Path) -> None:
    name = str(tmp_path / ("a" * 300))
    result = CliRunner().invoke(main, ["check", "--snapshot", A100, "--json-out", name])
    assert result.exit_code == 2
    assert result.stderr.endswith(f"…[{len(name)} chars]: File name too long\n"), result.stderr


@pytest.mark.parametrize(
    ("where", "error", "says"),
    [
        ("os.write", OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
        ("os.replace", PermissionError(errno.EACCES, "Permission denied"), "Permission denied"),
        ("os.fsync", OSError(errno.EIO, "Input/output error"), "Input/output error"),
    ],
)
def test_output_file_errors_are_reported_as_themselves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, error: OSError, says: str
) -> None:
    import gpudiag.cli.files as files

    def failing(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(files.os, where.split(".")[1], failing)
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["list", "--snapshot", A100, "--json-out", str(out)])
    assert result.exit_code == 2
    assert result.stderr == f"gpudiag: error: cannot write {out}: {says}\n"
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_snapshot_names_its_output_escaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["snapshot", "--no-torch", "-o", "a\u202eb\x1b[1m.json"])
    assert result.exit_code == 0, result.output
    assert result.stderr == "wrote a\\u202eb\\x1b[1m.json\n"
