"""Human table and JSON for ``gpudiag probe`` (schema: docs/probes.md)."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from gpudiag.model import short_uuid
from gpudiag.probes.pairs import PairRow
from gpudiag.probes.results import Figure, ProbeReport, ProbeResult
from gpudiag.render.table import fit_column, format_table
from gpudiag.render.text import PLAIN, Style, esc, safe, wrap

_STATUS_TEXT = {"pass": "PASS", "fail": "FAIL", "timeout": "HUNG", "not_run": "NOT RUN"}


def render_probe_json(report: ProbeReport) -> dict[str, Any]:
    """The ``--json`` document."""
    return report.to_json()


_STATUS_COLOUR = {"pass": "green", "fail": "red", "timeout": "red", "not_run": "yellow"}


def render_probe_table(report: ProbeReport, style: Style = PLAIN) -> str:
    """One row per probe, then one verdict line; fitted to ``style.width``.

    The details (checks, figures, ranks, bandwidth, memory, notes) follow under
    ``-v``, and for a probe that did not pass also by default; under an outside
    launcher the rank table is shown by default too. ``-q`` prints the verdict line
    and the failed probes' rows only.
    """
    parts: list[str] = []
    shown = [p for p in report.probes if style.verbosity or p.status != "pass"]
    if shown:
        parts.append("\n".join(_summary(shown, style)))
    if style.verbosity:
        for result in report.probes:
            if style.verbosity >= 2 or result.status != "pass":
                section = _section(result, report.world_size, style.width)
                if section:
                    parts.append(section)
            elif result.ranks and report.launcher != "self" and report.world_size > 1:
                # Under an outside launcher (torchrun, srun, mpiexec…) which rank ran where
                # is the answer asked for: the rank table is shown by default.
                parts.append(_ranks_table(result))
    parts.append(_verdict(report, style))
    return "\n\n".join(parts)


def _summary(results: list[ProbeResult], style: Style) -> list[str]:
    """``PROBE   STATUS  TIME     RESULT`` rows; the result wraps under its column."""
    head = f"{'PROBE':<6}  {'STATUS':<7}  {'TIME':>7}  "
    lines = [head + "RESULT"]
    for p in results:
        status = _STATUS_TEXT[p.status]
        prefix = f"{p.probe:<6}  {status:<7}  {_seconds(p.wall_s):>7}  "
        body = wrap(safe(p.message), style.width - len(prefix), hang="")
        painted = prefix.replace(status, style.paint(status, _STATUS_COLOUR[p.status], True), 1)
        lines.append(painted + body[0])
        lines.extend(" " * len(prefix) + more for more in body[1:])
    return lines


def _ranks_table(result: ProbeResult, width: int = 100) -> str:
    rows = [
        [
            str(r.rank),
            _opt(r.node_rank),
            _opt(r.local_rank),
            esc(_opt(r.host), 24),
            _opt(r.pid),
            _opt(r.device),
            esc(short_uuid(r.gpu_uuid)) if r.gpu_uuid else "none",
            esc(r.pci_bus_id or "none", 20),
            "yes" if r.arrived else "NO",
        ]
        for r in result.ranks
    ]
    headers = ["RANK", "NODE", "LOCAL", "HOST", "PID", "DEVICE", "GPU UUID", "BUS ID", "ARRIVED"]
    # The host name gives way on a narrow terminal (issue 20).
    return format_table(headers, fit_column(headers, rows, width, 3, minimum=8))


def _section(result: ProbeResult, world_size: int = 0, width: int = 100) -> str:
    lines: list[str] = []
    rows: list[list[object]]
    if result.checks:
        heads = ["", "CHECK", "VALUE", "TOL", "RULE"]
        cells = [
            ["ok" if c.passed else "FAIL", c.name, _num(c.value), _num(c.tolerance), safe(c.detail)]
            for c in result.checks
        ]
        # The rule gives way on a narrow terminal (issue 20); --json has it whole.
        lines.append(format_table(heads, fit_column(heads, cells, width, 4)))
    if result.figures:
        figures = ", ".join(f"{k}={_fig(v)}" for k, v in result.figures.items())
        lines += wrap(f"figures: {figures}", width)
    if result.ranks:
        lines.append(_ranks_table(result, width))
    # One rank moves no data between ranks: its all-reduce "bandwidth" is a
    # memory copy (an H100 run printed busbw 0 GB/s and algbw 2088 GB/s).
    if result.bandwidth and max(world_size, len(result.ranks)) > 1:
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
    if result.pairs:
        lines.extend(_pairs_lines(result.pairs, width))
    if result.hang is not None:
        hang = result.hang
        lines += wrap(
            f"hang: killed after {hang.limit_s:g} s; arrived ranks {list(hang.arrived_ranks)}; "
            f"missing ranks {list(hang.missing_ranks)}",
            width,
        )
        for rank, stage in sorted(hang.stages.items()):
            lines += wrap(f"rank {rank} was at: {safe(stage)}", width, indent="  ")
    for note in result.notes:
        if "\n" not in note and _note_applies(note, result.device):  # tracebacks stay in --json
            lines += wrap(f"note: {safe(note)}", width)
    if not lines:
        return ""
    return f"[{result.probe}]\n" + "\n".join(lines)


def _pairs_lines(pairs: tuple[PairRow, ...], width: int) -> list[str]:
    """The p2p probe's pairs: one row each (at most ~90 columns for ``cuda:10-cuda:11``),
    then, for each pair that did not pass, its message wrapped to ``width``."""
    rows = [
        [
            esc(f"{p.device_a}-{p.device_b}", 20),
            p.link or "?",
            _rate(p.expected_gbps),
            _rate(p.copy_ab_gbps),
            _rate(p.copy_ba_gbps),
            "yes" if p.copy_ab_exact and p.copy_ba_exact else "NO",
            _allreduce(p),
            _STATUS_TEXT[p.status],
        ]
        for p in pairs
    ]
    headers = ["PAIR", "LINK", "EXPECT", "A>B", "B>A", "EXACT", "ALL-REDUCE", "STATUS"]
    lines = [
        "copies in GB/s per direction; EXPECT: the link's rate from the topology facts",
        tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True),
    ]
    for p in pairs:
        if p.status != "pass":
            lines.extend(wrap(safe(f"{p.device_a}-{p.device_b}: {p.message}"), width))
    return lines


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _allreduce(pair: PairRow) -> str:
    """``pass``; or ``hang, P2P off: pass`` when the retry with NCCL_P2P_DISABLE=1 ran."""
    if pair.allreduce_retry_p2p_disabled is None:
        return pair.allreduce.replace("_", " ")
    return f"{pair.allreduce}, P2P off: {pair.allreduce_retry_p2p_disabled.replace('_', ' ')}"


def _note_applies(note: str, device: str) -> bool:
    """A note about CPUs is not shown for a GPU run."""
    return device == "cpu" or "on a CPU" not in note


def _verdict(report: ProbeReport, style: Style = PLAIN) -> str:
    counts = {s: sum(1 for p in report.probes if p.status == s) for s in _STATUS_TEXT}
    startup = _seconds(report.startup_s)
    where = f"{report.launcher} launch, {report.world_size} rank(s), device {report.device}"
    body = ", ".join(f"{n} {_STATUS_TEXT[s].lower()}" for s, n in counts.items() if n)
    colour = "green" if report.overall == "pass" else "red"
    line = (
        f"{report.overall.upper()}: {body or 'nothing run'} ({where}); "
        f"{_seconds(report.wall_s)} total, child start-up {startup}"
    )
    lines = wrap(line, style.width)
    lines[0] = lines[0].replace(
        report.overall.upper(), style.paint(report.overall.upper(), colour, True), 1
    )
    return "\n".join(lines)


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
