"""Where machine facts come from: a snapshot file, or the live hardware."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpudiag.model import Snapshot

if TYPE_CHECKING:
    from gpudiag.core.visibility import DriverAsker


def load_machine(snapshot_path: str | None) -> Snapshot:
    """The machine to diagnose.

    Args:
        snapshot_path: a ``gpudiag snapshot`` file, or None for the live machine.

    Raises:
        SnapshotError: the file is unreadable or malformed (exit 2 in the CLI).
    """
    if snapshot_path is not None:
        from gpudiag.snapshot import load_snapshot

        return load_snapshot(snapshot_path)
    from gpudiag.collect import collect_snapshot

    return collect_snapshot()


def live_driver_asker(snapshot: Snapshot) -> DriverAsker | None:
    """For a live machine whose NVML lists GPUs: ask the CUDA driver itself.

    Each question runs a fresh child with the candidate environment
    (:func:`gpudiag.backends.cudadrv.driver_enumeration`), so this process never
    initialises CUDA. None when there is nothing to ask (no driver, no GPU).
    """
    nvml = snapshot.sources.get("nvml")
    if nvml is None or nvml.status != "ok" or not snapshot.gpus:
        return None

    def ask(spec: str | None, order: str | None) -> Sequence[str] | None:
        from gpudiag.backends.cudadrv import driver_enumeration

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
