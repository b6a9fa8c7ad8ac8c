"""Memory held on the GPUs a launch selects, and by whom (TOPO-MEMORY-*).

Pure: functions of the snapshot's process facts (``in_pid_namespace`` since 1.2,
``this_job``, ``slurm_job_id``, ``proc_state`` since 1.4: :mod:`gpudiag.backends.holders`
reads them) and the selected GPUs. Severity follows certainty:

* TOPO-MEMORY-FOREIGN-PID (warning): NVML lists a PID that does not exist here: another
  container's process, or one that exited while its memory is held.
* TOPO-MEMORY-OTHER-JOB: a live process of another job. A warning when Slurm says so (a
  GPU this job was given is in another Slurm job's use); info when only the process tree
  does (``HEALTH-FOREIGN-PROCESSES`` already warns about the memory).
* TOPO-MEMORY-OWN-JOB: this job's own processes. A warning when one GPU holds several of
  them while the launch puts one rank on each GPU: every rank created a context there
  (torch.load without map_location, ``.cuda()`` before ``set_device``); else info, which
  says why ``HEALTH-FOREIGN-PROCESSES`` leaves them out.

A process whose job could not be told (``this_job`` None) is left to
``HEALTH-FOREIGN-PROCESSES``: never guessed.

Sources (also in ``docs/findings.md``): NVML reference,
``nvmlDeviceGetComputeRunningProcesses`` (the PIDs of the processes with a context);
NVIDIA/nvidia-docker#179 and #1483 (maintainers: "the nvidia-driver itself does not
support pid-namespaces", so NVML always returns host PIDs; ``--pid=host`` shows them);
proc(5) (process state ``Z``: zombie, ``D``: uninterruptible sleep); Slurm's
``cgroup.conf`` (``ConstrainDevices``); CUDA C Programming Guide, "Initialization" (the
primary context is created on the current device, 0 by default); torch.load docs
(``map_location``).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudiag.core.describe import join_and
from gpudiag.findings.texts import OUT_OF_MEMORY
from gpudiag.model import Finding, Gpu, GpuProcess, Severity, Snapshot

_STATES = {
    "Z": "state Z: exited, not yet reaped by its parent",
    "D": "state D: stuck in the kernel, usually in the driver",
}
#: At most this many idle GPUs are named in a fix.
_MAX_NAMED = 16
_QUERY = "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"


def memory_holder_findings(
    snapshot: Snapshot, gpus: Sequence[Gpu], *, nproc_per_node: int | None = None
) -> list[Finding]:
    """TOPO-MEMORY-FOREIGN-PID, TOPO-MEMORY-OTHER-JOB and TOPO-MEMORY-OWN-JOB."""
    out: list[Finding] = []
    for gpu in gpus:
        out += _foreign_pid(snapshot, gpu)
    for gpu in gpus:
        out += _other_job(snapshot, gpu)
    out += _own_job(snapshot, gpus, nproc_per_node)
    return out


def _pid(p: GpuProcess) -> str:
    return "pid redacted" if p.pid is None else f"pid {p.pid}"


def _who(p: GpuProcess) -> str:
    text = _pid(p)
    text += f" {p.name}" if p.name else ""
    details = [f"{p.used_memory_mib} MiB"] if p.used_memory_mib is not None else []
    if p.proc_state in _STATES:
        details.append(_STATES[p.proc_state])
    return text + (f" ({', '.join(details)})" if details else "")


def _mib(procs: Sequence[GpuProcess]) -> int:
    return sum(p.used_memory_mib or 0 for p in procs)


def idle_gpus(snapshot: Snapshot) -> list[Gpu]:
    """GPUs NVML lists no process on, with little memory in use (as HEALTH's threshold)."""
    return [
        g
        for g in snapshot.gpus
        if not g.lost
        and not g.processes
        and g.memory_used_mib is not None
        and g.memory_total_mib
        and g.memory_used_mib <= max(1024, g.memory_total_mib // 10)
    ]


def idle_hint(snapshot: Snapshot, held: Gpu) -> str:
    """``GPUs 2 and 3 are idle: CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=2,3``."""
    idle = [g for g in idle_gpus(snapshot) if g.nvml_index != held.nvml_index][:_MAX_NAMED]
    if not idle:
        return "No GPU of this machine is idle now: wait for it to be released."
    ids = [str(g.nvml_index) for g in idle]
    which = f"GPU {ids[0]} is" if len(ids) == 1 else f"GPUs {join_and(ids)} are"
    return (
        f"Or use idle GPUs: {which} idle (CUDA_DEVICE_ORDER=PCI_BUS_ID "
        f"CUDA_VISIBLE_DEVICES={','.join(ids)})."
    )


def _own_pid_namespace(snapshot: Snapshot) -> bool:
    """gpudiag ran in a container's own PID namespace, where NVML's (host) PIDs do not
    name this namespace's processes; from the container marks when not recorded."""
    host = snapshot.host
    if host is None:
        return False
    if host.host_pid_namespace is not None:
        return not host.host_pid_namespace
    return bool(host.container_marks)


def _foreign_pid(snapshot: Snapshot, gpu: Gpu) -> list[Finding]:
    foreign = [p for p in gpu.processes if p.in_pid_namespace is False]
    if not foreign:
        return []
    pids = join_and([_pid(p) for p in foreign])
    hold = "holds" if len(foreign) == 1 else "hold"
    head = f"GPU {gpu.nvml_index}: {pids} {hold} {_mib(foreign)} MiB"
    if _own_pid_namespace(snapshot):
        message = (
            f"{head}, and no such process exists in this container: NVML reports PIDs as "
            "the host numbers them, so this is another container's job sharing the GPU (or, "
            "once this container runs a job, one of its processes under its host PID), out "
            "of reach from here (kill finds nothing)."
        )
        fix = (
            "Use another GPU, or have the node's admins find that container's job (the "
            "host's nvidia-smi shows its PID; --pid=host lets gpudiag tell). "
        )
    else:
        message = (
            f"{head}, but no such process exists any more: memory left by a process that "
            "exited without releasing its CUDA context (a crashed run, a zombie whose parent "
            "has not reaped it)."
        )
        fix = (
            f"sudo fuser -v /dev/nvidia{gpu.nvml_index} shows what still holds the GPU: "
            "stop it (a zombie's parent); if nothing does, reset the GPU (sudo nvidia-smi "
            f"-r -i {gpu.nvml_index}). "
        )
    return [
        Finding(
            code="TOPO-MEMORY-FOREIGN-PID",
            severity="warning",
            message=message,
            fix=fix + idle_hint(snapshot, gpu),
            predicts=OUT_OF_MEMORY,
            subject=gpu.uuid,
        )
    ]


def _other_job(snapshot: Snapshot, gpu: Gpu) -> list[Finding]:
    others = [p for p in gpu.processes if p.in_pid_namespace and p.this_job is False]
    if not others:
        return []
    jobs = sorted({p.slurm_job_id for p in others if p.slurm_job_id})
    by_slurm = any(p.this_job_by == "slurm_job" for p in others)
    procs = join_and([_who(p) for p in others])
    severity: Severity = "warning" if by_slurm else "info"
    if by_slurm and jobs:
        named = "job " + join_and(jobs) if len(jobs) == 1 else "jobs " + join_and(jobs)
        message = (
            f"GPU {gpu.nvml_index} is in use by Slurm {named}, not this job: {procs}. The GPU "
            "is shared with another job, whose memory and compute this one competes for."
        )
        fix = (
            f"squeue -j {','.join(jobs)} shows whose job it is: wait for it to end. If Slurm "
            "gave both jobs this GPU, ask the admins for ConstrainDevices=yes in "
            "cgroup.conf. "
        )
    else:
        message = (
            f"GPU {gpu.nvml_index} is in use by another job: {procs}, live, and neither "
            "gpudiag's ancestor nor in its session or under its launcher"
            + (", nor in this Slurm job" if by_slurm else "")
            + ". This job competes for the GPU's memory and compute."
        )
        fix = (
            f"{_QUERY} -i {gpu.nvml_index} and ps -o user,etime,args -p "
            f"{','.join(str(p.pid) for p in others if p.pid is not None) or 'PID'} "
            "say whose it is: wait for it to finish or stop it. "
        )
    if any(p.proc_state in _STATES for p in others):
        fix += "A process in state D or Z ignores kill; reset the GPU once it is idle. "
    return [
        Finding(
            code="TOPO-MEMORY-OTHER-JOB",
            severity=severity,
            message=message,
            fix=fix + idle_hint(snapshot, gpu),
            predicts=OUT_OF_MEMORY,
            subject=gpu.uuid,
        )
    ]


_TOLD_BY = {
    "self": "gpudiag's own process",
    "ancestor": "an ancestor of gpudiag",
    "slurm_job": "the same Slurm job",
    "session": "the same session",
    "launcher": "the same launcher",
}


def _own_job(snapshot: Snapshot, gpus: Sequence[Gpu], nproc_per_node: int | None) -> list[Finding]:
    own = {g.nvml_index: [p for p in g.processes if p.this_job is True] for g in gpus}
    # Where each of this job's PIDs holds memory, on any GPU of the machine.
    held_on: dict[int, list[int]] = {}
    for g in snapshot.gpus:
        for p in g.processes:
            if p.this_job is True and p.pid is not None:
                held_on.setdefault(p.pid, []).append(g.nvml_index)
    out: list[Finding] = []
    single: list[str] = []
    for gpu in gpus:
        procs = own[gpu.nvml_index]
        # A rank that also holds another GPU is a visitor here (pytorch/pytorch#23138): one
        # process on every GPU is DataParallel's, several ranks on one GPU alone a design.
        visitors = [p for p in procs if p.pid is not None and len(held_on[p.pid]) > 1]
        redacted = any(p.pid is None for p in procs)
        one_each = nproc_per_node is not None and nproc_per_node <= len(gpus)
        if len(procs) >= 2 and (visitors or (redacted and one_each)):
            out.append(_pile_up(gpu, procs, visitors, held_on))
        elif procs:
            single.append(f"GPU {gpu.nvml_index}: {join_and([_who(p) for p in procs])}")
    if single:
        how = sorted(
            {_TOLD_BY.get(p.this_job_by, p.this_job_by) for ps in own.values() for p in ps
             if p.this_job_by is not None}
        )  # fmt: skip
        out.append(
            Finding(
                code="TOPO-MEMORY-OWN-JOB",
                severity="info",
                message="Memory held by this job's own processes"
                + (f" ({' or '.join(how)})" if how else "")
                + f": {'; '.join(single)}. HEALTH-FOREIGN-PROCESSES leaves them out.",
                fix=None,
                subject=None,
            )
        )
    return out


def _pile_up(
    gpu: Gpu,
    procs: Sequence[GpuProcess],
    visitors: Sequence[GpuProcess],
    held_on: dict[int, list[int]],
) -> Finding:
    if visitors:
        pids = join_and([str(p.pid) for p in visitors])
        others = sorted({i for p in visitors for i in held_on[p.pid or 0]} - {gpu.nvml_index})
        gpus = join_and([str(i) for i in others])
        one = len(visitors) == 1
        why = f"; pid{'' if one else 's'} {pids} also hold{'s' if one else ''} GPU"
        why += f"{'' if len(others) == 1 else 's'} {gpus}"
    else:
        why = "; the launch puts one rank on each GPU"
    return Finding(
        code="TOPO-MEMORY-OWN-JOB",
        severity="warning",
        message=f"GPU {gpu.nvml_index} holds {len(procs)} processes of this job: "
        f"{join_and([_who(p) for p in procs])}{why}. The ranks have a CUDA context on GPU "
        f"{gpu.nvml_index}: what CUDA creates when a rank touches CUDA before "
        "torch.cuda.set_device(local_rank) (torch.load without map_location, .cuda(), "
        "torch.cuda.empty_cache(), a tensor on 'cuda'); each costs some hundred MiB, and "
        "this GPU runs out of memory first.",
        fix="Call torch.cuda.set_device(local_rank) before any CUDA call, load checkpoints "
        "with torch.load(path, map_location='cpu') (or f'cuda:{local_rank}'), and use "
        "torch.device(f'cuda:{local_rank}') instead of 'cuda'; gpudiag lint SCRIPT points "
        "at such lines.",
        predicts=OUT_OF_MEMORY,
        subject=gpu.uuid,
    )
