"""One probe's result from its local ranks: merged, or a hang or crash report."""

from __future__ import annotations

from collections.abc import Sequence

from gpudiag.probes.children import Child, Outcome
from gpudiag.probes.plan import ProbePlan
from gpudiag.probes.results import HangInfo, ProbeResult, worst_status


def result_for(
    name: str,
    children: Sequence[Child],
    outcome: Outcome,
    world_size: int,
    plan: ProbePlan,
) -> ProbeResult:
    """One probe's result, merged over the local ranks that ran it."""
    runners = [c for c in children if name in c.probes]
    got = [c.results[name] for c in runners if name in c.results]
    if runners and len(got) == len(runners):
        return _merge(got, runners)
    if outcome.kind == "timeout":
        in_flight = [
            c
            for c in runners
            if c.current == name
            or (c.current is None and c.ready_at is None and name == c.probes[0])
        ]
        if in_flight or got:
            return _hang_result(name, runners, outcome, world_size, plan)
    if outcome.kind == "crash" and outcome.child is not None and outcome.child in runners:
        child = outcome.child
        if name not in child.results and (
            child.current == name
            or (child.current is None and not child.results and name == child.probes[0])
        ):
            where = f" in stage '{child.stage}'" if child.stage else ""
            return ProbeResult(
                probe=name,
                status="fail",
                device=plan.device,
                message=(
                    f"rank {child.rank} exited with code {child.popen.returncode}{where}: "
                    f"{child.log_tail() or 'no output'}"
                ),
            )
    return ProbeResult(
        probe=name,
        status="not_run",
        device=plan.device,
        message="not run: an earlier probe hung or crashed and its processes were killed",
    )


def _merge(got: Sequence[ProbeResult], runners: Sequence[Child]) -> ProbeResult:
    """Rank 0's result, with the worst status any local rank reported."""
    base = got[0]
    status = worst_status([r.status for r in got])
    if status == base.status:
        return base
    worst_index = next(i for i, r in enumerate(got) if r.status == status)
    worst = got[worst_index]
    return ProbeResult(
        probe=base.probe,
        status=status,
        device=base.device,
        message=f"rank {runners[worst_index].rank}: {worst.message}",
        checks=worst.checks,
        figures=base.figures,
        wall_s=base.wall_s,
        ranks=base.ranks,
        bandwidth=base.bandwidth,
        memory=base.memory,
        pairs=base.pairs,
        notes=base.notes + worst.notes,
    )


def _hang_result(
    name: str, runners: Sequence[Child], outcome: Outcome, world_size: int, plan: ProbePlan
) -> ProbeResult:
    """A ``timeout`` result saying which ranks arrived and where each local rank was."""
    ranks = range(world_size) if name == "ddp" else [c.rank for c in runners]
    arrived: set[int] = set()
    for child in runners:
        arrived |= child.arrived
        if name != "ddp" and child.ready_at is not None:
            arrived.add(child.rank)
    stages = {
        c.rank: (c.stage or "starting (importing torch)")
        if c.ready_at is not None
        else "starting (importing torch)"
        for c in runners
        if c.current == name or name in c.results or c.ready_at is None
    }
    for child in runners:
        if name in child.results:
            stages[child.rank] = "finished"
    missing = tuple(r for r in ranks if r not in arrived)
    limit = outcome.limit_s
    where = "; ".join(f"rank {r}: {s}" for r, s in sorted(stages.items()))
    if name == "ddp":
        message = (
            f"hung: killed after {limit:g} s; arrived ranks {sorted(arrived)}, "
            f"missing ranks {list(missing)}; {where}"
        )
        forged = sorted(set().union(*(c.forged for c in runners)) - arrived)
        if forged:
            message += (
                f"; refused forged rendezvous arrivals for ranks {forged} (no valid token: "
                "not a rank of this job)"
            )
    else:
        message = f"hung: killed after {limit:g} s; {where}"
    return ProbeResult(
        probe=name,
        status="timeout",
        device=plan.device,
        message=message,
        hang=HangInfo(
            limit_s=limit,
            arrived_ranks=tuple(sorted(arrived)),
            missing_ranks=missing,
            stages=stages,
        ),
    )
