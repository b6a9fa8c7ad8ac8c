"""Issue 13 through the CLI: each reported machine replayed from its snapshot, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main

from .conftest import clear_launch_env, fixture_path


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_launch_env(monkeypatch, "KINETO_USE_DAEMON")


def run(
    fixture: str, *args: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(
        main, ["check", "--snapshot", str(fixture_path(fixture)), "--json", *args], env=env
    )
    doc = json.loads(result.stdout)
    # stderr holds only the gate's reasons (one line per error, then a summary).
    errors = [f for f in doc["findings"] if f["severity"] == "error"]
    lines = result.stderr.splitlines()
    assert len(lines) == (len(errors) + 1 if errors else 0), result.stderr
    assert all(line.startswith("gpudiag: error ") for line in lines[:-1])
    return result.exit_code, doc


def findings(doc: dict[str, object]) -> dict[str, dict[str, str]]:
    items = doc["findings"]
    assert isinstance(items, list)
    return {f["code"]: f for f in items}


# (id, fixture, args, env, exit code, code that must appear, text in its predicts)
REPORTED = [
    (
        "plain-python-ddp",
        "a100x8",
        ["--launched", "--script-reads", "LOCAL_RANK"],
        {},
        1,
        "DDP-LAUNCHED-ENV-MISSING",
        "KeyError: 'LOCAL_RANK'",
    ),
    (
        "plain-python-env-rendezvous",
        "a100x8",
        ["--launched", "--init-rank-args"],
        {},
        1,
        "DDP-LAUNCHED-ENV-MISSING",
        "environment variable MASTER_ADDR expected, but not set",
    ),
    (
        "container-without-gpu-access",
        "container_no_gpu",
        [],
        {},
        1,
        "HOST-CONTAINER-NO-GPU",
        "Found no NVIDIA driver on your system",
    ),
    (
        "machine-without-nvidia-gpu",
        "no_nvidia_gpu",
        [],
        {},
        1,  # a GPU check with no GPU fails (CHECK-NO-GPU; issue 20)
        "HOST-NO-NVIDIA-GPU",
        "Found no NVIDIA driver on your system",
    ),
    (
        "driver-not-installed",
        "driver_missing",
        [],
        {},
        1,
        "HOST-DRIVER-MISSING",
        "Found no NVIDIA driver on your system",
    ),
    (
        "windows-nccl",
        "windows_rtx4090x2",
        ["--nproc-per-node", "2", "--backend", "nccl"],
        {},
        1,
        "DDP-NCCL-NOT-BUILT",
        "Distributed package doesn't have NCCL built in",
    ),
    ("tf32-on-v100", "v100x8", ["--tf32"], {}, 0, "HEALTH-TF32-UNSUPPORTED", "no speed-up"),
    (
        "fp16-bf16-model",
        "a100x8",
        ["--autocast-dtype", "fp16", "--model-dtype", "bf16"],
        {},
        0,
        "HEALTH-AMP-FP16-OVERFLOW",
        "inf/NaN",
    ),
    (
        "lightning-devices-1-2",
        "a100x8",
        ["--ddp-devices", "1,2"],
        {},
        0,
        "DDP-CUDA0-CONTEXT",
        "physical GPU 0",
    ),
    (
        "kineto-daemon",
        "a100x8",
        [],
        {"KINETO_USE_DAEMON": "1"},
        0,
        "ENV-KINETO-DAEMON",
        "Duplicate GPU detected",
    ),
    (
        "bf16-on-v100x8",
        "v100x8",
        ["--amp", "bf16"],
        {},
        0,
        "HEALTH-AMP-BF16",
        "does not support bfloat16",
    ),
]


@pytest.mark.parametrize(
    ("name", "fixture", "args", "env", "code", "expected", "predicts"),
    REPORTED,
    ids=[r[0] for r in REPORTED],
)
def test_reported_machine(
    name: str,
    fixture: str,
    args: list[str],
    env: dict[str, str],
    code: int,
    expected: str,
    predicts: str,
) -> None:
    exit_code, doc = run(fixture, *args, env=env)
    assert exit_code == code
    found = findings(doc)
    assert expected in found, sorted(found)
    assert predicts in (found[expected]["predicts"] or "") + found[expected]["message"]
    assert found[expected]["fix"]


def test_bf16_on_v100x8_is_one_finding_listing_the_gpus() -> None:
    _, doc = run("v100x8", "--amp", "bf16")
    items = [f for f in doc["findings"] if f["code"] == "HEALTH-AMP-BF16"]  # type: ignore[union-attr, index]
    assert len(items) == 1
    assert "physical GPUs 0, 1, 2, 3, 4, 5, 6, 7 (8x Tesla V100-SXM2-32GB" in items[0]["message"]


def test_one_set_device_under_a_launch_is_that_ranks() -> None:
    env = {
        "RANK": "2",
        "LOCAL_RANK": "2",
        "WORLD_SIZE": "8",
        "LOCAL_WORLD_SIZE": "8",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
        "TORCHELASTIC_RUN_ID": "x",
    }
    code, doc = run("v100x8", "--set-device", "2", env=env)
    assert code == 0 and "DDP-DUPLICATE-GPU" not in findings(doc)
    code, doc = run("v100x8", "--set-device", "0", env=env)
    assert code == 1 and "--local-rank" in findings(doc)["DDP-DUPLICATE-GPU"]["fix"]
    code, doc = run("v100x8", "--set-device", "0", "--local-rank", "0", env=env)
    assert code == 0
    code, doc = run("v100x8", "--set-device", "0,1,2,3,4,5,6,7", env=env)
    assert code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set-device", "0,x"], "--set-device"),
        (["--set-device", "0,1", "--nproc-per-node", "4"], "--set-device lists 2 values"),
        (["--ddp-devices", "1,-1"], "--ddp-devices"),
        (["--ddp-devices", ""], "--ddp-devices"),
        (["--script-reads", "LOCAL RANK"], "--script-reads"),
        (["--model-dtype", "int8"], "--model-dtype"),
        (["--local-rank", "x"], "--local-rank"),
        (["--autocast-dtype", "fp8"], "--amp"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["check", "--snapshot", str(fixture_path("a100x8")), *args])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_healthy_reported_machines_stay_clean() -> None:
    for fixture in ("v100x8", "windows_rtx4090x2", "a100x8"):
        code, doc = run(fixture)
        assert code == 0
        assert not {c for c in findings(doc) if c.startswith(("HOST-", "ENV-"))}


@pytest.mark.parametrize(
    ("extra", "code", "severity"),
    [
        ([], 0, "info"),  # a CPU DDP job: hiding the GPUs is what it asks (issue 20)
        (["--amp", "bf16"], 1, "error"),  # autocast on CUDA needs a GPU
        (["--expect-gpus", "2"], 1, "error"),
        (["--backend", "nccl"], 1, "error"),
    ],
)
def test_empty_mask_follows_the_jobs_intent(extra: list[str], code: int, severity: str) -> None:
    args = ["check", "--snapshot", str(fixture_path("a100x8")), "--visible", ""]
    args += ["--nproc-per-node", "2", "--backend", "gloo", *extra, "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == code, result.output
    found = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "VIS-NO-DEVICES"]
    assert [f["severity"] for f in found] == [severity]


@pytest.mark.parametrize(
    ("launcher", "warned"),
    [("accelerate", False), ("torchrun", False), ("deepspeed", False), ("slurm", True)],
)
def test_a_chosen_launcher_that_sets_torchs_variables_is_not_told_to_run_torchrun(
    monkeypatch: pytest.MonkeyPatch, launcher: str, warned: bool
) -> None:
    # Inside an allocation (srun), `check --launcher accelerate` warned "Run torchrun
    # inside srun" although accelerate launch sets RANK and the rest (issue 20).
    for var, value in (("SLURM_JOB_ID", "1"), ("SLURM_PROCID", "0"), ("SLURM_NTASKS", "1"),
                       ("SLURM_LOCALID", "0"), ("SLURM_NODEID", "0")):  # fmt: skip
        monkeypatch.setenv(var, value)
    args = ["check", "--snapshot", str(fixture_path("a100x8")), "--launcher", launcher]
    result = CliRunner().invoke(main, [*args, "--nproc-per-node", "2", "--json"])
    codes = [f["code"] for f in json.loads(result.stdout)["findings"]]
    assert ("DDP-LAUNCHER-ENV-MISSING" in codes) is warned, codes


def test_plans_hand_out_no_gpu_when_torch_sees_none(tmp_path: Path) -> None:
    # issue 20: DP-DEVICES/DDP-PLAN mapped GPUs while INV-TORCH-SEES-NONE said torch
    # (a CPU-only build) sees none, in the same report.
    doc = json.loads(fixture_path("a100x8").read_text())
    doc["torch"].update(version="2.13.0+cpu", cuda_version=None, cpu_only=True,
                        cuda_available=False, device_count=0, devices=[])  # fmt: skip
    snap = tmp_path / "cpu_torch.json"
    snap.write_text(json.dumps(doc))
    args = ["check", "--snapshot", str(snap), "--device-ids", "0,1", "--nproc-per-node", "2"]
    result = CliRunner().invoke(main, [*args, "--json"])
    found = {f["code"]: f for f in json.loads(result.stdout)["findings"]}
    assert found["INV-TORCH-SEES-NONE"]["severity"] == "error"
    assert "physical GPU" not in found["DP-DEVICES"]["message"]
    assert found["DP-DEVICES"]["message"].startswith("DataParallel gets no GPU")
    assert found["DDP-PLAN"]["message"].startswith("No rank gets a GPU")


_PER_TASK = {  # srun --ntasks-per-node=8 --gpus-per-task=1: this is task 1's view
    "SLURM_JOB_ID": "5", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_NTASKS": "8",
    "SLURM_LOCALID": "1", "SLURM_NODEID": "0", "SLURM_NTASKS_PER_NODE": "8",
    "SLURM_GPUS_PER_TASK": "1", "SLURM_STEP_GPUS": "0,1,2,3,4,5,6,7",
}  # fmt: skip


def test_slurm_per_task_binding_is_understood(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 19: DDP-TOO-MANY-RANKS (an error) contradicted DDP-LOCAL-RANK-INVALID's
    # "each task has its own GPU", and VIS-SLURM-MISMATCH said not to override
    # CUDA_VISIBLE_DEVICES that Slurm itself set to the task's GPU.
    for var, value in _PER_TASK.items():
        monkeypatch.setenv(var, value)
    codes = findings(run("a100x8", "--visible", "1", "--backend", "nccl")[1])
    assert "DDP-TOO-MANY-RANKS" not in codes and "VIS-SLURM-MISMATCH" not in codes
    assert "each task its own GPU" in codes["DDP-LOCAL-RANK-INVALID"]["message"]
    # Without per-task binding the same counts are too many ranks for one GPU.
    monkeypatch.delenv("SLURM_GPUS_PER_TASK")
    codes = findings(run("a100x8", "--visible", "1", "--backend", "nccl")[1])
    assert "DDP-TOO-MANY-RANKS" in codes and "VIS-SLURM-MISMATCH" in codes


def test_launcher_env_missing_is_info_unless_torch_rendezvous_is_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var, value in (("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2"),
                       ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
                       ("OMPI_COMM_WORLD_LOCAL_SIZE", "2")):  # fmt: skip
        monkeypatch.setenv(var, value)
    code, doc = run("a100x8")
    assert code == 0 and findings(doc)["DDP-LAUNCHER-ENV-MISSING"]["severity"] == "info"
    code, doc = run("a100x8", "--backend", "nccl")  # a DDP option: torch's rendezvous
    assert code == 1 and findings(doc)["DDP-LAUNCHER-ENV-MISSING"]["severity"] == "error"
