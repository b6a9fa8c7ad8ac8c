"""Exact ``CUDA_VISIBLE_DEVICES`` / ``CUDA_DEVICE_ORDER`` resolution (pure, no I/O).

The rules are CUDA's, as documented in the CUDA Programming Guide ("CUDA
Environment Variables": ``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER``), the
MIG User Guide ("CUDA Device Enumeration") and published hardware runs; every
rule, with examples and the points that are not documented by NVIDIA, is in
``docs/visible-devices.md``.

torch reads the same variable with its own parser before CUDA is initialised
(``torch/cuda/__init__.py``: ``_parse_visible_devices``, ``_device_count_nvml``,
``_transform_uuid_to_ordinals``, ``_get_nvml_device_index``). Where torch's
reading differs from CUDA's, a finding says so; :func:`torch_view` reproduces
torch's reading and ``tests/test_visibility_torch_oracle.py`` checks it against
the real torch functions.

The package holds one module per concept: ``entries`` (reading one entry like the
driver), ``order`` (``CUDA_DEVICE_ORDER`` and the enumeration pool), ``uuid_index``
(UUID-prefix matching), ``targets`` (what each entry selects), ``resolve``
(:func:`resolve_visible`), ``findings`` (explanations and findings of a
resolution), ``torch_reading`` (torch's own reading per version), ``torch_vs_cuda``
(VIS-TORCH-* findings), ``slurm`` (Slurm's allocation) and ``driver`` (the CUDA
driver's mapping, reconciled with the rules).
"""

from __future__ import annotations

from gpudiag.core.visibility.driver import (
    DriverAsker,
    apply_driver_mapping,
    cvd_changed_after_init,
    resolve_checked,
)
from gpudiag.core.visibility.entries import c_strtoul, cuda_index, quote_value, uuid_hex
from gpudiag.core.visibility.resolve import resolve_visible
from gpudiag.core.visibility.slurm import slurm_findings
from gpudiag.core.visibility.torch_reading import torch_view

__all__ = [
    "DriverAsker",
    "apply_driver_mapping",
    "c_strtoul",
    "cuda_index",
    "cvd_changed_after_init",
    "quote_value",
    "resolve_checked",
    "resolve_visible",
    "slurm_findings",
    "torch_view",
    "uuid_hex",
]
