"""Schema 1.2 (issue 18): the links between GPUs, read, written back, and refused when wrong.

Older snapshots still read, the new fields as None ("not collected").
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpudiag.model import GpuPair, NvLink, PciBridge, PciGpu, pci_bus_key
from gpudiag.snapshot import SnapshotError, load_snapshot, snapshot_from_json, snapshot_to_json

from .conftest import FIXTURES
from .test_snapshot import MINIMAL

GPU1 = {
    **MINIMAL["gpus"][0],
    "nvml_index": 1,
    "uuid": "GPU-3ceaaf30-8142-c8ea-91d9-3080f9b439fc",
    "pci_bus_id": "00000000:0F:00.0",
}
LINKS = {
    "pcie_link_gen_current": 1,
    "pcie_link_gen_max": 4,
    "pcie_link_width_current": 16,
    "pcie_link_width_max": 16,
    "numa_affinity": [3],
    "cpu_affinity": "48-63,176-191",
    "nvlinks": [
        {"link": 0, "active": True, "remote_pci_bus_id": "00000000:C4:00.0",
         "remote_device_type": "NVSwitch"},
        {"link": 1, "active": False, "remote_pci_bus_id": None, "remote_device_type": None},
    ],
    "fabric_state": "Completed",
    "fabric_status": "Success",
}  # fmt: skip
HOST = {
    "platform": "Linux",
    "kernel_iommu_args": ["amd_iommu=on", "iommu=pt"],
    "iommu_devices": ["ivhd0"],
    "dev_shm_total_mib": 64,
    "dev_shm_free_mib": 60,
    "nvidia_uvm_loaded": True,
    "pci_gpus": [
        {"pci_bus_id": "0000:07:00.0", "driver": "nvidia", "numa_node": -1,
         "iommu_group_type": "DMA-FQ",
         "bridges": [{"bdf": "0000:05:00.0", "acs_ctl": 0x1D}, {"bdf": "0000:00:01.1",
                                                                "acs_ctl": None}]},
    ],
}  # fmt: skip
PAIR = {
    "nvml_index_a": 0,
    "nvml_index_b": 1,
    "topology": "PXB",
    "p2p_read": "OK",
    "p2p_write": "CNS",
    "p2p_nvlink": "NS",
    "errors": {},
}


def _doc() -> dict[str, Any]:
    doc = copy.deepcopy(MINIMAL)
    doc["schema"] = "gpudiag-snapshot/1.2"
    doc["gpus"][0].update(copy.deepcopy(LINKS))
    doc["gpus"][0]["processes"] = [
        {"pid": 7, "used_memory_mib": 100, "name": "python", "in_pid_namespace": False}
    ]
    doc["gpus"].append(copy.deepcopy(GPU1))
    doc["host"] = copy.deepcopy(HOST)
    doc["gpu_pairs"] = [dict(PAIR)]
    return doc


def test_links_are_read() -> None:
    snap = snapshot_from_json(_doc())
    gpu = snap.gpus[0]
    assert (gpu.pcie_link_gen_current, gpu.pcie_link_gen_max) == (1, 4)
    assert (gpu.pcie_link_width_current, gpu.pcie_link_width_max) == (16, 16)
    assert gpu.numa_affinity == (3,) and gpu.cpu_affinity == "48-63,176-191"
    assert gpu.nvlinks == (
        NvLink(0, True, "00000000:C4:00.0", "NVSwitch"),
        NvLink(1, False, None, None),
    )
    assert (gpu.fabric_state, gpu.fabric_status) == ("Completed", "Success")
    assert gpu.processes[0].in_pid_namespace is False
    assert snap.gpu_pairs == (GpuPair(0, 1, "PXB", "OK", "CNS", "NS"),)
    host = snap.host
    assert host is not None
    assert host.kernel_iommu_args == ("amd_iommu=on", "iommu=pt")
    assert host.iommu_devices == ("ivhd0",)
    assert (host.dev_shm_total_mib, host.dev_shm_free_mib, host.nvidia_uvm_loaded) == (64, 60, True)
    assert host.pci_gpus == (
        PciGpu(
            "0000:07:00.0",
            "nvidia",
            -1,
            "DMA-FQ",
            (PciBridge("0000:05:00.0", 0x1D), PciBridge("0000:00:01.1", None)),
        ),
    )


def test_links_round_trip() -> None:
    snap = snapshot_from_json(_doc())
    out = snapshot_to_json(snap)
    assert out["gpu_pairs"] == [PAIR]
    assert {k: out["gpus"][0][k] for k in LINKS} == LINKS
    assert {k: out["host"][k] for k in HOST} == HOST
    assert snapshot_from_json(out) == snap


def test_older_snapshots_read_the_new_fields_as_not_collected() -> None:
    snap = snapshot_from_json(MINIMAL)
    gpu = snap.gpus[0]
    new = (
        "pcie_link_gen_current", "pcie_link_gen_max", "pcie_link_width_current",
        "pcie_link_width_max", "numa_affinity", "cpu_affinity", "nvlinks", "fabric_state",
        "fabric_status",
    )  # fmt: skip
    assert all(getattr(gpu, name) is None for name in new)
    assert snap.gpu_pairs is None
    old_host = snapshot_from_json(dict(MINIMAL, host={"platform": "Linux"})).host
    assert old_host is not None and old_host.pci_gpus is None
    assert old_host.dev_shm_total_mib is None and old_host.kernel_iommu_args is None
    # Written back, a 1.0 document keeps its schema and says null for what it lacks.
    out = snapshot_to_json(snap)
    assert out["schema"] == "gpudiag-snapshot/1" and out["gpu_pairs"] is None
    assert out["gpus"][0]["nvlinks"] is None


def _set(doc: dict[str, Any], path: str, value: object) -> None:
    keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
    target: Any = doc
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("gpus.0.pcie_link_width_current", -4,
         "gpus[0].pcie_link_width_current must not be negative, got -4"),
        ("gpus.0.pcie_link_gen_max", "4", "gpus[0].pcie_link_gen_max must be int, not str"),
        ("gpus.0.numa_affinity", [0, True],
         "gpus[0].numa_affinity must be a list of non-negative integers or null"),
        ("gpus.0.nvlinks", {"link": 0}, "gpus[0].nvlinks must be a list or null, not dict"),
        ("gpus.0.nvlinks.0.active", None, "gpus[0].nvlinks[0].active is required"),
        ("gpus.0.nvlinks.0.remote_device_type", "switch",
         "gpus[0].nvlinks[0].remote_device_type must be one of GPU, IBMNPU, NVSwitch, "
         "Unknown, not 'switch'"),
        ("gpus.0.processes.0.in_pid_namespace", "no",
         "gpus[0].processes[0].in_pid_namespace must be bool, not str"),
        ("gpu_pairs.0.topology", "NV12",
         "gpu_pairs[0].topology must be one of BOARD, PIX, PXB, PHB, NODE, SYS, not 'NV12'"),
        ("gpu_pairs.0.p2p_read", "ok",
         "gpu_pairs[0].p2p_read must be one of OK, CNS, GNS, TNS, DIS, NS, U, not 'ok'"),
        ("gpu_pairs.0.nvml_index_a", 1, "gpu_pairs[0]: nvml_index_a must be below nvml_index_b"),
        ("gpu_pairs.0.nvml_index_b", 9, "gpu_pairs[0] names a GPU that gpus[] does not list"),
        ("gpu_pairs", {}, "gpu_pairs must be a list or null, not dict"),
        ("host.dev_shm_total_mib", -1, "host.dev_shm_total_mib must not be negative, got -1"),
        ("host.kernel_iommu_args", "iommu=pt",
         "host.kernel_iommu_args must be a list of strings or null"),
        ("host.pci_gpus.0.numa_node", -2, "host.pci_gpus[0].numa_node must be -1 or more, got -2"),
        ("host.pci_gpus.0.bridges.0.acs_ctl", 0x10000,
         "host.pci_gpus[0].bridges[0].acs_ctl must be a 16-bit register value, got 65536"),
        ("host.pci_gpus.0.pci_bus_id", None, "host.pci_gpus[0].pci_bus_id is required"),
        ("host.nvidia_uvm_loaded", 1, "host.nvidia_uvm_loaded must be bool, not int"),
    ],
)  # fmt: skip
def test_bad_links_are_refused_in_one_line(path: str, value: object, message: str) -> None:
    doc = _doc()
    _set(doc, path, value)
    with pytest.raises(SnapshotError) as info:
        snapshot_from_json(doc)
    assert str(info.value) == message


def test_a_pair_listed_twice_is_refused() -> None:
    doc = _doc()
    doc["gpu_pairs"].append(dict(PAIR))
    with pytest.raises(SnapshotError, match=r"gpu_pairs\[1\] repeats the pair \(0, 1\)"):
        snapshot_from_json(doc)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("00000000:07:00.0", "0000:07:00.0"),
        ("0000:07:00.0", "0000:07:00.0"),
        ("0000:C4:00.0", "0000:c4:00.0"),
        ("07:00.0", "0000:07:00.0"),
        ("00010000:01:00.0", "10000:01:00.0"),
        ("GPU-1", None),
        ("zz:07:00.0", None),
        ("", None),
        (None, None),
    ],
)
def test_pci_bus_key_joins_nvml_and_sysfs_spellings(text: str | None, key: str | None) -> None:
    assert pci_bus_key(text) == key


def test_every_fixture_still_reads() -> None:
    for path in sorted(FIXTURES.glob("*.json")):
        assert load_snapshot(path).schema.startswith("gpudiag-snapshot/1")
