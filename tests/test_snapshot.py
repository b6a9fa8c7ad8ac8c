"""Snapshot schema: reading, writing, round trips and rejection of bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpudiag.snapshot import (
    SnapshotError,
    dump_snapshot,
    load_snapshot,
    snapshot_from_json,
    snapshot_to_json,
)

from .conftest import FIXTURES, fixture_path

ALL_FIXTURES = sorted(p.stem for p in FIXTURES.glob("*.json"))

MINIMAL = {
    "schema": "gpudiag-snapshot/1",
    "driver_version": "550.54.15",
    "cuda_driver_version": "12.4",
    "env": {"CUDA_VISIBLE_DEVICES": None, "CUDA_DEVICE_ORDER": None},
    "cuda_order": None,
    "gpus": [
        {
            "nvml_index": 0,
            "uuid": "GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1",
            "pci_bus_id": "00000000:07:00.0",
            "name": "NVIDIA A100-SXM4-80GB",
            "memory_total_mib": 81920,
            "memory_used_mib": 4,
            "multiprocessor_count": 108,
            "compute_capability": "8.0",
            "mig_enabled": False,
            "mig_devices": [],
            "processes": [],
        }
    ],
}


def test_the_issue_example_is_read() -> None:
    snap = snapshot_from_json(MINIMAL)
    assert snap.driver_version == "550.54.15"
    assert snap.cuda_visible_devices is None
    assert snap.gpus[0].memory_total_mib == 81920
    assert snap.gpus[0].compute_capability == "8.0"
    assert snap.torch is None and snap.gputil is None


def test_required_names_are_written_back() -> None:
    out = snapshot_to_json(snapshot_from_json(MINIMAL))
    for key in ("schema", "driver_version", "cuda_driver_version", "env", "cuda_order", "gpus"):
        assert out[key] == MINIMAL[key] or key == "gpus"
    for key, value in MINIMAL["gpus"][0].items():
        assert out["gpus"][0][key] == value


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_every_fixture_round_trips_exactly(name: str, tmp_path: Path) -> None:
    snap = load_snapshot(fixture_path(name))
    again = tmp_path / "again.json"
    again.write_text(dump_snapshot(snap))
    assert load_snapshot(again) == snap
    assert json.loads(again.read_text()) == snapshot_to_json(snap)


def test_unknown_fields_are_ignored() -> None:
    doc = json.loads(json.dumps(MINIMAL))
    doc["future_field"] = {"x": 1}
    doc["gpus"][0]["future_gpu_field"] = 3
    assert snapshot_from_json(doc).gpus[0].nvml_index == 0


def _mutated(change: str) -> dict:
    doc = json.loads(json.dumps(MINIMAL))
    exec(change, {"doc": doc})
    return doc


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            "doc['schema'] = 'gpudiag-snapshot/2'",
            "schema is 'gpudiag-snapshot/2', expected 'gpudiag-snapshot/1' or 'gpudiag-snapshot/1.N'",
        ),
        (
            "del doc['schema']",
            "schema is None, expected 'gpudiag-snapshot/1' or 'gpudiag-snapshot/1.N'",
        ),
        ("del doc['cuda_order']", "required field 'cuda_order' is missing"),
        ("doc['gpus'] = {}", "gpus must be a list, not dict"),
        (
            "doc['gpus'][0]['memory_total_mib'] = '80GB'",
            "gpus[0].memory_total_mib must be int, not str",
        ),
        ("doc['gpus'][0]['nvml_index'] = True", "gpus[0].nvml_index must be int, not bool"),
        ("del doc['gpus'][0]['uuid']", "gpus[0].uuid is required"),
        ("doc['gpus'][0]['uuid'] = None", "gpus[0].uuid is required (null only when lost is true)"),
        ("doc['gpus'].append(dict(doc['gpus'][0]))", "gpus[].nvml_index values must be unique"),
        (
            "doc['env'] = {'CUDA_VISIBLE_DEVICES': 0}",
            "env.CUDA_VISIBLE_DEVICES must be a string or null, not int",
        ),
        ("doc['cuda_order'] = 'GPU-1'", "cuda_order must be a list of UUID strings or null"),
        (
            "doc['gpus'][0]['mig_devices'] = [{'gpu_instance_id': 1}]",
            "gpus[0].mig_devices[0].uuid is required",
        ),
        (
            "doc['sources'] = {'nvml': {'status': 'fine'}}",
            "sources.nvml.status must be ok, unavailable, error or skipped, not 'fine'",
        ),
        (
            "doc['torch'] = {'devices': [{'name': 'x'}]}",
            "torch.devices[0].cuda_ordinal is required",
        ),
        (
            "doc['gpus'][0]['power_draw_w'] = float('nan')",
            "gpus[0].power_draw_w must be a finite number, not nan",
        ),
        (
            "doc['gputil'] = [{'gputil_id': 0, 'load_percent': float('inf')}]",
            "gputil[0].load_percent must be a finite number, not inf",
        ),
        ("doc['gpus'][0]['nvml_index'] = -1", "gpus[0].nvml_index must not be negative, got -1"),
        (
            "doc['gpus'][0]['memory_total_mib'] = -5",
            "gpus[0].memory_total_mib must not be negative, got -5",
        ),
        ("doc['gpus'][0]['uuid'] = ' '", "gpus[0].uuid must not be empty"),
        (
            "doc['gpus'].append(dict(doc['gpus'][0], nvml_index=1))",
            "gpus[].uuid values must be unique",
        ),
        (
            "doc['cuda_order'] = [doc['gpus'][0]['uuid']] * 2",
            "cuda_order must not list a UUID twice",
        ),
    ],
)
def test_bad_documents_are_rejected_with_one_line(change: str, message: str) -> None:
    with pytest.raises(SnapshotError) as info:
        snapshot_from_json(_mutated(change))
    assert str(info.value) == message


def test_bad_files_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SnapshotError, match=r"^snapshot .*bad.json is not valid JSON: Expecting"):
        load_snapshot(bad)
    with pytest.raises(SnapshotError, match=r"^cannot read snapshot .*missing.json: No such file"):
        load_snapshot(tmp_path / "missing.json")
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SnapshotError, match=r"is not UTF-8 text$"):
        load_snapshot(bad)
    bad.write_text("[]")
    with pytest.raises(SnapshotError, match=r"is invalid: snapshot must be an object, not list$"):
        load_snapshot(bad)
