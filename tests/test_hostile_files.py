"""Issue 21: outputs go only to regular files, lint reads only bounded regular files,
and ``probe --nproc`` has an upper bound. Each case failed before the fix.

No test here ever points a write at a real special file: a symbolic link in a
temporary folder stands for ``/dev/null`` and ``/dev/stdout``, so a broken check
replaces the link, never the device.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.backends.subproc import python_module_argv
from gpudiag.cli import main
from gpudiag.cli.files import write_file_atomically
from gpudiag.errors import GpudiagInputError
from gpudiag.lint.source import MAX_LINT_BYTES, collect_paths

from .conftest import fixture_path

OLD = "old contents\n"


def _refused(path: Path, match: str) -> None:
    with pytest.raises(GpudiagInputError, match=match):
        write_file_atomically(str(path), "{}\n")


def test_a_link_to_a_character_device_is_refused_and_left_alone(tmp_path: Path) -> None:
    link = tmp_path / "out.json"
    link.symlink_to("/dev/null")
    _refused(link, r"^cannot write .*: it is in /dev, a directory of special files$")
    assert link.is_symlink()
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_link_to_standard_output_is_refused(tmp_path: Path) -> None:
    # /dev/stdout is a link to /proc/self/fd/1: refused by either spelling.
    link = tmp_path / "stdout.json"
    link.symlink_to("/proc/self/fd/1")
    _refused(link, r"it is in /proc, a directory of special files")
    assert link.is_symlink()


def test_the_dev_stdout_spelling_is_refused_before_anything_is_resolved() -> None:
    # abspath alone decides: nothing is written, whatever stdout is.
    _refused(Path("/dev/stdout"), r"^cannot write /dev/stdout: it is in /dev")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    _refused(fifo, r"it is a FIFO \(named pipe\); gpudiag writes only regular files")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_link_to_a_fifo_elsewhere_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "out.json"
    link.symlink_to(fifo)
    _refused(link, r"it is a FIFO")
    assert link.is_symlink()


def test_a_read_only_file_is_kept(tmp_path: Path) -> None:
    kept = tmp_path / "kept.json"
    kept.write_text(OLD)
    kept.chmod(0o444)
    _refused(kept, r"it is read-only \(mode 0444\)")
    assert kept.read_text() == OLD


def test_check_never_writes_over_its_own_snapshot(tmp_path: Path) -> None:
    snap = tmp_path / "node.json"
    original = fixture_path("mixed4").read_text()
    snap.write_text(original)
    result = CliRunner().invoke(main, ["check", "--snapshot", str(snap), "--json-out", str(snap)])
    assert result.exit_code == 2, result.output
    assert f"cannot write {snap}: it is the input being read" in result.output
    assert snap.read_text() == original


def test_an_oserror_about_a_file_names_that_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpudiag import collect

    def full(**_: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "probe-dir"))

    monkeypatch.setattr(collect, "collect_snapshot", full)
    result = CliRunner().invoke(main, ["snapshot"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == [f"gpudiag: error: {tmp_path / 'probe-dir'}: {os.strerror(errno.ENOSPC)}"]


@pytest.mark.parametrize("value", ["1000000", "99999999999999999999"])
def test_probe_nproc_has_an_upper_bound(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpudiag.cli import probe_cmd

    monkeypatch.setattr(probe_cmd, "max_nproc", lambda: 4)
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        monkeypatch.delenv(var, raising=False)
    result = CliRunner().invoke(main, ["probe", "ddp", "--device", "cpu", "--nproc", value])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        "gpudiag: error: --nproc must be at most 4 here, the CPUs this process may use or "
        "the GPUs, whichever is more: each rank is a process with its own torch (got "
        + (value if len(value) < 30 else "a larger number")
        + ")"
    ]


def test_max_nproc_is_at_least_a_pair_and_the_cpus() -> None:
    from gpudiag.cli.probe_cmd import max_nproc

    assert max_nproc() >= max(2, len(os.sched_getaffinity(0)))


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/null"])
def test_lint_refuses_devices(target: str) -> None:
    with pytest.raises(GpudiagInputError, match="it is a character device"):
        collect_paths([target])


def test_lint_paths_takes_one_path_as_one_path() -> None:
    from gpudiag.lint import lint_paths

    # It used to iterate the characters of "/dev/null" and walk "/".
    with pytest.raises(GpudiagInputError, match="'/dev/null': it is a character device"):
        lint_paths("/dev/null")


def test_lint_refuses_a_py_link_to_dev_zero_inside_a_folder(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import torch\n")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    with pytest.raises(GpudiagInputError, match=r"zero\.py'.*character device"):
        collect_paths([str(tmp_path)])


def test_lint_refuses_a_file_over_the_limit_without_reading_it(tmp_path: Path) -> None:
    big = tmp_path / "huge.py"
    with big.open("wb") as handle:
        handle.truncate(64 * 1024**3)  # sparse: 64 GiB of nothing
    with pytest.raises(GpudiagInputError, match=r"68719476736 bytes is over lint's limit of 4"):
        collect_paths([str(big)])
    just = tmp_path / "just.py"
    just.write_bytes(b"#" * (MAX_LINT_BYTES - 1) + b"\n")
    assert collect_paths([str(just)]) == [just]


def test_lint_on_a_fifo_is_one_line_and_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "train.py"
    os.mkfifo(fifo)
    proc = subprocess.run(
        [*python_module_argv("gpudiag"), "lint", str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"gpudiag: error: cannot lint {str(fifo)!r}: it is a FIFO (named pipe); "
        "lint reads regular files"
    ]


def test_lint_an_undefined_coding_cookie_is_a_parse_error_not_a_traceback(tmp_path: Path) -> None:
    from gpudiag.lint.source import lint_file

    script = tmp_path / "train.py"
    script.write_text("# coding: undefined\nimport torch\n")
    findings, facts, _ = lint_file(script)
    assert facts is None
    assert [f.finding.code for f in findings] == ["LINT-PARSE-ERROR"]
    assert "undefined" in findings[0].finding.message
