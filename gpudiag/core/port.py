"""The rendezvous port: where rank 0 will listen, and what a taken port predicts.

Pure; the bind itself is :mod:`gpudiag.backends.port` (live only). Sources (torch
2.13): ``torch/distributed/run.py`` (torchrun's ``--master-addr`` defaults to
``127.0.0.1``, ``--master-port`` to 29500 for static rendezvous, its options come
from ``PET_MASTER_ADDR``/``PET_MASTER_PORT``; inside a worker, ``TORCHELASTIC_RUN_ID``
is set and the agent already holds the store's port); ``TCPStoreLibUvBackend.cpp``
(rank 0 listens on every address and fails with ``DistNetworkError: The server
socket has failed to listen on any local network address. port: P, useIpv6:
false, code: -98, name: EADDRINUSE, message: address already in use``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gpudiag.findings.texts import addr_in_use_text
from gpudiag.launch.ints import parse_env_int
from gpudiag.model import Finding, PortProbe, Severity

#: torchrun's static-rendezvous default (run.py), also accelerate's and DeepSpeed's.
DEFAULT_MASTER_PORT = 29500
DEFAULT_MASTER_ADDR = "127.0.0.1"

#: Binds MASTER_ADDR:MASTER_PORT for an instant (live only): ``gpudiag.backends.port``.
PortProber = Callable[[str, int], PortProbe]


@dataclass(frozen=True)
class PortTarget:
    """Where rank 0 will listen: ``address:port``; ``explicit`` when a variable set the port."""

    address: str
    port: int
    explicit: bool


def port_target(env: Mapping[str, str]) -> PortTarget | None:
    """The rendezvous port this process (or the launch it precedes) will bind, if any.

    None inside a torchrun worker (the agent already holds the port), for a rank
    other than 0 (rank 0 binds), and for a port that is invalid or 0 (other rules
    report those; 0 means "any free port").
    """
    if "TORCHELASTIC_RUN_ID" in env:
        return None
    rank = env.get("RANK")
    if rank and parse_env_int(rank) != 0:
        return None
    raw = env.get("MASTER_PORT") or env.get("PET_MASTER_PORT")
    if raw:
        port = parse_env_int(raw)
        if port is None or not 1 <= port <= 65535:
            return None
        explicit = True
    else:
        port, explicit = DEFAULT_MASTER_PORT, False
    address = env.get("MASTER_ADDR") or env.get("PET_MASTER_ADDR") or DEFAULT_MASTER_ADDR
    return PortTarget(address, port, explicit)


def port_findings(probe: PortProbe, target: PortTarget) -> list[Finding]:
    """``DDP-PORT-IN-USE`` when the probe found the port taken; nothing otherwise."""
    if probe.status != "in_use":
        return []
    if probe.holders:
        who = "by " + ", ".join(
            f"pid {h.pid}"
            + (f" ({h.name})" if h.name else "")
            + (f": {h.cmdline}" if h.cmdline else "")
            for h in probe.holders
        )
        stop = (
            " or stop "
            + ", ".join(f"pid {h.pid}" for h in probe.holders)
            + (" if it is a leftover job")
        )
    else:
        who = "by a process /proc does not show (another user's, or another container's)"
        stop = ""
    if target.explicit:
        source = f"MASTER_PORT={target.port}"
        severity: Severity = "error"
    else:
        source = (
            f"No MASTER_PORT is set, and the default port {target.port} (torchrun's static "
            "rendezvous: multi-node or --master-addr given; accelerate; DeepSpeed)"
        )
        severity = "warning"
    return [
        Finding(
            code="DDP-PORT-IN-USE",
            severity=severity,
            message=f"{source} is already in use on this host ({target.address} is local) {who}: "
            "rank 0 cannot listen there, and the other ranks may connect to the wrong "
            "process.",
            fix="Pick a free port: export MASTER_PORT=<free port> or torchrun --master-port "
            "<free port> (on one node, torchrun --standalone picks one itself)" + stop + ".",
            predicts=addr_in_use_text(target.port),
            subject="MASTER_PORT",
        )
    ]
