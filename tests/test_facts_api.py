"""gpudiag.devices() and gpudiag.resolve(): the machine's facts as the typed model (issue 20)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest

import gpudiag
from gpudiag import collect
from gpudiag.model import Gpu, Resolution
from gpudiag.snapshot import snapshot_from_json

from .conftest import fixture_path, load_fixture


def test_devices_from_a_snapshot_file_or_object() -> None:
    a100 = load_fixture("a100x8")
    from_file = gpudiag.devices(fixture_path("a100x8"))
    assert from_file == a100.gpus == gpudiag.devices(a100)
    assert all(isinstance(g, Gpu) for g in from_file)
    assert [g.nvml_index for g in from_file] == list(range(8))


@pytest.mark.parametrize(
    ("spec", "order", "nvml_indices"),
    [
        ("0,2", None, [0, 2]),
        ("2,0", None, [2, 0]),
        ("0,2,-1,1", None, [0, 2]),  # CUDA stops at the invalid entry (docs/visible-devices.md)
        ("", None, []),
        (None, None, list(range(8))),
    ],
)
def test_resolve_gives_cudas_mapping(
    spec: str | None, order: str | None, nvml_indices: list[int]
) -> None:
    r = gpudiag.resolve(spec, order, snapshot=fixture_path("a100x8"))
    assert isinstance(r, Resolution)
    assert [d.nvml_index for d in r.devices] == nvml_indices
    assert [d.cuda_ordinal for d in r.devices] == list(range(len(nvml_indices)))
    assert r.method == "rules"  # a snapshot has the rules only


def test_resolve_defaults_to_the_machines_variables() -> None:
    doc = json.loads(fixture_path("a100x8").read_text())
    doc["env"] = {"CUDA_VISIBLE_DEVICES": "3,1"}
    snap = snapshot_from_json(doc)
    assert [d.nvml_index for d in gpudiag.resolve(snapshot=snap).devices] == [3, 1]
    # An explicit None means "unset", not "the machine's".
    assert len(gpudiag.resolve(None, snapshot=snap).devices) == 8


def test_the_live_machine_is_read_and_the_driver_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    live = load_fixture("a100x8")
    monkeypatch.setattr(collect, "collect_snapshot", lambda **kwargs: live)
    asked: list[tuple[str | None, str | None]] = []

    def driver(spec: str | None, order: str | None) -> Sequence[str] | None:
        asked.append((spec, order))
        return [live.gpus[1].uuid]  # the driver's answer wins over the rules

    monkeypatch.setattr("gpudiag.machine.live_driver_asker", lambda snapshot: driver)
    assert gpudiag.devices() == live.gpus
    r = gpudiag.resolve("1")
    assert asked == [("1", None)]
    assert [d.nvml_index for d in r.devices] == [1] and r.method == "driver"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"snapshot": 3}, "snapshot must be a file path"),
        ({"cuda_visible_devices": 0}, "cuda_visible_devices must be a str or None"),
        ({"cuda_device_order": ["PCI_BUS_ID"]}, "cuda_device_order must be a str or None"),
    ],
)
def test_wrong_types_are_type_errors(kwargs: dict[str, Any], message: str) -> None:
    kwargs.setdefault("snapshot", fixture_path("a100x8"))
    with pytest.raises(TypeError, match=message):
        gpudiag.resolve(**kwargs)


def test_never_imports_torch() -> None:
    code = (
        "import sys, gpudiag; "
        f"gpudiag.devices({str(fixture_path('a100x8'))!r}); "
        f"gpudiag.resolve('0', snapshot={str(fixture_path('a100x8'))!r}); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr
