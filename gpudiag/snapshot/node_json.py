"""JSON ↔ model for schema 1.3's ``node`` (issue 19): identity, network, NCCL.

Absent or null in a snapshot older than 1.3: it then reads as None ("not collected");
so do 1.4's ``routes``, ``nccl_libs``, ``nccl_net_plugins``, ``ib_ports[].gids`` and
``rdma`` in a 1.3 snapshot.
"""

from __future__ import annotations

from typing import Any

from gpudiag.network import (
    HpcxInfo,
    IbGid,
    IbPort,
    LibraryFile,
    NetInterface,
    NodeInfo,
    RdmaDevice,
    RdmaStack,
    Route,
)
from gpudiag.snapshot.fields import SnapshotError, _list, _obj, _opt, _req, _str_list


def _interface(raw: object, where: str) -> NetInterface:
    d = _obj(raw, where)
    return NetInterface(
        name=_req(d, "name", str, where),
        operstate=_opt(d, "operstate", str, where),
        loopback=_opt(d, "loopback", bool, where),
        ipv4=_str_list(d, "ipv4", where),
    )


def _gid(raw: object, where: str) -> IbGid:
    d = _obj(raw, where)
    index = _req(d, "index", int, where)
    if index < 0:
        raise SnapshotError(f"{where}.index must not be negative, got {index}")
    return IbGid(index=index, gid=_req(d, "gid", str, where), type=_opt(d, "type", str, where))


def _ib_port(raw: object, where: str) -> IbPort:
    d = _obj(raw, where)
    port = _req(d, "port", int, where)
    return IbPort(
        device=_req(d, "device", str, where),
        port=port,
        state=_opt(d, "state", str, where),
        link_layer=_opt(d, "link_layer", str, where),
        gids=_items(d, "gids", where, _gid),
    )


def _route(raw: object, where: str) -> Route:
    d = _obj(raw, where)
    return Route(
        interface=_req(d, "interface", str, where),
        destination=_req(d, "destination", str, where),
        gateway=_opt(d, "gateway", str, where),
        metric=_req(d, "metric", int, where),
    )


def _library(raw: object, where: str) -> LibraryFile:
    d = _obj(raw, where)
    return LibraryFile(
        name=_req(d, "name", str, where),
        path=_req(d, "path", str, where),
        via=_req(d, "via", str, where),
    )


def _rdma_device(raw: object, where: str) -> RdmaDevice:
    d = _obj(raw, where)
    return RdmaDevice(
        device=_req(d, "device", str, where),
        fw_ver=_opt(d, "fw_ver", str, where),
        hca_type=_opt(d, "hca_type", str, where),
        board_id=_opt(d, "board_id", str, where),
    )


def _rdma(raw: object) -> RdmaStack | None:
    if raw is None:
        return None
    where = "node.rdma"
    d = _obj(raw, where)
    hpcx = None
    if d.get("hpcx") is not None:
        h = _obj(d["hpcx"], f"{where}.hpcx")
        hpcx = HpcxInfo(
            path=_req(h, "path", str, f"{where}.hpcx"),
            via=_req(h, "via", str, f"{where}.hpcx"),
            version=_opt(h, "version", str, f"{where}.hpcx"),
            ofed=_opt(h, "ofed", str, f"{where}.hpcx"),
        )
    return RdmaStack(
        kernel_release=_opt(d, "kernel_release", str, where),
        mlx5_core_loaded=_opt(d, "mlx5_core_loaded", bool, where),
        mlx5_core_version=_opt(d, "mlx5_core_version", str, where),
        mlx5_core_srcversion=_opt(d, "mlx5_core_srcversion", str, where),
        ofed=_opt(d, "ofed", str, where),
        libibverbs=_opt(d, "libibverbs", str, where),
        devices=_items(d, "devices", where, _rdma_device),
        hpcx=hpcx,
    )


def _rdma_to_json(rdma: RdmaStack | None) -> dict[str, Any] | None:
    if rdma is None:
        return None
    h = rdma.hpcx
    return {
        "kernel_release": rdma.kernel_release,
        "mlx5_core_loaded": rdma.mlx5_core_loaded,
        "mlx5_core_version": rdma.mlx5_core_version,
        "mlx5_core_srcversion": rdma.mlx5_core_srcversion,
        "ofed": rdma.ofed,
        "libibverbs": rdma.libibverbs,
        "devices": None
        if rdma.devices is None
        else [
            {"device": x.device, "fw_ver": x.fw_ver, "hca_type": x.hca_type, "board_id": x.board_id}
            for x in rdma.devices
        ],
        "hpcx": None
        if h is None
        else {"path": h.path, "via": h.via, "version": h.version, "ofed": h.ofed},
    }


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
        routes=_items(d, "routes", where, _route),
        nccl_libs=_items(d, "nccl_libs", where, _library),
        nccl_net_plugins=_items(d, "nccl_net_plugins", where, _library),
        rdma=_rdma(d.get("rdma")),
    )


def _libraries(libs: tuple[LibraryFile, ...] | None) -> list[dict[str, str]] | None:
    if libs is None:
        return None
    return [{"name": f.name, "path": f.path, "via": f.via} for f in libs]


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
            {
                "device": p.device,
                "port": p.port,
                "state": p.state,
                "link_layer": p.link_layer,
                "gids": None
                if p.gids is None
                else [{"index": g.index, "gid": g.gid, "type": g.type} for g in p.gids],
            }
            for p in node.ib_ports
        ],
        "nccl_env": dict(node.nccl_env),
        "master_addr_ips": None if node.master_addr_ips is None else list(node.master_addr_ips),
        "master_addr_error": node.master_addr_error,
        "nccl_version": node.nccl_version,
        "nccl_source": node.nccl_source,
        "routes": None
        if node.routes is None
        else [
            {
                "interface": r.interface,
                "destination": r.destination,
                "gateway": r.gateway,
                "metric": r.metric,
            }
            for r in node.routes
        ],
        "nccl_libs": _libraries(node.nccl_libs),
        "nccl_net_plugins": _libraries(node.nccl_net_plugins),
        "rdma": _rdma_to_json(node.rdma),
    }
