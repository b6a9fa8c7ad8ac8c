"""Does the installed NVIDIA driver support the CUDA version torch was built with?

Pure: a function of three version strings.

Sources:

* NVML's ``nvmlSystemGetCudaDriverVersion`` (the snapshot's
  ``cuda_driver_version``) is the newest CUDA version the driver fully supports
  (what nvidia-smi prints as "CUDA Version").
* NVIDIA, *CUDA Compatibility*, "Minor Version Compatibility", Table 1
  (https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html):
  from CUDA 11 on, an application built with any toolkit of a major family runs,
  with a limited feature set (no newer PTX JIT), on a driver of at least that
  family's minimum: CUDA 11.x >= 450.80.02, 12.x >= 525, 13.x >= 580.
  A newer major needs a newer driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: Minimum Linux driver branch per CUDA major for minor-version compatibility
#: (NVIDIA CUDA Compatibility guide, Table 1).
MINOR_COMPAT_MIN_DRIVER: dict[int, tuple[int, ...]] = {
    11: (450, 80, 2),
    12: (525,),
    13: (580,),
}

Support = Literal["yes", "minor-compat", "no", "unknown"]


@dataclass(frozen=True)
class DriverSupport:
    """The answer, and one line saying why."""

    support: Support
    reason: str


def _version(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    parts: list[int] = []
    for piece in text.strip().split("."):
        if not piece.isascii() or not piece.isdigit() or len(piece) > 6:
            return None
        parts.append(int(piece))
    return tuple(parts) or None


def driver_supports(
    torch_cuda: str | None, cuda_driver_version: str | None, driver_version: str | None
) -> DriverSupport:
    """Whether a driver runs a torch built for CUDA ``torch_cuda``.

    Args:
        torch_cuda: torch's ``torch.version.cuda`` (``"12.4"``).
        cuda_driver_version: the newest CUDA the driver supports (``"12.2"``).
        driver_version: the driver's own version (``"535.104.05"``).
    """
    runtime = _version(torch_cuda)
    if runtime is None:
        return DriverSupport("unknown", "torch's CUDA version is unknown")
    need = ".".join(map(str, runtime[:2]))
    supported = _version(cuda_driver_version)
    if supported is not None and supported[:2] >= runtime[:2]:
        return DriverSupport("yes", f"the driver supports CUDA up to {cuda_driver_version}")
    driver = _version(driver_version)
    minimum = MINOR_COMPAT_MIN_DRIVER.get(runtime[0])
    # A driver that reports CUDA N.x is at least family N's own first driver,
    # so the same major is enough; without that, the driver's version decides.
    same_major = supported is not None and supported[0] == runtime[0]
    by_driver = supported is None and driver is not None and minimum is not None
    if minimum is not None and (same_major or (by_driver and (driver or ()) >= minimum)):
        return DriverSupport(
            "minor-compat",
            f"the driver runs CUDA {runtime[0]}.x builds by minor-version compatibility, "
            f"without PTX JIT newer than it (torch wants CUDA {need})",
        )
    if supported is None and driver is None:
        return DriverSupport("unknown", "the driver's versions are unknown")
    have = cuda_driver_version or f"driver {driver_version}"
    return DriverSupport("no", f"the driver supports CUDA up to {have}, torch needs CUDA {need}")
