"""The truth recorder's grid and row format, with a fake asker (the real one needs GPUs)."""

from __future__ import annotations

from typing import Any

from .conftest import load_fixture
from .gpu_harness.truth_recorder import grid, record
from .test_truth_replay import TRUTH


def test_grid_is_built_from_the_machine() -> None:
    snapshot = load_fixture("a100x8")
    pairs = grid(snapshot)
    assert len(pairs) >= 100
    assert len(set(pairs)) == len(pairs)
    first = str(snapshot.gpus[0].uuid)
    values = {spec for spec, _ in pairs}
    assert first[:12] in values and first[:12].upper() in values
    assert {order for _, order in pairs} >= {None, "PCI_BUS_ID", "pci_bus_id", ""}
    assert "1,0" in values  # multi-GPU values on a multi-GPU machine


def test_rows_have_the_replayed_format() -> None:
    snapshot = load_fixture("a100x8")
    asked: list[tuple[str | None, str | None]] = []

    def fake(spec: str | None, order: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
        asked.append((spec, order))
        return {"uuids": [], "error": "NO_DEVICE"}, {"count": 0, "uuids": [], "error": None}

    rows = record(snapshot, fake)
    assert len(rows) == len(asked) == len(grid(snapshot))
    import json

    recorded = json.loads(next(TRUTH.glob("*.json")).read_text())["rows"][0]
    for row in rows:
        assert set(row) >= set(recorded)
