"""gpudiag: which physical GPUs a PyTorch job will really get, and whether it will work.

Importing this package is cheap and never imports torch, pynvml or GPUtil; the
backends load them on first use, and torch/CUDA are only ever queried in child
processes so that the caller's ``CUDA_VISIBLE_DEVICES`` is never frozen.

The Python API is loaded on first access: the verdicts (``gpudiag.check``,
``gpudiag.guard``, ``gpudiag.GpuConfigError``, and the ``gpudiag.Report`` /
``gpudiag.Finding`` they return) and the facts (``gpudiag.devices()``, the GPUs as
``gpudiag.Gpu``; ``gpudiag.resolve()``, the ``cuda:N`` mapping as a
``gpudiag.Resolution``). Type checkers see the real signatures (``py.typed``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# Captured at the package's first import (the guard's best guess at CUDA's value).
from gpudiag.import_env import CVD_AT_IMPORT as CVD_AT_IMPORT

if TYPE_CHECKING:  # the real types for type checkers (py.typed); loaded lazily at run time
    from gpudiag.api import GpuConfigError, check, guard
    from gpudiag.core.check import Report
    from gpudiag.facts import devices, resolve
    from gpudiag.model import Finding, Gpu, Resolution

__version__ = "0.1.0"

__all__ = [
    "Finding",
    "Gpu",
    "GpuConfigError",
    "Report",
    "Resolution",
    "__version__",
    "check",
    "devices",
    "guard",
    "resolve",
]

_API = {"check", "guard", "GpuConfigError"}
_TYPES = {
    "Report": "gpudiag.core.check",
    "Finding": "gpudiag.model",
    "Gpu": "gpudiag.model",
    "Resolution": "gpudiag.model",
    "devices": "gpudiag.facts",
    "resolve": "gpudiag.facts",
}


def __getattr__(name: str) -> Any:
    # PEP 562: keep `import gpudiag` (and so `gpudiag --help`) light.
    if name in _API:
        from gpudiag import api

        return getattr(api, name)
    if name in _TYPES:
        import importlib

        return getattr(importlib.import_module(_TYPES[name]), name)
    raise AttributeError(f"module 'gpudiag' has no attribute {name!r}")
