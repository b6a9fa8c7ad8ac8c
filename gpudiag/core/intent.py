"""Severity follows the job's intent: findings adjusted to what the request says.

Pure: a function of the findings, the :class:`~gpudiag.core.request.CheckRequest`,
the resolution and the launcher environment, applied by :func:`gpudiag.core.check.run_check`
after every rule has run. Each step is a structured replacement of whole findings (code,
severity, message), never a rewrite of rendered text (issue 16), and each answers a
false alarm or a contradiction of issue 19 or 20.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpudiag.core.request import CheckRequest
from gpudiag.core.visibility.entries import hides_every_gpu_on_purpose
from gpudiag.model import Finding, Resolution


def as_the_job_intends(
    findings: list[Finding],
    r: CheckRequest,
    resolution: Resolution,
    env: Mapping[str, str],
) -> list[Finding]:
    """The findings, adjusted to the job the request describes (see each step)."""
    findings = list(findings)
    if any(f.code == "INV-TORCH-SEES-NONE" and f.severity == "error" for f in findings):
        findings = [_plan_without_gpus(f) for f in findings]
    if not _uses_env_rendezvous(r) and "RANK" not in env:
        findings = [_launcher_env_for_other_jobs(f) for f in findings]
    if _cpu_job(r) and hides_every_gpu_on_purpose(resolution.spec):
        findings = [_cpu_job_no_devices(f) if f.code == "VIS-NO-DEVICES" else f for f in findings]
    if (
        not resolution.devices
        and not _cpu_job(r)
        and not any(f.severity == "error" for f in findings)
    ):
        # A GPU check with no GPU is not OK (nvidia-smi, gpustat and nvitop exit 1 too;
        # issue 20): the other findings say why, this makes the gate fail.
        findings.append(
            Finding(
                code="CHECK-NO-GPU",
                severity="error",
                message="No CUDA device is visible to the job: torch.cuda.is_available() is "
                "False, so a GPU job fails at its first CUDA call or runs on the CPU.",
                fix="Run the job where GPUs are (the other findings say why there are none "
                "here). A CPU job with torch.distributed: check it with --backend gloo.",
                predicts=None,
            )
        )
    return findings


def _plan_without_gpus(finding: Finding) -> Finding:
    """A DataParallel/DDP plan when torch itself sees no GPU (INV-TORCH-SEES-NONE).

    The plans map devices by CUDA's rules; handing out GPUs that torch cannot use
    contradicted the error in the same report (issue 20).
    """
    if finding.code == "DP-DEVICES":
        message = (
            "DataParallel gets no GPU: torch sees none (INV-TORCH-SEES-NONE), so it keeps "
            "the module on the CPU, and the script's .cuda()/.to('cuda') calls fail first."
        )
    elif finding.code == "DDP-PLAN":
        message = (
            "No rank gets a GPU: torch sees none (INV-TORCH-SEES-NONE), so every rank's "
            "torch.cuda.set_device(local_rank) fails."
        )
    else:
        return finding
    return Finding(code=finding.code, severity=finding.severity, message=message)


def _uses_env_rendezvous(r: CheckRequest) -> bool:
    """The request says the job uses torch's env:// rendezvous: a DDP option,
    ``--launched``, or what the script reads (issue 19)."""
    return bool(
        r.launched
        or r.script_reads
        or r.init_rank_args
        or r.nproc_per_node is not None
        or r.backend is not None
        or r.ddp_devices is not None
        or r.set_device_per_rank is not None
    )


def _launcher_env_for_other_jobs(finding: Finding) -> Finding:
    """DDP-LAUNCHER-ENV-MISSING inside mpirun (or srun) for a job that never said it
    uses torch's rendezvous: Horovod, nccl-tests and NCCL-through-pybind jobs read
    their launcher's own variables, so ``mpirun -n 2 gpudiag check`` failed on them
    (issue 19). It stays, as info, for a torch job to read."""
    if finding.code != "DDP-LAUNCHER-ENV-MISSING" or finding.severity == "info":
        return finding
    return Finding(
        code=finding.code,
        severity="info",
        message="If the job uses torch's env:// rendezvous (init_process_group): "
        + finding.message[:1].lower()
        + finding.message[1:],
        fix=finding.fix,
        predicts=finding.predicts,
        subject=finding.subject,
    )


def _cpu_job(r: CheckRequest) -> bool:
    """The request describes a CPU job: backend gloo, and nothing that needs a GPU."""
    gpu_inputs = (
        r.device_ids, r.output_device, r.set_device, r.set_device_per_rank, r.ddp_devices,
        r.amp, r.expect_gpus or None,
    )  # fmt: skip
    module_on_gpu = r.module_device is not None and not r.module_device.startswith("cpu")
    return (
        r.backend == "gloo"
        and all(v is None for v in gpu_inputs)
        and not (r.dataparallel or r.tf32 or module_on_gpu)
    )


def _cpu_job_no_devices(finding: Finding) -> Finding:
    """VIS-NO-DEVICES for a job that hides the GPUs on purpose to train on the CPU.

    Severity follows intent (issue 20): ``--visible '' --backend gloo`` describes a CPU
    DDP job, which is what it gets; cuInit still fails, so torch's CUDA calls would.
    """
    return Finding(
        code=finding.code,
        severity="info",
        message=finding.message.split(":", 1)[0] + ", as a CPU job (backend gloo) intends: "
        "torch.cuda.is_available() is False and every rank runs on the CPU.",
        fix=None,
        predicts=finding.predicts,
        subject=finding.subject,
    )
