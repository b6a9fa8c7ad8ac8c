"""The run's private temp dir: created under held signals, always removed, and
stale ones (a run killed with SIGKILL) removed by the next run; and the signal
handling that guarantees it (SIGTERM from torchrun stopping a failed job unwinds)."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from gpudiag.parsing import int_or_none
from gpudiag.probes.children import Child, kill_all

TEMP_PREFIX = "gpudiag-probe-"
#: Inside each run's temp dir: the pid of the ``gpudiag probe`` that owns it.
OWNER_FILE = "owner.pid"
#: A temp dir without an owner file (an older gpudiag) is stale after this long.
_UNOWNED_STALE_S = 24 * 3600.0
_HELD_SIGNALS = frozenset(
    {signal.SIGINT, signal.SIGTERM} | ({signal.SIGHUP} if hasattr(signal, "SIGHUP") else set())
)


@contextmanager
def signals_held() -> Iterator[None]:
    """Blocks SIGINT/SIGTERM/SIGHUP in this thread; delivered when the block ends."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "pthread_sigmask"
    ):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def make_run_dir() -> Path:
    """A new private temp dir holding this process's pid (see :func:`remove_stale_dirs`).

    Signals are held so that no Ctrl-C falls between creating the dir and owning it.
    """
    with signals_held():
        tmp = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        (tmp / OWNER_FILE).write_text(f"{os.getpid()}\n", encoding="ascii")
    return tmp


def cleanup(children: Sequence[Child], tmp: Path) -> None:
    """Kills every child and removes the temp dir, whatever signals arrive.

    Signals are held while it runs; one that Python had already taken (a
    second Ctrl-C 10 ms after the first) cannot cut it short either: the
    cleanup is retried, and the first interruption is re-raised after it.
    """
    interrupted: BaseException | None = None
    with signals_held():
        while True:
            try:
                kill_all(children)
                for child in children:
                    if child.tail_lines is None:
                        child.capture_log()
                shutil.rmtree(tmp, ignore_errors=True)
                break
            except (KeyboardInterrupt, SystemExit) as exc:
                interrupted = interrupted or exc
    if interrupted is not None:
        raise interrupted


def remove_stale_dirs(base: str | None = None) -> list[Path]:
    """Removes this user's probe temp dirs whose owning process is gone.

    A run killed with SIGKILL (or a machine reset) cannot clean up after
    itself; the next run does. A dir whose owner is alive is never touched.
    Returns the dirs removed.
    """
    removed: list[Path] = []
    root = Path(base if base is not None else tempfile.gettempdir())
    try:
        entries = list(root.glob(TEMP_PREFIX + "*"))
    except OSError:
        return removed
    for entry in entries:
        try:
            info = entry.lstat()
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                continue
            owner = _owner_pid(entry)
            if owner is None:
                stale = time.time() - info.st_mtime > _UNOWNED_STALE_S
            else:
                stale = not _pid_alive(owner)
        except OSError:
            continue
        if stale:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _owner_pid(entry: Path) -> int | None:
    try:
        text = (entry / OWNER_FILE).read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return int_or_none(text, minimum=1)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


@contextmanager
def terminate_as_exit() -> Iterator[None]:
    """SIGTERM and Ctrl-C unwind once, so that :func:`cleanup` kills the children.

    SIGTERM (torchrun stopping a failed job) raises ``SystemExit(143)``; SIGINT
    raises ``KeyboardInterrupt``, as Python's own handler does (only where that
    handler is installed: a SIGINT a shell set to ignored stays ignored). Only the
    first signal raises: a second one (a double Ctrl-C; torchrun and a shell both
    signalling) must not raise again at the start of the ``finally`` before
    :func:`cleanup` holds signals, which would skip the cleanup and leave the
    children and the temp dir (seen as test_repeated_ctrl_c_cleans_up_and_exits_130
    failing every time once this context also spanned the cleanup). After a
    SIGTERM fired, its handler stays in place as a no-op: this process is exiting
    with status 143, and SIG_DFL there killed it as -15 (a flaky
    test_sigterm_cleans_up). Python's SIGINT handler is restored on the way out,
    after the cleanup: a library caller that catches KeyboardInterrupt keeps Ctrl-C.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = False  # a signal has raised: the body is unwinding
    term_fired = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal fired, term_fired
        term_fired = True
        if fired:
            return  # already unwinding: the cleanup is under way
        fired = True
        raise SystemExit(128 + signum)

    def on_int(signum: int, frame: object) -> None:
        nonlocal fired
        if fired:
            return
        fired = True
        raise KeyboardInterrupt

    previous_term = signal.signal(signal.SIGTERM, on_term)
    previous_int = signal.getsignal(signal.SIGINT)
    catch_int = previous_int is signal.default_int_handler
    if catch_int:
        signal.signal(signal.SIGINT, on_int)
    try:
        yield
    finally:
        if catch_int:
            signal.signal(signal.SIGINT, previous_int)
        if not term_fired:
            signal.signal(signal.SIGTERM, previous_term)
