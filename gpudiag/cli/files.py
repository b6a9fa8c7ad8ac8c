"""Files the command line writes (``snapshot -o``, ``--json-out``): atomically.

A gate's output must never be half-written: the text goes to a temporary file
in the target's own directory (so the rename stays on one file system),
is flushed to disk, and is renamed over the target. ``rename(2)`` replaces a
symbolic link at the target itself; it never writes through it. On any failure
the temporary file is removed and the old file is left as it was.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import suppress
from pathlib import Path

from gpudiag.errors import GpudiagInputError


def write_file_atomically(path: str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically.

    Raises:
        GpudiagInputError: the file cannot be written (one line, for exit 2).
    """
    target = Path(path)
    if target.is_dir() and not target.is_symlink():
        raise GpudiagInputError(f"cannot write {path}: it is a directory")
    directory = target.parent
    data = text.encode("utf-8")
    tmp_name: str | None = None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        # A new file gets the usual permissions (mkstemp makes 0600); an
        # existing regular file keeps its own mode.
        mode = _mode_for(target)
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
        tmp_name = None
    except OSError as exc:
        raise GpudiagInputError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if tmp_name is not None:
            with suppress(OSError):
                os.unlink(tmp_name)


def _mode_for(target: Path) -> int:
    with suppress(OSError):
        info = target.lstat()
        if not target.is_symlink():
            return info.st_mode & 0o7777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
