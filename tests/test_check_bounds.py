"""Issue 21: ``check`` stays linear in ``device_ids``, and every count, list and
number of ``check``/``list`` has a documented bound (docs/check.md, "Bounds"),
refused with one line and exit 2, worded as the caller gave it: the option, the
``GPUDIAG_*`` variable or the Python keyword."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

import gpudiag
from gpudiag.cli import main
from gpudiag.core.bounds import MAX_BATCH_SIZE, MAX_DEVICES, MAX_ORDINAL, MAX_TEXT_CHARS
from gpudiag.core.dataparallel import validate_dataparallel
from gpudiag.core.visibility import resolve_checked

from .conftest import clear_launch_env, fixture_path, load_fixture

A100 = str(fixture_path("a100x8"))


@pytest.fixture(autouse=True)
def _no_launcher_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_launch_env(monkeypatch, "GPUDIAG_")


def _ids(n: int) -> str:
    return ",".join(str(i % 8) for i in range(n))


def test_dataparallel_is_linear_in_repeated_device_ids() -> None:
    # Issue 21: 400,000 ids took 90 s (ids.count(i) for every id). 100,000
    # repeated ids took 80 s before the fix; linear, well under a second.
    snapshot = load_fixture("a100x8")
    resolution = resolve_checked(None, None, snapshot, None)
    ids = [i % 8 for i in range(100_000)]
    start = time.perf_counter()
    out = validate_dataparallel(
        resolution,
        snapshot,
        device_ids=ids,
        output_device=None,
        set_device=None,
        module_device=None,
        batch_size=None,
    )
    elapsed = time.perf_counter() - start
    assert [f.code for f in out] == ["DP-DUPLICATE-DEVICE-ID", "DP-DEVICES"]
    assert elapsed < 5, f"{elapsed:.1f} s for 100,000 ids"
    # Each device is described once, not once per repeat.
    devices = next(f for f in out if f.code == "DP-DEVICES").message
    assert devices.count("cuda:0 = physical GPU 0") == 1


def test_the_most_device_ids_are_accepted_and_fast() -> None:
    start = time.perf_counter()
    result = CliRunner().invoke(
        main, ["check", "--snapshot", A100, "-q", "--device-ids", _ids(MAX_DEVICES)]
    )
    assert result.exit_code == 0, result.output
    assert time.perf_counter() - start < 5


TOO_LONG = _ids(MAX_DEVICES + 1)
BEYOND = [
    # (option, value, message after the option's name)
    ("--device-ids", TOO_LONG, f"lists {MAX_DEVICES + 1} values: at most {MAX_DEVICES}"),
    ("--device-ids", f"0,{MAX_ORDINAL + 1}", f"entry must be at most {MAX_ORDINAL}, got"),
    ("--device-ids", f"0,-{MAX_ORDINAL + 1}", f"entry must be at least -{MAX_ORDINAL}, got"),
    ("--set-device", TOO_LONG, f"lists {MAX_DEVICES + 1} values: at most {MAX_DEVICES}"),
    ("--set-device", str(MAX_ORDINAL + 1), f"must be at most {MAX_ORDINAL}, got"),
    ("--set-device", f"0,{MAX_ORDINAL + 1}", f"entry must be at most {MAX_ORDINAL}"),
    ("--ddp-devices", TOO_LONG, f"lists {MAX_DEVICES + 1} values: at most {MAX_DEVICES}"),
    ("--ddp-devices", f"1,{MAX_ORDINAL + 1}", f"entry must be at most {MAX_ORDINAL}"),
    ("--output-device", str(MAX_ORDINAL + 1), f"must be at most {MAX_ORDINAL}, got"),
    ("--output-device", str(-MAX_ORDINAL - 1), f"must be at least -{MAX_ORDINAL}, got"),
    ("--local-rank", str(MAX_ORDINAL + 1), f"must be at most {MAX_ORDINAL}, got"),
    ("--module-device", f"cuda:{MAX_ORDINAL + 1}", f"ordinal must be at most {MAX_ORDINAL}"),
    ("--nproc-per-node", str(MAX_DEVICES + 1), f"must be at most {MAX_DEVICES}, got"),
    ("--nproc-per-node", "999999999999999999", f"must be at most {MAX_DEVICES}, got"),
    ("--expect-gpus", "999999999999999999", f"must be at most {MAX_DEVICES}, got"),
    ("--batch-size", str(MAX_BATCH_SIZE + 1), f"must be at most {MAX_BATCH_SIZE}, got"),
    ("--script-reads", ",".join(f"V{i}" for i in range(MAX_DEVICES + 1)), "lists 4097 names"),
    ("--visible", "0," * MAX_TEXT_CHARS, f"is {2 * MAX_TEXT_CHARS} characters long"),
]


@pytest.mark.parametrize(("option", "value", "says"), BEYOND, ids=lambda v: str(v)[:24])
def test_beyond_a_bound_is_one_line_exit_2(option: str, value: str, says: str) -> None:
    result = CliRunner().invoke(main, ["check", "--snapshot", A100, option, value])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith(f"gpudiag: error: {option} {says}"), result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_bound_from_the_environment_names_the_variable() -> None:
    result = CliRunner().invoke(
        main, ["check", "--snapshot", A100], env={"GPUDIAG_CHECK_DEVICE_IDS": TOO_LONG}
    )
    assert result.exit_code == 2
    assert result.stderr == (
        f"gpudiag: error: GPUDIAG_CHECK_DEVICE_IDS lists {MAX_DEVICES + 1} values: "
        f"at most {MAX_DEVICES} are accepted\n"
    )


def test_list_visible_has_the_same_bound() -> None:
    spec = "0," * MAX_TEXT_CHARS
    result = CliRunner().invoke(main, ["list", "--snapshot", A100, "--visible", spec])
    assert result.exit_code == 2
    assert result.stderr == (
        f"gpudiag: error: --visible is {len(spec)} characters long: "
        f"at most {MAX_TEXT_CHARS} are accepted\n"
    )
    env = CliRunner().invoke(main, ["list", "--snapshot", A100], env={"GPUDIAG_LIST_VISIBLE": spec})
    assert env.exit_code == 2
    assert env.stderr.startswith("gpudiag: error: GPUDIAG_LIST_VISIBLE is ")


@pytest.mark.parametrize(
    ("keyword", "value", "says"),
    [
        ("device_ids", [0] * (MAX_DEVICES + 1), f"device_ids lists {MAX_DEVICES + 1} values"),
        ("batch_size", 2**40, f"batch_size must be at most {MAX_BATCH_SIZE}"),
        ("expect_gpus", 10**9, f"expect_gpus must be at most {MAX_DEVICES}"),
        ("visible", "0," * MAX_TEXT_CHARS, f"visible is {2 * MAX_TEXT_CHARS} characters"),
        ("deepspeed_include", "x" * (MAX_TEXT_CHARS + 1), "deepspeed_include is 1048577 char"),
    ],
)
def test_the_python_api_gets_the_same_bounds(keyword: str, value: object, says: str) -> None:
    with pytest.raises(ValueError, match=f"^gpudiag.check\\(\\): {says}"):
        gpudiag.check(snapshot=A100, **{keyword: value})


def test_values_at_the_bounds_are_accepted() -> None:
    result = CliRunner().invoke(
        main,
        ["check", "--snapshot", A100, "-q", "--expect-gpus", "8", "--batch-size",
         str(MAX_BATCH_SIZE), "--output-device", "-1", "--device-ids", "0,1"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    at_most = CliRunner().invoke(
        main, ["check", "--snapshot", A100, "-q", "--nproc-per-node", str(MAX_DEVICES)]
    )
    assert at_most.exit_code in (0, 1), at_most.output  # a finding, not a refusal
