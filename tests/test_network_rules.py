"""``check``'s NET- rules (issue 19), table-driven over the node facts of schema 1.3."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpudiag.core.netif import parse_ifname
from gpudiag.core.network import multi_node, network_findings
from gpudiag.model import NetInterface, NodeInfo, Snapshot
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
