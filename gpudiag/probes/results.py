"""Frozen results of the training probes, and their JSON form (``docs/probes.md``).

This module never imports torch: the worker (child process) builds these
objects and writes them as JSON; the parent reads them back with ``from_json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from gpudiag.launch.table import Launcher as Launcher
from gpudiag.probes.pairs import PairRow

PROBE_SCHEMA = "gpudiag-probe/1"

ProbeName = Literal["single", "dp", "ddp", "amp", "p2p"]
#: What ``gpudiag probe all`` runs everywhere, in canonical order.
PROBE_NAMES: tuple[ProbeName, ...] = ("single", "dp", "ddp", "amp")
#: Every probe, in canonical order: ``all`` adds ``p2p`` only where two or more GPUs
#: are selected (docs/probes.md), since it tests pairs of GPUs.
ALL_PROBE_NAMES: tuple[ProbeName, ...] = (*PROBE_NAMES, "p2p")

#: ``pass``: every check held; ``fail``: a check failed or the probe raised;
#: ``timeout``: killed at the hard wall-clock limit (a hang); ``not_run``: an
#: earlier hang or crash killed the processes before this probe started.
Status = Literal["pass", "fail", "timeout", "not_run"]
STATUSES: tuple[Status, ...] = ("pass", "fail", "timeout", "not_run")

Figure = float | int | str | bool | None


@dataclass(frozen=True)
class Check:
    """One verification: a measured figure against a stated tolerance.

    Attributes:
        name: stable identifier, e.g. ``matches_fp64_reference``.
        passed: whether the figure is within the tolerance.
        value: the measured figure (None when it could not be measured).
        tolerance: the bound the figure was held to (None for yes/no checks).
        detail: the rule in words, e.g. ``max|p - p_ref| <= 1e-4 + 1e-3*|p_ref|``.
    """

    name: str
    passed: bool
    value: float | None = None
    tolerance: float | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        """The check as a JSON object."""
        return {
            "name": self.name,
            "passed": self.passed,
            "value": self.value,
            "tolerance": self.tolerance,
            "detail": self.detail,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Check:
        """Inverse of :meth:`to_json`."""
        return cls(
            name=str(data["name"]),
            passed=bool(data["passed"]),
            value=_opt_float(data.get("value")),
            tolerance=_opt_float(data.get("tolerance")),
            detail=str(data.get("detail", "")),
        )


@dataclass(frozen=True)
class RankRow:
    """One rank of a distributed probe: where it ran and whether it arrived.

    ``gpu_uuid`` and ``pci_bus_id`` are the physical GPU behind the rank's
    ``cuda_ordinal`` as read in the child (None on CPU).
    """

    rank: int
    local_rank: int | None = None
    node_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    device: str | None = None
    cuda_ordinal: int | None = None
    gpu_uuid: str | None = None
    pci_bus_id: str | None = None
    gpu_name: str | None = None
    arrived: bool = False
    last_stage: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON object."""
        return {
            "rank": self.rank,
            "local_rank": self.local_rank,
            "node_rank": self.node_rank,
            "host": self.host,
            "pid": self.pid,
            "device": self.device,
            "cuda_ordinal": self.cuda_ordinal,
            "gpu_uuid": self.gpu_uuid,
            "pci_bus_id": self.pci_bus_id,
            "gpu_name": self.gpu_name,
            "arrived": self.arrived,
            "last_stage": self.last_stage,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RankRow:
        """Inverse of :meth:`to_json`."""
        return cls(
            rank=int(data["rank"]),
            local_rank=_opt_int(data.get("local_rank")),
            node_rank=_opt_int(data.get("node_rank")),
            host=_opt_str(data.get("host")),
            pid=_opt_int(data.get("pid")),
            device=_opt_str(data.get("device")),
            cuda_ordinal=_opt_int(data.get("cuda_ordinal")),
            gpu_uuid=_opt_str(data.get("gpu_uuid")),
            pci_bus_id=_opt_str(data.get("pci_bus_id")),
            gpu_name=_opt_str(data.get("gpu_name")),
            arrived=bool(data.get("arrived", False)),
            last_stage=_opt_str(data.get("last_stage")),
        )


@dataclass(frozen=True)
class BandwidthRow:
    """One all-reduce size: nccl-tests' algbw and busbw (``PERFORMANCE.md``).

    ``algbw_gbps = size_bytes / time_s / 1e9``; ``busbw_gbps = algbw_gbps *
    2(n-1)/n`` for n ranks.
    """

    size_bytes: int
    time_s: float
    algbw_gbps: float
    busbw_gbps: float

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON object."""
        return {
            "size_bytes": self.size_bytes,
            "time_s": self.time_s,
            "algbw_gbps": self.algbw_gbps,
            "busbw_gbps": self.busbw_gbps,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BandwidthRow:
        """Inverse of :meth:`to_json`."""
        return cls(
            size_bytes=int(data["size_bytes"]),
            time_s=float(data["time_s"]),
            algbw_gbps=float(data["algbw_gbps"]),
            busbw_gbps=float(data["busbw_gbps"]),
        )


@dataclass(frozen=True)
class MemoryRow:
    """Peak memory one device used during the DataParallel probe.

    ``peak_allocated_mib`` is None where torch cannot measure it (CPU).
    """

    device: str
    cuda_ordinal: int | None = None
    peak_allocated_mib: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON object."""
        return {
            "device": self.device,
            "cuda_ordinal": self.cuda_ordinal,
            "peak_allocated_mib": self.peak_allocated_mib,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryRow:
        """Inverse of :meth:`to_json`."""
        return cls(
            device=str(data["device"]),
            cuda_ordinal=_opt_int(data.get("cuda_ordinal")),
            peak_allocated_mib=_opt_float(data.get("peak_allocated_mib")),
        )


@dataclass(frozen=True)
class HangInfo:
    """What the parent saw when it killed a probe at the hard limit.

    Attributes:
        limit_s: the wall-clock limit that was exceeded.
        arrived_ranks: ranks known to have reached the rendezvous.
        missing_ranks: ranks that never arrived (or are not known to have).
        stages: the last stage each local rank reported, by rank.
    """

    limit_s: float
    arrived_ranks: tuple[int, ...] = ()
    missing_ranks: tuple[int, ...] = ()
    stages: Mapping[int, str] = field(default_factory=dict, hash=False)

    def to_json(self) -> dict[str, Any]:
        """The hang as a JSON object (``stages`` keys are rank numbers as strings)."""
        return {
            "limit_s": self.limit_s,
            "arrived_ranks": list(self.arrived_ranks),
            "missing_ranks": list(self.missing_ranks),
            "stages": {str(rank): stage for rank, stage in sorted(self.stages.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HangInfo:
        """Inverse of :meth:`to_json`."""
        stages = cast(Mapping[str, Any], data.get("stages") or {})
        return cls(
            limit_s=float(data["limit_s"]),
            arrived_ranks=tuple(int(r) for r in data.get("arrived_ranks", ())),
            missing_ranks=tuple(int(r) for r in data.get("missing_ranks", ())),
            stages={int(k): str(v) for k, v in stages.items()},
        )


@dataclass(frozen=True)
class ProbeResult:
    """The outcome of one probe.

    Attributes:
        probe: ``single``, ``dp``, ``ddp`` or ``amp``.
        status: ``pass``, ``fail``, ``timeout`` or ``not_run``.
        device: ``cpu`` or ``cuda`` (the device type the probe ran on).
        message: one line: why it failed, or what was verified.
        checks: the verifications, each with its figure and tolerance.
        figures: other measured numbers (losses, speed-up...), by name.
        wall_s: the probe's own wall time in the worker (None if killed).
        ranks: per-rank rows (ddp).
        bandwidth: all-reduce bandwidth rows (ddp).
        memory: per-device peak memory rows (dp).
        pairs: per-pair rows (p2p).
        notes: honest remarks, e.g. which torch code path ran.
        hang: set when ``status`` is ``timeout``.
    """

    probe: str
    status: Status
    device: str
    message: str
    checks: tuple[Check, ...] = ()
    figures: Mapping[str, Figure] = field(default_factory=dict, hash=False)
    wall_s: float | None = None
    ranks: tuple[RankRow, ...] = ()
    bandwidth: tuple[BandwidthRow, ...] = ()
    memory: tuple[MemoryRow, ...] = ()
    notes: tuple[str, ...] = ()
    hang: HangInfo | None = None
    pairs: tuple[PairRow, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The result as a JSON object (``docs/probes.md``)."""
        return {
            "probe": self.probe,
            "status": self.status,
            "device": self.device,
            "message": self.message,
            "wall_s": self.wall_s,
            "checks": [c.to_json() for c in self.checks],
            "figures": dict(self.figures),
            "ranks": [r.to_json() for r in self.ranks],
            "bandwidth": [b.to_json() for b in self.bandwidth],
            "memory": [m.to_json() for m in self.memory],
            "pairs": [p.to_json() for p in self.pairs],
            "notes": list(self.notes),
            "hang": self.hang.to_json() if self.hang is not None else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProbeResult:
        """Inverse of :meth:`to_json`."""
        status = next((s for s in STATUSES if s == data["status"]), None)
        if status is None:
            raise ValueError(f"unknown probe status {data['status']!r}")
        hang = data.get("hang")
        return cls(
            probe=str(data["probe"]),
            status=status,
            device=str(data["device"]),
            message=str(data["message"]),
            checks=tuple(Check.from_json(c) for c in data.get("checks", ())),
            figures=dict(cast(Mapping[str, Figure], data.get("figures") or {})),
            wall_s=_opt_float(data.get("wall_s")),
            ranks=tuple(RankRow.from_json(r) for r in data.get("ranks", ())),
            bandwidth=tuple(BandwidthRow.from_json(b) for b in data.get("bandwidth", ())),
            memory=tuple(MemoryRow.from_json(m) for m in data.get("memory", ())),
            pairs=tuple(PairRow.from_json(p) for p in data.get("pairs", ())),
            notes=tuple(str(n) for n in data.get("notes", ())),
            hang=HangInfo.from_json(hang) if hang is not None else None,
        )


@dataclass(frozen=True)
class ProbeReport:
    """Everything one ``gpudiag probe`` invocation found.

    Attributes:
        device: ``cpu`` or ``cuda``.
        launcher: ``self`` (gpudiag started the ranks), or the external launcher
            (``torchrun``, ``openmpi``, ``slurm``...; ``gpudiag.launch.table``).
        rank: this process's global rank (0 when self-launched).
        world_size: ranks in the ddp probe (1 when it did not run).
        timeout_s: the per-probe hard wall-clock limit.
        wall_s: wall time of the whole invocation, measured by the parent.
        startup_s: the slowest child's start-up (Python + ``import torch``).
        probes: one result per requested probe, in canonical order.
    """

    device: str
    launcher: Launcher
    rank: int
    world_size: int
    timeout_s: float
    wall_s: float
    startup_s: float | None
    probes: tuple[ProbeResult, ...]
    schema: str = PROBE_SCHEMA

    @property
    def overall(self) -> Status:
        """``timeout`` beats ``fail`` beats ``pass`` (``not_run`` counts as fail)."""
        statuses = {p.status for p in self.probes}
        if "timeout" in statuses:
            return "timeout"
        if "fail" in statuses or "not_run" in statuses:
            return "fail"
        return "pass"

    def to_json(self) -> dict[str, Any]:
        """The report as the ``gpudiag probe --json`` document."""
        return {
            "schema": self.schema,
            "overall": self.overall,
            "device": self.device,
            "launcher": self.launcher,
            "rank": self.rank,
            "world_size": self.world_size,
            "timeout_s": self.timeout_s,
            "wall_s": self.wall_s,
            "startup_s": self.startup_s,
            "probes": [p.to_json() for p in self.probes],
        }


def worst_status(statuses: Sequence[Status]) -> Status:
    """The status that wins when ranks disagree: timeout > fail > not_run > pass."""
    order: tuple[Status, ...] = ("timeout", "fail", "not_run")
    for status in order:
        if status in statuses:
            return status
    return "pass"


def _opt_float(value: object) -> float | None:
    return None if value is None else float(cast(float, value))


def _opt_int(value: object) -> int | None:
    return None if value is None else int(cast(int, value))


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)
