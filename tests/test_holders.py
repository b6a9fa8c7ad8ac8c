"""Who holds GPU memory (gpudiag/backends/holders.py), from fake /proc trees.

The tree is laid out as Linux does: ``/proc/<pid>/{stat,cgroup,environ}``, ``/proc/self``
a link to this process's directory, ``/proc/2`` the kernel's ``kthreadd`` in the host's
PID namespace, ``/proc/mounts``. A file left out is one this user cannot read (another
user's ``environ``). This process is PID 1000, started by a launcher (900) from a shell
whose session is 800.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpudiag.backends.holders import read_stat, with_memory_holders
from gpudiag.backends.host import collect_host, host_pid_namespace
from gpudiag.model import Gpu, GpuProcess

ME, LAUNCHER, SHELL = 1000, 900, 800
V1 = "12:devices:/slurm/uid_1000/job_{}/step_0/task_0\n4:memory:/slurm/uid_1000/job_{}/step_0\n"
V2 = "0::/system.slice/slurmstepd.scope/job_{}/step_batch/user/task_0\n"
NO_JOB = "0::/user.slice/user-1000.slice/session-3.scope\n"


def _proc(
    root: Path,
    pid: int,
    ppid: int,
    sid: int,
    *,
    state: str = "S",
    comm: str = "python",
    cgroup: str | None = NO_JOB,
    environ: dict[str, str] | None = None,
) -> None:
    d = root / "proc" / str(pid)
    d.mkdir(parents=True)
    (d / "stat").write_text(f"{pid} ({comm}) {state} {ppid} {pid} {sid} 0 -1 4194560 0 0\n")
    if cgroup is not None:
        (d / "cgroup").write_text(cgroup)
    if environ is not None:
        (d / "environ").write_bytes(b"".join(f"{k}={v}\0".encode() for k, v in environ.items()))


def _tree(
    root: Path,
    *,
    my_cgroup: str = NO_JOB,
    host_ns: bool = True,
    mounts: str = "proc /proc proc rw,nosuid 0 0\n",
) -> None:
    _proc(root, SHELL, 1, SHELL, comm="bash")
    _proc(root, LAUNCHER, SHELL, SHELL, comm="torchrun")
    _proc(root, ME, LAUNCHER, SHELL, cgroup=my_cgroup)
    (root / "proc" / "self").symlink_to(str(ME))
    (root / "proc" / "mounts").write_text(mounts)
    if host_ns:
        _proc(root, 2, 0, 0, comm="kthreadd")


def _gpu(*pids: int) -> tuple[Gpu, ...]:
    procs = tuple(GpuProcess(pid=p, used_memory_mib=500, name="python") for p in pids)
    return (Gpu(nvml_index=0, uuid="GPU-0", processes=procs),)


def _placed(root: Path, pid: int, env: dict[str, str] | None = None) -> tuple[object, ...]:
    (gpu,) = with_memory_holders(_gpu(pid), root, env or {})
    p = gpu.processes[0]
    return (p.in_pid_namespace, p.this_job, p.this_job_by, p.slurm_job_id, p.proc_state)


S = "S"
# (case, my cgroup, my env, holder pid, holder: (ppid, sid, kwargs) or None, expected)
ROWS: list[tuple[str, str, dict[str, str], int, tuple[int, int, dict] | None, tuple]] = [
    ("gpudiag's own process (guard() after CUDA)", NO_JOB, {}, ME, None,
     (True, True, "self", None, S)),
    ("the launcher that started gpudiag", NO_JOB, {}, LAUNCHER, None,
     (True, True, "ancestor", None, S)),
    ("a sibling rank in its own session (torchrun)", NO_JOB, {}, 1001,
     (LAUNCHER, 1001, {}), (True, True, "launcher", None, S)),
    ("a process of the same shell session", NO_JOB, {}, 1100,
     (SHELL, SHELL, {}), (True, True, "session", None, S)),
    ("another user's run, no Slurm", NO_JOB, {}, 2000,
     (1, 2000, {}), (True, False, "process_tree", None, S)),
    ("a zombie of another run", NO_JOB, {}, 2000,
     (1, 2000, {"state": "Z"}), (True, False, "process_tree", None, "Z")),
    ("no Slurm here, the holder in Slurm job 48190", NO_JOB, {}, 2000,
     (1, 2000, {"cgroup": V2.format(48190)}), (True, False, "slurm_job", "48190", S)),
    # -- inside Slurm job 48213
    ("same job by cgroup (v1)", V1.format(48213, 48213), {}, 3000,
     (1, 3000, {"cgroup": V1.format(48213, 48213)}), (True, True, "slurm_job", "48213", S)),
    ("another job by cgroup (v2)", V2.format(48213), {}, 3000,
     (1, 3000, {"cgroup": V2.format(48190)}), (True, False, "slurm_job", "48190", S)),
    ("a readable cgroup outside any job: not ours", V2.format(48213), {}, 3000,
     (1, 3000, {}), (True, False, "slurm_job", None, S)),
    ("same job by SLURM_JOB_ID only (no job cgroup)", NO_JOB, {"SLURM_JOB_ID": "48213"}, 3000,
     (1, 3000, {"environ": {"SLURM_JOB_ID": "48213"}}), (True, True, "slurm_job", "48213", S)),
    ("another job by SLURM_JOB_ID", NO_JOB, {"SLURM_JOB_ID": "48213"}, 3000,
     (1, 3000, {"environ": {"SLURM_JOB_ID": "48190", "HOME": "/h"}}),
     (True, False, "slurm_job", "48190", S)),
    ("another user's process, environ unreadable: not told", NO_JOB, {"SLURM_JOB_ID": "48213"},
     3000, (1, 3000, {}), (True, None, None, None, S)),
    ("environ unreadable, but in our session", NO_JOB, {"SLURM_JOB_ID": "48213"}, 3000,
     (SHELL, SHELL, {}), (True, True, "session", None, S)),
    ("cgroup unreadable, an odd name, no Slurm: by its tree", NO_JOB, {}, 4000,
     (1, 4000, {"cgroup": None, "comm": "x) y"}), (True, False, "process_tree", None, S)),
    ("a PID that does not exist here", NO_JOB, {}, 5555, None, (False, None, None, None, None)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("my_cgroup", "env", "pid", "holder", "expected"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_place_each_holder(
    tmp_path: Path,
    my_cgroup: str,
    env: dict[str, str],
    pid: int,
    holder: tuple[int, int, dict] | None,
    expected: tuple,
) -> None:
    _tree(tmp_path, my_cgroup=my_cgroup)
    if holder is not None:
        ppid, sid, kw = holder
        _proc(tmp_path, pid, ppid, sid, **kw)
    assert _placed(tmp_path, pid, env) == expected


def test_unreadable_stat_is_not_guessed(tmp_path: Path) -> None:
    _tree(tmp_path)
    (tmp_path / "proc" / "4000").mkdir()  # exists, nothing readable
    assert _placed(tmp_path, 4000) == (True, None, None, None, None)


def test_a_containers_own_pid_namespace_places_nothing(tmp_path: Path) -> None:
    # NVML's PIDs are the host's: a /proc/1001 here is another process.
    _tree(tmp_path, host_ns=False)
    _proc(tmp_path, 1001, LAUNCHER, 1001)
    assert _placed(tmp_path, 1001) == (True, None, None, None, None)
    assert host_pid_namespace(tmp_path) is False


@pytest.mark.parametrize(
    ("mounts", "kthreadd", "expected"),
    [
        ("proc /proc proc rw 0 0\n", True, True),
        ("proc /proc proc rw 0 0\n", False, False),
        ("proc /proc proc rw,hidepid=2 0 0\n", False, None),  # root's PID 2 is hidden
        ("proc /proc proc rw,hidepid=invisible 0 0\n", True, True),
    ],
)
def test_host_pid_namespace(tmp_path: Path, mounts: str, kthreadd: bool, expected: bool) -> None:
    _tree(tmp_path, host_ns=kthreadd, mounts=mounts)
    assert host_pid_namespace(tmp_path) is expected
    assert host_pid_namespace(tmp_path / "nowhere") is None


def test_stat_with_spaces_and_parentheses_in_the_name(tmp_path: Path) -> None:
    _proc(tmp_path, 42, 7, 9, comm="a) b (c")
    stat = read_stat(tmp_path, 42)
    assert stat is not None and (stat.pid, stat.state, stat.ppid, stat.session) == (42, "S", 7, 9)
    (tmp_path / "proc" / "43").mkdir()
    (tmp_path / "proc" / "43" / "stat").write_text("garbage")
    assert read_stat(tmp_path, 43) is None


def test_a_cycle_in_the_tree_ends(tmp_path: Path) -> None:
    _tree(tmp_path)
    _proc(tmp_path, 7001, 7002, 7001)
    _proc(tmp_path, 7002, 7001, 7002)
    assert _placed(tmp_path, 7001)[1:3] == (False, "process_tree")


def test_this_process_live() -> None:
    # Whatever the machine: this process is its own, or (a container) not told.
    (gpu,) = with_memory_holders(_gpu(os.getpid()))
    p = gpu.processes[0]
    assert p.in_pid_namespace is True
    if host_pid_namespace(Path("/")) is True:
        assert (p.this_job, p.this_job_by) == (True, "self")
    else:
        assert p.this_job is None
    assert collect_host().host_pid_namespace == host_pid_namespace(Path("/"))
