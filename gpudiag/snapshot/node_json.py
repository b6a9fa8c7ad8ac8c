"""JSON ↔ model for schema 1.3's ``node`` (issue 19): identity, network, NCCL.

Absent or null in a snapshot older than 1.3: it then reads as None ("not collected").
"""

from __future__ import annotations

from typing import Any

from gpudiag.network import IbPort, NetInterface, NodeInfo
from gpudiag.snapshot.fields import SnapshotError, _list, _obj, _opt, _req, _str_list


def _interface(raw: object, where: str) -> NetInterface:
    d = _obj(raw, where)
    return NetInterface(
        name=_req(d, "name", str, where),
        operstate=_opt(d, "operstate", str, where),
        loopback=_opt(d, "loopback", bool, where),
        ipv4=_str_list(d, "ipv4", where),
    )


def _ib_port(raw: object, where: str) -> IbPort:
    d = _obj(raw, where)
    port = _req(d, "port", int, where)
    return IbPort(
        device=_req(d, "device", str, where),
        port=port,
        state=_opt(d, "state", str, where),
        link_layer=_opt(d, "link_layer", str, where),
    )


def _items(d: Any, key: str, where: str, build: Any) -> Any:
    if d.get(key) is None:
        return None
    return tuple(build(x, f"{where}.{key}[{i}]") for i, x in enumerate(_list(d, key, where)))


def node_from_json(raw: object) -> NodeInfo | None:
    """Validate and build the ``node`` object (None when absent or null)."""
    if raw is None:
        return None
    where = "node"
    d = _obj(raw, where)
    env = _opt(d, "nccl_env", dict, where) or {}
    for key, value in env.items():
        if not isinstance(value, str):
            raise SnapshotError(f"node.nccl_env.{key} must be a string")
    return NodeInfo(
        boot_id=_opt(d, "boot_id", str, where),
        os_name=_opt(d, "os_name", str, where),
        interfaces=_items(d, "interfaces", where, _interface),
        ib_ports=_items(d, "ib_ports", where, _ib_port),
        nccl_env={str(k): v for k, v in env.items()},
        master_addr_ips=_str_list(d, "master_addr_ips", where),
        master_addr_error=_opt(d, "master_addr_error", str, where),
        nccl_version=_opt(d, "nccl_version", str, where),
        nccl_source=_opt(d, "nccl_source", str, where),
    )


def node_to_json(node: NodeInfo | None) -> dict[str, Any] | None:
    """The snapshot JSON object of the node facts (None when not collected)."""
    if node is None:
        return None
    return {
        "boot_id": node.boot_id,
        "os_name": node.os_name,
        "interfaces": None
        if node.interfaces is None
        else [
            {
                "name": i.name,
                "operstate": i.operstate,
                "loopback": i.loopback,
                "ipv4": None if i.ipv4 is None else list(i.ipv4),
            }
            for i in node.interfaces
        ],
        "ib_ports": None
        if node.ib_ports is None
        else [
            {"device": p.device, "port": p.port, "state": p.state, "link_layer": p.link_layer}
            for p in node.ib_ports
        ],
        "nccl_env": dict(node.nccl_env),
        "master_addr_ips": None if node.master_addr_ips is None else list(node.master_addr_ips),
        "master_addr_error": node.master_addr_error,
        "nccl_version": node.nccl_version,
        "nccl_source": node.nccl_source,
    }
