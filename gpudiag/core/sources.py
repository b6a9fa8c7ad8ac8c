"""The status of each fact source (NVML, torch, GPUtil) in a snapshot, and its findings.

Pure: a function of :attr:`~gpudiag.model.Snapshot.sources`. A source that is unavailable or
failed is reported once here; :mod:`gpudiag.core.inventory` reconciles what the sources saw.
"""

from __future__ import annotations

from gpudiag.model import Finding, Snapshot


def source_status(snapshot: Snapshot, name: str) -> tuple[str, str]:
    """(status, reason) of a source; the reason without a final period, since
    the messages quoting it end their own sentence."""
    src = snapshot.sources.get(name)
    if src is None:
        return "unknown", "not recorded"
    return src.status, (src.reason or "").rstrip(" .")


def source_findings(snapshot: Snapshot) -> list[Finding]:
    """A finding for each source (NVML, torch, GPUtil) that is unavailable or failed."""
    out: list[Finding] = []
    status, reason = source_status(snapshot, "nvml")
    if status == "unavailable":
        out.append(
            Finding(
                code="SRC-NVML-UNAVAILABLE",
                severity="warning",
                message=f"NVML is unavailable: {reason}. Without it gpudiag cannot see physical "
                "GPUs.",
                fix="Install the NVIDIA driver (it provides libnvidia-ml.so.1), or run "
                "gpudiag on a snapshot taken on the GPU node: `gpudiag snapshot -o F` "
                "there, then `gpudiag list --snapshot F`.",
                subject="nvml",
            )
        )
    elif status == "error":
        fix = "Check `nvidia-smi`; it fails the same way."
        if "mismatch" in reason:
            fix = (
                "Reboot the node (or reload the nvidia kernel modules) so the loaded "
                "driver matches the installed NVML library."
            )
        out.append(
            Finding(
                code="SRC-NVML-ERROR",
                severity="error",
                message=f"NVML failed: {reason}.",
                fix=fix,
                subject="nvml",
            )
        )
    for gpu in snapshot.gpus:
        if gpu.lost:
            what = f"GPU at nvidia-smi index {gpu.nvml_index}"
            if gpu.uuid:
                what += f" ({gpu.uuid})"
            out.append(
                Finding(
                    code="SRC-NVML-GPU-LOST",
                    severity="error",
                    message=f"{what} was lost while NVML queried it (NVMLError_GpuIsLost, usually "
                    "Xid 79: fallen off the bus); CUDA will not enumerate it.",
                    fix="Check `dmesg` for Xid errors; drain the node and reset the GPU "
                    "(`nvidia-smi -r -i N`) or reboot.",
                    subject=gpu.uuid or f"nvml:{gpu.nvml_index}",
                )
            )
    if status == "ok" and not snapshot.gpus:
        out.append(
            Finding(
                code="INV-NO-GPUS",
                severity="warning",
                message="NVML works but reports no GPU on this machine.",
                fix="Check the node's GPU allocation and `nvidia-smi -L`.",
            )
        )
    t_status, t_reason = source_status(snapshot, "torch")
    if t_status == "unavailable" and snapshot.torch is None and "not installed" in t_reason:
        out.append(
            Finding(
                code="SRC-TORCH-UNAVAILABLE",
                severity="warning",
                message=f"torch cannot be asked: {t_reason}.",
                fix="Install PyTorch in this environment, or run gpudiag with the job's Python.",
                subject="torch",
            )
        )
    elif t_status == "error":
        out.append(
            Finding(
                code="SRC-TORCH-ERROR",
                severity="error",
                message=f"torch failed: {t_reason}.",
                fix="Run `python -c 'import torch; torch.cuda.init()'` to see the full error.",
                subject="torch",
            )
        )
    g_status, g_reason = source_status(snapshot, "gputil")
    if g_status == "unavailable" and g_reason != "not asked":
        out.append(
            Finding(
                code="SRC-GPUTIL-UNAVAILABLE",
                severity="info",
                message=f"GPUtil cannot be used: {g_reason}.",
                fix=None,
                subject="gputil",
            )
        )
    elif g_status == "error":
        out.append(
            Finding(
                code="SRC-GPUTIL-ERROR",
                severity="warning",
                message=f"GPUtil failed: {g_reason}.",
                fix="Run `nvidia-smi` by hand; it likely prints an error.",
                subject="gputil",
            )
        )
    return out
