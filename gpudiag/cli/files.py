"""Files the command line writes (``snapshot -o``, ``--json-out``): atomically.

A gate's output must never be half-written: the text goes to a temporary file
in the target's own directory (so the rename stays on one file system),
is flushed to disk, and is renamed over the target. ``rename(2)`` replaces a
symbolic link at the target itself; it never writes through it. On any failure
the temporary file is removed and the old file is left as it was.

Only regular files are written (issue 21): renaming over a character device, a
FIFO or ``/dev/stdout`` would replace the special file itself (as root,
``--json-out /dev/null`` turned ``/dev/null`` into a plain file). So a target
that exists and is not a regular file, or that lies in ``/dev``, ``/proc`` or
``/sys``, is refused with one line, and so are a read-only file and the file
the command is reading (``--snapshot``).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

from gpudiag.errors import GpudiagInputError

#: Directories of special files: nothing gpudiag writes belongs there.
_SPECIAL_DIRS = ("/dev", "/proc", "/sys")

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def _why_not(path: str, inputs: Iterable[str]) -> str | None:
    """Why ``path`` must not be written, or None when it may be."""
    # Every hop of a link chain: /dev/stdout links to /proc/self/fd/1, which may
    # resolve to a regular file (stdout redirected); renaming over any of them
    # would replace a link that stands for a special file.
    for where in (*_link_hops(path), os.path.realpath(path)):
        for special in _SPECIAL_DIRS:
            if where == special or where.startswith(special + "/"):
                return f"it is in {special}, a directory of special files"
    try:
        info = os.stat(path)  # follows a symbolic link: what would a reader of FILE get?
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    for test, kind in _KINDS:
        if test(info.st_mode):
            return f"it is {kind}; gpudiag writes only regular files"
    if not stat.S_ISREG(info.st_mode):
        return "it is not a regular file"
    if info.st_mode & 0o222 == 0:
        # root may write anyway; a mode with no write bit says "keep" (issue 21)
        return f"it is read-only (mode {info.st_mode & 0o777:04o})"
    for other in inputs:
        with suppress(OSError):
            if os.path.samefile(path, other):
                return f"it is the input being read ({other})"
    return None


def _link_hops(path: str, limit: int = 40) -> list[str]:
    """``path`` and every path its chain of symbolic links passes through."""
    hops = [os.path.abspath(path)]
    for _ in range(limit):
        try:
            target = os.readlink(hops[-1])
        except OSError:  # not a link (or gone): the chain ends here
            break
        hops.append(os.path.normpath(os.path.join(os.path.dirname(hops[-1]), target)))
    return hops


def write_file_atomically(path: str, text: str, inputs: Iterable[str] = ()) -> None:
    """Write ``text`` (UTF-8) to the regular file ``path`` atomically.

    ``inputs`` are files the command reads (a ``--snapshot``): never overwritten.

    Raises:
        GpudiagInputError: the file cannot or must not be written (one line, for
            exit 2): a directory, a device, a FIFO, a socket, anything in ``/dev``,
            ``/proc`` or ``/sys``, a read-only file, an input, or an OSError
            (its own text).
    """
    inputs = tuple(inputs)
    shown = _shown(path)
    if not path:
        # Path("") is ".": the rename failed with "Device or resource busy" (issue 21)
        raise GpudiagInputError("cannot write '': an empty file name")
    why = _why_not(path, inputs)
    if why is not None:
        raise GpudiagInputError(f"cannot write {shown}: {why}")
    target = Path(path)
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
        why = _why_not(path, inputs)  # again: the target may have changed meanwhile
        if why is not None:
            raise GpudiagInputError(f"cannot write {shown}: {why}")
        os.replace(tmp_name, target)
        tmp_name = None
    except OSError as exc:
        # The real error, never a generic one (issue 21): ENOSPC, EACCES, ENAMETOOLONG…
        raise GpudiagInputError(f"cannot write {shown}: {exc.strerror or exc}") from None
    finally:
        if tmp_name is not None:
            with suppress(OSError):
                os.unlink(tmp_name)


def _shown(path: str) -> str:
    """FILE for a message: escaped and, when long, cut with its length said, so
    that the ``: reason`` after it survives (a 300-character name swallowed it)."""
    from gpudiag.render.text import esc

    return esc(path)


def _mode_for(target: Path) -> int:
    with suppress(OSError):
        info = target.lstat()
        if not target.is_symlink():
            return info.st_mode & 0o7777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
