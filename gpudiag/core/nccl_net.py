"""NCCL's inter-node transports on one node: the routes its sockets take, the RoCE GID its
IB transport uses, and its network plugin (``NET-`` rules of snapshot 1.4, issue 19).

Pure functions of the snapshot's ``node`` facts and the job's environment, run by
:func:`gpudiag.core.network.network_findings` on a multi-node launch only (a single node
never opens NCCL's network) and, per node, by ``gpudiag fleet``.

Sources, NCCL environment variables (docs.nvidia.com/deeplearning/nccl/user-guide/docs/
env.html) and troubleshooting pages:

* ``NCCL_SOCKET_IFNAME`` and "Networking issues": NCCL picks interfaces by name, but
  the kernel sends by route; with two routes to one network on two interfaces, traffic
  bound to one interface's address leaves through the other, which peers with
  reverse-path filtering drop, and connections stall;
* ``NCCL_IB_GID_INDEX``: "the Global ID index used in RoCE mode" (``show_gids`` lists
  the table); an unused entry cannot address the port, and an ``IB/RoCE v1`` entry is
  not routable where NCCL expects RoCE v2 (``NCCL_IB_ROCE_VERSION_NUM``, default 2).
  Since NCCL 2.21 the default (-1) picks an entry itself. ``NCCL_IB_HCA`` narrows the
  devices (``mlx5_0:1,mlx5_1``; ``^`` excludes, ``=`` exact names);
* ``NCCL_NET_PLUGIN``: "either a suffix string or a library name"; a plugin that
  cannot be found leaves NCCL on its internal transports ("NET/Plugin: No plugin
  found").
"""

from __future__ import annotations

from collections.abc import Mapping

from gpudiag.core.netif import parse_ifname, usable
from gpudiag.network import IbPort, NodeInfo, Route

#: Ports named per finding before "and N more".
SHOWN = 6


def _var(env: Mapping[str, str], node: NodeInfo, key: str) -> str | None:
    """The job's value of ``key``; the snapshot's recorded one where the job has none."""
    return env.get(key) or node.nccl_env.get(key)


def duplicate_routes(routes: tuple[Route, ...]) -> list[tuple[str, list[Route]]]:
    """``[(destination, its routes)]`` for each destination routed through more than one
    interface, the route the kernel prefers (lowest metric, then first) first."""
    groups: dict[str, list[Route]] = {}
    for route in routes:
        groups.setdefault(route.destination, []).append(route)
    out = []
    for destination, group in groups.items():
        if len({r.interface for r in group}) > 1:
            out.append((destination, sorted(group, key=lambda r: r.metric)))
    return out


def route_problems(node: NodeInfo, env: Mapping[str, str]) -> list[str]:
    """One phrase per destination whose duplicate routes NCCL's sockets may trip over:
    NCCL may use an interface (its default choice, or ``NCCL_SOCKET_IFNAME``'s) that is
    not the one the kernel's preferred route leaves by."""
    if not node.routes:
        return []
    ifname = _var(env, node, "NCCL_SOCKET_IFNAME")
    nccl = (
        None
        if node.interfaces is None
        else {i.name for i in usable(node.interfaces, parse_ifname(ifname) if ifname else None)}
    )
    out = []
    for destination, group in duplicate_routes(node.routes):
        taken = group[0].interface
        others = [r.interface for r in group if r.interface != taken]
        if nccl is not None and not (nccl & set(others)):
            continue  # NCCL uses none of the interfaces the kernel would not send through
        listed = list(dict.fromkeys(r.interface for r in group))
        names = f"{', '.join(listed[:-1])} and {listed[-1]}"
        what = "the default route" if destination == "0.0.0.0/0" else f"routes to {destination}"
        out.append(f"{what} on {names} (the kernel sends through {taken})")
    return out


def hca_selects(text: str | None, port: IbPort) -> bool:
    """Whether ``NCCL_IB_HCA`` lets NCCL use this port (unset: every port)."""
    if not text or not text.strip():
        return True
    spec = parse_ifname(text)
    hit = False
    for item in spec.names:
        device, _, number = item.partition(":")
        named = port.device == device if spec.exact else port.device.startswith(device)
        if named and (not number or number == str(port.port)):
            hit = True
    return not hit if spec.exclude else hit


def gid_problems(node: NodeInfo, env: Mapping[str, str]) -> tuple[bool, list[str]]:
    """(any entry empty, one phrase per RoCE port ``NCCL_IB_GID_INDEX`` fails on)."""
    text = (_var(env, node, "NCCL_IB_GID_INDEX") or "").strip()
    if not text.lstrip("-").isdigit() or len(text) > 6 or int(text) < 0 or not node.ib_ports:
        return False, []  # unset, unreadable, or -1: NCCL chooses (2.21+)
    if (_var(env, node, "NCCL_IB_DISABLE") or "").strip() == "1":
        return False, []
    index = int(text)
    v1_ok = (_var(env, node, "NCCL_IB_ROCE_VERSION_NUM") or "").strip() == "1"
    hca = _var(env, node, "NCCL_IB_HCA")
    empty = False
    out = []
    for port in node.ib_ports:
        if port.link_layer != "Ethernet" or port.state != "ACTIVE" or port.gids is None:
            continue
        if not hca_selects(hca, port):
            continue
        entry = next((g for g in port.gids if g.index == index), None)
        where = f"{port.device} port {port.port}"
        used = ", ".join(f"{g.index} {g.type or '?'}" for g in port.gids[:8]) or "none"
        if entry is None:
            empty = True
            out.append(f"{where}: entry {index} is empty (used: {used})")
        elif entry.type and "v2" not in entry.type and not v1_ok:
            out.append(f"{where}: entry {index} is {entry.type}, not RoCE v2 (used: {used})")
    return empty, out


def plugin_state(node: NodeInfo) -> str | None:
    """``libnccl-net.so`` (the file NCCL would load) or ``no plugin``; None unrecorded."""
    plugins = node.nccl_net_plugins
    if plugins is None:
        return None
    if (node.nccl_env.get("NCCL_NET_PLUGIN") or "").strip().lower() == "none":
        return "no plugin (NCCL_NET_PLUGIN=none)"
    return plugins[0].path.rsplit("/", 1)[-1] if plugins else "no plugin"


def plugin_missing(node: NodeInfo, env: Mapping[str, str]) -> str | None:
    """The ``NCCL_NET_PLUGIN`` value whose plugin the loader finds nowhere, or None."""
    asked = (env.get("NCCL_NET_PLUGIN") or node.nccl_env.get("NCCL_NET_PLUGIN") or "").strip()
    recorded = (node.nccl_env.get("NCCL_NET_PLUGIN") or "").strip()
    if not asked or asked.lower() == "none" or node.nccl_net_plugins is None:
        return None
    # The search ran for the recorded value: it answers only that question.
    return asked if asked == recorded and not node.nccl_net_plugins else None
