"""Redaction: a snapshot without what identifies a machine or its users."""

from __future__ import annotations

import dataclasses

from gpudiag.model import Snapshot


def redact_snapshot(snap: Snapshot) -> Snapshot:
    """The snapshot without what identifies a machine or its users, for a public
    bug report: the host name, and every process's PID and name (null). Process
    memory stays: health findings need it."""
    gpus = tuple(
        dataclasses.replace(
            gpu,
            processes=tuple(dataclasses.replace(p, pid=None, name=None) for p in gpu.processes),
        )
        for gpu in snap.gpus
    )
    return dataclasses.replace(snap, hostname=None, gpus=gpus)
