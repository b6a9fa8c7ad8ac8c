"""JSON → model for schema 1.2's links (issue 18): NVLink links, GPU pairs, PCI paths.

Each is optional: a field a snapshot lacks reads as None ("not collected"). Values
are checked against their closed sets (``docs/snapshot.md``) where the rules read
them, so a typo is one line naming the field, not a silent "unknown".
"""

from __future__ import annotations

from typing import Any

from gpudiag.links import P2P_STATUSES, TOPOLOGY_LEVELS, GpuPair, NvLink, PciBridge, PciGpu
from gpudiag.snapshot.fields import SnapshotError, _list, _obj, _opt, _req, _type_name

#: ``nvmlDeviceGetNvLinkRemoteDeviceType`` names, as the backend writes them.
REMOTE_DEVICE_TYPES = ("GPU", "IBMNPU", "NVSwitch", "Unknown")


def _one_of(value: str | None, allowed: tuple[str, ...], where: str) -> str | None:
    if value is not None and value not in allowed:
        raise SnapshotError(f"{where} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def _errors(d: Any, where: str) -> dict[str, str]:
    errors = _opt(d, "errors", dict, where) or {}
    return {str(k): str(v) for k, v in errors.items()}


def int_list(d: Any, key: str, where: str) -> tuple[int, ...] | None:
    """A list of non-negative integers, or None when absent/null."""
    value = d.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        type(v) is int and v >= 0
        for v in value  # bool is not an int here
    ):
        raise SnapshotError(f"{where}.{key} must be a list of non-negative integers or null")
    return tuple(value)


def nvlinks_from_json(d: Any, where: str) -> tuple[NvLink, ...] | None:
    """A GPU's ``nvlinks`` (absent or null: not collected; ``[]``: no NVLink)."""
    raw = d.get("nvlinks")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise SnapshotError(f"{where}.nvlinks must be a list or null, not {_type_name(raw)}")
    out = []
    for i, item in enumerate(raw):
        w = f"{where}.nvlinks[{i}]"
        link = _obj(item, w)
        out.append(
            NvLink(
                link=_req(link, "link", int, w),
                active=_req(link, "active", bool, w),
                remote_pci_bus_id=_opt(link, "remote_pci_bus_id", str, w),
                remote_device_type=_one_of(
                    _opt(link, "remote_device_type", str, w),
                    REMOTE_DEVICE_TYPES,
                    f"{w}.remote_device_type",
                ),
            )
        )
    return tuple(out)


def pairs_from_json(raw: object, gpu_indices: set[int]) -> tuple[GpuPair, ...] | None:
    """The snapshot's ``gpu_pairs`` (absent or null: not collected)."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise SnapshotError(f"gpu_pairs must be a list or null, not {_type_name(raw)}")
    out = []
    seen: set[tuple[int, int]] = set()
    for i, item in enumerate(raw):
        w = f"gpu_pairs[{i}]"
        d = _obj(item, w)
        a = _req(d, "nvml_index_a", int, w)
        b = _req(d, "nvml_index_b", int, w)
        if not a < b:
            raise SnapshotError(f"{w}: nvml_index_a must be below nvml_index_b")
        if a not in gpu_indices or b not in gpu_indices:
            raise SnapshotError(f"{w} names a GPU that gpus[] does not list")
        if (a, b) in seen:
            raise SnapshotError(f"{w} repeats the pair ({a}, {b})")
        seen.add((a, b))
        out.append(
            GpuPair(
                nvml_index_a=a,
                nvml_index_b=b,
                topology=_one_of(_opt(d, "topology", str, w), TOPOLOGY_LEVELS, f"{w}.topology"),
                p2p_read=_one_of(_opt(d, "p2p_read", str, w), P2P_STATUSES, f"{w}.p2p_read"),
                p2p_write=_one_of(_opt(d, "p2p_write", str, w), P2P_STATUSES, f"{w}.p2p_write"),
                p2p_nvlink=_one_of(_opt(d, "p2p_nvlink", str, w), P2P_STATUSES, f"{w}.p2p_nvlink"),
                errors=_errors(d, w),
            )
        )
    return tuple(out)


def pci_gpus_from_json(d: Any, where: str) -> tuple[PciGpu, ...] | None:
    """The host's ``pci_gpus`` (absent or null: not collected)."""
    raw = d.get("pci_gpus")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise SnapshotError(f"{where}.pci_gpus must be a list or null, not {_type_name(raw)}")
    out = []
    for i, item in enumerate(raw):
        w = f"{where}.pci_gpus[{i}]"
        g = _obj(item, w)
        numa = _opt(g, "numa_node", int, w)
        if numa is not None and numa < -1:
            raise SnapshotError(f"{w}.numa_node must be -1 or more, got {numa}")
        bridges = []
        for j, b in enumerate(_list(g, "bridges", w)):
            wb = f"{w}.bridges[{j}]"
            bd = _obj(b, wb)
            acs = _opt(bd, "acs_ctl", int, wb)
            if acs is not None and not 0 <= acs <= 0xFFFF:
                raise SnapshotError(f"{wb}.acs_ctl must be a 16-bit register value, got {acs}")
            bridges.append(PciBridge(bdf=_req(bd, "bdf", str, wb), acs_ctl=acs))
        out.append(
            PciGpu(
                pci_bus_id=_req(g, "pci_bus_id", str, w),
                driver=_opt(g, "driver", str, w),
                numa_node=numa,
                iommu_group_type=_opt(g, "iommu_group_type", str, w),
                bridges=tuple(bridges),
            )
        )
    return tuple(out)
