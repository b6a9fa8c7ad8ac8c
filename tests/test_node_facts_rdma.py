"""Schema 1.4's RDMA driver stack (``node.rdma``, issue 19): MLNX_OFED/DOCA-OFED or the
inbox driver, each HCA's firmware, the HPC-X a job would use; collected from fake trees
(never the machine's own files, except the last test), read, written and redacted."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
from pathlib import Path

import pytest

from gpudiag.backends import net, rdma
from gpudiag.model import HpcxInfo, RdmaDevice, RdmaStack
from gpudiag.snapshot import load_snapshot
from gpudiag.snapshot.fields import SnapshotError
from gpudiag.snapshot.override import apply_override
from gpudiag.snapshot.read import snapshot_from_json
from gpudiag.snapshot.redact import redact_snapshot
from gpudiag.snapshot.write import snapshot_to_json

FLEET = Path(__file__).parent / "fixtures" / "fleet"
HPCX_218 = "hpcx-v2.18-gcc-mlnx_ofed-ubuntu22.04-cuda12-x86_64"

# The first lines of the ofed_info scripts DOCA-OFED installs, and MLNX_OFED's after its
# installer rewrote the -s line (mlnxofedinstall: `if [ "$1" == "-s" ]; then echo …`).
DOCA_OFED_INFO = """#!/bin/bash
usage()
{
\tcat <<EOF
Usage: $0 [options]
EOF
}
if [ "X$1" == "X-s" ]; then echo OFED-internal-24.01-0.3.3:; exit 0; fi
if [ "X$1" == "X-n" ]; then echo 24.01-0.3.3; exit 0; fi
"""
MLNX_OFED_INFO = """#!/bin/bash
if [ "$1" == "-s" ]; then echo MLNX_OFED_LINUX-23.10-1.1.9.0:; exit; fi
if [ "X$1" == "X-n" ]; then echo 23.10-1.1.9.0; exit 0; fi
"""


def _put(root: Path, rel: str, text: str = "") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _mlnx_node(root: Path) -> dict[str, str]:
    """A node with MLNX_OFED 23.10, two ConnectX-7 and HPC-X 2.18 behind /opt/hpcx."""
    _put(root, "proc/sys/kernel/osrelease", "5.15.0-105-generic\n")
    _put(root, "sys/module/mlx5_core/version", "23.10-1.1.9\n")
    _put(root, "sys/module/mlx5_core/srcversion", "3D1C0E9A8B7F6E5D4C3B2A1\n")
    _put(root, "usr/bin/ofed_info", MLNX_OFED_INFO)
    for dev, fw in (("mlx5_0", "28.39.1002"), ("mlx5_1", "28.39.1002")):
        _put(root, f"sys/class/infiniband/{dev}/fw_ver", fw + "\n")
        _put(root, f"sys/class/infiniband/{dev}/hca_type", "MT4129\n")
        _put(root, f"sys/class/infiniband/{dev}/board_id", "MT_0000000838\n")
    _put(root, f"opt/{HPCX_218}/ompi/bin/mpirun")
    (root / "opt" / "hpcx").symlink_to(HPCX_218)  # relative: resolves inside the tree
    _put(root, "usr/lib/libibverbs.so.1.14.50.0")
    (root / "usr" / "lib" / "libibverbs.so.1").symlink_to("libibverbs.so.1.14.50.0")
    return {"HPCX_DIR": "/opt/hpcx", "PATH": "/usr/local/bin:/usr/bin"}


def test_an_mlnx_ofed_node(tmp_path: Path) -> None:
    env = _mlnx_node(tmp_path)
    got = rdma.collect_rdma(tmp_path, env)
    device = RdmaDevice("mlx5_0", "28.39.1002", "MT4129", "MT_0000000838")
    assert got == RdmaStack(
        kernel_release="5.15.0-105-generic",
        mlx5_core_loaded=True,
        mlx5_core_version="23.10-1.1.9",
        mlx5_core_srcversion="3D1C0E9A8B7F6E5D4C3B2A1",
        ofed="MLNX_OFED_LINUX-23.10-1.1.9.0",
        libibverbs="libibverbs.so.1.14.50.0" if platform.system() == "Linux" else None,
        devices=(device, dataclasses.replace(device, device="mlx5_1")),
        # The symbolic link resolved: the folder's name says the version and the OFED.
        hpcx=HpcxInfo(path=f"/opt/{HPCX_218}", via="HPCX_DIR", version="2.18", ofed="mlnx_ofed"),
    )


def test_an_inbox_node_without_anything(tmp_path: Path) -> None:
    (tmp_path / "sys" / "module" / "mlx5_core").mkdir(parents=True)  # loaded, no version
    got = rdma.collect_rdma(tmp_path, {})
    assert got == RdmaStack(mlx5_core_loaded=True, devices=())
    assert rdma.collect_rdma(tmp_path / "absent", {}) == RdmaStack(
        mlx5_core_loaded=False, devices=()
    )


def test_each_fact_fails_on_its_own(tmp_path: Path) -> None:
    env = _mlnx_node(tmp_path)
    # /sys/class/infiniband a file, the module's version a folder, no VERSION, HPCX_DIR
    # relative: each of those reads as None, the rest stands.
    import shutil

    shutil.rmtree(tmp_path / "sys" / "class" / "infiniband")
    _put(tmp_path, "sys/class/infiniband", "not a folder")
    (tmp_path / "sys" / "module" / "mlx5_core" / "version").unlink()
    (tmp_path / "sys" / "module" / "mlx5_core" / "version").mkdir()
    got = rdma.collect_rdma(tmp_path, {**env, "HPCX_DIR": "hpcx"})
    assert got.devices is None and got.mlx5_core_version is None
    assert got.ofed == "MLNX_OFED_LINUX-23.10-1.1.9.0" and got.mlx5_core_loaded is True
    assert got.hpcx is not None and got.hpcx.via == "/opt/hpcx"  # the default place


@pytest.mark.parametrize(
    ("script", "expected"),
    [(DOCA_OFED_INFO, "OFED-internal-24.01-0.3.3"),
     (MLNX_OFED_INFO, "MLNX_OFED_LINUX-23.10-1.1.9.0"),
     ('#!/bin/bash\nif [ "X$1" == "X-s" ]; then echo "MLNX_OFED_LINUX-4.9-7.1.0.0:"; exit; fi\n',
      "MLNX_OFED_LINUX-4.9-7.1.0.0"),
     ("#!/bin/bash\nrpm -qa | grep ofed\n", None),
     ("", None)],
)  # fmt: skip
def test_ofed_info_is_read_not_run(tmp_path: Path, script: str, expected: str | None) -> None:
    path = _put(tmp_path, "usr/bin/ofed_info", script)
    path.chmod(0o644)  # not even executable: never run
    assert rdma.ofed_info(tmp_path, {}) == expected


def test_ofed_info_along_path_first(tmp_path: Path) -> None:
    _put(tmp_path, "usr/bin/ofed_info", MLNX_OFED_INFO)
    _put(tmp_path, "opt/doca/bin/ofed_info", DOCA_OFED_INFO)
    assert rdma.ofed_info(tmp_path, {"PATH": "rel:/opt/doca/bin"}) == "OFED-internal-24.01-0.3.3"
    assert rdma.ofed_info(tmp_path, {"PATH": "/nowhere"}) == "MLNX_OFED_LINUX-23.10-1.1.9.0"
    assert rdma.ofed_info(tmp_path / "absent", {}) is None


# Folder names as HPC-X's download page and hpc-container-maker spell them.
@pytest.mark.parametrize(
    ("name", "version", "ofed"),
    [("hpcx-v2.18-gcc-mlnx_ofed-redhat8-cuda12-x86_64", "2.18", "mlnx_ofed"),
     ("hpcx-v2.18-gcc-inbox-redhat8-cuda12-x86_64", "2.18", "inbox"),
     ("hpcx-v2.22.1-gcc-doca_ofed-ubuntu22.04-cuda12-x86_64", "2.22.1", "doca_ofed"),
     ("hpcx-v2.14-gcc-MLNX_OFED_LINUX-5-redhat8-cuda11-gdrcopy2-nccl2.16-x86_64", "2.14",
      "MLNX_OFED_LINUX-5"),
     ("hpcx-v2.8.1-gcc-MLNX_OFED_LINUX-4.7-1.0.0.1-ubuntu18.04-x86_64", "2.8.1",
      "MLNX_OFED_LINUX-4.7-1.0.0.1"),
     ("hpcx", None, None), ("openmpi-4.1.7", None, None)],
)  # fmt: skip
def test_hpcx_folder_names(name: str, version: str | None, ofed: str | None) -> None:
    assert rdma.parse_hpcx_name(name) == (version, ofed)


def test_hpcx_version_file_wins_and_where_it_is_looked_for(tmp_path: Path) -> None:
    # NGC containers: /opt/hpcx, HPCX_VERSION set, a VERSION file (HPC-X 2.21.3's layout).
    _put(tmp_path, "opt/hpcx/VERSION",
         "HPC-X v2.21.3\nucx-152bf42  1.18.0 (152bf42)\nLinux: ubuntu20.04\nOFED: doca_ofed\n")  # fmt: skip
    assert rdma.find_hpcx(tmp_path, {"HPCX_VERSION": "2.20"}) == HpcxInfo(
        "/opt/hpcx", "/opt/hpcx", "2.21.3", "doca_ofed"
    )
    # OPAL_PREFIX=<hpcx>/ompi names it; HPCX_HOME before it.
    _put(tmp_path, "home/u/hpcx-v2.19-gcc-inbox-ubuntu22.04-cuda12-x86_64/ompi/bin/mpirun")
    home = "/home/u/hpcx-v2.19-gcc-inbox-ubuntu22.04-cuda12-x86_64"
    assert rdma.find_hpcx(tmp_path, {"OPAL_PREFIX": f"{home}/ompi/"}) == HpcxInfo(
        home, "OPAL_PREFIX", "2.19", "inbox"
    )
    assert rdma.find_hpcx(tmp_path, {"HPCX_HOME": home, "OPAL_PREFIX": "/opt/hpcx/ompi"}) == (
        HpcxInfo(home, "HPCX_HOME", "2.19", "inbox")
    )


def test_an_opt_hpcx_that_is_not_hpcx(tmp_path: Path) -> None:
    (tmp_path / "opt" / "hpcx").mkdir(parents=True)
    assert rdma.find_hpcx(tmp_path, {}) is None
    # Named explicitly, it is recorded even so, with the version the environment gives.
    assert rdma.find_hpcx(tmp_path, {"HPCX_DIR": "/opt/hpcx", "HPCX_VERSION": "2.16"}) == (
        HpcxInfo("/opt/hpcx", "HPCX_DIR", "2.16", None)
    )


def _doc(name: str = "node01.json") -> dict[str, object]:
    return json.loads((FLEET / name).read_text())


def test_round_trip_and_older_snapshots_read_rdma_as_null() -> None:
    snap = load_snapshot(str(FLEET / "node01.json"))
    assert snap.node is not None and snap.node.rdma is not None
    assert snap.node.rdma.hpcx is not None and snap.node.rdma.devices
    assert snapshot_from_json(json.loads(json.dumps(snapshot_to_json(snap)))) == snap
    doc = _doc()
    doc["schema"] = "gpudiag-snapshot/1.3"
    node = doc["node"]
    assert isinstance(node, dict)
    del node["rdma"]
    old = snapshot_from_json(doc).node
    assert old is not None and old.rdma is None


@pytest.mark.parametrize(
    ("patch", "message"),
    [({"mlx5_core_loaded": "yes"}, "node.rdma.mlx5_core_loaded must be bool"),
     ({"devices": [{"fw_ver": "1"}]}, "node.rdma.devices[0].device is required"),
     ({"hpcx": {"path": "/opt/hpcx"}}, "node.rdma.hpcx.via is required"),
     ({"ofed": 5}, "node.rdma.ofed must be str")],
)  # fmt: skip
def test_bad_rdma_fields_are_named(patch: dict[str, object], message: str) -> None:
    doc = _doc()
    node = doc["node"]
    assert isinstance(node, dict) and isinstance(node["rdma"], dict)
    node["rdma"].update(patch)
    with pytest.raises(SnapshotError, match=re.escape(message)):
        snapshot_from_json(doc)


def test_redact_keeps_the_hpcx_folders_name_only() -> None:
    snap = load_snapshot(str(FLEET / "node01.json"))
    red = redact_snapshot(snap).node
    assert red is not None and red.rdma is not None and red.rdma.hpcx is not None
    assert red.rdma.hpcx.path == "hpcx-v2.18.1-gcc-mlnx_ofed-ubuntu22.04-cuda12-x86_64"
    assert snap.node is not None and red.rdma.devices == snap.node.rdma.devices  # type: ignore[union-attr]


def test_override_gives_one_node_another_stack() -> None:
    base = load_snapshot(str(FLEET / "node01.json"))
    patch = {"node": {"rdma": {"mlx5_core_loaded": True, "mlx5_core_version": None,
                               "ofed": None, "devices": []}}}  # fmt: skip
    snap = apply_override(base, json.dumps(patch))
    assert snap.node is not None and snap.node.rdma is not None
    assert snap.node.rdma.mlx5_core_version is None and snap.node.rdma.hpcx is None
    assert base.node is not None and snap.node.routes == base.node.routes


def test_the_real_machine_records_the_stack_without_a_traceback() -> None:
    node = net.collect_node()
    assert node.rdma is not None
    assert node.rdma.mlx5_core_loaded == os.path.isdir("/sys/module/mlx5_core")
