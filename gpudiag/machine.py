"""Where machine facts come from: a snapshot file, or the live hardware."""

from __future__ import annotations

from gpudiag.model import Snapshot


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
