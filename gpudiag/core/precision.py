"""Precision settings that silently do nothing or break numerics on the job's GPUs.

Pure. Sources:

* TF32: NVIDIA's Ampere architecture whitepaper and the CUDA C Programming Guide
  (TF32 Tensor Core operations exist from compute capability 8.0); torch's
  "CUDA semantics" notes, "TensorFloat-32 (TF32) on Ampere (and later) devices":
  ``torch.backends.cuda.matmul.allow_tf32`` / ``torch.backends.cudnn.allow_tf32`` /
  ``torch.set_float32_matmul_precision('high')`` only change kernels on those GPUs;
  elsewhere nothing happens and nothing is reported.
* fp16 range: IEEE 754 binary16's largest finite value is 65504; bfloat16 keeps
  float32's 8-bit exponent (torch ``torch.finfo``). A model trained in bf16 can have
  activations beyond fp16's range, so fp16 autocast overflows to inf and the loss
  becomes NaN (Hugging Face Transformers docs, "Mixed precision": models pretrained
  in bf16 overflow in fp16; torch AMP docs: GradScaler skips steps with inf/NaN
  gradients). bf16 autocast needs compute capability 8.0+ (``torch.cuda.is_bf16_supported``).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudiag.core.grouping import group_label, group_subject
from gpudiag.core.health import parse_cc
from gpudiag.errors import GpudiagInputError
from gpudiag.findings.texts import HF_TF32_UNSUPPORTED
from gpudiag.model import Finding, Gpu, Resolution, Snapshot

MODEL_DTYPES = ("bf16", "fp16", "fp32")


def _visible(snapshot: Snapshot, resolution: Resolution) -> list[Gpu]:
    wanted = {d.nvml_index for d in resolution.devices}
    return [g for g in snapshot.gpus if g.nvml_index in wanted and not g.lost]


def _known(gpus: Sequence[Gpu]) -> list[tuple[Gpu, int]]:
    return [(g, cc) for g in gpus if (cc := parse_cc(g.compute_capability)) is not None]


def precision_findings(
    snapshot: Snapshot,
    resolution: Resolution,
    *,
    tf32: bool = False,
    amp: str | None = None,
    model_dtype: str | None = None,
) -> list[Finding]:
    """TF32 and fp16-overflow findings for the GPUs the job sees.

    Args:
        tf32: the job switches TF32 on.
        amp: the autocast dtype (``bf16``/``fp16``) or None.
        model_dtype: the dtype the model was trained in (``bf16``/``fp16``/``fp32``) or None.

    Raises:
        GpudiagInputError: an unknown ``model_dtype``.
    """
    if model_dtype is not None and model_dtype not in MODEL_DTYPES:
        raise GpudiagInputError(
            f"model_dtype must be one of {', '.join(MODEL_DTYPES)}, not {model_dtype!r}"
        )
    gpus = _known(_visible(snapshot, resolution))
    out: list[Finding] = []
    old = [g for g, cc in gpus if cc < 80]
    if tf32 and old:
        many = len(old) > 1
        ccs = ", ".join(sorted({g.compute_capability or "?" for g in old}))
        out.append(
            Finding(
                code="HEALTH-TF32-UNSUPPORTED",
                severity="warning",
                message=f"TF32 is switched on, but {group_label(old)} {'have' if many else 'has'} "
                f"compute capability {ccs}: TF32 needs 8.0+ (Ampere), so matmuls and "
                "convolutions there run in plain fp32, with no speed-up and no warning.",
                fix="Switch TF32 off for "
                + ("these GPUs" if many else "this GPU")
                + " (Hugging Face's --tf32 True refuses to start there; torch's allow_tf32 "
                "flags do nothing), and for speed use fp16 autocast (--amp fp16: "
                "torch.autocast('cuda', dtype=torch.float16) with a GradScaler) where they "
                "have tensor cores (7.0+), or run on compute capability 8.0+ GPUs.",
                predicts="no error and no speed-up: matmuls stay in fp32 (TF32 needs compute "
                "capability 8.0+)",
                subject=group_subject(old),
                # issue 20: the fix said the flag "can stay", but transformers raises.
                predicts_also=(
                    "with Hugging Face's TrainingArguments(tf32=True) / --tf32 True: "
                    + HF_TF32_UNSUPPORTED,
                ),
            )
        )
    if amp == "fp16" and model_dtype == "bf16" and gpus:
        capable = [g for g, cc in gpus if cc >= 80]
        others = [g for g, cc in gpus if cc < 80]
        predicts = (
            "loss becomes inf/NaN: activations of a model trained in bf16 exceed fp16's "
            "largest value 65504 (GradScaler then skips every step: 'Gradient overflow')"
        )
        message = (
            "The model was trained in bf16 but runs under fp16 autocast: bf16 keeps fp32's "
            "range, fp16 overflows above 65504, so activations turn into inf and the loss "
            "into NaN."
        )
        if capable:
            out.append(
                Finding(
                    code="HEALTH-AMP-FP16-OVERFLOW",
                    severity="warning",
                    message=f"{message} {group_label(capable)} "
                    f"{'support' if len(capable) > 1 else 'supports'} bf16 natively.",
                    fix="Use --amp bf16: torch.autocast('cuda', dtype=torch.bfloat16), no "
                    "GradScaler needed (Hugging Face: bf16=True instead of fp16=True).",
                    predicts=predicts,
                    subject=group_subject(capable),
                )
            )
        if others:
            out.append(
                Finding(
                    code="HEALTH-AMP-FP16-OVERFLOW",
                    severity="warning",
                    message=f"{message} {group_label(others)} "
                    f"{'have' if len(others) > 1 else 'has'} no native bf16 (below 8.0).",
                    fix="Train this model in fp32 on "
                    + ("these GPUs" if len(others) > 1 else "this GPU")
                    + ", or move it to compute capability 8.0+ GPUs and use --amp bf16.",
                    predicts=predicts,
                    subject=group_subject(others),
                )
            )
    return out
