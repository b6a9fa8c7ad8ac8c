"""Where machine facts come from: a snapshot file, or the live hardware."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from gpudiag.core.cudacompat import driver_supports
from gpudiag.model import Snapshot

if TYPE_CHECKING:
    from gpudiag.backends.cudadrv import DriverEnumeration
    from gpudiag.core.visibility import DriverAsker

#: How much to ask torch on a live machine: ``fast`` reads its installed files
#: only; ``deep`` imports it in a child; ``auto`` goes deep when the fast facts
#: point at torch (:func:`torch_needs_deep`).
TorchMode = Literal["fast", "auto", "deep"]

# The CUDA driver's answers gathered while collecting the latest live snapshot:
# (snapshot, {(spec, order): enumeration}), so asking again costs no child.
_PREFETCHED: list[tuple[Snapshot, dict[tuple[str | None, str | None], DriverEnumeration]]] = []


def load_machine(snapshot_path: str | None, *, torch: TorchMode = "deep") -> Snapshot:
    """The machine to diagnose.

    Args:
        snapshot_path: a ``gpudiag snapshot`` file, or None for the live machine.
        torch: how much to ask torch on a live machine (ignored for a file).

    Raises:
        SnapshotError: the file is unreadable or malformed (exit 2 in the CLI).
    """
    if snapshot_path is not None:
        from gpudiag.snapshot import load_snapshot

        return load_snapshot(snapshot_path)
    from gpudiag.collect import collect_snapshot, deepen_torch

    answers: dict[tuple[str | None, str | None], DriverEnumeration] = {}
    snapshot = collect_snapshot(deep=torch == "deep", driver_answers=answers)
    if torch == "auto" and torch_needs_deep(snapshot):
        snapshot = deepen_torch(snapshot)
    _PREFETCHED[:] = [(snapshot, answers)]
    return snapshot


def torch_needs_deep(snapshot: Snapshot) -> str | None:
    """Why the fast torch facts call for importing torch, or None.

    Only where NVML lists GPUs (otherwise torch has nothing to disagree about):
    a CPU-only build, or a CUDA build the driver does not fully support
    (:func:`gpudiag.core.cudacompat.driver_supports`).
    """
    nvml = snapshot.sources.get("nvml")
    torch = snapshot.sources.get("torch")
    info = snapshot.torch
    if nvml is None or nvml.status != "ok" or not snapshot.gpus:
        return None
    if info is None or torch is None or torch.status != "skipped":
        return None
    if info.cpu_only:
        return f"torch {info.version} is a CPU-only build"
    if info.cuda_version is None:
        return None
    support = driver_supports(
        info.cuda_version, snapshot.cuda_driver_version, snapshot.driver_version
    )
    if support.support in ("no", "minor-compat"):
        return f"torch {info.version} is built for CUDA {info.cuda_version}: {support.reason}"
    return None


def live_driver_asker(snapshot: Snapshot) -> DriverAsker | None:
    """For a live machine whose NVML lists GPUs: ask the CUDA driver itself.

    Each question runs a fresh child with the candidate environment
    (:func:`gpudiag.backends.cudadrv.driver_enumeration`), so this process never
    initialises CUDA. Answers already gathered by :func:`load_machine` are
    reused. None when there is nothing to ask (no driver, no GPU).
    """
    nvml = snapshot.sources.get("nvml")
    if nvml is None or nvml.status != "ok" or not snapshot.gpus:
        return None
    known = {}
    if _PREFETCHED and _PREFETCHED[0][0] is snapshot:
        known = dict(_PREFETCHED[0][1])

    def ask(spec: str | None, order: str | None) -> Sequence[str] | None:
        from gpudiag.backends.cudadrv import driver_enumeration

        found = known.get((spec, order))
        if found is None:
            found = driver_enumeration(spec, order)
        if found.ok:
            return found.uuids
        # cuInit refusing the environment is the driver's answer: no device.
        failed = found.error or ""
        if failed.startswith("cuInit failed: CUDA_ERROR_") and any(
            name in failed for name in ("CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_INVALID_DEVICE")
        ):
            return ()
        return None

    return ask
