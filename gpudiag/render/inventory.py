"""``gpudiag list`` output: the GPU table with its footer, or its JSON document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudiag.core.cudacompat import driver_supports
from gpudiag.core.inventory import Inventory, InventoryRow
from gpudiag.model import Finding, Gpu, GpuProcess, Resolution, Snapshot, uuid_key
from gpudiag.render.findings import render_findings, sort_findings
from gpudiag.render.mapping import short_pci_bus_id
from gpudiag.render.table import fit_column, format_table
from gpudiag.render.text import PLAIN, Style, esc, safe, wrap
from gpudiag.snapshot import gpu_to_json

#: Version of the ``gpudiag list --json`` document (docs/cli.md).
LIST_SCHEMA = "gpudiag-list/1"


def _na(value: object, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value}{suffix}"


def _memory(used: int | None, total: int | None) -> str:
    if used is None and total is None:
        return "n/a"
    if used is None:
        return f"{total} MiB"
    return f"{used} / {_na(total)} MiB"


def _ordinals(values: tuple[int, ...]) -> str:
    return ",".join(str(v) for v in values)


def _bus(pci_bus_id: str | None) -> str:
    """``00000000:07:00.0`` → ``07:00.0`` (domain 0, as nvidia-smi's table prints it)."""
    if pci_bus_id is None:
        return "n/a"
    domain, sep, rest = pci_bus_id.partition(":")
    if sep and domain.strip("0") == "":
        return esc(rest, 13)
    return esc(short_pci_bus_id(pci_bus_id), 13)


def _procs(gpu: Gpu) -> str:
    return "n/a" if "processes" in gpu.errors else str(len(gpu.processes))


def _expected_sources(snapshot: Snapshot) -> tuple[str, ...]:
    return tuple(
        name
        for name in ("nvml", "torch", "gputil")
        if (src := snapshot.sources.get(name)) is not None and src.status == "ok"
    )


class _Columns:
    """The table's columns for this output: "Seen by" only where the sources disagree."""

    def __init__(self, inventory: Inventory, snapshot: Snapshot) -> None:
        expected = _expected_sources(snapshot)
        self.seen = any(row.seen_by != expected for row in inventory.rows)
        self.expected = expected

    def headers(self) -> list[str]:
        heads = ["GPU", "CUDA", "Name", "Bus", "Memory", "Util", "Temp", "Procs"]
        if self.seen:
            heads.append("Seen by")
        return heads

    def row(self, cells: list[str], seen: tuple[str, ...] | None) -> list[str]:
        out = list(cells)
        if self.seen:
            out.append("" if seen is None or seen == self.expected else ",".join(seen) or "-")
        return out


def _identities(inventory: Inventory) -> list[str]:
    """-v: each GPU's (and MIG device's) full UUID and PCI bus id, one line each."""
    lines = []
    for row in inventory.rows:
        gpu = row.gpu
        label = f"GPU {gpu.nvml_index}" if gpu is not None else "GPU -"
        bus = f"  {esc(gpu.pci_bus_id)}" if gpu is not None and gpu.pci_bus_id else ""
        lines.append(f"{label:<7} {esc(row.uuid or '?')}{bus}")
        for mig in gpu.mig_devices if gpu is not None else ():
            lines.append(f"  └ MIG {esc(mig.uuid)}")
    return lines


def _gpu_rows(row: InventoryRow, resolution: Resolution | None, cols: _Columns) -> list[list[str]]:
    gpu = row.gpu
    if gpu is None:
        dev = row.torch_devices[0] if row.torch_devices else None
        util = row.gputil
        name = (dev.name if dev else None) or (util.name if util else None) or "?"
        total = (dev.memory_total_mib if dev else None) or (util.memory_total_mib if util else None)
        ordinal = str(dev.cuda_ordinal) if dev else ""
        cells = ["-", ordinal, esc(name, 28), "?", _memory(None, total), "", "", ""]
        return [cols.row(cells, row.seen_by)]
    if gpu.lost:
        cells = [str(gpu.nvml_index), "", "(GPU lost)", _bus(gpu.pci_bus_id)] + ["n/a"] * 4
        return [cols.row(cells, row.seen_by)]
    cells = [
        str(gpu.nvml_index),
        _ordinals(tuple(o for o in row.cuda_ordinals if not _is_mig(resolution, o))),
        esc(gpu.name or "?", 28),
        _bus(gpu.pci_bus_id),
        _memory(gpu.memory_used_mib, gpu.memory_total_mib),
        _na(gpu.utilization_gpu_percent, " %"),
        _na(gpu.temperature_c, " °C"),
        _procs(gpu),
    ]
    rows = [cols.row(cells, row.seen_by)]
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
        name = f"└ MIG gi={_na(mig.gpu_instance_id)} ci={_na(mig.compute_instance_id)}"
        cells = ["", ordinal, name, "", _memory(None, mig.memory_total_mib), "", "", ""]
        rows.append(cols.row(cells, None))
    return rows


def _is_mig(resolution: Resolution | None, ordinal: int) -> bool:
    if resolution is None:
        return False
    # devices are in cuda_ordinal order (devices[i].cuda_ordinal == i): one lookup,
    # not a scan per row, which made `list` quadratic in GPUs.
    devices = resolution.devices
    if 0 <= ordinal < len(devices) and devices[ordinal].cuda_ordinal == ordinal:
        return devices[ordinal].mig_uuid is not None
    return any(d.cuda_ordinal == ordinal and d.mig_uuid for d in devices)


def _status_text(snapshot: Snapshot, verbose: bool) -> str:
    """The sources' states; their reasons only under -v (the findings give them)."""
    parts = []
    for name in ("nvml", "torch", "gputil"):
        src = snapshot.sources.get(name)
        if src is None:
            parts.append(f"{name} not recorded")
        elif src.status == "skipped" and name == "torch":
            parts.append("torch from its files")
        elif src.reason and verbose:
            parts.append(f"{name} {src.status} ({src.reason})")
        else:
            parts.append(f"{name} {src.status}")
    return safe("Sources: " + "; ".join(parts))


def torch_text(snapshot: Snapshot) -> str:
    """``2.4.1+cu124 (CUDA 12.4)``, with the driver's support when it is not full."""
    torch = snapshot.torch
    if torch is None or not torch.version:
        return "n/a"
    if torch.cpu_only:
        return f"{esc(torch.version, 40)} (CPU-only build)"
    text = f"{esc(torch.version, 40)} (CUDA {esc(torch.cuda_version, 20)})"
    if snapshot.driver_version or snapshot.cuda_driver_version:
        support = driver_supports(
            torch.cuda_version, snapshot.cuda_driver_version, snapshot.driver_version
        )
        if support.support == "no":
            text += ", too new for this driver"
        elif support.support == "minor-compat":
            text += ", by minor-version compatibility"
    return text


def not_asked_line(snapshot: Snapshot, *, with_version: bool = True) -> str | None:
    """The one line saying what torch was not asked (live runs without --deep)."""
    src = snapshot.sources.get("torch")
    if src is None or src.status != "skipped" or snapshot.torch is None:
        return None
    name = f"torch {torch_text(snapshot)}" if with_version else "torch"
    return (
        f"{name} was not imported: its device count, arch list and CUDA start-up errors "
        "are not checked (--deep asks it, ~seconds)."
    )


def _versions_text(snapshot: Snapshot) -> str:
    return (
        f"Driver {esc(_na(snapshot.driver_version), 40)} · CUDA driver API "
        f"{esc(_na(snapshot.cuda_driver_version), 20)} · torch {torch_text(snapshot)}"
    )


def quiet_line(snapshot: Snapshot, resolution: Resolution, findings: Sequence[Finding]) -> str:
    """``list -q``: one line of GPUs, visible devices and finding counts."""
    counts = {s: sum(1 for f in findings if f.severity == s) for s in ("error", "warning", "info")}
    return (
        f"{len(snapshot.gpus)} GPU(s), {len(resolution.devices)} visible to CUDA; "
        f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info"
    )


def _whose(proc: GpuProcess) -> str:
    """`` · this job``, `` · Slurm job 48190``, `` · no such PID here`` (schema 1.2, 1.4)."""
    if proc.in_pid_namespace is False:
        return " · no such PID here"
    state = f", state {esc(proc.proc_state, 4)}" if proc.proc_state in ("D", "Z") else ""
    if proc.this_job is True:
        return f" · this job{state}"
    if proc.this_job is False:
        job = f" (Slurm job {esc(proc.slurm_job_id, 20)})" if proc.slurm_job_id else ""
        return f" · another job{job}{state}"
    return f" · state {esc(proc.proc_state, 4)}" if state else ""


def _processes(snapshot: Snapshot) -> list[str]:
    lines = []
    for gpu in snapshot.gpus:
        for proc in gpu.processes:
            lines.append(
                f"GPU {gpu.nvml_index}: pid {proc.pid} {esc(proc.name or '?', 40)} "
                f"{_na(proc.used_memory_mib, ' MiB')}{_whose(proc)}"
            )
    return lines


def render_list(
    snapshot: Snapshot,
    inventory: Inventory,
    resolution: Resolution,
    findings: Sequence[Finding],
    *,
    mapping_text: str | None = None,
    style: Style = PLAIN,
) -> str:
    """The human output of ``gpudiag list``, fitted to ``style.width``."""
    width = style.width
    if style.verbosity == 0:
        quiet = wrap(quiet_line(snapshot, resolution, findings), width)
        errors = render_findings(findings, style)
        return "\n".join(quiet + ([errors] if errors else [])) + "\n"
    out: list[str] = []
    nvml = snapshot.sources.get("nvml")
    if not inventory.rows:
        if nvml is not None and nvml.status != "ok":
            out += wrap(safe(f"No GPUs listed: {nvml.reason}."), width)
            host = next((f for f in findings if f.code.startswith("HOST-")), None)
            if host is not None:
                # The finding below says why (container, no NVIDIA GPU, no driver) and
                # what to do; the generic advice would contradict it.
                out += wrap(f"Why, and what to do: {host.code} below.", width)
            else:
                out += wrap(
                    "What to do: install the NVIDIA driver on a GPU node, or inspect a "
                    "capture of one with `gpudiag list --snapshot FILE`.",
                    width,
                )
        else:
            out.append("No GPUs found.")
    else:
        cols = _Columns(inventory, snapshot)
        table: list[list[str]] = []
        for row in inventory.rows:
            table.extend(_gpu_rows(row, resolution, cols))
        # The Name column gives way first when the terminal is narrow: down to 8
        # characters, which a node with 5-digit memory use and a "Seen by" column
        # needs at 80 columns (a100x8_slurm_holders.json).
        fitted = fit_column(cols.headers(), table, width, 2, minimum=8)
        out.append(format_table(cols.headers(), fitted))
    out.append("")
    out += wrap(_versions_text(snapshot), width)
    out += wrap(_status_text(snapshot, style.verbosity >= 2), width)
    asked = not_asked_line(snapshot, with_version=False)  # the line above names it
    if asked:
        out += wrap(asked, width)
    cvd = resolution.spec
    out += wrap(
        f"CUDA_VISIBLE_DEVICES={'<unset>' if cvd is None else esc(repr(cvd))} · "
        f"CUDA_DEVICE_ORDER={esc(resolution.order)} · "
        f"{len(resolution.devices)} CUDA device(s) visible",
        width,
    )
    if style.verbosity >= 2 and inventory.rows:
        out.append("")
        out.append("UUIDs:")
        out += [
            line for ident in _identities(inventory) for line in wrap(ident, width, indent="  ")
        ]
    if style.verbosity >= 2:
        procs = _processes(snapshot)
        if procs:
            out.append("")
            out.append("Processes:")
            out += [line for p in procs for line in wrap(p, width, indent="  ")]
    if mapping_text:
        out.append("")
        out.append(mapping_text)
    if findings:
        out.append("")
        out.append(render_findings(findings, style))
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
