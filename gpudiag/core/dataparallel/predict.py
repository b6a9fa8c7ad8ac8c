"""What torch computes for DataParallel: device properties, the balance check, chunks, counts.

Pure: no torch import; each function cites the torch source it mirrors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpudiag.core.describe import gpu_by_nvml_index
from gpudiag.core.visibility import torch_view
from gpudiag.model import Resolution, Snapshot, VisibleDevice, uuid_key


@dataclass(frozen=True)
class DeviceProps:
    """What ``_check_balance`` compares: ``total_memory`` and ``multi_processor_count``."""

    memory_total_mib: int | None
    multiprocessor_count: int | None


def device_props(dev: VisibleDevice, snapshot: Snapshot) -> DeviceProps:
    """Best known properties of one visible device.

    torch's own table (recorded in the snapshot, joined by UUID) is preferred
    because ``_check_balance`` reads ``torch.cuda.get_device_properties``; NVML's
    values are the fallback. A MIG instance has its own memory size and an SM
    count gpudiag does not know.
    """
    gpu = gpu_by_nvml_index(snapshot, dev.nvml_index)
    if dev.mig_uuid is not None:
        mig_mib = None
        if gpu is not None:
            for mig in gpu.mig_devices:
                if mig.uuid.lower() == dev.mig_uuid.lower():
                    mig_mib = mig.memory_total_mib
        return DeviceProps(mig_mib, None)
    if snapshot.torch is not None:
        key = uuid_key(dev.uuid)
        for td in snapshot.torch.devices:
            if uuid_key(td.uuid) == key:
                return DeviceProps(td.memory_total_mib, td.multiprocessor_count)
    if gpu is None:
        return DeviceProps(None, None)
    return DeviceProps(gpu.memory_total_mib, gpu.multiprocessor_count)


def predict_imbalance(
    device_ids: Sequence[int], props: Sequence[DeviceProps]
) -> tuple[int, int] | None:
    """The (weaker id, stronger id) torch's imbalance warning names, or None.

    ``props[i]`` belongs to ``device_ids[i]``. Mirrors ``_check_balance``:
    memory first, then SM count; strictly below 75%; the first minimum and the
    first maximum (``min``/``max`` over ``enumerate``); at most one warning.
    Returns None also when a needed value is unknown.
    """
    for attr in ("memory_total_mib", "multiprocessor_count"):
        values = [getattr(p, attr) for p in props]
        if not values or any(v is None for v in values):
            return None
        min_pos = min(range(len(values)), key=lambda i: values[i])
        max_pos = max(range(len(values)), key=lambda i: values[i])
        if values[max_pos] > 0 and values[min_pos] / values[max_pos] < 0.75:
            return device_ids[min_pos], device_ids[max_pos]
    return None


def chunks_used(batch_size: int, n_devices: int) -> int:
    """How many devices get a chunk: ``Tensor.chunk(n_devices)`` along dim 0.

    ``comm.scatter`` (torch/csrc/cuda/comm.cpp) splits with ``tensor.chunk``,
    whose chunks are ``ceil(B / n)`` long, so there are ``ceil(B / ceil(B / n))``.
    """
    size = math.ceil(batch_size / n_devices)
    return math.ceil(batch_size / size)


def torch_count_for(resolution: Resolution, snapshot: Snapshot | None) -> int:
    """``torch.cuda.device_count()`` for the job: torch's NVML reading, else CUDA's.

    ``device_count()`` counts with NVML and torch's own parser, also after CUDA
    initialised (torch/cuda/__init__.py, 2.x), so it can be below what CUDA
    exposes (recorded on torch 2.11: 0 for an upper-case UUID the driver accepts).
    DataParallel's default ``device_ids`` and ``get_device_properties``'s bounds
    assert use it; ``set_device`` and ``.to('cuda:K')`` use CUDA's count. With
    no snapshot, CUDA's count.
    """
    if snapshot is None:
        return len(resolution.devices)
    view = torch_view(resolution.spec, snapshot)
    if view.raises is not None or view.count is None:
        return len(resolution.devices)
    return view.count
