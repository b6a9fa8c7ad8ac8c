"""Between the GPUs a launch selects: P2P, IOMMU and ACS (TOPO-); the entry point.

Pure: functions of a :class:`Snapshot` (schema 1.2's links) and the
:class:`Resolution` (which physical GPUs the launch gets). Every rule is silent
when the facts it needs were not collected (an older snapshot, no root for ACS),
and its severity follows how certain the facts make the failure. The host's
side (``/dev/shm``, ``/dev/nvidia-uvm``, the container, memory holders) is
:mod:`gpudiag.core.topology_host`, each GPU's own links (NVLink, fabric, PCIe, NUMA)
:mod:`gpudiag.core.topology_gpu`; :func:`topology_findings` runs all three.

Sources, one per rule (also in ``docs/findings.md``):

* NCCL user guide, Environment Variables: ``NCCL_P2P_DISABLE`` "disables the peer to
  peer (P2P) transport, which uses CUDA direct access between GPUs, using NVLink or
  PCI"; ``NCCL_SHM_DISABLE``: SHM "is used between devices when peer-to-peer cannot
  happen, therefore, host memory is used".
* NCCL user guide, Troubleshooting, "PCI Access Control Services (ACS)": "IO
  virtualization (also known as VT-d or IOMMU) can interfere with GPU Direct by
  redirecting all PCI point-to-point traffic to the CPU root complex, causing a
  significant performance reduction or even a hang"; ACS on PCI switches must be off.
* NVIDIA/nccl-tests#117 ("all_reduce_perf hangs with multiple RTX 4090 GPUs",
  fixed by NCCL_P2P_DISABLE=1) and NVIDIA developer forum thread 237813 (4× RTX 4090
  on a Threadripper PRO 5975WX stuck at the start): GeForce RTX 40 GPUs have no
  supported peer-to-peer; drivers that reported it hung NCCL.
* PCI Express Base Specification, ACS Control Register: P2P Request Redirect,
  P2P Completion Redirect and P2P Egress Control send peer requests upstream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpudiag.core.describe import join_and
from gpudiag.core.topology_gpu import fabric_findings, numa_findings, nvlink_findings, pcie_findings
from gpudiag.core.topology_host import host_piece_findings, selected_gpus
from gpudiag.model import Finding, Gpu, GpuPair, PciGpu, Resolution, Snapshot, pci_bus_key

_P2P_NAMES = {
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "DIS": "disabled by a driver registry key",
    "NS": "not supported",
    "U": "unknown",
}
#: ACS Control bits that send peer traffic elsewhere (PCIe spec, ACS Control Register):
#: P2P Request Redirect (2), P2P Completion Redirect (3), P2P Egress Control (5).
ACS_REDIRECT_BITS = 0x4 | 0x8 | 0x20
_TRANSLATING = ("DMA", "DMA-FQ")
_PASSTHROUGH_ARGS = ("iommu=pt", "iommu.passthrough=1", "iommu.passthrough=on")


def topology_findings(
    snapshot: Snapshot,
    resolution: Resolution,
    *,
    nproc_per_node: int | None = None,
    num_workers: int | None = None,
    nccl_shm: bool = True,
) -> list[Finding]:
    """Every TOPO- finding for the GPUs ``resolution`` selects (run by ``check``).

    ``num_workers`` is the DataLoader's per rank, when the job says it; ``nccl_shm`` is
    False when NCCL will not use /dev/shm (:func:`nccl_uses_shm`)."""
    gpus = selected_gpus(snapshot, resolution)
    out: list[Finding] = []
    out += p2p_findings(snapshot, gpus)
    out += iommu_findings(snapshot, gpus)
    out += acs_findings(snapshot, gpus)
    out += nvlink_findings(gpus)
    out += fabric_findings(gpus)
    out += pcie_findings(gpus)
    out += numa_findings(snapshot, gpus)
    out += host_piece_findings(
        snapshot, gpus, nproc_per_node=nproc_per_node, num_workers=num_workers, nccl_shm=nccl_shm
    )
    return out


def nccl_uses_shm(snapshot: Snapshot, env: Mapping[str, str], backend: str | None) -> bool:
    """NCCL will put its segments in /dev/shm: the backend is not gloo, and
    ``NCCL_SHM_DISABLE`` (the launch's environment first, then the snapshot's recorded
    NCCL variables) is not a non-zero number (NCCL user guide, Environment Variables)."""
    if backend == "gloo":
        return False
    recorded = snapshot.node.nccl_env if snapshot.node is not None else {}
    value = env.get("NCCL_SHM_DISABLE", recorded.get("NCCL_SHM_DISABLE"))
    text = (value or "").strip()
    return not (text.lstrip("-").isdigit() and int(text) != 0)


# ----------------------------------------------------------------- pairs and links


def pairs_of(snapshot: Snapshot, gpus: Sequence[Gpu]) -> list[GpuPair]:
    """The recorded pairs among ``gpus`` (both ends selected)."""
    wanted = {g.nvml_index for g in gpus}
    return [
        p for p in snapshot.gpu_pairs or () if p.nvml_index_a in wanted and p.nvml_index_b in wanted
    ]


def p2p_ok(pair: GpuPair) -> bool | None:
    """NVML says the pair can read and write each other's memory (or over NVLink);
    None when it did not answer."""
    if pair.p2p_nvlink == "OK" or (pair.p2p_read == "OK" and pair.p2p_write == "OK"):
        return True
    if pair.p2p_read is None and pair.p2p_write is None and pair.p2p_nvlink is None:
        return None
    return False


def nvlink_count(a: Gpu, b: Gpu) -> int:
    """Active NVLink links joining two GPUs: direct links, or through NVSwitches
    (then the fewer of the two GPUs' active switch links, as nvidia-smi shows NV12)."""
    key_b = pci_bus_key(b.pci_bus_id)
    direct = sum(
        1 for n in a.nvlinks or () if n.active and pci_bus_key(n.remote_pci_bus_id) == key_b
    )
    if direct:
        return direct
    switch_a = sum(1 for n in a.nvlinks or () if n.active and n.remote_device_type == "NVSwitch")
    switch_b = sum(1 for n in b.nvlinks or () if n.active and n.remote_device_type == "NVSwitch")
    return min(switch_a, switch_b)


def link_label(snapshot: Snapshot, a: Gpu, b: Gpu) -> str:
    """``nvidia-smi topo -m``'s cell: ``X``, ``NV#``, the PCIe level, or ``?``."""
    if a.nvml_index == b.nvml_index:
        return "X"
    count = nvlink_count(a, b)
    if count:
        return f"NV{count}"
    pair = pair_of(snapshot, a.nvml_index, b.nvml_index)
    return "?" if pair is None else pair.topology or "?"


#: The last snapshot's pairs by (lower, higher) nvml_index: one index, not a scan of
#: every pair per cell (quadratic in pairs per matrix: the fuzz of issue 21). It holds
#: the pairs tuple itself, so identity cannot be mistaken.
_PAIR_INDEX: tuple[object, dict[tuple[int, int], GpuPair]] = ((), {})


def pair_of(snapshot: Snapshot, x: int, y: int) -> GpuPair | None:
    """The snapshot's recorded pair of GPUs ``x`` and ``y`` (nvml indices), or None."""
    global _PAIR_INDEX
    pairs = snapshot.gpu_pairs or ()
    if _PAIR_INDEX[0] is not pairs:
        index: dict[tuple[int, int], GpuPair] = {}
        for p in pairs:  # the first recorded wins, as a scan would find it
            index.setdefault((p.nvml_index_a, p.nvml_index_b), p)
        _PAIR_INDEX = (pairs, index)
    return _PAIR_INDEX[1].get((min(x, y), max(x, y)))


def _pair_text(pair: GpuPair) -> str:
    statuses = []
    for kind, value in (("read", pair.p2p_read), ("write", pair.p2p_write)):
        if value is not None and value != "OK":
            statuses.append(f"{kind} {value} ({_P2P_NAMES.get(value, value)})")
    said = "; ".join(statuses) or "no P2P"
    return f"GPU {pair.nvml_index_a} and GPU {pair.nvml_index_b}: {said}"


def p2p_findings(snapshot: Snapshot, gpus: Sequence[Gpu]) -> list[Finding]:
    """TOPO-P2P-UNSUPPORTED and TOPO-P2P-GEFORCE."""
    pairs = pairs_of(snapshot, gpus)
    if len(gpus) < 2 or not pairs:
        return []
    out: list[Finding] = []
    # Peer-to-peer islands: NCCL's rings stay on P2P while the P2P pairs connect all
    # selected GPUs (DGX-1: cross-socket pairs without NVLink have none); between
    # islands it goes through host memory.
    island = {g.nvml_index: g.nvml_index for g in gpus}

    def root(i: int) -> int:
        while island[i] != i:
            i = island[i]
        return i

    for pair in pairs:
        if p2p_ok(pair):
            island[root(pair.nvml_index_a)] = root(pair.nvml_index_b)
    cut = [p for p in pairs if p2p_ok(p) is False and root(p.nvml_index_a) != root(p.nvml_index_b)]
    if cut:
        out.append(
            Finding(
                code="TOPO-P2P-UNSUPPORTED",
                severity="info",
                message="NVML reports no peer-to-peer access between "
                + "; ".join(_pair_text(p) for p in cut)
                + ". NCCL then moves their data through host memory (its SHM transport) "
                "instead of GPU to GPU: collectives work, more slowly, and need room in "
                "/dev/shm.",
                fix="Nothing to do for correctness. For speed pick GPUs with P2P (nvidia-smi "
                "topo -p2p r shows OK), or NVLink-bridged ones; in a container give "
                "/dev/shm room (docker run --shm-size=1g).",
            )
        )
    geforce = [
        p
        for p in pairs
        if p.p2p_read == "OK"
        and p.p2p_write == "OK"
        and p.p2p_nvlink != "OK"
        and _is_geforce_40(snapshot, p.nvml_index_a)
        and _is_geforce_40(snapshot, p.nvml_index_b)
    ]
    if geforce:
        ids = sorted({i for p in geforce for i in (p.nvml_index_a, p.nvml_index_b)})
        out.append(
            Finding(
                code="TOPO-P2P-GEFORCE",
                severity="warning",
                message=f"The driver ({snapshot.driver_version or 'version unknown'}) reports "
                f"PCIe peer-to-peer between the GeForce RTX 40 GPUs "
                f"{join_and([str(i) for i in ids])}, which NVIDIA does not support on these "
                "cards: NCCL then uses it, and on such setups hangs at the first collective "
                "(no error; every rank waits), or copies between the GPUs return wrong data.",
                fix="export NCCL_P2P_DISABLE=1 for the job (NCCL then goes through host "
                "memory); update the driver to one that reports no P2P here (nvidia-smi topo "
                "-p2p r shows CNS/NS), and check the IOMMU.",
                subject="NCCL_P2P_DISABLE",
            )
        )
    return out


def _is_geforce_40(snapshot: Snapshot, index: int) -> bool:
    gpu = next((g for g in snapshot.gpus if g.nvml_index == index), None)
    return gpu is not None and "GeForce RTX 40" in (gpu.name or "")


# ----------------------------------------------------------------- IOMMU and ACS


def pci_function(snapshot: Snapshot, gpu: Gpu) -> PciGpu | None:
    """The host's sysfs record of a GPU, joined on its PCI address."""
    host = snapshot.host
    key = pci_bus_key(gpu.pci_bus_id)
    if host is None or host.pci_gpus is None or key is None:
        return None
    return next((p for p in host.pci_gpus if pci_bus_key(p.pci_bus_id) == key), None)


def _p2p_may_be_used(snapshot: Snapshot, gpus: Sequence[Gpu]) -> bool:
    """Some selected pair reports P2P, or NVML was not asked: NCCL may use it."""
    pairs = pairs_of(snapshot, gpus)
    return not pairs or any(p2p_ok(p) is not False for p in pairs)


def iommu_findings(snapshot: Snapshot, gpus: Sequence[Gpu]) -> list[Finding]:
    """TOPO-IOMMU: an IOMMU translating the selected GPUs' DMA while P2P is reported."""
    host = snapshot.host
    if host is None or len(gpus) < 2 or not _p2p_may_be_used(snapshot, gpus):
        return []
    args = host.kernel_iommu_args or ()
    if any(a in _PASSTHROUGH_ARGS for a in args):
        return []
    types = {g.nvml_index: _group_type(snapshot, g) for g in gpus}
    translated = sorted(i for i, t in types.items() if t in _TRANSLATING)
    known = any(t is not None for t in types.values())
    kernel = f"; kernel: {' '.join(args)}" if args else ""
    if translated:
        group = {types[i] for i in translated}
        return [
            Finding(
                code="TOPO-IOMMU",
                severity="warning",
                message=f"An IOMMU translates the DMA of GPUs "
                f"{join_and([str(i) for i in translated])} (IOMMU group type "
                f"{'/'.join(sorted(t for t in group if t))}{kernel}) while NVML reports "
                "peer-to-peer between the selected GPUs: P2P traffic is redirected through "
                "the CPU root complex, and NCCL can hang at the first collective or copies "
                "between GPUs return wrong data.",
                fix="Boot with iommu=pt (passthrough) or turn the IOMMU off (intel_iommu=off / "
                "amd_iommu=off, or VT-d/AMD-Vi in the BIOS); until then export "
                "NCCL_P2P_DISABLE=1.",
                subject="NCCL_P2P_DISABLE",
            )
        ]
    if not known and host.iommu_devices:
        return [
            Finding(
                code="TOPO-IOMMU",
                severity="info",
                message=f"The kernel drives an IOMMU ({', '.join(host.iommu_devices)}{kernel}) "
                "and boots without iommu=pt; gpudiag could not read the GPUs' IOMMU group "
                "type. If it translates their DMA, peer-to-peer between the selected GPUs is "
                "redirected through the CPU root complex and NCCL can hang.",
                fix="cat /sys/bus/pci/devices/<GPU>/iommu_group/type: identity is fine; DMA or "
                "DMA-FQ: boot with iommu=pt, or export NCCL_P2P_DISABLE=1.",
                subject="NCCL_P2P_DISABLE",
            )
        ]
    return []


def _group_type(snapshot: Snapshot, gpu: Gpu) -> str | None:
    function = pci_function(snapshot, gpu)
    return None if function is None else function.iommu_group_type


def acs_findings(snapshot: Snapshot, gpus: Sequence[Gpu]) -> list[Finding]:
    """TOPO-ACS-REDIRECT: ACS redirect bits on the switch ports between two selected GPUs."""
    by_index = {g.nvml_index: pci_function(snapshot, g) for g in gpus}
    hits: dict[str, int] = {}
    pairs = pairs_of(snapshot, gpus)
    for pair in pairs:
        if pair.topology not in ("PIX", "PXB", None) or p2p_ok(pair) is False:
            continue  # through the root complex anyway (PHB, NODE, SYS), or no P2P
        a, b = by_index.get(pair.nvml_index_a), by_index.get(pair.nvml_index_b)
        if a is None or b is None:
            continue
        above_a = {br.bdf: br for br in a.bridges}
        above_b = {br.bdf: br for br in b.bridges}
        # The ports below the two GPUs' lowest common bridge: where a switch routes
        # peer requests directly, unless ACS redirects them upstream.
        for bdf in set(above_a) ^ set(above_b):
            bridge = above_a.get(bdf) or above_b[bdf]
            if bridge.acs_ctl is not None and bridge.acs_ctl & ACS_REDIRECT_BITS:
                hits[bdf] = bridge.acs_ctl
    if not hits:
        return []
    ports = ", ".join(f"{bdf} (ACSCtl 0x{ctl:04x})" for bdf, ctl in sorted(hits.items()))
    return [
        Finding(
            code="TOPO-ACS-REDIRECT",
            severity="warning",
            message=f"PCIe Access Control Services redirect peer-to-peer requests on the switch "
            f"ports between the selected GPUs: {ports}. P2P that the switch would route "
            "directly goes up to the CPU root complex instead: much slower, and NCCL can hang.",
            fix="Disable ACS on those ports (in the BIOS, or after each boot with sudo setpci "
            "-s <port> ECAP_ACS+0x6.w=0000, as NCCL's troubleshooting guide shows); until then "
            "export NCCL_P2P_DISABLE=1.",
            subject="NCCL_P2P_DISABLE",
        )
    ]
