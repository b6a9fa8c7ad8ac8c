"""Memory holders (gpudiag/core/memory_holders.py, HEALTH-FOREIGN-PROCESSES), table-driven.

Each row: a fixture, what is changed in its processes (the reported case), the GPUs the
launch selects, ``--nproc-per-node``, and exactly the holder findings expected, as (code,
severity): TOPO-MEMORY-* and HEALTH-FOREIGN-PROCESSES, through ``run_check`` so that the
two rules are seen together. The reported machines are ``a100x8_slurm_holders`` (a
crashed run's memory and another Slurm job on a node without ConstrainDevices:
ai-dynamo/nixl#2007, jade-hpc-gpu#73) and ``a100x8_cuda0_contexts``
(pytorch/pytorch#23138: four DDP ranks resumed with torch.load and no map_location).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from gpudiag.core.check import run_check
from gpudiag.model import Finding, GpuProcess, Snapshot

from .conftest import load_fixture

Change = Callable[[Snapshot], Snapshot]
CODES = ("TOPO-MEMORY-", "HEALTH-FOREIGN-PROCESSES")


def _procs(index: int, *procs: GpuProcess) -> Change:
    """GPU ``index`` holds exactly ``procs`` (memory in use follows)."""

    def apply(s: Snapshot) -> Snapshot:
        used = sum(p.used_memory_mib or 0 for p in procs) + 4
        gpus = tuple(
            dataclasses.replace(g, processes=procs, memory_used_mib=used)
            if g.nvml_index == index
            else g
            for g in s.gpus
        )
        return dataclasses.replace(s, gpus=gpus)

    return apply


def _every_proc(**fields: Any) -> Change:
    def apply(s: Snapshot) -> Snapshot:
        gpus = tuple(
            dataclasses.replace(
                g, processes=tuple(dataclasses.replace(p, **fields) for p in g.processes)
            )
            for g in s.gpus
        )
        return dataclasses.replace(s, gpus=gpus)

    return apply


def _host(**fields: Any) -> Change:
    def apply(s: Snapshot) -> Snapshot:
        assert s.host is not None
        return dataclasses.replace(s, host=dataclasses.replace(s.host, **fields))

    return apply


def _p(pid: int | None, mib: int = 500, **fields: Any) -> GpuProcess:
    return GpuProcess(pid=pid, used_memory_mib=mib, name="python", in_pid_namespace=True, **fields)


OTHER = {"this_job": False, "this_job_by": "process_tree"}
MINE = {"this_job": True, "this_job_by": "session"}
WARN, INFO = "warning", "info"
HEALTH = ("HEALTH-FOREIGN-PROCESSES", WARN)
ROWS: list[tuple[str, str, list[Change], str | None, int | None, list[tuple[str, str]]]] = [
    # -- healthy: nothing
    ("healthy DGX A100, GPUs without processes", "a100x8", [], "0,1,2", None, []),
    ("a 1.2 snapshot's process whose job was not told: HEALTH only", "a100x8", [], "3", None,
     [HEALTH]),
    # -- the reported Slurm node
    (
        "a crashed run's memory on GPU 0, another Slurm job on GPU 1, GPU 3 untold",
        "a100x8_slurm_holders", [], None, None,
        [HEALTH, HEALTH, HEALTH, ("TOPO-MEMORY-FOREIGN-PID", WARN),
         ("TOPO-MEMORY-OTHER-JOB", WARN)],
    ),
    ("the idle GPUs of that node", "a100x8_slurm_holders", [], "2,4,5", None, []),
    (
        "another job known by its process tree only: info beside HEALTH's warning",
        "a100x8_slurm_holders", [_procs(1, _p(88410, 41000, **OTHER))], "1", None,
        [HEALTH, ("TOPO-MEMORY-OTHER-JOB", INFO)],
    ),
    (
        "in Slurm, the holder's job unreadable and no tie: unknown, HEALTH only",
        "a100x8_slurm_holders", [_procs(1, _p(88410, 41000))], "1", None, [HEALTH],
    ),
    (
        "a zombie of another job",
        "a100x8_slurm_holders",
        [_procs(1, _p(88410, 41000, proc_state="Z", slurm_job_id="48190", this_job=False,
                      this_job_by="slurm_job"))],
        "1", None, [HEALTH, ("TOPO-MEMORY-OTHER-JOB", WARN)],
    ),
    # -- pytorch/pytorch#23138: every rank's context on GPU 0
    (
        "four ranks on GPU 0, three of them also on their own GPU",
        "a100x8_cuda0_contexts", [], None, None,
        [("TOPO-MEMORY-OWN-JOB", WARN), ("TOPO-MEMORY-OWN-JOB", INFO)],
    ),
    (
        "fixed: map_location, one rank per GPU: this job's own, info only",
        "a100x8_cuda0_contexts", [_procs(0, _p(62250, 4903, **MINE))], None, 4,
        [("TOPO-MEMORY-OWN-JOB", INFO)],
    ),
    (
        "two ranks sharing one GPU by design (gloo, 2 ranks on 1 GPU): no pile-up",
        "a100x8_cuda0_contexts", [_procs(0, _p(101, **MINE), _p(102, **MINE))], "0", 2,
        [("TOPO-MEMORY-OWN-JOB", INFO)],
    ),
    (
        "DataParallel: one process on every GPU is not a pile-up",
        "a100x8_cuda0_contexts",
        [_procs(i, _p(300, 4000, **MINE)) for i in range(4)], None, None,
        [("TOPO-MEMORY-OWN-JOB", INFO)],
    ),
    (
        "redacted PIDs, one rank per GPU launched: still a pile-up",
        "a100x8_cuda0_contexts", [_every_proc(pid=None)], None, 4,
        [("TOPO-MEMORY-OWN-JOB", WARN), ("TOPO-MEMORY-OWN-JOB", INFO)],
    ),
    (
        "redacted PIDs, launch size unknown: not told",
        "a100x8_cuda0_contexts", [_every_proc(pid=None)], None, None,
        [("TOPO-MEMORY-OWN-JOB", INFO)],
    ),
    (
        "a 1.3 reader's view: the same processes, job not told: HEALTH for each GPU",
        "a100x8_cuda0_contexts", [_every_proc(this_job=None, this_job_by=None)], None, None,
        [HEALTH, HEALTH, HEALTH, HEALTH],
    ),
    (
        "own and another job's process on one GPU",
        "a100x8_cuda0_contexts",
        [_procs(0, _p(62250, 4903, **MINE), _p(7000, 9000, **OTHER))], "0", None,
        [HEALTH, ("TOPO-MEMORY-OTHER-JOB", INFO), ("TOPO-MEMORY-OWN-JOB", INFO)],
    ),
    # -- containers: NVML's PIDs are the host's
    (
        "Docker without --pid=host: a PID absent here",
        "container_shm64", [], "1", None, [HEALTH, ("TOPO-MEMORY-FOREIGN-PID", WARN)],
    ),
    (
        "the same with the host's PID namespace recorded (--pid=host): it has exited",
        "container_shm64", [_host(host_pid_namespace=True)], "1", None,
        [HEALTH, ("TOPO-MEMORY-FOREIGN-PID", WARN)],
    ),
    (
        "hidepid: unknown, never guessed",
        "container_shm64", [_every_proc(in_pid_namespace=None)], "1", None, [HEALTH],
    ),
]  # fmt: skip


def run(
    fixture: str, changes: list[Change], visible: str | None, nproc: int | None
) -> list[Finding]:
    snap = load_fixture(fixture)
    for change in changes:
        snap = change(snap)
    kw: dict[str, Any] = {} if visible is None else {"visible": visible}
    report = run_check(snap, nproc_per_node=nproc, **kw)
    return [f for f in report.findings if f.code.startswith(CODES)]


@pytest.mark.parametrize(
    ("fixture", "changes", "visible", "nproc", "expected"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_memory_holder_rules(
    fixture: str,
    changes: list[Change],
    visible: str | None,
    nproc: int | None,
    expected: list[tuple[str, str]],
) -> None:
    found = run(fixture, changes, visible, nproc)
    assert [(f.code, f.severity) for f in found] == expected
    for f in found:
        assert f.message.endswith(".") and "None" not in f.message, f.message
        assert f.fix is None or (f.fix.strip() and "None" not in f.fix), f.code


def _by_code(found: list[Finding]) -> dict[tuple[str, str], Finding]:
    return {(f.code, f.severity): f for f in found}


def test_the_slurm_node_names_pids_jobs_and_idle_gpus() -> None:
    found = _by_code(run("a100x8_slurm_holders", [], None, None))
    dead = found["TOPO-MEMORY-FOREIGN-PID", WARN]
    assert "pid 91234 holds 30720 MiB, but no such process exists any more" in dead.message
    assert "sudo nvidia-smi -r -i 0" in (dead.fix or "")
    # GPUs 2, 4–7 are idle; 0, 1 and 3 hold memory.
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=2,4,5,6,7" in (dead.fix or "")
    other = found["TOPO-MEMORY-OTHER-JOB", WARN]
    assert "GPU 1 is in use by Slurm job 48190, not this job: pid 88410 python" in other.message
    assert "squeue -j 48190" in (other.fix or "") and "ConstrainDevices" in (other.fix or "")
    assert other.subject == "GPU-3ceaaf30-8142-c8ea-91d9-3080f9b439fc"
    assert other.predicts == "torch.OutOfMemoryError: CUDA out of memory."


def test_the_pile_up_names_the_visiting_ranks() -> None:
    warning = _by_code(run("a100x8_cuda0_contexts", [], None, None))["TOPO-MEMORY-OWN-JOB", WARN]
    assert warning.message.startswith("GPU 0 holds 4 processes of this job: pid 62250 python")
    assert "pids 62251, 62252 and 62253 also hold GPUs 1, 2 and 3" in warning.message
    assert "map_location='cpu'" in (warning.fix or "")
    info = _by_code(run("a100x8_cuda0_contexts", [], None, None))["TOPO-MEMORY-OWN-JOB", INFO]
    assert "(the same Slurm job)" in info.message and "GPU 3: pid 62253" in info.message


def test_zombies_and_other_holders_say_how_to_find_them() -> None:
    zombie = _p(88410, 41000, proc_state="Z", **OTHER)
    other = _by_code(run("a100x8_slurm_holders", [_procs(1, zombie)], "1", None))
    finding = other["TOPO-MEMORY-OTHER-JOB", INFO]
    assert "state Z: exited, not yet reaped by its parent" in finding.message
    assert "--query-compute-apps=pid,process_name,used_memory" in (finding.fix or "")
    assert "ps -o user,etime,args -p 88410" in (finding.fix or "")
    assert "ignores kill" in (finding.fix or "")


def test_in_a_container_the_pid_is_the_hosts() -> None:
    found = _by_code(run("container_shm64", [], "1", None))
    assert "NVML reports PIDs as the host numbers them" in (
        found["TOPO-MEMORY-FOREIGN-PID", WARN].message
    )
    # Recorded with --pid=host, the same PID is one that exited.
    host = _by_code(run("container_shm64", [_host(host_pid_namespace=True)], "1", None))
    assert "no such process exists any more" in host["TOPO-MEMORY-FOREIGN-PID", WARN].message


def test_no_idle_gpu_left() -> None:
    busy = [_procs(i, _p(900 + i, 1000, **OTHER)) for i in range(8)]
    found = _by_code(run("a100x8_slurm_holders", busy, "1", None))
    assert "No GPU of this machine is idle now" in (found["TOPO-MEMORY-OTHER-JOB", INFO].fix or "")


def emitted() -> set[tuple[str, str]]:
    """(code, severity) of every row: tests/test_topology.py checks the catalogue's."""
    return {
        (f.code, f.severity)
        for _, fixture, changes, visible, nproc, _ in ROWS
        for f in run(fixture, changes, visible, nproc)
    }
