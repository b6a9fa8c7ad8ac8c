"""A node's InfiniBand/RoCE driver stack (snapshot ``node.rdma``, schema 1.4; issue 19:
"an InfiniBand driver that does not match HPC-X").

Files only, no child process, each fact on its own (an unreadable one is None):

* the ConnectX kernel driver, ``/sys/module/mlx5_core/{version,srcversion}`` (Linux ABI
  ``sysfs-module``: present "if the module source has MODULE_VERSION"). Mainline's mlx5
  no longer defines a ``DRIVER_VERSION`` (``mlx5_core.h``), while MLNX_OFED's backport
  keeps ``MODULE_VERSION(DRIVER_VERSION)``, so a version file means MLNX_OFED or
  DOCA-OFED (``23.10-1.1.9``) and none means the inbox driver
  (Mellanox/nic-feature-discovery, ``pkg/feature/internal/driver``: "mlx5 driver has no
  version file, its most likely inbox"). Some distribution kernels report their release
  there instead, which NGC containers' entrypoint treats as inbox too (it compares the
  version with ``uname -r``); ``/proc/sys/kernel/osrelease`` is recorded for that. (The
  inbox mlx5 of older kernels declared a version of its own, which reads as one here.)
* the MLNX_OFED/DOCA-OFED user space: what ``ofed_info -s`` prints, read from the
  ``ofed_info`` script, whose first lines answer ``-s`` with a constant (``if [ "X$1" ==
  "X-s" ]; then echo OFED-internal-24.01-0.3.3:; exit 0; fi``; MLNX_OFED's installer
  rewrites ``OFED-internal`` to ``MLNX_OFED_LINUX``): ``MLNX_OFED_LINUX-5.8-1.0.1.1``
  (MLNX_OFED), ``OFED-internal-24.10-1.1.4.0`` (DOCA-OFED). Looked for along ``PATH`` and
  in the usual folders; inside a container, the image's;
* the ``libibverbs.so.1`` the loader would find, by its real file name: rdma-core names it
  ``libibverbs.so.1.<ABI>.<PACKAGE_VERSION>`` (``libibverbs/CMakeLists.txt``);
* each device of ``/sys/class/infiniband``: ``fw_ver`` (Linux ABI
  ``sysfs-class-infiniband``, "firmware version", since 4.10), ``hca_type`` and
  ``board_id`` (the mlx4/mlx5 attributes, the board's PSID);
* the HPC-X a job would use: ``HPCX_DIR`` (set by ``hpcx-init.sh``'s ``hpcx_load``),
  ``HPCX_HOME`` (HPC-X's manual: ``export HPCX_HOME=$PWD``), the folder above
  ``OPAL_PREFIX``'s ``ompi``, or ``/opt/hpcx`` (NGC containers). Its ``VERSION`` file
  (``HPC-X v2.21.3`` … ``OFED: doca_ofed``) or its folder name, which HPC-X's manual spells
  ``hpcx-<version>-<compiler>-<ofed>-<distro>-<cuda>-<arch>`` (``hpcx-v2.18-gcc-mlnx_ofed-
  redhat8-cuda12-x86_64``; older ones the OFED's version: ``…-gcc-MLNX_OFED_LINUX-5-…`` (2.14),
  ``…-gcc-MLNX_OFED_LINUX-4.7-1.0.0.1-…``), say which RDMA stack it was built for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from gpudiag.backends.net_libs import find_library
from gpudiag.network import HpcxInfo, RdmaDevice, RdmaStack

#: At most this many RDMA devices are recorded.
MAX_DEVICES = 64
#: The folders ``ofed_info`` is looked for in after ``PATH`` (MLNX_OFED installs it in
#: ``/usr/bin``).
OFED_INFO_DIRS = ("usr/bin", "usr/local/bin", "bin", "usr/sbin", "sbin")
#: The largest part of the ``ofed_info`` script read (its answer to ``-s`` comes first).
OFED_INFO_BYTES = 64 << 10
_OFED_S = re.compile(r'^\s*if \[ "X?\$1" == "X?-s" \]; then echo "?([^";\s]+?):?"?;', re.M)
_HPCX_NAME = re.compile(r"hpcx-v?(\d+(?:\.\d+)*)-[^-]+-(.+)")
_OFED_IN_NAME = re.compile(r"(MLNX_OFED_LINUX-\d+(?:\.\d+)*(?:-\d+(?:\.\d+)*)?)(?:-|$)")


def read_text(path: Path, limit: int = 4096) -> str | None:
    """A small sysfs/procfs file's text, stripped; None when it cannot be read."""
    try:
        with path.open("rb") as fh:
            return fh.read(limit).decode("utf-8", errors="replace").strip()
    except (OSError, ValueError):
        return None


def _under(root: Path, path: str) -> Path:
    """``path`` (absolute, as the node sees it) inside the tree at ``root``."""
    return root / path.lstrip("/")


def _shown(root: Path, path: Path) -> str:
    """``path`` (inside ``root``) as the node sees it."""
    try:
        return "/" + str(path.relative_to(root.resolve())).lstrip("/")
    except ValueError:
        return str(path)


def ofed_info(root: Path, env: Mapping[str, str]) -> str | None:
    """What ``ofed_info -s`` prints (without its colon), read from the script; None when
    there is no ``ofed_info`` or it answers ``-s`` some other way."""
    folders = [e for e in (env.get("PATH") or "").split(":") if e.startswith("/")]
    for folder in [*folders, *OFED_INFO_DIRS]:
        script = _under(root, folder) / "ofed_info"
        if not script.is_file():
            continue
        text = read_text(script, OFED_INFO_BYTES)
        match = _OFED_S.search(text or "")
        return match.group(1) if match else None
    return None


def infiniband_devices(root: Path) -> list[str] | None:
    """The device names under ``/sys/class/infiniband``, sorted; ``[]`` when it is
    absent (no RDMA driver), None when it cannot be listed."""
    base = root / "sys" / "class" / "infiniband"
    if not base.exists():
        return []
    try:
        return sorted(e.name for e in base.iterdir())
    except (OSError, ValueError):
        return None


def devices(root: Path) -> tuple[RdmaDevice, ...] | None:
    """``/sys/class/infiniband``'s devices with their firmware; ``()`` when absent."""
    base = root / "sys" / "class" / "infiniband"
    names = infiniband_devices(root)
    if names is None:
        return None
    return tuple(
        RdmaDevice(
            device=name,
            fw_ver=read_text(base / name / "fw_ver", 256) or None,
            hca_type=read_text(base / name / "hca_type", 256) or None,
            board_id=read_text(base / name / "board_id", 256) or None,
        )
        for name in names[:MAX_DEVICES]
    )


def libibverbs(root: Path, env: Mapping[str, str]) -> str | None:
    """The real file name of the ``libibverbs.so.1`` the loader would find."""
    found = find_library("libibverbs.so.1", root, env)
    if not found:
        return None
    path = _under(root, found[0].path) if str(root) != "/" else Path(found[0].path)
    try:
        return path.resolve().name
    except (OSError, RuntimeError):
        return None


def parse_hpcx_name(name: str) -> tuple[str | None, str | None]:
    """(version, OFED part) of an HPC-X folder name: ``hpcx-v2.18-gcc-mlnx_ofed-…`` →
    ``("2.18", "mlnx_ofed")``; ``(None, None)`` for another name."""
    match = _HPCX_NAME.fullmatch(name)
    if not match:
        return None, None
    rest = match.group(2)
    ofed = _OFED_IN_NAME.match(rest)
    return match.group(1), ofed.group(1) if ofed else rest.split("-", 1)[0] or None


def parse_hpcx_version_file(text: str) -> tuple[str | None, str | None]:
    """(version, OFED) of HPC-X's ``VERSION`` file (``HPC-X v2.21.3`` … ``OFED: doca_ofed``)."""
    version = re.match(r"\s*HPC-X\s+v?(\S+)", text)
    ofed = re.search(r"^OFED:\s*(\S+)", text, re.M)
    return (version.group(1) if version else None), (ofed.group(1) if ofed else None)


def _hpcx_candidates(env: Mapping[str, str]) -> list[tuple[str, str, bool]]:
    """(path, via, named explicitly) in the order HPC-X is looked for."""
    out = [(env[k], k, True) for k in ("HPCX_DIR", "HPCX_HOME") if env.get(k)]
    opal = (env.get("OPAL_PREFIX") or "").rstrip("/")
    if opal.endswith("/ompi"):
        out.append((opal[: -len("/ompi")], "OPAL_PREFIX", False))
    out.append(("/opt/hpcx", "/opt/hpcx", False))
    return out


def find_hpcx(root: Path, env: Mapping[str, str]) -> HpcxInfo | None:
    """The HPC-X a job here would use, or None."""
    for path, via, named in _hpcx_candidates(env):
        if not path.startswith("/"):
            continue
        folder = _under(root, path)
        try:
            if not folder.is_dir():
                continue
            real = folder.resolve()
        except (OSError, RuntimeError):
            continue
        text = read_text(real / "VERSION", 16384) or ""
        version, ofed = parse_hpcx_version_file(text)
        name_version, name_ofed = parse_hpcx_name(real.name)
        if not named and not text.lstrip().startswith("HPC-X") and name_version is None:
            continue  # an Open MPI or an /opt/hpcx that is not HPC-X
        return HpcxInfo(
            path=_shown(root, real) if str(root) != "/" else str(real),
            via=via,
            version=version or name_version or env.get("HPCX_VERSION") or None,
            ofed=ofed or name_ofed,
        )
    return None


def collect_rdma(root: Path, env: Mapping[str, str]) -> RdmaStack:
    """The RDMA driver stack of this machine (or of a fake tree under ``root``)."""
    module = root / "sys" / "module" / "mlx5_core"
    try:
        loaded: bool | None = module.is_dir()
    except OSError:
        loaded = None
    return RdmaStack(
        kernel_release=read_text(root / "proc" / "sys" / "kernel" / "osrelease", 256) or None,
        mlx5_core_loaded=loaded,
        mlx5_core_version=read_text(module / "version", 256) or None if loaded else None,
        mlx5_core_srcversion=read_text(module / "srcversion", 256) or None if loaded else None,
        ofed=ofed_info(root, env),
        libibverbs=libibverbs(root, env),
        devices=devices(root),
        hpcx=find_hpcx(root, env),
    )
