"""The ``single`` probe: train on one device, check it against a float64 CPU run."""

from __future__ import annotations

import copy
import time

from gpudiag.probes.common import (
    LEARNING_RATE,
    NAN_FAULT_STEP,
    WorkerContext,
    all_passed,
    close_check,
    decreased_check,
    failed_names,
    finite_losses_check,
    flat_params,
    hang_forever,
    make_data,
    make_model,
    num,
    poison,
)
from gpudiag.probes.results import ProbeResult

STEPS = 20
N_SAMPLES = 64
#: float32 against float64 after 20 SGD steps: rounding differences stay near
#: 1e-6; 1e-4 + 1e-3*|ref| still catches any wrong kernel or lost update.
ATOL = 1e-4
RTOL = 1e-3


def run(ctx: WorkerContext) -> ProbeResult:
    """Trains STEPS full-batch SGD steps on the device and on the CPU in float64."""
    import torch

    start_s = time.perf_counter()
    fault = ctx.fault_for("single")
    if fault == "hang":
        hang_forever(ctx, "single")
    device = ctx.torch_device()
    model = make_model()
    reference = copy.deepcopy(model).double()
    model = model.to(device)
    inputs, targets = make_data(N_SAMPLES)
    inputs_dev, targets_dev = inputs.to(device), targets.to(device)
    inputs_ref, targets_ref = inputs.double(), targets.double()
    opt = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=LEARNING_RATE)
    loss_fn = torch.nn.MSELoss()

    ctx.stage("single", "train")
    losses: list[float] = []
    for step in range(STEPS):
        step_inputs = (
            poison(inputs_dev) if fault == "nan" and step == NAN_FAULT_STEP else inputs_dev
        )
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(step_inputs), targets_dev)
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))

        opt_ref.zero_grad(set_to_none=True)
        loss_ref = loss_fn(reference(inputs_ref), targets_ref)
        loss_ref.backward()
        opt_ref.step()

    checks = (
        finite_losses_check(losses),
        decreased_check(losses),
        close_check(
            "matches_fp64_reference", flat_params(model), flat_params(reference), ATOL, RTOL
        ),
    )
    passed = all_passed(checks)
    message = (
        f"{STEPS} steps on {device}: loss {losses[0]:.4g} -> {losses[-1]:.4g}, "
        f"parameters match a float64 CPU run"
        if passed
        else f"failed: {failed_names(checks)}"
    )
    return ProbeResult(
        probe="single",
        status="pass" if passed else "fail",
        device=ctx.device_type,
        message=message,
        checks=checks,
        figures={
            "steps": STEPS,
            "device": str(device),
            "loss_first": num(losses[0]),
            "loss_last": num(losses[-1]),
            "dtype": "float32",
            "reference_dtype": "float64",
        },
        wall_s=time.perf_counter() - start_s,
    )
