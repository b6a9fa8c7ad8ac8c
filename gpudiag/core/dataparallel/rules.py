"""The validator: DataParallel's construction and first forward, in torch's execution order.

Mirrors ``DataParallel.__init__``, ``DataParallel.forward`` and ``_check_balance``
(``torch/nn/parallel/data_parallel.py``, torch 2.13); the steps before the wrapper are in
:mod:`gpudiag.core.dataparallel.setup`. Every id is a ``cuda_ordinal``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from gpudiag.core.dataparallel.inputs import _cvd_for, _suggest_ids, parse_module_device
from gpudiag.core.dataparallel.predict import (
    chunks_used,
    device_props,
    predict_imbalance,
    torch_count_for,
)
from gpudiag.core.dataparallel.setup import predict_setup
from gpudiag.core.dataparallel.texts import (
    CPU_OUTPUT_WARNING,
    EMPTY_IDS,
    INVALID_DEVICE_ID,
    NEGATIVE_INDEX,
    imbalance_text,
    invalid_ordinal_for,
    module_mismatch_text,
    torch_version_of,
)
from gpudiag.core.describe import (
    cvd_phrase,
    describe_device,
    describe_devices,
    ids_text,
    mapping_phrase,
    physical_label,
)
from gpudiag.core.describe import join_and as _join
from gpudiag.errors import GpudiagInputError
from gpudiag.findings.texts import PROPERTIES_ASSERT, torch_version_tuple
from gpudiag.model import Finding, Resolution, Snapshot


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
        raise GpudiagInputError(f"batch_size must be at least 1, got {batch_size}")
    module = parse_module_device(module_device)
    devices = resolution.devices
    n = len(devices)
    where = cvd_phrase(resolution)
    out: list[Finding] = []
    state = predict_setup(
        resolution,
        snapshot,
        device_ids=device_ids,
        set_device=set_device,
        module=module,
        out=out,
    )
    if state is None:
        return out
    current, module_ordinal = state
    ordinal_text, ordinal_also = invalid_ordinal_for(snapshot)

    # DataParallel.__init__ (torch/nn/parallel/data_parallel.py). Its default ids and
    # get_device_properties' bounds come from torch.cuda.device_count().
    n_torch = torch_count_for(resolution, snapshot)
    ids = list(device_ids) if device_ids is not None else list(range(n_torch))
    if not ids and device_ids is None:
        out.append(
            Finding(
                code="DP-EMPTY-DEVICE-IDS",
                severity="error",
                message=f"torch.cuda.device_count() is 0 {where} (torch reads CUDA_VISIBLE_DEVICES "
                f"with its own parser), although CUDA exposes {n} device(s): "
                f"{describe_devices(devices, snapshot)}. DataParallel's default device_ids "
                "is then [] and DataParallel.__init__ raises IndexError reading device_ids[0].",
                fix="Write CUDA_VISIBLE_DEVICES as nvidia-smi -L prints UUIDs (lower-case hex "
                "with its dashes, nothing after) or as indices, so torch counts the GPUs too.",
                predicts=EMPTY_IDS,
            )
        )
        return out
    if not ids:
        out.append(
            Finding(
                code="DP-EMPTY-DEVICE-IDS",
                severity="error",
                message="device_ids=[] is an explicit empty list: DataParallel.__init__ reads "
                "device_ids[0] and raises IndexError (it does not mean 'all GPUs').",
                fix=f"{where}, {mapping_phrase(devices)}: pass device_ids=None for all of them, or "
                f"device_ids={ids_text(range(n))}.",
                predicts=EMPTY_IDS,
            )
        )
        return out
    if ids[0] < 0:
        out.append(
            Finding(
                code="DP-NEGATIVE-FIRST-ID",
                severity="error",
                message=f"device_ids[0] is {ids[0]}: DataParallel builds torch.device('cuda', "
                f"{ids[0]}) "
                "for the module's home device, which torch rejects.",
                fix=f"{where}, {mapping_phrase(devices)}: use device ids 0..{n - 1}, e.g. "
                f"device_ids={ids_text(range(n))}.",
                predicts=NEGATIVE_INDEX,
            )
        )
        return out
    # get_device_properties asserts 0 <= id < device_count() after CUDA initialised:
    # torch's NVML count before 2.12, CUDA's own from 2.12 (PR #175355).
    version = torch_version_tuple(torch_version_of(snapshot))
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
            Finding(
                code="DP-INVALID-DEVICE-ID",
                severity="error",
                message=f"device_ids={ids_text(ids)} names "
                f"{_join([f'cuda:{i}' for i in invalid])}, but "
                f"only {n} device(s) are visible {where}: {describe_devices(devices, snapshot)}. "
                "DataParallel's ids are CUDA ordinals under CUDA_VISIBLE_DEVICES, not "
                "nvidia-smi indices.",
                fix=f"{where}, {mapping_phrase(devices)}: use device_ids={ids_text(suggestion)}."
                + (
                    f" torch.cuda.device_count() is {n_torch} here (torch reads "
                    "CUDA_VISIBLE_DEVICES with its own parser): write the value as nvidia-smi "
                    "prints it so torch counts every GPU."
                    if props_bound < n
                    else ""
                ),
                predicts=INVALID_DEVICE_ID
                if any(i < 0 or i >= props_bound for i in invalid)
                else PROPERTIES_ASSERT,
            )
        )
        return out

    chosen = [devices[i] for i in ids]
    # Linear in device_ids (issue 21: a repeated id used to be counted, and its
    # properties looked up, once per entry): each distinct id once.
    distinct = list(dict.fromkeys(ids))
    props_of = {i: device_props(devices[i], snapshot) for i in distinct}
    imbalance = predict_imbalance(ids, [props_of[i] for i in ids])
    if imbalance is not None:
        weak, strong = imbalance
        keep = [i for i in distinct if props_of[i] == props_of[strong]]
        out.append(
            Finding(
                code="DP-IMBALANCE",
                severity="warning",
                message=f"torch will warn that {describe_device(devices[weak], snapshot)} has less "
                f"than 75% of the memory or SMs of {describe_device(devices[strong], snapshot)}; "
                "DataParallel splits the "
                "batch evenly, so the smaller GPU sets the pace and the memory limit.",
                fix=f"Use only matching GPUs, e.g. device_ids={ids_text(keep)}, or set "
                "CUDA_VISIBLE_DEVICES to the matching physical GPUs "
                f"({_join([physical_label(devices[i]) for i in keep])}).",
                predicts=imbalance_text(weak, strong),
                subject=devices[weak].uuid,
            )
        )

    dupes = sorted(i for i, count in Counter(ids).items() if count > 1)
    if dupes:
        unique = distinct
        out.append(
            Finding(
                code="DP-DUPLICATE-DEVICE-ID",
                severity="warning",
                message=f"device_ids={ids_text(ids)} repeats "
                f"{_join([f'cuda:{i}' for i in dupes])}: "
                "torch replicates the module once per entry, so that GPU runs several replicas "
                "(more memory, no speed-up).",
                fix=f"Use device_ids={ids_text(unique)}.",
                predicts=None,
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
            Finding(
                code="DP-MODULE-DEVICE-MISMATCH",
                severity="error",
                message=f"The model's parameters are {placed}, but "
                f"device_ids[0] is {describe_device(devices[src], snapshot)}. "
                "DataParallel over several GPUs does not move the module, so its first "
                "forward raises.",
                fix=fix + ".",
                predicts=module_mismatch_text(src, found),
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
                Finding(
                    code="DP-OUTPUT-DEVICE-CPU",
                    severity="info",
                    message="output_device=-1 gathers the outputs on the CPU "
                    "(torch/nn/parallel/comm.py::gather); torch warns that -1 is deprecated.",
                    fix="Use output_device='cpu' (or torch.device('cpu')) to say the same thing.",
                    predicts=CPU_OUTPUT_WARNING,
                )
            )
        elif out_dev < -1 or out_dev >= n:
            out.append(
                Finding(
                    code="DP-OUTPUT-DEVICE-INVALID",
                    severity="error",
                    message=f"output_device={out_dev} is not a visible device ({n} visible "
                    f"{where}: "
                    f"{describe_devices(devices, snapshot)}); the first forward fails when it "
                    "gathers the outputs there.",
                    fix=f"Use output_device={src} (device_ids[0], the default) or another id in "
                    f"0..{n - 1}.",
                    predicts=ordinal_text
                    if out_dev >= n
                    else f"RuntimeError: Device index must be -1 or non-negative, got {out_dev}",
                    predicts_also=ordinal_also if out_dev >= n else (),
                )
            )
            return out
        elif out_dev not in ids:
            out.append(
                Finding(
                    code="DP-OUTPUT-DEVICE-OUTSIDE",
                    severity="warning",
                    message=f"output_device=cuda:{out_dev} "
                    f"({describe_device(devices[out_dev], snapshot)}) "
                    f"runs no replica (device_ids={ids_text(ids)}): every output is copied there "
                    "and a CUDA context is created on it.",
                    fix=f"Use output_device={src} (device_ids[0], the default), or add {out_dev} "
                    "to "
                    "device_ids.",
                    predicts=None,
                )
            )

    if 0 not in ids and current == 0:
        out.append(
            Finding(
                code="DP-CUDA0-CONTEXT",
                severity="warning",
                message=f"cuda:0 ({describe_device(devices[0], snapshot)}) is not in "
                f"device_ids={ids_text(ids)} but is the current device (no "
                "torch.cuda.set_device), so the first CUDA call on the current device (inputs "
                "moved with .cuda(), CUDA RNG seeding, synchronize) creates a CUDA context "
                "there: typically a few hundred MiB of that GPU's memory, taken from whoever "
                "else uses it.",
                fix=f"Call torch.cuda.set_device({src}) first, or set CUDA_VISIBLE_DEVICES="
                f"{_cvd_for(chosen)} so that the GPUs you use become cuda:0.. and pass "
                f"device_ids={ids_text(range(len(dict.fromkeys(ids))))}.",
                predicts=None,
                subject=devices[0].uuid,
            )
        )

    if batch_size is not None and len(ids) > 1:
        used = chunks_used(batch_size, len(ids))
        if used < len(ids):
            idle = ids[used:]
            out.append(
                Finding(
                    code="DP-BATCH-TOO-SMALL",
                    severity="warning",
                    message=f"A batch of {batch_size} is split with Tensor.chunk({len(ids)}) into "
                    f"{used} chunk(s), so {_join([f'cuda:{i}' for i in idle])} get no work "
                    "and sit idle.",
                    fix=f"Use a batch size that is a multiple of {len(ids)} (at least {len(ids)}), "
                    "and drop_last=True in the DataLoader so the last batch is not short.",
                    predicts=None,
                )
            )

    out.append(
        Finding(
            code="DP-DEVICES",
            severity="info",
            message=f"DataParallel will use device_ids={ids_text(ids)} {where}: "
            # Each device once: a repeated id is DP-DUPLICATE-DEVICE-ID's to say.
            f"{describe_devices([devices[i] for i in distinct], snapshot)}. "
            "The module and gathered outputs live on "
            f"cuda:{src}"
            + (f" (outputs on cuda:{out_dev})" if len(ids) > 1 and out_dev != src else "")
            + ".",
            fix=None,
            predicts=None,
        )
    )
    return out
