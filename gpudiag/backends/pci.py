"""The NVIDIA GPU functions in Linux sysfs and the PCI bridges above them (schema 1.2).

For each GPU function (vendor 0x10de, class 0x0300 or 0x0302) of
``/sys/bus/pci/devices``: the kernel driver bound to it, its NUMA node, its IOMMU
group's default domain type, and every bridge on its path to the root port with
that bridge's ACS Control register.

Reading is safe and read-only: sysfs attribute files, and each bridge's
``config`` file, which ``lspci -vvv`` reads too. Linux lets only root read a
device's config space past its first 64 bytes, where the PCIe extended
capabilities (ACS among them, at 0x100 and up) live: run unprivileged, every
``acs_ctl`` is None ("could not read"), never 0.

Sources: PCI Express Base Specification, "Access Control Services (ACS)
Extended Capability" (capability ID 0x000D; ACS Control Register at offset
06h: Source Validation bit 0, Translation Blocking 1, P2P Request Redirect 2,
P2P Completion Redirect 3, Upstream Forwarding 4, P2P Egress Control 5, Direct
Translated P2P 6); Linux ``Documentation/ABI/testing/sysfs-bus-pci``
(``numa_node``, ``driver``, ``iommu_group``) and ``sysfs-kernel-iommu_groups``
(``type``: ``identity``, ``DMA``, ``DMA-FQ``, ``blocked``, ``unmanaged``).
"""

from __future__ import annotations

import re
from pathlib import Path

from gpudiag.model import PciBridge, PciGpu

NVIDIA_VENDOR = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")
#: A node has at most a few dozen PCI GPUs; stop reading a huge or looping tree early.
MAX_PCI = 4096
ACS_CAP_ID = 0x000D
_EXT_START = 0x100
_CONFIG_MAX = 4096
_BDF = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def _read(path: Path, limit: int = 4096) -> str | None:
    try:
        with path.open("rb") as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return None


def is_nvidia_gpu(entry: Path) -> bool:
    """A sysfs PCI device directory that is an NVIDIA display/3D controller."""
    vendor = (_read(entry / "vendor", 64) or "").strip().lower()
    cls = (_read(entry / "class", 64) or "").strip().lower()
    return vendor == NVIDIA_VENDOR and cls[:6] in GPU_CLASSES


def acs_control(config: bytes) -> int | None:
    """The ACS Control register from a device's config space bytes.

    None when the extended config space was not readable (64 bytes: unprivileged);
    0 when the device has no ACS capability (nothing is redirected).
    """
    if len(config) < _EXT_START + 4:
        # 256 bytes is a conventional-PCI device's whole space: no extended capabilities.
        return 0 if len(config) == 256 else None
    offset = _EXT_START
    for _ in range(64):  # a corrupt list must not loop
        if offset < _EXT_START or offset + 8 > len(config):
            return 0
        header = int.from_bytes(config[offset : offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return 0
        if header & 0xFFFF == ACS_CAP_ID:
            return int.from_bytes(config[offset + 6 : offset + 8], "little")
        offset = (header >> 20) & 0xFFC
        if offset == 0:
            return 0
    return 0


def _config(path: Path) -> bytes | None:
    try:
        with (path / "config").open("rb") as fh:
            return fh.read(_CONFIG_MAX)
    except (OSError, ValueError):
        return None


def bridges_above(device: Path) -> tuple[PciBridge, ...]:
    """The PCI bridges above a device (its real sysfs path), nearest first."""
    out = []
    for parent in device.parents:
        if not _BDF.match(parent.name.lower()):
            break  # pci0000:00, the root bus: the path above is not PCI
        config = _config(parent)
        out.append(
            PciBridge(bdf=parent.name, acs_ctl=None if config is None else acs_control(config))
        )
    return tuple(out)


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(text.strip())
    except ValueError:
        return None


def _link_name(path: Path) -> str | None:
    try:
        return path.resolve(strict=True).name
    except (OSError, RuntimeError, ValueError):
        return None


def pci_gpus(root: Path) -> tuple[PciGpu, ...] | None:
    """The NVIDIA GPU functions on the PCI bus; None when sysfs is unreadable."""
    base = root / "sys" / "bus" / "pci" / "devices"
    try:
        entries = sorted(base.iterdir())[:MAX_PCI]
    except (OSError, ValueError):
        return None
    out = []
    for entry in entries:
        if not is_nvidia_gpu(entry):
            continue
        try:
            real = entry.resolve(strict=True)
        except (OSError, RuntimeError, ValueError):
            real = entry
        group_type = None
        if (entry / "iommu_group").exists():
            group_type = (_read(entry / "iommu_group" / "type", 64) or "").strip() or None
        out.append(
            PciGpu(
                pci_bus_id=entry.name,
                driver=_link_name(entry / "driver") if (entry / "driver").exists() else None,
                numa_node=_int(_read(entry / "numa_node", 64)),
                iommu_group_type=group_type,
                bridges=bridges_above(real),
            )
        )
    return tuple(out)
