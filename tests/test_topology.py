"""The TOPO- rules (gpudiag/core/topology*.py), table-driven over the fixture snapshots.

Each row: a fixture, what is changed in it (the reported case), the GPUs the launch
selects, and exactly the findings expected, as (code, severity). The healthy fixtures
give none; each reported machine gives its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from gpudiag.core.topology import link_label, nvlink_count, topology_findings
from gpudiag.core.visibility import resolve_checked
from gpudiag.model import Finding, Gpu, GpuPair, HostInfo, PciBridge, Snapshot

from .conftest import load_fixture

Change = Callable[[Snapshot], Snapshot]


def _gpus(change: Callable[[Gpu], dict[str, Any]]) -> Change:
    """Each GPU replaced with the fields ``change`` returns for it."""

    def apply(s: Snapshot) -> Snapshot:
        return dataclasses.replace(
            s, gpus=tuple(dataclasses.replace(g, **change(g)) for g in s.gpus)
        )

    return apply


def _host(**fields: Any) -> Change:
    def apply(s: Snapshot) -> Snapshot:
        assert s.host is not None
        return dataclasses.replace(s, host=dataclasses.replace(s.host, **fields))

    return apply


def _pairs(**fields: Any) -> Change:
    def apply(s: Snapshot) -> Snapshot:
        pairs = tuple(dataclasses.replace(p, **fields) for p in s.gpu_pairs or ())
        return dataclasses.replace(s, gpu_pairs=pairs)

    return apply


def _env(**env: str) -> Change:
    def apply(s: Snapshot) -> Snapshot:
        assert s.host is not None
        return _host(nvidia_env={**s.host.nvidia_env, **env})(s)

    return apply


def _group_type(kind: str | None) -> Change:
    def apply(s: Snapshot) -> Snapshot:
        assert s.host is not None and s.host.pci_gpus is not None
        gpus = tuple(dataclasses.replace(p, iommu_group_type=kind) for p in s.host.pci_gpus)
        return _host(pci_gpus=gpus)(s)

    return apply


def _acs(index: int, value: int | None) -> Change:
    """The nearest bridge above the GPU at ``index`` of host.pci_gpus gets ACS ``value``."""

    def apply(s: Snapshot) -> Snapshot:
        assert s.host is not None and s.host.pci_gpus is not None
        pci = list(s.host.pci_gpus)
        first, *rest = pci[index].bridges
        pci[index] = dataclasses.replace(pci[index], bridges=(PciBridge(first.bdf, value), *rest))
        return _host(pci_gpus=tuple(pci))(s)

    return apply


def _busy_gen(g: Gpu) -> dict[str, Any]:
    return {"pcie_link_gen_current": 3} if g.nvml_index == 3 else {}


def _links_down(g: Gpu) -> dict[str, Any]:
    return {"nvlinks": tuple(dataclasses.replace(n, active=False) for n in g.nvlinks or ())}


def _fabric(state: str, status: str | None) -> Change:
    return _gpus(lambda g: {"fabric_state": state, "fabric_status": status})


WARN, INFO, ERR = "warning", "info", "error"
ROWS: list[tuple[str, str, list[Change], str | None, int | None, list[tuple[str, str]]]] = [
    # -- healthy machines, every GPU and parts of them: nothing
    ("healthy DGX A100", "a100x8", [], None, None, []),
    ("healthy DGX A100, one NUMA node", "a100x8", [], "0,1", 2, []),
    ("healthy DGX A100, 4 GPUs on 4 nodes", "a100x8", [], "0,2,4,6", None, []),
    ("healthy DGX-1", "v100x8", [], None, 8, []),
    ("DGX-1, idle GPUs at Gen1 of Gen3", "v100x8", [], "0,1", None, []),
    ("an older snapshot: no facts, no finding", "mixed4", [], None, 4, []),
    # -- NUMA
    ("two nodes where one would do", "a100x8", [], "1,2", None, [("TOPO-NUMA-SPAN", INFO)]),
    ("DGX-1 across sockets over NVLink", "v100x8", [], "0,4", None, [("TOPO-NUMA-SPAN", INFO)]),
    # -- P2P
    (
        "DGX-1 across sockets without NVLink or P2P",
        "v100x8", [], "0,5", None, [("TOPO-P2P-UNSUPPORTED", INFO), ("TOPO-NUMA-SPAN", INFO)],
    ),
    (
        "4x RTX 4090, driver reporting P2P, IOMMU on, one card at x4",
        "rtx4090x4_iommu", [], None, None,
        [("TOPO-P2P-GEFORCE", WARN), ("TOPO-IOMMU", WARN), ("TOPO-PCIE-DEGRADED", WARN)],
    ),
    (
        "the two healthy cards of that box",
        "rtx4090x4_iommu", [], "0,1", None, [("TOPO-P2P-GEFORCE", WARN), ("TOPO-IOMMU", WARN)],
    ),
    ("one of them alone", "rtx4090x4_iommu", [], "0", None, []),
    (
        "a driver that reports no P2P there: NCCL uses SHM, the IOMMU does not matter",
        "rtx4090x4_iommu", [_pairs(p2p_read="CNS", p2p_write="CNS")], "0,1", None,
        [("TOPO-P2P-UNSUPPORTED", INFO)],
    ),
    # -- IOMMU
    (
        "iommu=pt", "rtx4090x4_iommu", [_host(kernel_iommu_args=("amd_iommu=on", "iommu=pt"))],
        "0,1", None, [("TOPO-P2P-GEFORCE", WARN)],
    ),
    (
        "identity domains", "rtx4090x4_iommu", [_group_type("identity")], "0,1", None,
        [("TOPO-P2P-GEFORCE", WARN)],
    ),
    (
        "an IOMMU whose group type is unknown", "rtx4090x4_iommu", [_host(pci_gpus=None)],
        "0,1", None, [("TOPO-P2P-GEFORCE", WARN), ("TOPO-IOMMU", INFO)],
    ),
    (
        "no IOMMU at all", "rtx4090x4_iommu",
        [_host(pci_gpus=None, iommu_devices=(), kernel_iommu_args=())], "0,1", None,
        [("TOPO-P2P-GEFORCE", WARN)],
    ),
    # -- ACS (DGX-1: GPUs 0 and 1 share a PCIe switch, PIX)
    ("ACS redirect on a switch port", "v100x8", [_acs(0, 0x1D)], "0,1", None,
     [("TOPO-ACS-REDIRECT", WARN)]),
    ("ACS on, no redirect bit", "v100x8", [_acs(0, 0x11)], "0,1", None, []),
    ("ACS unreadable (not root)", "v100x8", [_acs(0, None)], "0,1", None, []),
    ("ACS redirect, GPUs on different switches", "v100x8", [_acs(0, 0x1D)], "0,2", None, []),
    # -- NVLink
    ("two links of GPU 5 down", "a100x8_nvlink_down", [], None, None, [("TOPO-NVLINK-DOWN", WARN)]),
    ("GPU 5 not selected", "a100x8_nvlink_down", [], "0,1", None, []),
    ("an SXM GPU with every link down", "a100x8", [_gpus(_links_down)], "0", None,
     [("TOPO-NVLINK-DOWN", WARN)]),
    ("PCIe cards without a bridge: links inactive",
     "rtx4090x4_iommu", [_gpus(lambda g: {"nvlinks": ()})], "0", None, []),
    # -- fabric
    ("fabric manager not started", "a100x8", [_fabric("Not Started", None)], "0,1", None,
     [("TOPO-FABRIC-NOT-READY", ERR)]),
    ("fabric registration under way", "a100x8", [_fabric("In Progress", None)], "0,1", None,
     [("TOPO-FABRIC-NOT-READY", WARN)]),
    ("fabric registration failed", "a100x8", [_fabric("Completed", "Timeout")], "0", None,
     [("TOPO-FABRIC-NOT-READY", ERR)]),
    ("fabric ready", "a100x8", [_fabric("Completed", "Success")], None, None, []),
    ("no fabric on this GPU", "a100x8", [_fabric("Not Supported", None)], None, None, []),
    # -- PCIe generation: only under load
    ("Gen3 of Gen4 at 97 % load", "a100x8", [_gpus(_busy_gen)], "3", None,
     [("TOPO-PCIE-DEGRADED", WARN)]),
    ("Gen3 of Gen4 idle", "a100x8", [_gpus(_busy_gen), _gpus(
        lambda g: {"utilization_gpu_percent": 0})], "3", None, []),
    # -- the container
    (
        "Docker, 64 MiB /dev/shm, no nvidia-uvm, another container's process",
        "container_shm64", [], None, None,
        [("TOPO-P2P-UNSUPPORTED", INFO), ("TOPO-SHM-SMALL", WARN), ("TOPO-UVM-MISSING", ERR),
         ("TOPO-PCI-UNSEEN", INFO), ("TOPO-MEMORY-FOREIGN-PID", WARN)],
    ),
    (
        "one GPU of it: DataLoader workers only",
        "container_shm64", [], "0", None,
        [("TOPO-SHM-SMALL", INFO), ("TOPO-UVM-MISSING", ERR), ("TOPO-PCI-UNSEEN", INFO)],
    ),
    (
        "one GPU, two ranks asked", "container_shm64", [], "0", 2,
        [("TOPO-SHM-SMALL", WARN), ("TOPO-UVM-MISSING", ERR), ("TOPO-PCI-UNSEEN", INFO)],
    ),
    (
        "fixed: --shm-size=1g, nvidia-uvm passed, all GPUs given",
        "container_shm64",
        [_host(dev_shm_total_mib=1024, dev_nvidia=("nvidia-uvm", "nvidia0", "nvidia1"),
               nvidia_pci_gpus=2)],
        "0", 2, [],
    ),
    (
        "compute left out of the capabilities", "container_shm64",
        [_env(NVIDIA_DRIVER_CAPABILITIES="utility")], "0", None,
        [("TOPO-SHM-SMALL", INFO), ("TOPO-UVM-MISSING", ERR), ("TOPO-CONTAINER-CAPS", ERR),
         ("TOPO-PCI-UNSEEN", INFO)],
    ),
    (
        "capabilities all; NVIDIA_VISIBLE_DEVICES=all yet GPUs unseen", "container_shm64",
        [_env(NVIDIA_DRIVER_CAPABILITIES="all", NVIDIA_VISIBLE_DEVICES="all"),
         _host(dev_shm_total_mib=None, dev_nvidia=None)],
        "0", None, [("TOPO-PCI-UNSEEN", WARN)],
    ),
    (
        "not a container: no nvidia-uvm, a dead process's memory, two GPUs unseen",
        "container_shm64", [_host(container_marks=(), dev_shm_total_mib=None)], "1", None,
        [("TOPO-UVM-MISSING", INFO), ("TOPO-PCI-UNSEEN", WARN), ("TOPO-MEMORY-FOREIGN-PID", WARN)],
    ),
    (
        "the unseen GPUs are passed to VMs",
        "container_shm64",
        [_host(container_marks=(), dev_shm_total_mib=None, dev_nvidia=None), lambda s: _host(
            pci_gpus=tuple(
                dataclasses.replace(p, driver="vfio-pci") if i >= 2 else p
                for i, p in enumerate(s.host.pci_gpus or ())  # type: ignore[union-attr]
            ))(s)],
        "0", None, [("TOPO-PCI-UNSEEN", INFO)],
    ),
    (
        "a PID /proc hides (hidepid=2): unknown, said nothing",
        "container_shm64",
        [_gpus(lambda g: {"processes": tuple(
            dataclasses.replace(p, in_pid_namespace=None) for p in g.processes)}),
         _host(dev_shm_total_mib=None, dev_nvidia=None, nvidia_pci_gpus=None)],
        "1", None, [],
    ),
]  # fmt: skip


def _run(
    fixture: str, changes: list[Change], visible: str | None, nproc: int | None
) -> list[Finding]:
    snap = load_fixture(fixture)
    for change in changes:
        snap = change(snap)
    resolution = resolve_checked(
        visible if visible is not None else snap.cuda_visible_devices, None, snap, None
    )
    return topology_findings(snap, resolution, nproc_per_node=nproc)


@pytest.mark.parametrize(
    ("fixture", "changes", "visible", "nproc", "expected"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_topology_rules(
    fixture: str,
    changes: list[Change],
    visible: str | None,
    nproc: int | None,
    expected: list[tuple[str, str]],
) -> None:
    found = _run(fixture, changes, visible, nproc)
    assert [(f.code, f.severity) for f in found] == expected
    for f in found:
        assert f.message.endswith(".") and "None" not in f.message, f.message
        assert f.fix is None or f.fix.strip(), f.code


def test_messages_name_the_facts() -> None:
    by_code = {f.code: f for f in _run("rtx4090x4_iommu", [], None, None)}
    assert "525.60.13" in by_code["TOPO-P2P-GEFORCE"].message
    assert "NCCL_P2P_DISABLE=1" in (by_code["TOPO-P2P-GEFORCE"].fix or "")
    assert "DMA-FQ" in by_code["TOPO-IOMMU"].message
    assert "amd_iommu=on" in by_code["TOPO-IOMMU"].message
    assert "x4 Gen1" in by_code["TOPO-PCIE-DEGRADED"].message
    assert by_code["TOPO-PCIE-DEGRADED"].subject == "GPU-e8a07b19-61f2-4d0b-8c55-2f9d4a1b3c70"
    acs = _run("v100x8", [_acs(0, 0x1D)], "0,1", None)[0]
    assert "0000:04:08.0 (ACSCtl 0x001d)" in acs.message
    down = _run("a100x8_nvlink_down", [], None, None)[0]
    assert "GPU 5 has 2 of 12 NVLink links down (links 4 and 5)" in down.message
    fabric = _run("a100x8", [_fabric("Not Started", None)], "0", None)[0]
    assert fabric.predicts is not None and "Error 802: system not yet initialized" in (
        fabric.predicts
    )
    container = {f.code: f for f in _run("container_shm64", [], None, None)}
    assert "64 MiB (Docker's default)" in container["TOPO-SHM-SMALL"].message
    assert container["TOPO-SHM-SMALL"].predicts is not None
    assert "/dev/shm/nccl-" in container["TOPO-SHM-SMALL"].predicts
    assert "pid 3721 holds 9200 MiB" in container["TOPO-MEMORY-FOREIGN-PID"].message
    assert "CUDA unknown error" in (container["TOPO-UVM-MISSING"].predicts or "")
    assert "NVIDIA_VISIBLE_DEVICES=0,1" in container["TOPO-PCI-UNSEEN"].message
    gone = _run("container_shm64", [_host(container_marks=())], "1", None)
    holder = next(f for f in gone if f.code == "TOPO-MEMORY-FOREIGN-PID")
    assert "no such process exists any more" in holder.message
    assert "nvidia-smi -r -i 1" in (holder.fix or "")


@pytest.mark.parametrize(
    ("fixture", "a", "b", "label", "links"),
    [
        ("a100x8", 0, 5, "NV12", 12),  # through six NVSwitches
        ("a100x8_nvlink_down", 0, 5, "NV10", 10),
        ("v100x8", 0, 3, "NV2", 2),  # direct links
        ("v100x8", 0, 1, "NV1", 1),
        ("v100x8", 0, 5, "SYS", 0),
        ("v100x8", 2, 2, "X", 0),
        ("rtx4090x4_iommu", 1, 2, "NODE", 0),
        ("mixed4", 0, 1, "?", 0),  # not collected
    ],
)
def test_link_labels_as_nvidia_smi_topo_m(
    fixture: str, a: int, b: int, label: str, links: int
) -> None:
    snap = load_fixture(fixture)
    ga, gb = snap.gpus[a], snap.gpus[b]
    assert link_label(snap, ga, gb) == label
    assert link_label(snap, gb, ga) == label
    assert nvlink_count(ga, gb) == (links if a != b else nvlink_count(ga, gb))


def test_every_topology_code_is_emitted_by_some_row() -> None:
    from gpudiag.findings.catalog import codes_in

    from . import test_topology_memory, test_topology_shm

    emitted = {
        (f.code, f.severity)
        for _, fixture, changes, visible, nproc, _ in ROWS
        for f in _run(fixture, changes, visible, nproc)
    }
    # The memory holders' and /dev/shm's own tables (issue 18).
    emitted |= test_topology_memory.emitted() | test_topology_shm.emitted()
    for info in codes_in("topology"):
        for severity in info.severities:
            assert (info.code, severity) in emitted, (info.code, severity)


def test_pairs_and_host_are_optional() -> None:
    snap = dataclasses.replace(load_fixture("rtx4090x4_iommu"), gpu_pairs=None, host=None)
    resolution = resolve_checked(None, None, snap, None)
    # Without pairs the P2P rules cannot speak; the IOMMU needs the host: only PCIe stays.
    assert [f.code for f in topology_findings(snap, resolution)] == ["TOPO-PCIE-DEGRADED"]


def test_pairs_unknown_for_one_gpu() -> None:
    snap = load_fixture("v100x8")
    pairs = tuple(
        GpuPair(p.nvml_index_a, p.nvml_index_b, errors={"p2p_read": "Unknown Error"})
        if 5 in (p.nvml_index_a, p.nvml_index_b)
        else p
        for p in snap.gpu_pairs or ()
    )
    snap = dataclasses.replace(snap, gpu_pairs=pairs)
    resolution = resolve_checked("0,5", None, snap, None)
    # Unknown is not "unsupported": no P2P finding, only the NUMA placement.
    assert [f.code for f in topology_findings(snap, resolution)] == ["TOPO-NUMA-SPAN"]


def test_host_info_default_is_silent() -> None:
    snap = dataclasses.replace(load_fixture("a100x8"), host=HostInfo())
    resolution = resolve_checked(None, None, snap, None)
    assert topology_findings(snap, resolution) == []
