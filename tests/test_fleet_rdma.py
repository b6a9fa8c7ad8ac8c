"""The RDMA driver stack across nodes (issue 19, "an InfiniBand driver that does not match
HPC-X"): FLEET-IB-DRIVER-SKEW, FLEET-HCA-FW-SKEW and FLEET-HPCX-OFED, table-driven over
``node.rdma`` facts (gpudiag/core/fleet_rdma.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpudiag.core.fleet import FleetNode, compare_fleet, label_nodes
from gpudiag.core.fleet_rdma import driver_stack, hca_firmware, hpcx_mismatch, hpcx_target
from gpudiag.model import HpcxInfo, RdmaDevice, Snapshot
from gpudiag.snapshot import load_snapshot

BASE = load_snapshot(str(Path(__file__).parent / "fixtures" / "fleet" / "node01.json"))
assert BASE.node is not None and BASE.node.rdma is not None
STACK = BASE.node.rdma
MLNX_2310 = "MLNX_OFED_LINUX-23.10-1.1.9.0"


def _snap(hostname: str = "n1", **rdma: Any) -> Snapshot:
    hpcx = rdma.pop("hpcx", STACK.hpcx)
    if isinstance(hpcx, str):
        hpcx = HpcxInfo(path=f"/opt/hpcx-{hpcx}", via="HPCX_DIR", version="2.x", ofed=hpcx)
    stack = dataclasses.replace(STACK, hpcx=hpcx, **rdma)
    assert BASE.node is not None
    node = dataclasses.replace(BASE.node, rdma=stack, boot_id=f"boot-{hostname}")
    return dataclasses.replace(BASE, hostname=hostname, node=node)


# (HPC-X built for, the node's ofed_info -s, mlx5_core's version, expected severity, words)
HPCX_CASES = [
    ("mlnx_ofed", MLNX_2310, "23.10-1.1.9", None, None),  # the healthy fixture
    ("MLNX_OFED_LINUX-4.7-1.0.0.1", MLNX_2310, "23.10-1.1.9", "warning",
     "HPC-X 2.x built for MLNX_OFED_LINUX-4.7-1.0.0.1 on MLNX_OFED_LINUX-23.10-1.1.9.0"),
    ("MLNX_OFED_LINUX-5.8-1.0.1.1", "MLNX_OFED_LINUX-5.8-3.0.7.0", "5.8-3.0.7", None, None),
    ("MLNX_OFED_LINUX-5.8-1.0.1.1", "MLNX_OFED_LINUX-5.9-0.5.6.0", "5.9-0.5.6", "warning",
     "on MLNX_OFED_LINUX-5.9-0.5.6.0"),
    # A major names an era: 5 covers rdma-core's 5.x and 23.x+, not 4.x's legacy verbs.
    ("MLNX_OFED_LINUX-5", MLNX_2310, "23.10-1.1.9", None, None),
    ("MLNX_OFED_LINUX-5", "MLNX_OFED_LINUX-4.9-7.1.0.0", "4.9-7.1.0", "warning",
     "built for MLNX_OFED_LINUX-5 on MLNX_OFED_LINUX-4.9-7.1.0.0"),
    # No user space to read (a container without ofed_info): the host's driver only, info.
    ("MLNX_OFED_LINUX-4.7-1.0.0.1", None, "5.8-3.0.7", "info", "on mlx5_core 5.8-3.0.7"),
    ("MLNX_OFED_LINUX-4.7-1.0.0.1", None, "4.7-3.2.9", None, None),
    ("mlnx_ofed", None, None, "info", "on the inbox driver (no MLNX_OFED or DOCA-OFED)"),
    ("doca_ofed", None, "5.15.0-105-generic", "info", "on the inbox driver"),  # = uname -r
    ("inbox", MLNX_2310, "23.10-1.1.9", "info", "built for inbox on MLNX_OFED_LINUX-23.10"),
    ("inbox", None, None, None, None),
    ("doca_ofed", "MLNX_OFED_LINUX-24.10-1.1.8.0", "24.10-1.1.8", None, None),
    ("doca_ofed", "OFED-internal-25.10-1.7.1", "25.10-1.7.1", None, None),
    ("mlnx_ofed", "OFED-internal-25.10-1.7.1", "25.10-1.7.1", None, None),
    ("MLNX_OFED_LINUX-23.10-0.5.5.0", "OFED-internal-24.10-1.1.4.0", "24.10-1.1.4", "warning",
     "on OFED-internal-24.10-1.1.4.0"),
    ("gcc13", MLNX_2310, "23.10-1.1.9", None, None),  # not an OFED word: nothing to say
    ("mlnx_ofed", "something else", "23.10-1.1.9", None, None),
]  # fmt: skip


@pytest.mark.parametrize(("built", "ofed", "module", "severity", "words"), HPCX_CASES)
def test_hpcx_against_the_nodes_ofed(
    built: str, ofed: str | None, module: str | None, severity: str | None, words: str | None
) -> None:
    got = hpcx_mismatch(_snap(hpcx=built, ofed=ofed, mlx5_core_version=module))
    if severity is None:
        assert got is None
        return
    assert got is not None and got[0] == severity and words is not None and words in got[1], got


@pytest.mark.parametrize(
    "rdma",
    [{"hpcx": None}, {"hpcx": HpcxInfo("/opt/hpcx", "/opt/hpcx", "2.20", None)},
     {"hpcx": "MLNX_OFED_LINUX-4.7-1.0.0.1", "ofed": None, "mlx5_core_loaded": False}],
)  # fmt: skip
def test_hpcx_says_nothing_without_facts(rdma: dict[str, Any]) -> None:
    assert hpcx_mismatch(_snap(**rdma)) is None
    assert hpcx_mismatch(dataclasses.replace(BASE, node=None)) is None


def test_hpcx_targets() -> None:
    assert hpcx_target("MLNX_OFED_LINUX-4.7-1.0.0.1") == ("MLNX_OFED", "4.7")
    assert hpcx_target("mlnx_ofed_linux-5") == ("MLNX_OFED", "5")
    assert hpcx_target("doca") == ("DOCA-OFED", None)
    assert hpcx_target(" inbox ") == ("inbox", None)
    assert hpcx_target("redhat8") is None


@pytest.mark.parametrize(
    ("rdma", "expected"),
    [({}, "MLNX_OFED_LINUX-23.10-1.1.9.0 (mlx5_core 23.10-1.1.9)"),
     ({"ofed": None, "mlx5_core_version": None}, "no ofed_info (inbox mlx5_core)"),
     ({"mlx5_core_version": "5.15.0-105-generic"}, f"{MLNX_2310} (inbox mlx5_core)"),
     ({"mlx5_core_loaded": False}, None), ({"mlx5_core_loaded": None}, None)],
)  # fmt: skip
def test_driver_stack(rdma: dict[str, Any], expected: str | None) -> None:
    assert driver_stack(_snap(**rdma)) == expected


@pytest.mark.parametrize(
    ("devices", "expected"),
    [(None, None), ((), None),
     ((RdmaDevice("mlx5_0", "28.39.1002", "MT4129"), RdmaDevice("mlx5_1", "28.39.1002", "MT4129")),
      ("MT4129 28.39.1002",)),
     ((RdmaDevice("mlx5_1", "20.39.1002", "MT4123"), RdmaDevice("mlx5_0", "28.39.1002", "MT4129"),
       RdmaDevice("rxe0", None, None), RdmaDevice("bnxt_re0", "227.0.134", None)),
      ("227.0.134", "MT4123 20.39.1002", "MT4129 28.39.1002"))],
)  # fmt: skip
def test_hca_firmware(devices: tuple[RdmaDevice, ...] | None, expected: Any) -> None:
    assert hca_firmware(_snap(devices=devices)) == expected


def _fleet(*snaps: Snapshot) -> list[tuple[str, str, str, str]]:
    nodes = [FleetNode(source=s.hostname or "?", snapshot=s) for s in snaps]
    return [(f.code, f.severity, f.subject or "", f.message)
            for f in compare_fleet(label_nodes(nodes))]  # fmt: skip


def test_identical_stacks_agree() -> None:
    assert _fleet(_snap("n1"), _snap("n2"), _snap("n3")) == []


def test_an_inbox_node_among_mlnx_ofed_nodes_is_named() -> None:
    inbox = _snap("n3", ofed=None, mlx5_core_version=None, hpcx="inbox")
    [(code, severity, subject, message)] = _fleet(_snap("n1"), _snap("n2"), inbox)
    assert (code, severity, subject) == ("FLEET-IB-DRIVER-SKEW", "warning", "n3")
    assert "n3 has no ofed_info (inbox mlx5_core); the other 2 nodes MLNX_OFED_LINUX" in message


def test_a_node_without_the_driver_or_facts_is_not_a_skew() -> None:
    off = _snap("n3", mlx5_core_loaded=False, devices=())
    n4 = _snap("n4")
    assert n4.node is not None
    old = dataclasses.replace(n4, node=dataclasses.replace(n4.node, rdma=None))
    assert _fleet(_snap("n1"), _snap("n2"), off, old) == []


def test_hpcx_findings_split_by_severity() -> None:
    warn = _snap("n2", hpcx="MLNX_OFED_LINUX-4.7-1.0.0.1")
    info = _snap("n3", hpcx="MLNX_OFED_LINUX-4.7-1.0.0.1", ofed=None, mlx5_core_version="5.8-3.0.7")
    got = _fleet(_snap("n1"), warn, info)
    hpcx = [(c, s, subj) for c, s, subj, _ in got if c == "FLEET-HPCX-OFED"]
    assert hpcx == [("FLEET-HPCX-OFED", "warning", "n2"), ("FLEET-HPCX-OFED", "info", "n3")]
    # n3's user space is unknown, its driver differs: the driver stack skew names it too.
    assert [(c, subj) for c, _, subj, _ in got if c != "FLEET-HPCX-OFED"] == [
        ("FLEET-IB-DRIVER-SKEW", "n3")
    ]


def test_firmware_skew_names_the_odd_nodes() -> None:
    old = (RdmaDevice("mlx5_0", "20.35.1012", "MT4123"),)
    got = _fleet(*(_snap(f"n{i}") for i in range(1, 5)), _snap("n5", devices=old),
                 _snap("n6", devices=old))  # fmt: skip
    [(code, severity, subject, message)] = got
    assert (code, severity, subject) == ("FLEET-HCA-FW-SKEW", "warning", "n5,n6")
    assert message == ("HCA firmware differs between nodes: n5 and n6 have MT4123 20.35.1012; "
                       "the other 4 nodes MT4123 20.39.1002.")  # fmt: skip
