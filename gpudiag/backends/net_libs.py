"""Which ``libnccl.so.2`` and which NCCL network plugin the dynamic loader would find
(snapshot 1.4, ``node.nccl_libs`` / ``node.nccl_net_plugins``; issue 19).

Found by searching as the loader does, never by loading anything (no ``dlopen``, no
child process):

* ``libnccl.so.2`` (a ``DT_NEEDED`` of torch's ``libtorch_cuda.so``): first the
  ``nvidia/nccl/lib`` folder of the ``nvidia-nccl-cu*`` wheel beside torch, which
  pip's CUDA torch wheels carry in their ``DT_RPATH`` (``$ORIGIN/../../nvidia/nccl/lib``,
  set with ``patchelf --force-rpath`` by PyTorch's manywheel build) and ld.so(8)
  searches ``DT_RPATH`` before ``LD_LIBRARY_PATH``; then ``LD_LIBRARY_PATH``, the
  ``ld.so.cache``, and the default folders ``/lib``, ``/usr/lib`` (``lib64`` too);
* the network plugin NCCL ``dlopen``s at initialisation (NCCL's ext-net documentation
  and ``NCCL_NET_PLUGIN`` in its environment variables): ``libnccl-net.so`` when
  ``NCCL_NET_PLUGIN`` is unset (NCCL logs "NET/Plugin: No plugin found (libnccl-net.so)"
  and uses its internal transports when absent); when set, "either a suffix string or
  a library name": ``ofi`` asks for ``libnccl-net-ofi.so``, a name ending in ``.so`` (or
  a path) is asked for as is; ``none`` loads no plugin. ``dlopen`` of a bare
  name searches ``LD_LIBRARY_PATH``, the cache and the default folders (dlopen(3)).

The cache is ``/etc/ld.so.cache`` read in glibc's format (``sysdeps/generic/dl-cache.h``:
the ``glibc-ld.so.cache1.1`` header, then 24-byte entries whose string offsets count
from that header), entries of another architecture left out, as ``ldconfig -p`` lists
them for this machine.
"""

from __future__ import annotations

import os
import platform
import struct
from collections.abc import Mapping
from pathlib import Path

from gpudiag.network import LibraryFile

NCCL_LIB = "libnccl.so.2"
DEFAULT_PLUGIN = "libnccl-net.so"
#: The folders ld.so searches last (ld.so(8); lib64 on 64-bit RPM distributions).
DEFAULT_DIRS = ("lib", "usr/lib", "lib64", "usr/lib64")
_NEW_MAGIC = b"glibc-ld.so.cache1.1"
_HEADER = 48  # magic and version (20), nlibs, len_strings, flags+padding, ext, unused[3]
_ENTRY = 24  # flags, key, value, osversion (4 bytes each), hwcap (8)
#: ``flags & 0xff00`` of a 64-bit library per machine (dl-cache.h FLAG_*_LIB64).
_ARCH_FLAGS = {"x86_64": 0x0300, "aarch64": 0x0A00, "ppc64le": 0x0500, "s390x": 0x0400}
#: The largest cache read (a real one is tens of KiB).
MAX_CACHE_BYTES = 16 << 20


def ld_cache(root: Path, machine: str | None = None) -> dict[str, list[str]] | None:
    """``{library name: [paths]}`` of the ld.so cache for this machine, in its order;
    None when there is no readable cache in the new format."""
    try:
        with (root / "etc" / "ld.so.cache").open("rb") as fh:
            data = fh.read(MAX_CACHE_BYTES)
    except OSError:
        return None
    start = data.find(_NEW_MAGIC)
    if start < 0 or len(data) < start + _HEADER:
        return None
    (nlibs,) = struct.unpack_from("<I", data, start + 20)
    want = _ARCH_FLAGS.get(machine if machine is not None else platform.machine())
    out: dict[str, list[str]] = {}
    for i in range(min(nlibs, (len(data) - start - _HEADER) // _ENTRY)):
        flags, key, value = struct.unpack_from("<iII", data, start + _HEADER + i * _ENTRY)
        if want is not None and flags & 0xFF00 != want:
            continue
        name, path = _cstr(data, start + key), _cstr(data, start + value)
        if name and path:
            out.setdefault(name, []).append(path)
    return out


def _cstr(data: bytes, offset: int) -> str:
    end = data.find(b"\0", offset)
    if offset >= len(data) or end < 0:
        return ""
    return data[offset:end].decode("utf-8", errors="replace")


def _search(
    name: str,
    root: Path,
    env: Mapping[str, str],
    cache: dict[str, list[str]] | None,
    first: list[tuple[Path, str]] = (),  # type: ignore[assignment]
) -> list[LibraryFile]:
    """Every file ``name`` resolves to along the loader's search, first match first."""
    dirs: list[tuple[Path, str]] = []
    for entry in (env.get("LD_LIBRARY_PATH") or "").split(":"):
        if entry.startswith("/"):
            dirs.append((Path(entry), "LD_LIBRARY_PATH"))
    found: list[LibraryFile] = []
    seen: set[str] = set()

    def add(path: str, via: str) -> None:
        if path not in seen:
            seen.add(path)
            found.append(LibraryFile(name=name, path=path, via=via))

    for folder, via in first:  # this process's own folders (torch's site): real paths
        if (folder / name).is_file():
            add(str(folder / name), via)
    for folder, via in dirs:
        if _under(root, folder / name).is_file():
            add(str(folder / name), via)
    for path in (cache or {}).get(name, []):
        if _under(root, Path(path)).is_file():
            add(path, "ld.so.cache")
    for rel in DEFAULT_DIRS:
        if (root / rel / name).is_file():
            add(f"/{rel}/{name}", "default path")
    return found


def _under(root: Path, path: Path) -> Path:
    """``path`` (absolute, as the node sees it) inside the tree at ``root``."""
    return root / str(path).lstrip("/") if str(root) != "/" else path


def find_nccl_libs(
    root: Path, env: Mapping[str, str], site: Path | None
) -> tuple[LibraryFile, ...] | None:
    """Every ``libnccl.so.2`` along the loader's search from torch; None if unsearchable."""
    if platform.system() != "Linux":
        return None
    first = [(site / "nvidia" / "nccl" / "lib", "torch wheel")] if site is not None else []
    return tuple(_search(NCCL_LIB, root, env, ld_cache(root), first))


def plugin_names(value: str | None) -> tuple[str, ...]:
    """The files NCCL tries for ``NCCL_NET_PLUGIN=value``, in order (``()``: none)."""
    value = (value or "").strip()
    if not value:
        return (DEFAULT_PLUGIN,)
    if value.lower() == "none":
        return ()
    if "/" in value or value.endswith(".so") or ".so." in value:
        return (value,)  # a library name (or path): "either a suffix string or a library name"
    return (f"libnccl-net-{value}.so",)


def find_net_plugins(root: Path, env: Mapping[str, str]) -> tuple[LibraryFile, ...] | None:
    """The NCCL network plugin files NCCL would find, in order; ``()`` none."""
    if platform.system() != "Linux":
        return None
    cache = ld_cache(root)
    out: list[LibraryFile] = []
    for name in plugin_names(env.get("NCCL_NET_PLUGIN")):
        if name.startswith("/"):
            if _under(root, Path(name)).is_file():
                out.append(LibraryFile(name=name, path=name, via="NCCL_NET_PLUGIN path"))
            continue
        out += _search(os.path.basename(name), root, env, cache)
    return tuple(out)


def find_library(name: str, root: Path, env: Mapping[str, str]) -> tuple[LibraryFile, ...] | None:
    """Every file a bare ``dlopen(name)`` would find, in the loader's order; None if
    unsearchable (not Linux)."""
    if platform.system() != "Linux":
        return None
    return tuple(_search(name, root, env, ld_cache(root)))
