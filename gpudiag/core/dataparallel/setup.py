"""The steps before DataParallel is built: ``torch.cuda.set_device`` and moving the model.

Mirrors ``torch/cuda/__init__.py`` (``set_device``) and CUDA's initialisation on the first
``.cuda()`` / ``.to('cuda:K')``, in the order a script runs them.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudiag.core.dataparallel.inputs import _physical_hint
from gpudiag.core.dataparallel.texts import invalid_ordinal_for, no_gpu_text
from gpudiag.core.describe import cvd_phrase, describe_devices, ids_text, mapping_phrase
from gpudiag.model import Finding, Resolution, Snapshot


def predict_setup(
    resolution: Resolution,
    snapshot: Snapshot,
    *,
    device_ids: Sequence[int] | None,
    set_device: int | None,
    module: tuple[str, int | None] | None,
    out: list[Finding],
) -> tuple[int, int | None] | None:
    """Findings of the steps before ``DataParallel(...)``, appended to ``out``.

    Returns:
        (the current device, the model's cuda ordinal or None for the CPU), or None when a
        step is predicted to raise: the script would not reach DataParallel.
    """
    devices = resolution.devices
    n = len(devices)
    where = cvd_phrase(resolution)

    # torch.cuda.set_device (torch/cuda/__init__.py): "no-op if this argument is negative".
    current = 0
    if set_device is not None and set_device < 0:
        out.append(
            Finding(
                code="DP-SET-DEVICE-NEGATIVE",
                severity="warning",
                message=f"torch.cuda.set_device({set_device}) does nothing (torch skips negative "
                "ids), so the current device stays cuda:0.",
                fix="Pass the cuda ordinal you mean (0 .. visible count - 1), or drop the call.",
                predicts=None,
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
                Finding(
                    code="DP-NO-VISIBLE-GPU",
                    severity="error",
                    message=f"No GPU is visible ({where}; {len(snapshot.gpus)} GPU(s) on the "
                    "machine), "
                    "but the job asks for one"
                    + (
                        f" (device_ids={ids_text(device_ids)}). DataParallel would ignore "
                        "device_ids and run on the CPU."
                        if device_ids is not None
                        else "."
                    ),
                    fix="Make GPUs visible (unset CUDA_VISIBLE_DEVICES or list the GPUs to use; "
                    "check the job's GPU request), or run on the CPU on purpose.",
                    predicts=no_gpu_text(snapshot, resolution.cuinit_error) if cuda_call else None,
                )
            )
        else:
            out.append(
                Finding(
                    code="DP-CPU-FALLBACK",
                    severity="warning",
                    message=f"No GPU is visible ({where}): torch.nn.DataParallel sets "
                    "device_ids=[] "
                    "and silently runs the module on the CPU.",
                    fix="Make GPUs visible if the job is meant to use them.",
                    predicts=None,
                )
            )
        return None

    ordinal_text, ordinal_also = invalid_ordinal_for(snapshot)
    if set_device is not None and set_device >= n:
        out.append(
            Finding(
                code="DP-SET-DEVICE-INVALID",
                severity="error",
                message=f"torch.cuda.set_device({set_device}) names cuda:{set_device}, but only "
                f"{n} "
                f"device(s) are visible {where}: {describe_devices(devices, snapshot)}.",
                fix=f"{where}, {mapping_phrase(devices)}: call torch.cuda.set_device with "
                f"0..{n - 1}" + _physical_hint([set_device], resolution),
                predicts=ordinal_text,
                predicts_also=ordinal_also,
            )
        )
        return None

    module_ordinal: int | None = None  # None: parameters on the CPU
    if module is None:
        module_ordinal = current
    elif module[0] == "cuda":
        module_ordinal = current if module[1] is None else module[1]
    if module_ordinal is not None and module_ordinal >= n:
        out.append(
            Finding(
                code="DP-MODULE-DEVICE-INVALID",
                severity="error",
                message=f"The model is moved to cuda:{module_ordinal}, but only {n} device(s) are "
                f"visible {where}: {describe_devices(devices, snapshot)}.",
                fix=f"{where}, {mapping_phrase(devices)}: use model.to('cuda:K') with K in "
                f"0..{n - 1}" + _physical_hint([module_ordinal], resolution),
                predicts=ordinal_text,
                predicts_also=ordinal_also,
            )
        )
        return None
    return current, module_ordinal
