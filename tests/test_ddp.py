"""DDP / launcher rules, table-driven over the fixtures and environments."""

from __future__ import annotations

from typing import Any

import pytest

from gpudiag.core.ddp import CODES, duplicate_gpu_text, has_launcher_env, validate_ddp
from gpudiag.core.visibility import resolve_visible
from gpudiag.errors import GpudiagInputError
from gpudiag.model import Finding

from .conftest import load_fixture

TORCHRUN = {
    "RANK": "0",
    "LOCAL_RANK": "0",
    "WORLD_SIZE": "4",
    "LOCAL_WORLD_SIZE": "4",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
    "TORCHELASTIC_RUN_ID": "none",
}


def run(fixture: str, visible: str | None, env: dict[str, str], **kw: Any) -> list[Finding]:
    snap = load_fixture(fixture)
    args: dict[str, Any] = {"nproc_per_node": None, "backend": None}
    args.update(kw)
    return validate_ddp(resolve_visible(visible, None, snap), snap, env=env, **args)


def codes(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.code, f.severity) for f in findings]


CASES: list[tuple[str, str, str | None, dict[str, str], dict[str, Any], list[tuple[str, str]]]] = [
    ("torchrun-fine", "a100x8", "0,1,2,3", TORCHRUN, {}, [("DDP-PLAN", "info")]),
    (
        "pre-launch",
        "a100x8",
        None,
        {},
        {"nproc_per_node": 8},
        [("DDP-NOT-LAUNCHED", "info"), ("DDP-PLAN", "info")],
    ),
    (
        "too-many-ranks",
        "a100x8",
        "0,1",
        {},
        {"nproc_per_node": 4},
        [("DDP-TOO-MANY-RANKS", "error"), ("DDP-NOT-LAUNCHED", "info")],
    ),
    (
        "too-many-ranks-gloo-warns",
        "a100x8",
        "0,1",
        {},
        {"nproc_per_node": 4, "backend": "gloo"},
        [("DDP-TOO-MANY-RANKS", "warning"), ("DDP-NOT-LAUNCHED", "info")],
    ),
    (
        "nproc-from-local-world-size",
        "a100x8",
        "0,1",
        TORCHRUN,
        {},
        [("DDP-TOO-MANY-RANKS", "error")],
    ),
    (
        "nccl-no-gpu-cpu-torch",
        "no_driver",
        None,
        {},
        {"backend": "nccl"},
        [("DDP-NCCL-NO-GPU", "error"), ("DDP-NOT-LAUNCHED", "info")],
    ),
    (
        "gloo-no-gpu-fine",
        "no_driver",
        None,
        {},
        {"backend": "gloo"},
        [("DDP-NOT-LAUNCHED", "info")],
    ),
    (
        "nccl-hidden-gpus",
        "a100x8",
        "",
        {},
        {"backend": "nccl"},
        [("DDP-NCCL-NO-GPU", "error"), ("DDP-NOT-LAUNCHED", "info")],
    ),
    (
        "rank-set-master-missing",
        "a100x8",
        None,
        {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"},
        {},
        [("DDP-LAUNCHER-ENV-MISSING", "error")],
    ),
    (
        "srun-without-torchrun",
        "a100x8",
        "0",
        {"SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "8"},
        {},
        [("DDP-LAUNCHER-ENV-MISSING", "warning")],
    ),
    (
        "local-rank-beyond",
        "a100x8",
        "0,1",
        {**TORCHRUN, "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "2"},
        {},
        [("DDP-LOCAL-RANK-INVALID", "error")],
    ),
    (
        "slurm-one-gpu-per-task",
        "a100x8",
        "5",
        {
            "SLURM_PROCID": "3",
            "SLURM_LOCALID": "3",
            "SLURM_NTASKS": "4",
            "RANK": "3",
            "WORLD_SIZE": "4",
            "MASTER_ADDR": "n1",
            "MASTER_PORT": "29500",
        },
        {},
        [("DDP-LOCAL-RANK-INVALID", "error")],
    ),
    (
        "world-size-vs-slurm-ntasks",
        "a100x8",
        "0",
        {
            "SLURM_PROCID": "0",
            "SLURM_LOCALID": "0",
            "SLURM_NTASKS": "8",
            "RANK": "0",
            "WORLD_SIZE": "4",
            "MASTER_ADDR": "n1",
            "MASTER_PORT": "29500",
        },
        {},
        [("DDP-SLURM-MISMATCH", "error")],
    ),
    (
        "rank-vs-procid",
        "a100x8",
        "0",
        {
            "SLURM_PROCID": "1",
            "SLURM_LOCALID": "0",
            "SLURM_NTASKS": "2",
            "RANK": "0",
            "WORLD_SIZE": "2",
            "MASTER_ADDR": "n1",
            "MASTER_PORT": "29500",
        },
        {},
        [("DDP-SLURM-MISMATCH", "warning")],
    ),
    (
        "nested-torchrun-in-multitask-srun",
        "a100x8",
        None,
        {**TORCHRUN, "SLURM_NTASKS_PER_NODE": "4", "SLURM_PROCID": "0"},
        {},
        [("DDP-SLURM-NESTED", "warning"), ("DDP-PLAN", "info")],
    ),
    (
        "more-ranks-than-slurm-gpus",
        "a100x8",
        None,
        {**TORCHRUN, "SLURM_GPUS_ON_NODE": "2", "SLURM_PROCID": "0"},
        {},
        [("DDP-GPU-ALLOCATION", "warning"), ("DDP-PLAN", "info")],
    ),
    (
        "nproc-vs-local-world-size",
        "a100x8",
        None,
        TORCHRUN,
        {"nproc_per_node": 2},
        [("DDP-NPROC-MISMATCH", "warning"), ("DDP-PLAN", "info")],
    ),
    (
        "fixed-set-device-duplicates",
        "a100x8",
        None,
        TORCHRUN,
        {"set_device": 0},
        [("DDP-DUPLICATE-GPU", "error")],
    ),
    (
        "bad-env",
        "a100x8",
        None,
        {**TORCHRUN, "RANK": "zero"},
        {},
        [("DDP-BAD-ENV", "error")],
    ),
]


@pytest.mark.parametrize(
    ("fixture", "visible", "env", "kw", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_rules(
    fixture: str,
    visible: str | None,
    env: dict[str, str],
    kw: dict[str, Any],
    expected: list[tuple[str, str]],
) -> None:
    out = run(fixture, visible, env, **kw)
    assert codes(out) == expected
    for f in out:
        assert f.code in CODES
        if f.severity != "info":
            assert f.fix


def test_predicted_texts() -> None:
    out = run("a100x8", "0,1", {}, nproc_per_node=4)
    assert out[0].predicts == "RuntimeError: CUDA error: invalid device ordinal"
    assert "Local ranks 2..3" in out[0].message
    out = run("a100x8", None, {"RANK": "0", "WORLD_SIZE": "2"})
    assert out[0].predicts == (
        "ValueError: Error initializing torch.distributed using env:// rendezvous: "
        "environment variable MASTER_ADDR expected, but not set"
    )
    out = run("no_driver", None, {}, backend="nccl")
    assert out[0].predicts == "RuntimeError: Distributed package doesn't have NCCL built in"
    out = run("a100x8", "", {}, backend="nccl")
    assert out[0].predicts == (
        "ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!"
    )


def test_duplicate_gpu_bus_id() -> None:
    out = run("a100x8", None, TORCHRUN, set_device=0)
    # nvml 0 is at 00000000:07:00.0 -> NCCL prints 7000.
    assert (out[0].predicts or "").endswith("both on CUDA device 7000")
    assert duplicate_gpu_text("00000000:1A:00.0").endswith("CUDA device 1a000")


def test_plan_names_physical_gpus() -> None:
    out = run("a100x8", "4,5,6,7", TORCHRUN)
    assert "local rank 0 -> cuda:0 = physical GPU 4" in out[0].message
    assert "local rank 3 -> cuda:3 = physical GPU 7" in out[0].message


@pytest.mark.parametrize(
    ("env", "expected"),
    [({}, False), ({"PATH": "/bin"}, False), ({"RANK": "0"}, True), ({"SLURM_JOB_ID": "1"}, True)],
)
def test_has_launcher_env(env: dict[str, str], expected: bool) -> None:
    assert has_launcher_env(env) is expected


@pytest.mark.parametrize("kw", [{"backend": "mpi"}, {"nproc_per_node": 0}])
def test_bad_input(kw: dict[str, Any]) -> None:
    with pytest.raises(GpudiagInputError):
        run("a100x8", None, {}, **kw)
