"""Issue 21: a fixed-seed sample of ``bench/fuzz_cli.py``'s hostile invocations of
every command (list, check, snapshot, explain, lint, probe, --help/--version)
gives no traceback, only documented exit statuses, one ``gpudiag: error:`` line
for bad input, no raw control characters and no run over 10 s.

``bench/fuzz_cli.py`` runs 10,000 (and its pathological lint inputs); this is the
always-run sample: 300 in process and 30 of them again as real processes, in well under 30 s.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from .conftest import clear_launch_env

BENCH = Path(__file__).resolve().parent.parent / "bench" / "fuzz_cli.py"


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpudiag_fuzz_cli", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("seed", [21])
def test_a_fixed_sample_of_hostile_invocations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    fuzz = _harness()
    clear_launch_env(monkeypatch, "GPUDIAG_", "COLUMNS", "NO_COLOR")
    world_dir = tmp_path / "world"
    world_dir.mkdir()
    monkeypatch.chdir(world_dir)  # relative names the runs write land in the world
    # The pathological lint inputs (deep ASTs, quadratic rules) are lint's own
    # issue-21 items; the full harness runs them.
    world = fuzz.make_world(world_dir, pathological=False)
    outcomes, _ = fuzz.fuzz(world, seed, 300, 30, pathological=False)
    assert len(outcomes) == 330
    commands = {o.case.command for o in outcomes}
    assert commands >= {"list", "check", "snapshot", "explain", "lint", "probe", "(group)"}
    assert {o.code for o in outcomes} >= {0, 1, 2}  # the sample reaches past parsing
    bad = [o for o in outcomes if o.problems]
    assert not bad, fuzz.details(bad)


def test_the_harness_finds_a_traceback() -> None:
    # The checks can fail: a traceback in the output is reported.
    fuzz = _harness()
    assert fuzz.problems_of(0, "", "Traceback (most recent call last):\n", 0.1) == ["traceback"]
    assert fuzz.problems_of(120, "", "", 0.1) == ["exit"]
    assert fuzz.problems_of(2, "", "Usage: x\n", 11.0) == ["slow", "message"]
    assert fuzz.problems_of(0, "\x1b]0;x\x07", "", 0.1) == ["raw-control"]
