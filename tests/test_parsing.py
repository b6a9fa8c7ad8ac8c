"""Strict integer parsing of option values: never a traceback, always one line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.core.dataparallel import parse_module_device
from gpudiag.errors import GpudiagInputError
from gpudiag.parsing import parse_int, parse_int_list

from .conftest import fixture_path

HUGE = "9" * 5000  # int() refuses strings over 4300 digits


@pytest.mark.parametrize(
    ("text", "value"), [("0", 0), (" 7 ", 7), ("-3", -3), ("+2", 2), ("007", 7)]
)
def test_parse_int_accepts_plain_integers(text: str, value: int) -> None:
    assert parse_int("--x", text) == value


@pytest.mark.parametrize("text", ["", "x", "1.5", "²", "٣", "0x1", "1 2", HUGE, "--1"])
def test_parse_int_rejects_everything_else(text: str) -> None:
    with pytest.raises(GpudiagInputError) as info:
        parse_int("--x", text)
    assert str(info.value).startswith("--x ")
    assert "\n" not in str(info.value)
    assert len(str(info.value)) < 120


def test_parse_int_minimum() -> None:
    with pytest.raises(GpudiagInputError, match=r"^--n must be 1 or more, got 0$"):
        parse_int("--n", "0", minimum=1)


def test_parse_int_list() -> None:
    assert parse_int_list("--ids", "0, 1,2") == [0, 1, 2]
    with pytest.raises(GpudiagInputError, match=r"'²' is not an integer"):
        parse_int_list("--ids", "0,²")
    with pytest.raises(GpudiagInputError, match=r"-1 is below 0"):
        parse_int_list("--ids", "0,-1", minimum=0)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("cpu", ("cpu", None)),
        ("cuda", ("cuda", None)),
        ("cuda:1", ("cuda", 1)),
        ("2", ("cuda", 2)),
        ("cuda:0", ("cuda", 0)),
    ],
)
def test_module_device_spellings_torch_accepts(text: str, parsed: tuple[str, int | None]) -> None:
    assert parse_module_device(text) == parsed


# torch.device() raises "Invalid device string" for each of these.
@pytest.mark.parametrize("text", ["cuda:01", "cuda:-1", "cuda:+1", "cuda:²", "²", "gpu", HUGE])
def test_module_device_spellings_torch_rejects(text: str) -> None:
    with pytest.raises(GpudiagInputError, match=r"is not cpu, cuda, cuda:K or K"):
        parse_module_device(text)


@pytest.mark.parametrize(
    "args",
    [
        ["--device-ids", f"0,{HUGE}"],
        ["--set-device", HUGE],
        ["--batch-size", "²"],
        ["--module-device", HUGE],
        ["--expect-gpus", "٣"],
        ["--nproc-per-node", "1e3"],
    ],
)
def test_check_bad_integers_exit_2_with_one_line(args: list[str]) -> None:
    result = CliRunner().invoke(main, ["check", "--snapshot", str(fixture_path("a100x8")), *args])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("gpudiag: error: ")
    assert result.stderr.count("\n") == 1
    assert len(result.stderr) < 200


def test_huge_visible_entry_is_an_invalid_index_not_a_crash() -> None:
    result = CliRunner().invoke(
        main, ["list", "--snapshot", str(fixture_path("a100x8")), "--visible", HUGE, "--json"]
    )
    assert result.exit_code == 0
    assert '"visible": []' in result.stdout
