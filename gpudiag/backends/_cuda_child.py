"""Child program: ask the CUDA driver which devices it enumerates; print one JSON line.

Run as ``python -m gpudiag.backends._cuda_child`` by :mod:`gpudiag.backends.cudadrv`,
in a fresh process whose environment carries the ``CUDA_VISIBLE_DEVICES`` and
``CUDA_DEVICE_ORDER`` to test: the driver reads them once, in ``cuInit``.

It uses only ctypes and the driver API (CUDA Driver API reference: ``cuInit``,
``cuDeviceGetCount``, ``cuDeviceGet``, ``cuDeviceGetUuid_v2``/``cuDeviceGetUuid``,
``cuDeviceGetPCIBusId``, ``cuGetErrorName``), so it needs no torch and no CUDA
toolkit. Output (always one JSON object, exit status 0)::

    {"ok": true, "error": null, "devices": [
        {"uuid_hex": "<32 hex>", "uuid_v1_hex": "<32 hex>|null", "pci_bus_id": "0000:41:00.0"}]}
"""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any

#: The driver's soname, never a path: with no slash, dlopen searches only
#: LD_LIBRARY_PATH (cudadrv.py passes only its absolute entries), the ld.so
#: cache and the system directories, never the working directory (dlopen(3)).
LIBCUDA = "libcuda.so.1"


class _CUuuid(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_ubyte * 16)]


def _error_name(lib: Any, code: int) -> str:
    name = ctypes.c_char_p()
    try:
        if lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
            return f"{name.value.decode('ascii', 'replace')} ({code})"
    except AttributeError:
        pass
    return f"error {code}"


def _uuid_hex(lib: Any, symbol: str, device: ctypes.c_int) -> str | None:
    func = getattr(lib, symbol, None)
    if func is None:
        return None
    uuid = _CUuuid()
    if func(ctypes.byref(uuid), device) != 0:
        return None
    return bytes(uuid.bytes).hex()


def enumerate_devices() -> dict[str, Any]:
    """The driver's device list under this process's environment."""
    try:
        lib = ctypes.CDLL(LIBCUDA)
    except OSError as exc:
        return {"ok": False, "error": f"{LIBCUDA} not found: {exc}", "devices": []}
    code = lib.cuInit(0)
    if code != 0:
        return {"ok": False, "error": f"cuInit failed: {_error_name(lib, code)}", "devices": []}
    count = ctypes.c_int(0)
    code = lib.cuDeviceGetCount(ctypes.byref(count))
    if code != 0:
        error = f"cuDeviceGetCount failed: {_error_name(lib, code)}"
        return {"ok": False, "error": error, "devices": []}
    devices: list[dict[str, Any]] = []
    for ordinal in range(count.value):
        device = ctypes.c_int(0)
        code = lib.cuDeviceGet(ctypes.byref(device), ordinal)
        if code != 0:
            error = f"cuDeviceGet({ordinal}) failed: {_error_name(lib, code)}"
            return {"ok": False, "error": error, "devices": devices}
        # _v2 returns a MIG device's own UUID; the older entry point returns
        # the parent GPU's (CUDA Driver API, cuDeviceGetUuid_v2), so the two
        # differ exactly for MIG devices.
        uuid_v2 = _uuid_hex(lib, "cuDeviceGetUuid_v2", device)
        uuid_v1 = _uuid_hex(lib, "cuDeviceGetUuid", device)
        if uuid_v2 is None and uuid_v1 is None:
            return {
                "ok": False,
                "error": f"cuDeviceGetUuid failed for device {ordinal}",
                "devices": devices,
            }
        bus = ctypes.create_string_buffer(64)
        code = lib.cuDeviceGetPCIBusId(bus, len(bus), device)
        devices.append(
            {
                "uuid_hex": uuid_v2 if uuid_v2 is not None else uuid_v1,
                "uuid_v1_hex": uuid_v1 if uuid_v2 is not None else None,
                "pci_bus_id": bus.value.decode("ascii", "replace") if code == 0 else None,
            }
        )
    return {"ok": True, "error": None, "devices": devices}


def main() -> int:
    """Print the enumeration as one JSON line."""
    try:
        result = enumerate_devices()
    except Exception as exc:  # a crash must still answer in the protocol
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "devices": []}
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
