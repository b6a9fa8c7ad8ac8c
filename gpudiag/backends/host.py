"""Host facts that explain a missing GPU: platform, device files, container marks.

Cheap file-system checks only (no child process, no driver call), so a snapshot
records them even where NVML cannot be loaded. Every fact is None when it could
not be read; nothing here raises for the machine's sake. ``root`` and ``env`` are
injectable so tests can build a fake file tree.

Sources: the NVIDIA Container Toolkit documentation (the runtime injects
``/dev/nvidia*`` and mounts ``/proc/driver/nvidia`` only into a container started
with GPU access; ``nvidia/cuda`` images set ``NVIDIA_VISIBLE_DEVICES`` and
``NVIDIA_DRIVER_CAPABILITIES`` themselves); Docker creates ``/.dockerenv``,
Podman ``/run/.containerenv``; Kubernetes sets ``KUBERNETES_SERVICE_HOST``; the
PCI class codes 0x0300 (VGA) and 0x0302 (3D controller) with vendor 0x10de are
NVIDIA GPUs (Linux sysfs ``/sys/bus/pci/devices/*/{vendor,class}``). WSL 2
reaches the GPU through ``/dev/dxg`` instead of ``/dev/nvidia*`` (NVIDIA's CUDA on
WSL user guide).

Schema 1.2 (issue 18) adds the facts around the GPUs: the IOMMU arguments of
``/proc/cmdline`` and ``/sys/class/iommu`` (Linux ``kernel-parameters.txt``:
``intel_iommu=``, ``amd_iommu=``, ``iommu=pt``, ``iommu.passthrough=``), the size of
``/dev/shm`` (``statvfs``), ``/sys/module/nvidia_uvm``, the GPU functions' sysfs
facts (:mod:`gpudiag.backends.pci`), and whether a PID NVML reports exists in this
PID namespace (``/proc/<pid>``; ``hidepid=2`` in ``/proc/mounts`` hides other
users' processes, proc(5)). Schema 1.4 adds whether this is the host's PID namespace
(:func:`host_pid_namespace`); :mod:`gpudiag.backends.holders` places each process.
"""

from __future__ import annotations

import dataclasses
import os
import platform
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpudiag.backends.pci import MAX_PCI, is_nvidia_gpu, pci_gpus
from gpudiag.model import Gpu, HostInfo

#: Variables of the NVIDIA container runtime recorded in the snapshot.
NVIDIA_ENV = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_REQUIRE_CUDA")
_CGROUP_MARKS = ("docker", "kubepods", "containerd", "libpod", "lxc", "crio")
#: Kernel arguments that decide the IOMMU's mode (and the ACS override patch's).
IOMMU_ARGS = (
    "intel_iommu",
    "amd_iommu",
    "iommu",
    "iommu.passthrough",
    "iommu.strict",
    "pcie_acs_override",
)
_MIB = 1024 * 1024


def _read(path: Path, limit: int = 65536) -> str | None:
    try:
        with path.open("rb") as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return None


def _exists(path: Path) -> bool | None:
    try:
        return path.exists()
    except (OSError, ValueError):
        return None


def dev_nvidia_files(root: Path) -> tuple[str, ...] | None:
    """Names of the ``/dev/nvidia*`` entries present, sorted; None when /dev is unreadable."""
    try:
        names = sorted(e.name for e in (root / "dev").iterdir() if e.name.startswith("nvidia"))
    except (OSError, ValueError):
        return None
    return tuple(names)


def nvidia_pci_gpus(root: Path) -> int | None:
    """NVIDIA display/3D controllers on the PCI bus; None when sysfs is unreadable."""
    base = root / "sys" / "bus" / "pci" / "devices"
    try:
        entries = list(base.iterdir())[:MAX_PCI]
    except (OSError, ValueError):
        return None
    return sum(1 for entry in entries if is_nvidia_gpu(entry))


def container_marks(root: Path, env: Mapping[str, str]) -> tuple[str, ...] | None:
    """Why this looks like a container; empty when nothing says so."""
    marks: list[str] = []
    for name in (".dockerenv", "run/.containerenv"):
        if _exists(root / name):
            marks.append("/" + name)
    if env.get("KUBERNETES_SERVICE_HOST"):
        marks.append("KUBERNETES_SERVICE_HOST")
    if "container" in env:  # systemd-nspawn, podman and LXC set it for PID 1's children
        marks.append(f"container={env['container']}")
    cgroup = _read(root / "proc" / "1" / "cgroup")
    if cgroup is not None:
        found = sorted({m for m in _CGROUP_MARKS if m in cgroup})
        marks += [f"/proc/1/cgroup: {m}" for m in found]
    return tuple(marks)


def kernel_iommu_args(root: Path) -> tuple[str, ...] | None:
    """The IOMMU arguments of ``/proc/cmdline``, in order; None when unreadable."""
    cmdline = _read(root / "proc" / "cmdline")
    if cmdline is None:
        return None
    return tuple(t for t in cmdline.split() if t.partition("=")[0] in IOMMU_ARGS)


def iommu_devices(root: Path) -> tuple[str, ...] | None:
    """``/sys/class/iommu``'s entries; ``()`` on a Linux without it; None without sysfs."""
    if not _exists(root / "sys" / "class"):
        return None
    try:
        return tuple(sorted(e.name for e in (root / "sys" / "class" / "iommu").iterdir()))
    except FileNotFoundError:
        return ()
    except (OSError, ValueError):
        return None


def dev_shm_mib(
    root: Path, statvfs: Callable[[str], Any] = os.statvfs
) -> tuple[int | None, int | None]:
    """``/dev/shm``'s size and free space in MiB; (None, None) when it cannot be asked."""
    try:
        st = statvfs(str(root / "dev" / "shm"))
    except (OSError, ValueError, AttributeError):
        return None, None
    return st.f_blocks * st.f_frsize // _MIB, st.f_bavail * st.f_frsize // _MIB


def nvidia_uvm_loaded(root: Path) -> bool | None:
    """``/sys/module/nvidia_uvm`` exists; None when ``/sys/module`` cannot be read."""
    if not _exists(root / "sys" / "module"):
        return None
    return _exists(root / "sys" / "module" / "nvidia_uvm")


def proc_hides_pids(root: Path) -> bool | None:
    """``/proc`` is mounted with ``hidepid=2`` (``invisible``) or ``4`` (``ptraceable``):
    other users' ``/proc/<pid>`` are then absent though the processes exist."""
    mounts = _read(root / "proc" / "mounts", 1 << 20)
    if mounts is None:
        return None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == "/proc" and fields[2] == "proc":
            options = dict(o.partition("=")[::2] for o in fields[3].split(","))
            return options.get("hidepid") in ("2", "invisible", "4", "ptraceable")
    return False


def host_pid_namespace(root: Path) -> bool | None:
    """This process sees the host's PID namespace: PID 2 is ``kthreadd``, the kernel's
    threads' parent, visible only from the initial namespace (pid_namespaces(7)). False
    in a container's own namespace, where NVML's PIDs (the host's: the driver ignores PID
    namespaces, NVIDIA/nvidia-docker#179) cannot be matched with ``/proc``; None when
    ``/proc`` is unreadable or hides root's processes (``hidepid``)."""
    if not _exists(root / "proc" / "self"):
        return None
    stat = _read(root / "proc" / "2" / "stat", 4096)
    if stat is not None:
        return "(kthreadd)" in stat
    return None if proc_hides_pids(root) is not False else False


def with_pid_namespace(gpus: tuple[Gpu, ...], root: str | Path = "/") -> tuple[Gpu, ...]:
    """``gpus`` with each process's ``in_pid_namespace`` set from ``/proc/<pid>``.

    False: no such process here (another container's, or it has exited while its
    memory is held); None when ``/proc`` hides other users' processes or is unreadable.
    """
    base = Path(root)
    if not any(g.processes for g in gpus):
        return gpus
    hides = proc_hides_pids(base)
    if hides is None or not _exists(base / "proc" / "self"):
        return gpus

    def seen(pid: int | None) -> bool | None:
        if pid is None:
            return None
        if _exists(base / "proc" / str(pid)):
            return True
        return None if hides else False

    return tuple(
        dataclasses.replace(
            g,
            processes=tuple(
                dataclasses.replace(p, in_pid_namespace=seen(p.pid)) for p in g.processes
            ),
        )
        if g.processes
        else g
        for g in gpus
    )


def collect_host(
    root: str | Path = "/",
    env: Mapping[str, str] | None = None,
    statvfs: Callable[[str], Any] = os.statvfs,
) -> HostInfo:
    """The host facts of this machine (or of a fake tree under ``root``)."""
    base = Path(root)
    environ = os.environ if env is None else env
    shm_total, shm_free = dev_shm_mib(base, statvfs)
    return HostInfo(
        platform=platform.system() or None,
        machine=platform.machine() or None,
        dev_nvidia=dev_nvidia_files(base),
        dev_dxg=_exists(base / "dev" / "dxg"),
        proc_driver_nvidia=_exists(base / "proc" / "driver" / "nvidia"),
        nvidia_pci_gpus=nvidia_pci_gpus(base),
        container_marks=container_marks(base, environ),
        nvidia_env={k: environ[k] for k in NVIDIA_ENV if k in environ},
        kernel_iommu_args=kernel_iommu_args(base),
        iommu_devices=iommu_devices(base),
        dev_shm_total_mib=shm_total,
        dev_shm_free_mib=shm_free,
        nvidia_uvm_loaded=nvidia_uvm_loaded(base),
        pci_gpus=pci_gpus(base),
        host_pid_namespace=host_pid_namespace(base),
    )
