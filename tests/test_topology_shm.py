"""TOPO-SHM-SMALL against the local ranks and DataLoader workers a job asks for.

Each row: a fixture, its /dev/shm (total, free MiB), the GPUs selected,
``--nproc-per-node``, ``--num-workers``, the launch's environment and backend, and the
TOPO-SHM-SMALL severities expected. The reported machine is ``container_shm64``: Docker's
64 MiB default (NVIDIA/nccl#1518: 2 ranks fit, 4 did not; DataLoader workers killed by
a bus error). Without ``--num-workers`` the rule is the one before it (512 MiB).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.core.check import run_check
from gpudiag.core.topology_host import NCCL_SHM_PER_RANK_MIB, WORKER_SHM_MIB, shm_need_mib
from gpudiag.model import Finding

from .conftest import fixture_path, load_fixture

WARN, INFO = "warning", "info"
ROWS: list[tuple[str, str, tuple[int | None, int | None], str | None, int | None,
                 int | None, dict[str, str], str | None, list[str]]] = [
    # -- without --num-workers: as before (below 512 MiB: warning for 2+ ranks, else info)
    ("Docker 64 MiB, 2 GPUs", "container_shm64", (64, 64), None, None, None, {}, None, [WARN]),
    ("Docker 64 MiB, 1 GPU", "container_shm64", (64, 64), "0", None, None, {}, None, [INFO]),
    ("1 GiB, 2 GPUs", "container_shm64", (1024, 1024), None, None, None, {}, None, []),
    ("gloo does not use NCCL's segments", "container_shm64", (64, 64), None, 4, None, {},
     "gloo", [INFO]),
    ("NCCL_SHM_DISABLE=1", "container_shm64", (64, 64), None, 2, None,
     {"NCCL_SHM_DISABLE": "1"}, None, [INFO]),
    ("NCCL_SHM_DISABLE=0 keeps it", "container_shm64", (64, 64), None, 2, None,
     {"NCCL_SHM_DISABLE": "0"}, None, [WARN]),
    ("not collected", "container_shm64", (None, None), None, 2, 8, {}, None, []),
    # -- with --num-workers: need = ranks x 32 MiB (2+ ranks) + ranks x workers x 64 MiB
    ("1 rank, no worker: nothing in /dev/shm", "container_shm64", (64, 64), "0", None, 0, {},
     None, []),
    ("1 rank, 1 worker: 64 MiB fits 64, below 512", "container_shm64", (64, 64), "0", None, 1,
     {}, None, [INFO]),
    ("1 rank, 2 workers: 128 MiB in 64", "container_shm64", (64, 64), "0", None, 2, {}, None,
     [WARN]),
    ("2 ranks, no worker: 64 MiB fits (nccl#1518)", "container_shm64", (64, 64), None, None, 0,
     {}, None, [INFO]),
    ("4 ranks, no worker: 128 MiB in 64 (nccl#1518)", "container_shm64", (64, 64), None, 4, 0,
     {}, None, [WARN]),
    ("4 ranks on gloo, no worker: nothing", "container_shm64", (64, 64), None, 4, 0, {}, "gloo",
     []),
    ("2 ranks x 4 workers: 576 MiB in 1 GiB", "container_shm64", (1024, 1024), None, None, 4,
     {}, None, []),
    ("2 ranks x 4 workers in 1 GiB, 600 MiB of it used", "container_shm64", (1024, 424), None,
     None, 4, {}, None, [WARN]),
    ("8 ranks x 8 workers: 4352 MiB in 1 GiB", "container_shm64", (1024, 1024), None, 8, 8, {},
     None, [WARN]),
    ("8 ranks x 8 workers on a host's 251 GiB", "container_shm64", (257000, 257000), None, 8, 8,
     {}, None, []),
    ("healthy DGX A100, no host facts recorded", "a100x8", (None, None), None, 8, 8, {}, None,
     []),
]  # fmt: skip


def run(
    fixture: str,
    shm: tuple[int | None, int | None],
    visible: str | None,
    nproc: int | None,
    workers: int | None,
    env: dict[str, str],
    backend: str | None,
) -> list[Finding]:
    snap = load_fixture(fixture)
    if snap.host is not None:
        host = dataclasses.replace(snap.host, dev_shm_total_mib=shm[0], dev_shm_free_mib=shm[1])
        snap = dataclasses.replace(snap, host=host)
    kw: dict[str, Any] = {} if visible is None else {"visible": visible}
    report = run_check(
        snap, env=env, nproc_per_node=nproc, num_workers=workers, backend=backend, **kw
    )
    return [f for f in report.findings if f.code == "TOPO-SHM-SMALL"]


@pytest.mark.parametrize(
    ("fixture", "shm", "visible", "nproc", "workers", "env", "backend", "expected"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_shm_rule(
    fixture: str,
    shm: tuple[int | None, int | None],
    visible: str | None,
    nproc: int | None,
    workers: int | None,
    env: dict[str, str],
    backend: str | None,
    expected: list[str],
) -> None:
    found = run(fixture, shm, visible, nproc, workers, env, backend)
    assert [f.severity for f in found] == expected
    for f in found:
        assert f.message.endswith(".") and "None" not in f.message, f.message


@pytest.mark.parametrize(
    ("ranks", "workers", "nccl", "need"),
    [
        (1, 0, True, 0),
        (1, 3, True, 3 * WORKER_SHM_MIB),
        (2, 0, True, 2 * NCCL_SHM_PER_RANK_MIB),
        (4, 2, True, 4 * NCCL_SHM_PER_RANK_MIB + 8 * WORKER_SHM_MIB),
        (4, 2, False, 8 * WORKER_SHM_MIB),
    ],
)
def test_the_need_is_ranks_times_one_plus_workers(
    ranks: int, workers: int, nccl: bool, need: int
) -> None:
    assert shm_need_mib(ranks, workers, nccl_shm=nccl) == need


def test_the_constants_reproduce_the_reported_machine() -> None:
    # NVIDIA/nccl#1518: a 64 MiB /dev/shm held 2 ranks and not 4.
    assert shm_need_mib(2, 0) <= 64 < shm_need_mib(4, 0)


def test_the_warning_shows_its_arithmetic_and_a_size() -> None:
    found = run("container_shm64", (1024, 1024), None, 8, 8, {}, None)[0]
    assert "8 local ranks x (1 + 8 DataLoader workers) need about 4352 MiB" in found.message
    assert (
        "NCCL's segments (8 x 32 MiB) and the prefetched batches of 64 DataLoader workers (64 x 64 MiB)"
        in found.message
    )
    assert "docker run --shm-size=5g" in (found.fix or "")
    assert (found.predicts or "").startswith("NCCL WARN Error: failed to extend /dev/shm/nccl-")
    assert any("Bus error" in text for text in found.predicts_also)
    assert any("unable to write to file </torch_" in text for text in found.predicts_also)
    used = run("container_shm64", (1024, 424), None, None, 4, {}, None)[0]
    assert "(600 MiB of it already used)" in used.message
    workers_only = run("container_shm64", (64, 64), "0", None, 2, {}, None)[0]
    assert (workers_only.predicts or "").startswith("RuntimeError: DataLoader worker (pid")


# ------------------------------------------------------------------ the option


def _cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        main,
        ["check", "--snapshot", str(fixture_path("container_shm64")), *args],
        env={"COLUMNS": "200", **(env or {})},
    )
    return result.exit_code, result.stdout, result.stderr


def test_num_workers_option_and_its_variable() -> None:
    _, out, _ = _cli("--visible", "0", "--num-workers", "4", "--json")
    assert "need about 256 MiB" in out
    _, out, _ = _cli("--visible", "0", "--json", env={"GPUDIAG_CHECK_NUM_WORKERS": "4"})
    assert "need about 256 MiB" in out
    _, out, _ = _cli("--visible", "0", "--num-workers", "0", "--json")
    assert "TOPO-SHM-SMALL" not in out


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--num-workers", "x"], {}, "--num-workers 'x' is not an integer"),
        (["--num-workers", "-1"], {}, "--num-workers must be 0 or more, got -1"),
        (["--num-workers", "5000"], {}, "--num-workers must be at most 4096, got 5000"),
        ([], {"GPUDIAG_CHECK_NUM_WORKERS": "-2"}, "GPUDIAG_CHECK_NUM_WORKERS must be 0 or more"),
    ],
)
def test_bad_num_workers_is_one_line_and_exit_2(
    args: list[str], env: dict[str, str], message: str
) -> None:
    code, out, err = _cli(*args, env=env)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err


def emitted() -> set[tuple[str, str]]:
    """(code, severity) of every row: tests/test_topology.py checks the catalogue's."""
    return {("TOPO-SHM-SMALL", sev) for row in ROWS for sev in row[-1]}


def test_the_python_api_takes_num_workers() -> None:
    import gpudiag

    report = gpudiag.check(
        snapshot=fixture_path("container_shm64"), visible="0", num_workers=4, env={}
    )
    shm = [f for f in report.findings if f.code == "TOPO-SHM-SMALL"]
    assert [f.severity for f in shm] == ["warning"] and "256 MiB" in shm[0].message
    with pytest.raises(ValueError, match="num_workers must be 0 or more"):
        gpudiag.check(snapshot=fixture_path("container_shm64"), num_workers=-1, env={})
    with pytest.raises(TypeError, match="num_workers"):
        gpudiag.guard(snapshot=fixture_path("container_shm64"), num_workers="4", env={})  # type: ignore[arg-type]
