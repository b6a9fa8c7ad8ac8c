"""The ``ddp`` probe: DistributedDataParallel, one process per rank.

Each rank trains on its ``DistributedSampler`` shard; DDP averages gradients
with an all-reduce. Afterwards the parameters must be bit-identical on every
rank and must match one float64 process trained on the combined batches.
Then all-reduce bandwidth is measured the way nccl-tests reports it.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import os
import socket
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from gpudiag.parsing import int_or_none
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
#: Collectives may wait this long past the parent's hard limit, so that a hang
#: is always reported by the parent (exit 3), never as a gloo/NCCL error.
COLLECTIVE_GRACE_S = 30.0
_POLL_S = 0.05
#: The per-job secret every arrival is signed with (docs/probes.md). The parent
#: sets it for its children: GPUDIAG_RDZV_TOKEN when the user exported one,
#: else one derived from the launcher's run id, or a random one when
#: self-launched.
TOKEN_ENV = "GPUDIAG_RDZV_TOKEN"


def run(ctx: WorkerContext) -> ProbeResult:
    """Rendezvous, train, verify, measure all-reduce; see the module docstring."""
    import torch.distributed as dist

    start_s = time.perf_counter()
    fault = ctx.fault_for("ddp")
    faulty_rank = ctx.fault is not None and fault is not None and ctx.rank == ctx.world_size - 1
    device = ctx.torch_device()
    row, row_error = _own_row(ctx)

    ctx.stage("ddp", "connect store")
    store = _make_store(ctx)
    rows, refused = _rendezvous(ctx, store, row, row_error)
    extra_notes = _refused_notes(refused)
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
        _finish(ctx, store)
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


def _own_row(ctx: WorkerContext) -> tuple[RankRow, str | None]:
    """This rank's row; on CUDA the physical GPU behind ``cuda:<local_rank>``."""
    import torch

    host = socket.gethostname()
    if ctx.device_type != "cuda":
        return RankRow(ctx.rank, ctx.local_rank, ctx.node_rank, host, os.getpid(), "cpu"), None
    count = torch.cuda.device_count()
    if ctx.local_rank >= count:
        error = (
            f"rank {ctx.rank}: local rank {ctx.local_rank} needs cuda:{ctx.local_rank} but only "
            f"{count} GPU(s) are visible (CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
        )
        row = RankRow(ctx.rank, ctx.local_rank, ctx.node_rank, host, os.getpid(), None)
        return row, error
    torch.cuda.set_device(ctx.local_rank)
    props = torch.cuda.get_device_properties(ctx.local_rank)
    uuid = str(props.uuid)
    uuid = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    bus_id = getattr(props, "pci_bus_id", None)
    if not isinstance(bus_id, str):
        bus_id = _bus_id_from_nvml(uuid)
    row = RankRow(
        rank=ctx.rank,
        local_rank=ctx.local_rank,
        node_rank=ctx.node_rank,
        host=host,
        pid=os.getpid(),
        device=f"cuda:{ctx.local_rank}",
        cuda_ordinal=ctx.local_rank,
        gpu_uuid=uuid,
        pci_bus_id=bus_id,
        gpu_name=str(props.name),
    )
    return row, None


def _bus_id_from_nvml(uuid: str) -> str | None:
    """The PCI bus id of the GPU with this UUID, from NVML (None if unavailable)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
            bus = pynvml.nvmlDeviceGetPciInfo(handle).busId
            return bus.decode() if isinstance(bus, bytes) else str(bus)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # NVML missing or the UUID unknown: the report says None
        return None


def _make_store(ctx: WorkerContext) -> torch.distributed.Store:
    """The key-value store the ranks meet in, under a per-run prefix.

    ``file:PATH``: a FileStore in the parent's private temp dir (no port at all,
    so two probes on one host cannot collide). ``env``: MASTER_ADDR and
    MASTER_PORT, created the way torch/distributed/rendezvous.py's
    ``_create_c10d_store`` does: under torchrun with
    TORCHELASTIC_USE_AGENT_STORE=True every rank is a client of the agent's
    store, otherwise rank 0 hosts it.
    """
    import torch.distributed as dist

    timeout = timedelta(seconds=ctx.timeout_s + COLLECTIVE_GRACE_S)
    if ctx.store.startswith("file:"):
        base: dist.Store = dist.FileStore(ctx.store[len("file:") :], ctx.world_size)
    else:
        addr = os.environ["MASTER_ADDR"]
        port = int_or_none(os.environ["MASTER_PORT"], minimum=1) or 0
        agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        is_master = ctx.rank == 0 and not agent
        # torch's TCPStore server listens on every interface whatever host it
        # is given; rank 0 binds the socket itself, to MASTER_ADDR's address
        # only (loopback stays loopback), and hands it over (master_listen_fd).
        listen_fd = listen_on(addr, port) if is_master else None
        # wait_for_workers=False: rank 0 must not block inside the constructor,
        # so that it can report which ranks have arrived while it waits.
        base = dist.TCPStore(
            addr,
            port,
            None if not is_master else ctx.world_size,
            is_master,
            timeout,
            wait_for_workers=False,
            multi_tenant=listen_fd is None,
            master_listen_fd=listen_fd,
        )
    base.set_timeout(timeout)
    return dist.PrefixStore(f"gpudiag/{ctx.run_id}/", base)


def listen_on(addr: str, port: int) -> int | None:
    """A listening socket on ``addr:port`` only, as a file descriptor for TCPStore.

    None when ``addr`` does not resolve to an address of this host (torch's own
    listener, on every interface, is then used, as before).
    """
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)[
            0
        ]
    except (OSError, IndexError, UnicodeError):
        return None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(128)
    except OSError:
        sock.close()
        return None
    return sock.detach()  # the store owns it now


def rendezvous_mac(run_id: str, rank: int, body: str) -> str:
    """HMAC-SHA256 of one arrival under the job's token (``GPUDIAG_RDZV_TOKEN``).

    The token travels in the environment (readable only by the job's own user
    under /proc), never in argv or in the store, so a peer that can reach the
    store can read arrivals but cannot forge one.
    """
    token = os.environ.get(TOKEN_ENV, "").encode()
    message = f"gpudiag-rdzv/1\n{run_id}\n{rank}\n{body}".encode()
    return hmac.new(token, message, hashlib.sha256).hexdigest()


def _verified_arrival(ctx: WorkerContext, rank: int, raw: bytes) -> dict[str, Any] | None:
    """The arrival's payload when its MAC is right and it is for ``rank``; else None."""
    try:
        outer = json.loads(raw.decode("utf-8"))
        body = outer["body"]
        mac = outer["mac"]
        if not (isinstance(body, str) and isinstance(mac, str)):
            return None
        if not hmac.compare_digest(mac, rendezvous_mac(ctx.run_id, rank, body)):
            return None
        data = json.loads(body)
        if not isinstance(data, dict) or data["row"]["rank"] != rank:
            return None
        return data
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError):
        return None


def _rendezvous(
    ctx: WorkerContext, store: torch.distributed.Store, row: RankRow, row_error: str | None
) -> tuple[tuple[RankRow, ...], tuple[int, ...]]:
    """Publishes this rank's row and waits for every rank's (reporting arrivals).

    Every arrival carries an HMAC under the job's token; one without a valid
    MAC (a peer that is not a rank of this job) is refused, not counted as
    arrived, and reported. A real rank's later arrival overwrites it.

    Returns:
        (every rank's row, the ranks for which a forged arrival was refused).
    """
    payload = {"row": RankRow(**{**row.to_json(), "arrived": True}).to_json(), "error": row_error}
    body = json.dumps(payload)
    signed = json.dumps({"body": body, "mac": rendezvous_mac(ctx.run_id, ctx.rank, body)})
    store.set(f"arrived/{ctx.rank}", signed)
    keys = [f"arrived/{rank}" for rank in range(ctx.world_size)]
    verified: dict[int, dict[str, Any]] = {}
    refused: set[int] = set()
    last_raw: dict[int, bytes] = {}
    seen: tuple[list[int], list[int]] = ([], [])
    while True:
        for rank, key in enumerate(keys):
            if rank in verified or not store.check([key]):
                continue
            raw = store.get(key)
            if last_raw.get(rank) == raw:
                continue
            last_raw[rank] = raw
            data = _verified_arrival(ctx, rank, raw)
            if data is None:
                refused.add(rank)
            else:
                verified[rank] = data
        state = (sorted(verified), sorted(refused))
        if state != seen:
            seen = state
            waiting = [r for r in range(ctx.world_size) if r not in verified]
            text = (
                f"rendezvous: waiting for ranks {waiting}" if waiting else "rendezvous: all arrived"
            )
            if refused:
                text += f"; refused forged arrivals for ranks {sorted(refused)}"
            ctx.stage("ddp", text, arrived=state[0], forged=state[1])
        if len(verified) == ctx.world_size:
            break
        time.sleep(_POLL_S)
    rows: list[RankRow] = []
    errors: list[str] = []
    for rank in range(ctx.world_size):
        data = verified[rank]
        rows.append(RankRow.from_json(data["row"]))
        if data.get("error"):
            errors.append(str(data["error"]))
    if errors:
        raise _RankSetupError("; ".join(errors))
    return tuple(rows), tuple(sorted(refused))


def _refused_notes(refused: tuple[int, ...]) -> tuple[str, ...]:
    if not refused:
        return ()
    return (
        f"refused forged rendezvous arrivals for ranks {list(refused)}: a peer that is not "
        "a rank of this job (no valid token) wrote to the store",
    )


class _RankSetupError(RuntimeError):
    """A rank could not take part (e.g. no GPU for its local rank)."""


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


def _finish(ctx: WorkerContext, store: torch.distributed.Store) -> None:
    """Rank 0 hosts the TCPStore: it leaves only after every rank is done with it."""
    store.add("finished", 1)
    if ctx.rank != 0:
        return
    while store.add("finished", 0) < ctx.world_size:
        time.sleep(_POLL_S)
