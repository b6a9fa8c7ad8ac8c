"""Replay answers recorded from a real CUDA driver and torch (``tests/truth/*.json``).

Each table was recorded on a real machine by ``tests/gpu_harness/truth_recorder.py``:
for every (``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER``) pair, a fresh process
asked the CUDA driver (cuInit, cuDeviceGetCount, cuDeviceGetUuid_v2) and another
asked torch (``torch.cuda.device_count()`` and each device's UUID). These are
facts, not our model: every row is replayed through ``gpudiag check --snapshot
… --json`` on any machine and must give

* ``visible`` equal to the UUIDs the driver enumerated, in order;
* an error finding where cuInit failed;
* a finding about torch (``VIS-TORCH-*``) exactly where torch's answer differed
  from the driver's, quoting torch's exception when torch raised.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudiag.cli import main

TRUTH = Path(__file__).parent / "truth"
_KEEP_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")


def _tables() -> list[tuple[str, dict[str, Any]]]:
    return [(p.stem, json.loads(p.read_text())) for p in sorted(TRUTH.glob("*.json"))]


def _rows() -> list[Any]:
    out = []
    for name, table in _tables():
        for i, row in enumerate(table["rows"]):
            out.append(pytest.param(table, row, id=f"{name}-{i}-{row['cvd']!r}-{row['order']}"))
    return out


def torch_differs(row: dict[str, Any]) -> bool:
    """torch's answer differs from the driver's: it raised, or counted otherwise."""
    if row["torch_error"] is not None:
        return True
    return bool(row["torch_device_count"] != len(row["driver_uuids"]))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Launcher variables come from the live environment: replay without any.
    for key in list(os.environ):
        if key not in _KEEP_ENV:
            monkeypatch.delenv(key)


def replay(tmp_path: Path, table: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """``gpudiag check --snapshot`` on the table's machine with the row's environment."""
    snapshot = dict(table["snapshot"])
    snapshot["env"] = {"CUDA_VISIBLE_DEVICES": row["cvd"], "CUDA_DEVICE_ORDER": row["order"]}
    path = tmp_path / "machine.json"
    path.write_text(json.dumps(snapshot))
    result = CliRunner().invoke(main, ["check", "--snapshot", str(path), "--json"])
    assert result.exit_code in (0, 1), result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_tables_are_present_and_well_formed() -> None:
    tables = _tables()
    assert tables, "no recorded truth table in tests/truth"
    for _, table in tables:
        assert table["rows"]
        for row in table["rows"]:
            assert set(row) >= {
                "cvd",
                "order",
                "driver_uuids",
                "driver_error",
                "torch_device_count",
                "torch_error",
            }
            # A failed cuInit enumerates nothing.
            assert not (row["driver_error"] and row["driver_uuids"])


@pytest.mark.parametrize(("table", "row"), _rows())
def test_row_replays(tmp_path: Path, table: dict[str, Any], row: dict[str, Any]) -> None:
    report = replay(tmp_path, table, row)
    findings = report["findings"]

    visible = [d["mig_uuid"] or d["uuid"] for d in report["visible"]]
    assert visible == row["driver_uuids"], findings

    errors = [f for f in findings if f["severity"] == "error"]
    if row["driver_error"] is not None:
        assert errors, f"cuInit fails with {row['driver_error']} but no error finding"
        assert report["ok"] is False

    about_torch = [f for f in findings if f["code"] in ("VIS-TORCH-COUNT", "VIS-TORCH-RAISES")]
    if torch_differs(row):
        assert about_torch, f"torch answered {row['torch_device_count']} / {row['torch_error']}"
        assert all("torch" in f["message"] for f in about_torch)
        if row["torch_error"] is not None:
            predicted = [(f["predicts"] or "").splitlines()[0] for f in about_torch]
            assert any(
                p.startswith(row["torch_error"]) or row["torch_error"].startswith(p)
                for p in predicted
                if p
            ), (predicted, row["torch_error"])
    else:
        assert about_torch == [], about_torch


@pytest.mark.parametrize("name", [name for name, _ in _tables()])
def test_the_recorded_healthy_machine_gives_no_finding(tmp_path: Path, name: str) -> None:
    # On the real H100, `gpudiag check` gave no finding: keep it so.
    table = dict(_tables())[name]
    report = replay(tmp_path, table, {"cvd": None, "order": None})
    assert report["findings"] == []
    assert [d["uuid"] for d in report["visible"]] == table["snapshot"]["cuda_order"]
