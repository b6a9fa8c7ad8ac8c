"""The exact texts torch raises, by torch version (pure: no torch import).

A prediction quotes what the snapshot's torch version prints. Where a text
changed between versions, :func:`cuda_error` gives the snapshot's version's text
and :func:`cuda_error_also` the others, labelled with the versions that print them.

Sources:

* ``torch.AcceleratorError``: since torch 2.8 (pytorch#152023), errors raised by
  ``C10_CUDA_CHECK`` ("CUDA error: …") are ``torch.AcceleratorError``, a
  ``RuntimeError`` subclass; before, plain ``RuntimeError``. Recorded on torch
  2.11: ``torch.AcceleratorError: CUDA error: invalid device ordinal``.
* ``c10/cuda/CUDAFunctions.cpp`` (``device_count_impl``,
  ``device_count_ensure_non_zero``): a failed ``cudaGetDeviceCount`` other than
  "no device" raises ``Unexpected error from cudaGetDeviceCount() … Error <code>:
  <text>`` at CUDA initialisation, and zero devices raise "No CUDA GPUs are
  available"; both stay ``RuntimeError`` (TORCH_CHECK), recorded on torch 2.11.
"""

from __future__ import annotations

import re

#: The first torch version that raises torch.AcceleratorError for CUDA errors.
ACCELERATOR_ERROR_SINCE = (2, 8)

NO_CUDA_GPUS = "RuntimeError: No CUDA GPUs are available"
INVALID_ORDINAL_MESSAGE = "CUDA error: invalid device ordinal"
#: ``at::cuda::getDeviceProperties`` (aten/src/ATen/cuda/CUDAContext.cpp): an index
#: below torch.cuda.device_count() but past CUDA's own count (torch counts with NVML).
PROPERTIES_ASSERT = "RuntimeError: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED"

_VERSION_RE = re.compile(r"\s*(\d+)\.(\d+)")


def torch_version_tuple(version: str | None) -> tuple[int, int] | None:
    """``"2.11.0+cu130"`` → ``(2, 11)``; None when unknown or unreadable."""
    if not version:
        return None
    match = _VERSION_RE.match(version)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def _has_accelerator_error(version: str | None) -> bool:
    parsed = torch_version_tuple(version)
    # Unknown version: assume a current torch.
    return parsed is None or parsed >= ACCELERATOR_ERROR_SINCE


def cuda_error(version: str | None, message: str) -> str:
    """What a failed CUDA runtime call raises in that torch version.

    ``message`` is the text after the class, e.g. ``CUDA error: invalid device ordinal``.
    """
    if _has_accelerator_error(version):
        return f"torch.AcceleratorError: {message}"
    return f"RuntimeError: {message}"


def cuda_error_also(version: str | None, message: str) -> tuple[str, ...]:
    """The same failure's text in the torch versions other than ``version``'s."""
    if _has_accelerator_error(version):
        return (f"torch < 2.8: RuntimeError: {message}",)
    return (f"torch >= 2.8: torch.AcceleratorError: {message}",)


def invalid_ordinal(version: str | None) -> str:
    """A device index past the visible devices (``cudaSetDevice``, ``.to('cuda:K')``)."""
    return cuda_error(version, INVALID_ORDINAL_MESSAGE)


def unexpected_device_count(code: int = 101, text: str = "invalid device ordinal") -> str:
    """torch's text when ``cudaGetDeviceCount`` fails with anything but "no device".

    cuInit's ``CUDA_ERROR_INVALID_DEVICE`` reaches the runtime as
    ``cudaErrorInvalidDevice`` (101, "invalid device ordinal").
    """
    return (
        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
        "functions before calling NumCudaDevices() that might have already set an error? "
        f"Error {code}: {text}"
    )


def cuinit_failure_text(cuinit_error: str | None) -> str:
    """What torch raises at CUDA initialisation when cuInit fails with ``cuinit_error``."""
    if cuinit_error == "CUDA_ERROR_INVALID_DEVICE":
        return unexpected_device_count()
    return NO_CUDA_GPUS
