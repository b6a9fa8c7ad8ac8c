"""The exact texts torch, CUDA, NCCL and DeepSpeed raise or print, by version.

Pure (no torch import). Every ``predicts``/``predicts_also`` that quotes an
upstream message takes it from here, so that two findings about the same failure
quote it the same way (issue 16: ``HOST-DRIVER-MISSING`` and ``DP-NO-VISIBLE-GPU``
quoted "Found no NVIDIA driver" two ways). ``tests/test_texts.py`` checks that
every text here is used and that no other module keeps a literal copy.

A text that changed between versions is a :class:`ByVersion`: ``text(version)``
gives the snapshot's version's wording, ``others(version)`` the rest, labelled
with the versions that print them. An unknown version reads as the newest.
Templates take their parameters with :meth:`str.format` (``{port}``...).

Sources are cited at each text; "recorded" means seen on a real driver + torch
(``tests/truth/``, ``../shared/truth/``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Version = tuple[int, int]

_VERSION_RE = re.compile(r"\s*(\d+)\.(\d+)")


def torch_version_tuple(version: str | None) -> Version | None:
    """``"2.11.0+cu130"`` → ``(2, 11)``; None when unknown or unreadable."""
    if not version:
        return None
    match = _VERSION_RE.match(version)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def _show(since: Version) -> str:
    return f"{since[0]}.{since[1]}"


@dataclass(frozen=True)
class ByVersion:
    """One failure's text per torch version range: ``(since, text)`` pairs, oldest
    first; the first range starts at ``(0, 0)``."""

    ranges: tuple[tuple[Version, str], ...]

    def _index(self, version: str | None) -> int:
        parsed = torch_version_tuple(version)
        if parsed is None:  # unknown version: assume a current torch
            return len(self.ranges) - 1
        return max(i for i, (since, _) in enumerate(self.ranges) if parsed >= since)

    def text(self, version: str | None) -> str:
        """The text that torch ``version`` (``"2.11.0+cu130"``, or None) prints."""
        return self.ranges[self._index(version)][1]

    def label(self, i: int) -> str:
        """``torch < 2.8``, ``torch >= 2.8`` or ``2.4 <= torch < 2.8``."""
        since = self.ranges[i][0]
        if i + 1 == len(self.ranges):
            return f"torch >= {_show(since)}"
        until = _show(self.ranges[i + 1][0])
        return f"torch < {until}" if i == 0 else f"{_show(since)} <= torch < {until}"

    def others(self, version: str | None) -> tuple[str, ...]:
        """The same failure's text in the other version ranges, each labelled."""
        own = self._index(version)
        return tuple(
            f"{self.label(i)}: {text}" for i, (_, text) in enumerate(self.ranges) if i != own
        )

    def format(self, **params: object) -> ByVersion:
        """The same table with its templates filled in."""
        return ByVersion(tuple((since, text.format(**params)) for since, text in self.ranges))


# ------------------------------------------------------------------ CUDA runtime errors

#: The first torch version that raises torch.AcceleratorError for CUDA errors:
#: since torch 2.8 (pytorch#152023) ``C10_CUDA_CHECK`` ("CUDA error: …") raises
#: ``torch.AcceleratorError``, a RuntimeError subclass; before, plain RuntimeError.
#: Recorded on torch 2.11: ``torch.AcceleratorError: CUDA error: invalid device ordinal``.
ACCELERATOR_ERROR_SINCE: Version = (2, 8)


def _cuda_check(message: str) -> ByVersion:
    return ByVersion(
        (
            ((0, 0), f"RuntimeError: {message}"),
            (ACCELERATOR_ERROR_SINCE, f"torch.AcceleratorError: {message}"),
        )
    )


def cuda_error(version: str | None, message: str) -> str:
    """What a failed CUDA runtime call raises in that torch version.

    ``message`` is the text after the class, e.g. ``CUDA error: invalid device ordinal``.
    """
    return _cuda_check(message).text(version)


def cuda_error_also(version: str | None, message: str) -> tuple[str, ...]:
    """The same failure's text in the torch versions other than ``version``'s."""
    return _cuda_check(message).others(version)


#: ``cudaErrorInvalidDevice``'s string (CUDA Runtime API, "Error Handling").
INVALID_ORDINAL_MESSAGE = "CUDA error: invalid device ordinal"


def invalid_ordinal(version: str | None) -> str:
    """A device index past the visible devices (``cudaSetDevice``, ``.to('cuda:K')``)."""
    return cuda_error(version, INVALID_ORDINAL_MESSAGE)


# The next four are ``C10_CUDA_CHECK`` errors quoted with torch < 2.8's class (see
# ACCELERATOR_ERROR_SINCE); the strings are cudaGetErrorString's (CUDA Runtime API).
#: cudaErrorDevicesUnavailable: compute mode Prohibited / Exclusive_Process taken.
BUSY = "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable"
#: cudaErrorECCUncorrectable.
ECC_ERROR = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
#: cudaErrorNoKernelImageForDevice.
NO_KERNEL = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
#: cudaErrorUnsupportedPtxVersion: PTX newer than the driver's JIT compiler.
PTX_UNSUPPORTED_TOOLCHAIN = (
    "RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain."
)
#: torch 2.13 torch/cuda/__init__.py (_check_cubins): the first line of the warning for
#: a GPU the build has no kernels for; ``{name}`` is the GPU's model, ``{cc}`` e.g. 61.
ARCH_INCOMPATIBLE = (
    "UserWarning: {name} with CUDA capability sm_{cc} is not compatible with the current "
    "PyTorch installation."
)
#: cudaErrorInsufficientDriver's string, as a CUDA call past initialisation raises it.
INSUFFICIENT_DRIVER = "RuntimeError: CUDA driver version is insufficient for CUDA runtime version"

# ------------------------------------------------------------ torch's CUDA initialisation

#: torch 2.13 c10/cuda/CUDAFunctions.cpp (device_count_impl, TORCH_CHECK): no CUDA
#: driver (cudaErrorInsufficientDriver with driver version 0). The whole sentence:
#: torch prints it on one line, URL included (pytorch/pytorch c10/cuda/CUDAFunctions.cpp).
NO_DRIVER = (
    "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an "
    "NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx"
)
#: gpudiag's short form of device_count_impl's driver-too-old TORCH_CHECK, whose full
#: text is "The NVIDIA driver on your system is too old (found version N). Please update
#: your GPU driver ..." (torch 2.13 c10/cuda/CUDAFunctions.cpp), joined with the CUDA
#: error it stands for. Kept as it is quoted today (core/inventory.py).
DRIVER_TOO_OLD = (
    "RuntimeError: The NVIDIA driver on your system is too old "
    "(CUDA driver version is insufficient for CUDA runtime version)"
)
#: torch 2.13 c10/cuda/CUDAFunctions.cpp (device_count_ensure_non_zero): zero devices;
#: a TORCH_CHECK, so RuntimeError in every version (recorded on torch 2.11).
NO_CUDA_GPUS = "RuntimeError: No CUDA GPUs are available"
#: torch 2.13 torch/cuda/__init__.py (_lazy_init): a CPU-only build.
NOT_COMPILED = "AssertionError: Torch not compiled with CUDA enabled"
#: ``at::cuda::getDeviceProperties`` (aten/src/ATen/cuda/CUDAContext.cpp): an index
#: below torch.cuda.device_count() but past CUDA's own count (torch counts with NVML).
PROPERTIES_ASSERT = "RuntimeError: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED"


def unexpected_device_count(code: int = 101, text: str = "invalid device ordinal") -> str:
    """torch's text when ``cudaGetDeviceCount`` fails with anything but "no device".

    torch 2.13 c10/cuda/CUDAFunctions.cpp (device_count_impl, default case); a
    RuntimeError (TORCH_CHECK), recorded on torch 2.11. cuInit's
    ``CUDA_ERROR_INVALID_DEVICE`` reaches the runtime as ``cudaErrorInvalidDevice``
    (101, "invalid device ordinal").
    """
    return (
        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
        "functions before calling NumCudaDevices() that might have already set an error? "
        f"Error {code}: {text}"
    )


def cuinit_failure_text(cuinit_error: str | None) -> str:
    """What torch raises at CUDA initialisation when cuInit fails with ``cuinit_error``."""
    if cuinit_error == "CUDA_ERROR_INVALID_DEVICE":
        return unexpected_device_count()
    return NO_CUDA_GPUS


# ----------------------------------------------------------------- memory and precision

#: c10/cuda/CUDACachingAllocator.cpp: the first sentence of the OOM error. Its class
#: prints as torch.OutOfMemoryError (torch 2.13: torch.cuda.OutOfMemoryError is that
#: same class, ``__module__ == "torch"``).
OUT_OF_MEMORY = "torch.OutOfMemoryError: CUDA out of memory."
#: torch/amp/autocast_mode.py (torch 2.13, __init__): bf16 autocast where
#: torch.cuda.is_bf16_supported() is False.
BF16_UNSUPPORTED = (
    "RuntimeError: Current CUDA Device does not support bfloat16. Please switch dtype to float16."
)
#: torch/amp/autocast_mode.py (torch 2.13, __init__): autocast('cuda') without CUDA.
AUTOCAST_DISABLED = (
    "UserWarning: CUDA is not available or torch_xla is imported. Disabling autocast."
)
#: torch/amp/grad_scaler.py (torch 2.13, _unscale_grads_): float16 parameters.
UNSCALE_FP16 = "ValueError: Attempting to unscale FP16 gradients."
#: bfloat16 parameters under a CUDA GradScaler: torch/amp/grad_scaler.py (_unscale_grads_)
#: lets them through to torch._amp_foreach_non_finite_check_and_unscale_, whose CUDA
#: kernel (aten/src/ATen/native/cuda/AmpKernels.cu) dispatches
#: AT_DISPATCH_FLOATING_TYPES_AND_HALF: no BFloat16. Reported with torch 2.10 (not
#: recorded here: no GPU); torch 2.13's CPU kernel takes bfloat16 (checked here).
UNSCALE_BF16_CUDA = (
    'NotImplementedError: "_amp_foreach_non_finite_check_and_unscale_cuda" not implemented '
    "for 'BFloat16'"
)

# ------------------------------------------------------------------- multiprocessing

#: torch 2.13 torch/cuda/__init__.py (_lazy_init, _is_in_bad_fork): CUDA used in a
#: forked child of a process that had initialised it.
FORK_ERROR = (
    "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
    "multiprocessing, you must use the 'spawn' start method"
)

# ---------------------------------------------------------------- torch.distributed, NCCL

#: torch 2.13 torch/distributed/distributed_c10d.py (_new_process_group_helper): NCCL
#: asked for in a build without it.
NCCL_NOT_BUILT = "RuntimeError: Distributed package doesn't have NCCL built in"
#: torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (constructor check; CUDA builds
#: only, so not checkable against the CPU wheel here), as core/ddp.py quoted it.
NCCL_NO_GPU = "ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!"
#: torch 2.13, a string of libtorch_cpu.so (TCPStore: "Timed out after {} seconds
#: waiting for clients. {}/{} clients joined."); "..." stands for the numbers.
STORE_TIMEOUT = "torch.distributed.DistStoreError: Timed out ... waiting for clients"
#: NCCL src/init.cc (checkDuplicateGpus, NCCL 2.x): "%d", "%lx" filled in by the caller.
NCCL_DUPLICATE_GPU = "Duplicate GPU detected : rank {a} and rank {b} both on CUDA device {dev}"


def duplicate_gpu_text(pci_bus_id: str | None, rank_a: int = 1, rank_b: int = 0) -> str:
    """NCCL's duplicate-GPU error as torch surfaces it.

    NCCL prints the bus id as the hex number its digits spell
    (``busIdToInt64``: ``00000000:1A:00.0`` → ``1a000``).
    """
    dev = "<busId>"
    if pci_bus_id:
        digits = "".join(c for c in pci_bus_id if c not in ":.")
        try:
            dev = f"{int(digits, 16):x}"
        except ValueError:
            dev = "<busId>"
    return "torch.distributed.DistBackendError: NCCL error ... invalid usage ... " + (
        NCCL_DUPLICATE_GPU.format(a=rank_a, b=rank_b, dev=dev)
    )


#: torch 2.13, a string of libtorch_cpu.so (c10d ProcessGroup::getBackend): a CPU
#: tensor in a collective of an NCCL-only group.
NO_BACKEND_CPU = "RuntimeError: No backend type associated with device type cpu"
#: torch 2.13 torch/nn/parallel/distributed.py (__init__, _check_single_device...):
#: device_ids given for a CPU module; ``{ids}``/``{out}`` as torch formats them.
DDP_DEVICE_IDS_CPU = (
    "ValueError: DistributedDataParallel device_ids and output_device arguments only work "
    "with single-device/multiple-device GPU modules or CPU modules, but got device_ids {ids}, "
    "output_device {out}, and module parameters {{device(type='cpu')}}."
)
#: torch 2.13 torch/utils/data/dataloader.py (DataLoader.__init__).
SAMPLER_SHUFFLE = "ValueError: sampler option is mutually exclusive with shuffle"

# ------------------------------------------------------------------- Hugging Face

#: transformers' TrainingArguments.__post_init__ (training_args.py, 4.x): ``tf32=True``
#: (``--tf32 True``) where ``is_torch_tf32_available()`` is False, i.e. the current
#: device's compute capability is below 8.0.
HF_TF32_UNSUPPORTED = (
    "ValueError: --tf32 requires Ampere or a newer GPU arch, cuda>=11 and torch>=1.7"
)

#: rank 0's TCPStore on a taken port. The libuv backend (default since torch 2.4) and
#: the socket backend before it (torch/csrc/distributed/c10d/socket.cpp, still used
#: with USE_LIBUV=0) word it differently. Recorded on torch 2.11 (libuv).
STORE_ADDR_IN_USE = ByVersion(
    (
        (
            (0, 0),
            "RuntimeError: The server socket has failed to listen on any local network "
            "address. The server socket has failed to bind to [::]:{port} (errno: 98 - "
            "Address already in use).",
        ),
        (
            (2, 4),
            "torch.distributed.DistNetworkError: The server socket has failed to listen on "
            "any local network address. port: {port}, useIpv6: false, code: -98, name: "
            "EADDRINUSE, message: address already in use",
        ),
    )
)


def addr_in_use_text(port: int) -> str:
    """The taken-port error in both backends' words, so a search for either finds it."""
    table = STORE_ADDR_IN_USE.format(port=port)
    return f"{table.text(None)} ({table.others(None)[0].replace('torch < ', 'before torch ')})"


# ---------------------------------------------------------------------- DataParallel

#: torch 2.13 torch/cuda/__init__.py (get_device_properties, lines 740/750): a device
#: id < 0 or >= torch.cuda.device_count().
INVALID_DEVICE_ID = "AssertionError: Invalid device id"
#: torch 2.13 torch/nn/parallel/data_parallel.py (__init__ reads device_ids[0]):
#: device_ids=[]. DeepSpeed's runner raises the same for an empty --include list.
EMPTY_IDS = "IndexError: list index out of range"
#: torch 2.13, a string of libtorch_python.so (torch.device with a negative index in
#: DataParallel's device_ids[0]).
NEGATIVE_INDEX = "RuntimeError: Device index must not be negative"

# ------------------------------------------------- between the GPUs and around them (issue 18)

#: torch 2.13 c10/cuda/CUDAFunctions.cpp (device_count_impl, ``case cudaErrorUnknown``,
#: a TORCH_CHECK): cuInit's CUDA_ERROR_UNKNOWN (999), e.g. without /dev/nvidia-uvm.
#: torch.cuda.is_available() warns it prefixed "CUDA initialization: ".
CUDA_UNKNOWN_ERROR = (
    "RuntimeError: CUDA unknown error - this may be due to an incorrectly set up environment, "
    "e.g. changing env variable CUDA_VISIBLE_DEVICES after program start. Setting the "
    "available devices to be zero."
)
#: NCCL user guide, Troubleshooting, "Shared memory" (NCCL_DEBUG=WARN): /dev/shm too
#: small for NCCL's segments; ``{name}``/``{size}`` are NCCL's.
NCCL_SHM_EXTEND = "NCCL WARN Error: failed to extend /dev/shm/nccl-{name} to {size} bytes"
#: torch 2.13, strings of libtorch_python.so (torch/csrc/DataLoader.cpp): the main
#: process's error when a worker dies of SIGBUS writing a batch to a full /dev/shm.
DATALOADER_BUS_ERROR = (
    "RuntimeError: DataLoader worker (pid {pid}) is killed by signal: Bus error. It is "
    "possible that dataloader's workers are out of shared memory. Please try to raise your "
    "shared memory limit."
)
#: torch 2.13 aten/src/ATen/MapAllocator.cpp (MapAllocator, the ``write(fd, "", 1)`` after
#: ``ftruncate``): a DataLoader worker's batch that no longer fits in /dev/shm under the
#: file_descriptor sharing strategy; ``{name}`` is torch's ``torch_<pid>_<n>_<k>``.
SHM_WRITE_FAILED = "RuntimeError: unable to write to file </{name}>: No space left on device (28)"
#: cudaGetErrorString(cudaErrorSystemNotReady, 802): the fabric manager has not yet set
#: up an NVSwitch system's GPUs; torch reports it through device_count_impl's default
#: case (:func:`unexpected_device_count`).
SYSTEM_NOT_READY = "system not yet initialized"
