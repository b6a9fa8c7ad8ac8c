"""``gpudiag fleet --probe``, the reach phase: can every node open a TCP connection to the
rendezvous address (issue 19)? Stdlib only, so it runs before (and without) torch.

Node 0 binds ``MASTER_ADDR:MASTER_PORT`` itself, as torch's rank 0 does for its
TCPStore (torch.distributed ``env://``): an address that is not node 0's, or a port
already taken, fails here as it would at the job's start. Every other node connects,
retrying until the reach phase ends (a refused connection: node 0 not listening yet,
or a firewall that rejects; a connection that hangs: one that drops), and sends a hello
signed with the run's token (HMAC-SHA256, the token from ``GPUDIAG_RDZV_TOKEN``, never
in argv); node 0 answers only a valid hello, with the port of its key-value store,
signed too, so a node never takes another service on that port for node 0.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import socket
import threading
import time
from typing import Any

from gpudiag.probes.rendezvous import RDZV_TOKEN_ENV

TAG = "gpudiag-fleet-reach/1"
_MAX_LINE = 512
_RETRY_S = 0.2


def mac(run_id: str, *parts: object) -> str:
    """HMAC-SHA256 under the run's token of ``TAG``, the run and ``parts``."""
    token = os.environ.get(RDZV_TOKEN_ENV, "").encode()
    message = "\n".join([TAG, run_id, *map(str, parts)]).encode()
    return hmac.new(token, message, hashlib.sha256).hexdigest()


def bind(addr: str, port: int) -> tuple[socket.socket | None, str | None]:
    """A listening socket on ``addr:port`` (``port`` 0: any free one), or why not."""
    try:
        infos = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        return None, f"MASTER_ADDR={addr} does not resolve on this node ({exc})"
    family, kind, proto, _, sockaddr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        where = f"{addr} ({sockaddr[0]})" if sockaddr[0] != addr else addr
        if exc.errno == 99:  # EADDRNOTAVAIL
            return None, f"{where} is not an address of this node"
        if exc.errno == 98:  # EADDRINUSE
            return None, f"port {port} of {where} is in use on this node"
        return None, f"cannot listen on {where}:{port} ({exc.strerror or exc})"
    return sock, None


def _read_line(conn: socket.socket) -> str:
    data = b""
    while b"\n" not in data and len(data) < _MAX_LINE:
        chunk = conn.recv(_MAX_LINE - len(data))
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0].decode("ascii", errors="replace")


def serve(
    sock: socket.socket, run_id: str, nodes: int, deadline: float, store_port: int,
    heard: set[int],
) -> None:  # fmt: skip
    """Answer signed hellos until every other node was heard or ``deadline`` (epoch)."""
    lock = threading.Lock()

    def answer(conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(max(0.5, min(5.0, deadline - time.time())))
                parts = _read_line(conn).split()
                if len(parts) != 5 or parts[0] != TAG or parts[1] != run_id:
                    return
                node, nonce, their = parts[2], parts[3], parts[4]
                if not node.isdigit() or not hmac.compare_digest(their, mac(run_id, node, nonce)):
                    return  # not a node of this run: no answer at all
                ack = f"OK {store_port} {mac(run_id, 'ack', node, nonce, store_port)}\n"
                conn.sendall(ack.encode())
                with lock:
                    heard.add(int(node))
            except OSError:
                return

    sock.settimeout(_RETRY_S)
    while time.time() < deadline and len(heard) < nodes - 1:
        try:
            conn, _ = sock.accept()
        except TimeoutError:
            continue
        except OSError:
            break
        threading.Thread(target=answer, args=(conn,), daemon=True).start()


def dial(
    addr: str, port: int, run_id: str, node: int, deadline: float, shown: int | None = None
) -> dict[str, Any]:
    """Connect to node 0 until it answers or ``deadline`` (epoch): the reach report, with
    ``store_port`` when node 0 answered. ``shown``: the port the report names (the
    ``unreachable`` fault dials another)."""
    started = time.time()
    last = "no attempt"
    while time.time() < deadline:
        nonce = secrets.token_hex(8)
        begin = time.perf_counter()
        try:
            timeout = max(0.5, min(5.0, deadline - time.time()))
            with socket.create_connection((addr, port), timeout=timeout) as conn:
                connect_ms = (time.perf_counter() - begin) * 1000
                conn.sendall(f"{TAG} {run_id} {node} {nonce} {mac(run_id, node, nonce)}\n".encode())
                parts = _read_line(conn).split()
            if (
                len(parts) == 3
                and parts[0] == "OK"
                and parts[1].isdigit()
                and hmac.compare_digest(parts[2], mac(run_id, "ack", node, nonce, parts[1]))
            ):
                return {"role": "dial", "ok": True, "ms": round(connect_ms, 3), "error": None,
                        "store_port": int(parts[1])}  # fmt: skip
            last = "something else answered there (no valid reply from node 0)"
        except TimeoutError:
            last = "the connection timed out (a firewall that drops, or no route)"
        except ConnectionRefusedError:
            last = "connection refused (nothing listens there, or a firewall rejects)"
        except OSError as exc:
            last = exc.strerror or str(exc) or type(exc).__name__
        except UnicodeError as exc:
            last = str(exc) or type(exc).__name__
        time.sleep(_RETRY_S)
    waited = max(0.0, time.time() - started)
    return {"role": "dial", "ok": False, "ms": None,
            "error": f"cannot reach {addr}:{shown or port} in {waited:.0f} s: {last}"}  # fmt: skip


def refused_port() -> int:
    """A port nothing listens on (the ``unreachable`` fault: a real refused connection)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
