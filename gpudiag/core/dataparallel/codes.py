"""The finding codes DataParallel's rules emit, and the one place that builds their findings."""

from __future__ import annotations

from gpudiag.model import Finding

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
