"""The exact texts torch raises or warns around DataParallel, for the snapshot's torch.

Pure: no torch import. Version-dependent texts come from :mod:`gpudiag.findings.texts`.
"""

from __future__ import annotations

# Re-exported: the DataParallel rules and lint name them from here.
from gpudiag.findings.texts import EMPTY_IDS as EMPTY_IDS
from gpudiag.findings.texts import INVALID_DEVICE_ID as INVALID_DEVICE_ID
from gpudiag.findings.texts import (
    INVALID_ORDINAL_MESSAGE,
    NO_CUDA_GPUS,
    cuda_error,
    cuda_error_also,
    cuinit_failure_text,
)
from gpudiag.findings.texts import NEGATIVE_INDEX as NEGATIVE_INDEX
from gpudiag.findings.texts import NO_DRIVER as NO_DRIVER
from gpudiag.findings.texts import NOT_COMPILED as NOT_COMPILED
from gpudiag.model import Snapshot

# Exact texts PyTorch raises or warns (torch 2.13 sources named at each use).
#: torch < 2.8's text; :func:`invalid_ordinal_for` gives the snapshot's version's.
INVALID_ORDINAL = "RuntimeError: " + INVALID_ORDINAL_MESSAGE
CPU_OUTPUT_WARNING = (
    "FutureWarning: Using -1 to represent CPU tensor is deprecated. Please use a "
    'device object or string instead, e.g., "cpu".'
)
# torch/nn/parallel/data_parallel.py::_check_balance, whitespace collapsed.
IMBALANCE_TEMPLATE = (
    "There is an imbalance between your GPUs. You may want to exclude GPU {} which "
    "has less than 75% of the memory or cores of GPU {}. You can do so by setting "
    "the device_ids argument to DataParallel, or by setting the CUDA_VISIBLE_DEVICES "
    "environment variable."
)


def module_mismatch_text(src_ordinal: int, found: str) -> str:
    """The RuntimeError of ``DataParallel.forward`` when a parameter is elsewhere."""
    return (
        "RuntimeError: module must have its parameters and buffers on device "
        f"cuda:{src_ordinal} (device_ids[0]) but found one of them on device: {found}"
    )


def imbalance_text(min_id: int, max_id: int) -> str:
    """The UserWarning of ``_check_balance``, with its whitespace collapsed."""
    return "UserWarning: " + IMBALANCE_TEMPLATE.format(min_id, max_id)


def no_gpu_text(snapshot: Snapshot, cuinit_error: str | None = None) -> str:
    """What the first CUDA call raises on a machine where no GPU is visible."""
    if snapshot.torch is not None and snapshot.torch.cpu_only:
        return NOT_COMPILED
    if snapshot.driver_version is None and not snapshot.gpus:
        return NO_DRIVER
    return cuinit_failure_text(cuinit_error) if cuinit_error else NO_CUDA_GPUS


def torch_version_of(snapshot: Snapshot) -> str | None:
    """The torch version recorded in the snapshot, or None."""
    return snapshot.torch.version if snapshot.torch is not None else None


def invalid_ordinal_for(snapshot: Snapshot) -> tuple[str, tuple[str, ...]]:
    """The invalid-device-ordinal text of the snapshot's torch, and the other versions'."""
    version = torch_version_of(snapshot)
    return (
        cuda_error(version, INVALID_ORDINAL_MESSAGE),
        cuda_error_also(version, INVALID_ORDINAL_MESSAGE),
    )
