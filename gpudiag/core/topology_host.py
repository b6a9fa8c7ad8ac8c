"""Around the GPUs: /dev/shm, /dev/nvidia-uvm, the container's pieces, memory holders (TOPO-).

Pure: functions of a snapshot's host facts (schema 1.2) and the GPUs a launch
selects. Silent where a fact was not collected, and where no GPU was reached at
all (the HOST- rules of :mod:`gpudiag.core.host` explain that case).

Sources (also in ``docs/findings.md``):

* NCCL user guide, Troubleshooting, "Shared memory": NCCL creates its segments in
  /dev/shm and fails to initialise without room ("NCCL WARN Error: failed to extend
  /dev/shm/nccl-…"); Docker containers default to limited shared memory, so run them
  with ``--shm-size=1g --ulimit memlock=-1``. DeepSpeed ``deepspeed/env_report.py``
  (``get_shm_size``) warns below 512 MiB; torch's DataLoader workers pass batches
  through shared memory and die of SIGBUS when it is full.
* NVIDIA Container Toolkit, "Specialized configurations" (driver capabilities:
  ``compute`` is "required for CUDA and OpenCL applications", ``utility`` for
  nvidia-smi and NVML; unset or empty means the default, ``utility,compute``). The
  runtime injects the ``/dev/nvidia*`` device nodes that exist on the host; NVIDIA's
  driver README ("nvidia-modprobe"): the ``nvidia-uvm`` module and its device file are
  created on first use by the setuid nvidia-modprobe, or by ``nvidia-modprobe -u -c=0``.
* torch 2.13 c10/cuda/CUDAFunctions.cpp: cuInit's CUDA_ERROR_UNKNOWN (no
  /dev/nvidia-uvm) surfaces as "CUDA unknown error - this may be due to an incorrectly
  set up environment…".
* NVML ``nvmlDeviceGetComputeRunningProcesses``: PIDs of processes in other PID
  namespaces (other containers) are not this namespace's; proc(5) ``/proc/<pid>``.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudiag.core.describe import gpu_by_nvml_index, join_and
from gpudiag.findings.texts import (
    CUDA_UNKNOWN_ERROR,
    DATALOADER_BUS_ERROR,
    NCCL_SHM_EXTEND,
    NO_DRIVER,
    OUT_OF_MEMORY,
)
from gpudiag.model import Finding, Gpu, HostInfo, Resolution, Snapshot, pci_bus_key

#: Below this /dev/shm size DeepSpeed's environment report warns (env_report.py).
SHM_MIN_MIB = 512
#: Docker's default --shm-size.
DOCKER_SHM_MIB = 64


def selected_gpus(snapshot: Snapshot, resolution: Resolution) -> list[Gpu]:
    """The physical GPUs the launch gets, once each, in ``cuda:N`` order; lost ones left out."""
    seen: set[int] = set()
    out = []
    for dev in resolution.devices:
        if dev.nvml_index in seen:
            continue
        seen.add(dev.nvml_index)
        gpu = gpu_by_nvml_index(snapshot, dev.nvml_index)
        if gpu is not None and not gpu.lost:
            out.append(gpu)
    return out


def host_piece_findings(
    snapshot: Snapshot, gpus: Sequence[Gpu], *, nproc_per_node: int | None = None
) -> list[Finding]:
    """TOPO-SHM-SMALL, TOPO-UVM-MISSING, TOPO-CONTAINER-CAPS, TOPO-PCI-UNSEEN and
    TOPO-MEMORY-FOREIGN-PID."""
    host = snapshot.host
    out: list[Finding] = []
    if host is not None and snapshot.gpus:
        out += shm_findings(host, gpus, nproc_per_node)
        out += uvm_findings(host)
        out += caps_findings(host)
        out += pci_unseen_findings(snapshot, host)
    out += memory_holder_findings(snapshot, gpus)
    return out


def _in_container(host: HostInfo | None) -> bool:
    return host is not None and bool(host.container_marks)


def shm_findings(host: HostInfo, gpus: Sequence[Gpu], nproc_per_node: int | None) -> list[Finding]:
    """TOPO-SHM-SMALL: /dev/shm below 512 MiB; a warning when several local ranks share it."""
    total = host.dev_shm_total_mib
    if total is None or total >= SHM_MIN_MIB:
        return []
    ranks = max(len(gpus), nproc_per_node or 0)
    docker = " (Docker's default)" if total == DOCKER_SHM_MIB else ""
    bus_error = DATALOADER_BUS_ERROR.format(pid="…")
    fix = (
        "Give /dev/shm 1 GiB or more: docker run --shm-size=1g (NCCL's guide adds --ulimit "
        "memlock=-1) or --ipc=host; in Kubernetes mount an emptyDir with medium: Memory at "
        "/dev/shm; on a host, sudo mount -o remount,size=8G /dev/shm."
    )
    if ranks >= 2:
        return [
            Finding(
                code="TOPO-SHM-SMALL",
                severity="warning",
                message=f"/dev/shm holds {total} MiB{docker}, for {ranks} local ranks: "
                "NCCL creates its segments there (all of its traffic between GPUs without "
                "P2P) and fails to initialise or dies mid-run when they do not fit; "
                "DataLoader workers passing batches through it die of a bus error.",
                fix=fix,
                predicts=NCCL_SHM_EXTEND.format(name="…", size="…"),
                predicts_also=(bus_error,),
                subject="/dev/shm",
            )
        ]
    return [
        Finding(
            code="TOPO-SHM-SMALL",
            severity="info",
            message=f"/dev/shm holds {total} MiB{docker}: DataLoader workers (num_workers > 0) "
            "pass batches through it and die of a bus error when a batch does not fit; a "
            "multi-GPU launch would also need it for NCCL.",
            fix=fix,
            predicts=bus_error,
            subject="/dev/shm",
        )
    ]


def uvm_findings(host: HostInfo) -> list[Finding]:
    """TOPO-UVM-MISSING: GPUs reached through NVML, but no /dev/nvidia-uvm."""
    devices = host.dev_nvidia
    if devices is None or not devices or "nvidia-uvm" in devices:
        return []
    shown = ", ".join("/dev/" + d for d in devices)
    not_loaded = host.nvidia_uvm_loaded is False
    if _in_container(host):
        return [
            Finding(
                code="TOPO-UVM-MISSING",
                severity="error",
                message=f"This container has no /dev/nvidia-uvm ({shown} only) although NVML "
                "sees its GPUs: CUDA's first call fails with CUDA_ERROR_UNKNOWN. The NVIDIA "
                "runtime passes /dev/nvidia-uvm only when it exists on the host as the "
                "container starts"
                + (
                    ", and the host's nvidia_uvm kernel module is not loaded."
                    if not_loaded
                    else "."
                ),
                fix="On the host run sudo nvidia-modprobe -u -c=0 (or modprobe nvidia-uvm, and "
                "load it at boot), then restart the container; with --device lists, add "
                "--device /dev/nvidia-uvm.",
                predicts=CUDA_UNKNOWN_ERROR,
                subject="/dev/nvidia-uvm",
            )
        ]
    # On a host the setuid nvidia-modprobe the driver installs usually creates it on
    # first use: only where it is missing or not allowed does CUDA fail.
    return [
        Finding(
            code="TOPO-UVM-MISSING",
            severity="info",
            message=f"There is no /dev/nvidia-uvm ({shown} only"
            + ("; the nvidia_uvm kernel module is not loaded" if not_loaded else "")
            + "): CUDA creates it on first use through the setuid nvidia-modprobe; where that "
            "is missing or not allowed, CUDA's first call fails with CUDA_ERROR_UNKNOWN.",
            fix="sudo nvidia-modprobe -u -c=0 (or sudo modprobe nvidia-uvm), and load it at boot.",
            predicts=CUDA_UNKNOWN_ERROR,
            subject="/dev/nvidia-uvm",
        )
    ]


def caps_findings(host: HostInfo) -> list[Finding]:
    """TOPO-CONTAINER-CAPS: NVIDIA_DRIVER_CAPABILITIES without compute in a GPU container."""
    value = host.nvidia_env.get("NVIDIA_DRIVER_CAPABILITIES")
    if not _in_container(host) or value is None or not value.strip():
        return []  # unset or empty: the runtime's default, utility,compute
    caps = {c.strip().lower() for c in value.split(",")}
    if caps & {"all", "compute"}:
        return []
    return [
        Finding(
            code="TOPO-CONTAINER-CAPS",
            severity="error",
            message=f"NVIDIA_DRIVER_CAPABILITIES={value!r} leaves out compute: the NVIDIA "
            "runtime mounts no CUDA driver library (libcuda.so) into this container, so "
            "nvidia-smi works and torch finds no driver.",
            fix="Start the container with -e NVIDIA_DRIVER_CAPABILITIES=compute,utility (or "
            "all), or leave it unset.",
            predicts=NO_DRIVER,
            subject="NVIDIA_DRIVER_CAPABILITIES",
        )
    ]


def pci_unseen_findings(snapshot: Snapshot, host: HostInfo) -> list[Finding]:
    """TOPO-PCI-UNSEEN: more NVIDIA GPU functions on the PCI bus than NVML lists."""
    nvml = snapshot.sources.get("nvml")
    pci, seen = host.nvidia_pci_gpus, len(snapshot.gpus)
    if pci is None or pci <= seen or (nvml is not None and nvml.status != "ok"):
        return []
    visible = host.nvidia_env.get("NVIDIA_VISIBLE_DEVICES")
    keys = {pci_bus_key(g.pci_bus_id) for g in snapshot.gpus}
    others = [p for p in host.pci_gpus or () if pci_bus_key(p.pci_bus_id) not in keys]
    drivers = [f"{p.pci_bus_id} ({p.driver or 'no driver'})" for p in others]
    bound = f": {join_and(drivers)}" if drivers and not _in_container(host) else ""
    head = f"{pci} NVIDIA GPUs are on the PCI bus, NVML sees {seen}"
    if _in_container(host) and visible is not None and visible.strip().lower() != "all":
        return [
            Finding(
                code="TOPO-PCI-UNSEEN",
                severity="info",
                message=f"{head}: this container was given {seen} of the host's GPUs "
                f"(NVIDIA_VISIBLE_DEVICES={visible}); expected when the job asked for {seen}.",
                fix="Ask for more GPUs when starting the container (--gpus, a Kubernetes "
                "nvidia.com/gpu limit) if the job needs them.",
            )
        ]
    if others and all(p.driver == "vfio-pci" for p in others):
        return [
            Finding(
                code="TOPO-PCI-UNSEEN",
                severity="info",
                message=f"{head}{bound}: bound to vfio-pci, passed through to virtual "
                "machines, not this host's driver.",
                fix=None,
            )
        ]
    return [
        Finding(
            code="TOPO-PCI-UNSEEN",
            severity="warning",
            message=f"{head}{bound}: the NVIDIA driver did not take the others (a GPU it "
            "failed to initialise, one excluded, or one bound to another driver), so no job "
            "here can use them.",
            fix="dmesg | grep -i NVRM (RmInitAdapter failed, fallen off the bus); lspci -k -d "
            "10de: shows each function's driver; reset or reseat the GPU, or report it.",
        )
    ]


def memory_holder_findings(snapshot: Snapshot, gpus: Sequence[Gpu]) -> list[Finding]:
    """TOPO-MEMORY-FOREIGN-PID: memory held by PIDs this PID namespace does not have."""
    container = _in_container(snapshot.host)
    out = []
    for gpu in gpus:
        foreign = [p for p in gpu.processes if p.in_pid_namespace is False]
        if not foreign:
            continue
        mib = sum(p.used_memory_mib or 0 for p in foreign)
        pids = join_and([f"pid {p.pid}" for p in foreign])
        hold = "holds" if len(foreign) == 1 else "hold"
        if container:
            message = (
                f"GPU {gpu.nvml_index}: {pids} {hold} {mib} MiB, and no such process exists in "
                "this container: another container's job shares the GPU, out of reach from "
                "here (kill finds nothing)."
            )
            fix = "Use another GPU, or have the node's admins find that container's job (the "
            fix += "host's nvidia-smi shows its PID)."
        else:
            message = (
                f"GPU {gpu.nvml_index}: {pids} {hold} {mib} MiB, but no such process exists any "
                "more: memory left by a process that exited without releasing its CUDA "
                "context (a crashed run, a zombie whose parent has not reaped it)."
            )
            fix = (
                f"sudo fuser -v /dev/nvidia{gpu.nvml_index} shows what still holds the GPU: "
                "stop it (a zombie's parent); if nothing does, reset the GPU (sudo nvidia-smi "
                f"-r -i {gpu.nvml_index})."
            )
        out.append(
            Finding(
                code="TOPO-MEMORY-FOREIGN-PID",
                severity="warning",
                message=message,
                fix=fix,
                predicts=OUT_OF_MEMORY,
                subject=gpu.uuid,
            )
        )
    return out
