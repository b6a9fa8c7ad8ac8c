"""``gpudiag list`` output: the GPU table with its footer, or its JSON document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudiag.core.inventory import Inventory, InventoryRow
from gpudiag.model import Finding, Resolution, Snapshot, short_uuid, uuid_key
from gpudiag.render.findings import render_findings, sort_findings
from gpudiag.snapshot import gpu_to_json

#: Version of the ``gpudiag list --json`` document (docs/cli.md).
LIST_SCHEMA = "gpudiag-list/1"

HEADERS = (
    "NVML",
    "CUDA",
    "Name",
    "UUID",
    "PCI bus",
    "Memory used/total",
    "Util",
    "Temp",
    "Seen by",
)


def _na(value: object, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value}{suffix}"


def _memory(used: int | None, total: int | None) -> str:
    if used is None and total is None:
        return "n/a"
    return f"{_na(used)} / {_na(total)} MiB"


def _ordinals(values: tuple[int, ...]) -> str:
    return ",".join(str(v) for v in values)


def _gpu_rows(row: InventoryRow, resolution: Resolution | None) -> list[list[str]]:
    gpu = row.gpu
    seen = ",".join(row.seen_by)
    if gpu is None:
        dev = row.torch_devices[0] if row.torch_devices else None
        util = row.gputil
        name = (dev.name if dev else None) or (util.name if util else None) or "?"
        total = (dev.memory_total_mib if dev else None) or (util.memory_total_mib if util else None)
        ordinal = str(dev.cuda_ordinal) if dev else ""
        return [["", ordinal, name, short_uuid(row.uuid), "?", _memory(None, total), "", "", seen]]
    if gpu.lost:
        return [
            [
                str(gpu.nvml_index),
                "",
                "(GPU lost)",
                short_uuid(gpu.uuid),
                _na(gpu.pci_bus_id),
                "n/a",
                "n/a",
                "n/a",
                seen,
            ]
        ]
    rows = [
        [
            str(gpu.nvml_index),
            _ordinals(tuple(o for o in row.cuda_ordinals if not _is_mig(resolution, o))),
            gpu.name or "?",
            short_uuid(gpu.uuid),
            _na(gpu.pci_bus_id),
            _memory(gpu.memory_used_mib, gpu.memory_total_mib),
            _na(gpu.utilization_gpu_percent, " %"),
            _na(gpu.temperature_c, " °C"),
            seen,
        ]
    ]
    for mig in gpu.mig_devices:
        ordinal = ""
        if resolution is not None:
            ordinal = _ordinals(
                tuple(
                    d.cuda_ordinal
                    for d in resolution.devices
                    if d.mig_uuid and uuid_key(d.mig_uuid) == uuid_key(mig.uuid)
                )
            )
        rows.append(
            [
                "",
                ordinal,
                f"└ MIG gi={_na(mig.gpu_instance_id)} ci={_na(mig.compute_instance_id)}",
                short_uuid(mig.uuid),
                "",
                _memory(None, mig.memory_total_mib),
                "",
                "",
                "",
            ]
        )
    return rows


def _is_mig(resolution: Resolution | None, ordinal: int) -> bool:
    if resolution is None:
        return False
    return any(d.cuda_ordinal == ordinal and d.mig_uuid for d in resolution.devices)


def _status_text(snapshot: Snapshot) -> str:
    parts = []
    for name in ("nvml", "torch", "gputil"):
        src = snapshot.sources.get(name)
        if src is None:
            parts.append(f"{name} not recorded")
        elif src.reason:
            parts.append(f"{name} {src.status} ({src.reason})")
        else:
            parts.append(f"{name} {src.status}")
    return "Sources: " + "; ".join(parts)


def _versions_text(snapshot: Snapshot) -> str:
    torch = snapshot.torch
    torch_text = "n/a"
    if torch is not None and torch.version:
        cuda = "CPU-only build" if torch.cpu_only else f"CUDA {torch.cuda_version}"
        torch_text = f"{torch.version} ({cuda})"
    return (
        f"Driver {_na(snapshot.driver_version)} · CUDA driver API "
        f"{_na(snapshot.cuda_driver_version)} · torch {torch_text}"
    )


def render_list(
    snapshot: Snapshot,
    inventory: Inventory,
    resolution: Resolution,
    findings: Sequence[Finding],
    *,
    mapping_text: str | None = None,
) -> str:
    """The human output of ``gpudiag list``."""
    out: list[str] = []
    nvml = snapshot.sources.get("nvml")
    if not inventory.rows:
        if nvml is not None and nvml.status != "ok":
            out.append(f"No GPUs listed: {nvml.reason}.")
            out.append(
                "What to do: install the NVIDIA driver on a GPU node, or inspect a "
                "capture of one with `gpudiag list --snapshot FILE`."
            )
        else:
            out.append("No GPUs found.")
    else:
        table: list[list[str]] = []
        for row in inventory.rows:
            table.extend(_gpu_rows(row, resolution))
        # Imported here: tabulate pulls in importlib.metadata (~20 ms), which
        # `list --json` does not need.
        from tabulate import tabulate

        out.append(tabulate(table, headers=HEADERS, tablefmt="simple", disable_numparse=True))
    out.append("")
    out.append(_versions_text(snapshot))
    out.append(_status_text(snapshot))
    cvd = resolution.spec
    out.append(
        f"CUDA_VISIBLE_DEVICES={'<unset>' if cvd is None else repr(cvd)} · "
        f"CUDA_DEVICE_ORDER={resolution.order} · "
        f"{len(resolution.devices)} CUDA device(s) visible"
    )
    if mapping_text:
        out.append("")
        out.append(mapping_text)
    if findings:
        out.append("")
        out.append(render_findings(findings))
    return "\n".join(out) + "\n"


def list_to_json(
    snapshot: Snapshot,
    inventory: Inventory,
    resolution: Resolution,
    resolution_json: dict[str, Any],
    findings: Sequence[Finding],
) -> dict[str, Any]:
    """The ``gpudiag list --json`` document (documented in docs/cli.md)."""
    gpus = []
    for row in inventory.rows:
        if row.gpu is not None:
            item = gpu_to_json(row.gpu)
        else:
            dev = row.torch_devices[0] if row.torch_devices else None
            item = {
                "nvml_index": None,
                "uuid": row.uuid,
                "name": (dev.name if dev else None) or (row.gputil.name if row.gputil else None),
            }
        item["cuda_ordinals"] = list(row.cuda_ordinals)
        item["seen_by"] = list(row.seen_by)
        gpus.append(item)
    torch = snapshot.torch
    return {
        "schema": LIST_SCHEMA,
        "hostname": snapshot.hostname,
        "driver_version": snapshot.driver_version,
        "cuda_driver_version": snapshot.cuda_driver_version,
        "torch": None
        if torch is None
        else {
            "version": torch.version,
            "cuda_version": torch.cuda_version,
            "cpu_only": torch.cpu_only,
            "device_count": torch.device_count,
        },
        "env": dict(snapshot.env),
        "gpus": gpus,
        "visible": [d.to_json() for d in resolution.devices],
        "resolution": resolution_json,
        "sources": {
            name: {"status": s.status, "reason": s.reason} for name, s in snapshot.sources.items()
        },
        "findings": [f.to_json() for f in sort_findings(findings)],
    }
