"""The driver-confirmed mapping as list/check use it: an injected asker, and none here."""

from __future__ import annotations

from collections.abc import Sequence

from gpudiag.core.check import run_check
from gpudiag.core.visibility import resolve_checked, resolve_visible
from gpudiag.machine import live_driver_asker

from .conftest import load_fixture


def _asker(uuids: Sequence[str] | None, calls: list[tuple[str | None, str | None]]):  # type: ignore[no-untyped-def]
    def ask(spec: str | None, order: str | None) -> Sequence[str] | None:
        calls.append((spec, order))
        return uuids

    return ask


def test_no_driver_keeps_the_rules_answer() -> None:
    snap = load_fixture("mixed4")
    assert resolve_checked("0,1", None, snap, None) == resolve_visible("0,1", None, snap)
    calls: list[tuple[str | None, str | None]] = []
    unanswered = resolve_checked("0,1", None, snap, _asker(None, calls))
    assert unanswered == resolve_visible("0,1", None, snap)
    assert calls == [("0,1", None)]


def test_driver_that_agrees_confirms_the_mapping() -> None:
    snap = load_fixture("mixed4")
    rules = resolve_visible("0,1", None, snap)
    calls: list[tuple[str | None, str | None]] = []
    confirmed = resolve_checked("0,1", None, snap, _asker([d.uuid for d in rules.devices], calls))
    assert confirmed.method == "driver"
    assert [d.nvml_index for d in confirmed.devices] == [1, 3]
    assert not any(f.code == "VIS-DRIVER-DISAGREES" for f in confirmed.findings)


def test_driver_that_disagrees_wins_and_is_reported_through_check() -> None:
    snap = load_fixture("mixed4")
    by_index = {g.nvml_index: g.uuid for g in snap.gpus}
    # The driver says cuda:0 is nvidia-smi GPU 0 (PCI order), unlike the recorded order.
    calls: list[tuple[str | None, str | None]] = []
    report = run_check(snap, visible="0,1", driver=_asker([by_index[0], by_index[1]], calls))
    assert calls == [("0,1", None)]
    assert report.resolution.method == "driver"
    assert [d.nvml_index for d in report.resolution.devices] == [0, 1]
    assert "VIS-DRIVER-DISAGREES" in {f.code for f in report.findings}


def test_no_live_asker_without_nvml() -> None:
    assert live_driver_asker(load_fixture("no_driver")) is None
    assert live_driver_asker(load_fixture("a100x8")) is not None
