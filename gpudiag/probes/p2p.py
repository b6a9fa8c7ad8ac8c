"""The ``p2p`` probe: copy between every pair of selected GPUs, all-reduce per pair.

Issue 18 (item 4): P2P that does not work shows as a cross-GPU copy that silently
returns zeros, or NCCL hanging at the first collective, fixed by
``NCCL_P2P_DISABLE=1``. For each pair this worker copies a tensor a -> b and back
with torch's peer copy, compares every bit, times it against the link's rate
(``gpudiag.probes.pairs``), and runs a 2-rank all-reduce in two child processes
(``gpudiag.probes.p2p_allreduce``) that it kills at its own limit; a hang is retried once
with ``NCCL_P2P_DISABLE=1`` to name the cause. The judging is pure
(``pairs.py``); the measuring takes device strings, so the suite runs it on CPU
tensors with gloo.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gpudiag.probes.common import WorkerContext
from gpudiag.probes.p2p_allreduce import STARTUP_LIMIT_S, allreduce_attempt
from gpudiag.probes.pairs import (
    Attempt,
    Link,
    PairRow,
    allreduce_verdict,
    device_pairs,
    gpu_by_uuid,
    link_between,
    needs_retry,
    pair_status,
    speed_verdict,
)
from gpudiag.probes.results import ProbeResult, worst_status

#: Copy sizes and timed repeats: 64 MiB on a GPU (past the copy engines' start-up
#: cost, so the rate is the link's); 1 MiB on the CPU (tests: no verdict on speed).
CUDA_COPY_BYTES = 64 << 20
CPU_COPY_BYTES = 1 << 20
REPEATS = 5
#: An all-reduce of 4 MiB takes milliseconds; past this after both ranks are ready
#: it is hung (capped further by what is left of ``--timeout``).
ATTEMPT_CAP_S = 30.0
#: Below this much time left, a pair's all-reduce is not started (``not_run``).
MIN_ATTEMPT_S = 2.0
#: The share of ``--timeout`` the probe plans to use, so it reports before being killed.
BUDGET_FRACTION = 0.9


@dataclass(frozen=True)
class CopyResult:
    """One pair's copies: bit-exact both ways, and each direction's timing."""

    copy_bytes: int
    ab_exact: bool
    ba_exact: bool
    mismatched_elements: int
    ab_elapsed_s: float
    ba_elapsed_s: float

    @property
    def ab_gbps(self) -> float | None:
        return self.copy_bytes / self.ab_elapsed_s / 1e9 if self.ab_elapsed_s > 0 else None

    @property
    def ba_gbps(self) -> float | None:
        return self.copy_bytes / self.ba_elapsed_s / 1e9 if self.ba_elapsed_s > 0 else None


def copy_both_ways(
    device_a: str, device_b: str, copy_bytes: int, repeats: int = REPEATS, corrupt: bool = False
) -> CopyResult:
    """Copies random int32 data a -> b ``repeats`` times, then b -> a, and compares bits.

    int32, not float: ``torch.equal`` on integers is a bit-for-bit comparison (no
    NaN != NaN, no -0.0 == 0.0). ``corrupt`` (the ``nan`` fault) flips one bit on
    b after the copies, as a P2P defect that corrupts data would.
    """
    import torch

    a, b = torch.device(device_a), torch.device(device_b)
    gen = torch.Generator().manual_seed(18)
    elements = max(1, copy_bytes // 4)
    sent = torch.randint(-(2**31), 2**31 - 1, (elements,), dtype=torch.int32, generator=gen)
    src = sent.to(a)
    on_b = torch.empty(elements, dtype=torch.int32, device=b)
    back = torch.empty(elements, dtype=torch.int32, device=a)

    def sync() -> None:
        for dev in (a, b):
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)

    def timed(dst: torch.Tensor, source: torch.Tensor) -> float:
        dst.copy_(source)  # warm-up: peer access set-up is not the link's rate
        sync()
        began = time.perf_counter()
        for _ in range(repeats):
            dst.copy_(source)
        sync()
        return (time.perf_counter() - began) / max(1, repeats)

    ab_s = timed(on_b, src)
    if corrupt:
        on_b.view(-1)[0] ^= 1
    received = on_b.cpu()
    ab_bad = int((received != sent).sum())
    ba_s = timed(back, on_b)
    ba_bad = int((back.cpu() != received).sum())
    return CopyResult(copy_bytes, ab_bad == 0, ba_bad == 0, ab_bad + ba_bad, ab_s, ba_s)


def check_pairs(
    pairs: Sequence[tuple[str, str]],
    links: Mapping[tuple[str, str], Link | None],
    backend: str,
    deadline: float,
    copy_bytes: int,
    corrupt: bool = False,
    stage: Callable[[str], None] = lambda text: None,
    attempt_cap_s: float = ATTEMPT_CAP_S,
) -> list[PairRow]:
    """Copies and all-reduces every pair in turn, within ``deadline`` (monotonic)."""
    rows: list[PairRow] = []
    for a, b in pairs:
        link = links.get((a, b))
        stage(f"pair {a}-{b}: copy both ways")
        copies = copy_both_ways(a, b, copy_bytes, corrupt=corrupt)
        worst_gbps = min(
            (g for g in (copies.ab_gbps, copies.ba_gbps) if g is not None), default=None
        )
        speed = speed_verdict(worst_gbps, None if link is None else link.expected_gbps)
        first, elapsed, error = _attempt(a, b, backend, deadline, attempt_cap_s, {}, stage)
        retry: Attempt | None = None
        retry_error = ""
        if needs_retry(first):
            retry, _, retry_error = _attempt(
                a, b, backend, deadline, attempt_cap_s, {"NCCL_P2P_DISABLE": "1"}, stage
            )
        allreduce, cause = allreduce_verdict(first, retry, error, retry_error)
        copy_ok = copies.ab_exact and copies.ba_exact
        status = pair_status(copy_ok, speed, allreduce)
        rows.append(
            PairRow(
                device_a=a,
                device_b=b,
                cuda_ordinal_a=_ordinal(a),
                cuda_ordinal_b=_ordinal(b),
                status=status,
                message=_message(copies, speed, worst_gbps, link, cause),
                link=None if link is None else link.kind,
                expected_gbps=None if link is None else link.expected_gbps,
                link_basis=None if link is None else link.basis,
                copy_bytes=copies.copy_bytes,
                copy_ab_exact=copies.ab_exact,
                copy_ba_exact=copies.ba_exact,
                copy_mismatched_elements=copies.mismatched_elements,
                copy_ab_elapsed_s=copies.ab_elapsed_s,
                copy_ba_elapsed_s=copies.ba_elapsed_s,
                copy_ab_gbps=copies.ab_gbps,
                copy_ba_gbps=copies.ba_gbps,
                speed=speed,
                allreduce=first,
                allreduce_elapsed_s=elapsed,
                allreduce_retry_p2p_disabled=retry,
                allreduce_cause=cause,
            )
        )
    return rows


def _attempt(
    a: str,
    b: str,
    backend: str,
    deadline: float,
    cap_s: float,
    env_extra: Mapping[str, str],
    stage: Callable[[str], None],
) -> tuple[Attempt, float | None, str]:
    left = deadline - time.monotonic()
    if left < MIN_ATTEMPT_S:
        return "not_run", None, ""
    how = " with NCCL_P2P_DISABLE=1" if env_extra else ""
    stage(f"pair {a}-{b}: all-reduce ({backend}){how}")
    return allreduce_attempt(
        (a, b), backend, min(cap_s, left), min(STARTUP_LIMIT_S, left), env_extra
    )


def _ordinal(device: str) -> int | None:
    kind, _, index = device.partition(":")
    return int(index) if kind == "cuda" and index.isdigit() else None


def _message(
    copies: CopyResult, speed: str, gbps: float | None, link: Link | None, cause: str
) -> str:
    if not (copies.ab_exact and copies.ba_exact):
        copy = f"copy NOT bit-exact ({copies.mismatched_elements} elements differ)"
    else:
        copy = "copies bit-exact both ways"
    rate = "-" if gbps is None else f"{gbps:.1f} GB/s"
    if link is None or link.expected_gbps is None:
        timing = f"{rate} (no expected rate known)"
    else:
        timing = f"{rate} vs {link.expected_gbps:g} GB/s expected ({link.kind})"
        if speed == "slow":
            timing = "SLOW: " + timing
    return f"{copy}; {timing}; {cause}"


def _links(ordinals: Sequence[int]) -> tuple[dict[tuple[str, str], Link | None], str | None]:
    """Each pair's link from NVML (in this child); a note when NVML could not say."""
    import torch

    from gpudiag.backends.nvml import collect_nvml

    try:
        nvml = collect_nvml()
        if nvml.status.status != "ok":
            return {}, f"NVML not read ({nvml.status.reason}): no expected rates"
        uuids = {i: str(torch.cuda.get_device_properties(i).uuid) for i in ordinals}
    except Exception as exc:  # the facts are optional: the probe still measures
        return {}, f"NVML not read ({type(exc).__name__}: {exc}): no expected rates"
    gpus = {i: gpu_by_uuid(nvml.gpus, uuid) for i, uuid in uuids.items()}
    unknown = [f"cuda:{i}" for i, gpu in gpus.items() if gpu is None]
    note = f"not in NVML's list (no expected rate): {', '.join(unknown)}" if unknown else None
    return {
        (f"cuda:{i}", f"cuda:{j}"): link_between(gpus[i], gpus[j])
        for i, j in device_pairs(ordinals)
    }, note


def run(ctx: WorkerContext) -> ProbeResult:
    """Every pair of the selected GPUs (``--device-ids``, else every visible one)."""
    import torch

    start_s = time.perf_counter()
    deadline = time.monotonic() + BUDGET_FRACTION * ctx.timeout_s
    ordinals: list[int] = []
    if ctx.device_type == "cuda":
        count = torch.cuda.device_count()
        ordinals = list(ctx.device_ids) if ctx.device_ids is not None else list(range(count))
        absent = [i for i in ordinals if not 0 <= i < count]
        if absent:
            raise ValueError(f"--device-ids {absent} not visible: {count} GPU(s) visible")
    pairs = device_pairs(ordinals)
    if not pairs:
        where = "on the CPU" if ctx.device_type == "cpu" else f"{len(ordinals)} GPU selected"
        return ProbeResult(
            probe="p2p",
            status="pass",
            device=ctx.device_type,
            message=f"no GPU pair ({where}): nothing to copy between; select 2+ GPUs",
            figures={"pairs": 0, "gpus": len(ordinals)},
            wall_s=time.perf_counter() - start_s,
        )
    links, note = _links(ordinals)
    rows = check_pairs(
        [(f"cuda:{i}", f"cuda:{j}") for i, j in pairs],
        links,
        "nccl",
        deadline,
        CUDA_COPY_BYTES,
        corrupt=ctx.fault_for("p2p") == "nan",
        stage=lambda text: ctx.stage("p2p", text),
    )
    return summarise(rows, ctx.device_type, time.perf_counter() - start_s, note)


def summarise(
    rows: Sequence[PairRow], device: str, wall_s: float, note: str | None = None
) -> ProbeResult:
    """The probe's result: the worst pair's status, and a one-line count."""
    status = worst_status([r.status for r in rows])
    bad = [r for r in rows if r.status != "pass"]
    if not bad:
        message = f"{len(rows)} pair(s): copies bit-exact both ways, all-reduce correct"
    else:
        first = bad[0]
        message = (
            f"{len(bad)} of {len(rows)} pair(s) not passed; "
            f"{first.device_a}-{first.device_b}: {first.message}"
        )
    return ProbeResult(
        probe="p2p",
        status=status,
        device=device,
        message=message,
        figures={
            "pairs": len(rows),
            "gpus": len({d for r in rows for d in (r.device_a, r.device_b)}),
        },
        wall_s=wall_s,
        pairs=tuple(rows),
        notes=() if note is None else (note,),
    )
