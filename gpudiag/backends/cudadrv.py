"""Driver-verified mapping: ask libcuda itself which devices a value exposes.

Each question runs in a FRESH child process (:mod:`gpudiag.backends._cuda_child`)
whose environment carries the candidate ``CUDA_VISIBLE_DEVICES`` and
``CUDA_DEVICE_ORDER``: the driver reads both once, in ``cuInit``, so the caller's
process is never initialised and several values can be tried in turn.

UUID format: the driver returns 16 raw bytes (``CUuuid``); nvidia-smi prints them
as ``GPU-`` + 8-4-4-4-12 lower-case hex groups, and MIG devices as ``MIG-`` + the
same groups. The bytes do not say which kind they are: the child asks both
``cuDeviceGetUuid_v2`` (a MIG device's own UUID) and ``cuDeviceGetUuid`` (the
parent GPU's), and a device whose two answers differ is a MIG device.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from gpudiag.backends.subproc import Runner, child_env, query_child, run_child

CHILD_MODULE = "gpudiag.backends._cuda_child"


@dataclass(frozen=True)
class DriverEnumeration:
    """What the CUDA driver enumerated in a fresh process.

    Attributes:
        ok: True when the driver answered (even with zero devices).
        uuids: ``GPU-…`` / ``MIG-…`` UUIDs in CUDA ordinal order.
        pci_bus_ids: the matching ``cuDeviceGetPCIBusId`` strings (``0000:41:00.0``),
            "" where the driver gave none.
        error: why the driver could not be asked, or None.
    """

    ok: bool
    uuids: tuple[str, ...] = ()
    pci_bus_ids: tuple[str, ...] = ()
    error: str | None = None


def format_uuid(raw: bytes, mig: bool = False) -> str:
    """nvidia-smi's spelling of a 16-byte CUDA UUID: ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``.

    Raises:
        ValueError: ``raw`` is not 16 bytes.
    """
    if len(raw) != 16:
        raise ValueError(f"a CUDA UUID has 16 bytes, not {len(raw)}")
    text = raw.hex()
    groups = (text[0:8], text[8:12], text[12:16], text[16:20], text[20:32])
    return ("MIG-" if mig else "GPU-") + "-".join(groups)


def _hex_bytes(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a hex string")
    raw = bytes.fromhex(value)
    if len(raw) != 16:
        raise ValueError(f"{what} must be 16 bytes")
    return raw


def parse_child_output(payload: Any) -> DriverEnumeration:
    """Turn the child's JSON object into a :class:`DriverEnumeration`.

    Never raises: a malformed payload becomes ``ok=False`` with the reason.
    """
    if not isinstance(payload, dict):
        return DriverEnumeration(ok=False, error="CUDA child printed no JSON object")
    if not payload.get("ok"):
        error = payload.get("error")
        return DriverEnumeration(ok=False, error=str(error) if error else "CUDA child failed")
    devices = payload.get("devices")
    if not isinstance(devices, list):
        return DriverEnumeration(ok=False, error="CUDA child output has no device list")
    uuids: list[str] = []
    buses: list[str] = []
    try:
        for pos, device in enumerate(devices):
            if not isinstance(device, dict):
                raise ValueError(f"device {pos} is not an object")
            own = _hex_bytes(device.get("uuid_hex"), f"device {pos} uuid_hex")
            parent_hex = device.get("uuid_v1_hex")
            parent = None if parent_hex is None else _hex_bytes(parent_hex, "uuid_v1_hex")
            uuids.append(format_uuid(own, mig=parent is not None and parent != own))
            bus = device.get("pci_bus_id")
            buses.append(bus if isinstance(bus, str) else "")
    except ValueError as exc:
        return DriverEnumeration(ok=False, error=f"malformed CUDA child output: {exc}")
    return DriverEnumeration(ok=True, uuids=tuple(uuids), pci_bus_ids=tuple(buses))


def absolute_library_path(value: str | None) -> str | None:
    """``LD_LIBRARY_PATH`` without its empty and relative entries (None when none is left).

    The child loads libcuda by its soname (``libcuda.so.1``, no slash), so the
    dynamic linker searches LD_LIBRARY_PATH, the ld.so cache and the system
    directories, never the working directory itself. But glibc reads an empty
    entry (``/opt/lib::``, a trailing ``:``) or a relative one as "relative to
    the current directory" (ld.so(8)), which would let a ``libcuda.so.1`` there
    run in the child. Absolute entries, e.g. a cluster module's driver path, stay.
    """
    if value is None:
        return None
    kept = [entry for entry in value.split(":") if entry.startswith("/")]
    return ":".join(kept) if kept else None


def driver_enumeration(
    spec: str | None,
    order: str | None,
    timeout_s: float = 20.0,
    runner: Runner = run_child,
) -> DriverEnumeration:
    """Ask the CUDA driver, in a fresh child process, what ``spec``/``order`` expose.

    Args:
        spec: ``CUDA_VISIBLE_DEVICES`` for the child; None removes it.
        order: ``CUDA_DEVICE_ORDER`` for the child; None removes it.
        timeout_s: hard limit for the child.
        runner: the child-process seam (tests replace it).
    """
    env = child_env(
        {
            "CUDA_VISIBLE_DEVICES": spec,
            "CUDA_DEVICE_ORDER": order,
            "LD_LIBRARY_PATH": absolute_library_path(os.environ.get("LD_LIBRARY_PATH")),
        }
    )
    payload, error = query_child(CHILD_MODULE, env, timeout_s, runner, "CUDA child")
    if payload is None:
        return DriverEnumeration(ok=False, error=error)
    return parse_child_output(payload)


def cuda_order_for_snapshot(
    timeout_s: float = 20.0, runner: Runner = run_child
) -> tuple[str, ...] | None:
    """The driver's own FASTEST_FIRST enumeration of every device, or None.

    Run with ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER`` removed: this is
    what ``gpudiag snapshot`` records as ``cuda_order``.
    """
    found = driver_enumeration(None, None, timeout_s=timeout_s, runner=runner)
    return found.uuids if found.ok else None
