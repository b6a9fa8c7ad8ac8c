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
from .pinned import (
    CHECK_CASES,
    LINT_SCRIPTS,
    assert_golden,
    run_cli,
    transcript_entry,
    write_duplicate_mask_case,
)

ALL_FIXTURES = sorted(p.stem for p in FIXTURES.glob("*.json"))
# tests/test_list_cli.py already pins these tables (same file names).
LISTED_ELSEWHERE = {"a100x8", "mixed4", "a100_mig", "gpu_lost", "no_driver"}


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


def test_lint_check_with_cuinit_error_is_golden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_duplicate_mask_case(tmp_path)
    monkeypatch.chdir(tmp_path)
    argv = ["lint", "dup_mask.py", "--check", "--snapshot", "a100x8.json"]
    text = "\n".join(transcript_entry(a) for a in (argv, [*argv, "--json"]))
    assert '"cuinit_error": "CUDA_ERROR_INVALID_DEVICE"' in text
    assert_golden("lint-dup_mask", text)
