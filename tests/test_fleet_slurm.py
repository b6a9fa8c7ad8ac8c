"""``gpudiag fleet`` through a real Slurm: slurmctld and two ``slurmd -N nodeN`` on this
host (tests/slurm_cluster.py), run with ``salloc -N2 … gpudiag fleet`` (issue 19's
acceptance). Skipped, with the reason, only where Slurm cannot be installed or started."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from .slurm_cluster import Cluster, Unavailable, start


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    try:
        running = start(tmp_path_factory.mktemp("slurm"))
    except Unavailable as exc:
        pytest.skip(f"no emulated Slurm: {exc}")
    try:
        yield running
    finally:
        running.stop()
    left = running.leftovers()
    assert left == [], f"processes of the emulated Slurm outlived it: {left}"


def _salloc(cluster: Cluster, *script: str, timeout: int = 150) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["salloc", "-N2", "--quiet", *script], env=cluster.env, capture_output=True, text=True,
        timeout=timeout, cwd=cluster.root,
    )  # fmt: skip


FLEET = [sys.executable, "-m", "gpudiag", "fleet", "--json"]


def test_identical_nodes_exit_0(cluster: Cluster) -> None:
    cluster.identities()
    proc = _salloc(cluster, *FLEET, "--timeout", "90")
    assert proc.returncode == 0, proc.stderr + proc.stdout + cluster.logs()
    doc = json.loads(proc.stdout)
    assert [n["node"] for n in doc["nodes"]] == ["node1", "node2"]
    assert doc["findings"] == []


def test_without_identities_the_two_slurmds_are_one_machine(cluster: Cluster) -> None:
    for node in ("node1", "node2"):
        (cluster.root / "override" / f"{node}.json").unlink(missing_ok=True)
    proc = _salloc(cluster, *FLEET, "--timeout", "90")
    codes = {f["code"] for f in json.loads(proc.stdout)["findings"]}
    assert proc.returncode == 1 and codes == {"FLEET-DUPLICATE-HOSTNAME", "FLEET-DUPLICATE-BOOT-ID"}


def test_the_odd_node_and_its_fact_are_named(cluster: Cluster) -> None:
    cluster.identities()
    cluster.override("node2", '{"hostname":"node2","node":{"boot_id":"boot-1"},'
                              '"torch":{"version":"2.3.1+cu121"}}')  # fmt: skip
    proc = _salloc(cluster, *FLEET, "--timeout", "90")
    assert proc.returncode == 1, proc.stderr + cluster.logs()
    findings = json.loads(proc.stdout)["findings"]
    assert [f["code"] for f in findings] == ["FLEET-TORCH-SKEW"]
    assert findings[0]["message"].startswith("torch version differs between nodes: node")
    assert "2.3.1+cu121" in findings[0]["message"]


def test_a_node_stopped_mid_run_is_named_within_the_timeout(cluster: Cluster) -> None:
    # node2's slurmd is stopped (SIGSTOP) inside the allocation, so its task never
    # starts: the node stops answering, as a hung or dead node does.
    cluster.identities()
    pid = cluster.procs["slurmd-node2"].pid
    fleet = " ".join(FLEET)
    script = f"kill -STOP {pid}; {fleet} --timeout 12; rc=$?; kill -CONT {pid}; exit $rc"
    start = time.monotonic()
    try:
        proc = _salloc(cluster, "/bin/sh", "-c", script)
    finally:
        subprocess.run(["kill", "-CONT", str(pid)], check=False, timeout=10)
    elapsed = time.monotonic() - start
    assert proc.returncode == 1, proc.stderr + cluster.logs()
    doc = json.loads(proc.stdout)
    silent = [f for f in doc["findings"] if f["code"] == "FLEET-NODE-NO-ANSWER"]
    assert silent and "node2" in silent[0]["subject"], doc["findings"]
    assert elapsed < 12 + 5 + 30, elapsed


def _free_port() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


PROBE = [*FLEET, "--probe", "--master-addr", "127.0.0.1"]


def test_probe_through_real_srun(cluster: Cluster) -> None:
    # node1 (the first node) listens on 127.0.0.1:PORT, node2 connects and both run a
    # gloo all-reduce: real srun, real slurmstepd, the token passed by srun's environment.
    cluster.identities()
    proc = _salloc(cluster, *PROBE, "--master-port", _free_port(), "--timeout", "90")
    assert proc.returncode == 0, proc.stderr + proc.stdout + cluster.logs()
    doc = json.loads(proc.stdout)
    probe = doc["probe"]
    assert [(n["node"], n["role"], n["reached"]) for n in probe["nodes"]] == [
        ("node1", "listen", True), ("node2", "dial", True)]  # fmt: skip
    assert [(p["nodes"], p["ok"]) for p in probe["pairs"]] == [(["node1", "node2"], True)]
    assert doc["findings"] == []


def test_probe_with_a_node_stopped_is_named_within_the_timeout(cluster: Cluster) -> None:
    # node2's slurmd is stopped: its task never starts, and srun ends the step when the
    # launch there times out, killing node1's probe too. node2 is named, once; node1 is
    # not blamed for the report srun cut off. Never past --timeout.
    cluster.identities()
    pid = cluster.procs["slurmd-node2"].pid
    fleet = " ".join([*PROBE, "--master-port", _free_port(), "--timeout", "40"])
    script = f"kill -STOP {pid}; {fleet}; rc=$?; kill -CONT {pid}; exit $rc"
    start = time.monotonic()
    try:
        proc = _salloc(cluster, "/bin/sh", "-c", script)
    finally:
        subprocess.run(["kill", "-CONT", str(pid)], check=False, timeout=10)
    elapsed = time.monotonic() - start
    assert proc.returncode == 1, proc.stderr + cluster.logs()
    doc = json.loads(proc.stdout)
    assert [(f["code"], f["subject"]) for f in doc["findings"]] == [
        ("FLEET-NODE-NO-ANSWER", "node2")], doc["findings"]  # fmt: skip
    node1 = doc["probe"]["nodes"][0]
    assert node1["reached"] in (True, None), node1  # listening, if srun let it report
    if node1["reached"] is None:
        assert node1["error"].startswith("no probe report (the launcher exited ")
    assert "node2" in doc["findings"][0]["message"]
    assert elapsed < 40 + 5 + 30, elapsed
