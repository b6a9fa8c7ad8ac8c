"""Pieces the probes share: the worker context, the model, data and tolerance rules.

Only worker (child) code imports this module. torch is imported inside
functions, never at module level, so that importing it stays cheap and the
``gpudiag`` parent process can never initialise CUDA by accident.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpudiag.probes.results import ALL_PROBE_NAMES, Check, Figure

if TYPE_CHECKING:
    import torch

#: Planted faults understood by the worker (``GPUDIAG_PROBE_FAULT``, docs/probes.md).
FAULT_KINDS = ("skip-sync", "nan", "hang")
FAULT_ENV = "GPUDIAG_PROBE_FAULT"

MODEL_SEED = 1234
DATA_SEED = 4321
IN_FEATURES = 16
HIDDEN_FEATURES = 32
OUT_FEATURES = 4
LEARNING_RATE = 0.1
#: The step at which the ``nan`` fault poisons one input value.
NAN_FAULT_STEP = 2


@dataclass(frozen=True)
class Fault:
    """A planted fault: its kind and the probes it applies to (empty: all)."""

    kind: str
    probes: tuple[str, ...] = ()

    def applies_to(self, probe: str) -> bool:
        """Whether this fault is planted in ``probe``."""
        return not self.probes or probe in self.probes


def parse_fault(value: str | None) -> Fault | None:
    """Reads ``GPUDIAG_PROBE_FAULT``: ``KIND`` or ``KIND:PROBE[,PROBE]``.

    Raises:
        ValueError: an unknown kind or probe name.
    """
    if value is None or not value.strip():
        return None
    kind, _, probes_text = value.strip().partition(":")
    if kind not in FAULT_KINDS:
        raise ValueError(f"{FAULT_ENV}={value!r}: kind must be one of {', '.join(FAULT_KINDS)}")
    probes = tuple(p.strip() for p in probes_text.split(",") if p.strip())
    for probe in probes:
        if probe not in ALL_PROBE_NAMES:
            raise ValueError(f"{FAULT_ENV}={value!r}: unknown probe {probe!r}")
    return Fault(kind=kind, probes=probes)


@dataclass(frozen=True)
class WorkerContext:
    """What one worker process knows about its place in the run.

    Attributes:
        rank: global rank.
        world_size: ranks in the ddp probe.
        local_rank: rank on this host; it picks ``cuda:<local_rank>``.
        node_rank: the host's rank (torchrun GROUP_RANK / SLURM_NODEID), if known.
        device_type: ``cpu`` or ``cuda``.
        store: ``file:PATH`` (self-launched) or ``env`` (MASTER_ADDR/MASTER_PORT).
        run_id: a key prefix unique to this run inside a shared store.
        timeout_s: the parent's hard per-probe limit (collective timeouts exceed it).
        device_ids: ``--device-ids`` for the dp probe (None: all visible).
        fault: the planted fault, if any.
        emit: writes one progress event for the parent.
    """

    rank: int
    world_size: int
    local_rank: int
    node_rank: int | None
    device_type: str
    store: str
    run_id: str
    timeout_s: float
    device_ids: tuple[int, ...] | None = None
    fault: Fault | None = None
    emit: Callable[[dict[str, Any]], None] = field(default=lambda event: None)

    def fault_for(self, probe: str) -> str | None:
        """The fault kind planted in ``probe``, or None."""
        if self.fault is not None and self.fault.applies_to(probe):
            return self.fault.kind
        return None

    def stage(self, probe: str, stage: str, **extra: Any) -> None:
        """Reports progress, so that a hang can say where each rank was."""
        self.emit({"ev": "stage", "probe": probe, "stage": stage, **extra})

    def torch_device(self) -> torch.device:
        """``cpu``, or ``cuda:<local_rank>`` (the ordinal under this process's env)."""
        import torch

        if self.device_type == "cuda":
            return torch.device("cuda", self.local_rank)
        return torch.device("cpu")


def hang_forever(ctx: WorkerContext, probe: str) -> None:
    """The ``hang`` fault: block until the parent kills this process."""
    ctx.stage(probe, "hang (planted fault)")
    while True:
        time.sleep(3600)


def make_model() -> torch.nn.Module:
    """The probes' small MLP, identically initialised in every process."""
    import torch

    torch.manual_seed(MODEL_SEED)
    return torch.nn.Sequential(
        torch.nn.Linear(IN_FEATURES, HIDDEN_FEATURES),
        torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN_FEATURES, OUT_FEATURES),
    )


def make_data(n_samples: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A learnable regression set (float32, CPU), the same in every process."""
    import torch

    gen = torch.Generator().manual_seed(DATA_SEED)
    inputs = torch.randn(n_samples, IN_FEATURES, generator=gen)
    weight = torch.randn(IN_FEATURES, OUT_FEATURES, generator=gen) / math.sqrt(IN_FEATURES)
    noise = 0.01 * torch.randn(n_samples, OUT_FEATURES, generator=gen)
    return inputs, torch.tanh(inputs @ weight) + noise


def poison(inputs: torch.Tensor) -> torch.Tensor:
    """The ``nan`` fault: a copy of ``inputs`` with one NaN."""
    bad = inputs.clone()
    bad.view(-1)[0] = float("nan")
    return bad


def close_check(
    name: str,
    values: Sequence[torch.Tensor],
    references: Sequence[torch.Tensor],
    atol: float,
    rtol: float,
) -> Check:
    """Element-wise ``|v - ref| <= atol + rtol*|ref|`` (``torch.allclose``'s rule).

    Compared in float64 on the CPU; any non-finite value fails the check.
    """
    import torch

    worst = 0.0
    passed = len(values) == len(references)
    for value, reference in zip(values, references, strict=False):
        got = value.detach().to("cpu", torch.float64)
        ref = reference.detach().to("cpu", torch.float64)
        if not bool(torch.isfinite(got).all()) or not bool(torch.isfinite(ref).all()):
            return Check(
                name,
                False,
                None,
                atol,
                f"non-finite values; rule |v-ref| <= {atol:g} + {rtol:g}*|ref|",
            )
        diff = (got - ref).abs()
        worst = max(worst, float(diff.max()))
        passed = passed and bool((diff <= atol + rtol * ref.abs()).all())
    return Check(
        name,
        passed,
        worst,
        atol,
        f"max|v-ref| over all elements; rule |v-ref| <= {atol:g} + {rtol:g}*|ref|",
    )


def finite_losses_check(losses: Sequence[float]) -> Check:
    """Every step's loss is a finite number (a NaN/inf step fails the probe)."""
    bad = [step for step, loss in enumerate(losses) if not math.isfinite(loss)]
    detail = "all steps finite" if not bad else f"non-finite loss at step(s) {bad}"
    return Check("losses_finite", not bad, float(len(bad)), 0.0, detail)


def decreased_check(losses: Sequence[float], factor: float = 0.9) -> Check:
    """The last loss is at most ``factor`` times the first."""
    if not losses or not all(math.isfinite(x) for x in (losses[0], losses[-1])):
        return Check("loss_decreased", False, None, factor, "first or last loss is not finite")
    ratio = losses[-1] / losses[0] if losses[0] != 0 else 0.0
    return Check(
        "loss_decreased",
        ratio <= factor,
        ratio,
        factor,
        f"last/first loss = {losses[-1]:.6g}/{losses[0]:.6g}; must be <= {factor:g}",
    )


def num(value: float) -> Figure:
    """A float for JSON: None where it is NaN or infinite (JSON has neither)."""
    return value if math.isfinite(value) else None


def flat_params(module: torch.nn.Module) -> list[torch.Tensor]:
    """The module's parameters, detached, in registration order."""
    return [p.detach() for p in module.parameters()]


def all_passed(checks: Iterable[Check]) -> bool:
    """Whether every check passed."""
    return all(c.passed for c in checks)


def failed_names(checks: Iterable[Check]) -> str:
    """``a, b`` for the failed checks' names."""
    return ", ".join(c.name for c in checks if not c.passed)


def limit_threads(threads: int) -> None:
    """Caps torch's intra-op threads; the parent sized them to the cores per rank."""
    import torch

    torch.set_num_threads(max(1, threads))
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, threads)))
