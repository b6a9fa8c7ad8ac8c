"""Real hardware: the live inventory on a machine with an NVIDIA GPU (marker ``gpu``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpudiag.collect import collect_snapshot
from gpudiag.core.inventory import build_inventory
from gpudiag.model import uuid_key
from gpudiag.snapshot import load_snapshot

pytestmark = pytest.mark.gpu


def test_live_snapshot_joins_nvml_and_torch_by_uuid() -> None:
    snap = collect_snapshot()
    assert snap.sources["nvml"].status == "ok", snap.sources["nvml"]
    assert snap.gpus, "NVML reports no GPU"
    assert snap.driver_version and snap.cuda_driver_version
    for gpu in snap.gpus:
        assert gpu.uuid and gpu.uuid.startswith("GPU-")
        assert gpu.memory_total_mib and gpu.memory_total_mib > 0
        assert gpu.compute_capability
    assert snap.torch is not None and snap.sources["torch"].status == "ok", snap.sources["torch"]
    if not snap.torch.cpu_only:
        assert snap.torch.device_count == len(snap.torch.devices) > 0
        inv = build_inventory(snap)
        assert all("nvml" in row.seen_by for row in inv.rows)
        nvml_keys = {uuid_key(g.uuid) for g in snap.gpus}
        assert {uuid_key(d.uuid) for d in snap.torch.devices} <= nvml_keys | {
            uuid_key(m.uuid) for g in snap.gpus for m in g.mig_devices
        }
    # The CUDA driver's own order, recorded for FASTEST_FIRST resolution.
    assert snap.cuda_order is not None
    assert {uuid_key(u) for u in snap.cuda_order} <= {uuid_key(g.uuid) for g in snap.gpus} | {
        uuid_key(m.uuid) for g in snap.gpus for m in g.mig_devices
    }


def test_live_list_and_snapshot_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "live.json"
    snap_proc = subprocess.run(
        [sys.executable, "-m", "gpudiag", "snapshot", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert snap_proc.returncode == 0, snap_proc.stderr
    snap = load_snapshot(out)
    listed = subprocess.run(
        [sys.executable, "-m", "gpudiag", "list", "--snapshot", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert [g["uuid"] for g in doc["gpus"] if g["nvml_index"] is not None] == [
        g.uuid for g in snap.gpus
    ]
    live = subprocess.run(
        [sys.executable, "-m", "gpudiag", "list"], capture_output=True, text=True, timeout=180
    )
    assert live.returncode == 0, live.stderr
    for gpu in snap.gpus:
        assert (gpu.name or "") in live.stdout
