"""Frozen data model shared by every layer.

Field names follow the snapshot schema (``docs/snapshot.md``). ``None`` always
means "could not collect", never zero or false. Index namespaces are spelled
out: ``nvml_index`` is nvidia-smi's numbering, ``cuda_ordinal`` is the index a
CUDA program (``cuda:N``) uses under its ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

# Findings live in gpudiag.findings.finding (issue 16); the model re-exports them.
from gpudiag.findings.finding import SEVERITIES as SEVERITIES
from gpudiag.findings.finding import Finding as Finding
from gpudiag.findings.finding import Severity as Severity

# The links between GPUs (schema 1.2) live in gpudiag.links; the model re-exports them.
from gpudiag.links import P2P_STATUSES as P2P_STATUSES
from gpudiag.links import TOPOLOGY_LEVELS as TOPOLOGY_LEVELS
from gpudiag.links import GpuPair as GpuPair
from gpudiag.links import NvLink as NvLink
from gpudiag.links import PciBridge as PciBridge
from gpudiag.links import PciGpu as PciGpu
from gpudiag.links import pci_bus_key as pci_bus_key

# A node's identity and network (schema 1.3) live in gpudiag.network; re-exported.
from gpudiag.network import HpcxInfo as HpcxInfo
from gpudiag.network import IbGid as IbGid
from gpudiag.network import IbPort as IbPort
from gpudiag.network import LibraryFile as LibraryFile
from gpudiag.network import NetInterface as NetInterface
from gpudiag.network import NodeInfo as NodeInfo
from gpudiag.network import RdmaDevice as RdmaDevice
from gpudiag.network import RdmaStack as RdmaStack
from gpudiag.network import Route as Route

#: The schema gpudiag writes. 1.1 added ``host`` and torch's ``distributed_available`` /
#: ``nccl_available``; 1.2 the links between GPUs (``gpu_pairs``, per-GPU PCIe, NVLink,
#: NUMA and fabric facts, more ``host`` facts); 1.3 ``node``: the boot id, network
#: interfaces, InfiniBand ports, rendezvous variables and NCCL version; 1.4 whose each GPU
#: process is (``this_job``, ``slurm_job_id``, ``proc_state``), the routes, RoCE GID tables,
#: the libnccl / NCCL net plugin files the loader would find, and the RDMA driver stack
#: (``node.rdma``: MLNX_OFED/DOCA-OFED or inbox, HCA firmware, HPC-X). A reader accepts any
#: ``gpudiag-snapshot/1`` or ``/1.N`` (docs/snapshot.md).
SNAPSHOT_SCHEMA = "gpudiag-snapshot/1.4"
#: The major version every readable snapshot shares.
SNAPSHOT_SCHEMA_MAJOR = "gpudiag-snapshot/1"

SourceName = Literal["nvml", "torch", "gputil"]
SOURCE_NAMES: tuple[SourceName, ...] = ("nvml", "torch", "gputil")


@dataclass(frozen=True)
class MigDevice:
    """One MIG instance of a GPU (``nvidia-smi -L`` lists it under its GPU)."""

    uuid: str
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    memory_total_mib: int | None = None


#: What can decide :attr:`GpuProcess.this_job` (docs/snapshot.md): the process is
#: gpudiag's own or an ancestor; its Slurm job equals (or differs from) ours; it is in our
#: session, or under our parent (the launcher); outside all of these, with no Slurm job.
JOB_EVIDENCE = ("self", "ancestor", "slurm_job", "session", "launcher", "process_tree")


@dataclass(frozen=True)
class GpuProcess:
    """A compute process holding GPU memory (``nvidia-smi --query-compute-apps``)."""

    #: None in a redacted snapshot (``gpudiag snapshot --redact``).
    pid: int | None
    used_memory_mib: int | None = None
    name: str | None = None
    #: Since 1.2: ``/proc/<pid>`` exists where gpudiag ran (False: another container's
    #: process, or one that has exited); None when not checked or /proc hides others.
    in_pid_namespace: bool | None = None
    #: Since 1.4: the process belongs to the job gpudiag ran in (its Slurm job, an
    #: ancestor, its session or launcher); False: another job's; None: not told.
    this_job: bool | None = None
    #: Since 1.4: what decided ``this_job`` (:data:`JOB_EVIDENCE`).
    this_job_by: str | None = None
    #: Since 1.4: the process's Slurm job id (its cgroup path, or its SLURM_JOB_ID).
    slurm_job_id: str | None = None
    #: Since 1.4: its state letter in ``/proc/<pid>/stat`` (``R``, ``S``, ``D``, ``Z``).
    proc_state: str | None = None


@dataclass(frozen=True)
class Gpu:
    """NVML's facts about one physical GPU.

    Each field's nvidia-smi equivalent is in ``docs/snapshot.md``. ``uuid`` is
    None only for a GPU that fell off the bus before it could be read
    (``lost``); CUDA does not enumerate such a GPU.
    """

    nvml_index: int
    uuid: str | None
    pci_bus_id: str | None = None
    name: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    utilization_gpu_percent: int | None = None
    temperature_c: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    multiprocessor_count: int | None = None
    compute_capability: str | None = None
    mig_enabled: bool | None = None
    mig_devices: tuple[MigDevice, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    ecc_uncorrectable_volatile: int | None = None
    ecc_uncorrectable_aggregate: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    compute_mode: str | None = None
    persistence_mode: bool | None = None
    throttle_reasons: tuple[str, ...] | None = None
    # Since 1.2 (issue 18): the links around the GPU.
    pcie_link_gen_current: int | None = None
    pcie_link_gen_max: int | None = None
    pcie_link_width_current: int | None = None
    pcie_link_width_max: int | None = None
    numa_affinity: tuple[int, ...] | None = None
    cpu_affinity: str | None = None
    nvlinks: tuple[NvLink, ...] | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None
    lost: bool = False
    errors: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class TorchDevice:
    """One device as ``torch.cuda`` sees it, under the recorded environment."""

    cuda_ordinal: int
    name: str | None = None
    uuid: str | None = None
    memory_total_mib: int | None = None
    multiprocessor_count: int | None = None
    compute_capability: str | None = None


@dataclass(frozen=True)
class TorchInfo:
    """What torch reports, queried in a child process."""

    version: str | None = None
    cuda_version: str | None = None
    cpu_only: bool | None = None
    cuda_available: bool | None = None
    device_count: int | None = None
    arch_list: tuple[str, ...] = ()
    devices: tuple[TorchDevice, ...] = ()
    error: str | None = None
    distributed_available: bool | None = None
    nccl_available: bool | None = None


@dataclass(frozen=True)
class GputilGpu:
    """One GPU as GPUtil (an ``nvidia-smi`` CSV parser) reports it."""

    gputil_id: int
    uuid: str | None = None
    name: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    load_percent: float | None = None
    temperature_c: float | None = None


@dataclass(frozen=True)
class SourceStatus:
    """Whether one source could be read.

    ``status`` is ``ok``, ``unavailable`` (not installed / no driver), ``error``,
    or ``skipped`` (present but not asked, e.g. torch without ``--deep``: its
    version is read from its files and ``reason`` says what was not asked).
    """

    status: Literal["ok", "unavailable", "error", "skipped"]
    reason: str | None = None


@dataclass(frozen=True)
class HostInfo:
    """Facts about the host that explain a missing GPU (schema 1.1, ``host``).

    None means "not collected" (an older snapshot, or unreadable).

    Attributes:
        platform: ``platform.system()``: ``Linux``, ``Windows``, ``Darwin``.
        machine: ``platform.machine()``, e.g. ``x86_64``, ``aarch64``.
        dev_nvidia: the ``/dev/nvidia*`` device files present (``nvidiactl``, ``nvidia0``…).
        dev_dxg: ``/dev/dxg`` exists (WSL 2 reaches the GPU through it, not /dev/nvidia*).
        proc_driver_nvidia: ``/proc/driver/nvidia`` exists (the kernel module is loaded;
            the NVIDIA container runtime mounts it into a GPU container).
        nvidia_pci_gpus: NVIDIA (vendor 0x10de) display/3D controllers in /sys/bus/pci.
        container_marks: why gpudiag thinks this is a container (``/.dockerenv``,
            ``/run/.containerenv``, ``KUBERNETES_SERVICE_HOST``, ``/proc/1/cgroup: docker``…);
            empty when none was found.
        nvidia_env: the NVIDIA container runtime's variables as set (``NVIDIA_VISIBLE_DEVICES``,
            ``NVIDIA_DRIVER_CAPABILITIES``); an nvidia/cuda image sets them itself.
        kernel_iommu_args: since 1.2, the IOMMU arguments of ``/proc/cmdline``
            (``intel_iommu=on``, ``amd_iommu=off``, ``iommu=pt``…); empty when none.
        iommu_devices: since 1.2, ``/sys/class/iommu``'s entries (``dmar0``, ``ivhd0``):
            the IOMMUs the kernel drives; empty when none.
        dev_shm_total_mib, dev_shm_free_mib: since 1.2, the size of ``/dev/shm``.
        nvidia_uvm_loaded: since 1.2, ``/sys/module/nvidia_uvm`` exists.
        pci_gpus: since 1.2, the NVIDIA GPU functions of ``/sys/bus/pci`` with their
            driver, NUMA node, IOMMU group type and the bridges above them.
        host_pid_namespace: since 1.4, gpudiag ran in the host's PID namespace, where
            NVML's PIDs (always the host's) can be looked up in ``/proc``.
    """

    platform: str | None = None
    machine: str | None = None
    dev_nvidia: tuple[str, ...] | None = None
    dev_dxg: bool | None = None
    proc_driver_nvidia: bool | None = None
    nvidia_pci_gpus: int | None = None
    container_marks: tuple[str, ...] | None = None
    nvidia_env: Mapping[str, str] = field(default_factory=dict, hash=False)
    kernel_iommu_args: tuple[str, ...] | None = None
    iommu_devices: tuple[str, ...] | None = None
    dev_shm_total_mib: int | None = None
    dev_shm_free_mib: int | None = None
    nvidia_uvm_loaded: bool | None = None
    pci_gpus: tuple[PciGpu, ...] | None = None
    host_pid_namespace: bool | None = None


@dataclass(frozen=True)
class Snapshot:
    """Everything gpudiag knows about a machine; the JSON snapshot's content."""

    driver_version: str | None = None
    cuda_driver_version: str | None = None
    env: Mapping[str, str | None] = field(
        default_factory=lambda: {"CUDA_VISIBLE_DEVICES": None, "CUDA_DEVICE_ORDER": None},
        hash=False,
    )
    cuda_order: tuple[str, ...] | None = None
    gpus: tuple[Gpu, ...] = ()
    sources: Mapping[str, SourceStatus] = field(default_factory=dict, hash=False)
    torch: TorchInfo | None = None
    gputil: tuple[GputilGpu, ...] | None = None
    hostname: str | None = None
    created_utc: str | None = None
    schema: str = SNAPSHOT_SCHEMA
    host: HostInfo | None = None
    #: Since 1.2: one item per pair of GPUs NVML could ask about; None when not collected.
    gpu_pairs: tuple[GpuPair, ...] | None = None
    #: Since 1.3: the node's identity and network; None when not collected.
    node: NodeInfo | None = None

    @property
    def cuda_visible_devices(self) -> str | None:
        """The recorded ``CUDA_VISIBLE_DEVICES`` (None when unset)."""
        return self.env.get("CUDA_VISIBLE_DEVICES")

    @property
    def cuda_device_order(self) -> str | None:
        """The recorded ``CUDA_DEVICE_ORDER`` (None when unset)."""
        return self.env.get("CUDA_DEVICE_ORDER")


def uuid_key(uuid: str | None) -> str | None:
    """The join key of a GPU or MIG UUID: its hex part, lower case.

    NVML and nvidia-smi print ``GPU-…`` / ``MIG-…``; torch prints the bare
    UUID. None for None or an empty string.
    """
    if uuid is None:
        return None
    text = uuid.strip().lower()
    for prefix in ("gpu-", "mig-"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    return text or None


def short_uuid(uuid: str | None) -> str:
    """``GPU-9942190a…``: the prefix and the first group, enough to tell GPUs apart."""
    if not uuid:
        return "?"
    head, sep, rest = uuid.partition("-")
    if not sep:
        return uuid
    first = rest.split("-", 1)[0]
    return f"{head}-{first}…" if first != rest else uuid


@dataclass(frozen=True)
class VisibleDevice:
    """One device a CUDA program will see: ``cuda:<cuda_ordinal>``.

    ``uuid`` is always the physical GPU's UUID; for a MIG instance ``mig_uuid``
    is the instance's and ``uuid`` its parent GPU's.
    """

    cuda_ordinal: int
    nvml_index: int
    uuid: str
    mig_uuid: str | None = None
    entry: str | None = None

    def to_json(self) -> dict[str, object]:
        """The ``visible`` item of ``gpudiag check --json``."""
        return {
            "cuda_ordinal": self.cuda_ordinal,
            "nvml_index": self.nvml_index,
            "uuid": self.uuid,
            "mig_uuid": self.mig_uuid,
        }


@dataclass(frozen=True)
class EntryExplanation:
    """How one comma-separated ``CUDA_VISIBLE_DEVICES`` entry was read.

    ``outcome`` is ``visible`` (it selected a device), ``stop`` (it is invalid
    and ends the list), ``ignored`` (it comes after the stop, or CUDA skips it).
    """

    position: int
    entry: str
    outcome: Literal["visible", "stop", "ignored"]
    text: str


@dataclass(frozen=True)
class Resolution:
    """The answer to "which physical devices are cuda:0, cuda:1, …".

    Attributes:
        spec: the ``CUDA_VISIBLE_DEVICES`` value evaluated (None: unset).
        order: the effective ``CUDA_DEVICE_ORDER`` (``PCI_BUS_ID`` or ``FASTEST_FIRST``).
        devices: the visible devices, in ``cuda_ordinal`` order.
        explanations: one per entry of ``spec``, in order.
        findings: pitfalls found while resolving.
        method: ``rules`` (CUDA's documented rules) or ``driver`` (asked libcuda).
        certain: False when the mapping depends on an order gpudiag could not know.
        cuinit_error: the error ``cuInit`` returns in a process with this
            environment (``CUDA_ERROR_NO_DEVICE``, ``CUDA_ERROR_INVALID_DEVICE``),
            or None when it succeeds; every CUDA call then fails.
    """

    spec: str | None
    order: str
    devices: tuple[VisibleDevice, ...]
    explanations: tuple[EntryExplanation, ...] = ()
    findings: tuple[Finding, ...] = ()
    method: Literal["rules", "driver"] = "rules"
    certain: bool = True
    cuinit_error: str | None = None


@dataclass(frozen=True)
class PortHolder:
    """A process holding a TCP port, as ``/proc/net/tcp*`` and ``/proc/*/fd`` tell."""

    pid: int
    name: str | None = None
    cmdline: str | None = None


@dataclass(frozen=True)
class PortProbe:
    """The outcome of trying to bind the rendezvous port (live only).

    Attributes:
        address: the address checked (``MASTER_ADDR`` or its default).
        port: the port checked.
        status: ``free``; ``in_use`` (EADDRINUSE); ``not_local`` (the address is another
            host's, so rank 0 binds there); ``error`` (could not tell: ``reason``).
        reason: the error text for ``error`` (or ``in_use``).
        holders: the processes listening on the port, where ``/proc`` tells.
    """

    address: str
    port: int
    status: Literal["free", "in_use", "not_local", "error"]
    reason: str | None = None
    holders: tuple[PortHolder, ...] = ()
