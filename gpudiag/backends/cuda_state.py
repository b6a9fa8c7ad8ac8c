"""Has the CUDA driver been initialised in THIS process? Asked without initialising it.

``torch.cuda.is_initialized()`` only knows about torch's own lazy init: it stays
False after ``torch.cuda.is_available()`` or a library's
``torch._C._cuda_getDeviceCount()``, which already ran ``cuInit`` — and CUDA read
``CUDA_VISIBLE_DEVICES`` then (recorded on an H100 with torch 2.11). So ask the
driver itself, carefully:

1. Only look if ``libcuda.so`` is already mapped into the process
   (``/proc/self/maps``): if it is not, nobody can have called ``cuInit``.
2. Attach to that copy with ``dlopen(RTLD_NOLOAD)``, which never loads a library
   (and so never runs a new library's constructors).
3. ``cuDeviceGetCount`` returns ``CUDA_ERROR_NOT_INITIALIZED`` (3) before
   ``cuInit`` (CUDA Driver API reference, "Initialization": "cuInit() must be
   called before any other function from the driver API"; every other call
   returns CUDA_ERROR_NOT_INITIALIZED before it), so a zero return means the
   driver was initialised. Only then are the device UUIDs read, which creates no
   context.

Seams for tests: :data:`read_maps` and :data:`attach` are looked up at call time,
so a test can replace them with a fake libcuda.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CUDA_SUCCESS = 0
CUDA_ERROR_NOT_INITIALIZED = 3


@dataclass(frozen=True)
class DriverState:
    """What the in-process CUDA driver says.

    Attributes:
        initialised: True when ``cuInit`` already ran in this process.
        uuids: the devices it enumerated, in CUDA ordinal order (``GPU-…``), when readable.
        library: the libcuda path mapped into the process, or None.
        error: why the state could not be read fully, or None.
    """

    initialised: bool
    uuids: tuple[str, ...] | None = None
    library: str | None = None
    error: str | None = None


def _read_maps() -> str:
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
        return fh.read()


def _attach(path: str) -> Any:
    """The already-loaded library at ``path``, or None; never loads it."""
    noload = getattr(os, "RTLD_NOLOAD", None)
    if noload is None:
        return None
    try:
        return ctypes.CDLL(path, mode=noload | getattr(os, "RTLD_LAZY", 1))
    except OSError:
        return None


#: Seams (replaced by tests): the process's memory map, and attaching to a loaded library.
read_maps: Callable[[], str] = _read_maps
attach: Callable[[str], Any] = _attach


def loaded_libcuda(maps_text: str) -> str | None:
    """The path of the libcuda mapped in a ``/proc/<pid>/maps`` text, or None."""
    for line in maps_text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) < 6:
            continue
        path = parts[5].strip()
        if os.path.basename(path).startswith("libcuda.so"):
            return path
    return None


def _uuids(lib: Any, count: int) -> tuple[str, ...] | None:
    from gpudiag.backends.cudadrv import format_uuid

    get_uuid = getattr(lib, "cuDeviceGetUuid_v2", None) or getattr(lib, "cuDeviceGetUuid", None)
    if get_uuid is None:
        return None
    out: list[str] = []
    for ordinal in range(count):
        dev = ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(dev), ordinal) != CUDA_SUCCESS:
            return None
        raw = (ctypes.c_char * 16)()
        if get_uuid(ctypes.byref(raw), dev) != CUDA_SUCCESS:
            return None
        out.append(format_uuid(bytes(raw)))
    return tuple(out)


def driver_state() -> DriverState:
    """Whether CUDA was initialised in this process, by anyone, and what it enumerated."""
    try:
        maps = read_maps()
    except OSError as exc:  # not Linux, or /proc unavailable
        return DriverState(False, error=f"cannot read /proc/self/maps: {exc}")
    path = loaded_libcuda(maps)
    if path is None:
        return DriverState(False)
    lib = attach(path)
    if lib is None:
        return DriverState(False, library=path, error=f"cannot attach to {path}")
    count = ctypes.c_int(0)
    try:
        rc = int(lib.cuDeviceGetCount(ctypes.byref(count)))
    except Exception as exc:  # a broken library must not break the guard
        return DriverState(False, library=path, error=f"cuDeviceGetCount failed: {exc}")
    if rc == CUDA_ERROR_NOT_INITIALIZED:
        return DriverState(False, library=path)
    if rc != CUDA_SUCCESS:
        # cuInit ran and failed (e.g. CUDA_ERROR_NO_DEVICE): it still read the variables.
        return DriverState(True, (), library=path, error=f"cuDeviceGetCount returned {rc}")
    try:
        uuids = _uuids(lib, int(count.value))
    except Exception as exc:
        return DriverState(True, None, library=path, error=f"cannot read UUIDs: {exc}")
    return DriverState(True, uuids, library=path)
