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
