"""Schema 1.4: whose each GPU process is, read, written back, redacted, refused when wrong,
and replayed by ``check --snapshot``. Older snapshots read the new fields as None."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.model import SNAPSHOT_SCHEMA, GpuProcess
from gpudiag.snapshot import SnapshotError, snapshot_from_json, snapshot_to_json
from gpudiag.snapshot.redact import redact_snapshot

from .conftest import fixture_path, load_fixture
from .test_snapshot import MINIMAL

PROCESS = {
    "pid": 62251,
    "used_memory_mib": 725,
    "name": "python",
    "in_pid_namespace": True,
    "this_job": True,
    "this_job_by": "slurm_job",
    "slurm_job_id": "51377",
    "proc_state": "S",
}


def _doc(schema: str = "gpudiag-snapshot/1.4", **process: Any) -> dict[str, Any]:
    doc = copy.deepcopy(MINIMAL)
    doc["schema"] = schema
    doc["gpus"][0]["processes"] = [{**PROCESS, **process}]
    doc["host"] = {"platform": "Linux", "host_pid_namespace": True}
    return doc


def test_gpudiag_writes_1_4() -> None:
    assert SNAPSHOT_SCHEMA == "gpudiag-snapshot/1.4"


def test_holders_are_read_and_written_back() -> None:
    snap = snapshot_from_json(_doc())
    assert snap.gpus[0].processes[0] == GpuProcess(62251, 725, "python", True, True,
                                                   "slurm_job", "51377", "S")  # fmt: skip
    assert snap.host is not None and snap.host.host_pid_namespace is True
    again = snapshot_to_json(snap)
    assert again["gpus"][0]["processes"][0] == PROCESS
    assert again["host"]["host_pid_namespace"] is True
    assert snapshot_from_json(again) == snap


def test_an_older_snapshot_reads_them_as_not_collected() -> None:
    doc = _doc("gpudiag-snapshot/1.3")
    for key in ("this_job", "this_job_by", "slurm_job_id", "proc_state"):
        del doc["gpus"][0]["processes"][0][key]
    del doc["host"]["host_pid_namespace"]
    snap = snapshot_from_json(doc)
    p = snap.gpus[0].processes[0]
    assert (p.this_job, p.this_job_by, p.slurm_job_id, p.proc_state) == (None,) * 4
    assert snap.host is not None and snap.host.host_pid_namespace is None
    # A 1.2 fixture, as stored: nothing placed, nothing guessed.
    old = load_fixture("container_shm64")
    assert old.gpus[1].processes[0].this_job is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("this_job", "yes", "gpus[0].processes[0].this_job must be bool, not str"),
        ("this_job_by", 3, "gpus[0].processes[0].this_job_by must be str, not int"),
        ("slurm_job_id", 48213, "gpus[0].processes[0].slurm_job_id must be str, not int"),
        ("proc_state", True, "gpus[0].processes[0].proc_state must be str, not bool"),
    ],
)
def test_wrong_types_are_refused_in_one_line(field: str, value: object, message: str) -> None:
    with pytest.raises(SnapshotError) as info:
        snapshot_from_json(_doc(**{field: value}))
    assert str(info.value) == message


def test_redaction_drops_the_job_id_and_keeps_whose() -> None:
    p = redact_snapshot(snapshot_from_json(_doc())).gpus[0].processes[0]
    assert (p.pid, p.name, p.slurm_job_id) == (None, None, None)
    assert (p.this_job, p.this_job_by, p.proc_state) == (True, "slurm_job", "S")


def test_check_replays_the_holders_of_a_written_snapshot(tmp_path: Path) -> None:
    # Read, written back as gpudiag writes it, then replayed: the same findings.
    path = tmp_path / "node.json"
    path.write_text(json.dumps(snapshot_to_json(load_fixture("a100x8_cuda0_contexts"))))
    runs = [
        CliRunner().invoke(main, ["check", "--snapshot", str(p), "--json"], env={"COLUMNS": "100"})
        for p in (path, fixture_path("a100x8_cuda0_contexts"))
    ]
    docs = [json.loads(r.stdout) for r in runs]
    codes = [[(f["code"], f["severity"]) for f in d["findings"]] for d in docs]
    assert codes[0] == codes[1]
    assert ("TOPO-MEMORY-OWN-JOB", "warning") in codes[0]
    assert not any(code == "HEALTH-FOREIGN-PROCESSES" for code, _ in codes[0])
