"""The ``ddp`` probe: DistributedDataParallel, one process per rank.

Each rank trains on its ``DistributedSampler`` shard; DDP averages gradients
with an all-reduce. Afterwards the parameters must be bit-identical on every
rank and must match one float64 process trained on the combined batches.
Then all-reduce bandwidth is measured the way nccl-tests reports it.
"""

from __future__ import annotations

import copy
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from gpudiag.probes.common import (
    LEARNING_RATE,
    NAN_FAULT_STEP,
    WorkerContext,
    all_passed,
    close_check,
    failed_names,
    finite_losses_check,
    flat_params,
    hang_forever,
    make_data,
    make_model,
    num,
    poison,
)
from gpudiag.probes.rendezvous import (
    COLLECTIVE_GRACE_S,
    finish_store,
    make_store,
    own_row,
    refused_notes,
    rendezvous,
)
from gpudiag.probes.results import BandwidthRow, Check, ProbeResult, RankRow

if TYPE_CHECKING:
    import torch
    import torch.distributed

N_SAMPLES = 64
BATCH_PER_RANK = 8
EPOCHS = 2
SAMPLER_SEED = 7
#: float32 DDP against one float64 process on the combined batch; the
#: all-reduce's summation order is the only extra rounding.
ATOL = 1e-4
RTOL = 1e-3
CPU_ALLREDUCE_BYTES = (64 * 1024, 1024 * 1024, 4 * 1024 * 1024)
CUDA_ALLREDUCE_BYTES = (1024 * 1024, 16 * 1024 * 1024, 64 * 1024 * 1024)


def run(ctx: WorkerContext) -> ProbeResult:
    """Rendezvous, train, verify, measure all-reduce; see the module docstring."""
    import torch.distributed as dist

    start_s = time.perf_counter()
    fault = ctx.fault_for("ddp")
    faulty_rank = ctx.fault is not None and fault is not None and ctx.rank == ctx.world_size - 1
    device = ctx.torch_device()
    row, row_error = own_row(ctx)

    ctx.stage("ddp", "connect store")
    store = make_store(ctx)
    rows, refused = rendezvous(ctx, store, row, row_error)
    extra_notes = refused_notes(refused)
    problem = _rank_problem(rows)
    if problem is not None:
        return _result(ctx, "fail", problem, (), {}, rows, (), start_s, extra_notes)

    backend = "nccl" if ctx.device_type == "cuda" else "gloo"
    ctx.stage("ddp", f"init_process_group({backend})")
    dist.init_process_group(
        backend,
        store=dist.PrefixStore("pg/", store),
        rank=ctx.rank,
        world_size=ctx.world_size,
        timeout=timedelta(seconds=ctx.timeout_s + COLLECTIVE_GRACE_S),
    )
    try:
        if faulty_rank and fault == "hang":
            hang_forever(ctx, "ddp")
        losses, model = _train(
            ctx, device, faulty_rank and fault == "skip-sync", faulty_rank and fault == "nan"
        )
        ctx.stage("ddp", "compare ranks")
        identical, spread = _compare_across_ranks(model, device)
        reference = _reference_model(ctx.world_size)
        checks: list[Check] = [
            finite_losses_check(losses),
            Check(
                "bit_identical_across_ranks",
                identical,
                spread,
                0.0,
                "max|p_rank - p_rank0| over all ranks and elements; must be exactly 0",
            ),
            close_check(
                "matches_combined_batch_reference",
                flat_params(model),
                flat_params(reference),
                ATOL,
                RTOL,
            ),
        ]
        ctx.stage("ddp", "all-reduce bandwidth")
        bandwidth, allreduce_ok = _allreduce_bandwidth(ctx, device)
        checks.append(
            Check(
                "allreduce_correct",
                allreduce_ok,
                None,
                None,
                "sum over ranks of (rank+1) equals n(n+1)/2 in every element",
            )
        )
        passed = all_passed(checks)
        if passed:
            largest = bandwidth[-1]
            message = (
                f"{ctx.world_size} ranks ({backend}): parameters bit-identical across ranks "
                "and match the combined-batch run"
            )
            if ctx.world_size > 1:  # one rank moves no data: no bandwidth to show
                message += (
                    f"; all-reduce {largest.size_bytes // 1024} KiB busbw "
                    f"{largest.busbw_gbps:.3g} GB/s"
                )
        else:
            message = f"failed: {failed_names(checks)}"
        figures = {
            "backend": backend,
            "world_size": ctx.world_size,
            "epochs": EPOCHS,
            "batch_per_rank": BATCH_PER_RANK,
            "steps": len(losses),
            "loss_first": num(losses[0]) if losses else None,
            "loss_last": num(losses[-1]) if losses else None,
        }
        ctx.stage("ddp", "finish")
        finish_store(ctx, store)
        done_rows = tuple(RankRow(**{**r.to_json(), "last_stage": "done"}) for r in rows)
        return _result(
            ctx,
            "pass" if passed else "fail",
            message,
            checks,
            figures,
            done_rows,
            tuple(bandwidth),
            start_s,
            extra_notes,
        )
    finally:
        dist.destroy_process_group()


def _result(
    ctx: WorkerContext,
    status: str,
    message: str,
    checks: Any,
    figures: Any,
    rows: tuple[RankRow, ...],
    bandwidth: tuple[BandwidthRow, ...],
    start_s: float,
    extra_notes: tuple[str, ...] = (),
) -> ProbeResult:
    notes = (
        (
            "each rank's own ddp verdict is computed from all-gathered parameters, so "
            "every rank reaches the same one"
        ),
        *extra_notes,
    )
    return ProbeResult(
        probe="ddp",
        status="pass" if status == "pass" else "fail",
        device=ctx.device_type,
        message=message,
        checks=tuple(checks),
        figures=dict(figures),
        wall_s=time.perf_counter() - start_s,
        ranks=rows,
        bandwidth=bandwidth,
        notes=notes,
    )


def _rank_problem(rows: tuple[RankRow, ...]) -> str | None:
    """Two ranks on one physical GPU: NCCL refuses it ("Duplicate GPU detected",
    nccl src/init.cc), and on any backend they would share memory and compute."""
    by_gpu: dict[str, list[int]] = {}
    for row in rows:
        if row.gpu_uuid is not None:
            by_gpu.setdefault(row.gpu_uuid, []).append(row.rank)
    for uuid, ranks in sorted(by_gpu.items()):
        if len(ranks) > 1:
            return (
                f"ranks {ranks} are on the same physical GPU {uuid}: give each rank its "
                "own GPU (LOCAL_RANK -> cuda:LOCAL_RANK, one rank per visible device)"
            )
    return None


def _train(
    ctx: WorkerContext, device: torch.device, skip_sync: bool, plant_nan: bool
) -> tuple[list[float], torch.nn.Module]:
    """EPOCHS epochs of DDP over a DistributedSampler shard; returns losses and the module."""
    import torch
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    model = make_model().to(device)
    ctx.stage("ddp", "DistributedDataParallel() (broadcasts rank 0's parameters)")
    ddp = DistributedDataParallel(
        model, device_ids=[ctx.local_rank] if device.type == "cuda" else None
    )
    inputs, targets = make_data(N_SAMPLES)
    dataset = TensorDataset(inputs, targets)
    sampler = DistributedSampler(
        dataset, num_replicas=ctx.world_size, rank=ctx.rank, shuffle=True, seed=SAMPLER_SEED
    )
    loader = DataLoader(dataset, batch_size=BATCH_PER_RANK, sampler=sampler)
    opt = torch.optim.SGD(ddp.parameters(), lr=LEARNING_RATE)
    loss_fn = torch.nn.MSELoss()
    losses: list[float] = []
    step = 0
    for epoch in range(EPOCHS):
        # Without set_epoch every epoch reuses epoch 0's shuffle
        # (torch/utils/data/distributed.py, DistributedSampler.__iter__).
        sampler.set_epoch(epoch)
        for batch_inputs, batch_targets in loader:
            ctx.stage("ddp", f"train epoch {epoch} step {step}")
            x, y = batch_inputs.to(device), batch_targets.to(device)
            if plant_nan and step == NAN_FAULT_STEP:
                x = poison(x)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(x), y)
            loss.backward()  # DDP's reducer all-reduces (averages) gradients here
            if skip_sync:
                # The planted "skip-sync" bug: this rank throws the averaged
                # gradients away and steps on its local ones. autograd.grad does
                # not run the AccumulateGrad hooks DDP's reducer listens on, so
                # the collectives stay matched and no rank hangs.
                local = torch.autograd.grad(loss_fn(model(x), y), list(model.parameters()))
                for param, grad in zip(model.parameters(), local, strict=True):
                    assert param.grad is not None
                    param.grad.copy_(grad)
            opt.step()
            losses.append(float(loss.item()))
            step += 1
    return losses, model


def _compare_across_ranks(
    model: torch.nn.Module, device: torch.device
) -> tuple[bool, float | None]:
    """All-gathers the flattened parameters; bit-identical means ``torch.equal``."""
    import torch
    import torch.distributed as dist

    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).to(device)
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    identical = all(torch.equal(g, gathered[0]) for g in gathered)
    spread = max(float((g.double() - gathered[0].double()).abs().max()) for g in gathered)
    return identical, spread if spread == spread else None  # NaN -> None


def _reference_model(world_size: int) -> torch.nn.Module:
    """One float64 CPU process stepping on the union of every rank's batch.

    DDP averages the ranks' gradients of their batch means; DistributedSampler
    gives every rank the same number of samples per step, so that average is
    the gradient of the mean over the combined batch.
    """
    import torch
    from torch.utils.data import DistributedSampler

    reference = copy.deepcopy(make_model()).double()
    inputs, targets = make_data(N_SAMPLES)
    inputs, targets = inputs.double(), targets.double()
    opt = torch.optim.SGD(reference.parameters(), lr=LEARNING_RATE)
    loss_fn = torch.nn.MSELoss()
    samplers = [
        DistributedSampler(
            range(N_SAMPLES), num_replicas=world_size, rank=r, shuffle=True, seed=SAMPLER_SEED
        )
        for r in range(world_size)
    ]
    for epoch in range(EPOCHS):
        shards = []
        for sampler in samplers:
            sampler.set_epoch(epoch)
            shards.append(list(sampler))
        for begin in range(0, len(shards[0]), BATCH_PER_RANK):
            index = [i for shard in shards for i in shard[begin : begin + BATCH_PER_RANK]]
            opt.zero_grad(set_to_none=True)
            loss_fn(reference(inputs[index]), targets[index]).backward()
            opt.step()
    return reference


def _allreduce_bandwidth(
    ctx: WorkerContext, device: torch.device
) -> tuple[list[BandwidthRow], bool]:
    """Times all_reduce(SUM) at a few sizes; busbw per nccl-tests PERFORMANCE.md.

    ``algbw = S / t``; for all-reduce ``busbw = algbw * 2(n-1)/n``, the bytes
    each rank's link actually carries in a ring. ``t`` is the slowest rank's
    mean time per call.
    """
    import torch
    import torch.distributed as dist

    n_ranks = ctx.world_size
    sizes = CUDA_ALLREDUCE_BYTES if device.type == "cuda" else CPU_ALLREDUCE_BYTES
    iters = 10 if device.type == "cuda" else 5
    rows: list[BandwidthRow] = []
    correct = True
    expected = n_ranks * (n_ranks + 1) / 2
    for size_bytes in sizes:
        tensor = torch.full((size_bytes // 4,), float(ctx.rank + 1), device=device)
        dist.all_reduce(tensor)  # warm-up, and the correctness check
        correct = correct and bool((tensor == expected).all())
        dist.barrier()
        _sync(device)
        begin = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(tensor)
        _sync(device)
        elapsed = torch.tensor([(time.perf_counter() - begin) / iters], device=device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        time_s = float(elapsed.item())
        algbw_gbps = size_bytes / time_s / 1e9
        busbw_gbps = algbw_gbps * 2 * (n_ranks - 1) / n_ranks
        rows.append(BandwidthRow(size_bytes, time_s, algbw_gbps, busbw_gbps))
    flag = torch.tensor([1.0 if correct else 0.0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return rows, bool(flag.item() == 1.0)


def _sync(device: torch.device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
