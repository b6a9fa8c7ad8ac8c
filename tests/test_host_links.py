"""Schema 1.2's host facts (gpudiag/backends/host.py, gpudiag/backends/pci.py) from fake trees.

sysfs and procfs are built under tmp_path as Linux lays them out: the PCI devices as
directories under /sys/devices/pci0000:00/… with /sys/bus/pci/devices/ symlinks to
them, config space files with ACS capabilities, IOMMU group and driver symlinks.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpudiag.backends.host import (
    collect_host,
    dev_shm_mib,
    iommu_devices,
    kernel_iommu_args,
    nvidia_uvm_loaded,
    proc_hides_pids,
    with_pid_namespace,
)
from gpudiag.backends.pci import acs_control, pci_gpus
from gpudiag.model import Gpu, GpuProcess, PciBridge, PciGpu


def _ext_config(caps: list[tuple[int, int, int]], size: int = 4096) -> bytes:
    """A config space whose extended capabilities are ``(offset, id, acs_ctl)``, chained."""
    data = bytearray(size)
    for i, (offset, cap_id, ctl) in enumerate(caps):
        nxt = caps[i + 1][0] if i + 1 < len(caps) else 0
        header = cap_id | (1 << 16) | (nxt << 20)
        data[offset : offset + 4] = header.to_bytes(4, "little")
        data[offset + 6 : offset + 8] = ctl.to_bytes(2, "little")
    return bytes(data)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (bytes(64), None),  # unprivileged: Linux gives the first 64 bytes only
        (bytes(256), 0),  # a conventional PCI device: no extended space, no ACS
        (_ext_config([(0x100, 0x0001, 0), (0x148, 0x000D, 0x001D)]), 0x1D),  # AER, then ACS
        (_ext_config([(0x100, 0x000D, 0x0000)]), 0),  # ACS present, all off
        (_ext_config([(0x100, 0x0001, 0)]), 0),  # no ACS in the list
        (b"\xff" * 4096, 0),  # a device that answers all ones (gone, or D3cold)
        (_ext_config([(0x100, 0x0001, 0), (0x100, 0x0002, 0)]), 0),  # a looping list ends
    ],
)
def test_acs_control_from_config_space(config: bytes, expected: int | None) -> None:
    assert acs_control(config) == expected


def _pci_tree(root: Path) -> None:
    devices = root / "sys" / "devices" / "pci0000:00"
    bus = root / "sys" / "bus" / "pci" / "devices"
    bus.mkdir(parents=True)
    groups = root / "sys" / "kernel" / "iommu_groups"
    drivers = root / "sys" / "bus" / "pci" / "drivers"
    for name in ("nvidia", "vfio-pci"):
        (drivers / name).mkdir(parents=True)

    def device(path: Path, vendor: str, cls: str, config: bytes | None = None) -> Path:
        path.mkdir(parents=True)
        (path / "vendor").write_text(vendor + "\n")
        (path / "class").write_text(cls + "\n")
        if config is not None:
            (path / "config").write_bytes(config)
        (bus / path.name).symlink_to(path)
        return path

    root_port = device(devices / "0000:00:01.1", "0x1022", "0x060400", bytes(64))
    switch_up = device(root_port / "0000:01:00.0", "0x1000", "0x060400",
                       _ext_config([(0x100, 0x000D, 0x005D)]))  # fmt: skip
    switch_down = device(switch_up / "0000:02:08.0", "0x1000", "0x060400", bytes(256))
    gpu = device(switch_down / "0000:03:00.0", "0x10de", "0x030200")
    (gpu / "numa_node").write_text("1\n")
    (gpu / "driver").symlink_to(drivers / "nvidia")
    (groups / "27").mkdir(parents=True)
    (groups / "27" / "type").write_text("DMA-FQ\n")
    (gpu / "iommu_group").symlink_to(groups / "27")
    other = device(root_port / "0000:04:00.0", "0x10de", "0x030000")
    (other / "numa_node").write_text("-1\n")
    (other / "driver").symlink_to(drivers / "vfio-pci")
    device(root_port / "0000:03:00.1", "0x10de", "0x040300")  # the GPU's audio function


def test_gpu_functions_with_their_bridges(tmp_path: Path) -> None:
    _pci_tree(tmp_path)
    assert pci_gpus(tmp_path) == (
        PciGpu(
            pci_bus_id="0000:03:00.0",
            driver="nvidia",
            numa_node=1,
            iommu_group_type="DMA-FQ",
            bridges=(
                PciBridge("0000:02:08.0", 0),
                PciBridge("0000:01:00.0", 0x5D),
                PciBridge("0000:00:01.1", None),
            ),
        ),
        PciGpu(
            pci_bus_id="0000:04:00.0",
            driver="vfio-pci",
            numa_node=-1,
            iommu_group_type=None,
            bridges=(PciBridge("0000:00:01.1", None),),
        ),
    )
    assert collect_host(tmp_path, {}).nvidia_pci_gpus == 2


def test_iommu_uvm_and_shm_facts(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cmdline").write_text(
        "BOOT_IMAGE=/vmlinuz ro quiet amd_iommu=on iommu=pt iommu_foo=1 pcie_acs_override=downstream\n"
    )
    (tmp_path / "sys" / "class" / "iommu" / "ivhd1").mkdir(parents=True)
    (tmp_path / "sys" / "class" / "iommu" / "ivhd0").mkdir()
    (tmp_path / "sys" / "module" / "nvidia_uvm").mkdir(parents=True)
    assert kernel_iommu_args(tmp_path) == (
        "amd_iommu=on",
        "iommu=pt",
        "pcie_acs_override=downstream",
    )
    assert iommu_devices(tmp_path) == ("ivhd0", "ivhd1")
    assert nvidia_uvm_loaded(tmp_path) is True

    def statvfs(path: str) -> SimpleNamespace:
        assert path == str(tmp_path / "dev" / "shm")
        return SimpleNamespace(f_blocks=16384, f_frsize=4096, f_bavail=1024)

    assert dev_shm_mib(tmp_path, statvfs) == (64, 4)
    host = collect_host(tmp_path, {}, statvfs)
    assert (host.dev_shm_total_mib, host.dev_shm_free_mib) == (64, 4)
    assert host.kernel_iommu_args == ("amd_iommu=on", "iommu=pt", "pcie_acs_override=downstream")


def test_absent_is_empty_and_unreadable_is_unknown(tmp_path: Path) -> None:
    # A Linux without IOMMU and without nvidia_uvm: empty, False.
    (tmp_path / "sys" / "class").mkdir(parents=True)
    (tmp_path / "sys" / "module").mkdir()
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cmdline").write_text("ro quiet\n")
    assert iommu_devices(tmp_path) == ()
    assert nvidia_uvm_loaded(tmp_path) is False
    assert kernel_iommu_args(tmp_path) == ()
    # Nothing at all (another OS): unknown.
    nothing = tmp_path / "nothing"
    assert iommu_devices(nothing) is None
    assert nvidia_uvm_loaded(nothing) is None
    assert kernel_iommu_args(nothing) is None
    assert pci_gpus(nothing) is None
    assert dev_shm_mib(nothing) == (None, None)


def _gpus(*pids: int | None) -> tuple[Gpu, ...]:
    return (
        Gpu(nvml_index=0, uuid="GPU-1", processes=tuple(GpuProcess(pid=p) for p in pids)),
        Gpu(nvml_index=1, uuid="GPU-2"),
    )


@pytest.mark.parametrize(
    ("mounts", "expected"),
    [
        ("proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n", (True, False, None)),
        # hidepid=2: another user's process is absent from /proc though it runs.
        ("proc /proc proc rw,relatime,hidepid=2 0 0\n", (True, None, None)),
        ("proc /proc proc rw,relatime,hidepid=invisible,gid=5 0 0\n", (True, None, None)),
        # hidepid=1 hides the contents, not the directories.
        ("proc /proc proc rw,relatime,hidepid=1 0 0\n", (True, False, None)),
    ],
)
def test_pids_in_this_namespace(
    tmp_path: Path, mounts: str, expected: tuple[bool | None, ...]
) -> None:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "123").mkdir()
    (proc / "mounts").write_text("sysfs /sys sysfs rw 0 0\n" + mounts)
    gpus = with_pid_namespace(_gpus(123, 456, None), tmp_path)
    assert tuple(p.in_pid_namespace for p in gpus[0].processes) == expected
    assert gpus[1].processes == ()


def test_pids_unknown_without_proc(tmp_path: Path) -> None:
    gpus = _gpus(123)
    assert with_pid_namespace(gpus, tmp_path) == gpus
    assert proc_hides_pids(tmp_path) is None


def test_live_facts_never_raise() -> None:
    host = collect_host()
    if os.path.isdir("/sys/bus/pci/devices"):
        assert host.pci_gpus is not None
        assert len(host.pci_gpus) == host.nvidia_pci_gpus
    if os.path.exists("/dev/shm"):
        assert host.dev_shm_total_mib is not None and host.dev_shm_total_mib > 0
    # This process exists in its own namespace.
    me = with_pid_namespace(_gpus(os.getpid()))
    assert me[0].processes[0].in_pid_namespace is True


def test_a_live_snapshot_records_pairs_and_checks_pids(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudiag import collect
    from gpudiag.backends.nvml import NvmlResult
    from gpudiag.model import GpuPair, SourceStatus

    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    gpus = _gpus(os.getpid(), pid_max + 1)  # this process; a PID no process can have
    pairs = (GpuPair(0, 1, "PIX", "OK", "OK", "NS"),)
    monkeypatch.setattr(collect, "driver_present", lambda: False)
    monkeypatch.setattr(collect.shutil, "which", lambda name: None)
    monkeypatch.setattr(
        collect,
        "collect_nvml",
        lambda: NvmlResult(SourceStatus("ok"), "550.54.15", "12.4", gpus, pairs),
    )
    monkeypatch.setattr(collect, "_enumerate", lambda spec, order: _NoDriver())
    snap = collect.collect_snapshot(with_torch=False, with_gputil=False)
    assert snap.gpu_pairs == pairs
    hides = proc_hides_pids(Path("/"))
    assert [p.in_pid_namespace for p in snap.gpus[0].processes] == [
        True,
        None if hides else False,
    ]


class _NoDriver:
    ok = False
    uuids = ()
    error = "no driver here"
