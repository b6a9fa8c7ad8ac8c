"""Who holds GPU memory: each process NVML reports, placed relative to this job (schema 1.4).

For every PID ``nvmlDeviceGetComputeRunningProcesses`` returns, the snapshot records
whether ``/proc/<pid>`` exists here (:func:`gpudiag.backends.host.with_pid_namespace`),
and, for one that does, whether it belongs to the job gpudiag runs in:

* it is gpudiag's own process or one of its ancestors (the script calling
  ``gpudiag.guard()``, the shell or launcher that started ``gpudiag check``);
* its Slurm job is ours, or is not: the ``job_<id>`` component of its cgroup path
  (Slurm's proctrack/cgroup and task/cgroup plugins put every task of a job under
  ``…/job_<id>/step_<id>/…``, in cgroup v1 and v2 alike; ``/proc/<pid>/cgroup`` is
  readable by everyone), else ``SLURM_JOB_ID`` in ``/proc/<pid>/environ`` (readable
  only for one's own processes: proc(5), ptrace access mode);
* it is in our session (``/proc/<pid>/stat`` field 6) or descends from our parent,
  the launcher (field 4, followed up): torchrun, mpirun's daemon or the shell started
  the other ranks beside this process.

When none of these can be read, ``this_job`` stays None: never guessed; so it does in a
container's own PID namespace, where NVML's PIDs are the host's and a ``/proc/<pid>`` of
the same number is another process. The job is seen from the process that took the
snapshot (``gpudiag snapshot`` or ``check``).

Sources: proc(5) (``/proc/<pid>/stat``, ``cgroup``, ``environ``); Slurm's cgroup.conf
and cgroup_v2 documentation (the ``job_<id>/step_<id>`` hierarchy); NVML's reference
for ``nvmlDeviceGetComputeRunningProcesses`` (the PIDs are the driver's, so a process
of another container's PID namespace shows a PID that does not exist here).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpudiag.backends.host import host_pid_namespace, with_pid_namespace
from gpudiag.model import Gpu, GpuProcess

#: Slurm's job component in a cgroup path: ``/slurm/uid_1000/job_1234/step_0`` (v1),
#: ``/system.slice/slurmstepd.scope/job_1234/step_batch/user/task_0`` (v2).
_JOB_IN_CGROUP = re.compile(r"/job_(\d+)(?=/|$)", re.MULTILINE)
#: How far up a process tree is followed (a deeper tree is not a launcher's).
_MAX_DEPTH = 64


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` this module needs."""

    pid: int
    state: str
    ppid: int
    session: int


def _read(path: Path, limit: int = 1 << 20) -> str | None:
    try:
        with path.open("rb") as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return None


def read_stat(base: Path, pid: int | str) -> ProcStat | None:
    """``/proc/<pid>/stat``; None when absent, unreadable or malformed."""
    text = _read(base / "proc" / str(pid) / "stat", 4096)
    if text is None:
        return None
    # The command name (field 2) is in parentheses and may hold spaces and ')'.
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    try:
        return ProcStat(int(head.split("(", 1)[0]), fields[0], int(fields[1]), int(fields[3]))
    except (IndexError, ValueError):
        return None


def cgroup_job(base: Path, pid: int | str) -> tuple[bool, str | None]:
    """(readable, Slurm job id) from ``/proc/<pid>/cgroup``."""
    text = _read(base / "proc" / str(pid) / "cgroup", 65536)
    if text is None:
        return False, None
    found = _JOB_IN_CGROUP.search(text)
    return True, found.group(1) if found else None


def environ_job(base: Path, pid: int | str) -> tuple[bool, str | None]:
    """(readable, ``SLURM_JOB_ID``) from ``/proc/<pid>/environ``."""
    text = _read(base / "proc" / str(pid) / "environ")
    if text is None:
        return False, None
    for item in text.split("\0"):
        name, eq, value = item.partition("=")
        if eq and name == "SLURM_JOB_ID" and value.strip():
            return True, value.strip()
    return True, None


@dataclass(frozen=True)
class _Us:
    """This process, as the classification needs it."""

    stat: ProcStat | None
    ancestors: frozenset[int]
    job: str | None
    job_from_cgroup: bool


def _chain(base: Path, stat: ProcStat | None, cache: dict[int, ProcStat | None]) -> list[int]:
    """The PIDs above ``stat``'s process, nearest first, up to PID 1."""
    out: list[int] = []
    while stat is not None and stat.ppid > 1 and len(out) < _MAX_DEPTH:
        if stat.ppid in out:
            break
        out.append(stat.ppid)
        if stat.ppid not in cache:
            cache[stat.ppid] = read_stat(base, stat.ppid)
        stat = cache[stat.ppid]
    return out


def _us(base: Path, env: Mapping[str, str], cache: dict[int, ProcStat | None]) -> _Us:
    stat = read_stat(base, "self")
    _, cg_job = cgroup_job(base, "self")
    env_job = (env.get("SLURM_JOB_ID") or "").strip() or None
    return _Us(stat, frozenset(_chain(base, stat, cache)), cg_job or env_job, cg_job is not None)


def place(
    base: Path, pid: int, us: _Us, cache: dict[int, ProcStat | None]
) -> tuple[bool | None, str | None, str | None, str | None]:
    """(this_job, this_job_by, slurm_job_id, proc_state) of the live process ``pid``."""
    stat = cache.setdefault(pid, read_stat(base, pid))
    state = stat.state if stat is not None else None
    if us.stat is not None and pid == us.stat.pid:
        return True, "self", us.job, state
    if pid in us.ancestors:
        return True, "ancestor", us.job, state
    cg_readable, their_job = cgroup_job(base, pid)
    known = their_job is not None
    if not known:
        env_readable, their_job = environ_job(base, pid)
        # Slurm confines every task of our job to our job's cgroup: a readable cgroup
        # outside any job is not ours, whatever its environment says.
        known = env_readable or (cg_readable and us.job_from_cgroup)
    if us.job is not None and known:
        return their_job == us.job, "slurm_job", their_job, state
    if stat is not None and us.stat is not None:
        if us.stat.session > 1 and stat.session == us.stat.session:
            return True, "session", their_job, state
        if us.stat.ppid > 1 and us.stat.ppid in _chain(base, stat, cache):
            return True, "launcher", their_job, state
    if us.job is None:
        if their_job is not None:
            return False, "slurm_job", their_job, state
        if stat is not None and us.stat is not None:
            return False, "process_tree", None, state
    return None, None, their_job, state


def with_memory_holders(
    gpus: tuple[Gpu, ...], root: str | Path = "/", env: Mapping[str, str] | None = None
) -> tuple[Gpu, ...]:
    """``gpus`` with each process placed: in this PID namespace, this job's or not."""
    base = Path(root)
    gpus = with_pid_namespace(gpus, base)
    if not any(p.in_pid_namespace for g in gpus for p in g.processes):
        return gpus
    # In a container's own PID namespace NVML's PIDs are the host's: a /proc/<pid> here
    # with the same number is another process, so nothing is placed (never guessed).
    if host_pid_namespace(base) is not True:
        return gpus
    cache: dict[int, ProcStat | None] = {}
    us = _us(base, os.environ if env is None else env, cache)

    def placed(p: GpuProcess) -> GpuProcess:
        if p.pid is None or p.in_pid_namespace is not True:
            return p
        this_job, by, job, state = place(base, p.pid, us, cache)
        return dataclasses.replace(
            p, this_job=this_job, this_job_by=by, slurm_job_id=job, proc_state=state
        )

    return tuple(
        dataclasses.replace(g, processes=tuple(placed(p) for p in g.processes))
        if g.processes
        else g
        for g in gpus
    )
