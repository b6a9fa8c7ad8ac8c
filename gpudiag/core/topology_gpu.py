"""Each selected GPU's own links: NVLink, NVSwitch fabric, PCIe, NUMA placement (TOPO-).

Pure: functions of the GPUs a launch selects (:func:`gpudiag.core.topology_host.selected_gpus`)
and, for NUMA, the snapshot's other GPUs. Silent where a fact was not collected.

Sources (also in ``docs/findings.md``): NVML API reference: ``nvmlDeviceGetNvLinkState``,
``nvmlDeviceGetGpuFabricInfo`` (``NVML_GPU_FABRIC_STATE_*``; Hopper and later),
``nvmlDeviceGetMaxPcieLinkWidth`` ("the maximum PCIe link width possible with this
device and system"); NVIDIA Fabric Manager user guide: on NVSwitch systems CUDA
returns cudaErrorSystemNotReady (802, "system not yet initialized") until the fabric
manager has set the GPUs up, and its version must match the driver's; its degraded
modes take a GPU with failed links out. nvidia-smi ``-q`` "GPU Link Info": an idle GPU
lowers its PCIe generation to save power, so only a lower generation under load, or a
narrower link, is a fault. ``nvidia-smi topo -m``'s NUMA Affinity column.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudiag.core.describe import join_and
from gpudiag.findings.texts import SYSTEM_NOT_READY, unexpected_device_count
from gpudiag.model import Finding, Gpu, Snapshot

#: Utilisation above which a lower PCIe generation is not power saving.
BUSY_PERCENT = 50


def _gpu(index: int) -> str:
    return f"GPU {index}"


def nvlink_findings(gpus: Sequence[Gpu]) -> list[Finding]:
    """TOPO-NVLINK-DOWN: links down where the GPU or its peers have links up."""
    any_up = any(n.active for g in gpus for n in g.nvlinks or ())
    out = []
    for gpu in gpus:
        links = gpu.nvlinks or ()
        down = [n.link for n in links if not n.active]
        up = len(links) - len(down)
        sxm = "SXM" in (gpu.name or "")
        # All links down on a PCIe card whose peers have none up: no bridge fitted.
        if not down or (not up and not sxm and not any_up):
            continue
        out.append(
            Finding(
                code="TOPO-NVLINK-DOWN",
                severity="warning",
                message=f"{_gpu(gpu.nvml_index)} has {len(down)} of {len(links)} NVLink links "
                f"down (link{'s' if len(down) > 1 else ''} {join_and([str(d) for d in down])}): "
                "its traffic to the other GPUs runs on the links left "
                f"({up}), or over PCIe when none is; on an NVSwitch system the fabric "
                "manager's degraded-mode policy may take the GPU out.",
                fix=f"Confirm with nvidia-smi nvlink -s -i {gpu.nvml_index} and dmesg (Xid "
                "errors); report it to the admins; until fixed leave the GPU out "
                "(CUDA_VISIBLE_DEVICES).",
                subject=gpu.uuid,
            )
        )
    return out


def fabric_findings(gpus: Sequence[Gpu]) -> list[Finding]:
    """TOPO-FABRIC-NOT-READY: an NVSwitch system's GPUs not yet registered to the fabric."""
    waiting = [g for g in gpus if g.fabric_state in ("Not Started", "In Progress")]
    failed = [
        g
        for g in gpus
        if g.fabric_state == "Completed" and g.fabric_status not in (None, "Success")
    ]
    if not waiting and not failed:
        return []
    bad = waiting + failed
    states = "; ".join(
        f"GPU {g.nvml_index}: {g.fabric_state}"
        + (f", status {g.fabric_status}" if g in failed else "")
        for g in bad
    )
    started = not failed and all(g.fabric_state == "In Progress" for g in waiting)
    return [
        Finding(
            code="TOPO-FABRIC-NOT-READY",
            severity="warning" if started else "error",
            message=f"The NVSwitch fabric has not set these GPUs up ({states}): until the "
            "fabric manager completes, every CUDA program on them fails at start"
            + (" (registration is under way: it may finish shortly)." if started else "."),
            fix="Start the fabric manager at the driver's exact version (systemctl status "
            "nvidia-fabricmanager; its version must equal the driver's), then check "
            "nvidia-smi -q | grep -A2 Fabric shows State Completed, Status Success.",
            predicts=unexpected_device_count(802, SYSTEM_NOT_READY),
        )
    ]


def pcie_findings(gpus: Sequence[Gpu]) -> list[Finding]:
    """TOPO-PCIE-DEGRADED: fewer lanes than the slot allows, or a lower generation under load."""
    out = []
    for g in gpus:
        width, width_max = g.pcie_link_width_current, g.pcie_link_width_max
        gen, gen_max = g.pcie_link_gen_current, g.pcie_link_gen_max
        narrow = width is not None and width_max is not None and width < width_max
        busy = (g.utilization_gpu_percent or 0) >= BUSY_PERCENT
        slow = gen is not None and gen_max is not None and gen < gen_max and busy
        if not narrow and not slow:
            continue
        now = f"x{width} Gen{gen}" if width is not None and gen is not None else "?"
        top = f"x{width_max} Gen{gen_max}" if width_max and gen_max else "?"
        why = []
        if narrow:
            why.append(f"{width} of {width_max} lanes")
        if slow:
            why.append(f"Gen{gen} of Gen{gen_max} at {g.utilization_gpu_percent} % load")
        out.append(
            Finding(
                code="TOPO-PCIE-DEGRADED",
                severity="warning",
                message=f"{_gpu(g.nvml_index)}'s PCIe link runs at {now} where the GPU and its "
                f"slot allow {top} ({join_and(why)}): copies between host and GPU (DataLoader "
                "batches, checkpoints) and P2P over PCIe run slower in proportion.",
                fix="Reseat the card; check the riser or cable and the slot's lane wiring "
                "(BIOS bifurcation); confirm under load with nvidia-smi -q -d PCI "
                "(GPU Link Info).",
                subject=g.uuid,
            )
        )
    return out


def numa_findings(snapshot: Snapshot, gpus: Sequence[Gpu]) -> list[Finding]:
    """TOPO-NUMA-SPAN: the selected GPUs span NUMA nodes though one node has enough GPUs."""
    if len(gpus) < 2 or any(not g.numa_affinity for g in gpus):
        return []
    node_of = {g.nvml_index: g.numa_affinity[0] for g in gpus if g.numa_affinity}
    if len(set(node_of.values())) < 2:
        return []
    per_node: dict[int, list[int]] = {}
    for g in snapshot.gpus:
        if g.numa_affinity and not g.lost:
            per_node.setdefault(g.numa_affinity[0], []).append(g.nvml_index)
    roomy = sorted(n for n, ids in per_node.items() if len(ids) >= len(gpus))
    if not roomy:
        return []  # the launch needs more GPUs than any node has: spanning is inherent
    node = roomy[0]
    placed = ", ".join(f"GPU {i} on node {n}" for i, n in node_of.items())
    return [
        Finding(
            code="TOPO-NUMA-SPAN",
            severity="info",
            message=f"The selected GPUs span NUMA nodes ({placed}), while node {node} alone has "
            f"GPUs {join_and([str(i) for i in per_node[node]])}: a rank whose CPU threads and "
            "host memory sit on the other node feeds its GPU across the socket link.",
            fix=f"Pick GPUs of one node (GPUs "
            f"{join_and([str(i) for i in per_node[node][: len(gpus)]])}: nvidia-smi topo -m, "
            "NUMA Affinity; name them by UUID, or by index with CUDA_DEVICE_ORDER=PCI_BUS_ID), "
            "or bind each rank to its GPU's node (numactl --cpunodebind=N --membind=N).",
        )
    ]
