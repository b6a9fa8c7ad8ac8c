"""``gpudiag check`` through click: exit codes, stdout/stderr, JSON shape, no torch."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpudiag.cli import main

from .conftest import clear_launch_env, fixture_path


@pytest.fixture(autouse=True)
def _no_launcher_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The CLI reads launcher variables from the live environment.
    clear_launch_env(monkeypatch)


def invoke(fixture: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        main,
        ["check", "--snapshot", str(fixture_path(fixture)), *args],
        # Wide: these tests are about content, not wrapping (tests/test_screen.py).
        env={"COLUMNS": "300", **(env or {})},
    )
    return result.exit_code, result.stdout, result.stderr


CASES = [
    # (id, fixture, args, exit code, substring of stdout)
    (
        "seed-invalid-id",
        "a100x8",
        ["--visible", "1,2", "--device-ids", "1,2"],
        1,
        "predicts: AssertionError: Invalid device id",
    ),
    (
        "seed-mismatch",
        "a100x8",
        ["--visible", "0,1,2,3", "--device-ids", "1,2,3"],
        1,
        "found one of them on device: cuda:0",
    ),
    (
        "seed-ok",
        "a100x8",
        ["--visible", "1,2", "--device-ids", "0,1"],
        0,
        "cuda:0 = physical GPU 1 (NVIDIA A100-SXM4-80GB",
    ),
    ("no-options-clean", "a100x8", [], 0, "OK: 0 errors"),
    ("empty-ids", "a100x8", ["--device-ids", ""], 1, "IndexError: list index out of range"),
    ("all-ids-imbalance", "mixed4", ["--device-ids", "all"], 0, "DP-IMBALANCE"),
    (
        "strict-warnings",
        "mixed4",
        ["--device-ids", "all", "--strict"],
        1,
        "FAILED (--strict, warnings count)",
    ),
    ("expect-gpus-ok", "a100x8", ["--expect-gpus", "8"], 0, "OK:"),
    ("expect-gpus-bad", "a100x8", ["--expect-gpus", "4"], 1, "CHECK-EXPECT-GPUS"),
    (
        "set-device-beyond",
        "a100x8",
        ["--visible", "1,2", "--set-device", "2"],
        1,
        "invalid device ordinal",
    ),
    ("nccl-no-gpu", "no_driver", ["--backend", "nccl"], 1, "DDP-NCCL-NO-GPU"),
    (
        "ddp-too-many",
        "a100x8",
        ["--visible", "0,1", "--nproc-per-node", "4"],
        1,
        "DDP-TOO-MANY-RANKS",
    ),
    ("lost-gpu", "gpu_lost", [], 1, "HEALTH-GPU-LOST"),
    ("bf16-old-gpu", "mixed4", ["--amp", "bf16"], 0, "HEALTH-AMP-BF16"),
    ("explicit-ids-no-gpu", "no_driver", ["--device-ids", "0"], 1, "DP-NO-VISIBLE-GPU"),
]


@pytest.mark.parametrize(
    ("fixture", "args", "code", "needle"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_exit_codes_and_output(fixture: str, args: list[str], code: int, needle: str) -> None:
    exit_code, out, err = invoke(fixture, *args)
    assert (exit_code, err) == (code, "")
    assert needle in out
    last = out.rstrip("\n").splitlines()[-1]
    assert last.startswith("OK:" if code == 0 else "FAILED")


def test_human_output_groups_by_severity() -> None:
    _, out, _ = invoke("a100x8", "--visible", "1,2", "--device-ids", "1,2")
    assert out.index("Errors (1):") < out.index("Info (")
    assert (
        "fix: under CUDA_VISIBLE_DEVICES=1,2, physical GPUs 1 and 2 are cuda:0 and cuda:1: "
        "use device_ids=[0,1]" in out
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device-ids", "1,x"], "--device-ids '1,x': 'x' is not an integer"),
        (["--batch-size", "many"], "--batch-size 'many' is not an integer"),
        (["--batch-size", "0"], "--batch-size must be at least 1, got 0"),
        (["--backend", "mpi"], "--backend must be one of nccl, gloo, not 'mpi'"),
        (["--amp", "fp8"], "--amp must be one of bf16, fp16, not 'fp8'"),
        (["--module-device", "gpu"], "--module-device 'gpu' is not cpu, cuda, cuda:K or K"),
        (["--expect-gpus", "-1"], "--expect-gpus must be 0 or more, got -1"),
        (["--nproc-per-node", "0"], "--nproc-per-node must be at least 1, got 0"),
    ],
)
def test_bad_input_exit_2_one_line(args: list[str], message: str) -> None:
    exit_code, out, err = invoke("a100x8", *args)
    assert exit_code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("gpudiag: error: ")
    assert message in err


def test_missing_snapshot_exit_2() -> None:
    result = CliRunner().invoke(main, ["check", "--snapshot", "/nonexistent/x.json"])
    assert result.exit_code == 2
    assert result.stderr.startswith("gpudiag: error: cannot read snapshot")
    assert result.stderr.count("\n") == 1


def test_json_shape() -> None:
    exit_code, out, err = invoke("a100x8", "--visible", "1,2", "--device-ids", "1,2", "--json")
    # stdout is the JSON alone; stderr says why the gate failed (issue 20).
    assert exit_code == 1
    assert err.splitlines()[0].startswith("gpudiag: error DP-INVALID-DEVICE-ID: ")
    assert err.splitlines()[-1] == (
        "gpudiag: check failed: 1 error(s); the JSON report has the fixes"
    )
    doc = json.loads(out)
    assert doc["ok"] is False
    assert doc["schema"] == "gpudiag-check/1"
    assert doc["cuda_visible_devices"] == "1,2"
    assert doc["checks"] == ["environment", "dataparallel", "health"]
    assert doc["visible"] == [
        {
            "cuda_ordinal": 0,
            "nvml_index": 1,
            "uuid": "GPU-3ceaaf30-8142-c8ea-91d9-3080f9b439fc",
            "mig_uuid": None,
            "name": "NVIDIA A100-SXM4-80GB",
        },
        {
            "cuda_ordinal": 1,
            "nvml_index": 2,
            "uuid": "GPU-9dfb369b-ab13-dfae-6276-55daa05f1119",
            "mig_uuid": None,
            "name": "NVIDIA A100-SXM4-80GB",
        },
    ]
    dp = [f for f in doc["findings"] if f["code"] == "DP-INVALID-DEVICE-ID"]
    assert dp == [
        {
            "code": "DP-INVALID-DEVICE-ID",
            "severity": "error",
            "message": dp[0]["message"],
            "fix": "under CUDA_VISIBLE_DEVICES=1,2, physical GPUs 1 and 2 are cuda:0 and "
            "cuda:1: use device_ids=[0,1].",
            "predicts": "AssertionError: Invalid device id",
            "predicts_also": [],
            "subject": None,
        }
    ]
    assert doc["counts"] == {
        "error": 1,
        "warning": 0,
        "info": sum(f["severity"] == "info" for f in doc["findings"]),
    }


def test_launcher_env_read_from_live_environment() -> None:
    exit_code, out, _ = invoke(
        "a100x8", "--json", env={"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}
    )
    doc = json.loads(out)
    assert exit_code == 1
    assert "ddp" in doc["checks"]
    assert [f["code"] for f in doc["findings"] if f["severity"] == "error"] == [
        "DDP-LAUNCHER-ENV-MISSING"
    ]


def test_snapshot_env_used_unless_visible_given(tmp_path: pytest.TempPathFactory) -> None:
    data = json.loads(fixture_path("a100x8").read_text())
    data["env"]["CUDA_VISIBLE_DEVICES"] = "6,7"
    path = tmp_path / "snap.json"  # type: ignore[operator]
    path.write_text(json.dumps(data))
    result = CliRunner().invoke(main, ["check", "--snapshot", str(path), "--json"])
    assert [d["nvml_index"] for d in json.loads(result.stdout)["visible"]] == [6, 7]
    result = CliRunner().invoke(
        main, ["check", "--snapshot", str(path), "--json", "--visible", "0"]
    )
    assert [d["nvml_index"] for d in json.loads(result.stdout)["visible"]] == [0]


def test_help_teaches() -> None:
    result = CliRunner().invoke(main, ["check", "--help"])
    assert result.exit_code == 0
    assert "gpudiag check --visible 1,2 --device-ids 0,1" in result.stdout
    assert "Exit codes: 0 no errors" in result.stdout
