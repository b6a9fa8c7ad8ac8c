"""Issue 21, hostile round 3, for ``gpudiag probe``: a full TMPDIR that left an
ownerless probe dir behind and was reported as "cannot write output".
"""

from __future__ import annotations

import errno
import os
import pathlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.cli.exitcodes import BAD_INPUT
from gpudiag.probes import children, tempdirs

from .conftest import clear_launch_env

# --- a full TMPDIR (item 2) --------------------------------------------------


def test_a_full_tmpdir_leaves_no_ownerless_dir_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seen on a tmpfs with one free inode: mkdtemp worked, owner.pid did not; the
    # dir stayed (no owner: kept for a day) and the error read "cannot write output".
    clear_launch_env(monkeypatch, "GPUDIAG_")
    monkeypatch.setattr(tempdirs.tempfile, "tempdir", str(tmp_path))
    original = pathlib.Path.write_text

    def write_text(self: Path, *args: Any, **kwargs: Any) -> int:
        if self.name == tempdirs.OWNER_FILE:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", write_text)
    result = CliRunner().invoke(main, ["probe", "single", "--device", "cpu"])
    assert result.exit_code == BAD_INPUT, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"gpudiag: error: cannot create the probe's private temp dir in {tmp_path}: "
        "No space left on device (set TMPDIR to a writable directory with free space)"
    )
    assert "cannot write output" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_worker_that_cannot_start_is_reported_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clear_launch_env(monkeypatch, "GPUDIAG_")
    monkeypatch.setattr(tempdirs.tempfile, "tempdir", str(tmp_path))

    def no_fork(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))

    monkeypatch.setattr(children.subprocess, "Popen", no_fork)
    result = CliRunner().invoke(main, ["probe", "single", "--device", "cpu"])
    assert result.exit_code == BAD_INPUT, result.output
    assert result.output.strip().splitlines()[-1] == (
        "gpudiag: error: cannot start a probe worker: [Errno 11] Resource temporarily unavailable"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_worker_with_no_room_for_its_log_is_not_reported_as_silent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "rank0.log"
    log.write_bytes(b"")
    child = children.Child(0, ("single",), None, tmp_path / "rank0.events", log, 0.0)
    full = os.statvfs_result((4096, 4096, 4, 0, 0, 10, 0, 0, 0, 255))
    monkeypatch.setattr(children.os, "statvfs", lambda path: full)
    assert child.log_tail() == (
        f"no log: the temp dir's file system is full ({tmp_path.parent}: No space left on device)"
    )
