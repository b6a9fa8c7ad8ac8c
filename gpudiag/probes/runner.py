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
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpudiag.errors import GpudiagInputError
from gpudiag.parsing import int_or_none
from gpudiag.probes.children import Child, monitor, spawn
from gpudiag.probes.jobtoken import (
    JobToken,
    remove_stale_secrets,
    secret_base,
    start_token,
)
from gpudiag.probes.merge import result_for
from gpudiag.probes.plan import Device, ProbePlan
from gpudiag.probes.results import (
    ALL_PROBE_NAMES,
    PROBE_NAMES,
    ProbeName,
    ProbeReport,
)
from gpudiag.probes.tempdirs import (
    cleanup,
    make_run_dir,
    remove_stale_dirs,
    signals_held,
    terminate_as_exit,
)

#: ``--timeout`` may not exceed this (docs/probes.md): probes are short, and a
#: larger value would let a hung probe hold GPUs for a whole allocation.
MAX_TIMEOUT_S = 3600.0


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
    """Self-launched ddp ranks: 2 on the CPU; on CUDA one per visible device."""
    if device == "cpu":
        return 2
    return max(1, visible_gpu_count(visible))


def visible_gpu_count(visible: str | None) -> int:
    """GPUs the children will see, counted without CUDA: the entries of
    CUDA_VISIBLE_DEVICES (or ``--visible``) when set, else the GPUs under
    /proc/driver/nvidia/gpus."""
    spec = visible if visible is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
    if spec is not None:
        return len([e for e in spec.split(",") if e.strip()])
    gpus = Path("/proc/driver/nvidia/gpus")
    try:
        return sum(1 for _ in gpus.iterdir())
    except OSError:
        return 0


def run_probes(
    plan: ProbePlan, on_event: Callable[[int, dict[str, Any]], None] | None = None
) -> ProbeReport:
    """Runs the plan's probes in child processes; never raises for a probe failure.

    Every child is killed (its whole process group) and the temp dir removed
    before this returns, whatever happened.

    Raises:
        GpudiagInputError: the private temp dir, a worker's files or the ddp
            rendezvous secret cannot be created (the real error, in one line).
    """
    started = time.monotonic()
    launch = plan.launch
    rank = launch.rank if launch is not None else 0
    world_size = (
        launch.world_size if launch is not None else (plan.nproc if "ddp" in plan.probes else 1)
    )
    assignments = _assign(plan, rank, world_size)
    ddp_here = any("ddp" in probes for _, probes in assignments)
    remove_stale_dirs()
    if launch is not None and ddp_here:
        remove_stale_secrets(secret_base(os.environ))
    children: list[Child] = []
    tmp: Path | None = None
    job_token: JobToken | None = None
    # The SIGTERM handler spans the cleanup: a second SIGTERM during it must not
    # fall back to the default action (killed, children and temp dir left).
    with terminate_as_exit():
        try:
            # Held: a signal delivered between creating the dir (or local rank 0's
            # rendezvous secret) and naming it here would leave it behind (issue 21).
            with signals_held():
                tmp = make_run_dir()
                job_token = start_token(launch, os.environ, ddp_here)
            token = job_token.value()  # other local ranks wait for local rank 0's
            threads = _threads_per_child(
                len(assignments), launch.local_world_size if launch is not None else None
            )
            run_id = uuid.uuid4().hex[:12]  # one per run: every rank's key prefix
            for child_rank, probes in assignments:
                try:
                    child = spawn(plan, tmp, child_rank, world_size, probes, threads, run_id, token)
                except OSError as exc:  # a full TMPDIR, no processes left (issue 21)
                    raise GpudiagInputError(f"cannot start a probe worker: {exc}") from exc
                child.on_event = on_event
                children.append(child)
            outcome = monitor(children, plan.timeout_s)
        finally:
            cleanup(children, tmp, None if job_token is None else job_token.release)
    results = tuple(
        result_for(name, children, outcome, world_size, plan)
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


def parse_probe_names(which: str, gpus: int = 0) -> tuple[ProbeName, ...]:
    """``all`` or one probe name, as a canonical tuple.

    ``all`` includes ``p2p`` only when ``gpus`` (the GPUs selected on cuda) is 2 or
    more: with fewer there is no pair, and a pass that tested nothing would read as
    a verified P2P path (docs/probes.md).
    """
    if which == "all":
        return ALL_PROBE_NAMES if gpus >= 2 else PROBE_NAMES
    for name in ALL_PROBE_NAMES:
        if name == which:
            return (name,)
    raise GpudiagInputError(f"unknown probe {which!r}: choose single, dp, ddp, amp, p2p or all")
