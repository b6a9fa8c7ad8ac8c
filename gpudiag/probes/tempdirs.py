"""The run's private temp dir: created under held signals, always removed, and
stale ones (a run killed with SIGKILL) removed by the next run; and the signal
handling that guarantees it (SIGTERM from torchrun stopping a failed job unwinds,
and so do SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2, whose default action also ends
the process without a cleanup)."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpudiag.errors import GpudiagInputError
from gpudiag.parsing import int_or_none
from gpudiag.probes.children import Child, kill_all

TEMP_PREFIX = "gpudiag-probe-"
#: Inside each run's temp dir: the pid of the ``gpudiag probe`` that owns it.
OWNER_FILE = "owner.pid"
#: A temp dir without an owner file (an older gpudiag) is stale after this long.
_UNOWNED_STALE_S = 24 * 3600.0
#: Signals whose default action ends the process (signal(7)): each unwinds like
#: SIGTERM, so that the children are killed and the temp dir removed. Issue 21:
#: SIGHUP (a closed terminal or ssh session), SIGQUIT (Ctrl-\) and SIGUSR1 (Slurm's
#: ``--signal``) left the temp dir behind.
TERMINATING_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name)
    for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)
_HELD_SIGNALS = frozenset({signal.SIGINT, *TERMINATING_SIGNALS})


@contextmanager
def signals_held() -> Iterator[None]:
    """Blocks SIGINT and the terminating signals in this thread; delivered when the
    block ends."""
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

    Signals are held so that no Ctrl-C falls between creating the dir and owning
    it (call it with signals held, so that the caller owns the dir too). The dir
    and its owner file come together or not at all: a full TMPDIR left an
    ownerless dir behind, reported as "cannot write output" (issue 21).

    Raises:
        GpudiagInputError: the dir or its owner file cannot be created (one line
            naming TMPDIR and the real error; exit 2).
    """
    with signals_held():
        try:
            root = tempfile.gettempdir()
            tmp = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        except OSError as exc:
            raise _temp_error(tempfile.tempdir, exc) from exc
        try:
            (tmp / OWNER_FILE).write_text(f"{os.getpid()}\n", encoding="ascii")
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise _temp_error(root, exc) from exc
    return tmp


def _temp_error(root: str | None, exc: OSError) -> GpudiagInputError:
    where = f" in {root}" if root else ""
    return GpudiagInputError(
        f"cannot create the probe's private temp dir{where}: {exc.strerror or exc} "
        "(set TMPDIR to a writable directory with free space)"
    )


def cleanup(
    children: Sequence[Child], tmp: Path | None, also: Callable[[], None] | None = None
) -> None:
    """Kills every child and removes the temp dir (and runs ``also``), whatever
    signals arrive.

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
                if tmp is not None:
                    shutil.rmtree(tmp, ignore_errors=True)
                if also is not None:
                    also()
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
    """SIGTERM, the other terminating signals and Ctrl-C unwind once, so that
    :func:`cleanup` kills the children.

    SIGTERM (torchrun stopping a failed job) raises ``SystemExit(143)``, and
    SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 ``SystemExit(128 + N)`` likewise (issue
    21: their default action killed the process with the temp dir left); SIGINT
    raises ``KeyboardInterrupt``, as Python's own handler does. Those other
    signals and SIGINT are taken only where their default disposition is in
    place: a signal the caller set to ignored stays ignored (``nohup`` keeps
    SIGHUP away; a shell's background job ignores SIGINT), and one with the
    caller's own handler (a training script's SIGUSR1 hook) keeps it. Only the
    first signal raises: a second one (a double Ctrl-C; torchrun and a shell
    both signalling) must not raise again at the start of the ``finally`` before
    :func:`cleanup` holds signals, which would skip the cleanup and leave the
    children and the temp dir (seen as test_repeated_ctrl_c_cleans_up_and_exits_130
    failing every time once this context also spanned the cleanup). After a
    terminating signal fired, the handlers stay in place as no-ops: this process
    is exiting with status 128 + N, and SIG_DFL there killed it as -15 (a flaky
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

    previous: dict[signal.Signals, Callable[[int, Any], Any] | int] = {}
    for signum in TERMINATING_SIGNALS:
        current = signal.getsignal(signum)
        # SIGTERM is always taken, as before; the others only from SIG_DFL.
        if signum == signal.SIGTERM or current is signal.SIG_DFL:
            replaced = signal.signal(signum, on_term)
            # None: a handler installed outside Python, which cannot be put back.
            previous[signum] = signal.SIG_DFL if replaced is None else replaced
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
            for signum, handler in previous.items():
                signal.signal(signum, handler)
