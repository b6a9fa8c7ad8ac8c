"""A node's identity and network facts (snapshot ``node``, schema 1.3; issue 19).

Stdlib only, no child process, and every fact collected on its own: an unreadable
file or a failing call leaves that fact None and the others stand.

Sources:

* interfaces: ``/sys/class/net/<if>/{operstate,flags}`` (Linux ABI
  ``sysfs-class-net``; ``IFF_LOOPBACK`` is 0x8 in ``<linux/if.h>``) and each
  interface's IPv4 address from ``SIOCGIFADDR``/``SIOCGIFNETMASK`` (netdevice(7)),
  the ioctls ``ifconfig`` uses; NCCL's socket transport picks among these
  (NCCL environment variables: ``NCCL_SOCKET_IFNAME``);
* RDMA ports: ``/sys/class/infiniband/<dev>/ports/<n>/{state,link_layer}``
  (Linux ABI ``sysfs-class-infiniband``; ``link_layer`` ``Ethernet`` is RoCE), and since
  1.4 each port's GID table, ``ports/<n>/gids/<i>`` with ``gid_attrs/types/<i>``
  (``RoCE v2``, ``IB/RoCE v1``): what ``NCCL_IB_GID_INDEX`` indexes;
* since 1.4, the IPv4 routes of ``/proc/net/route`` (proc(5): little-endian hex
  addresses, ``RTF_UP`` 0x1 in ``Flags``), and the ``libnccl.so.2`` / NCCL network plugin
  files the dynamic loader would find (:mod:`gpudiag.backends.net_libs`), and the
  RDMA driver stack: MLNX_OFED/DOCA-OFED or inbox, the HCAs' firmware, HPC-X
  (:mod:`gpudiag.backends.rdma`);
* ``/proc/sys/kernel/random/boot_id`` (random(4): a new UUID per boot);
* ``PRETTY_NAME`` of ``/etc/os-release`` (os-release(5));
* ``MASTER_ADDR`` through ``getaddrinfo``, bounded by a timeout in a daemon thread
  (a resolver can take the full ``resolv.conf`` timeout per server);
* the NCCL torch loads: pip's torch CUDA wheels depend on ``nvidia-nccl-cu12``
  (``nvidia-nccl-cu11``/``-cu13``), installed beside torch, and load its
  ``libnccl.so.2``; torch's own metadata pins that version
  (``Requires-Dist: nvidia-nccl-cu12==2.21.5``).
  Builds that link NCCL statically (conda, source builds) leave it None.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpudiag.backends.net_libs import find_nccl_libs, find_net_plugins
from gpudiag.backends.rdma import collect_rdma, infiniband_devices
from gpudiag.backends.rdma import read_text as _read
from gpudiag.model import IbGid, IbPort, NetInterface, NodeInfo, Route

#: Variables recorded in ``node.nccl_env`` when set: the NCCL transport's, Gloo's,
#: and the rendezvous' (torch.distributed's env:// init method).
NODE_ENV_PREFIXES = ("NCCL_",)
NODE_ENV = (
    "GLOO_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "UCX_NET_DEVICES",
)
#: At most this many interfaces / RDMA ports are recorded (a host with thousands of
#: veth pairs must not make a snapshot large).
MAX_INTERFACES = 256
MAX_IB_PORTS = 64
#: GID table entries read per port (mlx5 ports have 255 or 256), and routes kept.
MAX_GIDS = 256
MAX_ROUTES = 1024
_ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
_RTF_UP = 0x1
_IFF_LOOPBACK = 0x8
_SIOCGIFADDR = 0x8915
_SIOCGIFNETMASK = 0x891B
RESOLVE_TIMEOUT_S = 2.0

Resolver = Callable[[str], tuple[str, ...]]
AddrReader = Callable[[str], tuple[str, ...] | None]


def ipv4_of(name: str) -> tuple[str, ...] | None:
    """The interface's IPv4 address as ``a.b.c.d/prefix``; ``()`` none; None unreadable."""
    try:
        import fcntl
        import socket
        import struct
    except ImportError:  # pragma: no cover - not POSIX
        return None
    packed = struct.pack("256s", name.encode()[:15])
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                addr = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, packed)[20:24]
            except OSError as exc:
                # EADDRNOTAVAIL: the interface has no IPv4 address.
                return () if exc.errno == 99 else None
            mask = fcntl.ioctl(sock.fileno(), _SIOCGIFNETMASK, packed)[20:24]
    except OSError:
        return None
    prefix = bin(int.from_bytes(mask, "big")).count("1")
    return (f"{socket.inet_ntoa(addr)}/{prefix}",)


def interfaces(root: Path, addr_reader: AddrReader = ipv4_of) -> tuple[NetInterface, ...] | None:
    """``/sys/class/net``'s interfaces, sorted; None when it cannot be listed."""
    base = root / "sys" / "class" / "net"
    try:
        names = sorted(e.name for e in base.iterdir())
    except (OSError, ValueError):
        return None
    out = []
    for name in names[:MAX_INTERFACES]:
        flags = _read(base / name / "flags")
        try:
            loopback: bool | None = bool(int(flags, 16) & _IFF_LOOPBACK) if flags else None
        except ValueError:
            loopback = None
        out.append(
            NetInterface(
                name=name,
                operstate=_read(base / name / "operstate"),
                loopback=loopback,
                ipv4=addr_reader(name),
            )
        )
    return tuple(out)


def ib_ports(root: Path) -> tuple[IbPort, ...] | None:
    """``/sys/class/infiniband``'s ports; ``()`` when absent (no RDMA driver)."""
    base = root / "sys" / "class" / "infiniband"
    devices = infiniband_devices(root)
    if devices is None:
        return None
    out: list[IbPort] = []
    for device in devices:
        try:
            ports = sorted(
                (e.name for e in (base / device / "ports").iterdir() if e.name.isdigit()),
                key=int,
            )
        except (OSError, ValueError):
            continue
        for port in ports:
            if len(out) >= MAX_IB_PORTS:
                return tuple(out)
            state = _read(base / device / "ports" / port / "state")
            out.append(
                IbPort(
                    device=device,
                    port=int(port),
                    # "4: ACTIVE" -> "ACTIVE"
                    state=state.partition(":")[2].strip() or state if state else None,
                    link_layer=_read(base / device / "ports" / port / "link_layer"),
                    gids=gid_table(base / device / "ports" / port),
                )
            )
    return tuple(out)


def gid_table(port_dir: Path) -> tuple[IbGid, ...] | None:
    """The port's used GID entries, by index; None when ``gids/`` cannot be listed.

    An unused entry reads as all zeros, and reading its ``gid_attrs/types`` entry fails
    (EINVAL), so only non-zero GIDs are kept, each with its type where readable.
    """
    try:
        indices = sorted(int(e.name) for e in (port_dir / "gids").iterdir() if e.name.isdigit())
    except (OSError, ValueError):
        return None
    out = []
    for index in indices[:MAX_GIDS]:
        gid = _read(port_dir / "gids" / str(index), 64)
        if gid and gid != _ZERO_GID:
            kind = _read(port_dir / "gid_attrs" / "types" / str(index), 64)
            out.append(IbGid(index=index, gid=gid, type=kind or None))
    return tuple(out)


def _hex_ipv4(text: str) -> str:
    """``/proc/net/route``'s address: 8 hex digits, the bytes in host (little-endian) order."""
    import socket
    import struct

    return socket.inet_ntoa(struct.pack("<I", int(text, 16)))


def routes(root: Path) -> tuple[Route, ...] | None:
    """The up routes of ``/proc/net/route``, in the kernel's order; None if unreadable."""
    text = _read(root / "proc" / "net" / "route", 1 << 20)
    if text is None:
        return None
    out = []
    for line in text.splitlines()[1:]:
        cells = line.split()
        if len(cells) < 8:
            continue
        try:
            if not int(cells[3], 16) & _RTF_UP:
                continue
            mask = bin(int(cells[7], 16)).count("1")
            gateway = _hex_ipv4(cells[2])
            out.append(
                Route(
                    interface=cells[0],
                    destination=f"{_hex_ipv4(cells[1])}/{mask}",
                    gateway=None if gateway == "0.0.0.0" else gateway,
                    metric=int(cells[6]),
                )
            )
        except (ValueError, OverflowError):
            continue
        if len(out) >= MAX_ROUTES:
            break
    return tuple(out)


def os_name(root: Path) -> str | None:
    """``PRETTY_NAME`` of ``/etc/os-release`` (or ``/usr/lib/os-release``)."""
    for rel in ("etc/os-release", "usr/lib/os-release"):
        text = _read(root / rel, 16384)
        if text is None:
            continue
        match = re.search(r"^PRETTY_NAME=(.*)$", text, re.M)
        if match:
            return match.group(1).strip().strip("\"'") or None
    return None


def node_env(env: Mapping[str, str]) -> dict[str, str]:
    """The NCCL, Gloo and rendezvous variables that are set, sorted by name."""
    return {
        k: env[k]
        for k in sorted(env)
        if k in NODE_ENV or any(k.startswith(p) for p in NODE_ENV_PREFIXES)
    }


def getaddrinfo_ips(host: str) -> tuple[str, ...]:
    """The distinct addresses ``getaddrinfo`` gives for ``host``, in its order."""
    import socket

    seen: dict[str, None] = {}
    for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM):
        seen[str(info[4][0])] = None
    return tuple(seen)


def resolve(
    host: str, resolver: Resolver = getaddrinfo_ips, timeout_s: float = RESOLVE_TIMEOUT_S
) -> tuple[tuple[str, ...] | None, str | None]:
    """(addresses, None) or (None, why), never waiting more than ``timeout_s``."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["ips"] = resolver(host)
        except (OSError, UnicodeError, ValueError) as exc:
            box["error"] = str(exc) or type(exc).__name__

    thread = threading.Thread(target=run, daemon=True, name="gpudiag-resolve")
    thread.start()
    thread.join(timeout_s)
    if "ips" in box:
        return box["ips"], None
    return None, box.get("error", f"no answer within {timeout_s:g} s")


def _torch_site() -> Path | None:
    """The folder torch is installed in (its package's parent), found, not imported."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]).parent if locations else None


def nccl_version(site: Path | None = None) -> tuple[str | None, str | None]:
    """(version, source): the ``nvidia-nccl-cu*`` wheel beside torch, else torch's pin.

    Read from the ``*.dist-info`` folders' names and torch's ``METADATA`` (a few file
    reads: ``importlib.metadata`` would scan every installed distribution, 50 ms here).
    """
    site = site if site is not None else _torch_site()
    if site is None:
        return None, None
    try:
        infos = sorted(p.name for p in site.glob("*.dist-info"))
    except OSError:
        return None, None
    for name in infos:
        match = re.fullmatch(r"nvidia_nccl_(cu\d+)-([0-9][^-]*)\.dist-info", name)
        if match:
            return match.group(2), f"nvidia-nccl-{match.group(1)} (installed)"
    for name in infos:
        if re.fullmatch(r"torch-[0-9][^-]*\.dist-info", name):
            text = _read(site / name / "METADATA", 1 << 20) or ""
            pin = re.search(
                r"^Requires-Dist:\s*(nvidia-nccl-cu\d+)\s*==\s*([0-9][0-9A-Za-z.+]*)", text, re.M
            )
            if pin:
                return pin.group(2), f"torch requires {pin.group(1)} (not installed)"
    return None, None


def collect_node(
    root: str | Path = "/",
    env: Mapping[str, str] | None = None,
    *,
    addr_reader: AddrReader = ipv4_of,
    resolver: Resolver = getaddrinfo_ips,
    nccl: Callable[[], tuple[str | None, str | None]] = nccl_version,
    site: Path | None = None,
) -> NodeInfo:
    """The node facts of this machine (or of a fake tree under ``root``)."""
    base = Path(root)
    environ = os.environ if env is None else env
    recorded = node_env(environ)
    ips: tuple[str, ...] | None = None
    error: str | None = None
    master = recorded.get("MASTER_ADDR")
    if master:
        ips, error = resolve(master, resolver)
    version, source = nccl()
    boot = _read(base / "proc" / "sys" / "kernel" / "random" / "boot_id")
    return NodeInfo(
        boot_id=boot or None,
        os_name=os_name(base),
        interfaces=interfaces(base, addr_reader),
        ib_ports=ib_ports(base),
        nccl_env=recorded,
        master_addr_ips=ips,
        master_addr_error=error,
        nccl_version=version,
        nccl_source=source,
        routes=routes(base),
        nccl_libs=find_nccl_libs(base, environ, site if site is not None else _torch_site()),
        nccl_net_plugins=find_net_plugins(base, environ),
        rdma=collect_rdma(base, environ),
    )
