"""The ``amp`` probe: mixed precision must train like float32, and how much faster.

On CUDA: float16 autocast with ``torch.amp.GradScaler`` (float16's range is
too small for raw gradients), and bfloat16 where
``torch.cuda.is_bf16_supported()``. On the CPU: bfloat16 autocast, the dtype
torch's CPU autocast supports (torch/amp/autocast_mode.py); no scaler is
needed because bfloat16 has float32's exponent range.
"""

from __future__ import annotations

import copy
import math
import time
from typing import TYPE_CHECKING

from gpudiag.probes.common import (
    LEARNING_RATE,
    NAN_FAULT_STEP,
    WorkerContext,
    all_passed,
    decreased_check,
    failed_names,
    finite_losses_check,
    hang_forever,
    make_data,
    make_model,
    num,
    poison,
)
from gpudiag.probes.results import Check, Figure, ProbeResult

if TYPE_CHECKING:
    import torch

STEPS = 20
N_SAMPLES = 64
#: bfloat16 keeps 8 significant bits (relative step 2**-8 = 0.4 %) and float16
#: 11; after 20 steps the final loss stays within a few 0.1 % of float32's,
#: so 5 % relative (+1e-3 absolute) flags broken autocast, not rounding.
LOSS_RTOL = 0.05
LOSS_ATOL = 1e-3


def run(ctx: WorkerContext) -> ProbeResult:
    """Trains float32 and autocast copies; compares losses and times both."""
    import torch

    start_s = time.perf_counter()
    fault = ctx.fault_for("amp")
    if fault == "hang":
        hang_forever(ctx, "amp")
    device = ctx.torch_device()
    if ctx.device_type == "cuda":
        dtypes = [torch.float16]
        if torch.cuda.is_bf16_supported():
            dtypes.append(torch.bfloat16)
    else:
        dtypes = [torch.bfloat16]

    ctx.stage("amp", "train float32")
    fp32_losses = _train(device, None, None)
    checks: list[Check] = [decreased_check(fp32_losses)]
    figures: dict[str, Figure] = {"steps": STEPS, "loss_fp32": num(fp32_losses[-1])}
    for dtype in dtypes:
        label = "fp16" if dtype == torch.float16 else "bf16"
        ctx.stage("amp", f"train {label}")
        amp_losses = _train(device, dtype, fault)
        checks.append(_finite(label, amp_losses))
        checks.append(_loss_close(label, amp_losses[-1], fp32_losses[-1]))
        ctx.stage("amp", f"time {label}")
        speedup = _speedup(device, dtype)
        figures[f"loss_{label}"] = num(amp_losses[-1])
        figures[f"speedup_{label}"] = num(speedup)

    passed = all_passed(checks)
    labels = [("fp16" if d == torch.float16 else "bf16") for d in dtypes]
    speedups = ", ".join(f"{lab} x{_fmt(figures[f'speedup_{lab}'])}" for lab in labels)
    message = (
        f"autocast {'/'.join(labels)} on {device}: final loss within "
        f"{LOSS_RTOL:.0%} of float32; speed-up over float32: {speedups}"
        if passed
        else f"failed: {failed_names(checks)}"
    )
    note = "speed-up is informational, not a pass criterion"
    if ctx.device_type == "cpu":  # the CPU remark only where it applies
        note += "; on a CPU without bf16 matrix units autocast is often slower than float32"
    notes = (note,)
    return ProbeResult(
        probe="amp",
        status="pass" if passed else "fail",
        device=ctx.device_type,
        message=message,
        checks=tuple(checks),
        figures=figures,
        wall_s=time.perf_counter() - start_s,
        notes=notes,
    )


def _fmt(value: Figure) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _finite(label: str, losses: list[float]) -> Check:
    check = finite_losses_check(losses)
    return Check(f"losses_finite_{label}", check.passed, check.value, check.tolerance, check.detail)


def _loss_close(label: str, loss_amp: float, loss_fp32: float) -> Check:
    diff = abs(loss_amp - loss_fp32)
    bound = LOSS_ATOL + LOSS_RTOL * abs(loss_fp32)
    passed = diff <= bound  # False for NaN
    return Check(
        f"loss_close_to_fp32_{label}",
        passed,
        diff if math.isfinite(diff) else None,
        bound,
        f"|loss_{label} - loss_fp32| <= {LOSS_ATOL:g} + {LOSS_RTOL:g}*|loss_fp32|",
    )


def _train(device: torch.device, dtype: torch.dtype | None, fault: str | None) -> list[float]:
    """STEPS full-batch steps, in float32 (dtype None) or under autocast(dtype)."""
    import torch

    model = copy.deepcopy(make_model()).to(device)
    inputs, targets = make_data(N_SAMPLES)
    inputs, targets = inputs.to(device), targets.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    loss_fn = torch.nn.MSELoss()
    # GradScaler only for float16 (torch/amp/grad_scaler.py): it multiplies the
    # loss so small gradients survive float16, and skips steps whose gradients
    # overflowed.
    scaler = torch.amp.GradScaler(device.type) if dtype == torch.float16 else None
    losses: list[float] = []
    for step in range(STEPS):
        step_inputs = poison(inputs) if fault == "nan" and step == NAN_FAULT_STEP else inputs
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = loss_fn(model(step_inputs).float(), targets)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        losses.append(float(loss.item()))
    return losses


def _speedup(device: torch.device, dtype: torch.dtype) -> float:
    """float32 time / autocast time for forward+backward of a wider MLP."""
    import torch

    width, batch, iters = (2048, 2048, 20) if device.type == "cuda" else (256, 256, 6)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, width),
    ).to(device)
    inputs = torch.randn(batch, width, device=device)

    def timed(enabled: bool) -> float:
        def once() -> None:
            with torch.autocast(device.type, dtype=dtype, enabled=enabled):
                out = model(inputs)
            out.float().sum().backward()

        for _ in range(2):  # warm-up: kernel selection, allocator
            once()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        begin = time.perf_counter()
        for _ in range(iters):
            once()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return (time.perf_counter() - begin) / iters

    fp32_s = timed(False)
    amp_s = timed(True)
    return fp32_s / amp_s if amp_s > 0 else float("nan")
