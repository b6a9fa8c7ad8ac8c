"""Collect one snapshot per node of the allocation (``gpudiag fleet``, issue 19)."""

from __future__ import annotations

from collections.abc import Mapping

from gpudiag.core.fleet import FleetNode
from gpudiag.errors import GpudiagInputError


def collect_fleet(env: Mapping[str, str], *, timeout_s: float) -> tuple[list[FleetNode], str]:
    """(nodes, how they were collected)."""
    raise GpudiagInputError(
        "fleet: not inside a Slurm allocation or an MPI launch; "
        "give snapshots with --snapshots FILE..."
    )
