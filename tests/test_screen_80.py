"""Every screen fits an 80-column terminal (issue 20), on every fixture.

At COLUMNS=80: every command's --help, list (plain, -q, -v), check -v (with
DataParallel and DDP options), explain (listing and sections) and docs. `topo`'s
matrix is held to 100 columns for 8 GPUs (issue 18; a matrix does not wrap).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main

FIXTURES = sorted(str(p) for p in (Path(__file__).parent / "fixtures").glob("*.json"))
COMMANDS = ["list", "check", "probe", "lint", "explain", "snapshot", "docs", "topo", "fleet"]


def _too_wide(args: list[str], width: int) -> list[str]:
    result = CliRunner().invoke(main, args, env={"COLUMNS": str(width)})
    assert result.exit_code in (0, 1), result.output
    return [line for line in result.output.splitlines() if len(line) > width]


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: Path(p).stem)
def test_list_and_check_fit_80_columns(fixture: str) -> None:
    for args in (
        ["list"], ["list", "-q"], ["list", "-v"], ["check", "-v"],
        ["check", "-v", "--device-ids", "0,1", "--nproc-per-node", "2"],
    ):  # fmt: skip
        assert _too_wide([*args, "--snapshot", fixture], 80) == [], args


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: Path(p).stem)
def test_topo_fits_100_columns(fixture: str) -> None:
    assert _too_wide(["topo", "--snapshot", fixture], 100) == []


@pytest.mark.parametrize(
    "args",
    [[], *([c] for c in COMMANDS)],
    ids=lambda a: " ".join(a) or "gpudiag",
)
def test_help_fits_80_columns(args: list[str]) -> None:
    result = CliRunner().invoke(main, [*args, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert [line for line in result.output.splitlines() if len(line) > 80] == []


@pytest.mark.parametrize(
    "args", [["explain"], ["docs"], ["explain", "VIS-TORCH-COUNT"], ["explain", "DP-DEVICES"]]
)
def test_explain_and_docs_listing_fit_80_columns(args: list[str]) -> None:
    assert _too_wide(args, 80) == []


@pytest.mark.parametrize("which", ["single", "ddp"])
def test_probe_verbose_fits_80_columns(which: str, tmp_path: Path) -> None:
    # issue 20: probe -v printed 125-219-column lines (checks' rules, ranks, notes).
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUDIAG_", "SLURM_"))}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                "MASTER_PORT", "TORCHELASTIC_RUN_ID"):  # fmt: skip
        env.pop(var, None)
    env |= {"COLUMNS": "80", "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "gpudiag", "probe", which, "--device", "cpu", "-v"],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "CHECK" in done.stdout  # the verbose tables are there
    wide = [line for line in (done.stdout + done.stderr).splitlines() if len(line) > 80]
    assert wide == []
