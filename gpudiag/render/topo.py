"""``gpudiag topo`` output: the GPU matrix as ``nvidia-smi topo -m`` shows it, or its JSON.

The matrix's cells are nvidia-smi's (``X``, ``NV#``, ``PIX``, ``PXB``, ``PHB``,
``NODE``, ``SYS``), the GPUs the launch selects are marked ``*`` with their
``cuda:N``; the P2P matrix, each GPU's PCIe, NVLink, fabric and IOMMU facts, the
host's line and the TOPO- findings follow. Eight GPUs fit 100 columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudiag.core.topology import ACS_REDIRECT_BITS, link_label, pair_of, pci_function
from gpudiag.model import Finding, Gpu, Resolution, Snapshot
from gpudiag.render.findings import render_findings, sort_findings
from gpudiag.render.table import format_table
from gpudiag.render.text import PLAIN, Style, esc, wrap
from gpudiag.snapshot.write import gpu_to_json, pair_to_json

#: Version of the ``gpudiag topo --json`` document (docs/cli.md).
TOPO_SCHEMA = "gpudiag-topo/1"

LEGEND = (
    "Legend: X = self; NV# = joined by # NVLink links; PIX = at most one PCIe bridge; PXB = "
    "several PCIe bridges, no host bridge; PHB = a PCIe host bridge; NODE = host bridges "
    "within one NUMA node; SYS = across NUMA nodes; BOARD = one board; ? = not recorded."
)
P2P_LEGEND = (
    "P2P (nvidia-smi topo -p2p r / w; one value when read and write agree): OK; CNS = chipset, "
    "GNS = GPU, TNS = topology not supported; NS = not supported; DIS = disabled by a "
    "driver registry key; U = unknown."
)
#: The longest CPU list shown whole in the matrix.
_AFFINITY_CHARS = 20


def _ordinals(resolution: Resolution) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for dev in resolution.devices:
        out.setdefault(dev.nvml_index, []).append(dev.cuda_ordinal)
    return out


def _label(gpu: Gpu, ordinals: dict[int, list[int]]) -> str:
    return f"GPU{gpu.nvml_index}" + ("*" if gpu.nvml_index in ordinals else "")


def _p2p_cell(snapshot: Snapshot, a: Gpu, b: Gpu) -> str:
    if a.nvml_index == b.nvml_index:
        return "X"
    pair = pair_of(snapshot, a.nvml_index, b.nvml_index)
    if pair is None:
        return "?"
    read, write = pair.p2p_read or "?", pair.p2p_write or "?"
    return read if read == write else f"{read}/{write}"


def _numa(gpu: Gpu) -> str:
    if gpu.numa_affinity is None:
        return "n/a"
    return ",".join(str(n) for n in gpu.numa_affinity) or "n/a"


def _pcie(gpu: Gpu) -> str:
    def link(gen: int | None, width: int | None) -> str:
        return f"Gen{gen if gen is not None else '?'} x{width if width is not None else '?'}"

    if gpu.pcie_link_gen_current is None and gpu.pcie_link_width_current is None:
        return "n/a"
    return (
        f"{link(gpu.pcie_link_gen_current, gpu.pcie_link_width_current)} of "
        f"{link(gpu.pcie_link_gen_max, gpu.pcie_link_width_max)}"
    )


def _nvlink(gpu: Gpu) -> str:
    if gpu.nvlinks is None:
        return "n/a"
    if not gpu.nvlinks:
        return "none"
    up = sum(1 for n in gpu.nvlinks if n.active)
    return f"{up} of {len(gpu.nvlinks)} up"


def _acs(snapshot: Snapshot, gpu: Gpu) -> str:
    function = pci_function(snapshot, gpu)
    if function is None or not function.bridges:
        return "n/a"
    values = [b.acs_ctl for b in function.bridges]
    if any(v is None for v in values):
        return "unread"  # Linux shows a bridge's ACS registers to root only
    return "redirect" if any(v & ACS_REDIRECT_BITS for v in values if v is not None) else "off"


#: nvidia-smi draws every GPU; a snapshot may hold thousands (issue 21: bound every size).
MAX_MATRIX_GPUS = 64


def _matrix(snapshot: Snapshot, gpus: Sequence[Gpu], ordinals: dict[int, list[int]]) -> str:
    heads = ["", *(f"GPU{g.nvml_index}" for g in gpus), "CPU Affinity", "NUMA", "cuda"]
    rows = []
    for a in gpus:
        cpus = "n/a" if a.cpu_affinity is None else esc(a.cpu_affinity, _AFFINITY_CHARS)
        cuda = ",".join(str(o) for o in ordinals.get(a.nvml_index, ()))
        cells = [link_label(snapshot, a, b) for b in gpus]
        rows.append([_label(a, ordinals), *cells, cpus, _numa(a), cuda])
    return format_table(heads, rows)


def _p2p_matrix(snapshot: Snapshot, gpus: Sequence[Gpu], ordinals: dict[int, list[int]]) -> str:
    heads = ["", *(f"GPU{g.nvml_index}" for g in gpus)]
    rows = [[_label(a, ordinals), *(_p2p_cell(snapshot, a, b) for b in gpus)] for a in gpus]
    return format_table(heads, rows)


def _links_table(snapshot: Snapshot, gpus: Sequence[Gpu], ordinals: dict[int, list[int]]) -> str:
    heads = ["GPU", "Name", "PCIe now of max", "NVLink", "Fabric", "IOMMU", "ACS above"]
    rows = []
    for g in gpus:
        function = pci_function(snapshot, g)
        iommu = "n/a" if function is None else function.iommu_group_type or "none"
        name = (g.name or "n/a").removeprefix("NVIDIA ")
        fabric = {None: "n/a", "Not Supported": "none"}.get(g.fabric_state, g.fabric_state)
        rows.append(
            [
                _label(g, ordinals),
                esc(name, 24),
                _pcie(g),
                _nvlink(g),
                esc(fabric or "n/a", 11),
                esc(iommu, 10),
                _acs(snapshot, g),
            ]
        )
    return format_table(heads, rows)


def _host_line(snapshot: Snapshot) -> str | None:
    host = snapshot.host
    if host is None:
        return None
    parts = []
    if host.iommu_devices is not None:
        args = " ".join(host.kernel_iommu_args or ()) or "no IOMMU arguments"
        parts.append(
            f"IOMMU {', '.join(host.iommu_devices)} ({args})" if host.iommu_devices else "no IOMMU"
        )
    if host.dev_shm_total_mib is not None:
        parts.append(f"/dev/shm {host.dev_shm_total_mib} MiB")
    if host.dev_nvidia is not None:
        parts.append(
            "/dev/nvidia-uvm present" if "nvidia-uvm" in host.dev_nvidia else "no /dev/nvidia-uvm"
        )
    if host.container_marks:
        parts.append(f"container ({', '.join(host.container_marks)})")
    return esc("Host: " + "; ".join(parts) + ".", 400) if parts else None


def _selection(resolution: Resolution) -> str:
    spec = resolution.spec
    where = "CUDA_VISIBLE_DEVICES unset" if spec is None else f"CUDA_VISIBLE_DEVICES={spec!r}"
    if not resolution.devices:
        return f"No GPU is selected ({esc(where)})."
    mapping = ", ".join(f"cuda:{d.cuda_ordinal} = GPU {d.nvml_index}" for d in resolution.devices)
    return f"* selected ({esc(where)}, {resolution.order}): {mapping}."


def render_topo(
    snapshot: Snapshot,
    resolution: Resolution,
    findings: Sequence[Finding],
    *,
    source: str,
    style: Style = PLAIN,
) -> str:
    """The human output of ``gpudiag topo``, fitted to ``style.width``."""
    width = style.width
    gpus = [g for g in snapshot.gpus if not g.lost]
    ordinals = _ordinals(resolution)
    head = f"GPU topology of {esc(snapshot.hostname or 'an unnamed host')} ({source})"
    if snapshot.driver_version:
        head += f", driver {esc(snapshot.driver_version)}"
    out = wrap(head + ".", width)
    if not gpus:
        out += wrap("No GPUs: nothing to show (gpudiag list says why).", width)
    elif len(gpus) > MAX_MATRIX_GPUS:
        # A matrix costs GPUs² cells (a 1,500-GPU snapshot took 43 s; the fuzz of
        # issue 21) and is unreadable long before that: the pairs stay in --json.
        omitted = wrap(
            f"{len(gpus)} GPUs: the matrices are drawn for at most {MAX_MATRIX_GPUS} "
            "(gpudiag topo --json has every recorded pair).",
            width,
        )
        out += ["", *omitted]
        out += wrap(_selection(resolution), width)
    else:
        out += ["", _matrix(snapshot, gpus, ordinals), ""]
        out += wrap(_selection(resolution), width)
        out += wrap(LEGEND, width)
        if snapshot.gpu_pairs is None and all(g.nvlinks is None for g in gpus):
            out += wrap(
                "This snapshot records no links between GPUs (written before schema 1.2, "
                "or without a driver): capture it again with gpudiag snapshot.",
                width,
            )
        if snapshot.gpu_pairs is not None:
            out += ["", "Peer-to-peer, read/write:", _p2p_matrix(snapshot, gpus, ordinals), ""]
            out += wrap(P2P_LEGEND, width)
        out += ["", "Each GPU's links:", _links_table(snapshot, gpus, ordinals)]
    host = _host_line(snapshot)
    if host is not None:
        out += ["", *wrap(host, width)]
    text = render_findings(sort_findings(findings), style)
    counts = {s: sum(1 for f in findings if f.severity == s) for s in ("error", "warning", "info")}
    out += [""] + ([text, ""] if text else [])
    out.append(
        f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info "
        "about the links of the selected GPUs."
    )
    return "\n".join(out) + "\n"


def topo_to_json(
    snapshot: Snapshot, resolution: Resolution, findings: Sequence[Finding]
) -> dict[str, Any]:
    """The ``gpudiag topo --json`` document (docs/cli.md): the snapshot's own field names."""
    ordinals = _ordinals(resolution)
    by_index = {g.nvml_index: g for g in snapshot.gpus}
    gpus = []
    for gpu in snapshot.gpus:
        item = {
            key: value
            for key, value in gpu_to_json(gpu).items()
            if key
            in (
                "nvml_index", "uuid", "pci_bus_id", "name", "pcie_link_gen_current",
                "pcie_link_gen_max", "pcie_link_width_current", "pcie_link_width_max",
                "numa_affinity", "cpu_affinity", "nvlinks", "fabric_state", "fabric_status",
                "lost",
            )
        }  # fmt: skip
        function = pci_function(snapshot, gpu)
        item["pci"] = (
            None
            if function is None
            else {
                "pci_bus_id": function.pci_bus_id,
                "driver": function.driver,
                "numa_node": function.numa_node,
                "iommu_group_type": function.iommu_group_type,
                "bridges": [{"bdf": b.bdf, "acs_ctl": b.acs_ctl} for b in function.bridges],
            }
        )
        item["cuda_ordinals"] = ordinals.get(gpu.nvml_index, [])
        item["selected"] = gpu.nvml_index in ordinals
        gpus.append(item)
    pairs = None
    if snapshot.gpu_pairs is not None:
        pairs = []
        for pair in snapshot.gpu_pairs:
            doc = pair_to_json(pair)
            a, b = by_index.get(pair.nvml_index_a), by_index.get(pair.nvml_index_b)
            doc["link"] = None if a is None or b is None else link_label(snapshot, a, b)
            pairs.append(doc)
    host = snapshot.host
    return {
        "schema": TOPO_SCHEMA,
        "hostname": snapshot.hostname,
        "driver_version": snapshot.driver_version,
        "cuda_visible_devices": resolution.spec,
        "cuda_device_order": resolution.order,
        "visible": [d.to_json() for d in resolution.devices],
        "gpus": gpus,
        "gpu_pairs": pairs,
        "host": None
        if host is None
        else {
            "kernel_iommu_args": None
            if host.kernel_iommu_args is None
            else list(host.kernel_iommu_args),
            "iommu_devices": None if host.iommu_devices is None else list(host.iommu_devices),
            "dev_shm_total_mib": host.dev_shm_total_mib,
            "dev_nvidia": None if host.dev_nvidia is None else list(host.dev_nvidia),
            "nvidia_uvm_loaded": host.nvidia_uvm_loaded,
            "container_marks": None if host.container_marks is None else list(host.container_marks),
        },
        "findings": [f.to_json() for f in sort_findings(findings)],
    }
