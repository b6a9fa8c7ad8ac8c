"""Is the rendezvous port free? Bind it for an instant, and name who holds it.

Live only: a snapshot cannot know which ports are taken when the job starts.

Rank 0's ``TCPStore`` server (torch 2.13, ``TCPStoreLibUvBackend.cpp``) listens on
the wildcard address (``::``, falling back to ``0.0.0.0``) at ``MASTER_PORT`` with
``SO_REUSEADDR``, so a port held by any listener on this host fails it with
``EADDRINUSE``. We do the same bind (no ``listen``) and close at once. Binding the
specific ``MASTER_ADDR`` first (port 0) tells whether that address is this host's:
``EADDRNOTAVAIL`` means another host runs rank 0.

The holder comes from ``/proc/net/tcp`` and ``/proc/net/tcp6`` (the listening
socket's inode) and the ``/proc/<pid>/fd`` links (``socket:[inode]``), which only
the owner (or root) can read. Unreadable, vanished or non-UTF-8 entries are
skipped; nothing here raises.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import socket
import threading
from pathlib import Path

from gpudiag.model import PortHolder, PortProbe

#: TCP states in /proc/net/tcp: 0A LISTEN; 07 CLOSE (bound, not listening yet).
_HOLDING_STATES = ("0A", "07")
_RESOLVE_TIMEOUT_S = 2.0
#: Scan at most this many processes' fd tables (a node has a few thousand at most).
_MAX_PIDS = 65536


def _resolve(address: str) -> tuple[int, str] | None:
    """(family, numeric address) for a literal or a name; None when it does not resolve.

    Name resolution runs in a daemon thread with a timeout: a dead DNS server must
    not stall ``gpudiag check``.
    """
    text = address.strip().strip("[]")
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        pass
    else:
        return (socket.AF_INET6 if ip.version == 6 else socket.AF_INET), str(ip)
    found: list[tuple[int, str]] = []

    def lookup() -> None:
        with contextlib.suppress(OSError, UnicodeError, ValueError):
            for family, _, _, _, sockaddr in socket.getaddrinfo(text, None, 0, socket.SOCK_STREAM):
                if family in (socket.AF_INET, socket.AF_INET6):
                    found.append((family, str(sockaddr[0])))
                    return

    thread = threading.Thread(target=lookup, daemon=True)
    thread.start()
    thread.join(_RESOLVE_TIMEOUT_S)
    return found[0] if found else None


def _try_bind(family: int, address: str, port: int) -> int | None:
    """Bind (no listen) and close; the errno on failure, None on success."""
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        return exc.errno or errno.EINVAL
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((address, port))
    except OSError as exc:
        return exc.errno or errno.EINVAL
    finally:
        sock.close()
    return None


def _inodes(proc: Path, port: int) -> set[str]:
    """Inodes of sockets bound or listening on ``port`` (any local address)."""
    inodes: set[str] = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / name).read_bytes().decode("ascii", "replace").splitlines()
        except OSError:
            continue
        for line in lines[1:]:
            fields = line.split()
            if len(fields) < 10 or ":" not in fields[1]:
                continue
            try:
                local_port = int(fields[1].rsplit(":", 1)[1], 16)
            except ValueError:
                continue
            if local_port == port and fields[3].upper() in _HOLDING_STATES and fields[9] != "0":
                inodes.add(fields[9])
    return inodes


def _read_text(path: Path, limit: int = 4096) -> str | None:
    try:
        with path.open("rb") as fh:
            raw = fh.read(limit)
    except OSError:
        return None
    # cmdline separates arguments with NUL; keep the report on one line.
    text = " ".join(raw.replace(b"\0", b" ").decode("utf-8", "replace").split())
    return text or None


def port_holders(port: int, proc: str | Path = "/proc") -> tuple[PortHolder, ...]:
    """The processes whose sockets hold ``port``, as far as ``/proc`` is readable."""
    root = Path(proc)
    inodes = _inodes(root, port)
    if not inodes:
        return ()
    wanted = {f"socket:[{inode}]" for inode in inodes}
    holders: list[PortHolder] = []
    try:
        pids = [e for e in os.scandir(root) if e.name.isascii() and e.name.isdigit()]
    except OSError:
        return ()
    for entry in pids[:_MAX_PIDS]:
        fd_dir = root / entry.name / "fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # another user's process, or it exited
        for fd in fds:
            try:
                target = os.readlink(fd_dir / fd)
            except OSError:
                continue
            if target in wanted:
                holders.append(
                    PortHolder(
                        pid=int(entry.name),
                        name=_read_text(root / entry.name / "comm", 256),
                        cmdline=_shorten(_read_text(root / entry.name / "cmdline")),
                    )
                )
                break
    return tuple(sorted(holders, key=lambda h: h.pid))


def _shorten(text: str | None, limit: int = 160) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def probe_port(address: str, port: int, *, proc: str | Path = "/proc") -> PortProbe:
    """Can rank 0 listen on ``address:port``? Binds for an instant, never listens.

    Returns a :class:`PortProbe`; never raises for the network's or /proc's sake.
    """
    resolved = _resolve(address)
    if resolved is None:
        return PortProbe(address, port, "error", f"{address!r} does not resolve")
    family, numeric = resolved
    own = _try_bind(family, numeric, 0)
    if own == errno.EADDRNOTAVAIL:
        return PortProbe(address, port, "not_local")
    if own is not None:
        return PortProbe(address, port, "error", os.strerror(own))
    # The store listens on the wildcard address: test that, in both families when possible.
    results = [_try_bind(socket.AF_INET, "0.0.0.0", port)]
    if socket.has_ipv6:
        v6 = _try_bind(socket.AF_INET6, "::", port)
        if v6 != errno.EAFNOSUPPORT and v6 != errno.EADDRNOTAVAIL:
            results.append(v6)
    if errno.EADDRINUSE in results:
        return PortProbe(
            address, port, "in_use", os.strerror(errno.EADDRINUSE), port_holders(port, proc)
        )
    failed = [r for r in results if r is not None]
    if failed and len(failed) == len(results):
        return PortProbe(address, port, "error", os.strerror(failed[0]))
    return PortProbe(address, port, "free")
