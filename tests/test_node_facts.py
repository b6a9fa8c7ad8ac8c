"""Schema 1.3's node facts (issue 19): collected from a fake tree, read, written, redacted."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gpudiag.backends import net
from gpudiag.model import IbPort, NetInterface
from gpudiag.snapshot import load_snapshot
from gpudiag.snapshot.fields import SnapshotError
from gpudiag.snapshot.read import snapshot_from_json
from gpudiag.snapshot.redact import redact_snapshot
from gpudiag.snapshot.write import snapshot_to_json

FIXTURES = Path(__file__).parent / "fixtures"
BOOT = "6c63b633-4d22-4ca7-9a49-87893966b649"


def _tree(root: Path) -> Path:
    def put(rel: str, text: str) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    put("proc/sys/kernel/random/boot_id", BOOT + "\n")
    put("etc/os-release", 'NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n')
    put("sys/class/net/lo/operstate", "unknown\n")
    put("sys/class/net/lo/flags", "0x9\n")
    put("sys/class/net/eth0/operstate", "up\n")
    put("sys/class/net/eth0/flags", "0x1003\n")
    put("sys/class/net/docker0/operstate", "down\n")
    put("sys/class/net/docker0/flags", "0x1003\n")
    put("sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n")
    put("sys/class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n")
    put("sys/class/infiniband/mlx5_1/ports/1/state", "1: DOWN\n")
    put("sys/class/infiniband/mlx5_1/ports/1/link_layer", "Ethernet\n")
    return root


ADDRS = {"lo": ("127.0.0.1/8",), "eth0": ("10.0.0.5/24",), "docker0": ()}


def _collect(root: Path, env: dict[str, str], **kw: object) -> net.NodeInfo:
    kw.setdefault("nccl", lambda: ("2.21.5", "nvidia-nccl-cu12 (installed)"))
    return net.collect_node(root, env, addr_reader=lambda n: ADDRS.get(n), **kw)  # type: ignore[arg-type]


def test_collects_each_fact_from_the_tree(tmp_path: Path) -> None:
    env = {"NCCL_SOCKET_IFNAME": "eth0", "MASTER_ADDR": "n1", "PATH": "/bin", "WORLD_SIZE": "16"}
    node = _collect(_tree(tmp_path), env, resolver=lambda h: ("10.0.0.1",))
    assert node.boot_id == BOOT
    assert node.os_name == "Ubuntu 22.04.4 LTS"
    assert node.interfaces == (
        NetInterface("docker0", "down", False, ()),
        NetInterface("eth0", "up", False, ("10.0.0.5/24",)),
        NetInterface("lo", "unknown", True, ("127.0.0.1/8",)),
    )
    assert node.ib_ports == (
        IbPort("mlx5_0", 1, "ACTIVE", "InfiniBand"),
        IbPort("mlx5_1", 1, "DOWN", "Ethernet"),
    )
    assert dict(node.nccl_env) == {
        "MASTER_ADDR": "n1",
        "NCCL_SOCKET_IFNAME": "eth0",
        "WORLD_SIZE": "16",
    }
    assert node.master_addr == "n1" and node.master_addr_ips == ("10.0.0.1",)
    assert node.nccl_version == "2.21.5"


def test_each_fact_fails_on_its_own(tmp_path: Path) -> None:
    # An empty tree: nothing readable, nothing raised; no RDMA class reads as "none".
    def broken(host: str) -> tuple[str, ...]:
        raise OSError("Name or service not known")

    node = _collect(tmp_path, {"MASTER_ADDR": "nohost"}, resolver=broken)
    assert node.boot_id is None and node.os_name is None and node.interfaces is None
    assert node.ib_ports == ()
    assert node.master_addr_ips is None
    assert node.master_addr_error == "Name or service not known"


def test_a_hanging_resolver_is_bounded() -> None:
    start = time.monotonic()
    ips, error = net.resolve("slow", lambda h: time.sleep(5) or (), timeout_s=0.2)  # type: ignore[func-returns-value]
    assert time.monotonic() - start < 2
    assert ips is None and error == "no answer within 0.2 s"


def test_the_real_machine_answers_without_raising() -> None:
    node = net.collect_node()
    assert node.interfaces is None or all(isinstance(i.name, str) for i in node.interfaces)
    assert net.resolve("localhost")[0] is not None


def test_nccl_version_from_the_wheel_then_torch_pin(tmp_path: Path) -> None:
    torch_meta = tmp_path / "torch-2.4.1.dist-info" / "METADATA"
    torch_meta.parent.mkdir()
    torch_meta.write_text(
        "Name: torch\nRequires-Dist: filelock\n"
        'Requires-Dist: nvidia-nccl-cu12==2.20.5; platform_system == "Linux"\n'
    )
    assert net.nccl_version(tmp_path) == (
        "2.20.5",
        "torch requires nvidia-nccl-cu12 (not installed)",
    )
    (tmp_path / "nvidia_nccl_cu12-2.21.5.dist-info").mkdir()
    assert net.nccl_version(tmp_path) == ("2.21.5", "nvidia-nccl-cu12 (installed)")
    torch_meta.write_text("Name: torch\nRequires-Dist: filelock\n")
    (tmp_path / "nvidia_nccl_cu12-2.21.5.dist-info").rmdir()
    assert net.nccl_version(tmp_path) == (None, None)
    assert net.nccl_version(tmp_path / "absent") == (None, None)


def test_round_trip_and_old_snapshots_read_node_as_null(tmp_path: Path) -> None:
    old = load_snapshot(str(FIXTURES / "a100x8.json"))
    assert old.node is None
    node = _collect(_tree(tmp_path), {"MASTER_ADDR": "n1"}, resolver=lambda h: ("10.0.0.1",))
    import dataclasses

    snap = dataclasses.replace(old, node=node)
    doc = json.loads(json.dumps(snapshot_to_json(snap)))
    assert snapshot_from_json(doc).node == node


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"interfaces": [{"operstate": "up"}]}, "node.interfaces[0].name is required"),
        ({"ib_ports": [{"device": "mlx5_0", "port": "1"}]}, "node.ib_ports[0].port must be int"),
        ({"nccl_env": {"NCCL_DEBUG": 1}}, "node.nccl_env.NCCL_DEBUG must be a string"),
        ({"boot_id": 7}, "node.boot_id must be str"),
    ],
)
def test_bad_node_fields_are_named(patch: dict[str, object], message: str) -> None:
    doc = json.loads((FIXTURES / "a100x8.json").read_text())
    doc["node"] = patch
    with pytest.raises(SnapshotError, match=message.replace("[", r"\[").replace("]", r"\]")):
        snapshot_from_json(doc)


def test_redact_drops_addresses_and_boot_id(tmp_path: Path) -> None:
    import dataclasses

    node = _collect(_tree(tmp_path), {"MASTER_ADDR": "n1", "NCCL_SOCKET_IFNAME": "eth0"},
                    resolver=lambda h: ("10.0.0.1",))  # fmt: skip
    snap = redact_snapshot(
        dataclasses.replace(load_snapshot(str(FIXTURES / "a100x8.json")), node=node)
    )
    assert snap.node is not None
    assert snap.node.boot_id is None and snap.node.master_addr_ips is None
    assert all(i.ipv4 is None for i in snap.node.interfaces or ())
    assert dict(snap.node.nccl_env) == {"NCCL_SOCKET_IFNAME": "eth0"}
    assert [i.name for i in snap.node.interfaces or ()] == ["docker0", "eth0", "lo"]


def test_override_merges_records_and_validates() -> None:
    from gpudiag.snapshot.override import apply_override

    base = load_snapshot(str(FIXTURES / "fleet" / "node01.json"))
    snap = apply_override(base, '{"hostname": "node2", "node": {"boot_id": "b-2"}}')
    assert snap.hostname == "node2" and snap.node is not None and snap.node.boot_id == "b-2"
    # Merged one level deep: the other node facts stay.
    assert base.node is not None and snap.node.interfaces == base.node.interfaces
    assert snap.sources["override"].reason == "GPUDIAG_SNAPSHOT_OVERRIDE gave: hostname, node"
    for bad, message in [
        ("{", "is not valid JSON"),
        ("[1]", "must be a non-empty JSON object"),
        ('{"gpus": 3}', "makes an invalid snapshot: gpus must be a list"),
    ]:
        with pytest.raises(SnapshotError, match=message):
            apply_override(base, bad)


def test_override_through_the_cli() -> None:
    from .pinned import run_cli

    code, out, _ = run_cli(
        ["snapshot", "--no-torch"], {"GPUDIAG_SNAPSHOT_OVERRIDE": '{"hostname": "n9"}'}
    )
    assert code == 0 and json.loads(out)["hostname"] == "n9"
    code, out, err = run_cli(["snapshot", "--no-torch"], {"GPUDIAG_SNAPSHOT_OVERRIDE": "{"})
    assert code == 2 and out == "" and "GPUDIAG_SNAPSHOT_OVERRIDE is not valid JSON" in err
