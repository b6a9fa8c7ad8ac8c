"""`snapshot -o` writes atomically: never half a file, never through a symlink."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.backends.subproc import python_module_argv
from gpudiag.cli import main
from gpudiag.cli.files import write_file_atomically
from gpudiag.errors import GpudiagInputError

OLD = '{"old": "snapshot, still valid"}\n'


def _limit_file_size() -> None:
    # Writes past 300 bytes fail with EFBIG (SIGXFSZ ignored), like a full disk.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300))


def test_a_failed_write_leaves_the_old_file_intact(tmp_path: Path) -> None:
    out = tmp_path / "node.json"
    out.write_text(OLD)
    proc = subprocess.run(
        [*python_module_argv("gpudiag"), "snapshot", "--no-torch", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_file_size,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("gpudiag: error: cannot write ")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert out.read_text() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["node.json"]  # no temp file left


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "node.json"
    link.symlink_to(victim)
    write_file_atomically(str(link), '{"new": 1}\n')
    assert victim.read_text() == "precious\n"
    assert not link.is_symlink()
    assert json.loads(link.read_text()) == {"new": 1}


def test_existing_mode_is_kept_and_new_files_follow_the_umask(tmp_path: Path) -> None:
    kept = tmp_path / "kept.json"
    kept.write_text(OLD)
    kept.chmod(0o640)
    write_file_atomically(str(kept), "{}\n")
    assert kept.stat().st_mode & 0o777 == 0o640
    fresh = tmp_path / "fresh.json"
    umask = os.umask(0o022)
    try:
        write_file_atomically(str(fresh), "{}\n")
    finally:
        os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("where", ["dir", "missing-dir"])
def test_unwritable_targets_are_one_line(tmp_path: Path, where: str) -> None:
    target = tmp_path if where == "dir" else tmp_path / "nope" / "x.json"
    with pytest.raises(GpudiagInputError, match=r"^cannot write .*: "):
        write_file_atomically(str(target), "{}\n")


def test_snapshot_dash_o_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudiag import collect

    from .conftest import load_fixture

    monkeypatch.setattr(collect, "collect_snapshot", lambda **_: load_fixture("a100x8"))
    out = tmp_path / "node.json"
    out.symlink_to(tmp_path / "elsewhere.json")
    result = CliRunner().invoke(main, ["snapshot", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "elsewhere.json").exists()
    assert json.loads(out.read_text())["schema"] == "gpudiag-snapshot/1.2"


def test_snapshot_redact_drops_hostnames_process_names_and_pids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpudiag import collect

    from .conftest import load_fixture

    machine = load_fixture("a100x8")
    assert machine.hostname and any(g.processes for g in machine.gpus)
    monkeypatch.setattr(collect, "collect_snapshot", lambda **_: machine)
    out = tmp_path / "public.json"
    result = CliRunner().invoke(main, ["snapshot", "--redact", "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    doc = json.loads(text)
    assert doc["hostname"] is None
    processes = [p for g in doc["gpus"] for p in g["processes"]]
    assert processes and all(p["pid"] is None and p["name"] is None for p in processes)
    assert all(p["used_memory_mib"] is not None for p in processes)
    assert machine.hostname not in text
    for gpu in machine.gpus:
        for proc in gpu.processes:
            assert f'"pid": {proc.pid}' not in text
            assert proc.name is None or f'"{proc.name}"' not in text
    # The redacted file replays: the health finding is still there, without PIDs.
    check = CliRunner().invoke(main, ["check", "--snapshot", str(out)])
    assert "HEALTH-FOREIGN-PROCESSES" in check.output and "pid redacted" in check.output
