"""DDP / launcher rules, table-driven over the fixtures and environments."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpudiag.core.ddp import duplicate_gpu_text, has_launcher_env, validate_ddp
from gpudiag.core.visibility import resolve_visible
from gpudiag.errors import GpudiagInputError
from gpudiag.findings.catalog import titles
from gpudiag.launch.ints import parse_env_int
from gpudiag.launch.reader import parse_tasks_per_node
from gpudiag.model import Finding

from .conftest import load_fixture

#: The codes this area owns (gpudiag/findings/catalog.py).
CODES = titles("ddp")

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
        # LOCAL_RANK is also outside 0..LOCAL_WORLD_SIZE-1.
        [("DDP-ENV-RANGE", "error"), ("DDP-LOCAL-RANK-INVALID", "error")],
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
    # Recorded on torch 2.11: set_device(local_rank) fails first, before NCCL's text.
    out = run("a100x8", "", {}, backend="nccl")
    assert out[0].predicts == "RuntimeError: No CUDA GPUs are available"
    assert out[0].predicts_also == (
        "init_process_group first: "
        "ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
    )


def test_invalid_ordinal_text_follows_the_torch_version() -> None:
    # torch >= 2.8 raises torch.AcceleratorError (pytorch#152023), recorded on 2.11.
    snapshot = replace(
        load_fixture("a100x8"),
        torch=replace(load_fixture("a100x8").torch, version="2.11.0+cu130"),  # type: ignore[arg-type]
    )
    resolution = resolve_visible("0", None, snapshot)
    out = validate_ddp(resolution, snapshot, env={}, nproc_per_node=2, backend="nccl")
    assert out[0].code == "DDP-TOO-MANY-RANKS"
    assert out[0].predicts == "torch.AcceleratorError: CUDA error: invalid device ordinal"
    assert out[0].predicts_also == (
        "torch < 2.8: RuntimeError: CUDA error: invalid device ordinal",
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


@pytest.mark.parametrize("kw", [{"backend": "mpi"}, {"nproc_per_node": 0}, {"nproc_per_node": -2}])
def test_bad_input(kw: dict[str, Any]) -> None:
    with pytest.raises(GpudiagInputError):
        run("a100x8", None, {}, **kw)


#: A complete env:// launch (no torchrun): RANK set, so bad values are errors.
LAUNCH = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
HUGE = "9" * 5000
PORT_TEXT = "ValueError: port must have value from 0 to 65535 but was {}."
NOT_SET = (
    "ValueError: Error initializing torch.distributed using env:// rendezvous: "
    "environment variable {} expected, but not set"
)
INT_TEXT = "ValueError: invalid literal for int() with base 10: {!r}"


def _int_error(text: str) -> str:
    # The wording is the interpreter's own: 3.10 says "(4300)", 3.11+ "(4300 digits)".
    try:
        int(text)
    except ValueError as exc:
        return f"ValueError: {exc}"
    raise AssertionError("int() accepted it")


HUGE_TEXT = _int_error(HUGE)
assert "Exceeds the limit (4300" in HUGE_TEXT

#: (id, env, kw, [(code, severity, subject, predicts or None)]) - every finding, in order.
BAD_VALUES: list[tuple[str, dict[str, str], dict[str, Any], list[tuple[str, str, Any, Any]]]] = [
    # Out of range before a launch: torchrun replaces them, so warnings (never a silent 0).
    (
        "local-world-size-0",
        {"LOCAL_WORLD_SIZE": "0"},
        {},
        [
            ("DDP-ENV-RANGE", "warning", "LOCAL_WORLD_SIZE", None),
            ("DDP-NOT-LAUNCHED", "info", None, NOT_SET.format("RANK")),
        ],
    ),
    (
        "slurm-gpus-negative",
        {"SLURM_GPUS_ON_NODE": "-2"},
        {},
        [
            ("DDP-ENV-RANGE", "warning", "SLURM_GPUS_ON_NODE", None),
            ("DDP-NOT-LAUNCHED", "info", None, NOT_SET.format("RANK")),
        ],
    ),
    (
        "world-size-negative",
        {"WORLD_SIZE": "-4"},
        {},
        [
            ("DDP-ENV-RANGE", "warning", "WORLD_SIZE", None),
            ("DDP-NOT-LAUNCHED", "info", None, NOT_SET.format("RANK")),
        ],
    ),
    (
        "world-size-0",
        {"WORLD_SIZE": "0"},
        {},
        [
            ("DDP-ENV-RANGE", "warning", "WORLD_SIZE", None),
            ("DDP-NOT-LAUNCHED", "info", None, NOT_SET.format("RANK")),
        ],
    ),
    (
        "master-port-too-big",
        {"MASTER_PORT": "99999"},
        {},
        [
            ("DDP-ENV-RANGE", "warning", "MASTER_PORT", PORT_TEXT.format(99999)),
            ("DDP-NOT-LAUNCHED", "info", None, NOT_SET.format("RANK")),
        ],
    ),
    (
        "master-port-negative",
        {"MASTER_PORT": "-1"},
        {},
        [
            ("DDP-ENV-RANGE", "warning", "MASTER_PORT", PORT_TEXT.format(-1)),
            ("DDP-NOT-LAUNCHED", "info", None, NOT_SET.format("RANK")),
        ],
    ),
    # The same inside a launch: errors.
    (
        "launch-world-size-0",
        {**LAUNCH, "WORLD_SIZE": "0"},
        {},
        [("DDP-ENV-RANGE", "error", "WORLD_SIZE", None)],
    ),
    (
        "launch-world-size-negative",
        {**LAUNCH, "WORLD_SIZE": "-4"},
        {},
        [("DDP-ENV-RANGE", "error", "WORLD_SIZE", None)],
    ),
    (
        "launch-master-port-too-big",
        {**LAUNCH, "MASTER_PORT": "99999"},
        {},
        [("DDP-ENV-RANGE", "error", "MASTER_PORT", PORT_TEXT.format(99999))],
    ),
    (
        "launch-master-port-negative",
        {**LAUNCH, "MASTER_PORT": "-1"},
        {},
        [("DDP-ENV-RANGE", "error", "MASTER_PORT", PORT_TEXT.format(-1))],
    ),
    (
        "launch-master-port-0",
        {**LAUNCH, "MASTER_PORT": "0"},
        {},
        [("DDP-ENV-RANGE", "warning", "MASTER_PORT", None)],
    ),
    (
        "launch-rank-negative",
        {**LAUNCH, "RANK": "-1"},
        {},
        [("DDP-ENV-RANGE", "error", "RANK", None)],
    ),
    (
        "launch-rank-not-below-world-size",
        {**LAUNCH, "RANK": "2"},
        {},
        [("DDP-ENV-RANGE", "error", "RANK", None)],
    ),
    (
        "launch-local-world-size-0",
        {**TORCHRUN, "LOCAL_WORLD_SIZE": "0"},
        {},
        [("DDP-ENV-RANGE", "error", "LOCAL_WORLD_SIZE", None)],
    ),
    (
        "launch-local-rank-not-below-local-world-size",
        {**TORCHRUN, "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2"},
        {},
        [("DDP-ENV-RANGE", "error", "LOCAL_RANK", None)],
    ),
    (
        "launch-local-world-size-above-world-size",
        {**TORCHRUN, "WORLD_SIZE": "2"},
        {},
        [("DDP-ENV-RANGE", "error", "LOCAL_WORLD_SIZE", None)],
    ),
    (
        "launch-local-rank-negative",
        {**LAUNCH, "LOCAL_RANK": "-1"},
        {},
        [
            (
                "DDP-LOCAL-RANK-INVALID",
                "error",
                "LOCAL_RANK",
                duplicate_gpu_text("00000000:07:00.0"),
            )
        ],
    ),
    (
        "launch-local-rank-negative-gloo",
        {**LAUNCH, "LOCAL_RANK": "-1"},
        {"backend": "gloo"},
        [("DDP-LOCAL-RANK-INVALID", "error", "LOCAL_RANK", None)],
    ),
    (
        "slurm-procid-not-below-ntasks",
        {"SLURM_PROCID": "4", "SLURM_NTASKS": "4", **LAUNCH, "RANK": "1", "WORLD_SIZE": "4"},
        {},
        [
            ("DDP-ENV-RANGE", "warning", "SLURM_PROCID", None),
            ("DDP-SLURM-MISMATCH", "warning", "RANK", None),
        ],
    ),
    # Empty values are values of their own, not "missing".
    (
        "rank-empty",
        {"RANK": ""},
        {},
        [
            ("DDP-ENV-EMPTY", "warning", "RANK", NOT_SET.format("RANK")),
            ("DDP-NOT-LAUNCHED", "info", None, NOT_SET.format("RANK")),
        ],
    ),
    (
        "launch-world-size-empty",
        {**LAUNCH, "WORLD_SIZE": ""},
        {},
        [("DDP-ENV-EMPTY", "error", "WORLD_SIZE", NOT_SET.format("WORLD_SIZE"))],
    ),
    (
        "launch-local-rank-empty",
        {**LAUNCH, "LOCAL_RANK": ""},
        {},
        [("DDP-ENV-EMPTY", "error", "LOCAL_RANK", INT_TEXT.format(""))],
    ),
    (
        "launch-master-addr-empty-port-unset",
        {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": ""},
        {},
        [
            ("DDP-ENV-EMPTY", "error", "MASTER_ADDR", NOT_SET.format("MASTER_ADDR")),
            ("DDP-LAUNCHER-ENV-MISSING", "error", "MASTER_PORT", NOT_SET.format("MASTER_PORT")),
        ],
    ),
    (
        "slurm-empty",
        {"SLURM_LOCALID": ""},
        {},
        [
            ("DDP-ENV-EMPTY", "warning", "SLURM_LOCALID", None),
            ("DDP-NOT-LAUNCHED", "info", None, NOT_SET.format("RANK")),
        ],
    ),
    # Slurm variables torch never reads: warnings, no predicted torch error.
    (
        "slurm-tasks-per-node-heterogeneous",
        {"SLURM_NTASKS_PER_NODE": "2(x3)"},
        {},
        [
            ("DDP-NOT-LAUNCHED", "info", None, NOT_SET.format("RANK")),
            ("DDP-PLAN", "info", None, None),
        ],
    ),
    (
        "slurm-tasks-per-node-garbage",
        {"SLURM_NTASKS_PER_NODE": "2(x"},
        {},
        [
            ("DDP-BAD-ENV", "warning", "SLURM_NTASKS_PER_NODE", None),
            ("DDP-NOT-LAUNCHED", "info", None, NOT_SET.format("RANK")),
        ],
    ),
    (
        "slurm-gpus-on-node-garbage",
        {"SLURM_GPUS_ON_NODE": "abc"},
        {},
        [
            ("DDP-BAD-ENV", "warning", "SLURM_GPUS_ON_NODE", None),
            ("DDP-NOT-LAUNCHED", "info", None, NOT_SET.format("RANK")),
        ],
    ),
    (
        "slurm-localid-garbage-in-launch",
        {**LAUNCH, "SLURM_LOCALID": "x"},
        {},
        [("DDP-BAD-ENV", "warning", "SLURM_LOCALID", None)],
    ),
    # Torch-read variables inside a launch: errors quoting what int() raises.
    (
        "launch-world-size-superscript",
        {**LAUNCH, "WORLD_SIZE": "\u00b2"},
        {},
        [("DDP-BAD-ENV", "error", "WORLD_SIZE", INT_TEXT.format("\u00b2"))],
    ),
    (
        "launch-master-port-5000-digits",
        {**LAUNCH, "MASTER_PORT": HUGE},
        {},
        [("DDP-ENV-RANGE", "error", "MASTER_PORT", HUGE_TEXT)],
    ),
    (
        "launch-rank-5000-letters",
        {**LAUNCH, "RANK": "x" * 5000},
        {},
        # CPython quotes at most 200 characters of the repr (%.200R).
        [
            (
                "DDP-BAD-ENV",
                "error",
                "RANK",
                "ValueError: invalid literal for int() with base 10: " + repr("x" * 5000)[:200],
            )
        ],
    ),
    (
        "launch-local-world-size-garbage",
        {**TORCHRUN, "LOCAL_WORLD_SIZE": "four"},
        {},
        [("DDP-BAD-ENV", "error", "LOCAL_WORLD_SIZE", None)],
    ),
    (
        "before-launch-local-rank-garbage",
        {"LOCAL_RANK": "abc"},
        {},
        [
            ("DDP-BAD-ENV", "warning", "LOCAL_RANK", INT_TEXT.format("abc")),
            ("DDP-NOT-LAUNCHED", "info", None, NOT_SET.format("RANK")),
        ],
    ),
    # int() takes these, so torch would: not plain integers, a warning with no prediction.
    (
        "launch-local-rank-arabic-digit",
        {**LAUNCH, "LOCAL_RANK": "\u0663"},
        {},
        [("DDP-BAD-ENV", "warning", "LOCAL_RANK", None)],
    ),
    (
        "launch-rank-padded",
        {**LAUNCH, "RANK": " 0"},
        {},
        [("DDP-BAD-ENV", "warning", "RANK", None)],
    ),
    (
        "launch-world-size-underscore",
        {**LAUNCH, "WORLD_SIZE": "1_0"},
        {},
        [("DDP-BAD-ENV", "warning", "WORLD_SIZE", None)],
    ),
]


@pytest.mark.parametrize(
    ("env", "kw", "expected"), [c[1:] for c in BAD_VALUES], ids=[c[0] for c in BAD_VALUES]
)
def test_bad_launcher_values(
    env: dict[str, str], kw: dict[str, Any], expected: list[tuple[str, str, Any, Any]]
) -> None:
    out = run("a100x8", None, env, **kw)
    assert [(f.code, f.severity, f.subject, f.predicts) for f in out] == expected
    for f in out:
        assert f.code in CODES
        if f.severity != "info":
            assert f.fix
        assert len(f.message) < 1000  # a 5000-character value is not echoed whole


def test_no_empty_plan_and_no_negative_fix() -> None:
    out = run("a100x8", None, {"LOCAL_WORLD_SIZE": "0"})
    assert "DDP-PLAN" not in [f.code for f in out]
    out = run("a100x8", None, {"SLURM_GPUS_ON_NODE": "-2"})
    assert out[-1].fix == "Launch with torchrun --nproc-per-node 8 train.py."
    out = run("a100x8", None, {"SLURM_GPUS_ON_NODE": "0"})
    assert [f.code for f in out] == ["DDP-NOT-LAUNCHED"]


def test_heterogeneous_tasks_per_node_is_two_per_node() -> None:
    out = run("a100x8", None, {"SLURM_NTASKS_PER_NODE": "2(x3)"})
    assert out[-1].message.startswith("2 rank(s) per node (SLURM_NTASKS_PER_NODE)")


@pytest.mark.parametrize(
    ("raw", "node_id", "expected"),
    [
        ("4", None, 4),
        ("2(x3)", None, 2),
        ("2(x3),2", None, 2),
        ("2(x3),1", None, True),
        ("2(x3),1", 2, 2),
        ("2(x3),1", 3, 1),
        ("2(x3),1", 4, True),
        ("2(x0)", None, None),
        ("2(x", None, None),
        ("", None, None),
        ("-1", None, None),
        ("\u00b2", None, None),
        ("9" * 5000, None, None),
    ],
)
def test_parse_tasks_per_node(raw: str, node_id: int | None, expected: object) -> None:
    assert parse_tasks_per_node(raw, node_id) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("0", 0),
        ("+3", 3),
        ("-1", -1),
        ("007", 7),
        ("", None),
        (" 3", None),
        ("3\n", None),
        ("1_0", None),
        ("\u00b2", None),
        ("\u0663", None),
        ("0x10", None),
        ("-", None),
        ("9" * 19, None),
        ("9" * 5000, None),
    ],
)
def test_parse_env_int_is_strict(raw: str, expected: int | None) -> None:
    assert parse_env_int(raw) == expected


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "No launcher variables are set"),
        (
            {"LOCAL_RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "1"},
            "RANK is not set, so this is not a launched rank yet, though LOCAL_RANK, "
            "WORLD_SIZE, MASTER_PORT are set",
        ),
        ({"SLURM_JOB_ID": "7"}, "RANK is not set, so this is not a launched rank yet, though "),
        ({"RANK": ""}, "RANK is set but empty and no other launcher variable is set"),
    ],
)
def test_not_launched_message_is_true(env: dict[str, str], expected: str) -> None:
    out = [f for f in run("a100x8", None, env) if f.code == "DDP-NOT-LAUNCHED"]
    assert len(out) == 1
    assert out[0].message.startswith(expected)
    for var in env:
        assert var in out[0].message


def test_empty_rank_is_not_reported_as_missing() -> None:
    out = run("a100x8", None, {"RANK": ""})
    assert "RANK is set to an empty string" in out[0].message
    assert all("RANK is set but RANK" not in f.message for f in out)
