"""The typed check request (issue 16, item 2): validated once, whoever builds it, and its
errors name the input the way the caller gave it (option, GPUDIAG_* variable, keyword)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import gpudiag
from gpudiag.cli import main
from gpudiag.core.check import run_check
from gpudiag.core.request import (
    FIELDS,
    FROM_SNAPSHOT,
    CheckRequest,
    RequestError,
    RequestTypeError,
)
from gpudiag.lint.against import DUPLICATES, merge
from gpudiag.lint.codes import Hit
from gpudiag.model import Finding

from .conftest import clear_launch_env, fixture_path, load_fixture

A100 = str(fixture_path("a100x8"))
CASES = Path(__file__).resolve().parent / "fixtures" / "lint"


@pytest.fixture(autouse=True)
def _no_launcher_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The CLI and the API read launcher variables (and GPUDIAG_*) from the live environment.
    clear_launch_env(monkeypatch, "GPUDIAG_")


# ------------------------------------------------------------------ the table

#: field -> (valid values, (invalid value, error type, piece of the message)...)
TABLE: dict[str, tuple[list[Any], list[tuple[Any, type[Exception], str]]]] = {
    "visible": (
        [None, "", "1,2", "GPU-9e8d", FROM_SNAPSHOT],
        [(1, TypeError, "must be a str or None, not int 1")],
    ),
    "order": (
        [None, "PCI_BUS_ID", "FASTEST_FIRST", FROM_SNAPSHOT],
        [("fastest", ValueError, "'PCI_BUS_ID', 'FASTEST_FIRST' or None"), (0, TypeError, "")],
    ),
    "device_ids": (
        [None, [], [0, 1], (3, -1)],
        [("0,1", TypeError, "sequence of int"), ([0, "1"], TypeError, ""), ([True], TypeError, "")],
    ),
    "dataparallel": ([True, False], [("yes", TypeError, "must be True or False")]),
    "output_device": ([None, 0, -1, 9], [(1.0, TypeError, "an int or None")]),
    "set_device": ([None, 0, -1, 9], [("0", TypeError, "an int or None")]),
    "set_device_per_rank": (
        [None, [0], (0, 1, 2)],
        [([0, None], TypeError, "sequence of int"), ([], ValueError, "at least one value")],
    ),
    "local_rank": ([None, 0, 7], [(-1, ValueError, "0 or more"), ("0", TypeError, "")]),
    "module_device": (
        [None, "cpu", "cuda", "CUDA:1", "cuda:0", "3"],
        [
            ("gpu", ValueError, "'gpu' is not cpu, cuda, cuda:K or K"),
            ("cuda:-1", ValueError, "is not cpu"),
            ("cuda:01", ValueError, "is not cpu"),
            (0, TypeError, "a str or None"),
        ],
    ),
    "batch_size": ([None, 1, 64], [(0, ValueError, "1 or more"), ("64", TypeError, "")]),
    "nproc_per_node": ([None, 1, 8], [(0, ValueError, "1 or more"), (True, TypeError, "")]),
    "backend": (
        [None, "nccl", "gloo", "NCCL"],
        [("mpi", ValueError, "'nccl' or 'gloo' or None"), (1, TypeError, "")],
    ),
    "launcher": (
        [None, "torchrun", "ompi", "DeepSpeed"],
        [("bogus", ValueError, "must be one of 'torchrun'"), (3, TypeError, "")],
    ),
    "deepspeed_include": ([None, "localhost:1,2"], [(1, TypeError, "a str or None")]),
    "deepspeed_exclude": ([None, "localhost:0"], [(0, TypeError, "a str or None")]),
    "ddp_devices": (
        [None, [1, 2], (0,)],
        [("1,2", TypeError, "sequence of int"), ([1, -1], ValueError, "0 or more")],
    ),
    "launched": ([True, False], [(1, TypeError, "must be True or False")]),
    "script_reads": (
        [(), ["LOCAL_RANK"], ("RANK", "WORLD_SIZE")],
        [
            ("LOCAL_RANK", TypeError, "a sequence of variable names"),
            (["LOCAL RANK"], ValueError, "environment variable names, not 'LOCAL RANK'"),
        ],
    ),
    "init_rank_args": ([True, False], [(None, TypeError, "must be True or False")]),
    "amp": (
        [None, "bf16", "fp16"],
        [("int8", ValueError, "'bf16' or 'fp16'"), (16, TypeError, "")],
    ),
    "model_dtype": (
        [None, "bf16", "fp16", "fp32"],
        [("int8", ValueError, "'bf16' or 'fp16' or 'fp32'"), (32, TypeError, "")],
    ),
    "tf32": ([True, False], [(1, TypeError, "must be True or False")]),
    "expect_gpus": ([None, 0, 8], [(-1, ValueError, "0 or more"), (1.0, TypeError, "")]),
    "num_workers": (
        [None, 0, 16],
        [(-1, ValueError, "0 or more"), (4097, ValueError, "at most 4096"), ("8", TypeError, "")],
    ),
}


def test_the_table_covers_every_field() -> None:
    assert set(TABLE) == set(FIELDS)


@pytest.mark.parametrize(
    ("field", "value"), [(f, v) for f, (good, _) in TABLE.items() for v in good]
)
def test_valid_values_are_accepted(field: str, value: Any) -> None:
    CheckRequest(**{field: value})


@pytest.mark.parametrize(
    ("field", "value", "error", "text"),
    [(f, *row) for f, (_, bad) in TABLE.items() for row in bad],
)
def test_invalid_values_name_the_field(
    field: str, value: Any, error: type[Exception], text: str
) -> None:
    with pytest.raises(RequestError) as info:
        CheckRequest(**{field: value})
    assert info.value.field == field
    assert isinstance(info.value, error)
    assert isinstance(info.value, RequestTypeError) is (error is TypeError)
    assert str(info.value).startswith(f"{field} ")
    assert text in str(info.value)
    assert "--" not in str(info.value)


@pytest.mark.parametrize(
    ("kw", "field", "text"),
    [
        ({"set_device": 1, "set_device_per_rank": [0, 1]}, "set_device_per_rank", "set_device"),
        ({"set_device_per_rank": [0, 1], "nproc_per_node": 4}, "set_device_per_rank", "is 4"),
        ({"set_device_per_rank": [0, 1], "local_rank": 2}, "local_rank", "has 2 value(s)"),
        ({"launcher": "torchrun", "deepspeed_include": "localhost:1"}, "deepspeed_include", ""),
        ({"launcher": "slurm", "deepspeed_exclude": "localhost:0"}, "deepspeed_exclude", ""),
    ],
)
def test_fields_that_conflict(kw: dict[str, Any], field: str, text: str) -> None:
    with pytest.raises(RequestError) as info:
        CheckRequest(**kw)
    assert info.value.field == field and text in str(info.value)


def test_normalised_once() -> None:
    r = CheckRequest(
        device_ids=[0, 1],
        backend=" NCCL",
        amp="BF16",
        launcher="ompi",
        script_reads=[" LOCAL_RANK", "RANK", "LOCAL_RANK"],
    )
    assert r.device_ids == (0, 1) and r.backend == "nccl" and r.amp == "bf16"
    assert r.launcher == "openmpi"
    assert r.script_reads == ("LOCAL_RANK", "RANK")
    assert CheckRequest(deepspeed_include="localhost:1").launcher == "deepspeed"
    with pytest.raises(AttributeError):
        r.backend = "gloo"  # type: ignore[misc]
    assert CheckRequest(**{f: getattr(r, f) for f in FIELDS}) == r


def test_run_check_takes_a_request_or_its_fields() -> None:
    snap = load_fixture("a100x8")
    kw: dict[str, Any] = {"visible": "1,2", "device_ids": [1, 2], "amp": "fp16"}
    by_fields = run_check(snap, **kw)
    by_request = run_check(snap, CheckRequest(**kw))
    assert by_request == by_fields
    assert "DP-INVALID-DEVICE-ID" in {f.code for f in by_request.findings}
    with pytest.raises(TypeError, match="request and fields"):
        run_check(snap, CheckRequest(), amp="fp16")


def test_local_rank_from_the_environment_is_checked_against_the_request() -> None:
    with pytest.raises(RequestError) as info:
        run_check(load_fixture("a100x8"), set_device_per_rank=[0, 1], env={"LOCAL_RANK": "3"})
    assert info.value.field == "set_device_per_rank" and "LOCAL_RANK is 3" in str(info.value)


# ------------------------------------------------------------------ the CLI's spelling


def _check_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        main, ["check", "--snapshot", A100, *args], env={"COLUMNS": "300", **(env or {})}
    )
    return result.exit_code, result.stdout, result.stderr


# (option, bad value, message piece after the name)
CLI_BAD = [
    ("--device-ids", "1,x", " '1,x': 'x' is not an integer"),
    ("--output-device", "x", " 'x' is not an integer"),
    ("--set-device", "0,x", " '0,x': 'x' is not an integer"),
    ("--local-rank", "-1", " must be 0 or more, got -1"),
    ("--module-device", "gpu", " 'gpu' is not cpu, cuda, cuda:K or K"),
    ("--batch-size", "0", " must be at least 1, got 0"),
    ("--nproc-per-node", "zero", " 'zero' is not an integer"),
    ("--backend", "mpi", " must be one of nccl, gloo, not 'mpi'"),
    ("--launcher", "bogus", " must be one of torchrun"),
    ("--ddp-devices", "1,-1", " must be cuda ordinals (0 or more), got [1, -1]"),
    ("--script-reads", "LOCAL RANK", " must list environment variable names"),
    ("--amp", "fp8", " must be one of bf16, fp16, not 'fp8'"),
    ("--model-dtype", "int8", " must be one of bf16, fp16, fp32, not 'int8'"),
    ("--expect-gpus", "-1", " must be 0 or more, got -1"),
    ("--num-workers", "-1", " must be 0 or more, got -1"),
]


def _variable(option: str) -> str:
    return "GPUDIAG_CHECK_" + option[2:].upper().replace("-", "_")


@pytest.mark.parametrize(("option", "value", "text"), CLI_BAD)
def test_cli_names_the_option(option: str, value: str, text: str) -> None:
    code, out, err = _check_cli(option, value)
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"gpudiag: error: {option}{text}"), err


@pytest.mark.parametrize(("option", "value", "text"), CLI_BAD)
def test_cli_names_the_variable_the_value_came_from(option: str, value: str, text: str) -> None:
    variable = _variable(option)
    code, out, err = _check_cli(env={variable: value})
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"gpudiag: error: {variable}{text}"), err
    assert option not in err


def test_bad_device_ids_variable_is_not_blamed_on_the_option() -> None:
    # The reported bug: GPUDIAG_CHECK_DEVICE_IDS=1,x said "--device-ids '1,x': ...".
    code, _, err = _check_cli(env={"GPUDIAG_CHECK_DEVICE_IDS": "1,x"})
    assert code == 2
    assert err == "gpudiag: error: GPUDIAG_CHECK_DEVICE_IDS '1,x': 'x' is not an integer " \
        "(use comma-separated cuda ordinals like 0,1)\n"  # fmt: skip
    # The option on the command line wins, and is the one named.
    code, _, err = _check_cli("--device-ids", "0,y", env={"GPUDIAG_CHECK_DEVICE_IDS": "1,x"})
    assert code == 2 and err.startswith("gpudiag: error: --device-ids '0,y'")


def test_cli_names_each_input_of_a_conflict_as_given() -> None:
    code, _, err = _check_cli("--set-device", "0,1", env={"GPUDIAG_CHECK_NPROC_PER_NODE": "4"})
    assert code == 2
    assert err == (
        "gpudiag: error: --set-device lists 2 values (one per local rank) but "
        "GPUDIAG_CHECK_NPROC_PER_NODE is 4\n"
    )
    code, _, err = _check_cli("--launcher", "torchrun", "--deepspeed-include", "localhost:1")
    assert code == 2
    assert err == (
        "gpudiag: error: --deepspeed-include given: DeepSpeed's include/exclude need "
        "--launcher deepspeed, not 'torchrun'\n"
    )
    code, _, err = _check_cli("--set-device", "0,1", env={"LOCAL_RANK": "5"})
    assert code == 2
    assert err == (
        "gpudiag: error: --set-device has 2 value(s), one per local rank, but LOCAL_RANK is 5\n"
    )


def test_a_good_variable_is_used_like_the_option() -> None:
    by_option = _check_cli("--device-ids", "0,1", "--backend", "gloo", "--json")
    by_variable = _check_cli(
        "--json", env={"GPUDIAG_CHECK_DEVICE_IDS": "0,1", "GPUDIAG_CHECK_BACKEND": "gloo"}
    )
    assert by_option == by_variable and by_option[0] in (0, 1)


# ------------------------------------------------------------------ the API's spelling


@pytest.mark.parametrize("function", ["check", "guard"])
@pytest.mark.parametrize(
    ("kw", "error", "text"),
    [
        (
            {"module_device": "gpu"},
            ValueError,
            "module_device 'gpu' is not cpu, cuda, cuda:K or K (K a non-negative integer)",
        ),
        (
            {"script_reads": ["LOCAL RANK"]},
            ValueError,
            "script_reads must list environment variable names, not 'LOCAL RANK'",
        ),
        ({"local_rank": -1}, ValueError, "local_rank must be 0 or more, not int -1"),
        (
            {"set_device_per_rank": [0, 1], "nproc_per_node": 4},
            ValueError,
            "set_device_per_rank lists 2 values (one per local rank) but nproc_per_node is 4",
        ),
        (
            {"launcher": "torchrun", "deepspeed_exclude": "localhost:0"},
            ValueError,
            "deepspeed_exclude given: DeepSpeed's include/exclude need launcher deepspeed, "
            "not 'torchrun'",
        ),
        (
            {"set_device_per_rank": [0, 1], "env": {"LOCAL_RANK": "5"}},
            ValueError,
            "set_device_per_rank has 2 value(s), one per local rank, but LOCAL_RANK is 5",
        ),
    ],
)
def test_api_names_the_keyword(
    function: str, kw: dict[str, Any], error: type[Exception], text: str
) -> None:
    with pytest.raises(error) as info:
        getattr(gpudiag, function)(snapshot=A100, **kw)
    assert type(info.value) is error  # plain Python errors, not gpudiag's own
    assert str(info.value) == f"gpudiag.{function}(): {text}"


# ------------------------------------------------------------------ lint --check


def _hit(line: int, code: str, predicts: str) -> Hit:
    return Hit(line, 1, Finding(code=code, severity="error", message=code, predicts=predicts))


ENV_RDZV = "ValueError: Error initializing torch.distributed using env:// rendezvous: "


def test_merge_keeps_a_different_finding_with_the_same_first_24_characters() -> None:
    lint = [_hit(9, "LINT-RENDEZVOUS-ENV-MISSING", ENV_RDZV + "environment variable MASTER_ADDR")]
    check = [_hit(9, "DDP-NOT-LAUNCHED", ENV_RDZV + "environment variable RANK")]
    assert lint[0].finding.predicts[:24] == check[0].finding.predicts[:24]  # type: ignore[index]
    assert merge(lint, check) == lint + check


def test_merge_drops_the_lint_finding_check_duplicates() -> None:
    invalid = "AssertionError: Invalid device id"
    lint = [_hit(7, "LINT-IDS-UNDER-MASK", invalid)]
    check = [_hit(7, "DP-INVALID-DEVICE-ID", invalid)]
    assert merge(lint, check) == check
    assert merge(lint, [_hit(8, "DP-INVALID-DEVICE-ID", invalid)])[0] == lint[0]  # other line
    assert merge(lint, [_hit(7, "DP-OUTPUT-DEVICE-OUTSIDE", invalid)])[0] == lint[0]


def test_duplicates_name_real_codes() -> None:
    from gpudiag.findings.catalog import titles
    from gpudiag.lint.codes import CODES as LINT

    assert set(DUPLICATES) <= set(LINT)
    assert set().union(*DUPLICATES.values()) <= set(titles("dataparallel"))


def test_lint_check_keeps_the_rendezvous_error_check_reports_as_info() -> None:
    # Both predict env:// rendezvous errors, for different variables: the old 24-character
    # key dropped lint's error (MASTER_ADDR never set) for check's info (RANK not set yet).
    result = CliRunner().invoke(
        main,
        ["lint", str(CASES / "pos_rendezvous_env_missing.py.txt"), "--check", "--snapshot", A100],
    )
    assert "LINT-RENDEZVOUS-ENV-MISSING" in result.stdout
    assert "DDP-NOT-LAUNCHED" in result.stdout
    assert result.exit_code == 1


@pytest.mark.parametrize("command", ["check", "list"])
def test_click_checked_order_names_the_variable_too(command: str) -> None:
    runner = CliRunner()
    by_env = runner.invoke(
        main, [command, "--snapshot", A100], env={f"GPUDIAG_{command.upper()}_ORDER": "x"}
    )
    assert by_env.exit_code == 2
    assert f"Invalid value for 'GPUDIAG_{command.upper()}_ORDER': 'x'" in by_env.stderr
    by_option = runner.invoke(main, [command, "--snapshot", A100, "--order", "x"])
    assert by_option.exit_code == 2 and "Invalid value for '--order': 'x'" in by_option.stderr
