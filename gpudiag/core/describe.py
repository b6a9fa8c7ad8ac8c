"""How findings name devices: ``cuda:0 = physical GPU 1 (…)``, the CUDA_VISIBLE_DEVICES phrase.

Shared by the DataParallel and DDP rules, the check report and the mapping renderer. Pure: a
function of the snapshot and the resolution.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudiag.model import Gpu, Resolution, Snapshot, VisibleDevice


def gpu_by_nvml_index(snapshot: Snapshot, nvml_index: int) -> Gpu | None:
    """The snapshot's GPU with that nvidia-smi index, or None.

    Called once per visible device: the index is built once per ``gpus`` tuple
    (immutable, and held here while cached), so a report stays linear in GPUs.
    """
    global _INDEX_CACHE
    gpus, index = _INDEX_CACHE
    if gpus is not snapshot.gpus:
        gpus = snapshot.gpus
        index = {}
        for gpu in gpus:
            index.setdefault(gpu.nvml_index, gpu)
        _INDEX_CACHE = (gpus, index)
    return index.get(nvml_index)


_INDEX_CACHE: tuple[tuple[Gpu, ...], dict[int, Gpu]] = ((), {})


def physical_label(dev: VisibleDevice) -> str:
    """Short physical name: ``1`` or ``MIG-… on GPU 0``."""
    if dev.mig_uuid is not None:
        return f"{dev.mig_uuid} on GPU {dev.nvml_index}"
    return str(dev.nvml_index)


def describe_device(dev: VisibleDevice, snapshot: Snapshot) -> str:
    """``cuda:0 = physical GPU 1 (NVIDIA A100-SXM4-80GB, GPU-3cea…)``."""
    gpu = gpu_by_nvml_index(snapshot, dev.nvml_index)
    name = gpu.name if gpu is not None and gpu.name else "unknown model"
    if dev.mig_uuid is not None:
        return (
            f"cuda:{dev.cuda_ordinal} = MIG instance {dev.mig_uuid} of physical GPU "
            f"{dev.nvml_index} ({name}, {dev.uuid})"
        )
    return f"cuda:{dev.cuda_ordinal} = physical GPU {dev.nvml_index} ({name}, {dev.uuid})"


def describe_devices(devices: Sequence[VisibleDevice], snapshot: Snapshot) -> str:
    """All devices described, separated by ``; ``."""
    return "; ".join(describe_device(d, snapshot) for d in devices)


def cvd_phrase(resolution: Resolution) -> str:
    """``under CUDA_VISIBLE_DEVICES=1,2`` or ``with CUDA_VISIBLE_DEVICES unset``."""
    if resolution.spec is None:
        return "with CUDA_VISIBLE_DEVICES unset"
    if resolution.spec == "":
        return "under CUDA_VISIBLE_DEVICES='' (no device)"
    return f"under CUDA_VISIBLE_DEVICES={resolution.spec}"


def join_and(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def mapping_phrase(devices: Sequence[VisibleDevice]) -> str:
    """``physical GPUs 1 and 2 are cuda:0 and cuda:1``."""
    phys = join_and([physical_label(d) for d in devices])
    ords = join_and([f"cuda:{d.cuda_ordinal}" for d in devices])
    if len(devices) == 1:
        return f"physical GPU {phys} is {ords}"
    return f"physical GPUs {phys} are {ords}"


def ids_text(ids: Sequence[int]) -> str:
    """``[0,1]``: the compact list spelling used in fixes."""
    return "[" + ",".join(str(i) for i in ids) + "]"
