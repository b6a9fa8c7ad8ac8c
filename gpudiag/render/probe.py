"""Human table and JSON for ``gpudiag probe`` (schema: docs/probes.md)."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from gpudiag.probes.results import Figure, ProbeReport, ProbeResult

_STATUS_TEXT = {"pass": "PASS", "fail": "FAIL", "timeout": "HUNG", "not_run": "NOT RUN"}


def render_probe_json(report: ProbeReport) -> dict[str, Any]:
    """The ``--json`` document."""
    return report.to_json()


def render_probe_table(report: ProbeReport) -> str:
    """A summary table, then each probe's checks and rows, then one verdict line."""
    parts: list[str] = []
    summary = [
        [p.probe, _STATUS_TEXT[p.status], _seconds(p.wall_s), p.message] for p in report.probes
    ]
    parts.append(
        tabulate(summary, headers=["PROBE", "STATUS", "TIME", "RESULT"], tablefmt="simple")
    )
    for result in report.probes:
        section = _section(result)
        if section:
            parts.append(section)
    parts.append(_verdict(report))
    return "\n\n".join(parts)


def _section(result: ProbeResult) -> str:
    lines: list[str] = []
    rows: list[list[object]]
    if result.checks:
        rows = [
            ["ok" if c.passed else "FAIL", c.name, _num(c.value), _num(c.tolerance), c.detail]
            for c in result.checks
        ]
        lines.append(
            tabulate(rows, headers=["", "CHECK", "VALUE", "TOL", "RULE"], tablefmt="simple")
        )
    if result.figures:
        figures = ", ".join(f"{k}={_fig(v)}" for k, v in result.figures.items())
        lines.append(f"figures: {figures}")
    if result.ranks:
        rows = [
            [
                r.rank,
                _opt(r.node_rank),
                _opt(r.local_rank),
                _opt(r.host),
                _opt(r.pid),
                _opt(r.device),
                r.gpu_uuid or "none",
                r.pci_bus_id or "none",
                "yes" if r.arrived else "NO",
            ]
            for r in result.ranks
        ]
        headers = [
            "RANK",
            "NODE",
            "LOCAL",
            "HOST",
            "PID",
            "DEVICE",
            "GPU UUID",
            "BUS ID",
            "ARRIVED",
        ]
        lines.append(tabulate(rows, headers=headers, tablefmt="simple"))
    if result.bandwidth:
        rows = [
            [
                _size(b.size_bytes),
                f"{b.time_s * 1e3:.3f}",
                f"{b.algbw_gbps:.3f}",
                f"{b.busbw_gbps:.3f}",
            ]
            for b in result.bandwidth
        ]
        lines.append(
            tabulate(
                rows,
                headers=["ALL-REDUCE", "TIME ms", "ALGBW GB/s", "BUSBW GB/s"],
                tablefmt="simple",
                disable_numparse=True,
            )
        )
    if result.memory:
        rows = [
            [
                m.device,
                "n/a (CPU)" if m.peak_allocated_mib is None else f"{m.peak_allocated_mib:.1f}",
            ]
            for m in result.memory
        ]
        lines.append(
            tabulate(rows, headers=["DEVICE", "PEAK MiB"], tablefmt="simple", disable_numparse=True)
        )
    if result.hang is not None:
        hang = result.hang
        lines.append(
            f"hang: killed after {hang.limit_s:g} s; arrived ranks {list(hang.arrived_ranks)}; "
            f"missing ranks {list(hang.missing_ranks)}"
        )
        for rank, stage in sorted(hang.stages.items()):
            lines.append(f"  rank {rank} was at: {stage}")
    for note in result.notes:
        if "\n" not in note:  # tracebacks stay in --json
            lines.append(f"note: {note}")
    if not lines:
        return ""
    return f"[{result.probe}]\n" + "\n".join(lines)


def _verdict(report: ProbeReport) -> str:
    counts = {s: sum(1 for p in report.probes if p.status == s) for s in _STATUS_TEXT}
    startup = _seconds(report.startup_s)
    where = f"{report.launcher} launch, {report.world_size} rank(s), device {report.device}"
    body = ", ".join(f"{n} {_STATUS_TEXT[s].lower()}" for s, n in counts.items() if n)
    return (
        f"{report.overall.upper()}: {body or 'nothing run'} ({where}); "
        f"{_seconds(report.wall_s)} total, child start-up {startup}"
    )


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _fig(value: Figure) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _opt(value: object) -> str:
    return "-" if value is None else str(value)


def _size(size_bytes: int) -> str:
    if size_bytes >= 1024 * 1024:
        return f"{size_bytes / (1024 * 1024):g} MiB"
    return f"{size_bytes / 1024:g} KiB"
