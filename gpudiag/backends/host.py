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
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from pathlib import Path

from gpudiag.model import HostInfo

#: Variables of the NVIDIA container runtime recorded in the snapshot.
NVIDIA_ENV = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_REQUIRE_CUDA")
_CGROUP_MARKS = ("docker", "kubepods", "containerd", "libpod", "lxc", "crio")
_NVIDIA_VENDOR = "0x10de"
_GPU_CLASSES = ("0x0300", "0x0302")
#: A node has at most a few dozen PCI GPUs; stop reading a huge or looping tree early.
_MAX_PCI = 4096


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
        entries = list(base.iterdir())[:_MAX_PCI]
    except (OSError, ValueError):
        return None
    count = 0
    for entry in entries:
        vendor = (_read(entry / "vendor", 64) or "").strip().lower()
        cls = (_read(entry / "class", 64) or "").strip().lower()
        if vendor == _NVIDIA_VENDOR and cls[:6] in _GPU_CLASSES:
            count += 1
    return count


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


def collect_host(root: str | Path = "/", env: Mapping[str, str] | None = None) -> HostInfo:
    """The host facts of this machine (or of a fake tree under ``root``)."""
    base = Path(root)
    environ = os.environ if env is None else env
    return HostInfo(
        platform=platform.system() or None,
        machine=platform.machine() or None,
        dev_nvidia=dev_nvidia_files(base),
        dev_dxg=_exists(base / "dev" / "dxg"),
        proc_driver_nvidia=_exists(base / "proc" / "driver" / "nvidia"),
        nvidia_pci_gpus=nvidia_pci_gpus(base),
        container_marks=container_marks(base, environ),
        nvidia_env={k: environ[k] for k in NVIDIA_ENV if k in environ},
    )
