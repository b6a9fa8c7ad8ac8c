"""Runs probes in child processes under a hard wall-clock limit.

The parent (the ``gpudiag probe`` process) never imports torch. It starts
``python -m gpudiag.probes.worker`` children, each in its own session so that
one ``killpg`` ends it and anything it started; it reads their progress
events; and it kills them all when a probe runs past ``timeout_s``. The limit
is enforced here, not by torch, because NCCL's communicator set-up ignores
process-group timeouts (torch/distributed/distributed_c10d.py documents the
timeout as applying to collectives only).

Self-launched ranks meet in a ``FileStore`` inside a private temp dir: no TCP
port is used, so two probes on one host can never collide, and the directory
is always removed. Under torchrun or srun the ranks meet at MASTER_ADDR and
MASTER_PORT, which the launcher (or the user) owns.
"""

from __future__ import annotations

import ctypes.util
import hashlib
import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from gpudiag.backends.subproc import python_module_argv
from gpudiag.errors import GpudiagInputError
from gpudiag.launch.process import LaunchEnv
from gpudiag.parsing import int_or_none
from gpudiag.probes.results import (
    PROBE_NAMES,
    HangInfo,
    ProbeName,
    ProbeReport,
    ProbeResult,
    worst_status,
)

#: Start-up (Python + ``import torch``, and CUDA context creation) gets its own
#: limit so that ``--timeout`` measures the probe itself, not a loaded machine.
STARTUP_LIMIT_S = 120.0
#: After its ``done`` event a child should exit at once; it is killed after this.
EXIT_GRACE_S = 10.0
_POLL_S = 0.02

Device = Literal["cpu", "cuda"]


def gpu_driver_present() -> bool:
    """Whether an NVIDIA driver is installed, decided without torch or CUDA.

    libcuda is the driver's user-space library and /dev/nvidiactl its control
    device; both exist wherever a CUDA program can run.
    """
    return Path("/dev/nvidiactl").exists() and ctypes.util.find_library("cuda") is not None


def default_device() -> Device:
    """``cuda`` when an NVIDIA driver is present, else ``cpu`` (docs/probes.md)."""
    return "cuda" if gpu_driver_present() else "cpu"


def default_nproc(device: Device, visible: str | None) -> int:
    """Self-launched ddp ranks: 2 on the CPU; on CUDA one per visible device.

    The visible count is the number of entries in CUDA_VISIBLE_DEVICES (or
    ``--visible``) when set, else the GPUs under /proc/driver/nvidia/gpus.
    """
    if device == "cpu":
        return 2
    spec = visible if visible is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
    if spec is not None:
        return max(1, len([e for e in spec.split(",") if e.strip()]))
    gpus = Path("/proc/driver/nvidia/gpus")
    count = len(list(gpus.iterdir())) if gpus.is_dir() else 0
    return max(1, count)


@dataclass(frozen=True)
class ProbePlan:
    """What to run and how.

    Attributes:
        probes: the probes, in canonical order.
        device: ``cpu`` or ``cuda``.
        timeout_s: hard wall-clock limit for each probe.
        nproc: ranks to self-launch for ddp (ignored under a launcher).
        device_ids: ``--device-ids`` for dp (None: all visible).
        visible: CUDA_VISIBLE_DEVICES for the children only (None: inherit).
        order: CUDA_DEVICE_ORDER for the children only (None: inherit).
        launch: the external launcher's view, or None to self-launch.
    """

    probes: tuple[ProbeName, ...]
    device: Device
    timeout_s: float
    nproc: int = 2
    device_ids: tuple[int, ...] | None = None
    visible: str | None = None
    order: str | None = None
    launch: LaunchEnv | None = None


@dataclass
class _Child:
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
        self.tail_lines = tuple(line[:300] for line in lines[-LOG_TAIL_LINES:])

    def log_tail(self) -> str:
        """The child's last log lines, joined with `` | `` (captured before cleanup)."""
        if self.tail_lines is None:
            self.capture_log()
        return " | ".join(self.tail_lines or ())


@dataclass(frozen=True)
class _Outcome:
    kind: Literal["ok", "timeout", "crash"]
    child: _Child | None = None
    limit_s: float = 0.0


def run_probes(
    plan: ProbePlan, on_event: Callable[[int, dict[str, Any]], None] | None = None
) -> ProbeReport:
    """Runs the plan's probes in child processes; never raises for a probe failure.

    Every child is killed (its whole process group) and the temp dir removed
    before this returns, whatever happened.
    """
    started = time.monotonic()
    launch = plan.launch
    rank = launch.rank if launch is not None else 0
    world_size = (
        launch.world_size if launch is not None else (plan.nproc if "ddp" in plan.probes else 1)
    )
    assignments = _assign(plan, rank, world_size)
    remove_stale_dirs()
    children: list[_Child] = []
    with _signals_held():  # no Ctrl-C between creating the dir and owning it
        tmp = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        (tmp / OWNER_FILE).write_text(f"{os.getpid()}\n", encoding="ascii")
    try:
        with _terminate_as_exit():
            threads = _threads_per_child(
                len(assignments), launch.local_world_size if launch is not None else None
            )
            run_id = uuid.uuid4().hex[:12]  # one per run: every rank's key prefix
            token = rendezvous_token(launch, os.environ)
            for child_rank, probes in assignments:
                children.append(
                    _spawn(plan, tmp, child_rank, world_size, probes, threads, run_id, token)
                )
                children[-1].on_event = on_event
            outcome = _monitor(children, plan.timeout_s)
    finally:
        _cleanup(children, tmp)
    results = tuple(
        _result_for(name, children, outcome, world_size, plan)
        for name in plan.probes
        if any(name in c.probes for c in children) or not children
    )
    startups = [c.ready_at - c.launched_at for c in children if c.ready_at is not None]
    return ProbeReport(
        device=plan.device,
        launcher=launch.launcher if launch is not None else "self",
        rank=rank,
        world_size=world_size,
        timeout_s=plan.timeout_s,
        wall_s=time.monotonic() - started,
        startup_s=max(startups) if startups else None,
        probes=results,
    )


def _threads_per_child(local_children: int, local_ranks: int | None = None) -> int:
    """torch threads per child: OMP_NUM_THREADS when the user or torchrun set it,
    else the cores shared among this host's ranks (LOCAL_WORLD_SIZE under torchrun,
    the launcher's local size under MPI or DeepSpeed), so that two ranks on two
    cores do not oversubscribe them."""
    cores = os.cpu_count() or 1
    # Strict parsing (gpudiag.parsing): '²'.isdigit() is True but int('²') raises.
    threads = int_or_none(os.environ.get("OMP_NUM_THREADS", ""), minimum=1)
    if threads is not None:
        return min(threads, cores)  # more threads than cores only oversubscribe them
    sharers = int_or_none(os.environ.get("LOCAL_WORLD_SIZE", ""), minimum=1)
    if local_ranks is not None and local_ranks > 0:
        sharers = local_ranks  # MPI's OMPI_COMM_WORLD_LOCAL_SIZE, DeepSpeed's LOCAL_SIZE...
    return max(1, cores // (sharers or max(1, local_children)))


#: The per-job rendezvous secret (docs/probes.md); read by gpudiag.probes.ddp.
RDZV_TOKEN_ENV = "GPUDIAG_RDZV_TOKEN"


def rendezvous_token(launch: LaunchEnv | None, environ: Mapping[str, str]) -> str:
    """The secret every ddp arrival is signed with; the same on every rank.

    ``GPUDIAG_RDZV_TOKEN`` when the user exported one (the strong choice on a
    shared host: every rank inherits it, no other user can read it). Under a
    launcher without it, derived from what all ranks of this job step share:
    the launcher's run id (TORCHELASTIC_RUN_ID / SLURM_JOB_ID and step) and
    MASTER_ADDR/MASTER_PORT; it separates jobs and stops casual forgery but
    is guessable. Self-launched: a fresh random secret, passed to the local
    children in their environment.
    """
    explicit = environ.get(RDZV_TOKEN_ENV, "")
    if explicit:
        return explicit
    if launch is None:
        return secrets.token_hex(32)
    shared = "\n".join(
        (launch.run_id, environ.get("MASTER_ADDR", ""), environ.get("MASTER_PORT", ""))
    )
    return hashlib.sha256(f"gpudiag-rdzv-token/1\n{shared}".encode()).hexdigest()


#: ``--timeout`` may not exceed this (docs/probes.md): probes are short, and a
#: larger value would let a hung probe hold GPUs for a whole allocation.
MAX_TIMEOUT_S = 3600.0
#: How many of a crashed worker's last log lines its report quotes.
LOG_TAIL_LINES = 5
TEMP_PREFIX = "gpudiag-probe-"
#: Inside each run's temp dir: the pid of the ``gpudiag probe`` that owns it.
OWNER_FILE = "owner.pid"
#: A temp dir without an owner file (an older gpudiag) is stale after this long.
_UNOWNED_STALE_S = 24 * 3600.0
_HELD_SIGNALS = frozenset(
    {signal.SIGINT, signal.SIGTERM} | ({signal.SIGHUP} if hasattr(signal, "SIGHUP") else set())
)


@contextmanager
def _signals_held() -> Iterator[None]:
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


def _cleanup(children: Sequence[_Child], tmp: Path) -> None:
    """Kills every child and removes the temp dir, whatever signals arrive.

    Signals are held while it runs; one that Python had already taken (a
    second Ctrl-C 10 ms after the first) cannot cut it short either: the
    cleanup is retried, and the first interruption is re-raised after it.
    """
    interrupted: BaseException | None = None
    with _signals_held():
        while True:
            try:
                _kill_all(children)
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


def _assign(plan: ProbePlan, rank: int, world_size: int) -> list[tuple[int, tuple[str, ...]]]:
    """Which local ranks to start and what each runs (ddp first, then the rest).

    ddp runs on every rank; single, dp and amp only on rank 0, after ddp, so
    the other ranks can exit and leave rank 0 the cores.
    """
    local_only = tuple(p for p in plan.probes if p != "ddp")
    with_ddp = "ddp" in plan.probes
    if plan.launch is not None:
        probes = (("ddp",) if with_ddp else ()) + (local_only if rank == 0 else ())
        return [(rank, probes)] if probes else []
    if not with_ddp:
        return [(0, local_only)]
    return [(r, ("ddp", *local_only) if r == 0 else ("ddp",)) for r in range(world_size)]


def _spawn(
    plan: ProbePlan,
    tmp: Path,
    rank: int,
    world_size: int,
    probes: Sequence[str],
    threads: int,
    run_id: str,
    token: str,
) -> _Child:
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
    return _Child(rank, tuple(probes), popen, events_path, log_path, time.monotonic())


def _monitor(children: list[_Child], timeout_s: float) -> _Outcome:
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
                    return _Outcome("timeout", child, STARTUP_LIMIT_S)
                if child.probe_started_at is not None and now - child.probe_started_at > timeout_s:
                    return _Outcome("timeout", child, timeout_s)
                if child.done_at is not None and now - child.done_at > EXIT_GRACE_S:
                    child.popen.kill()  # results are in; only its exit is stuck
            else:
                child.read_events(time.monotonic())
                if child.done_at is None:
                    return _Outcome("crash", child)
        if all_exited:
            return _Outcome("ok")
        time.sleep(_POLL_S)
    return _Outcome("ok")


def _kill_all(children: Sequence[_Child]) -> None:
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


def _result_for(
    name: str,
    children: Sequence[_Child],
    outcome: _Outcome,
    world_size: int,
    plan: ProbePlan,
) -> ProbeResult:
    """One probe's result, merged over the local ranks that ran it."""
    runners = [c for c in children if name in c.probes]
    got = [c.results[name] for c in runners if name in c.results]
    if runners and len(got) == len(runners):
        return _merge(got, runners)
    if outcome.kind == "timeout":
        in_flight = [
            c
            for c in runners
            if c.current == name
            or (c.current is None and c.ready_at is None and name == c.probes[0])
        ]
        if in_flight or got:
            return _hang_result(name, runners, outcome, world_size, plan)
    if outcome.kind == "crash" and outcome.child is not None and outcome.child in runners:
        child = outcome.child
        if name not in child.results and (
            child.current == name
            or (child.current is None and not child.results and name == child.probes[0])
        ):
            where = f" in stage '{child.stage}'" if child.stage else ""
            return ProbeResult(
                probe=name,
                status="fail",
                device=plan.device,
                message=(
                    f"rank {child.rank} exited with code {child.popen.returncode}{where}: "
                    f"{child.log_tail() or 'no output'}"
                ),
            )
    return ProbeResult(
        probe=name,
        status="not_run",
        device=plan.device,
        message="not run: an earlier probe hung or crashed and its processes were killed",
    )


def _merge(got: Sequence[ProbeResult], runners: Sequence[_Child]) -> ProbeResult:
    """Rank 0's result, with the worst status any local rank reported."""
    base = got[0]
    status = worst_status([r.status for r in got])
    if status == base.status:
        return base
    worst_index = next(i for i, r in enumerate(got) if r.status == status)
    worst = got[worst_index]
    return ProbeResult(
        probe=base.probe,
        status=status,
        device=base.device,
        message=f"rank {runners[worst_index].rank}: {worst.message}",
        checks=worst.checks,
        figures=base.figures,
        wall_s=base.wall_s,
        ranks=base.ranks,
        bandwidth=base.bandwidth,
        memory=base.memory,
        notes=base.notes + worst.notes,
    )


def _hang_result(
    name: str, runners: Sequence[_Child], outcome: _Outcome, world_size: int, plan: ProbePlan
) -> ProbeResult:
    """A ``timeout`` result saying which ranks arrived and where each local rank was."""
    ranks = range(world_size) if name == "ddp" else [c.rank for c in runners]
    arrived: set[int] = set()
    for child in runners:
        arrived |= child.arrived
        if name != "ddp" and child.ready_at is not None:
            arrived.add(child.rank)
    stages = {
        c.rank: (c.stage or "starting (importing torch)")
        if c.ready_at is not None
        else "starting (importing torch)"
        for c in runners
        if c.current == name or name in c.results or c.ready_at is None
    }
    for child in runners:
        if name in child.results:
            stages[child.rank] = "finished"
    missing = tuple(r for r in ranks if r not in arrived)
    limit = outcome.limit_s
    where = "; ".join(f"rank {r}: {s}" for r, s in sorted(stages.items()))
    if name == "ddp":
        message = (
            f"hung: killed after {limit:g} s; arrived ranks {sorted(arrived)}, "
            f"missing ranks {list(missing)}; {where}"
        )
        forged = sorted(set().union(*(c.forged for c in runners)) - arrived)
        if forged:
            message += (
                f"; refused forged rendezvous arrivals for ranks {forged} (no valid token: "
                "not a rank of this job)"
            )
    else:
        message = f"hung: killed after {limit:g} s; {where}"
    return ProbeResult(
        probe=name,
        status="timeout",
        device=plan.device,
        message=message,
        hang=HangInfo(
            limit_s=limit,
            arrived_ranks=tuple(sorted(arrived)),
            missing_ranks=missing,
            stages=stages,
        ),
    )


@contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """SIGTERM (torchrun stopping a failed job) unwinds, so children get killed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def parse_probe_names(which: str) -> tuple[ProbeName, ...]:
    """``all`` or one probe name, as a canonical tuple."""
    if which == "all":
        return PROBE_NAMES
    for name in PROBE_NAMES:
        if name == which:
            return (name,)
    raise GpudiagInputError(f"unknown probe {which!r}: choose single, dp, ddp, amp or all")
