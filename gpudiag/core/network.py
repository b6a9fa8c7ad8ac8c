"""The network NCCL and torch's rendezvous will use on this node (``NET-``, issue 19).

Pure functions of the snapshot's ``node`` facts (schema 1.3) and the job's environment.
Run by ``check`` with the DDP rules (a launcher variable or a DDP option present): a
single-process job never opens NCCL's sockets, so a stale variable is no error there.

Sources: NCCL environment variables (``NCCL_SOCKET_IFNAME``: prefixes, ``^``, ``=``; by
default ``lo`` and ``docker*`` are avoided unless nothing else exists; a user list
replaces that default, and since NCCL 2.3.5 ``^docker0`` no longer keeps ``lo`` out);
torch.distributed's ``env://`` initialisation (``MASTER_ADDR`` is where every rank
finds rank 0's store); Debian's ``/etc/hosts`` maps the machine's own name to
127.0.1.1 (Debian reference manual, "The hostname resolution").
"""

from __future__ import annotations

from collections.abc import Mapping

from gpudiag.core.nccl_net import SHOWN, gid_problems, plugin_missing, route_problems
from gpudiag.core.netif import is_loopback, loopback_address, parse_ifname, usable
from gpudiag.model import Finding, Snapshot

_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


def _int(env: Mapping[str, str], key: str) -> int | None:
    text = (env.get(key) or "").strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else None


def multi_node(env: Mapping[str, str], nproc_per_node: int | None = None) -> str | None:
    """Why the launch spans more than one node (a phrase), or None.

    ``WORLD_SIZE`` above the local size (``LOCAL_WORLD_SIZE``, else ``--nproc-per-node``),
    Slurm's node count, or Open MPI's world above its local size. The number of GPUs
    visible here is not a local size: Slurm's per-task binding shows each rank one.
    """
    world = _int(env, "WORLD_SIZE")
    local = _int(env, "LOCAL_WORLD_SIZE") or nproc_per_node
    if world is not None and local and world > local:
        return f"WORLD_SIZE={world} > {local} local ranks"
    for key in ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"):
        nodes = _int(env, key)
        if nodes is not None and nodes > 1:
            return f"{key}={nodes}"
    ompi, ompi_local = _int(env, "OMPI_COMM_WORLD_SIZE"), _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE")
    if ompi is not None and ompi_local and ompi > ompi_local:
        return f"OMPI_COMM_WORLD_SIZE={ompi} > OMPI_COMM_WORLD_LOCAL_SIZE={ompi_local}"
    return None


def network_findings(
    snapshot: Snapshot, env: Mapping[str, str], *, nproc_per_node: int | None = None
) -> list[Finding]:
    """``NET-`` findings: NCCL_SOCKET_IFNAME vs the interfaces, loopback on a multi-node
    launch, and where MASTER_ADDR leads; on a multi-node launch also duplicate routes,
    the RoCE GID index and the NCCL net plugin (:mod:`gpudiag.core.nccl_net`, schema
    1.4). Nothing when the snapshot has no node facts."""
    node = snapshot.node
    if node is None:
        return []
    out: list[Finding] = []
    multi = multi_node(env, nproc_per_node)
    # The job's variable; a replayed snapshot's own where the environment has none.
    ifname = env.get("NCCL_SOCKET_IFNAME") or node.nccl_env.get("NCCL_SOCKET_IFNAME")
    if node.interfaces is not None:
        spec = parse_ifname(ifname) if ifname else None
        picked = usable(node.interfaces, spec)
        present = ", ".join(i.name for i in node.interfaces) or "none"
        if spec is not None and not picked:
            out.append(Finding(
                code="NET-IFNAME-MISSING", severity="error",
                message=f"NCCL_SOCKET_IFNAME={ifname} matches no interface with an IPv4 "
                        f"address on this node (present: {present}): NCCL finds no socket "
                        "interface and fails at communicator set-up.",
                fix="name a prefix this node has (ip -br addr), e.g. NCCL_SOCKET_IFNAME=eth; "
                    "'=' matches exact names, '^' excludes.",
                subject="NCCL_SOCKET_IFNAME",
            ))  # fmt: skip
        elif multi and (not picked or all(is_loopback(i) for i in picked)):
            chosen = (
                ", ".join(i.name for i in picked)
                if picked
                else "no other interface has an IPv4 address"
            )
            why = f"NCCL_SOCKET_IFNAME={ifname} leaves" if ifname else "this node has"
            out.append(Finding(
                code="NET-LOOPBACK-MULTINODE", severity="error",
                message=f"A multi-node launch ({multi}), but {why} only loopback for NCCL "
                        f"({chosen}; present: {present}): the other nodes cannot reach "
                        "127.0.0.1 here, and the job hangs at its first collective.",
                fix="give NCCL a routable interface (NCCL_SOCKET_IFNAME=eth0 or ib0); since "
                    "NCCL 2.3.5 ^docker0 no longer excludes lo.",
                subject="NCCL_SOCKET_IFNAME",
            ))  # fmt: skip
    master = env.get("MASTER_ADDR")
    if multi and master:
        ips = node.master_addr_ips if node.master_addr == master else None
        error = node.master_addr_error if node.master_addr == master else None
        own = master in (snapshot.hostname, (snapshot.hostname or "").split(".")[0])
        literal = master.lower() in _LOOPBACK_NAMES or loopback_address(master)
        if literal or (ips and all(loopback_address(a) for a in ips)):
            where = (
                master if literal else f"{master}, which resolves to {ips[0] if ips else '?'} here"
            )
            out.append(Finding(
                code="NET-MASTER-ADDR-LOOPBACK",
                severity="warning" if own and not literal else "error",
                message=f"A multi-node launch ({multi}) with MASTER_ADDR={where} (loopback): "
                        + ("this node's own name maps to loopback in /etc/hosts, so a Gloo or "
                           "NCCL bootstrap socket bound to it is unreachable from the others."
                           if own and not literal else
                           "ranks on this node look for rank 0's store on themselves and the "
                           "rendezvous times out."),
                fix="set MASTER_ADDR to rank 0's routable address or DNS name (not localhost, "
                    "not a name /etc/hosts maps to 127.0.1.1).",
                subject="MASTER_ADDR",
            ))  # fmt: skip
        elif error:
            out.append(Finding(
                code="NET-MASTER-ADDR-UNRESOLVED", severity="error",
                message=f"MASTER_ADDR={master} does not resolve on this node ({error}): "
                        "torch's env:// rendezvous cannot reach rank 0.",
                fix="use rank 0's IP address, or a name every node's resolver knows.",
                subject="MASTER_ADDR",
            ))  # fmt: skip
    if multi:
        out += _transport_findings(snapshot, env, multi)
    return out


def _transport_findings(snapshot: Snapshot, env: Mapping[str, str], multi: str) -> list[Finding]:
    node = snapshot.node
    assert node is not None
    out: list[Finding] = []
    routes = route_problems(node, env)
    if routes:
        out.append(Finding(
            code="NET-DUPLICATE-ROUTE", severity="warning",
            message=f"A multi-node launch ({multi}) on a node with several routes to one "
                    f"network: {'; '.join(routes[:SHOWN])}. NCCL picks its socket interface "
                    "by name, but the kernel sends by route: traffic NCCL binds to another "
                    "interface's address leaves through the route's, and peers that filter "
                    "by reverse path drop it (connections stall at set-up).",
            fix="give each interface its own subnet (one route per network), or set "
                "NCCL_SOCKET_IFNAME to the interface the route uses; `ip route get PEER` "
                "shows the one taken.",
            subject="NCCL_SOCKET_IFNAME",
        ))  # fmt: skip
    empty, gids = gid_problems(node, env)
    if gids:
        value = env.get("NCCL_IB_GID_INDEX") or node.nccl_env.get("NCCL_IB_GID_INDEX")
        out.append(Finding(
            code="NET-IB-GID-INDEX", severity="error" if empty else "warning",
            message=f"NCCL_IB_GID_INDEX={value} on this node's RoCE ports: "
                    f"{'; '.join(gids[:SHOWN])}. "
                    + ("An empty entry cannot address the port: NCCL's IB transport fails "
                       "to connect its queue pairs." if empty else
                       "RoCE v1 is not routable between subnets, where NCCL expects v2 "
                       "(NCCL_IB_ROCE_VERSION_NUM defaults to 2)."),
            fix="set NCCL_IB_GID_INDEX to a RoCE v2 entry that every port has (show_gids, "
                "or /sys/class/infiniband/DEV/ports/N/gid_attrs/types), or unset it: since "
                "NCCL 2.21 the default (-1) picks one.",
            subject="NCCL_IB_GID_INDEX",
        ))  # fmt: skip
    missing = plugin_missing(node, env)
    if missing:
        out.append(Finding(
            code="NET-PLUGIN-MISSING", severity="warning",
            message=f"NCCL_NET_PLUGIN={missing}, but no such NCCL network plugin is on this "
                    "node's library path (LD_LIBRARY_PATH, the ld.so cache, /lib, /usr/lib): "
                    "NCCL logs 'NET/Plugin: No plugin found' and falls back to its internal "
                    "IB or socket transport, at a fraction of the plugin's bandwidth.",
            fix="add the plugin's folder to LD_LIBRARY_PATH on every node (e.g. "
                "$HPCX_DIR/nccl_spectrum-x_plugin/lib, /opt/amazon/ofi-nccl/lib), or give "
                "NCCL_NET_PLUGIN the library's path.",
            subject="NCCL_NET_PLUGIN",
        ))  # fmt: skip
    return out
