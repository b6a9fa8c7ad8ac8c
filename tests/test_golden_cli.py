"""Pinned output of ``gpudiag list``, ``check`` and ``lint``, human and ``--json``, on the
fixture snapshots and lint scripts (issue 16, item 5): a refactor that changes what a user
or a tool reads fails here.

Golden files live in tests/golden/; ``GPUDIAG_UPDATE_GOLDEN=1`` rewrites them (then read
the diff). ``list`` keeps one file per invocation, like tests/test_list_cli.py; ``check``
and ``lint`` keep one transcript per fixture or script (``$ gpudiag ARGS``, ``[exit N]``,
stdout, then stderr if any) so that tens of cases stay in tens of files.

Every run is in process (CliRunner) under tests/pinned.py's controlled environment, from
inside tests/fixtures/ with relative paths, so no path, terminal, GPU or launcher variable
of the machine running the tests reaches the output. Nothing live runs: ``--snapshot``
everywhere; the rendezvous port is probed only without a snapshot (docs/check.md), and
``lint`` without ``--check`` does not look at the machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import FIXTURES
from .pinned import assert_golden, run_cli, transcript_entry

ALL_FIXTURES = sorted(p.stem for p in FIXTURES.glob("*.json"))
# tests/test_list_cli.py already pins these tables (same file names).
LISTED_ELSEWHERE = {"a100x8", "mixed4", "a100_mig", "gpu_lost", "no_driver"}

# A torchrun worker's variables, given explicitly (the controlled environment has none).
TORCHRUN_RANK1 = {
    "RANK": "1",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "2",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
    "TORCHELASTIC_RUN_ID": "none",
}

# (args, launcher variables) per check case; the same set on every fixture, so each
# fixture's transcript shows how that machine answers the main areas.
CHECK_CASES: list[tuple[list[str], dict[str, str]]] = [
    ([], {}),
    (["-v"], {}),
    (["-q"], {}),
    # DataParallel: the seed case, ids that are cuda ordinals, and physical ids.
    (["--visible", "1,2", "--device-ids", "0,1"], {}),
    (["--visible", "1,2", "--device-ids", "1,2"], {}),
    (["--device-ids", "all", "--batch-size", "3", "--amp", "bf16"], {}),
    (["--visible", "", "--device-ids", "0"], {}),
    # DDP before a launch, and inside one.
    (["--nproc-per-node", "2", "--backend", "nccl"], {}),
    (["--nproc-per-node", "4", "--backend", "gloo", "--order", "PCI_BUS_ID"], {}),
    (["--set-device", "0,0"], {}),
    ([], TORCHRUN_RANK1),
    # The gates.
    (["--expect-gpus", "2"], {}),
    (["--expect-gpus", "8", "--strict"], {}),
    (["--visible", "0,0", "--strict"], {}),
]


@pytest.fixture(autouse=True)
def _in_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    # Relative paths: the output names files as the user typed them.
    monkeypatch.chdir(FIXTURES)


@pytest.mark.parametrize("name", sorted(set(ALL_FIXTURES) - LISTED_ELSEWHERE))
def test_list_table_is_golden(name: str) -> None:
    code, out, err = run_cli(["list", "--snapshot", f"{name}.json"])
    assert code == 0 and err == ""
    assert_golden(f"list-{name}", out)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_list_json_is_golden(name: str) -> None:
    code, out, err = run_cli(["list", "--snapshot", f"{name}.json", "--json"])
    assert code == 0 and err == ""
    assert_golden(f"list-{name}-json", out)


def _check_transcript(name: str, json: bool) -> str:
    entries = []
    for args, env in CHECK_CASES:
        if json and args and args[0] in ("-v", "-q"):
            continue  # verbosity does not change the document
        argv = ["check", "--snapshot", f"{name}.json", *args, *(["--json"] if json else [])]
        entries.append(transcript_entry(argv, env))
    return "\n".join(entries)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_check_human_is_golden(name: str) -> None:
    assert_golden(f"check-{name}", _check_transcript(name, json=False))


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_check_json_is_golden(name: str) -> None:
    assert_golden(f"check-{name}-json", _check_transcript(name, json=True))


# Scripts from tests/fixtures/lint/: positive ones of each area and negative ones modelled
# on tutorials; the second item feeds the script to check on a fixture (--check).
LINT_SCRIPTS: list[tuple[str, str | None]] = [
    ("pos_dp_physical_ids_under_mask", "a100x8"),
    ("pos_ddp_no_set_device", "mixed4"),
    ("pos_scaler_bf16", "v100x8"),
    ("pos_amp_deprecated", None),
    ("pos_cvd_after_is_available", None),
    ("pos_master_port_per_rank", None),
    ("pos_syntax_error", None),
    ("neg_dp_tutorial", "a100x8"),
    ("neg_ddp_local_rank", None),
    ("neg_nanogpt_amp", None),
]


@pytest.mark.parametrize(("script", "snapshot"), LINT_SCRIPTS, ids=[s for s, _ in LINT_SCRIPTS])
def test_lint_is_golden(script: str, snapshot: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(FIXTURES / "lint")
    path = f"{script}.py.txt"
    assert Path(path).is_file()
    cases = [["lint", path], ["lint", path, "--json"]]
    if snapshot is not None:
        with_check = ["lint", path, "--check", "--snapshot", f"../{snapshot}.json"]
        cases += [with_check, [*with_check, "--json"]]
    assert_golden(f"lint-{script}", "\n".join(transcript_entry(argv) for argv in cases))
