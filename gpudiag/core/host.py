"""Why no GPU is reachable, and environment settings that break CUDA before the job runs.

Pure: reads a snapshot's ``host`` facts (schema 1.1) and an environment mapping.
An older snapshot has no ``host``: these rules then stay silent and the
inventory's ``SRC-NVML-UNAVAILABLE`` speaks instead.

Sources:

* torch 2.13 ``c10/cuda/CUDAFunctions.cpp`` (``device_count_impl``): with no CUDA
  driver (``cudaErrorInsufficientDriver`` and driver version 0) torch raises
  "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU
  and installed a driver from http://www.nvidia.com/Download/index.aspx"; a CPU
  build raises "Torch not compiled with CUDA enabled" (``torch/cuda/__init__.py``).
* NVIDIA Container Toolkit docs: a container reaches GPUs only when started with
  ``--gpus``/``--runtime=nvidia`` (Docker), CDI ``--device nvidia.com/gpu=all``
  (Podman) or an ``nvidia.com/gpu`` resource limit (Kubernetes device plugin); the
  runtime then injects ``/dev/nvidia*``, the driver libraries and
  ``/proc/driver/nvidia``. ``nvidia/cuda`` images set ``NVIDIA_VISIBLE_DEVICES``
  themselves, so the variable alone does not give GPU access.
* NVIDIA's "CUDA on WSL" guide: WSL 2 reaches the GPU through ``/dev/dxg``.
* torch ``torch/csrc/profiler/kineto_client_interface.cpp`` (``global_kineto_init``,
  pytorch main, 2026): when ``KINETO_USE_DAEMON`` is set at all (any value,
  ``has_value()``), ``import torch`` calls ``libkineto_init(cpuOnly=false)`` on a
  CUDA build (not on macOS); pytorch/pytorch#171804: this initialises CUDA at
  import, so ``CUDA_VISIBLE_DEVICES`` set later in the script is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpudiag.findings.texts import NCCL_DUPLICATE_GPU, NO_DRIVER, NOT_COMPILED
from gpudiag.model import Finding, HostInfo, Snapshot

_CONTAINER_FIX = (
    "Start the container with GPU access: docker run --gpus all (NVIDIA Container Toolkit) "
    "or --runtime=nvidia; podman run --device nvidia.com/gpu=all; in Kubernetes, request "
    "nvidia.com/gpu in resources.limits (and runtimeClassName: nvidia where the cluster "
    "uses one). Installing a driver inside the container does not help."
)


def _gpu_reachable(snapshot: Snapshot) -> bool:
    """Whether NVML or torch reached a GPU: then none of the no-GPU rules apply."""
    nvml = snapshot.sources.get("nvml")
    if snapshot.gpus or (nvml is not None and nvml.status == "ok"):
        return True
    torch = snapshot.torch
    return torch is not None and bool(torch.cuda_available or torch.devices)


def _predicts(snapshot: Snapshot) -> str:
    torch = snapshot.torch
    return NOT_COMPILED if torch is not None and torch.cpu_only else NO_DRIVER


def _nvml_library_missing(snapshot: Snapshot) -> bool:
    """NVML's library could not be loaded (gpudiag.backends.nvml words it so)."""
    nvml = snapshot.sources.get("nvml")
    return nvml is not None and "library not found" in (nvml.reason or "")


def _nvml_reason(snapshot: Snapshot) -> str:
    nvml = snapshot.sources.get("nvml")
    return f" (NVML: {nvml.reason})" if nvml is not None and nvml.reason else ""


def with_host_findings(findings: Sequence[Finding], snapshot: Snapshot) -> list[Finding]:
    """``findings`` plus :func:`host_findings`, which replace SRC-NVML-UNAVAILABLE.

    A HOST- finding says which of "container without GPU access", "no NVIDIA GPU"
    and "driver missing" this is; the generic "NVML unavailable" would only repeat
    it less precisely. Used by ``list`` and ``check`` alike.
    """
    host = host_findings(snapshot)
    if not host:
        return list(findings)
    return [f for f in findings if f.code != "SRC-NVML-UNAVAILABLE"] + host


def host_findings(snapshot: Snapshot) -> list[Finding]:
    """Which of "container without GPU access", "no NVIDIA GPU" and "driver missing" it is.

    Silent when a GPU was reached, or when the snapshot has no host facts.
    """
    host = snapshot.host
    if host is None or _gpu_reachable(snapshot):
        return []
    if host.platform == "Darwin":
        return [
            Finding(
                code="HOST-NO-NVIDIA-GPU",
                severity="warning",
                message="This is macOS: it has no NVIDIA GPU support and torch has no CUDA there"
                f"{_nvml_reason(snapshot)}.",
                fix="Run CUDA jobs on a Linux or Windows machine with an NVIDIA GPU; on a Mac use "
                "torch.device('mps') or the CPU, and backend='gloo' for torch.distributed.",
                predicts=NOT_COMPILED,
            )
        ]
    has_devices = bool(host.dev_nvidia) or bool(host.dev_dxg)
    marks = host.container_marks or ()
    pci = host.nvidia_pci_gpus
    if marks and host.dev_nvidia is not None and not has_devices:
        return [_container_no_devices(snapshot, host, marks)]
    if marks and has_devices and not host.proc_driver_nvidia and not host.dev_dxg:
        caps = host.nvidia_env.get("NVIDIA_DRIVER_CAPABILITIES")
        return [
            Finding(
                code="HOST-CONTAINER-NO-GPU",
                severity="error",
                message=f"This is a container ({', '.join(marks)}) with NVIDIA device files "
                f"({', '.join('/dev/' + d for d in host.dev_nvidia or ())}) but without the "
                "driver the NVIDIA container runtime mounts (no /proc/driver/nvidia, no NVML)"
                + (f"; NVIDIA_DRIVER_CAPABILITIES={caps}" if caps is not None else "")
                + f"{_nvml_reason(snapshot)}. The devices were passed by hand, not by the runtime.",
                fix="Start the container through the NVIDIA runtime (docker run --gpus all, "
                "--runtime=nvidia) instead of --device /dev/nvidia0, and keep "
                "NVIDIA_DRIVER_CAPABILITIES at compute,utility or all.",
                predicts=_predicts(snapshot),
            )
        ]
    if marks and has_devices and host.proc_driver_nvidia and _nvml_library_missing(snapshot):
        # A --privileged container: the host's device files and /proc/driver/nvidia show
        # through, the driver's libraries do not; "install the driver" was the only
        # finding (issue 20), but the container was started without the NVIDIA runtime.
        return [
            Finding(
                code="HOST-CONTAINER-NO-GPU",
                severity="error",
                message=f"This is a container ({', '.join(marks)}) that sees the host's NVIDIA "
                "device files and driver (/dev/nvidia*, /proc/driver/nvidia: as a --privileged "
                "container does) but not the driver's libraries"
                f"{_nvml_reason(snapshot)}: it was not started through the NVIDIA runtime.",
                fix=_CONTAINER_FIX + " --privileged shows the devices, not the libraries.",
                predicts=_predicts(snapshot),
            )
        ]
    if marks or has_devices or host.proc_driver_nvidia:
        return []
    if pci == 0:
        return [
            Finding(
                code="HOST-NO-NVIDIA-GPU",
                severity="warning",
                message="This machine has no NVIDIA GPU: none on its PCI bus, no /dev/nvidia* "
                "device "
                f"files{_nvml_reason(snapshot)}. Installing a driver will not help.",
                fix="Run the job on a GPU node (check the job's --gres/--gpus request), or run on "
                "the CPU on purpose: device='cpu', backend='gloo'.",
                predicts=_predicts(snapshot),
            )
        ]
    if pci is not None and pci > 0:
        return [
            Finding(
                code="HOST-DRIVER-MISSING",
                severity="error",
                message=f"{pci} NVIDIA GPU(s) are on the PCI bus, but no NVIDIA driver is loaded: "
                "no "
                f"/proc/driver/nvidia, no /dev/nvidia* device files{_nvml_reason(snapshot)}.",
                fix="Install the NVIDIA driver (or load it: sudo modprobe nvidia), then check "
                "nvidia-smi; after a driver upgrade, reboot.",
                predicts=_predicts(snapshot),
            )
        ]
    return []


def _container_no_devices(snapshot: Snapshot, host: HostInfo, marks: tuple[str, ...]) -> Finding:
    env = ", ".join(f"{k}={v}" for k, v in sorted(host.nvidia_env.items()))
    pci = host.nvidia_pci_gpus
    if pci == 0 and not env:
        return Finding(
            code="HOST-NO-NVIDIA-GPU",
            severity="warning",
            message=f"This container ({', '.join(marks)}) runs on a machine with no NVIDIA GPU: "
            "none on "
            f"the PCI bus, no /dev/nvidia* device files{_nvml_reason(snapshot)}.",
            fix="Run the job on a GPU node, or run on the CPU on purpose: device='cpu', "
            "backend='gloo'.",
            predicts=_predicts(snapshot),
        )
    evidence = []
    if pci:
        evidence.append(f"the host has {pci} NVIDIA GPU(s) on its PCI bus")
    if env:
        evidence.append(f"the image expects GPUs ({env})")
    wants_gpu = bool(evidence)
    nvd = host.nvidia_env.get("NVIDIA_VISIBLE_DEVICES")
    if nvd is not None and nvd.strip().lower() in ("", "none", "void"):
        # NVIDIA Container Toolkit: "none"/"void"/empty expose no GPU even with the runtime.
        return Finding(
            code="HOST-CONTAINER-NO-GPU",
            severity="error" if pci else "warning",
            message=f"This is a container ({', '.join(marks)}) whose "
            f"NVIDIA_VISIBLE_DEVICES={nvd!r} "
            "exposes no GPU: the NVIDIA runtime injects no /dev/nvidia* device files"
            + (f", although the host has {pci} NVIDIA GPU(s)" if pci else "")
            + f"{_nvml_reason(snapshot)}.",
            fix="Start it with NVIDIA_VISIBLE_DEVICES=all (or GPU indices/UUIDs), e.g. docker run "
            "--gpus all; in Kubernetes request nvidia.com/gpu in resources.limits.",
            predicts=_predicts(snapshot),
        )
    return Finding(
        code="HOST-CONTAINER-NO-GPU",
        severity="error" if wants_gpu else "warning",
        message=f"This is a container ({', '.join(marks)}) started without GPU access: no "
        "/dev/nvidia* "
        "device files and no NVIDIA driver inside"
        + (f", although {' and '.join(evidence)}" if evidence else "")
        + f"{_nvml_reason(snapshot)}.",
        fix=_CONTAINER_FIX,
        predicts=_predicts(snapshot),
    )


def kineto_findings(env: Mapping[str, str], snapshot: Snapshot) -> list[Finding]:
    """``KINETO_USE_DAEMON`` set: ``import torch`` initialises CUDA in every process."""
    if "KINETO_USE_DAEMON" not in env:
        return []
    torch = snapshot.torch
    if (torch is not None and torch.cpu_only) or (
        snapshot.host is not None and snapshot.host.platform == "Darwin"
    ):
        return []  # cpuOnly kineto, or no global observer on Apple: nothing initialised
    value = env["KINETO_USE_DAEMON"]
    return [
        Finding(
            code="ENV-KINETO-DAEMON",
            severity="warning",
            message=f"KINETO_USE_DAEMON={value!r} is set (any value counts, even 0 or empty): "
            "import torch then starts Kineto's profiler daemon client, which initialises "
            "CUDA at import. CUDA_VISIBLE_DEVICES or CUDA_DEVICE_ORDER set in the script "
            "after import torch (os.environ[...] = ...) is ignored, and processes forked "
            "afterwards cannot use CUDA.",
            fix="Unset KINETO_USE_DAEMON unless dynolog on-demand profiling is wanted; set "
            "CUDA_VISIBLE_DEVICES before Python starts (in the shell, job script or launcher), "
            "not in the script.",
            predicts="no error at first: every process still sees the GPUs of the original "
            "CUDA_VISIBLE_DEVICES, so per-process os.environ['CUDA_VISIBLE_DEVICES'] = str(rank) "
            "puts all ranks on one GPU: NCCL WARN "
            + NCCL_DUPLICATE_GPU.format(a=0, b=1, dev="..."),
            subject="KINETO_USE_DAEMON",
        )
    ]
