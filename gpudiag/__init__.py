"""gpudiag: which physical GPUs a PyTorch job will really get, and whether it will work.

Importing this package is cheap and never imports torch, pynvml or GPUtil; the
backends load them on first use, and torch/CUDA are only ever queried in child
processes so that the caller's ``CUDA_VISIBLE_DEVICES`` is never frozen.
"""

from __future__ import annotations

__version__ = "0.1.0"
