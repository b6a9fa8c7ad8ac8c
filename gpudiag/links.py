"""Frozen data model of what lies between the GPUs (schema 1.2, issue 18).

NVLink links, GPU pairs (PCIe common ancestor and peer-to-peer status, as NVML
answers them) and the PCI path above each GPU (as Linux sysfs shows it).
:mod:`gpudiag.model` re-exports every name; field names follow
``docs/snapshot.md``. ``None`` means "could not collect", as everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: ``nvmlDeviceGetTopologyCommonAncestor`` levels, named as ``nvidia-smi topo -m``'s
#: legend names them; ``BOARD`` (NVML_TOPOLOGY_INTERNAL: two GPUs on one board) has no
#: nvidia-smi code. Nearest first.
TOPOLOGY_LEVELS = ("BOARD", "PIX", "PXB", "PHB", "NODE", "SYS")

#: ``nvmlDeviceGetP2PStatus`` answers, named as ``nvidia-smi topo -p2p``'s legend names
#: them; ``DIS`` is NVML_P2P_STATUS_DISABLED_BY_REGKEY, which that legend lacks.
P2P_STATUSES = ("OK", "CNS", "GNS", "TNS", "DIS", "NS", "U")


@dataclass(frozen=True)
class NvLink:
    """One NVLink link of a GPU (``nvidia-smi nvlink -s``, ``nvidia-smi nvlink -R``).

    Attributes:
        link: the link's index on its GPU (0 … NVML_NVLINK_MAX_LINKS - 1).
        active: ``nvmlDeviceGetNvLinkState``: the link is up.
        remote_pci_bus_id: the PCI bus id at the other end (a GPU or an NVSwitch);
            None when the link is down or it could not be read.
        remote_device_type: ``GPU``, ``NVSwitch``, ``IBMNPU`` or ``Unknown``.
    """

    link: int
    active: bool
    remote_pci_bus_id: str | None = None
    remote_device_type: str | None = None


@dataclass(frozen=True)
class GpuPair:
    """Two GPUs as NVML sees the path between them, ``nvml_index_a < nvml_index_b``.

    Attributes:
        topology: their PCIe common ancestor, a :data:`TOPOLOGY_LEVELS` name.
        p2p_read, p2p_write, p2p_nvlink: ``nvmlDeviceGetP2PStatus`` from a to b for
            reads, writes and NVLink, a :data:`P2P_STATUSES` name (``OK`` = supported).
        errors: field → NVML's reason, for each of the four that could not be read.
    """

    nvml_index_a: int
    nvml_index_b: int
    topology: str | None = None
    p2p_read: str | None = None
    p2p_write: str | None = None
    p2p_nvlink: str | None = None
    errors: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class PciBridge:
    """A PCI bridge above a GPU, with its ACS Control register (PCIe ACS capability).

    ``acs_ctl`` is the 16-bit ACS Control register (0 for a bridge without the ACS
    capability: nothing redirected), or None when the config space past its first
    64 bytes could not be read (Linux lets only root read it).
    """

    bdf: str
    acs_ctl: int | None = None


@dataclass(frozen=True)
class PciGpu:
    """An NVIDIA GPU function on the PCI bus, as Linux sysfs shows it.

    Attributes:
        pci_bus_id: sysfs's address, e.g. ``0000:07:00.0``.
        driver: the kernel driver bound to it (``nvidia``, ``vfio-pci``, ``nouveau``);
            None when none is bound.
        numa_node: its NUMA node; -1 when the platform reports none.
        iommu_group_type: its IOMMU group's default domain type: ``identity``
            (passthrough), ``DMA`` / ``DMA-FQ`` (translated), ``blocked``,
            ``unmanaged``; None without an IOMMU group or when unreadable.
        bridges: the PCI bridges above it, nearest first, up to the root port.
    """

    pci_bus_id: str
    driver: str | None = None
    numa_node: int | None = None
    iommu_group_type: str | None = None
    bridges: tuple[PciBridge, ...] = ()


def pci_bus_key(bus_id: str | None) -> str | None:
    """The join key of a PCI address: ``dddd:bb:dd.f``, lower case.

    NVML writes an 8-digit domain (``00000000:07:00.0``), sysfs a 4-digit one
    (``0000:07:00.0``). None for None or text that is not a PCI address.
    """
    if not bus_id:
        return None
    parts = bus_id.strip().lower().split(":")
    if len(parts) == 2:
        parts = ["0", *parts]
    if len(parts) != 3:
        return None
    domain, bus, devfn = parts
    try:
        return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{devfn}"
    except ValueError:
        return None
