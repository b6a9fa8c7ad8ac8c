"""On real hardware: the rules' mapping versus what the CUDA driver enumerates.

Marked ``gpu``: skipped where there is no NVIDIA driver. For at least 20
CUDA_VISIBLE_DEVICES values built from this machine's own UUIDs and indices,
each value is resolved by the rules (on a live snapshot) and by a fresh CUDA
child process; they must agree. Run with ``-s`` to see the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from gpudiag.backends.cudadrv import cuda_order_for_snapshot, driver_enumeration
from gpudiag.core.visibility import apply_driver_mapping, resolve_visible
from gpudiag.model import Snapshot, VisibleDevice

pytestmark = pytest.mark.gpu


def _values(snapshot: Snapshot) -> list[tuple[str | None, str | None]]:
    gpus = [g for g in snapshot.gpus if g.uuid is not None and not g.lost]
    count = len(gpus)
    uuids = [str(g.uuid) for g in gpus]
    values: list[str | None] = [
        None,
        "",
        " ",
        "NoDevFiles",
        "0",
        "00",
        "+0",
        "-0",
        "0x0",
        "0-1",
        "0gpu",
        "0,0",
        "00,0",
        "-1",
        "0,-1",
        "-1,0",
        "0,,",
        ",0",
        "abc",
        str(count),
        f"0,{count}",
        f"0,{count},0",
        "GPU-",
        uuids[0],
        uuids[0][:8],
        uuids[0][:12].upper(),
        f"{uuids[0]},{uuids[0][:10]}",
        f"0,{uuids[0]}",
        f"{uuids[0]},0",
    ]
    if count > 1:
        values += [
            "1,0",
            ",".join(str(i) for i in range(count)),
            ",".join(str(i) for i in reversed(range(count))),
            f"{uuids[1]},{uuids[0]}",
            f"{uuids[1]}, {uuids[0]}",
            "1,0,-1,0",
        ]
    migs = [m.uuid for g in gpus for m in g.mig_devices]
    if migs:
        values += [migs[0], migs[0][:10], ",".join(migs[:2]), f"{migs[-1]},{migs[0]}"]
    pairs: list[tuple[str | None, str | None]] = [(v, None) for v in values]
    pairs += [(v, "PCI_BUS_ID") for v in values[:8]]
    pairs += [("0", "FASTEST_FIRST"), (None, "PCI_BUS_ID"), ("0", "bogus")]
    return pairs


def _short(devices: Sequence[VisibleDevice]) -> str:
    out = []
    for d in devices:
        out.append(f"{d.nvml_index}" + (f"/{d.mig_uuid[:12]}" if d.mig_uuid else ""))
    return "[" + ",".join(out) + "]"


def test_rules_match_the_driver() -> None:
    from gpudiag.machine import load_machine

    snapshot = load_machine(None)
    if snapshot.cuda_order is None:
        snapshot = replace(snapshot, cuda_order=cuda_order_for_snapshot())
    values = _values(snapshot)
    assert len(values) >= 20
    rows: list[str] = []
    disagreements: list[str] = []
    for spec, order in values:
        rules = resolve_visible(spec, order, snapshot)
        found = driver_enumeration(spec, order)
        if not found.ok:
            # cuInit refusing the environment: NO_DEVICE for "nothing visible",
            # INVALID_DEVICE for duplicates and a bad CUDA_DEVICE_ORDER (recorded on
            # driver 580); the rules must predict which.
            assert found.error is not None and "cuInit failed" in found.error, (spec, found.error)
            driver_devices: tuple[VisibleDevice, ...] = ()
            agree = rules.devices == () and str(rules.cuinit_error) in found.error
        else:
            checked = apply_driver_mapping(rules, found.uuids, snapshot)
            driver_devices = checked.devices
            agree = not any(f.code == "VIS-DRIVER-DISAGREES" for f in checked.findings)
        row = (
            f"{spec!r:>48} {order or '-':>13}  rules={_short(rules.devices):<22} "
            f"driver={_short(driver_devices):<22} {'ok' if agree else 'DIFFERS'}"
        )
        rows.append(row)
        if not agree:
            disagreements.append(row)
    print("\n" + "\n".join(rows))
    assert disagreements == []
