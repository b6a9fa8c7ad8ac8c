"""The launcher model (gpudiag.launch) and the findings built on it.

The environments below were recorded from real runs (Open MPI 5.0.11, MPICH 5.0.2 and
Intel MPI 2021.19 ``mpiexec -n 2/4``, DeepSpeed 0.19.8 ``deepspeed --num_gpus 2``,
accelerate 1.15 ``accelerate launch --multi_gpu --num_processes 2``); Horovod's from
its source (horovod/runner/gloo_run.py), since it cannot be installed here.
``tests/test_launchers_real.py`` checks the model against the real launchers.
"""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.core.check import run_check
from gpudiag.errors import GpudiagInputError
from gpudiag.launch.deepspeed import deepspeed_devices
from gpudiag.launch.process import detect_launch
from gpudiag.launch.reader import read_launch
from gpudiag.launch.table import canonical_launcher, has_launcher_vars, present_launchers

from .conftest import fixture_path, load_fixture

OPENMPI = {  # rank 1 of mpiexec -n 4 on one host
    "OMPI_COMM_WORLD_RANK": "1",
    "OMPI_COMM_WORLD_SIZE": "4",
    "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
    "OMPI_COMM_WORLD_NODE_RANK": "1",
    "OMPI_UNIVERSE_SIZE": "4",
    "OMPI_VERSION": "5.0.11",
    "PMIX_RANK": "1",
    "PMIX_NAMESPACE": "prterun-vm-5101@1",
}
MPICH = {
    "PMI_RANK": "1",
    "PMI_SIZE": "2",
    "MPI_LOCALRANKID": "1",
    "MPI_LOCALNRANKS": "2",
    "PMI_FD": "11",
    "PMI_HOSTNAME": "vm",
}
INTELMPI = {**MPICH, "I_MPI_HYDRA_UUID": "431f0000-4741-fce3-ee60-060002dc6300"}
DEEPSPEED = {
    "CROSS_RANK": "0",
    "CROSS_SIZE": "1",
    "CUDA_VISIBLE_DEVICES": "0,1",
    "LOCAL_RANK": "1",
    "LOCAL_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
    "RANK": "1",
    "WORLD_SIZE": "2",
}
ACCELERATE = {
    "ACCELERATE_MIXED_PRECISION": "no",
    "ACCELERATE_DYNAMO_BACKEND": "NO",
    "GROUP_RANK": "0",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
    "RANK": "1",
    "TORCHELASTIC_RUN_ID": "none",
    "TORCHELASTIC_USE_AGENT_STORE": "True",
    "WORLD_SIZE": "2",
}
HOROVOD = {  # horovod/runner/gloo_run.py: the worker command's variables
    "HOROVOD_HOSTNAME": "localhost",
    "HOROVOD_RANK": "3",
    "HOROVOD_SIZE": "4",
    "HOROVOD_LOCAL_RANK": "1",
    "HOROVOD_LOCAL_SIZE": "2",
    "HOROVOD_CROSS_RANK": "1",
    "HOROVOD_CROSS_SIZE": "2",
    "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.1",
    "HOROVOD_GLOO_RENDEZVOUS_PORT": "4242",
    "HOROVOD_CONTROLLER": "gloo",
}
SLURM = {
    "SLURM_PROCID": "5",
    "SLURM_NTASKS": "8",
    "SLURM_LOCALID": "1",
    "SLURM_NTASKS_PER_NODE": "4(x2)",
    "SLURM_NODEID": "1",
    "SLURM_STEP_ID": "0",
}
TORCHRUN = {
    "RANK": "3",
    "WORLD_SIZE": "4",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "GROUP_RANK": "1",
    "TORCHELASTIC_RUN_ID": "abc",
    "MASTER_ADDR": "n0",
    "MASTER_PORT": "29500",
}


@pytest.mark.parametrize(
    ("env", "launcher", "facts"),
    [
        (OPENMPI, "openmpi", (1, 4, 1, 4, None)),
        (MPICH, "mpich", (1, 2, 1, 2, None)),
        (INTELMPI, "intelmpi", (1, 2, 1, 2, None)),
        (DEEPSPEED, "deepspeed", (1, 2, 1, 2, 0)),
        (ACCELERATE, "accelerate", (1, 2, 1, 2, 0)),
        (HOROVOD, "horovod", (3, 4, 1, 2, 1)),
        (SLURM, "slurm", (5, 8, 1, 4, 1)),
        (TORCHRUN, "torchrun", (3, 4, 1, 2, 1)),
        ({**SLURM, **TORCHRUN}, "torchrun", (3, 4, 1, 2, 1)),  # torchrun inside srun
        ({**SLURM, **OPENMPI}, "openmpi", (1, 4, 1, 4, None)),  # mpirun in an allocation
        ({"RANK": "0", "WORLD_SIZE": "2"}, "env", (0, 2, None, None, None)),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_each_launcher_is_read(
    env: dict[str, str], launcher: str, facts: tuple[int | None, ...]
) -> None:
    launch = read_launch(env)
    assert launch.launcher == launcher
    assert launch.view is not None and launch.inside
    view = launch.view
    assert (
        view.rank,
        view.world_size,
        view.local_rank,
        view.local_world_size,
        view.node_rank,
    ) == facts
    assert launch.problems == ()


def test_nothing_set_is_no_launcher() -> None:
    launch = read_launch({"PATH": "/bin", "LOCAL_SIZE": "2"})
    assert (launch.launcher, launch.view, launch.inside) == (None, None, False)
    assert not has_launcher_vars({"PATH": "/bin"})
    for env in (OPENMPI, MPICH, HOROVOD, DEEPSPEED, {"MASTER_PORT": "1"}, {"SLURM_JOB_ID": "1"}):
        assert has_launcher_vars(env)


def test_innermost_first_and_outer_kept() -> None:
    assert present_launchers({**SLURM, **TORCHRUN}) == ["torchrun", "slurm"]
    assert present_launchers({**SLURM, **OPENMPI, "RANK": "1"}) == ["openmpi", "slurm", "env"]
    # DeepSpeed's own RANK/WORLD_SIZE are not "exported by hand".
    assert present_launchers(DEEPSPEED) == ["deepspeed"]


@pytest.mark.parametrize(
    ("env", "var", "reason"),
    [
        ({**OPENMPI, "OMPI_COMM_WORLD_RANK": "one"}, "OMPI_COMM_WORLD_RANK", "not a plain"),
        ({**OPENMPI, "OMPI_COMM_WORLD_RANK": " 1"}, "OMPI_COMM_WORLD_RANK", "not a plain"),
        ({**OPENMPI, "OMPI_COMM_WORLD_RANK": "²"}, "OMPI_COMM_WORLD_RANK", "not a plain"),
        ({**OPENMPI, "OMPI_COMM_WORLD_RANK": "9" * 30}, "OMPI_COMM_WORLD_RANK", "not a plain"),
        ({**OPENMPI, "OMPI_COMM_WORLD_SIZE": "0"}, "OMPI_COMM_WORLD_SIZE", "below 1"),
        ({**OPENMPI, "OMPI_COMM_WORLD_RANK": "4"}, "OMPI_COMM_WORLD_RANK", "not below"),
        ({**MPICH, "MPI_LOCALRANKID": ""}, "MPI_LOCALRANKID", "empty"),
        ({**HOROVOD, "HOROVOD_LOCAL_RANK": "-1"}, "HOROVOD_LOCAL_RANK", "below 0"),
        ({**SLURM, "SLURM_NTASKS_PER_NODE": "4x2"}, "SLURM_NTASKS_PER_NODE", "Slurm task"),
    ],
)
def test_strict_parsing_records_problems(env: dict[str, str], var: str, reason: str) -> None:
    launch = read_launch(env)
    assert [p.var for p in launch.problems] == [var]
    assert reason in launch.problems[0].reason


def test_canonical_launcher_names() -> None:
    assert canonical_launcher(" OMPI ") == "openmpi"
    assert canonical_launcher("srun") == "slurm"
    assert canonical_launcher("DeepSpeed") == "deepspeed"
    assert canonical_launcher("pdsh") is None
    assert canonical_launcher("env") is None  # not a launcher one starts


# --- DeepSpeed's --include/--exclude/--num_gpus (deepspeed/launcher/runner.py) -----


@pytest.mark.parametrize(
    ("machine", "visible", "kw", "spec", "error"),
    [
        (8, None, {}, "0,1,2,3,4,5,6,7", None),
        (8, None, {"include": "localhost:1,2"}, "1,2", None),
        (8, None, {"include": "localhost:2,1,2"}, "1,2", None),
        (8, None, {"include": "localhost"}, "0,1,2,3,4,5,6,7", None),
        (4, None, {"exclude": "localhost:0"}, "1,2,3", None),
        (8, None, {"num_gpus": 2}, "0,1", None),
        (2, None, {"num_gpus": 4}, "0,1,2,3", None),  # not checked against the machine
        (8, "4,5", {}, "4,5", None),  # the export becomes --include localhost:4,5
        (8, "4,5", {"include": "localhost:1"}, "1", None),  # the export is ignored
        (8, "4,5", {"num_gpus": 2}, "0,1", None),
        (8, None, {"include": "localhost:8"}, None, "No slot '8' specified"),
        (8, None, {"include": "worker-1:0"}, None, "Hostname 'worker-1' not found"),
        (8, None, {"include": "localhost:0", "exclude": "localhost:1"}, None, "mutually"),
        (8, None, {"include": "localhost:0", "num_gpus": 1}, None, "Cannot specify"),
        (8, "GPU-3ceaaf30", {}, None, "invalid literal for int()"),
        (0, None, {}, None, "no GPU resources available"),
        (1, None, {"exclude": "localhost:0"}, None, "IndexError: list index"),
    ],
)
def test_deepspeed_devices(
    machine: int, visible: str | None, kw: dict[str, Any], spec: str | None, error: str | None
) -> None:
    ds = deepspeed_devices(machine, visible, **kw)
    assert ds.spec == spec
    if error is None:
        assert ds.error is None
    else:
        assert ds.error is not None and error in ds.error


# --- check: the acceptance cases ---------------------------------------------------


def _check(env: dict[str, str], visible: str | None = "0,1", **kw: Any) -> dict[str, Any]:
    report = run_check(load_fixture("a100x8"), visible=visible, env=env, **kw)
    return {
        "codes": [(f.code, f.severity) for f in report.findings],
        "findings": report.findings,
        "ok": report.ok,
        "visible": [d.nvml_index for d in report.resolution.devices],
    }


def _codes(out: dict[str, Any]) -> set[str]:
    return {code for code, _ in out["codes"]}


def test_mpiexec_four_ranks_on_two_gpus_is_too_many() -> None:
    env = {**OPENMPI, "OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_RANK": "3"}
    assert not any(k in env for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"))
    out = _check(env)
    assert ("DDP-TOO-MANY-RANKS", "error") in out["codes"]
    too_many = next(f for f in out["findings"] if f.code == "DDP-TOO-MANY-RANKS")
    assert "4 ranks per node (OMPI_COMM_WORLD_LOCAL_SIZE)" in too_many.message
    assert "mpirun -n 2" in (too_many.fix or "")
    invalid = next(f for f in out["findings"] if f.code == "DDP-LOCAL-RANK-INVALID")
    assert invalid.subject == "OMPI_COMM_WORLD_LOCAL_RANK"


@pytest.mark.parametrize(
    ("env", "name"),
    [(DEEPSPEED, "DeepSpeed"), (OPENMPI, "Open MPI"), (MPICH, "MPICH"), (HOROVOD, "Horovod")],
)
def test_launcher_is_named_and_not_not_launched(env: dict[str, str], name: str) -> None:
    out = _check(env, visible="0,1,2,3")
    assert "DDP-NOT-LAUNCHED" not in _codes(out)
    named = [f for f in out["findings"] if f.code == "DDP-LAUNCHER"]
    assert len(named) == 1 and named[0].message.startswith(f"Launched by {name}")


def test_deepspeed_launch_is_clean() -> None:
    out = _check(DEEPSPEED, visible="0,1")
    assert out["ok"], out["codes"]
    assert ("DDP-PLAN", "info") in out["codes"]


def test_mpi_without_rendezvous_variables() -> None:
    mpi = {**OPENMPI, "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_SIZE": "2"}
    # A job that says it uses torch's rendezvous (a DDP option): an error.
    out = _check(mpi, backend="nccl")
    missing = next(f for f in out["findings"] if f.code == "DDP-LAUNCHER-ENV-MISSING")
    assert missing.severity == "error"
    assert "MASTER_ADDR, MASTER_PORT" in missing.message
    assert "mpirun -x MASTER_ADDR" in (missing.fix or "")
    assert missing.predicts is not None and "variable RANK expected" in missing.predicts
    # One that does not (Horovod, nccl-tests under mpirun): info (issue 19).
    quiet = next(f for f in _check(mpi)["findings"] if f.code == "DDP-LAUNCHER-ENV-MISSING")
    assert quiet.severity == "info" and quiet.message.startswith("If the job uses torch's")
    # With MASTER_* exported but RANK/WORLD_SIZE not mapped: a warning, not an error.
    env = {
        **MPICH,
        "MASTER_ADDR": "h",
        "MASTER_PORT": "29500",
    }
    out = _check(env, backend="nccl")
    missing = next(f for f in out["findings"] if f.code == "DDP-LAUNCHER-ENV-MISSING")
    assert missing.severity == "warning" and "PMI_RANK" in (missing.fix or "")
    # Everything mapped: no rendezvous finding, and the plan is shown.
    env.update(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
    out = _check(env)
    assert "DDP-LAUNCHER-ENV-MISSING" not in _codes(out)
    assert out["ok"] and ("DDP-PLAN", "info") in out["codes"]


def test_horovod_needs_no_master_variables() -> None:
    out = _check(HOROVOD)
    assert "DDP-LAUNCHER-ENV-MISSING" not in _codes(out)
    assert out["ok"], out["codes"]


@pytest.mark.parametrize(
    ("env", "severity", "subject"),
    [
        ({**SLURM, **OPENMPI}, "warning", "OMPI_COMM_WORLD_SIZE"),  # 4 MPI ranks, 8 tasks
        ({**OPENMPI, "RANK": "0", "WORLD_SIZE": "4"}, "error", "OMPI_COMM_WORLD_RANK"),
        ({**MPICH, "WORLD_SIZE": "4", "RANK": "1"}, "error", "PMI_SIZE"),
        ({**HOROVOD, **{**OPENMPI, "OMPI_COMM_WORLD_RANK": "3"}}, "warning", "HOROVOD_LOCAL_SIZE"),
    ],
)
def test_two_launchers_disagreeing(env: dict[str, str], severity: str, subject: str) -> None:
    out = _check(env, visible="0,1,2,3")
    mismatches = [f for f in out["findings"] if f.code == "DDP-LAUNCHER-MISMATCH"]
    assert mismatches, out["codes"]
    assert (mismatches[0].severity, mismatches[0].subject) == (severity, subject)


def test_agreeing_launchers_are_quiet() -> None:
    env = {**OPENMPI, "RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}
    env.update(SLURM_PROCID="0", SLURM_NTASKS="4", MASTER_ADDR="h", MASTER_PORT="1")
    out = _check(env, visible="0,1,2,3")
    assert "DDP-LAUNCHER-MISMATCH" not in _codes(out)
    assert "DDP-SLURM-MISMATCH" not in _codes(out)  # RANK vs SLURM_PROCID is not compared
    # torchrun inside srun: sizes differ by design, DDP-SLURM-NESTED's business.
    assert "DDP-LAUNCHER-MISMATCH" not in _codes(_check({**SLURM, **TORCHRUN}))


def test_bad_mpi_value_is_a_warning() -> None:
    out = _check({**OPENMPI, "OMPI_COMM_WORLD_LOCAL_SIZE": "four"})
    bad = next(f for f in out["findings"] if f.code == "DDP-BAD-ENV")
    assert (bad.severity, bad.subject) == ("warning", "OMPI_COMM_WORLD_LOCAL_SIZE")
    assert "DDP-TOO-MANY-RANKS" not in _codes(out)  # an unusable count plans nothing


def test_before_launch_with_launcher_option() -> None:
    out = _check({}, launcher="openmpi", nproc_per_node=4)
    assert ("DDP-TOO-MANY-RANKS", "error") in out["codes"]
    assert ("DDP-LAUNCHER-ENV-MISSING", "warning") in out["codes"]
    assert "DDP-NOT-LAUNCHED" not in _codes(out)
    named = next(f for f in out["findings"] if f.code == "DDP-LAUNCHER")
    assert "before it starts" in named.message and "OMPI_COMM_WORLD_RANK" in named.message
    out = _check({}, launcher="torchrun", nproc_per_node=2)
    assert out["ok"] and "DDP-NOT-LAUNCHED" in _codes(out)
    out = _check({}, launcher="horovod", nproc_per_node=2)
    not_launched = next(f for f in out["findings"] if f.code == "DDP-NOT-LAUNCHED")
    assert "horovodrun -np 2" in (not_launched.fix or "")


def test_deepspeed_include_sets_the_workers_visible_devices() -> None:
    out = _check({}, visible=None, deepspeed_include="localhost:1,2")
    assert out["visible"] == [1, 2]
    ds = next(f for f in out["findings"] if f.code == "DDP-DEEPSPEED-DEVICES")
    assert ds.severity == "info"
    assert "CUDA_VISIBLE_DEVICES=1,2 in every worker from --include localhost:1,2" in ds.message
    plan = next(f for f in out["findings"] if f.code == "DDP-PLAN")
    assert "local rank 1 -> cuda:1 = physical GPU 2" in plan.message
    # An exported CUDA_VISIBLE_DEVICES is dropped when --include is given.
    out = _check({}, visible="4,5", deepspeed_include="localhost:1")
    ds = next(f for f in out["findings"] if f.code == "DDP-DEEPSPEED-DEVICES")
    assert ds.severity == "warning" and "ignores CUDA_VISIBLE_DEVICES=4,5" in ds.message
    assert out["visible"] == [1]
    # --num_gpus (--nproc-per-node here) with an export: slots 0..N-1, not the export.
    out = _check({}, visible="4,5", launcher="deepspeed", nproc_per_node=2)
    assert out["visible"] == [0, 1]
    out = _check({}, visible=None, deepspeed_exclude="localhost:0")
    assert out["visible"] == [1, 2, 3, 4, 5, 6, 7]


def test_deepspeed_refusal_is_an_error() -> None:
    out = _check({}, visible=None, deepspeed_include="localhost:9")
    refused = next(f for f in out["findings"] if f.code == "DDP-DEEPSPEED-REFUSED")
    assert refused.severity == "error"
    assert refused.predicts == "ValueError: No slot '9' specified on host 'localhost'"
    assert not out["ok"]


def test_deepspeed_flags_inside_a_deepspeed_worker_change_nothing() -> None:
    out = _check(DEEPSPEED, visible="0,1", launcher="deepspeed")
    assert "DDP-DEEPSPEED-DEVICES" not in _codes(out)
    assert out["visible"] == [0, 1]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--launcher", "pdsh"], "--launcher must be one of"),
        (["--launcher", "openmpi", "--deepspeed-include", "localhost:0"], "need --launcher"),
    ],
)
def test_cli_bad_launcher_exits_2(args: list[str], needle: str) -> None:
    result = CliRunner().invoke(main, ["check", "--snapshot", str(fixture_path("a100x8")), *args])
    assert result.exit_code == 2
    assert result.stdout == "" and needle in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("launcher", "code", "needle"),
    [
        ("torchrun", 0, "Launch with torchrun --nproc-per-node 2 train.py."),
        ("accelerate", 0, "Launch with accelerate launch --num_processes 2 train.py."),
        ("deepspeed", 0, "ignores CUDA_VISIBLE_DEVICES=0,1, which happens to match"),
        ("horovod", 0, "Launch with horovodrun -np 2 -H localhost:2 on one node train.py."),
        ("openmpi", 0, "Export them: mpirun -x MASTER_ADDR=<rank 0 host>"),
        ("mpich", 0, "Export them: mpiexec -genv MASTER_ADDR <rank 0 host>"),
        ("intelmpi", 0, "Export them: mpiexec -genv MASTER_ADDR <rank 0 host>"),
        ("slurm", 0, "Evaluating a launch by Slurm (srun) before it starts"),
    ],
)
def test_cli_before_each_launcher(
    monkeypatch: pytest.MonkeyPatch, launcher: str, code: int, needle: str
) -> None:
    # The recipes' pre-job check (docs/launchers.md), for every launcher.
    for key in (
        "RANK",
        "WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "TORCHELASTIC_RUN_ID",
        "SLURM_PROCID",
        "SLURM_NTASKS",
    ):
        monkeypatch.delenv(key, raising=False)  # fmt: skip
    result = CliRunner().invoke(
        main,
        ["check", "--snapshot", str(fixture_path("a100x8")), "--visible", "0,1",
         "--launcher", launcher, "--nproc-per-node", "2"],
    )  # fmt: skip
    assert result.exit_code == code, result.output
    assert needle in " ".join(result.stdout.split())
    result = CliRunner().invoke(
        main,
        ["check", "--snapshot", str(fixture_path("a100x8")), "--visible", "0,1",
         "--launcher", launcher, "--nproc-per-node", "4"],
    )  # fmt: skip
    if launcher == "deepspeed":
        # --num_gpus 4 drops the export: DeepSpeed's workers see GPUs 0..3.
        assert result.exit_code == 0, result.output
        assert "ignores CUDA_VISIBLE_DEVICES=0,1 because --num_gpus 4" in result.stdout
        assert "cuda:3 → GPU 3" in result.stdout
    else:
        assert result.exit_code == 1 and "DDP-TOO-MANY-RANKS" in result.stdout


def test_cli_accepts_deepspeeds_local_rank_argument() -> None:
    # deepspeed/launcher/launch.py appends --local_rank=N unless --no_local_rank.
    # It goes right after the module: `python -m gpudiag --local_rank=0 probe ddp`.
    for arg in ("--local_rank=1", "--local-rank=1"):
        result = CliRunner().invoke(
            main, [arg, "check", "--snapshot", str(fixture_path("a100x8")), "--visible", "0"]
        )
        assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["--local_rank=x", "check"])
    assert result.exit_code == 2
    assert "--local_rank" not in CliRunner().invoke(main, ["--help"]).stdout


def test_cli_launcher_json(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    result = CliRunner().invoke(
        main,
        ["check", "--snapshot", str(fixture_path("a100x8")), "--json",
         "--deepspeed-include", "localhost:1,2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert '"cuda_visible_devices": "1,2"' in result.stdout
    assert '"DDP-DEEPSPEED-DEVICES"' in result.stdout


# --- probe: rank and size from the launcher (gpudiag.launch.process.detect_launch) ----


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (OPENMPI, ("openmpi", 1, 4, 1, None, 4, "127.0.0.1", 29500)),
        (MPICH, ("mpich", 1, 2, 1, None, 2, "127.0.0.1", 29500)),
        (INTELMPI, ("intelmpi", 1, 2, 1, None, 2, "127.0.0.1", 29500)),
        ({**HOROVOD, "MASTER_ADDR": "n0", "MASTER_PORT": "7"}, ("horovod", 3, 4, 1, 1, 2, "n0", 7)),
        (DEEPSPEED, ("deepspeed", 1, 2, 1, 0, 2, "127.0.0.1", 29500)),
        (ACCELERATE, ("accelerate", 1, 2, 1, 0, 2, "127.0.0.1", 29500)),
        ({**OPENMPI, "MASTER_PORT": "4000"}, ("openmpi", 1, 4, 1, None, 4, "127.0.0.1", 4000)),
    ],
)
def test_detect_launch_reads_every_launcher(env: dict[str, str], expected: tuple[Any, ...]) -> None:
    launch = detect_launch(env)
    assert launch is not None
    assert (
        launch.launcher,
        launch.rank,
        launch.world_size,
        launch.local_rank,
        launch.node_rank,
        launch.local_world_size,
        launch.master_addr,
        launch.master_port,
    ) == expected


def test_detect_launch_several_nodes_needs_master() -> None:
    env = {**OPENMPI, "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}  # 4 ranks, 2 per node
    with pytest.raises(GpudiagInputError, match=r"needs MASTER_ADDR.*-x MASTER_ADDR"):
        detect_launch(env)
    with pytest.raises(GpudiagInputError, match="OMPI_COMM_WORLD_RANK='x' is not an integer"):
        detect_launch({**OPENMPI, "OMPI_COMM_WORLD_RANK": "x"})
    with pytest.raises(GpudiagInputError, match=r"rank 4 is outside 0\.\.3"):
        detect_launch({**OPENMPI, "OMPI_COMM_WORLD_RANK": "4"})


def test_api_check_takes_a_launcher() -> None:
    import gpudiag.api as gd

    report = gd.check(
        snapshot=str(fixture_path("a100x8")), visible="0,1", launcher="openmpi",
        nproc_per_node=4, env={},
    )  # fmt: skip
    assert not report.ok
    assert {"DDP-LAUNCHER", "DDP-TOO-MANY-RANKS"} <= {f.code for f in report.findings}
    # The Python API answers in Python's terms (issue 11): a ValueError naming it.
    with pytest.raises(ValueError, match="launcher must be one of 'torchrun'"):
        gd.check(snapshot=str(fixture_path("a100x8")), launcher="pdsh", env={})
