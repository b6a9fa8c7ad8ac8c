"""Predict what ``torch.nn.DataParallel`` will do, before any CUDA call.

Pure: no torch, no NVML. The rules mirror, in execution order, PyTorch's
``torch/nn/parallel/data_parallel.py`` (``DataParallel.__init__``,
``DataParallel.forward``, ``_check_balance``), ``torch/_utils.py``
(``_get_device_index``, ``_get_devices_properties``) and
``torch/cuda/__init__.py`` (``get_device_properties``, ``set_device``), read in
torch 2.13. ``tests/test_dp_torch_oracle.py`` runs the real constructor and
forward check against our predictions.

Layout: :mod:`.rules` is :func:`validate_dataparallel`, in torch's execution order;
:mod:`.setup` the steps before DataParallel is built (``set_device``, moving the model);
:mod:`.predict` what torch computes (device properties, balance, chunks, counts);
:mod:`.texts` torch's exact texts; :mod:`.inputs` the user's inputs and the ids they meant;
:mod:`.codes` the finding codes. Devices are named by :mod:`gpudiag.core.describe`.

Every id below is a ``cuda_ordinal``: an index into the devices that
``CUDA_VISIBLE_DEVICES`` leaves visible, never an nvidia-smi (``nvml_index``) number.
"""

from __future__ import annotations

# The names other modules import from gpudiag.core.dataparallel.
from gpudiag.core.dataparallel.inputs import parse_module_device
from gpudiag.core.dataparallel.predict import (
    DeviceProps,
    chunks_used,
    device_props,
    predict_imbalance,
    torch_count_for,
)
from gpudiag.core.dataparallel.rules import validate_dataparallel
from gpudiag.core.dataparallel.texts import (
    INVALID_DEVICE_ID,
    INVALID_ORDINAL,
    invalid_ordinal_for,
    module_mismatch_text,
    no_gpu_text,
)
from gpudiag.core.describe import (
    cvd_phrase,
    describe_device,
    describe_devices,
    gpu_by_nvml_index,
)

__all__ = [
    "INVALID_DEVICE_ID",
    "INVALID_ORDINAL",
    "DeviceProps",
    "chunks_used",
    "cvd_phrase",
    "describe_device",
    "describe_devices",
    "device_props",
    "gpu_by_nvml_index",
    "invalid_ordinal_for",
    "module_mismatch_text",
    "no_gpu_text",
    "parse_module_device",
    "predict_imbalance",
    "torch_count_for",
    "validate_dataparallel",
]
