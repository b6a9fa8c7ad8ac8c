"""``check``'s NET- rules (issue 19), table-driven over the node facts of schema 1.3 (and
1.4's routes, RoCE GID tables and NCCL net plugin files)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gpudiag.core.netif import parse_ifname
from gpudiag.core.network import multi_node, network_findings
from gpudiag.model import IbGid, IbPort, LibraryFile, NetInterface, NodeInfo, Route, Snapshot
from gpudiag.snapshot import load_snapshot

from .pinned import run_cli

FLEET = Path(__file__).parent / "fixtures" / "fleet"
ETH = NetInterface("eth0", "up", False, ("10.0.0.5/24",))
IB = NetInterface("ib0", "up", False, ("10.1.0.5/16",))
DOCKER = NetInterface("docker0", "up", False, ("172.17.0.1/16",))
LO = NetInterface("lo", "unknown", True, ("127.0.0.1/8",))
BARE = NetInterface("eth1", "up", False, ())


def _snap(*ifaces: NetInterface, ips: tuple[str, ...] | None = None, err: str | None = None,
          master: str = "node01") -> Snapshot:  # fmt: skip
    node = NodeInfo(
        interfaces=ifaces,
        nccl_env={"MASTER_ADDR": master},
        master_addr_ips=ips,
        master_addr_error=err,
    )
    return Snapshot(hostname="node02", node=node)


MULTI = {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "MASTER_ADDR": "node01"}
SINGLE = {"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "8", "MASTER_ADDR": "node01"}

# (id, snapshot, environment, expected (code, severity) pairs)
CASES = [
    ("ifname-ok", _snap(ETH, LO), {**MULTI, "NCCL_SOCKET_IFNAME": "eth"}, []),
    ("ifname-missing", _snap(ETH, LO), {**SINGLE, "NCCL_SOCKET_IFNAME": "ib"},
     [("NET-IFNAME-MISSING", "error")]),
    ("ifname-exact-missing", _snap(ETH, LO), {**SINGLE, "NCCL_SOCKET_IFNAME": "=eth"},
     [("NET-IFNAME-MISSING", "error")]),
    ("ifname-exact-ok", _snap(ETH, LO), {**SINGLE, "NCCL_SOCKET_IFNAME": "=eth0"}, []),
    ("ifname-no-ipv4", _snap(BARE, LO), {**SINGLE, "NCCL_SOCKET_IFNAME": "eth"},
     [("NET-IFNAME-MISSING", "error")]),
    ("lo-multi", _snap(ETH, LO), {**MULTI, "NCCL_SOCKET_IFNAME": "lo"},
     [("NET-LOOPBACK-MULTINODE", "error")]),
    ("lo-single", _snap(ETH, LO), {**SINGLE, "NCCL_SOCKET_IFNAME": "lo"}, []),
    # Since NCCL 2.3.5 ^docker0 no longer excludes lo: with only docker0 and lo, lo is left.
    ("exclude-docker-leaves-lo", _snap(DOCKER, LO), {**MULTI, "NCCL_SOCKET_IFNAME": "^docker"},
     [("NET-LOOPBACK-MULTINODE", "error")]),
    ("exclude-docker-eth-left", _snap(ETH, DOCKER, LO), {**MULTI, "NCCL_SOCKET_IFNAME": "^docker"},
     []),
    ("only-loopback-multi", _snap(LO), MULTI, [("NET-LOOPBACK-MULTINODE", "error")]),
    ("only-loopback-single", _snap(LO), SINGLE, []),
    ("master-loopback", _snap(ETH, LO, ips=("127.0.1.1",)), MULTI,
     [("NET-MASTER-ADDR-LOOPBACK", "error")]),
    ("master-own-name-loopback", _snap(ETH, LO, ips=("127.0.1.1",), master="node02"),
     {**MULTI, "MASTER_ADDR": "node02"}, [("NET-MASTER-ADDR-LOOPBACK", "warning")]),
    ("master-localhost", _snap(ETH, LO), {**MULTI, "MASTER_ADDR": "localhost"},
     [("NET-MASTER-ADDR-LOOPBACK", "error")]),
    ("master-loopback-single", _snap(ETH, LO, ips=("127.0.1.1",)), SINGLE, []),
    ("master-routable", _snap(ETH, LO, ips=("10.0.0.1",)), MULTI, []),
    ("master-unresolved", _snap(ETH, LO, err="Name or service not known"), MULTI,
     [("NET-MASTER-ADDR-UNRESOLVED", "error")]),
    # The snapshot resolved another MASTER_ADDR than the job's: its answer is not used.
    ("master-other-name", _snap(ETH, LO, ips=("127.0.1.1",), master="other"), MULTI, []),
    ("no-node-facts", Snapshot(), {**MULTI, "NCCL_SOCKET_IFNAME": "ib"}, []),
]  # fmt: skip


@pytest.mark.parametrize(("snap", "env", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_network_rules(
    snap: Snapshot, env: dict[str, str], expected: list[tuple[str, str]]
) -> None:
    got = [(f.code, f.severity) for f in network_findings(snap, env)]
    assert got == expected


@pytest.mark.parametrize(
    ("env", "nproc", "multi"),
    [
        ({"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}, None, True),
        ({"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "8"}, None, False),
        ({"WORLD_SIZE": "16"}, 8, True),
        ({"WORLD_SIZE": "16"}, None, False),  # no local size known: not guessed
        ({"SLURM_JOB_NUM_NODES": "2"}, None, True),
        ({"SLURM_NNODES": "1"}, None, False),
        ({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}, None, True),
        ({"WORLD_SIZE": "x16", "LOCAL_WORLD_SIZE": "8"}, None, False),
    ],
)
def test_multi_node(env: dict[str, str], nproc: int | None, multi: bool) -> None:
    assert (multi_node(env, nproc) is not None) is multi


@pytest.mark.parametrize(
    ("text", "name", "ok"),
    [("eth", "eth0", True), ("eth", "ens3", False), ("^docker", "docker0", False),
     ("^docker", "lo", True), ("=eth0", "eth0", True), ("=eth0", "eth01", False),
     ("^=eth0", "eth01", True), ("^=eth0", "eth0", False), ("ib,eth", "eth2", True)],
)  # fmt: skip
def test_ifname_semantics(text: str, name: str, ok: bool) -> None:
    assert parse_ifname(text).matches(name) is ok


def test_check_runs_them_for_a_ddp_launch_only() -> None:
    path = str(FLEET / "node09-no-ib-interface.json")
    env = {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "RANK": "8", "LOCAL_RANK": "0",
           "MASTER_ADDR": "node01", "MASTER_PORT": "29500", "NCCL_SOCKET_IFNAME": "ib"}  # fmt: skip
    code, out, _ = run_cli(["check", "--snapshot", path, "--json"], env)
    assert "NET-IFNAME-MISSING" in out and code == 1
    code, out, _ = run_cli(["check", "--snapshot", path, "--json"], {"NCCL_SOCKET_IFNAME": "ib"})
    assert "NET-IFNAME-MISSING" not in out and code == 0


def test_replayed_snapshot_uses_its_own_ifname() -> None:
    snap = load_snapshot(str(FLEET / "node09-no-ib-interface.json"))
    assert snap.node is not None
    got = network_findings(snap, {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"})
    assert [f.code for f in got] == ["NET-IFNAME-MISSING"]
    clean = dataclasses.replace(snap, node=dataclasses.replace(snap.node, nccl_env={}))
    assert network_findings(clean, {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}) == []


# ---- schema 1.4: routes, the RoCE GID index, the NCCL net plugin (gpudiag.core.nccl_net)

IB1 = NetInterface("ib1", "up", False, ("10.1.1.5/16",))
ETH1 = NetInterface("eth1", "up", False, ("10.0.0.6/24",))
LIB = LibraryFile("libnccl-net-ofi.so", "/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so",
                  "LD_LIBRARY_PATH")  # fmt: skip


def _route(iface: str, dest: str, metric: int = 0, gw: str | None = None) -> Route:
    return Route(iface, dest, gw, metric)


IB_ROUTES = (_route("ib0", "10.1.0.0/16"), _route("ib1", "10.1.0.0/16"))
GIDS = (
    IbGid(0, "fe80:0000:0000:0000:a288:c2ff:fe3b:5019", "IB/RoCE v1"),
    IbGid(1, "fe80:0000:0000:0000:a288:c2ff:fe3b:5019", "RoCE v2"),
    IbGid(2, "0000:0000:0000:0000:0000:ffff:0a01:0013", "IB/RoCE v1"),
    IbGid(3, "0000:0000:0000:0000:0000:ffff:0a01:0013", "RoCE v2"),
)
ROCE = IbPort("mlx5_0", 1, "ACTIVE", "Ethernet", GIDS)


def _node(
    ifaces: tuple[NetInterface, ...] = (ETH, IB, IB1, LO),
    routes: tuple[Route, ...] | None = IB_ROUTES,
    ports: tuple[IbPort, ...] = (),
    plugins: tuple[LibraryFile, ...] | None = None,
    **env: str,
) -> Snapshot:
    node = NodeInfo(interfaces=ifaces, routes=routes, ib_ports=ports, nccl_net_plugins=plugins,
                    nccl_env={"MASTER_ADDR": "node01", **env})  # fmt: skip
    return Snapshot(hostname="node02", node=node)


def _gid(port: IbPort = ROCE, **env: str) -> Snapshot:
    return _node(routes=None, ports=(port,), **env)


# (id, snapshot, the job's environment, expected (code, severity) pairs)
TRANSPORT_CASES = [
    ("dup-route-both-ib", _node(), {**MULTI, "NCCL_SOCKET_IFNAME": "ib"},
     [("NET-DUPLICATE-ROUTE", "warning")]),
    ("dup-route-nccl-on-the-route-taken", _node(), {**MULTI, "NCCL_SOCKET_IFNAME": "=ib0"}, []),
    ("dup-route-nccl-on-the-other", _node(), {**MULTI, "NCCL_SOCKET_IFNAME": "=ib1"},
     [("NET-DUPLICATE-ROUTE", "warning")]),
    ("dup-route-lower-metric-wins",
     _node(routes=(_route("ib0", "10.1.0.0/16", 100), _route("ib1", "10.1.0.0/16", 0))),
     {**MULTI, "NCCL_SOCKET_IFNAME": "=ib1"}, []),
    ("dup-default-route", _node(ifaces=(ETH, ETH1, LO), routes=(
        _route("eth0", "0.0.0.0/0", gw="10.0.0.254"), _route("eth1", "0.0.0.0/0", gw="10.0.0.253"))),
     MULTI, [("NET-DUPLICATE-ROUTE", "warning")]),
    ("dup-route-one-node", _node(), {**SINGLE, "NCCL_SOCKET_IFNAME": "ib"}, []),
    ("one-route-per-network", _node(routes=(_route("ib0", "10.1.0.0/16"),
                                            _route("eth0", "10.0.0.0/24"))),
     {**MULTI, "NCCL_SOCKET_IFNAME": "ib"}, []),
    ("routes-unrecorded", _node(routes=None), {**MULTI, "NCCL_SOCKET_IFNAME": "ib"}, []),
    ("gid-empty-entry", _gid(), {**MULTI, "NCCL_IB_GID_INDEX": "5"}, [("NET-IB-GID-INDEX", "error")]),
    ("gid-roce-v1", _gid(), {**MULTI, "NCCL_IB_GID_INDEX": "2"}, [("NET-IB-GID-INDEX", "warning")]),
    ("gid-v1-asked-for", _gid(), {**MULTI, "NCCL_IB_GID_INDEX": "2",
                                  "NCCL_IB_ROCE_VERSION_NUM": "1"}, []),
    ("gid-roce-v2", _gid(), {**MULTI, "NCCL_IB_GID_INDEX": "3"}, []),
    ("gid-auto", _gid(), {**MULTI, "NCCL_IB_GID_INDEX": "-1"}, []),
    ("gid-recorded-in-snapshot", _gid(NCCL_IB_GID_INDEX="5"), MULTI,
     [("NET-IB-GID-INDEX", "error")]),
    ("gid-infiniband-port", _gid(dataclasses.replace(ROCE, link_layer="InfiniBand")),
     {**MULTI, "NCCL_IB_GID_INDEX": "5"}, []),
    ("gid-port-down", _gid(dataclasses.replace(ROCE, state="DOWN")),
     {**MULTI, "NCCL_IB_GID_INDEX": "5"}, []),
    ("gid-table-unread", _gid(dataclasses.replace(ROCE, gids=None)),
     {**MULTI, "NCCL_IB_GID_INDEX": "5"}, []),
    ("gid-hca-excludes-it", _gid(), {**MULTI, "NCCL_IB_GID_INDEX": "5", "NCCL_IB_HCA": "^mlx5_0"},
     []),
    ("gid-hca-another-port", _gid(), {**MULTI, "NCCL_IB_GID_INDEX": "5",
                                      "NCCL_IB_HCA": "mlx5_0:2"}, []),
    ("gid-hca-this-port", _gid(), {**MULTI, "NCCL_IB_GID_INDEX": "5", "NCCL_IB_HCA": "=mlx5_0:1"},
     [("NET-IB-GID-INDEX", "error")]),
    ("gid-ib-disabled", _gid(), {**MULTI, "NCCL_IB_GID_INDEX": "5", "NCCL_IB_DISABLE": "1"}, []),
    ("gid-one-node", _gid(), {**SINGLE, "NCCL_IB_GID_INDEX": "5"}, []),
    ("plugin-missing", _node(routes=None, plugins=(), NCCL_NET_PLUGIN="ofi"),
     {**MULTI, "NCCL_NET_PLUGIN": "ofi"}, [("NET-PLUGIN-MISSING", "warning")]),
    ("plugin-found", _node(routes=None, plugins=(LIB,), NCCL_NET_PLUGIN="ofi"),
     {**MULTI, "NCCL_NET_PLUGIN": "ofi"}, []),
    ("plugin-none-asked", _node(routes=None, plugins=()), MULTI, []),
    ("plugin-disabled", _node(routes=None, plugins=(), NCCL_NET_PLUGIN="none"),
     {**MULTI, "NCCL_NET_PLUGIN": "none"}, []),
    # The search ran for another value than the job's: it does not answer the job's.
    ("plugin-searched-for-another", _node(routes=None, plugins=(), NCCL_NET_PLUGIN="aws"),
     {**MULTI, "NCCL_NET_PLUGIN": "ofi"}, []),
    ("plugin-unrecorded", _node(routes=None, plugins=None, NCCL_NET_PLUGIN="ofi"),
     {**MULTI, "NCCL_NET_PLUGIN": "ofi"}, []),
    ("plugin-missing-one-node", _node(routes=None, plugins=(), NCCL_NET_PLUGIN="ofi"),
     {**SINGLE, "NCCL_NET_PLUGIN": "ofi"}, []),
]  # fmt: skip


@pytest.mark.parametrize(("snap", "env", "expected"), [c[1:] for c in TRANSPORT_CASES],
                         ids=[c[0] for c in TRANSPORT_CASES])  # fmt: skip
def test_transport_rules(
    snap: Snapshot, env: dict[str, str], expected: list[tuple[str, str]]
) -> None:
    got = [(f.code, f.severity) for f in network_findings(snap, env)]
    assert got == expected


def test_transport_messages_name_the_fact() -> None:
    dup = network_findings(_node(), {**MULTI, "NCCL_SOCKET_IFNAME": "ib"})[0]
    assert "routes to 10.1.0.0/16 on ib0 and ib1 (the kernel sends through ib0)" in dup.message
    gid = network_findings(_gid(), {**MULTI, "NCCL_IB_GID_INDEX": "5"})[0]
    assert "mlx5_0 port 1: entry 5 is empty (used: 0 IB/RoCE v1, 1 RoCE v2" in gid.message
    v1 = network_findings(_gid(), {**MULTI, "NCCL_IB_GID_INDEX": "2"})[0]
    assert "entry 2 is IB/RoCE v1, not RoCE v2" in v1.message
    plugin = network_findings(_node(routes=None, plugins=(), NCCL_NET_PLUGIN="ofi"),
                              {**MULTI, "NCCL_NET_PLUGIN": "ofi"})[0]  # fmt: skip
    assert plugin.message.startswith("NCCL_NET_PLUGIN=ofi, but no such NCCL network plugin")


@pytest.mark.parametrize(
    ("fixture", "code", "severity"),
    [("node18-duplicate-route", "NET-DUPLICATE-ROUTE", "warning"),
     ("node19-roce-gid-v1", "NET-IB-GID-INDEX", "warning")],
)  # fmt: skip
def test_check_on_the_fleet_fixtures(fixture: str, code: str, severity: str) -> None:
    env = {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "RANK": "8", "LOCAL_RANK": "0",
           "MASTER_ADDR": "node01", "MASTER_PORT": "29500"}  # fmt: skip
    _, out, _ = run_cli(["check", "--snapshot", str(FLEET / f"{fixture}.json"), "--json"], env)
    net = [(f["code"], f["severity"]) for f in json.loads(out)["findings"]
           if f["code"].startswith("NET-")]  # fmt: skip
    assert net == [(code, severity)]
