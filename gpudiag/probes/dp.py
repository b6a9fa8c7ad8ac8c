"""The ``dp`` probe: ``nn.DataParallel`` must compute what one device computes."""

from __future__ import annotations

import copy
import time

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
from gpudiag.probes.results import Check, MemoryRow, ProbeResult

STEPS = 5
N_SAMPLES = 64
#: DataParallel splits the batch and reduce-adds the replicas' gradients
#: (torch/nn/parallel/data_parallel.py, comm.reduce_add): only the summation
#: order changes, so float32 rounding (~1e-7 relative) is all we allow for.
ATOL = 1e-5
RTOL = 1e-4
MIB = 1024 * 1024


def run(ctx: WorkerContext) -> ProbeResult:
    """Runs DataParallel and a plain single-device copy from one initialisation."""
    import torch

    start_s = time.perf_counter()
    fault = ctx.fault_for("dp")
    if fault == "hang":
        hang_forever(ctx, "dp")
    notes: list[str] = []
    if ctx.device_type == "cuda":
        device_ids = list(ctx.device_ids or range(torch.cuda.device_count()))
        if not device_ids:
            raise RuntimeError("no CUDA device visible to the child for DataParallel")
        device = torch.device("cuda", device_ids[0])
    else:
        device_ids = list(ctx.device_ids or ())
        device = torch.device("cpu")

    base = make_model()
    plain = copy.deepcopy(base).to(device)
    if ctx.device_type == "cuda":
        for cuda_ordinal in device_ids:
            torch.cuda.reset_peak_memory_stats(cuda_ordinal)
    # DataParallel wants the module on device_ids[0] (its forward() checks this).
    parallel = torch.nn.DataParallel(copy.deepcopy(base).to(device), device_ids=device_ids or None)
    used_ids = list(parallel.device_ids)
    if not used_ids:
        path = "module-direct"
        # torch/nn/parallel/data_parallel.py: with no accelerator __init__ sets
        # device_ids = [] and forward() calls the wrapped module directly.
        notes.append(
            "no accelerator: torch's DataParallel.__init__ set device_ids=[] and "
            "forward() called the module directly (torch/nn/parallel/data_parallel.py); "
            "the numbers verify that real code path, not a multi-GPU scatter/gather"
        )
        if device_ids:
            notes.append(f"--device-ids {device_ids} were ignored by torch on the CPU")
    elif len(used_ids) == 1:
        path = "single-device"
    else:
        path = "scatter-replicate-gather"

    inputs, targets = make_data(N_SAMPLES)
    inputs, targets = inputs.to(device), targets.to(device)
    loss_fn = torch.nn.MSELoss()
    opt_plain = torch.optim.SGD(plain.parameters(), lr=LEARNING_RATE)
    opt_parallel = torch.optim.SGD(parallel.parameters(), lr=LEARNING_RATE)

    ctx.stage("dp", "train")
    checks: list[Check] = []
    losses: list[float] = []
    for step in range(STEPS):
        step_inputs = poison(inputs) if fault == "nan" and step == NAN_FAULT_STEP else inputs
        opt_plain.zero_grad(set_to_none=True)
        opt_parallel.zero_grad(set_to_none=True)
        out_plain = plain(inputs)
        out_parallel = parallel(step_inputs)
        loss_fn(out_plain, targets).backward()
        loss = loss_fn(out_parallel, targets)
        loss.backward()
        losses.append(float(loss.item()))
        if step == 0:
            checks.append(close_check("outputs_match", [out_parallel], [out_plain], ATOL, RTOL))
            checks.append(
                close_check(
                    "gradients_match",
                    [p.grad for p in parallel.module.parameters() if p.grad is not None],
                    [p.grad for p in plain.parameters() if p.grad is not None],
                    ATOL,
                    RTOL,
                )
            )
        opt_plain.step()
        opt_parallel.step()

    checks.insert(0, finite_losses_check(losses))
    checks.append(
        close_check(
            "parameters_match", flat_params(parallel.module), flat_params(plain), ATOL, RTOL
        )
    )
    memory: list[MemoryRow] = []
    if ctx.device_type == "cuda":
        for cuda_ordinal in used_ids or [device.index or 0]:
            peak = torch.cuda.max_memory_allocated(cuda_ordinal) / MIB
            memory.append(MemoryRow(f"cuda:{cuda_ordinal}", cuda_ordinal, peak))
        notes.append(
            "DataParallel keeps the master copy, the gathered outputs and the loss on "
            "device_ids[0], so that card uses the most memory"
        )
    else:
        memory.append(MemoryRow("cpu", None, None))

    passed = all_passed(checks)
    message = (
        f"{path} over {used_ids or 'no GPU'}: outputs, gradients and parameters "
        "match the single-device run"
        if passed
        else f"failed: {failed_names(checks)}"
    )
    return ProbeResult(
        probe="dp",
        status="pass" if passed else "fail",
        device=ctx.device_type,
        message=message,
        checks=tuple(checks),
        figures={
            "steps": STEPS,
            "dp_path": path,
            "device_ids": ",".join(str(i) for i in used_ids),
            "loss_first": num(losses[0]),
            "loss_last": num(losses[-1]),
        },
        wall_s=time.perf_counter() - start_s,
        memory=tuple(memory),
        notes=tuple(notes),
    )
