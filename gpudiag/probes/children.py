"""The worker children: start one, follow its events, kill them all.

Each worker runs in its own session so that one ``killpg`` ends it and anything
it started; :func:`monitor` is the hard wall-clock limit (it does not trust the
child to time out: NCCL's communicator set-up ignores process-group timeouts).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from gpudiag.backends.subproc import python_module_argv
from gpudiag.probes.plan import ProbePlan
from gpudiag.probes.rendezvous import RDZV_TOKEN_ENV
from gpudiag.probes.results import ProbeResult

#: Start-up (Python + ``import torch``, and CUDA context creation) gets its own
#: limit so that ``--timeout`` measures the probe itself, not a loaded machine.
STARTUP_LIMIT_S = 120.0
#: After its ``done`` event a child should exit at once; it is killed after this.
EXIT_GRACE_S = 10.0
_POLL_S = 0.02
#: How many of a crashed worker's last log lines its report quotes.
LOG_TAIL_LINES = 5


@dataclass
class Child:
    """A running worker, and what its events have told us so far."""

    rank: int
    probes: tuple[str, ...]
    popen: Any
    events_path: Path
    log_path: Path
    launched_at: float
    ready_at: float | None = None
    current: str | None = None
    probe_started_at: float | None = None
    stage: str | None = None
    arrived: set[int] = field(default_factory=set)
    forged: set[int] = field(default_factory=set)
    results: dict[str, ProbeResult] = field(default_factory=dict)
    done_at: float | None = None
    offset: int = 0
    #: Called with (rank, event) for each event read: progress on stderr.
    on_event: Callable[[int, dict[str, Any]], None] | None = None
    tail_lines: tuple[str, ...] | None = None

    def read_events(self, now: float) -> None:
        """Consumes complete lines appended since the last call."""
        try:
            with open(self.events_path, "rb") as stream:
                stream.seek(self.offset)
                data = stream.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n")
        if end < 0:
            return
        self.offset += end + 1
        for line in data[: end + 1].splitlines():
            if line.strip():
                self._apply(json.loads(line), now)

    def _apply(self, event: dict[str, Any], now: float) -> None:
        if self.on_event is not None:
            self.on_event(self.rank, event)
        kind = event.get("ev")
        if kind == "ready":
            self.ready_at = now
        elif kind == "start":
            self.current = str(event["probe"])
            self.probe_started_at = now
            self.stage = "start"
        elif kind == "stage":
            self.stage = str(event["stage"])
            for rank in event.get("arrived") or ():
                self.arrived.add(int(rank))
            for rank in event.get("forged") or ():
                self.forged.add(int(rank))
        elif kind == "result":
            result = ProbeResult.from_json(event["result"])
            self.results[result.probe] = result
            self.current = None
            self.probe_started_at = None
        elif kind == "done":
            self.done_at = now

    def capture_log(self) -> None:
        """Keeps the last lines of the child's log in memory (before the temp
        dir is removed: a crashed worker was reported as "no output")."""
        try:
            with open(self.log_path, "rb") as stream:
                stream.seek(0, os.SEEK_END)
                stream.seek(max(0, stream.tell() - 16384))
                text = stream.read().decode("utf-8", errors="replace")
        except OSError:
            return
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if not lines:
            # A worker that could not write even its log (a full TMPDIR) was
            # reported as "no output" (issue 21): say why there is none.
            full = _full_disk(self.log_path.parent)
            lines = [full] if full else []
        self.tail_lines = tuple(line[:300] for line in lines[-LOG_TAIL_LINES:])

    def log_tail(self) -> str:
        """The child's last log lines, joined with `` | `` (captured before cleanup)."""
        if self.tail_lines is None:
            self.capture_log()
        return " | ".join(self.tail_lines or ())


def _full_disk(path: Path) -> str | None:
    """A note when ``path``'s file system has no room left (blocks or inodes)."""
    try:
        info = os.statvfs(path)
    except OSError:
        return None
    if info.f_bavail * info.f_frsize >= 64 * 1024 and (info.f_files == 0 or info.f_favail > 0):
        return None
    return f"no log: the temp dir's file system is full ({path.parent}: No space left on device)"


@dataclass(frozen=True)
class Outcome:
    """How a run ended: every child done, one past a limit, or one exited early."""

    kind: Literal["ok", "timeout", "crash"]
    child: Child | None = None
    limit_s: float = 0.0


def spawn(
    plan: ProbePlan,
    tmp: Path,
    rank: int,
    world_size: int,
    probes: Sequence[str],
    threads: int,
    run_id: str,
    token: str,
) -> Child:
    """Starts one worker in a new session (its own process group)."""
    launch = plan.launch
    events_path = tmp / f"rank{rank}.events"
    log_path = tmp / f"rank{rank}.log"
    events_path.touch()
    # Never `python -m`: that would import from the user's working directory.
    argv = python_module_argv(
        "gpudiag.probes.worker",
        "--events", str(events_path),
        "--probes", ",".join(probes),
        "--device", plan.device,
        "--rank", str(rank),
        "--world-size", str(world_size),
        "--local-rank", str(launch.local_rank if launch is not None else rank),
        "--store", "env" if launch is not None else f"file:{tmp / 'store'}",
        "--run-id", launch.run_id if launch is not None else run_id,
        "--timeout", repr(plan.timeout_s),
        "--threads", str(threads),
        "--parent-pid", str(os.getpid()),
    )  # fmt: skip
    if launch is not None and launch.node_rank is not None:
        argv += ["--node-rank", str(launch.node_rank)]
    if plan.device_ids is not None:
        argv += ["--device-ids", ",".join(str(i) for i in plan.device_ids)]
    env = dict(os.environ)
    # Only the children see --visible/--order: the parent's CUDA state is untouched.
    if plan.visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = plan.visible
    if plan.order is not None:
        env["CUDA_DEVICE_ORDER"] = plan.order
    if plan.device == "cpu":
        # --device cpu must not touch a GPU: on a GPU machine DataParallel would
        # otherwise move the model to cuda:0 (seen on an H100). An empty value hides
        # every GPU from CUDA and torch before either initialises.
        env["CUDA_VISIBLE_DEVICES"] = ""
    env["OMP_NUM_THREADS"] = str(threads)
    # Whatever torch writes to the temp dir lands in the run's private dir and goes
    # with it (issue 21: importing torch._dynamo left an empty torchinductor_<user>
    # behind after every probe; torch 2.13's _inductor/runtime/cache_dir_utils.py
    # reads TORCHINDUCTOR_CACHE_DIR, else tempfile.gettempdir(), and
    # TRITON_CACHE_DIR, else a dir under the former).
    env["TMPDIR"] = str(tmp)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp / "torchinductor")
    env["TRITON_CACHE_DIR"] = str(tmp / "triton")
    if launch is not None and launch.master_addr and launch.master_port is not None:
        # The worker's env store reads these (the one-node MPI default included).
        env["MASTER_ADDR"] = launch.master_addr
        env["MASTER_PORT"] = str(launch.master_port)
    # The rendezvous token goes in the environment, never in argv (which
    # every user on the host can read in ps).
    env[RDZV_TOKEN_ENV] = token
    log: IO[bytes]
    with open(log_path, "wb") as log:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    return Child(rank, tuple(probes), popen, events_path, log_path, time.monotonic())


def monitor(children: list[Child], timeout_s: float) -> Outcome:
    """Polls events until every child is done, one crashes, or a limit passes.

    This loop is the hard limit: it does not trust the child to time out.
    """
    while children:
        now = time.monotonic()
        for child in children:
            child.read_events(now)
        all_exited = True
        for child in children:
            code = child.popen.poll()
            if code is None:
                all_exited = False
                if child.ready_at is None and now - child.launched_at > STARTUP_LIMIT_S:
                    return Outcome("timeout", child, STARTUP_LIMIT_S)
                if child.probe_started_at is not None and now - child.probe_started_at > timeout_s:
                    return Outcome("timeout", child, timeout_s)
                if child.done_at is not None and now - child.done_at > EXIT_GRACE_S:
                    child.popen.kill()  # results are in; only its exit is stuck
            else:
                child.read_events(time.monotonic())
                if child.done_at is None:
                    return Outcome("crash", child)
        if all_exited:
            return Outcome("ok")
        time.sleep(_POLL_S)
    return Outcome("ok")


def kill_all(children: Sequence[Child]) -> None:
    """SIGKILLs each live child's process group, then reaps every child."""
    for child in children:
        if child.popen.poll() is None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(child.popen.pid, signal.SIGKILL)
    for child in children:
        try:
            child.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:  # a kill that did not land: try once more
            child.popen.kill()
            # A process stuck in uninterruptible sleep (a wedged driver call)
            # cannot be reaped; report the probe rather than hang or crash here.
            with suppress(subprocess.TimeoutExpired):
                child.popen.wait(timeout=10)
