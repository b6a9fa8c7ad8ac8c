"""``gpudiag fleet`` inside a Slurm allocation, through a fake ``srun`` on PATH
(tests/fake_launchers/srun simulates the nodes; no Slurm needed), and Slurm's node lists."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudiag.backends.fleet_run import expand_nodelist
from gpudiag.errors import GpudiagInputError

FAKES = Path(__file__).parent / "fake_launchers"


def _fleet(
    tmp_path: Path, plan: dict[str, object], *args: str, nodes: str = "node01,node02,node03",
    extra: dict[str, str] | None = None,
) -> tuple[int, str, str, list[str], float]:  # fmt: skip
    log = tmp_path / "srun-argv.json"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "GPUDIAG_", "MASTER_"))}  # fmt: skip
    env.update(
        TMPDIR=str(tmp_path),
        **(extra or {}),
        PATH=f"{FAKES}{os.pathsep}{env.get('PATH', '')}",
        SLURM_JOB_ID="4242",
        SLURM_JOB_NUM_NODES=str(len(nodes.split(","))),
        SLURM_JOB_NODELIST="node[01-03]" if nodes == "node01,node02,node03" else nodes,
        FAKE_SRUN_NODES=nodes,
        FAKE_SRUN_PLAN=json.dumps(plan),
        FAKE_SRUN_LOG=str(log),
    )
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "gpudiag", "fleet", *args],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    argv = json.loads(log.read_text()) if log.exists() else []
    return proc.returncode, proc.stdout, proc.stderr, argv, time.monotonic() - start


def test_identical_nodes_exit_0_through_srun(tmp_path: Path) -> None:
    code, out, err, argv, _ = _fleet(tmp_path, {}, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [n["node"] for n in doc["nodes"]] == ["node01", "node02", "node03"]
    assert all(n["answered"] for n in doc["nodes"]) and doc["findings"] == []
    assert doc["probe"] is None
    # One task per node, its results on srun's own output (labelled by task): no file
    # on the nodes, whose temp dirs are not this one's. The node task is started without
    # `python -m` (which would import from the working directory).
    assert "--ntasks-per-node=1" in argv and "--nodes=3" in argv and "--label" in argv
    assert not any(a.startswith(("--output", "--error", "--export")) for a in argv)
    command = argv[next(i for i, a in enumerate(argv) if not a.startswith("--")) :]
    assert command[0] == sys.executable and command[1] == "-c"
    assert command[3:] == ["gpudiag.probes.fleet_node", "--index-from", "slurm", "--nodes", "3"]
    # The private directory is gone afterwards.
    assert list(tmp_path.glob("gpudiag-fleet-*")) == []


def test_the_odd_node_is_named_with_its_fact(tmp_path: Path) -> None:
    plan = {"node02": {"torch": {"version": "2.3.1+cu121"}}}
    code, out, err, _, _ = _fleet(tmp_path, plan)
    assert code == 1, err
    assert "FLEET-TORCH-SKEW" in out
    assert "node02 has 2.3.1+cu121; the other 2 nodes" in out.replace("\n      ", " ")


def test_a_dead_node_is_named_within_the_timeout(tmp_path: Path) -> None:
    # 10 s: every live node takes a real snapshot (torch's import in a child, ~3 s here
    # for three nodes), on a machine the test may share; CI must stay under 10 minutes.
    code, out, err, _, elapsed = _fleet(tmp_path, {"node03": "dead"}, "--timeout", "10", "--json")
    assert code == 1, err
    assert elapsed < 10 + 5 + 10  # the timeout, the SIGTERM grace, Python's start-ups
    doc = json.loads(out)
    silent = [f for f in doc["findings"] if f["code"] == "FLEET-NODE-NO-ANSWER"]
    assert len(silent) == 1 and silent[0]["subject"] == "node03"
    assert "node03: no answer within 10 s" in silent[0]["message"]
    assert "its task started" not in silent[0]["message"]
    assert [n["answered"] for n in doc["nodes"]] == [True, True, False]


def test_a_failing_node_says_why(tmp_path: Path) -> None:
    code, out, err, _, _ = _fleet(tmp_path, {"node01": "fail"}, "--json")
    assert code == 1, err
    message = json.loads(out)["findings"][0]["message"]
    assert "node01: no snapshot (the launcher exited 1): slurmstepd: error: execve()" in message


def test_outside_an_allocation_is_bad_input(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "GPUDIAG_"))}
    proc = subprocess.run([sys.executable, "-m", "gpudiag", "fleet"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert "not inside a Slurm allocation" in proc.stderr
    env.update(SLURM_JOB_ID="1", SLURM_JOB_NODELIST="n[1-2]", PATH="/nonexistent")
    proc = subprocess.run([sys.executable, "-m", "gpudiag", "fleet"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "srun is not on PATH" in proc.stderr


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("gpu[01-03,07],login1", ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]),
        ("a[1-2]-b[3,4]", ["a1-b3", "a1-b4", "a2-b3", "a2-b4"]),
        ("node5", ["node5"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
        ("", []),
    ],
)
def test_expand_nodelist(text: str, names: list[str]) -> None:
    assert expand_nodelist(text) == names


@pytest.mark.parametrize("text", ["n[a-b]", "n[1-]", "n[0-99999999]"])
def test_expand_nodelist_refuses(text: str) -> None:
    with pytest.raises(GpudiagInputError):
        expand_nodelist(text)
