"""NVML's facts about the links around and between GPUs (schema 1.2, issue 18).

Per GPU: PCIe link generation and width (current and maximum), NUMA and CPU
affinity, NVLink link states and their far ends, and the NVSwitch fabric state.
Per pair of GPUs: their PCIe common ancestor and peer-to-peer status for reads,
writes and NVLink. Each is asked on its own: a failure leaves that field None
with NVML's reason (in ``Gpu.errors`` or ``GpuPair.errors``), never the others.

The calls and constants are nvidia-ml-py's (``pynvml``):
``nvmlDeviceGetCurrPcieLinkGeneration``, ``nvmlDeviceGetMaxPcieLinkGeneration``,
``nvmlDeviceGetCurrPcieLinkWidth``, ``nvmlDeviceGetMaxPcieLinkWidth``,
``nvmlDeviceGetMemoryAffinity`` and ``nvmlDeviceGetCpuAffinityWithinScope``
(``NVML_AFFINITY_SCOPE_NODE``), ``nvmlDeviceGetNvLinkState``,
``nvmlDeviceGetNvLinkRemotePciInfo``, ``nvmlDeviceGetNvLinkRemoteDeviceType``,
``nvmlDeviceGetGpuFabricInfoV`` (driver r550+, else ``nvmlDeviceGetGpuFabricInfo``),
``nvmlDeviceGetTopologyCommonAncestor`` and ``nvmlDeviceGetP2PStatus``.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from functools import partial
from typing import Any

from gpudiag.backends.nvml_fields import Fields, GpuLostError, as_text, error_text
from gpudiag.model import GpuPair, NvLink

#: Pairs are quadratic: above this many GPUs they are not asked (a node has 16 at most).
MAX_PAIR_GPUS = 64
#: Words of 64 bits in the CPU and NUMA-node masks NVML fills (1024+ CPUs, 128 nodes).
_CPU_WORDS = max(16, (os.cpu_count() or 0) // 64 + 2)
_NODE_WORDS = 2


def _const(value: Any) -> int:
    """A pynvml constant as an int. nvidia-ml-py 13.615 defines
    ``NVML_P2P_CAPS_INDEX_READ = 0,`` (a trailing comma: the tuple ``(0,)``), which
    ctypes would refuse as an argument."""
    if isinstance(value, tuple):
        value = value[0]
    return int(value)


def _topology_names(nvml: Any) -> dict[int, str]:
    return {
        _const(nvml.NVML_TOPOLOGY_INTERNAL): "BOARD",
        _const(nvml.NVML_TOPOLOGY_SINGLE): "PIX",
        _const(nvml.NVML_TOPOLOGY_MULTIPLE): "PXB",
        _const(nvml.NVML_TOPOLOGY_HOSTBRIDGE): "PHB",
        _const(nvml.NVML_TOPOLOGY_NODE): "NODE",
        _const(nvml.NVML_TOPOLOGY_SYSTEM): "SYS",
    }


def _p2p_names(nvml: Any) -> dict[int, str]:
    return {
        _const(nvml.NVML_P2P_STATUS_OK): "OK",
        _const(nvml.NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED): "CNS",
        _const(nvml.NVML_P2P_STATUS_GPU_NOT_SUPPORTED): "GNS",
        _const(nvml.NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED): "TNS",
        _const(nvml.NVML_P2P_STATUS_DISABLED_BY_REGKEY): "DIS",
        _const(nvml.NVML_P2P_STATUS_NOT_SUPPORTED): "NS",
        _const(nvml.NVML_P2P_STATUS_UNKNOWN): "U",
    }


def _fabric_states(nvml: Any) -> dict[int, str]:
    # Named as nvidia-smi -q prints "Fabric: State".
    return {
        _const(nvml.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED): "Not Supported",
        _const(nvml.NVML_GPU_FABRIC_STATE_NOT_STARTED): "Not Started",
        _const(nvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS): "In Progress",
        _const(nvml.NVML_GPU_FABRIC_STATE_COMPLETED): "Completed",
    }


def _remote_types(nvml: Any) -> dict[int, str]:
    return {
        _const(nvml.NVML_NVLINK_DEVICE_TYPE_GPU): "GPU",
        _const(nvml.NVML_NVLINK_DEVICE_TYPE_IBMNPU): "IBMNPU",
        _const(nvml.NVML_NVLINK_DEVICE_TYPE_SWITCH): "NVSwitch",
        _const(nvml.NVML_NVLINK_DEVICE_TYPE_UNKNOWN): "Unknown",
    }


def mask_bits(words: Sequence[int]) -> list[int]:
    """The set bits of a mask NVML returns as 64-bit words, lowest word first."""
    return [64 * i + bit for i, word in enumerate(words) for bit in range(64) if word >> bit & 1]


def cpu_list(cpus: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0-2,5"``: a CPU list as ``nvidia-smi topo -m`` and Linux print it."""
    parts: list[str] = []
    start = prev = None
    for cpu in sorted(cpus):
        if prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def collect_gpu_links(nvml: Any, h: Any, f: Fields, v: dict[str, Any]) -> None:
    """One GPU's link facts into ``v`` (its field values), reasons into ``f.errors``.

    Raises:
        GpuLostError: the GPU fell off the bus (the caller marks it lost).
    """
    v["pcie_link_gen_current"] = f.get(
        "pcie_link_gen_current", lambda: int(nvml.nvmlDeviceGetCurrPcieLinkGeneration(h))
    )
    v["pcie_link_gen_max"] = f.get(
        "pcie_link_gen_max", lambda: int(nvml.nvmlDeviceGetMaxPcieLinkGeneration(h))
    )
    v["pcie_link_width_current"] = f.get(
        "pcie_link_width_current", lambda: int(nvml.nvmlDeviceGetCurrPcieLinkWidth(h))
    )
    v["pcie_link_width_max"] = f.get(
        "pcie_link_width_max", lambda: int(nvml.nvmlDeviceGetMaxPcieLinkWidth(h))
    )
    scope = _const(nvml.NVML_AFFINITY_SCOPE_NODE)
    nodes = f.get("numa_affinity", lambda: nvml.nvmlDeviceGetMemoryAffinity(h, _NODE_WORDS, scope))
    v["numa_affinity"] = None if nodes is None else tuple(mask_bits(list(nodes)))
    cpus = f.get(
        "cpu_affinity", lambda: nvml.nvmlDeviceGetCpuAffinityWithinScope(h, _CPU_WORDS, scope)
    )
    v["cpu_affinity"] = None if cpus is None else cpu_list(mask_bits(list(cpus)))
    v["nvlinks"] = _nvlinks(nvml, h, f)
    fabric = f.get("fabric", partial(_fabric_info, nvml, h))
    if fabric is not None:
        state, status = fabric
        v["fabric_state"] = _fabric_states(nvml).get(state, f"Unknown({state})")
        if state == _const(nvml.NVML_GPU_FABRIC_STATE_COMPLETED):
            # The registration's outcome; before it completes nvidia-smi says N/A.
            v["fabric_status"] = "Success" if status == 0 else error_text(nvml.NVMLError(status))


def _fabric_info(nvml: Any, h: Any) -> tuple[int, int]:
    getter = getattr(nvml, "nvmlDeviceGetGpuFabricInfoV", None)
    if getter is not None:
        try:
            info = nvml.c_nvmlGpuFabricInfoV_t()
            getter(h, ctypes.byref(info))
            return int(info.state), int(info.status)
        except nvml.NVMLError_FunctionNotFound:
            pass  # a driver before r550: only the first version of the call
    info = nvml.c_nvmlGpuFabricInfo_t()
    nvml.nvmlDeviceGetGpuFabricInfo(h, ctypes.byref(info))
    return int(info.state), int(info.status)


def _nvlinks(nvml: Any, h: Any, f: Fields) -> tuple[NvLink, ...] | None:
    """Every NVLink link the GPU has; ``()`` when it has none, None when unreadable."""
    enabled = _const(nvml.NVML_FEATURE_ENABLED)
    remote_types = _remote_types(nvml)
    links: list[NvLink] = []
    for link in range(_const(nvml.NVML_NVLINK_MAX_LINKS)):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(h, link)
        except nvml.NVMLError_GpuIsLost:
            f.errors["nvlinks"] = "GPU is lost"
            raise GpuLostError() from None
        except nvml.NVMLError_InvalidArgument:
            break  # past the GPU's last link
        except nvml.NVMLError_NotSupported:
            continue  # no such link on this GPU (every index, on a GPU without NVLink)
        except nvml.NVMLError as exc:
            # Half a list would read as links that are down: say nothing instead.
            f.errors["nvlinks"] = f"link {link}: {error_text(exc)}"
            return None
        active = _const(state) == enabled
        remote = kind = None
        if active:
            pci = f.get(
                f"nvlinks[{link}].remote_pci_bus_id",
                partial(nvml.nvmlDeviceGetNvLinkRemotePciInfo, h, link),
            )
            remote = None if pci is None else as_text(pci.busId)
            raw = f.get(
                f"nvlinks[{link}].remote_device_type",
                partial(nvml.nvmlDeviceGetNvLinkRemoteDeviceType, h, link),
            )
            kind = None if raw is None else remote_types.get(_const(raw), "Unknown")
        links.append(NvLink(link, active, remote, kind))
    return tuple(links)


def collect_pairs(nvml: Any, indices: Sequence[int]) -> tuple[GpuPair, ...] | None:
    """NVML's answers for each pair of the GPUs at ``indices`` (lost ones left out).

    None when there are more than :data:`MAX_PAIR_GPUS` GPUs (not asked).
    """
    if len(indices) > MAX_PAIR_GPUS:
        return None
    handles: dict[int, Any] = {}
    failed: dict[int, str] = {}
    for i in indices:
        try:
            handles[i] = nvml.nvmlDeviceGetHandleByIndex(i)
        except nvml.NVMLError as exc:
            failed[i] = error_text(exc)
    topology = _topology_names(nvml)
    p2p = _p2p_names(nvml)
    caps = (
        ("p2p_read", _const(nvml.NVML_P2P_CAPS_INDEX_READ)),
        ("p2p_write", _const(nvml.NVML_P2P_CAPS_INDEX_WRITE)),
        ("p2p_nvlink", _const(nvml.NVML_P2P_CAPS_INDEX_NVLINK)),
    )
    pairs = []
    ordered = sorted(indices)
    for n, a in enumerate(ordered):
        for b in ordered[n + 1 :]:
            values: dict[str, str | None] = {}
            f = Fields(nvml)
            if a in failed or b in failed:
                f.errors["handle"] = failed.get(a) or failed[b]
            else:
                _ask_pair(f, values, handles[a], handles[b], topology, p2p, caps)
            pairs.append(GpuPair(nvml_index_a=a, nvml_index_b=b, errors=f.errors, **values))
    return tuple(pairs)


def _ask_pair(
    f: Fields,
    values: dict[str, str | None],
    ha: Any,
    hb: Any,
    topology: dict[int, str],
    p2p: dict[int, str],
    caps: tuple[tuple[str, int], ...],
) -> None:
    nvml = f.nvml
    try:
        level = f.get("topology", partial(nvml.nvmlDeviceGetTopologyCommonAncestor, ha, hb))
        values["topology"] = _named(f, "topology", level, topology)
        for name, index in caps:
            status = f.get(name, partial(nvml.nvmlDeviceGetP2PStatus, ha, hb, index))
            values[name] = _named(f, name, status, p2p)
    except GpuLostError:
        pass  # the GPU's own record says it is lost; this pair keeps what was read


def _named(f: Fields, field: str, raw: object, names: dict[int, str]) -> str | None:
    if raw is None:
        return None
    name = names.get(_const(raw))
    if name is None:
        f.errors[field] = f"unknown value {raw!r}"
    return name
