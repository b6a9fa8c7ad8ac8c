"""Where torch's reading of ``CUDA_VISIBLE_DEVICES`` differs from CUDA's (VIS-TORCH-*)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gpudiag.core.visibility.entries import quote_value as _q
from gpudiag.core.visibility.torch_reading import TORCH_NVML_FUNCTIONS, torch_view
from gpudiag.findings.texts import (
    INVALID_DEVICE_ID,
    INVALID_ORDINAL_MESSAGE,
    PROPERTIES_ASSERT,
    cuda_error_also,
    cuinit_failure_text,
    invalid_ordinal,
)
from gpudiag.model import Finding, Snapshot, VisibleDevice


def torch_findings(
    spec: str | None,
    devices: Sequence[VisibleDevice],
    snapshot: Snapshot,
    cuinit_error: str | None,
) -> list[Finding]:
    view = torch_view(spec, snapshot)
    findings: list[Finding] = []
    shown = "unset" if spec is None else _q(spec)
    if view.raises is not None:
        return [
            Finding(
                code="VIS-TORCH-RAISES",
                severity="error",
                message=f"With CUDA_VISIBLE_DEVICES={shown}, torch.cuda.device_count() (and "
                f"everything calling it) raises {view.raises} (torch's parser calls int() "
                f"on a sign with no digit after it). CUDA itself exposes {len(devices)} "
                "device(s).",
                fix="Remove the entry with a lone '+' or '-' (ranges like 0-3 are not "
                "supported either: list indices, e.g. 0,1,2,3).",
                predicts=view.raises,
                subject="CUDA_VISIBLE_DEVICES",
            )
        ]
    if view.count is not None and view.count != len(devices):
        findings.append(
            _torch_count_finding(shown, view.count, devices, snapshot, cuinit_error, spec)
        )
    if view.nvml_indices is not None:
        wrong = [
            (d, view.nvml_indices[d.cuda_ordinal])
            for d in devices
            if d.mig_uuid is None
            and d.cuda_ordinal < len(view.nvml_indices)
            # Past torch's own count torch refuses the device before asking NVML.
            and (view.count is None or d.cuda_ordinal < view.count)
            and view.nvml_indices[d.cuda_ordinal] != d.nvml_index
        ]
        if wrong:
            text = ", ".join(
                f"cuda:{d.cuda_ordinal} → nvidia-smi GPU {n} (it is GPU {d.nvml_index})"
                for d, n in wrong
            )
            findings.append(
                Finding(
                    code="VIS-TORCH-NVML-ORDER",
                    severity="warning",
                    message="torch's NVML-based functions ("
                    + ", ".join(TORCH_NVML_FUNCTIONS)
                    + ") take CUDA_VISIBLE_DEVICES integers as nvidia-smi indices and ignore "
                    f"CUDA_DEVICE_ORDER, so they would read the wrong GPU: {text}.",
                    fix=_nvml_order_fix(snapshot),
                    subject="CUDA_VISIBLE_DEVICES",
                )
            )
    return findings


def _nvml_order_fix(snapshot: Snapshot) -> str:
    """What makes torch's NVML functions read the right GPU.

    PCI_BUS_ID makes CUDA number the GPUs as nvidia-smi does, unless a lost GPU shifts
    CUDA's numbering: then only UUIDs do (issue 20: the fix said PCI_BUS_ID where it
    was already set, and the warning stayed).
    """
    lost = [g.nvml_index for g in snapshot.gpus if g.lost]
    if lost:
        return (
            "Select GPUs by UUID (`nvidia-smi -L`): lost GPU "
            + ", ".join(map(str, lost))
            + " shifts CUDA's numbering against nvidia-smi's, whatever CUDA_DEVICE_ORDER says."
        )
    return "Set CUDA_DEVICE_ORDER=PCI_BUS_ID, or select GPUs by UUID."


_TORCH_COUNT_FIX = (
    "Write CUDA_VISIBLE_DEVICES so torch and CUDA read it alike: distinct, valid, "
    "comma-separated indices, or UUIDs exactly as `nvidia-smi -L` prints them ('GPU-', "
    "lower-case hex with its dashes, nothing after), no spaces, no MIG mixed with GPUs."
)


#: The newest torch the version model knows (torch_reading.py): "upgrade" means to it.
CURRENT_TORCH = "2.13.0"


def _count_fix(spec: str | None, cuda_count: int, snapshot: Snapshot) -> str:
    """The fix that makes torch count what CUDA exposes."""
    if spec is None:
        return _unset_count_fix(snapshot)
    version = snapshot.torch.version if snapshot.torch is not None else None
    if version is not None and snapshot.torch is not None:
        # A current torch (the version model's newest reading) counts it as CUDA does:
        # the value is right and the old torch's parser is the problem (issue 20: the fix
        # for a MIG UUID under torch 1.13 said to write the UUID as nvidia-smi does).
        current = replace(snapshot, torch=replace(snapshot.torch, version=CURRENT_TORCH))
        if torch_view(spec, current).count in (None, cuda_count):
            return (
                f"Upgrade torch: {CURRENT_TORCH} reads this value as CUDA does, torch "
                f"{version} does not. Or write CUDA_VISIBLE_DEVICES in a form torch {version} "
                "reads (integer indices)."
            )
    return _TORCH_COUNT_FIX


def _unset_count_fix(snapshot: Snapshot) -> str:
    """The fix when CUDA_VISIBLE_DEVICES is unset: there is no value to rewrite (issue 20:
    the advice on how to write it did not apply), so say which value to set."""
    lost = [g.nvml_index for g in snapshot.gpus if g.lost]
    if lost:
        return (
            "Set CUDA_VISIBLE_DEVICES to the healthy GPUs' UUIDs (`nvidia-smi -L`): torch "
            f"also counts lost GPU {', '.join(map(str, lost))}, CUDA does not; or reset the "
            "GPU or reboot to bring it back."
        )
    if any(g.mig_enabled and g.mig_devices for g in snapshot.gpus):
        return (
            "Set CUDA_VISIBLE_DEVICES to the MIG device to use, by its UUID (MIG-…, from "
            "`nvidia-smi -L`): a CUDA process enumerates one MIG device, torch counts more."
        )
    return (
        "Set CUDA_VISIBLE_DEVICES to the GPUs to use, by UUID (`nvidia-smi -L`), so torch "
        "and CUDA count the same devices."
    )


def _torch_count_finding(
    shown: str,
    torch_count: int,
    devices: Sequence[VisibleDevice],
    snapshot: Snapshot,
    cuinit_error: str | None,
    spec: str | None = "",
) -> Finding:
    """torch.cuda.device_count() (from NVML, before CUDA initialises) differs from CUDA.

    torch >= 1.13 counts devices with NVML and its own parser
    (``torch.cuda._device_count_nvml``); CUDA initialises later with the driver's
    reading. Recorded on torch 2.11 / driver 580: torch counts 1 and the first CUDA
    call raises where cuInit fails; torch counts 0 while the driver enumerates
    the GPU for upper-case, dash-free, over-long UUIDs and 2^32.
    """
    cuda_count = len(devices)
    fix = _count_fix(spec, cuda_count, snapshot)
    head = (
        f"With CUDA_VISIBLE_DEVICES={shown}, torch.cuda.device_count() returns {torch_count} "
        f"(torch reads the value itself, with NVML, before CUDA initialises)"
    )
    version = snapshot.torch.version if snapshot.torch is not None else None
    if cuda_count == 0:
        return Finding(
            code="VIS-TORCH-COUNT",
            severity="warning",
            message=f"{head}, but CUDA exposes no device: torch.cuda.is_available() is False "
            "and the first CUDA call raises.",
            fix=fix,
            predicts=cuinit_failure_text(cuinit_error),
            subject="CUDA_VISIBLE_DEVICES",
        )
    if torch_count == 0:
        return Finding(
            code="VIS-TORCH-COUNT",
            severity="error",
            message=f"{head}, but CUDA exposes {cuda_count}: torch believes there is no GPU, "
            "so code that counts devices (DataParallel, spawn loops, "
            "torchrun --nproc-per-node=gpu) silently runs on the CPU, and "
            "torch.cuda.get_device_properties(0) fails.",
            fix=fix,
            predicts=INVALID_DEVICE_ID,
            subject="CUDA_VISIBLE_DEVICES",
        )
    more = torch_count > cuda_count
    return Finding(
        code="VIS-TORCH-COUNT",
        severity="warning",
        message=f"{head}, but CUDA exposes {cuda_count}; code that sizes its work from it "
        "(DataParallel, torchrun --nproc-per-node=gpu, spawn loops) "
        + (f"fails on cuda:{cuda_count}." if more else "leaves GPUs unused."),
        fix=fix,
        # get_device_properties (DataParallel) asserts; set_device(k) is a CUDA error.
        predicts=PROPERTIES_ASSERT if more else None,
        predicts_also=(
            (
                f"torch.cuda.set_device({cuda_count}): {invalid_ordinal(version)}",
                *cuda_error_also(version, INVALID_ORDINAL_MESSAGE),
            )
            if more
            else ()
        ),
        subject="CUDA_VISIBLE_DEVICES",
    )
