"""What ``gpudiag probe`` runs, and how: the plan the runner and its children share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpudiag.launch.process import LaunchEnv
from gpudiag.probes.results import ProbeName

Device = Literal["cpu", "cuda"]


@dataclass(frozen=True)
class ProbePlan:
    """What to run and how.

    Attributes:
        probes: the probes, in canonical order.
        device: ``cpu`` or ``cuda``.
        timeout_s: hard wall-clock limit for each probe.
        nproc: ranks to self-launch for ddp (ignored under a launcher).
        device_ids: ``--device-ids`` for dp (None: all visible).
        visible: CUDA_VISIBLE_DEVICES for the children only (None: inherit).
        order: CUDA_DEVICE_ORDER for the children only (None: inherit).
        launch: the external launcher's view, or None to self-launch.
    """

    probes: tuple[ProbeName, ...]
    device: Device
    timeout_s: float
    nproc: int = 2
    device_ids: tuple[int, ...] | None = None
    visible: str | None = None
    order: str | None = None
    launch: LaunchEnv | None = None
