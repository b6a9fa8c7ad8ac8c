"""``gpudiag fleet --snapshots`` (issue 19): each kind of skew named on its odd node, golden
output over tests/fixtures/fleet/, exit codes, 100 columns, and linear cost (1,000 nodes)."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

from gpudiag.core.fleet import FleetNode, compare_fleet, label_nodes, names
from gpudiag.snapshot import load_snapshot

from .pinned import assert_golden, run_cli, transcript_entry

FLEET = Path(__file__).parent / "fixtures" / "fleet"
ALL = sorted(p.name for p in FLEET.glob("*.json"))
BASE = ["node01.json", "node02.json"]


@pytest.fixture(autouse=True)
def _in_fleet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(FLEET)


# (odd fixture, the code it must raise, words its message must hold besides the node's name)
SKEWS = [
    ("node03-driver", "FLEET-DRIVER-SKEW", ["535.104.05", "550.54.15"]),
    ("node04-seven-gpus", "FLEET-GPU-COUNT", ["7 GPUs", "the other 2 nodes 8 GPUs"]),
    ("node05-torch", "FLEET-TORCH-SKEW", ["2.3.1+cu121", "2.4.1+cu124"]),
    ("node06-nccl", "FLEET-NCCL-SKEW", ["2.20.5", "2.21.5"]),
    ("node07-mig", "FLEET-GPU-MIG", ["MIG enabled on GPU 0"]),
    ("node08-exclusive", "FLEET-GPU-COMPUTE-MODE", ["GPU 2 Exclusive_Process"]),
    ("node09-no-ib-interface", "FLEET-IFNAME-MISSING", ["NCCL_SOCKET_IFNAME=ib", "eth0, lo"]),
    ("node09-no-ib-interface", "FLEET-IB-PARTIAL", ["no active InfiniBand/RoCE port"]),
    ("node10-gpu-lost", "FLEET-GPU-LOST", ["GPU 5 lost"]),
    ("node11-ecc", "FLEET-GPU-ECC", ["uncorrectable ECC errors on GPU 6"]),
    ("node12-loopback-only", "FLEET-NO-IPV4", ["no IPv4 address outside loopback"]),
    ("node13-same-hostname", "FLEET-DUPLICATE-HOSTNAME", ["node01", "node13-same-hostname"]),
    ("node14-same-boot-id", "FLEET-DUPLICATE-BOOT-ID", ["node02", "node14-same-boot-id"]),
    ("node15-master-loopback", "FLEET-MASTER-ADDR", ["127.0.1.1 (loopback)"]),
    ("node16-image", "FLEET-IMAGE-SKEW", ["Rocky Linux 8.9", "Ubuntu 22.04.4 LTS"]),
    (
        "node17-no-net-plugin",
        "FLEET-NET-PLUGIN-SKEW",
        ["no plugin", "the other 2 nodes libnccl-net.so"],
    ),
    (
        "node20-ofed",
        "FLEET-IB-DRIVER-SKEW",
        ["MLNX_OFED_LINUX-5.8-3.0.7.0 (mlx5_core 5.8-3.0.7)",
         "the other 2 nodes MLNX_OFED_LINUX-23.10-1.1.9.0 (mlx5_core 23.10-1.1.9)"],
    ),
    ("node21-hca-fw", "FLEET-HCA-FW-SKEW", ["MT4123 20.35.1012", "the other 2 nodes MT4123 20.39.1002"]),
    ("node22-hpcx-ofed", "FLEET-HPCX-OFED",
     ["HPC-X 2.8.1 built for MLNX_OFED_LINUX-4.7-1.0.0.1 on MLNX_OFED_LINUX-23.10-1.1.9.0"]),
]  # fmt: skip


def _compare(files: list[str]) -> list:  # type: ignore[type-arg]
    nodes = [FleetNode(source=f.removesuffix(".json"), snapshot=load_snapshot(f)) for f in files]
    return compare_fleet(label_nodes(nodes))


def test_identical_nodes_agree() -> None:
    assert _compare(BASE) == []
    code, out, err = run_cli(["fleet", "--snapshots", *BASE])
    assert code == 0 and err == "" and "The nodes agree" in out


@pytest.mark.parametrize(("odd", "code", "words"), SKEWS, ids=[f"{s[0]}-{s[1]}" for s in SKEWS])
def test_each_skew_names_the_odd_node_and_fact(odd: str, code: str, words: list[str]) -> None:
    findings = _compare([*BASE, f"{odd}.json"])
    hits = [f for f in findings if f.code == code]
    assert len(hits) == 1, [f.code for f in findings]
    node = odd.split("-", 1)[0]
    assert node in hits[0].message or odd in hits[0].message
    for word in words:
        assert word in hits[0].message, hits[0].message
    # The base nodes are not blamed (named as "the others" at most).
    assert "node02 has" not in hits[0].message


def test_odd_node_exits_1_and_json_names_it() -> None:
    code, out, err = run_cli(["fleet", "--snapshots", *BASE, "node05-torch.json", "--json"])
    # as check --json (issue 20): why it failed goes to stderr, the JSON stays clean
    assert code == 1 and "FLEET-TORCH-SKEW" in err and "fleet failed: 1 error(s)" in err
    doc = json.loads(out)
    assert doc["schema"] == "gpudiag-fleet/1"
    assert [n["node"] for n in doc["nodes"]] == ["node01", "node02", "node05"]
    assert [f["code"] for f in doc["findings"]] == ["FLEET-TORCH-SKEW"]
    assert doc["findings"][0]["subject"] == "node05"


@pytest.mark.parametrize("odd", ["node20-ofed", "node21-hca-fw", "node22-hpcx-ofed"])
def test_a_warning_skew_fails_only_under_strict(odd: str) -> None:
    # exit codes as for check (issue 19): warnings pass, unless --strict
    code, out, err = run_cli(["fleet", "--snapshots", *BASE, f"{odd}.json"])
    assert code == 0 and "warning" in out, out
    code, out, err = run_cli(["fleet", "--snapshots", *BASE, f"{odd}.json", "--strict", "--json"])
    assert code == 1 and "(--strict)" in err
    assert all(f["severity"] == "warning" for f in json.loads(out)["findings"])
    code, _, err = run_cli(["fleet", "--snapshots", *BASE, "--strict"])
    assert code == 0 and err == ""


def test_older_snapshots_compare_without_node_facts() -> None:
    old = str(FLEET.parent / "a100x8.json")
    findings = _compare([old, *BASE])
    assert [f.code for f in findings] == ["FLEET-NODE-FACTS-MISSING"]


def test_fleet_is_golden() -> None:
    text = "\n".join(
        transcript_entry(["fleet", "--snapshots", *args])
        for args in (BASE, ALL, [*BASE, "node04-seven-gpus.json", "--json"])
    )
    assert_golden("fleet-fixtures", text)


def test_fleet_fits_100_columns() -> None:
    code, out, _ = run_cli(["fleet", "--snapshots", *ALL])
    assert code == 1
    assert not [line for line in out.splitlines() if len(line) > 100]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fleet", "--snapshots"], "needs at least one snapshot FILE"),
        (["fleet", "node01.json"], "need --snapshots"),
        (["fleet", "--snapshots", "missing.json"], "missing.json"),
        (["fleet", "--snapshots", "node01.json", "--timeout", "0"], "--timeout"),
    ],
)
def test_bad_input_exits_2(args: list[str], message: str) -> None:
    code, out, err = run_cli(args)
    assert code == 2 and out == "" and message in err and len(err.splitlines()) == 1, err


def test_names_are_capped() -> None:
    assert names(["a"]) == "a"
    assert names(["a", "b", "c"]) == "a, b and c"
    assert names([f"n{i}" for i in range(100)]) == "n0, n1, n2, n3, n4, n5 and 94 more"


def test_a_thousand_nodes_in_under_5_seconds() -> None:
    base = load_snapshot("node01.json")
    assert base.node is not None
    nodes = []
    for i in range(1000):
        snap = dataclasses.replace(
            base,
            hostname=f"gpu{i:04d}",
            node=dataclasses.replace(base.node, boot_id=f"boot-{i}"),
        )
        if i == 637:
            snap = dataclasses.replace(snap, gpus=snap.gpus[:7])
        if i == 901:
            snap = dataclasses.replace(snap, driver_version="535.104.05")
        nodes.append(FleetNode(source=f"gpu{i:04d}", snapshot=snap))
    start = time.perf_counter()
    findings = compare_fleet(label_nodes(nodes))
    elapsed = time.perf_counter() - start
    assert elapsed < 5, elapsed
    by_code = {f.code: f.message for f in findings}
    assert set(by_code) == {"FLEET-GPU-COUNT", "FLEET-DRIVER-SKEW"}
    assert "gpu0637 has 7 GPUs; the other 999 nodes 8 GPUs" in by_code["FLEET-GPU-COUNT"]
    assert "gpu0901 has 535.104.05" in by_code["FLEET-DRIVER-SKEW"]
