"""Around the GPUs: /dev/shm, /dev/nvidia-uvm, the container's pieces (TOPO-).

Pure: functions of a snapshot's host facts (schema 1.2) and the GPUs a launch
selects. Silent where a fact was not collected, and where no GPU was reached at
all (the HOST- rules of :mod:`gpudiag.core.host` explain that case).

Sources (also in ``docs/findings.md``):

* NCCL user guide, Troubleshooting, "Shared memory": NCCL creates its segments in
  /dev/shm and fails to initialise without room ("NCCL WARN Error: failed to extend
  /dev/shm/nccl-…"); Docker containers default to limited shared memory, so run them
  with ``--shm-size=1g --ulimit memlock=-1``; Environment Variables, ``NCCL_SHM_DISABLE``
  (no SHM transport). NVIDIA/nccl#1518: 64 MiB held 2 ranks and not 4 (9.2 MiB segments).
  DeepSpeed ``deepspeed/env_report.py`` (``get_shm_size``) warns below 512 MiB.
* torch.utils.data docs, "Multi-process data loading" and ``prefetch_factor`` (2 batches
  per worker in flight), and torch.multiprocessing's sharing strategies: workers pass
  batches through shared memory, and die of SIGBUS ("DataLoader worker … killed by
  signal: Bus error") or fail in ``MapAllocator`` ("unable to write to file
  </torch_…>") when it is full.
* NVIDIA Container Toolkit, "Specialized configurations" (driver capabilities:
  ``compute`` is "required for CUDA and OpenCL applications", ``utility`` for
  nvidia-smi and NVML; unset or empty means the default, ``utility,compute``). The
  runtime injects the ``/dev/nvidia*`` device nodes that exist on the host; NVIDIA's
  driver README ("nvidia-modprobe"): the ``nvidia-uvm`` module and its device file are
  created on first use by the setuid nvidia-modprobe, or by ``nvidia-modprobe -u -c=0``.
* torch 2.13 c10/cuda/CUDAFunctions.cpp: cuInit's CUDA_ERROR_UNKNOWN (no
  /dev/nvidia-uvm) surfaces as "CUDA unknown error - this may be due to an incorrectly
  set up environment…".
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudiag.core.describe import gpu_by_nvml_index, join_and
from gpudiag.core.memory_holders import memory_holder_findings
from gpudiag.findings.texts import (
    CUDA_UNKNOWN_ERROR,
    DATALOADER_BUS_ERROR,
    NCCL_SHM_EXTEND,
    NO_DRIVER,
    SHM_WRITE_FAILED,
)
from gpudiag.model import Finding, Gpu, HostInfo, Resolution, Snapshot, pci_bus_key

#: Below this /dev/shm size DeepSpeed's environment report warns (env_report.py).
SHM_MIN_MIB = 512
#: Docker's default --shm-size (docker run reference: "--shm-size … default 64MB").
DOCKER_SHM_MIB = 64
#: NCCL's SHM transport maps a segment per channel and peer (9637888 bytes, 9.2 MiB, in
#: NVIDIA/nccl#1518 and pytorch/ci-infra#490, with 2 channels). In nccl#1518 a 64 MiB
#: /dev/shm held 2 ranks and not 4: between 16 and 32 MiB a rank. gpudiag counts 32.
NCCL_SHM_PER_RANK_MIB = 32
#: A DataLoader worker keeps ``prefetch_factor`` batches (2 by default, torch.utils.data
#: docs) in shared memory until the main process takes them. gpudiag counts 32 MiB a batch
#: (64 images 3x224x224 in float32 are 36.75 MiB): a floor for image training, not a ceiling.
WORKER_SHM_MIB = 64


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
    snapshot: Snapshot,
    gpus: Sequence[Gpu],
    *,
    nproc_per_node: int | None = None,
    num_workers: int | None = None,
    nccl_shm: bool = True,
) -> list[Finding]:
    """TOPO-SHM-SMALL, TOPO-UVM-MISSING, TOPO-CONTAINER-CAPS, TOPO-PCI-UNSEEN and the
    memory holders (:mod:`gpudiag.core.memory_holders`)."""
    host = snapshot.host
    out: list[Finding] = []
    if host is not None and snapshot.gpus:
        out += shm_findings(host, gpus, nproc_per_node, num_workers, nccl_shm=nccl_shm)
        out += uvm_findings(host)
        out += caps_findings(host)
        out += pci_unseen_findings(snapshot, host)
    out += memory_holder_findings(snapshot, gpus, nproc_per_node=nproc_per_node)
    return out


def _in_container(host: HostInfo | None) -> bool:
    return host is not None and bool(host.container_marks)


def shm_findings(
    host: HostInfo,
    gpus: Sequence[Gpu],
    nproc_per_node: int | None,
    num_workers: int | None = None,
    *,
    nccl_shm: bool = True,
) -> list[Finding]:
    """TOPO-SHM-SMALL. With ``num_workers`` (per rank): ``/dev/shm``'s free room against
    :func:`shm_need_mib`; without, below 512 MiB (a warning when several local ranks share
    it). ``nccl_shm`` is False when NCCL will not use it (gloo, ``NCCL_SHM_DISABLE=1``)."""
    total = host.dev_shm_total_mib
    if total is None:
        return []
    ranks = max(len(gpus), nproc_per_node or 0)
    if num_workers is not None:
        return _shm_against_need(host, total, ranks, num_workers, nccl_shm)
    if total >= SHM_MIN_MIB:
        return []
    docker = " (Docker's default)" if total == DOCKER_SHM_MIB else ""
    bus_error = DATALOADER_BUS_ERROR.format(pid="…")
    if ranks >= 2 and nccl_shm:
        return [
            Finding(
                code="TOPO-SHM-SMALL",
                severity="warning",
                message=f"/dev/shm holds {total} MiB{docker}, for {ranks} local ranks: "
                "NCCL creates its segments there (all of its traffic between GPUs without "
                "P2P) and fails to initialise or dies mid-run when they do not fit; "
                "DataLoader workers passing batches through it die of a bus error.",
                fix=_SHM_FIX,
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
            "pass batches through it and die of a bus error when a batch does not fit"
            + ("; a multi-GPU launch would also need it for NCCL." if nccl_shm else "."),
            fix=_SHM_FIX,
            predicts=bus_error,
            subject="/dev/shm",
        )
    ]


_SHM_FIX = (
    "Give /dev/shm 1 GiB or more: docker run --shm-size=1g (NCCL's guide adds --ulimit "
    "memlock=-1) or --ipc=host; in Kubernetes mount an emptyDir with medium: Memory at "
    "/dev/shm; on a host, sudo mount -o remount,size=8G /dev/shm."
)


def shm_need_mib(ranks: int, num_workers: int, *, nccl_shm: bool = True) -> int:
    """What a launch puts in ``/dev/shm``, at least: NCCL's segments for each local rank
    (two ranks or more) and ``prefetch_factor`` batches for each DataLoader worker."""
    nccl = ranks * NCCL_SHM_PER_RANK_MIB if ranks >= 2 and nccl_shm else 0
    return nccl + ranks * num_workers * WORKER_SHM_MIB


def _shm_against_need(
    host: HostInfo, total: int, ranks: int, workers: int, nccl_shm: bool
) -> list[Finding]:
    need = shm_need_mib(ranks, workers, nccl_shm=nccl_shm)
    if need == 0:
        return []  # one process, no worker: nothing of the job's goes through /dev/shm
    free = host.dev_shm_free_mib
    room = total if free is None else min(free, total)
    docker = " (Docker's default)" if total == DOCKER_SHM_MIB else ""
    held = f" ({total - room} MiB of it already used)" if room < total else ""
    nccl = need - ranks * workers * WORKER_SHM_MIB
    parts = [f"NCCL's segments ({ranks} x {NCCL_SHM_PER_RANK_MIB} MiB)"] if nccl else []
    if workers:
        n = ranks * workers
        parts.append(
            f"the prefetched batches of {n} DataLoader worker{'s' if n > 1 else ''} "
            f"({n} x {WORKER_SHM_MIB} MiB)"
        )
    rank_s = "rank" if ranks == 1 else "ranks"
    head = (
        f"/dev/shm holds {total} MiB{docker}{held}, and {ranks} local {rank_s} x (1 + "
        f"{workers} DataLoader workers) need about {need} MiB there: {join_and(parts)}"
    )
    if need <= room:
        if total >= SHM_MIN_MIB:
            return []
        return [
            Finding(
                code="TOPO-SHM-SMALL",
                severity="info",
                message=f"{head}. That fits, below the 512 MiB DeepSpeed asks for: larger "
                "batches than counted, or more NCCL channels, would not.",
                fix=_SHM_FIX,
                subject="/dev/shm",
            )
        ]
    bus_error = DATALOADER_BUS_ERROR.format(pid="…")
    write_error = SHM_WRITE_FAILED.format(name="torch_…")
    gib = max(1, -(-need // 1024))
    return [
        Finding(
            code="TOPO-SHM-SMALL",
            severity="warning",
            message=f"{head}. "
            + (
                "NCCL fails to initialise when its segments do not fit, and a worker whose "
                "batch does not fit dies of a bus error."
                if nccl and workers
                else "NCCL fails to initialise when its segments do not fit."
                if nccl
                else "A worker whose batch does not fit dies of a bus error."
            ),
            fix=f"Give /dev/shm {gib} GiB or more: docker run --shm-size={gib}g (or "
            "--ipc=host); in Kubernetes an emptyDir with medium: Memory at /dev/shm; on a "
            f"host, sudo mount -o remount,size={gib}G /dev/shm"
            + ("; or lower num_workers." if workers else "."),
            predicts=NCCL_SHM_EXTEND.format(name="…", size="…") if nccl else bus_error,
            predicts_also=((bus_error,) if nccl and workers else ())
            + ((write_error,) if workers else ()),
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
