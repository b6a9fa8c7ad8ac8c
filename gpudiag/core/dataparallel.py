"""Predict what ``torch.nn.DataParallel`` will do, before any CUDA call.

Pure: no torch, no NVML. The rules mirror, in execution order, PyTorch's
``torch/nn/parallel/data_parallel.py`` (``DataParallel.__init__``,
``DataParallel.forward``, ``_check_balance``), ``torch/_utils.py``
(``_get_device_index``, ``_get_devices_properties``) and
``torch/cuda/__init__.py`` (``get_device_properties``, ``set_device``), read in
torch 2.13. ``tests/test_dp_torch_oracle.py`` runs the real constructor and
forward check against our predictions.

Every id below is a ``cuda_ordinal``: an index into the devices that
``CUDA_VISIBLE_DEVICES`` leaves visible, never an nvidia-smi (``nvml_index``) number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpudiag.core.visibility import torch_view
from gpudiag.errors import GpudiagInputError
from gpudiag.findings.texts import (
    INVALID_ORDINAL_MESSAGE,
    NO_CUDA_GPUS,
    PROPERTIES_ASSERT,
    cuda_error,
    cuda_error_also,
    cuinit_failure_text,
    torch_version_tuple,
)
from gpudiag.model import Finding, Gpu, Resolution, Snapshot, VisibleDevice, uuid_key
from gpudiag.parsing import is_int_text, show_value

CODES: dict[str, str] = {
    "DP-DEVICES": "the physical GPUs DataParallel will use",
    "DP-CPU-FALLBACK": "no GPU visible: DataParallel silently runs the module on the CPU",
    "DP-NO-VISIBLE-GPU": "a GPU is asked for but no GPU is visible",
    "DP-SET-DEVICE-INVALID": "torch.cuda.set_device(K) with K beyond the visible devices",
    "DP-SET-DEVICE-NEGATIVE": "torch.cuda.set_device with a negative id is a no-op",
    "DP-MODULE-DEVICE-INVALID": "the model is moved to a cuda ordinal that is not visible",
    "DP-EMPTY-DEVICE-IDS": "device_ids=[] raises IndexError",
    "DP-NEGATIVE-FIRST-ID": "a negative device_ids[0] raises RuntimeError",
    "DP-INVALID-DEVICE-ID": "a device id outside the visible devices: AssertionError",
    "DP-MODULE-DEVICE-MISMATCH": "the model's parameters are not on device_ids[0]",
    "DP-DUPLICATE-DEVICE-ID": "the same device id appears twice in device_ids",
    "DP-OUTPUT-DEVICE-INVALID": "output_device is not a visible device",
    "DP-OUTPUT-DEVICE-OUTSIDE": "output_device is visible but not in device_ids",
    "DP-OUTPUT-DEVICE-CPU": "output_device=-1 gathers outputs on the CPU (deprecated)",
    "DP-CUDA0-CONTEXT": "cuda:0 gets a CUDA context although it is not in device_ids",
    "DP-IMBALANCE": "torch's 'imbalance between your GPUs' warning",
    "DP-BATCH-TOO-SMALL": "the batch is split into fewer chunks than devices: GPUs idle",
}

# Exact texts PyTorch raises or warns (torch 2.13 sources named at each use).
INVALID_DEVICE_ID = "AssertionError: Invalid device id"
NEGATIVE_INDEX = "RuntimeError: Device index must not be negative"
EMPTY_IDS = "IndexError: list index out of range"
#: torch < 2.8's text; :func:`invalid_ordinal_for` gives the snapshot's version's.
INVALID_ORDINAL = "RuntimeError: " + INVALID_ORDINAL_MESSAGE
NOT_COMPILED = "AssertionError: Torch not compiled with CUDA enabled"
NO_DRIVER = "RuntimeError: Found no NVIDIA driver on your system."
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


# ---------------------------------------------------------------- describing devices


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


def _join(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def mapping_phrase(devices: Sequence[VisibleDevice]) -> str:
    """``physical GPUs 1 and 2 are cuda:0 and cuda:1``."""
    phys = _join([physical_label(d) for d in devices])
    ords = _join([f"cuda:{d.cuda_ordinal}" for d in devices])
    if len(devices) == 1:
        return f"physical GPU {phys} is {ords}"
    return f"physical GPUs {phys} are {ords}"


def ids_text(ids: Sequence[int]) -> str:
    """``[0,1]``: the compact list spelling used in fixes."""
    return "[" + ",".join(str(i) for i in ids) + "]"


# ---------------------------------------------------------------- device properties


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


# ---------------------------------------------------------------- inputs


def parse_module_device(text: str | None) -> tuple[str, int | None] | None:
    """``cpu``, ``cuda``, ``cuda:K`` or ``K`` → (type, ordinal or None).

    Raises:
        GpudiagInputError: any other spelling.
    """
    if text is None:
        return None
    value = text.strip().lower()
    if value == "cpu":
        return ("cpu", None)
    if value == "cuda":
        return ("cuda", None)
    number = value[5:] if value.startswith("cuda:") else value
    # torch.device accepts plain ASCII ordinals only ("cuda:01", "cuda:²" raise).
    if is_int_text(number) and number[0] not in "+-" and (number == "0" or number[0] != "0"):
        return ("cuda", int(number))
    raise GpudiagInputError(
        f"--module-device {show_value(text)} is not cpu, cuda, cuda:K or K "
        "(K a non-negative integer)"
    )


def no_gpu_text(snapshot: Snapshot, cuinit_error: str | None = None) -> str:
    """What the first CUDA call raises on a machine where no GPU is visible."""
    if snapshot.torch is not None and snapshot.torch.cpu_only:
        return NOT_COMPILED
    if snapshot.driver_version is None and not snapshot.gpus:
        return NO_DRIVER
    return cuinit_failure_text(cuinit_error) if cuinit_error else NO_CUDA_GPUS


def _torch_version(snapshot: Snapshot) -> str | None:
    return snapshot.torch.version if snapshot.torch is not None else None


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


def invalid_ordinal_for(snapshot: Snapshot) -> tuple[str, tuple[str, ...]]:
    """The invalid-device-ordinal text of the snapshot's torch, and the other versions'."""
    version = _torch_version(snapshot)
    return (
        cuda_error(version, INVALID_ORDINAL_MESSAGE),
        cuda_error_also(version, INVALID_ORDINAL_MESSAGE),
    )


def _suggest_ids(ids: Sequence[int], resolution: Resolution) -> list[int] | None:
    # Users usually pass nvidia-smi numbers or the CUDA_VISIBLE_DEVICES entries
    # themselves; map each to the ordinal it became, entry text first.
    mapped: list[int] = []
    for wanted in ids:
        hit = next((d for d in resolution.devices if (d.entry or "").strip() == str(wanted)), None)
        if hit is None:
            hit = next(
                (d for d in resolution.devices if d.nvml_index == wanted and d.mig_uuid is None),
                None,
            )
        if hit is None:
            return None
        mapped.append(hit.cuda_ordinal)
    if len(set(mapped)) != len(mapped):
        return None
    return mapped


def _find(
    code: str,
    severity: str,
    message: str,
    fix: str | None,
    predicts: str | None,
    subject: str | None = None,
    also: tuple[str, ...] = (),
) -> Finding:
    assert code in CODES, code  # every emitted code must be documented
    return Finding(code, severity, message, fix, predicts, subject, also)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the validator


def validate_dataparallel(
    resolution: Resolution,
    snapshot: Snapshot,
    *,
    device_ids: Sequence[int] | None,
    output_device: int | None,
    set_device: int | None,
    module_device: str | None,
    batch_size: int | None,
) -> list[Finding]:
    """Predict ``torch.nn.DataParallel(model, device_ids, output_device)`` and its first forward.

    Args:
        resolution: which physical devices are cuda:0, cuda:1, … for the job.
        snapshot: the machine (names, UUIDs, memory, SM counts).
        device_ids: cuda ordinals given to DataParallel; None = torch's default (all visible).
        output_device: DataParallel's ``output_device``; None = ``device_ids[0]``.
        set_device: K when ``torch.cuda.set_device(K)`` runs first; None when not called.
        module_device: where the parameters are at the first forward (``cpu``,
            ``cuda``, ``cuda:K``); None = the current device, as ``.cuda()`` does.
        batch_size: the batch size of a forward, or None when unknown.

    Returns:
        Findings in execution order. Once a step is predicted to raise, later
        steps are not evaluated: the script would not reach them.

    Raises:
        GpudiagInputError: a malformed ``module_device`` or a batch size below 1.
    """
    if batch_size is not None and batch_size < 1:
        raise GpudiagInputError(f"--batch-size must be at least 1, got {batch_size}")
    module = parse_module_device(module_device)
    devices = resolution.devices
    n = len(devices)
    where = cvd_phrase(resolution)
    out: list[Finding] = []

    # torch.cuda.set_device (torch/cuda/__init__.py): "no-op if this argument is negative".
    current = 0
    if set_device is not None and set_device < 0:
        out.append(
            _find(
                "DP-SET-DEVICE-NEGATIVE",
                "warning",
                f"torch.cuda.set_device({set_device}) does nothing (torch skips negative "
                "ids), so the current device stays cuda:0.",
                "Pass the cuda ordinal you mean (0 .. visible count - 1), or drop the call.",
                None,
            )
        )
    elif set_device is not None:
        current = set_device

    if n == 0:
        # module None is model.cuda(): it initialises CUDA and raises (recorded by the
        # DataParallel harness on torch 2.11 under CUDA_VISIBLE_DEVICES='').
        wants_gpu = (
            device_ids is not None
            or (set_device is not None and set_device >= 0)
            or module is None
            or module[0] == "cuda"
        )
        cuda_call = (
            (set_device is not None and set_device >= 0) or module is None or (module[0] == "cuda")
        )
        if wants_gpu:
            out.append(
                _find(
                    "DP-NO-VISIBLE-GPU",
                    "error",
                    f"No GPU is visible ({where}; {len(snapshot.gpus)} GPU(s) on the machine), "
                    "but the job asks for one"
                    + (
                        f" (device_ids={ids_text(device_ids)}). DataParallel would ignore "
                        "device_ids and run on the CPU."
                        if device_ids is not None
                        else "."
                    ),
                    "Make GPUs visible (unset CUDA_VISIBLE_DEVICES or list the GPUs to use; "
                    "check the job's GPU request), or run on the CPU on purpose.",
                    no_gpu_text(snapshot, resolution.cuinit_error) if cuda_call else None,
                )
            )
        else:
            out.append(
                _find(
                    "DP-CPU-FALLBACK",
                    "warning",
                    f"No GPU is visible ({where}): torch.nn.DataParallel sets device_ids=[] "
                    "and silently runs the module on the CPU.",
                    "Make GPUs visible if the job is meant to use them.",
                    None,
                )
            )
        return out

    ordinal_text, ordinal_also = invalid_ordinal_for(snapshot)
    if set_device is not None and set_device >= n:
        out.append(
            _find(
                "DP-SET-DEVICE-INVALID",
                "error",
                f"torch.cuda.set_device({set_device}) names cuda:{set_device}, but only {n} "
                f"device(s) are visible {where}: {describe_devices(devices, snapshot)}.",
                f"{where}, {mapping_phrase(devices)}: call torch.cuda.set_device with "
                f"0..{n - 1}" + _physical_hint([set_device], resolution),
                ordinal_text,
                also=ordinal_also,
            )
        )
        return out

    module_ordinal: int | None = None  # None: parameters on the CPU
    if module is None:
        module_ordinal = current
    elif module[0] == "cuda":
        module_ordinal = current if module[1] is None else module[1]
    if module_ordinal is not None and module_ordinal >= n:
        out.append(
            _find(
                "DP-MODULE-DEVICE-INVALID",
                "error",
                f"The model is moved to cuda:{module_ordinal}, but only {n} device(s) are "
                f"visible {where}: {describe_devices(devices, snapshot)}.",
                f"{where}, {mapping_phrase(devices)}: use model.to('cuda:K') with K in 0..{n - 1}"
                + _physical_hint([module_ordinal], resolution),
                ordinal_text,
                also=ordinal_also,
            )
        )
        return out

    # DataParallel.__init__ (torch/nn/parallel/data_parallel.py). Its default ids and
    # get_device_properties' bounds come from torch.cuda.device_count().
    n_torch = torch_count_for(resolution, snapshot)
    ids = list(device_ids) if device_ids is not None else list(range(n_torch))
    if not ids and device_ids is None:
        out.append(
            _find(
                "DP-EMPTY-DEVICE-IDS",
                "error",
                f"torch.cuda.device_count() is 0 {where} (torch reads CUDA_VISIBLE_DEVICES "
                f"with its own parser), although CUDA exposes {n} device(s): "
                f"{describe_devices(devices, snapshot)}. DataParallel's default device_ids "
                "is then [] and DataParallel.__init__ raises IndexError reading device_ids[0].",
                "Write CUDA_VISIBLE_DEVICES as nvidia-smi -L prints UUIDs (lower-case hex "
                "with its dashes, nothing after) or as indices, so torch counts the GPUs too.",
                EMPTY_IDS,
            )
        )
        return out
    if not ids:
        out.append(
            _find(
                "DP-EMPTY-DEVICE-IDS",
                "error",
                "device_ids=[] is an explicit empty list: DataParallel.__init__ reads "
                "device_ids[0] and raises IndexError (it does not mean 'all GPUs').",
                f"{where}, {mapping_phrase(devices)}: pass device_ids=None for all of them, or "
                f"device_ids={ids_text(range(n))}.",
                EMPTY_IDS,
            )
        )
        return out
    if ids[0] < 0:
        out.append(
            _find(
                "DP-NEGATIVE-FIRST-ID",
                "error",
                f"device_ids[0] is {ids[0]}: DataParallel builds torch.device('cuda', {ids[0]}) "
                "for the module's home device, which torch rejects.",
                f"{where}, {mapping_phrase(devices)}: use device ids 0..{n - 1}, e.g. "
                f"device_ids={ids_text(range(n))}.",
                NEGATIVE_INDEX,
            )
        )
        return out
    # get_device_properties asserts 0 <= id < device_count() after CUDA initialised:
    # torch's NVML count before 2.12, CUDA's own from 2.12 (PR #175355).
    version = torch_version_tuple(_torch_version(snapshot))
    props_bound = n if version is None or version >= (2, 12) else n_torch
    invalid = [i for i in ids if i < 0 or i >= min(n, props_bound)]
    if invalid:
        # _check_balance -> _get_devices_properties -> torch.cuda.get_device_properties,
        # which asserts 0 <= id < device_count().
        suggestion = _suggest_ids(ids, resolution)
        if suggestion is None:
            valid = [i for i in ids if 0 <= i < n]
            suggestion = list(dict.fromkeys(valid)) or list(range(n))
        out.append(
            _find(
                "DP-INVALID-DEVICE-ID",
                "error",
                f"device_ids={ids_text(ids)} names {_join([f'cuda:{i}' for i in invalid])}, but "
                f"only {n} device(s) are visible {where}: {describe_devices(devices, snapshot)}. "
                "DataParallel's ids are CUDA ordinals under CUDA_VISIBLE_DEVICES, not "
                "nvidia-smi indices.",
                f"{where}, {mapping_phrase(devices)}: use device_ids={ids_text(suggestion)}."
                + (
                    f" torch.cuda.device_count() is {n_torch} here (torch reads "
                    "CUDA_VISIBLE_DEVICES with its own parser): write the value as nvidia-smi "
                    "prints it so torch counts every GPU."
                    if props_bound < n
                    else ""
                ),
                INVALID_DEVICE_ID
                if any(i < 0 or i >= props_bound for i in invalid)
                else PROPERTIES_ASSERT,
            )
        )
        return out

    chosen = [devices[i] for i in ids]
    imbalance = predict_imbalance(ids, [device_props(d, snapshot) for d in chosen])
    if imbalance is not None:
        weak, strong = imbalance
        keep = [
            i
            for i in dict.fromkeys(ids)
            if device_props(devices[i], snapshot) == device_props(devices[strong], snapshot)
        ]
        out.append(
            _find(
                "DP-IMBALANCE",
                "warning",
                f"torch will warn that {describe_device(devices[weak], snapshot)} has less "
                f"than 75% of the memory or SMs of {describe_device(devices[strong], snapshot)}; "
                "DataParallel splits the "
                "batch evenly, so the smaller GPU sets the pace and the memory limit.",
                f"Use only matching GPUs, e.g. device_ids={ids_text(keep)}, or set "
                "CUDA_VISIBLE_DEVICES to the matching physical GPUs "
                f"({_join([physical_label(devices[i]) for i in keep])}).",
                imbalance_text(weak, strong),
                subject=devices[weak].uuid,
            )
        )

    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        unique = list(dict.fromkeys(ids))
        out.append(
            _find(
                "DP-DUPLICATE-DEVICE-ID",
                "warning",
                f"device_ids={ids_text(ids)} repeats {_join([f'cuda:{i}' for i in dupes])}: "
                "torch replicates the module once per entry, so that GPU runs several replicas "
                "(more memory, no speed-up).",
                f"Use device_ids={ids_text(unique)}.",
                None,
            )
        )

    # DataParallel.__init__ moves the module itself only when there is one id.
    src = ids[0]
    if len(ids) > 1 and module_ordinal != src:
        found = "cpu" if module_ordinal is None else f"cuda:{module_ordinal}"
        placed = (
            "on the CPU"
            if module_ordinal is None
            else f"on {describe_device(devices[module_ordinal], snapshot)}"
        )
        reorder = (
            [module_ordinal] + [i for i in ids if i != module_ordinal]
            if module_ordinal is not None
            else None
        )
        fix = (
            f"Move the model to cuda:{src} before wrapping (model.to('cuda:{src}')), or call "
            f"torch.cuda.set_device({src}) before model.cuda()"
        )
        if reorder is not None:
            fix += f"; or start device_ids with the model's device: device_ids={ids_text(reorder)}"
        out.append(
            _find(
                "DP-MODULE-DEVICE-MISMATCH",
                "error",
                f"The model's parameters are {placed}, but "
                f"device_ids[0] is {describe_device(devices[src], snapshot)}. "
                "DataParallel over several GPUs does not move the module, so its first "
                "forward raises.",
                fix + ".",
                module_mismatch_text(src, found),
                subject=devices[src].uuid,
            )
        )
        return out

    out_dev = src if output_device is None else output_device
    # Only a multi-device forward gathers: a single-id DataParallel returns the
    # module's own output (DataParallel.forward).
    if len(ids) > 1:
        if out_dev == -1:
            out.append(
                _find(
                    "DP-OUTPUT-DEVICE-CPU",
                    "info",
                    "output_device=-1 gathers the outputs on the CPU "
                    "(torch/nn/parallel/comm.py::gather); torch warns that -1 is deprecated.",
                    "Use output_device='cpu' (or torch.device('cpu')) to say the same thing.",
                    CPU_OUTPUT_WARNING,
                )
            )
        elif out_dev < -1 or out_dev >= n:
            out.append(
                _find(
                    "DP-OUTPUT-DEVICE-INVALID",
                    "error",
                    f"output_device={out_dev} is not a visible device ({n} visible {where}: "
                    f"{describe_devices(devices, snapshot)}); the first forward fails when it "
                    "gathers the outputs there.",
                    f"Use output_device={src} (device_ids[0], the default) or another id in "
                    f"0..{n - 1}.",
                    ordinal_text
                    if out_dev >= n
                    else f"RuntimeError: Device index must be -1 or non-negative, got {out_dev}",
                    also=ordinal_also if out_dev >= n else (),
                )
            )
            return out
        elif out_dev not in ids:
            out.append(
                _find(
                    "DP-OUTPUT-DEVICE-OUTSIDE",
                    "warning",
                    f"output_device=cuda:{out_dev} ({describe_device(devices[out_dev], snapshot)}) "
                    f"runs no replica (device_ids={ids_text(ids)}): every output is copied there "
                    "and a CUDA context is created on it.",
                    f"Use output_device={src} (device_ids[0], the default), or add {out_dev} to "
                    "device_ids.",
                    None,
                )
            )

    if 0 not in ids and current == 0:
        out.append(
            _find(
                "DP-CUDA0-CONTEXT",
                "warning",
                f"cuda:0 ({describe_device(devices[0], snapshot)}) is not in "
                f"device_ids={ids_text(ids)} but is the current device (no "
                "torch.cuda.set_device), so the first CUDA call on the current device (inputs "
                "moved with .cuda(), CUDA RNG seeding, synchronize) creates a CUDA context "
                "there: typically a few hundred MiB of that GPU's memory, taken from whoever "
                "else uses it.",
                f"Call torch.cuda.set_device({src}) first, or set CUDA_VISIBLE_DEVICES="
                f"{_cvd_for(chosen)} so that the GPUs you use become cuda:0.. and pass "
                f"device_ids={ids_text(range(len(dict.fromkeys(ids))))}.",
                None,
                subject=devices[0].uuid,
            )
        )

    if batch_size is not None and len(ids) > 1:
        used = chunks_used(batch_size, len(ids))
        if used < len(ids):
            idle = ids[used:]
            out.append(
                _find(
                    "DP-BATCH-TOO-SMALL",
                    "warning",
                    f"A batch of {batch_size} is split with Tensor.chunk({len(ids)}) into "
                    f"{used} chunk(s), so {_join([f'cuda:{i}' for i in idle])} get no work "
                    "and sit idle.",
                    f"Use a batch size that is a multiple of {len(ids)} (at least {len(ids)}), "
                    "and drop_last=True in the DataLoader so the last batch is not short.",
                    None,
                )
            )

    out.append(
        _find(
            "DP-DEVICES",
            "info",
            f"DataParallel will use device_ids={ids_text(ids)} {where}: "
            f"{describe_devices(chosen, snapshot)}. The module and gathered outputs live on "
            f"cuda:{src}"
            + (f" (outputs on cuda:{out_dev})" if len(ids) > 1 and out_dev != src else "")
            + ".",
            None,
            None,
        )
    )
    return out


def _cvd_for(devices: Sequence[VisibleDevice]) -> str:
    # UUIDs would be unambiguous; the entries as written keep the fix readable.
    seen: list[str] = []
    for d in devices:
        text = d.mig_uuid or d.entry or d.uuid
        if text not in seen:
            seen.append(text)
    return ",".join(seen)


def _physical_hint(ordinals: Sequence[int], resolution: Resolution) -> str:
    mapped = _suggest_ids(ordinals, resolution)
    if mapped is None:
        return "."
    return (
        f"; physical GPU {_join([str(o) for o in ordinals])} is cuda:"
        f"{_join([str(m) for m in mapped])} here."
    )
