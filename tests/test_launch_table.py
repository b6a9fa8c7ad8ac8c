"""The launcher table (gpudiag.launch.table) and the one reader check and probe share.

Adding a launcher is one row in ``gpudiag.launch.table.ROWS`` plus its tests: every
test here is parametrized over the rows, so a new row is detected, read by check
(``read_launch``), read by probe (``detect_launch``), offered by ``--launcher``,
known to lint and listed in docs/launchers.md, or one of these tests fails. Only
a row whose detection needs a marker variable beyond its rank variables (like
torchrun's ``TORCHELASTIC_RUN_ID``) also adds that marker to ``MARKERS`` below.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.errors import GpudiagInputError
from gpudiag.launch.process import detect_launch
from gpudiag.launch.reader import read_field, read_launch
from gpudiag.launch.table import (
    CHOOSABLE,
    FIELDS,
    ROWS,
    SPECS,
    canonical_launcher,
    present_launchers,
)
from gpudiag.lint.values import GLOBAL_RANK_VARS, LOCAL_RANK_VARS

from .conftest import fixture_path

#: What each row's detection needs besides its own rank variables.
MARKERS: dict[str, dict[str, str]] = {
    "torchrun": {"TORCHELASTIC_RUN_ID": "job1"},
    "accelerate": {"TORCHELASTIC_RUN_ID": "job1", "ACCELERATE_MIXED_PRECISION": "no"},
    "intelmpi": {"I_MPI_HYDRA_UUID": "u1"},
}
#: rank 1 of 4, local rank 1 of 2, node 0.
VALUES = {"rank": 1, "world_size": 4, "local_rank": 1, "local_world_size": 2, "node_rank": 0}
ROW_IDS = [row.name for row in ROWS]
#: Texts Python's int() takes (or not) that are no plain integer: check and probe
#: both refuse them (issue 16: probe read RANK=1_0 WORLD_SIZE=٢٠ as rank 10 of 20).
NOT_PLAIN = ["1_0", "\u0662\u0660", " 3", "3 ", "+", "3.0", "0x1", "9" * 19]


def _own_env(name: str) -> dict[str, str]:
    spec = SPECS[name]
    env = {spec.var(f) or "": str(VALUES[f]) for f in FIELDS if spec.var(f)}
    return {**env, **MARKERS.get(name, {})}


@pytest.mark.parametrize("name", ROW_IDS)
def test_every_row_is_detected_from_its_own_variables(name: str) -> None:
    assert present_launchers(_own_env(name))[0] == name


@pytest.mark.parametrize("name", ROW_IDS)
def test_every_rows_variables_are_read_by_check(name: str) -> None:
    launch = read_launch(_own_env(name))
    assert launch.launcher == name and launch.view is not None
    assert launch.problems == ()
    for f in FIELDS:
        assert launch.view.value(f) == (VALUES[f] if SPECS[name].var(f) else None), f


@pytest.mark.parametrize("name", ROW_IDS)
def test_every_rows_variables_are_read_by_probe(name: str) -> None:
    env = {**_own_env(name), "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29501"}
    launch = detect_launch(env)
    assert launch is not None
    assert launch.launcher == name
    assert (launch.rank, launch.world_size, launch.local_rank) == (1, 4, 1)
    assert launch.local_world_size == 2
    assert launch.node_rank == (0 if SPECS[name].node_rank else None)
    assert (launch.master_addr, launch.master_port) == ("10.0.0.1", 29501)


@pytest.mark.parametrize("name", ROW_IDS)
def test_every_row_is_complete(name: str) -> None:
    spec = SPECS[name]
    assert spec.title and spec.rank and spec.world_size and spec.local_rank
    assert "{n}" in spec.start and str(7) in spec.start.format(n=7)
    assert spec.rank in GLOBAL_RANK_VARS and spec.local_rank in LOCAL_RANK_VARS  # lint knows it
    if name != "env":
        assert name in CHOOSABLE and canonical_launcher(name.upper()) == name
        for alias in spec.aliases:
            assert canonical_launcher(alias) == name
        docs = Path(__file__).parent.parent / "docs" / "launchers.md"
        assert f"(`{name}`)" in docs.read_text(encoding="utf-8")
    if spec.mpi:
        assert spec.export and spec.export_hint  # how MASTER_ADDR/PORT reach the ranks


@pytest.mark.parametrize("text", NOT_PLAIN)
@pytest.mark.parametrize("name", ROW_IDS)
def test_check_and_probe_read_a_rank_alike(name: str, text: str) -> None:
    # The one reader: a rank check cannot use is one probe refuses, for every launcher.
    spec = SPECS[name]
    assert spec.rank is not None
    env = {**_own_env(name), spec.rank: text, "MASTER_ADDR": "h", "MASTER_PORT": "29501"}
    value, problem = read_field(env, spec.rank, "rank")
    assert value is None and problem is not None and problem.var == spec.rank
    assert any(p.var == spec.rank for p in read_launch(env).problems)
    with pytest.raises(GpudiagInputError, match=f"{spec.rank}=.* is not an integer"):
        detect_launch(env)


BAD_RANK = {"RANK": "1_0", "WORLD_SIZE": "\u0662\u0660", "MASTER_ADDR": "h", "MASTER_PORT": "1"}


def test_check_cli_reports_rank_1_0() -> None:
    result = CliRunner().invoke(
        main,
        ["check", "--snapshot", str(fixture_path("a100x8")), "--json"],
        env={"COLUMNS": "300", "SLURM_PROCID": None, **BAD_RANK},
    )
    assert result.exit_code == 0, result.output  # warnings: gpudiag ignores both values
    bad = {
        f["subject"]: f["severity"]
        for f in json.loads(result.stdout)["findings"]
        if f["code"] == "DDP-BAD-ENV"
    }
    assert bad == {"RANK": "warning", "WORLD_SIZE": "warning"}


def test_probe_cli_refuses_rank_1_0(tmp_path: Path) -> None:
    env: dict[str, str | None] = {
        k: None for k in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "SLURM_PROCID")
    }
    env.update(BAD_RANK, TMPDIR=str(tmp_path))
    result = CliRunner().invoke(main, ["probe", "ddp", "--device", "cpu"], env=env)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        "gpudiag: error: RANK='1_0' is not an integer (plain ASCII digits, as gpudiag "
        "check reads it)\n"
    )
    assert not list(tmp_path.glob("gpudiag-probe-*"))


def test_the_launcher_type_names_every_row() -> None:
    # probe's report names its launcher by this Literal; a new row must extend it.
    from typing import get_args

    from gpudiag.launch.table import ROWS, Launcher

    assert set(get_args(Launcher)) == {row.name for row in ROWS} | {"self"}
