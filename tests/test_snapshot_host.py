"""Schema 1.1: host facts, torch's NCCL facts, and reading older 1.x snapshots."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

from gpudiag.backends.host import collect_host, container_marks, dev_nvidia_files, nvidia_pci_gpus
from gpudiag.model import SNAPSHOT_SCHEMA, HostInfo
from gpudiag.snapshot import (
    SnapshotError,
    schema_is_readable,
    snapshot_from_json,
    snapshot_to_json,
)

from .test_snapshot import MINIMAL

HOST = {
    "platform": "Linux",
    "machine": "x86_64",
    "dev_nvidia": [],
    "dev_dxg": False,
    "proc_driver_nvidia": False,
    "nvidia_pci_gpus": 8,
    "container_marks": ["/.dockerenv"],
    "nvidia_env": {"NVIDIA_VISIBLE_DEVICES": "all"},
}


@pytest.mark.parametrize(
    ("schema", "readable"),
    [
        ("gpudiag-snapshot/1", True),
        ("gpudiag-snapshot/1.1", True),
        ("gpudiag-snapshot/1.7", True),
        ("gpudiag-snapshot/1.", False),
        ("gpudiag-snapshot/1.x", False),
        ("gpudiag-snapshot/1.²", False),
        ("gpudiag-snapshot/2", False),
        ("gpudiag-snapshot/2.1", False),
        ("gpudiag-snapshot/11", False),
        (None, False),
        (1, False),
    ],
)
def test_any_minor_version_of_major_1_is_readable(schema: object, readable: bool) -> None:
    assert schema_is_readable(schema) is readable


def test_writer_uses_the_new_minor_version() -> None:
    assert SNAPSHOT_SCHEMA == "gpudiag-snapshot/1.4"


def test_old_snapshot_has_no_host_and_unknown_nccl() -> None:
    snap = snapshot_from_json(MINIMAL)
    assert snap.host is None
    doc = dict(MINIMAL, torch={"version": "2.4.1+cu124"})
    info = snapshot_from_json(doc).torch
    assert info is not None and info.nccl_available is None


def test_host_and_nccl_round_trip() -> None:
    doc = copy.deepcopy(MINIMAL)
    doc["schema"] = "gpudiag-snapshot/1.1"
    doc["host"] = HOST
    doc["torch"] = {
        "version": "2.13.0+cu126",
        "distributed_available": True,
        "nccl_available": False,
    }
    snap = snapshot_from_json(doc)
    assert snap.host == HostInfo(
        platform="Linux",
        machine="x86_64",
        dev_nvidia=(),
        dev_dxg=False,
        proc_driver_nvidia=False,
        nvidia_pci_gpus=8,
        container_marks=("/.dockerenv",),
        nvidia_env={"NVIDIA_VISIBLE_DEVICES": "all"},
    )
    assert snap.torch is not None and snap.torch.nccl_available is False
    out = snapshot_to_json(snap)
    # A 1.1 document's host, written back by 1.2: its keys, and 1.2's as null.
    assert {k: out["host"][k] for k in HOST} == HOST
    assert {k: v for k, v in out["host"].items() if k not in HOST} == dict.fromkeys(
        (
            "kernel_iommu_args",
            "iommu_devices",
            "dev_shm_total_mib",
            "dev_shm_free_mib",
            "nvidia_uvm_loaded",
            "pci_gpus",
        )
    )
    assert out["torch"]["nccl_available"] is False
    assert snapshot_from_json(out) == snap


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"dev_nvidia": "nvidia0"}, "host.dev_nvidia must be a list of strings or null"),
        ({"nvidia_pci_gpus": -1}, "host.nvidia_pci_gpus must not be negative, got -1"),
        ({"nvidia_pci_gpus": True}, "host.nvidia_pci_gpus must be int, not bool"),
        (
            {"nvidia_env": {"NVIDIA_VISIBLE_DEVICES": 1}},
            "host.nvidia_env.NVIDIA_VISIBLE_DEVICES must be a string",
        ),
        ({"container_marks": [1]}, "host.container_marks must be a list of strings or null"),
        ({"dev_dxg": "no"}, "host.dev_dxg must be bool, not str"),
    ],
)
def test_bad_host_facts_are_rejected(change: dict[str, object], message: str) -> None:
    doc = dict(MINIMAL, host=dict(HOST, **change))
    with pytest.raises(SnapshotError) as info:
        snapshot_from_json(doc)
    assert str(info.value) == message


def _tree(
    root: Path, *, dev: list[str], pci: list[tuple[str, str]], files: dict[str, bytes]
) -> None:
    (root / "dev").mkdir(parents=True)
    for name in dev:
        (root / "dev" / name).write_text("")
    base = root / "sys" / "bus" / "pci" / "devices"
    base.mkdir(parents=True)
    for i, (vendor, cls) in enumerate(pci):
        d = base / f"0000:{i:02x}:00.0"
        d.mkdir()
        (d / "vendor").write_text(vendor + "\n")
        (d / "class").write_text(cls + "\n")
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


@pytest.mark.parametrize(
    ("dev", "pci", "files", "env", "expect"),
    [
        # A container started without --gpus, on an 8-GPU host.
        (
            ["null"],
            [("0x10de", "0x030200")] * 8 + [("0x8086", "0x060000")],
            {".dockerenv": b"", "proc/1/cgroup": b"0::/\n"},
            {"NVIDIA_VISIBLE_DEVICES": "all"},
            {
                "dev_nvidia": (),
                "nvidia_pci_gpus": 8,
                "container_marks": ("/.dockerenv",),
                "proc_driver_nvidia": False,
                "nvidia_env": {"NVIDIA_VISIBLE_DEVICES": "all"},
            },
        ),
        # A GPU container: the runtime injected the device files and /proc/driver/nvidia.
        (
            ["nvidia0", "nvidiactl", "nvidia-uvm", "null"],
            [("0x10de", "0x030200")],
            {"proc/driver/nvidia/version": b"NVRM", "proc/1/cgroup": b"12:pids:/kubepods/x\n"},
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1"},
            {
                "dev_nvidia": ("nvidia-uvm", "nvidia0", "nvidiactl"),
                "nvidia_pci_gpus": 1,
                "proc_driver_nvidia": True,
                "container_marks": ("KUBERNETES_SERVICE_HOST", "/proc/1/cgroup: kubepods"),
            },
        ),
        # A laptop with an Intel GPU only; a non-UTF-8 cgroup file is not a crash.
        (
            [],
            [("0x8086", "0x030000"), ("0x10de", "0x040300")],  # NVIDIA audio is not a GPU
            {"proc/1/cgroup": b"\xff\xfe/init.scope\n"},
            {},
            {"dev_nvidia": (), "nvidia_pci_gpus": 0, "container_marks": ()},
        ),
    ],
)
def test_host_facts_from_a_fake_tree(
    tmp_path: Path,
    dev: list[str],
    pci: list[tuple[str, str]],
    files: dict[str, bytes],
    env: dict[str, str],
    expect: dict[str, object],
) -> None:
    _tree(tmp_path, dev=dev, pci=pci, files=files)
    host = collect_host(tmp_path, env)
    for key, value in expect.items():
        assert getattr(host, key) == value, key


def test_unreadable_tree_gives_unknown_not_zero(tmp_path: Path) -> None:
    missing = tmp_path / "nothing"
    assert dev_nvidia_files(missing) is None
    assert nvidia_pci_gpus(missing) is None
    assert container_marks(missing, {}) == ()


def test_live_host_facts_never_raise() -> None:
    host = collect_host()
    assert host.platform
    assert host.container_marks is not None
    assert os.name != "posix" or host.dev_nvidia is not None
