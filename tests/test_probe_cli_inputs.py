"""probe's inputs that would be silently ignored are refused with one line (issue 20)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gpudiag.cli import main


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--visible", "garbage"], "--visible"),
        (["--visible", "0,1"], "--visible"),
        (["--order", "PCI_BUS_ID"], "--order"),
    ],
)
def test_a_mask_with_device_cpu_is_refused(args: list[str], named: str) -> None:
    # --device cpu hides every GPU from the workers: the mask would be ignored.
    result = CliRunner().invoke(main, ["probe", "single", "--device", "cpu", *args])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == [
        f"gpudiag: error: {named} has no effect with --device cpu (the cpu probes hide every "
        "GPU); leave it out, or use --device cuda"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device-ids", ",".join(map(str, range(5000)))],
         "--device-ids lists 5000 values: at most 4096 are accepted"),
        (["--visible", "0," * 600_000], "--visible is 1200000 characters long"),
    ],
)  # fmt: skip
def test_counts_and_sizes_are_bounded(args: list[str], message: str) -> None:
    # issue 21: every count and size a user can give has a bound (gpudiag.core.bounds).
    result = CliRunner().invoke(main, ["probe", "dp", "--device", "cuda", *args])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gpudiag: error: {message}")
