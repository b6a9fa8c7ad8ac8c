"""Probes clean up under any signal; Ctrl-C exits 130; crashed workers are quoted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.cli.exitcodes import BAD_INPUT
from gpudiag.probes import children, tempdirs
from gpudiag.probes.runner import ProbePlan, run_probes

INTERRUPTED = 130  # docs/cli.md
OWNER_FILE = "owner.pid"  # docs/probes.md

_LAUNCH_VARS = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
    "MASTER_PORT", "TORCHELASTIC_RUN_ID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "SLURM_NODEID", "GPUDIAG_PROBE_FAULT",
)  # fmt: skip


def _env(tmpdir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCH_VARS}
    env["TMPDIR"] = str(tmpdir)
    env.update(extra)
    return env


def _workers_in(tmpdir: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"gpudiag.probes.worker" in cmdline and str(tmpdir).encode() in cmdline:
                pids.append(int(entry.name))
    return pids


def _wait_for_probe_start(tmpdir: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        for events in tmpdir.glob("gpudiag-probe-*/rank0.events"):
            if b'"start"' in events.read_bytes():
                return
        time.sleep(0.05)
    pytest.fail("the probe never started")


def _hanging_probe(
    tmp_path: Path, preexec: Callable[[], None] | None = None
) -> subprocess.Popen[str]:
    """``probe single --device cpu`` whose worker hangs (GPUDIAG_PROBE_FAULT), TMPDIR=tmp_path."""
    return subprocess.Popen(
        [sys.executable, "-m", "gpudiag", "probe", "single", "--device", "cpu"],
        env=_env(tmp_path, GPUDIAG_PROBE_FAULT="hang:single"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec,
    )


def _default_sigint() -> None:
    # A job a non-interactive shell started in the background inherits SIGINT
    # ignored (POSIX), and Python then installs no KeyboardInterrupt handler: the
    # test gives the probe the disposition a terminal's Ctrl-C meets.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("gap_s", [0.0, 0.005])
def test_repeated_ctrl_c_cleans_up_and_exits_130(tmp_path: Path, gap_s: float) -> None:
    proc = _hanging_probe(tmp_path, _default_sigint)
    try:
        _wait_for_probe_start(tmp_path, proc)
        proc.send_signal(signal.SIGINT)
        time.sleep(gap_s)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == INTERRUPTED, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "gpudiag: interrupted"
    assert list(tmp_path.glob("gpudiag-probe-*")) == []
    assert _workers_in(tmp_path) == []


def test_sigterm_cleans_up(tmp_path: Path) -> None:
    proc = _hanging_probe(tmp_path)
    try:
        _wait_for_probe_start(tmp_path, proc)
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    assert list(tmp_path.glob("gpudiag-probe-*")) == []
    assert _workers_in(tmp_path) == []


def _default_signals() -> None:
    # The dispositions a job meets in a terminal (the test runner may have been
    # started with SIGHUP ignored, under nohup).
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signum, signal.SIG_DFL)


@pytest.mark.parametrize("name", ["SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"])
def test_terminating_signals_clean_up_like_sigterm(tmp_path: Path, name: str) -> None:
    # Issue 21: their default action killed gpudiag with the temp dir and, until
    # PDEATHSIG fired, the workers left. Sent twice: the second must not cut the
    # cleanup short.
    signum = getattr(signal, name)
    proc = _hanging_probe(tmp_path, _default_signals)
    try:
        _wait_for_probe_start(tmp_path, proc)
        proc.send_signal(signum)
        proc.send_signal(signum)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
    assert _workers_in(tmp_path) == []


def test_an_ignored_sighup_stays_ignored(tmp_path: Path) -> None:
    # `nohup gpudiag probe ...` must survive the terminal closing.
    def ignore_hup() -> None:
        _default_signals()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    proc = _hanging_probe(tmp_path, ignore_hup)
    try:
        _wait_for_probe_start(tmp_path, proc)
        proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


def test_terminate_as_exit_keeps_a_callers_own_handler() -> None:
    # A training script's SIGUSR1 hook (Slurm's --signal) is the caller's to keep.
    seen: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: seen.append(signum))
    try:
        with tempdirs.terminate_as_exit():
            signal.raise_signal(signal.SIGUSR1)
        assert seen == [signal.SIGUSR1]
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_signal_just_after_the_dir_is_made_still_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The signal is held while the dir is made and delivered when the hold ends: it
    # used to raise before the runner had the dir's name, which then stayed.
    real_mkdtemp = tempdirs.tempfile.mkdtemp

    def mkdtemp_then_signal(*args: object, **kwargs: object) -> str:
        made = real_mkdtemp(*args, **kwargs)  # type: ignore[call-overload]
        os.kill(os.getpid(), signal.SIGTERM)  # pending: signals are held here
        return str(made)

    monkeypatch.setattr(tempdirs.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tempdirs.tempfile, "mkdtemp", mkdtemp_then_signal)
    saved = {s: signal.getsignal(s) for s in tempdirs.TERMINATING_SIGNALS}
    try:
        with pytest.raises(SystemExit) as exited:
            run_probes(ProbePlan(probes=("single",), device="cpu", timeout_s=30))
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
    assert exited.value.code == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


def test_a_crashed_workers_last_lines_are_in_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crash = (
        "import sys\n"
        "print('loading the model')\n"
        "print('RuntimeError: CUDA error: an illegal memory access', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    monkeypatch.setattr(children, "python_module_argv", lambda *a: [sys.executable, "-c", crash])
    monkeypatch.setattr(tempdirs.tempfile, "tempdir", str(tmp_path))
    report = run_probes(ProbePlan(probes=("single",), device="cpu", timeout_s=30))
    (result,) = report.probes
    assert result.status == "fail"
    assert "exited with code 3" in result.message
    assert "loading the model | RuntimeError: CUDA error: an illegal memory access" in (
        result.message
    )
    assert list(tmp_path.glob("gpudiag-probe-*")) == []


def test_stale_dirs_of_dead_runs_are_removed(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead_pid = int(dead.stdout)
    stale = tmp_path / "gpudiag-probe-dead"
    live = tmp_path / "gpudiag-probe-live"
    old_unowned = tmp_path / "gpudiag-probe-old"
    new_unowned = tmp_path / "gpudiag-probe-new"
    other = tmp_path / "not-ours"
    for d in (stale, live, old_unowned, new_unowned, other):
        d.mkdir()
        (d / "rank0.log").write_text("x")
    (stale / OWNER_FILE).write_text(f"{dead_pid}\n")
    (live / OWNER_FILE).write_text(f"{os.getpid()}\n")
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(old_unowned, (two_days_ago, two_days_ago))
    removed = tempdirs.remove_stale_dirs(str(tmp_path))
    assert sorted(p.name for p in removed) == ["gpudiag-probe-dead", "gpudiag-probe-old"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "gpudiag-probe-live",
        "gpudiag-probe-new",
        "not-ours",
    ]


@pytest.mark.parametrize("value", ["1e10", "3601", "inf", "nan", "0", "-1"])
def test_timeout_has_a_documented_maximum(value: str) -> None:
    result = CliRunner().invoke(main, ["probe", "single", "--device", "cpu", "--timeout", value])
    assert result.exit_code == BAD_INPUT, result.output
    assert "at most 3600 seconds" in result.output


@pytest.mark.parametrize("command", [["list"], ["check"], ["snapshot"]])
def test_ctrl_c_exits_130_everywhere(command: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudiag import collect

    def interrupted(**_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(collect, "collect_snapshot", interrupted)
    result = CliRunner().invoke(main, command)
    assert result.exit_code == INTERRUPTED, result.output
    assert result.output.strip() == "gpudiag: interrupted"


def test_terminate_as_exit_raises_once_and_gives_ctrl_c_back() -> None:
    # A second Ctrl-C while the body unwinds must not cut the cleanup short (it used
    # to leave the temp dir on every double Ctrl-C); afterwards Ctrl-C works again.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    reached = False
    try:
        with pytest.raises(KeyboardInterrupt), tempdirs.terminate_as_exit():
            try:
                signal.raise_signal(signal.SIGINT)
            finally:
                signal.raise_signal(signal.SIGINT)  # the second Ctrl-C: a no-op now
                reached = True
        assert reached
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
