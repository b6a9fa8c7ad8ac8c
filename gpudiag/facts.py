"""The machine's facts from Python: ``gpudiag.devices()`` and ``gpudiag.resolve()``.

What ``gpudiag list`` shows, as the typed model (:mod:`gpudiag.model`), for code that
wants the GPUs and the ``cuda:N`` → physical mapping rather than a verdict (nvitop's
``Device.all()`` is the model users expect; issue 20). Like the CLI, these never
import torch or initialise CUDA in the caller's process: NVML is read here, torch
from its files, and the CUDA driver is asked in a fresh child.
"""

from __future__ import annotations

import os
from typing import Final

from gpudiag.core.request import FROM_SNAPSHOT, _FromSnapshot
from gpudiag.model import Gpu, Resolution, Snapshot

#: The default of :func:`resolve`: the variable as the machine has it (the live
#: environment, or the snapshot's recorded ``env``); the sentinel ``check()`` uses.
FROM_MACHINE: Final = FROM_SNAPSHOT

_Source = str | os.PathLike[str] | Snapshot | None


def _load(snapshot: _Source) -> tuple[Snapshot, bool]:
    """The machine, and whether it is the live one."""
    if isinstance(snapshot, Snapshot):
        return snapshot, False
    if snapshot is not None and not isinstance(snapshot, (str, os.PathLike)):
        raise TypeError(
            "snapshot must be a file path (str or os.PathLike), a Snapshot or None, "
            f"not {type(snapshot).__name__}"
        )
    from gpudiag.machine import load_machine

    path = None if snapshot is None else os.fspath(snapshot)
    return load_machine(path, torch="fast"), path is None


def devices(snapshot: _Source = None) -> tuple[Gpu, ...]:
    """Every physical GPU of the machine, in nvidia-smi order (``nvml_index``).

    Args:
        snapshot: a ``gpudiag snapshot`` file or a :class:`~gpudiag.model.Snapshot`;
            None reads the live machine (NVML; a machine with no driver has none).

    Raises:
        TypeError: ``snapshot`` of another type.
        gpudiag.snapshot.SnapshotError: an unreadable or malformed snapshot file.
    """
    machine, _ = _load(snapshot)
    return machine.gpus


def resolve(
    cuda_visible_devices: str | _FromSnapshot | None = FROM_MACHINE,
    cuda_device_order: str | _FromSnapshot | None = FROM_MACHINE,
    *,
    snapshot: _Source = None,
) -> Resolution:
    """Which physical GPU each ``cuda:N`` is under these variables, as CUDA reads them.

    Args:
        cuda_visible_devices: the value to evaluate; None means unset; the default
            takes the machine's (the live environment's, or the snapshot's).
        cuda_device_order: likewise for ``CUDA_DEVICE_ORDER``.
        snapshot: as for :func:`devices`.

    Returns:
        The :class:`~gpudiag.model.Resolution`: ``devices`` in ``cuda_ordinal`` order,
        one explanation per entry, ``cuinit_error`` when cuInit would fail, and the
        findings (``VIS-*``). On a live machine the CUDA driver confirms the mapping
        in a child process (``method`` says so); a snapshot has the rules only.

    Raises:
        TypeError: a value that is neither a str nor None.
    """
    for name, value in (
        ("cuda_visible_devices", cuda_visible_devices),
        ("cuda_device_order", cuda_device_order),
    ):
        if value is not None and value is not FROM_MACHINE and not isinstance(value, str):
            raise TypeError(f"{name} must be a str or None, not {type(value).__name__}")
    machine, live = _load(snapshot)
    spec = (
        machine.cuda_visible_devices
        if isinstance(cuda_visible_devices, _FromSnapshot)
        else cuda_visible_devices
    )
    order = (
        machine.cuda_device_order
        if isinstance(cuda_device_order, _FromSnapshot)
        else cuda_device_order
    )
    from gpudiag.core.visibility import resolve_checked
    from gpudiag.machine import live_driver_asker

    return resolve_checked(spec, order, machine, live_driver_asker(machine) if live else None)
