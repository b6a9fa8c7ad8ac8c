"""Schema 1.4's node facts (issue 19): the routes, RoCE GID tables, and which libnccl / NCCL
net plugin the dynamic loader would find; collected from fake trees, read, written,
redacted, and the ld.so cache reader held to ``ldconfig -p`` on this machine."""

from __future__ import annotations

import dataclasses
import json
import platform
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from gpudiag.backends import net, net_libs
from gpudiag.model import IbGid, LibraryFile, Route
from gpudiag.snapshot import load_snapshot
from gpudiag.snapshot.fields import SnapshotError
from gpudiag.snapshot.read import snapshot_from_json
from gpudiag.snapshot.redact import redact_snapshot
from gpudiag.snapshot.write import snapshot_to_json

FLEET = Path(__file__).parent / "fixtures" / "fleet"
X86 = 0x0303  # FLAG_ELF_LIBC6 | FLAG_X8664_LIB64 (dl-cache.h)
ARM = 0x0A03  # FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64

# /proc/net/route as the kernel prints it (a down route, flags 0x0, is left out).
ROUTE_TABLE = """\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\tFE00000A\t0003\t0\t0\t100\t00000000\t0\t0\t0
eth0\t0000000A\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0
ib0\t0000010A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
ib1\t0000010A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
eth1\t0000020A\t00000000\t0000\t0\t0\t0\t00FFFFFF\t0\t0\t0
"""


def _put(root: Path, rel: str, text: str = "") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_routes_from_proc(tmp_path: Path) -> None:
    _put(tmp_path, "proc/net/route", ROUTE_TABLE)
    assert net.routes(tmp_path) == (
        Route("eth0", "0.0.0.0/0", "10.0.0.254", 100),
        Route("eth0", "10.0.0.0/24", None, 100),
        Route("ib0", "10.1.0.0/16", None, 0),
        Route("ib1", "10.1.0.0/16", None, 0),
    )
    assert net.routes(tmp_path / "absent") is None


def test_gid_table_keeps_used_entries_with_their_types(tmp_path: Path) -> None:
    port = "sys/class/infiniband/mlx5_0/ports/1"
    _put(tmp_path, f"{port}/state", "4: ACTIVE\n")
    _put(tmp_path, f"{port}/link_layer", "Ethernet\n")
    gids = {0: "fe80:0000:0000:0000:a288:c2ff:fe3b:5019", 1: "fe80:0000:0000:0000:a288:c2ff:fe3b:5019",
            2: "0000:0000:0000:0000:0000:0000:0000:0000", 3: "0000:0000:0000:0000:0000:ffff:0a01:0013",
            10: "0000:0000:0000:0000:0000:ffff:0a01:0014"}  # fmt: skip
    for index, gid in gids.items():
        _put(tmp_path, f"{port}/gids/{index}", gid + "\n")
    for index, kind in {0: "IB/RoCE v1", 1: "RoCE v2", 3: "RoCE v2"}.items():
        _put(tmp_path, f"{port}/gid_attrs/types/{index}", kind + "\n")
    (ports,) = net.ib_ports(tmp_path) or ()
    assert ports.gids == (
        IbGid(0, gids[0], "IB/RoCE v1"),
        IbGid(1, gids[1], "RoCE v2"),
        IbGid(3, gids[3], "RoCE v2"),
        IbGid(10, gids[10], None),  # its type unreadable; index order is numeric
    )


def _cache(entries: list[tuple[int, str, str]], prefix: bytes = b"") -> bytes:
    """An ld.so.cache in glibc's new format (dl-cache.h), after ``prefix``."""
    table = 48 + 24 * len(entries)
    strings = b""
    rows = b""
    for flags, name, path in entries:
        key = table + len(strings)
        strings += name.encode() + b"\0"
        value = table + len(strings)
        strings += path.encode() + b"\0"
        rows += struct.pack("<iIIIQ", flags, key, value, 0, 0)
    header = b"glibc-ld.so.cache1.1" + struct.pack(
        "<IIB3xI3I", len(entries), len(strings), 0, 0, 0, 0, 0
    )
    assert len(header) == 48
    return prefix + header + rows + strings


def test_ld_cache_reads_glibc_format_for_this_machine(tmp_path: Path) -> None:
    data = _cache(
        [(X86, "libnccl.so.2", "/usr/lib/x86_64-linux-gnu/libnccl.so.2"),
         (ARM, "libnccl.so.2", "/usr/lib/aarch64-linux-gnu/libnccl.so.2"),
         (X86, "libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1")],
        prefix=b"ld.so-1.7.0\0\0\0\0\0",  # an old-format header before it (glibc < 2.32)
    )  # fmt: skip
    _put(tmp_path, "etc/ld.so.cache").write_bytes(data)
    assert net_libs.ld_cache(tmp_path, "x86_64") == {
        "libnccl.so.2": ["/usr/lib/x86_64-linux-gnu/libnccl.so.2"],
        "libz.so.1": ["/lib/x86_64-linux-gnu/libz.so.1"],
    }
    assert net_libs.ld_cache(tmp_path, "aarch64") == {
        "libnccl.so.2": ["/usr/lib/aarch64-linux-gnu/libnccl.so.2"]
    }
    (tmp_path / "etc" / "ld.so.cache").write_bytes(b"not a cache")
    assert net_libs.ld_cache(tmp_path) is None
    assert net_libs.ld_cache(tmp_path / "absent") is None


def test_ld_cache_lists_what_ldconfig_lists_here() -> None:
    """The oracle: this machine's own ``ldconfig -p`` (glibc's reading of the same file)."""
    ldconfig = shutil.which("ldconfig", path="/sbin:/usr/sbin:/usr/bin:/bin")
    assert platform.system() == "Linux" and ldconfig, "a glibc Linux with ldconfig"
    out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=30).stdout
    expected: dict[str, list[str]] = {}
    for line in out.splitlines()[1:]:
        match = re.match(r"\s+(\S+) \(([^)]*)\) => (\S+)$", line)
        if match:
            expected.setdefault(match.group(1), []).append(match.group(3))
    got = net_libs.ld_cache(Path("/"))
    assert got is not None and len(got) > 10
    assert got == expected


def _libs_tree(root: Path) -> tuple[Path, dict[str, str]]:
    site = root / "venv" / "site-packages"
    _put(site, "nvidia/nccl/lib/libnccl.so.2")
    _put(root, "opt/nccl/lib/libnccl.so.2")
    _put(root, "opt/hpcx/plugin/lib/libnccl-net.so")
    _put(root, "opt/ofi/lib/libnccl-net-ofi.so")
    _put(root, "usr/lib/x86_64-linux-gnu/libnccl.so.2")
    _put(root, "usr/lib/libnccl.so.2")
    _put(root, "etc/ld.so.cache").write_bytes(_cache(
        [(X86, "libnccl.so.2", "/usr/lib/x86_64-linux-gnu/libnccl.so.2"),
         (X86, "libnccl-net-ofi.so", "/opt/ofi/lib/libnccl-net-ofi.so"),
         (X86, "libnccl.so.2", "/usr/lib/x86_64-linux-gnu/gone/libnccl.so.2")]))  # fmt: skip
    env = {"LD_LIBRARY_PATH": "/opt/nccl/lib::relative:/opt/hpcx/plugin/lib"}
    return site, env


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the fake cache holds x86-64 entries")
def test_nccl_libs_in_the_loaders_order(tmp_path: Path) -> None:
    site, env = _libs_tree(tmp_path)
    got = net_libs.find_nccl_libs(tmp_path, env, tmp_path / "venv" / "site-packages")
    assert [(f.path.replace(str(site), "SITE"), f.via) for f in got or ()] == [
        ("SITE/nvidia/nccl/lib/libnccl.so.2", "torch wheel"),  # DT_RPATH: before all
        ("/opt/nccl/lib/libnccl.so.2", "LD_LIBRARY_PATH"),
        ("/usr/lib/x86_64-linux-gnu/libnccl.so.2", "ld.so.cache"),  # a missing file is skipped
        ("/usr/lib/libnccl.so.2", "default path"),
    ]
    assert [f.via for f in net_libs.find_nccl_libs(tmp_path, {}, None) or ()] == [
        "ld.so.cache", "default path"]  # fmt: skip


@pytest.mark.parametrize(
    ("value", "names"),
    [(None, ("libnccl-net.so",)), ("", ("libnccl-net.so",)), ("ofi", ("libnccl-net-ofi.so",)),
     ("none", ()), ("NONE", ()), ("libnccl-net-spcx.so", ("libnccl-net-spcx.so",)),
     ("/opt/x/libnccl-net-x.so", ("/opt/x/libnccl-net-x.so",))],
)  # fmt: skip
def test_plugin_names(value: str | None, names: tuple[str, ...]) -> None:
    assert net_libs.plugin_names(value) == names


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the fake cache holds x86-64 entries")
def test_net_plugins_as_nccl_would_find_them(tmp_path: Path) -> None:
    _, env = _libs_tree(tmp_path)

    def found(**extra: str) -> list[tuple[str, str, str]]:
        got = net_libs.find_net_plugins(tmp_path, {**env, **extra}) or ()
        return [(f.name, f.path, f.via) for f in got]

    assert found() == [("libnccl-net.so", "/opt/hpcx/plugin/lib/libnccl-net.so", "LD_LIBRARY_PATH")]
    assert found(NCCL_NET_PLUGIN="ofi") == [
        ("libnccl-net-ofi.so", "/opt/ofi/lib/libnccl-net-ofi.so", "ld.so.cache")]  # fmt: skip
    assert found(NCCL_NET_PLUGIN="/opt/ofi/lib/libnccl-net-ofi.so") == [
        ("/opt/ofi/lib/libnccl-net-ofi.so", "/opt/ofi/lib/libnccl-net-ofi.so",
         "NCCL_NET_PLUGIN path")]  # fmt: skip
    assert found(NCCL_NET_PLUGIN="spcx") == []
    assert found(NCCL_NET_PLUGIN="none") == []


def _node_doc() -> dict[str, object]:
    return json.loads((FLEET / "node19-roce-gid-v1.json").read_text())


def test_round_trip_and_a_13_snapshot_reads_the_new_facts_as_null() -> None:
    snap = load_snapshot(str(FLEET / "node19-roce-gid-v1.json"))
    assert snap.node is not None and snap.node.routes and snap.node.nccl_libs
    assert snap.node.ib_ports and snap.node.ib_ports[0].gids
    assert snapshot_from_json(json.loads(json.dumps(snapshot_to_json(snap)))) == snap
    doc = _node_doc()
    doc["schema"] = "gpudiag-snapshot/1.3"
    node = doc["node"]
    assert isinstance(node, dict)
    for key in ("routes", "nccl_libs", "nccl_net_plugins"):
        del node[key]
    for port in node["ib_ports"]:
        del port["gids"]
    old = snapshot_from_json(doc).node
    assert old is not None and old.ib_ports
    assert (old.routes, old.nccl_libs, old.nccl_net_plugins, old.ib_ports[0].gids) == (
        None, None, None, None)  # fmt: skip


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [("routes", [{"interface": "eth0", "destination": "0.0.0.0/0", "metric": "0"}],
      "node.routes[0].metric must be int"),
     ("routes", [{"destination": "0.0.0.0/0", "metric": 0}], "node.routes[0].interface is required"),
     ("nccl_libs", [{"name": "libnccl.so.2", "path": 5, "via": "x"}],
      "node.nccl_libs[0].path must be str"),
     ("nccl_net_plugins", {}, "node.nccl_net_plugins must be"),
     ("ib_ports", [{"device": "mlx5_0", "port": 1, "gids": [{"index": -1, "gid": "x"}]}],
      "node.ib_ports[0].gids[0].index must not be negative")],
)  # fmt: skip
def test_bad_14_fields_are_named(key: str, value: object, message: str) -> None:
    doc = _node_doc()
    node = doc["node"]
    assert isinstance(node, dict)
    node[key] = value
    with pytest.raises(SnapshotError, match=re.escape(message)):
        snapshot_from_json(doc)


def test_redact_keeps_the_shape_of_routes_and_drops_addresses() -> None:
    snap = load_snapshot(str(FLEET / "node18-duplicate-route.json"))
    assert snap.node is not None
    roce = load_snapshot(str(FLEET / "node19-roce-gid-v1.json"))
    assert roce.node is not None
    node = dataclasses.replace(snap.node, ib_ports=roce.node.ib_ports)
    red = redact_snapshot(dataclasses.replace(snap, node=node)).node
    assert red is not None and red.routes is not None
    assert [(r.interface, r.destination, r.gateway) for r in red.routes] == [
        ("eth0", "0.0.0.0/0", "redacted"),
        ("eth0", "redacted-1/24", None),
        ("ib0", "redacted-2/16", None),
        ("ib1", "redacted-2/16", None),  # the duplicate stays visible
    ]
    assert red.ib_ports and {g.gid for g in red.ib_ports[0].gids or ()} == {"redacted"}
    assert [g.type for g in red.ib_ports[0].gids or ()] == ["IB/RoCE v1", "RoCE v2"] * 2
    assert [f.path for f in red.nccl_libs or ()] == ["libnccl.so.2"]
    assert [f.path for f in red.nccl_net_plugins or ()] == ["libnccl-net.so"]


def test_the_real_machine_records_the_14_facts() -> None:
    node = net.collect_node()
    assert node.routes is not None  # every Linux has /proc/net/route
    assert node.nccl_libs is not None and node.nccl_net_plugins is not None
    assert all(isinstance(f, LibraryFile) for f in node.nccl_libs)
