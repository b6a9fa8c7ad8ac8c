"""The text of a project's files, searched for a word: who may name a function or a module.

:mod:`gpudiag.lint.callers` (who calls a function) and :mod:`gpudiag.lint.reach` (who
imports a module) ask which files under the lint root name something, and then read only
those. The files are listed once per run, and their bytes kept for the run within a
bound, so a project with many findings reads each file once, not once per name.
Configuration and documentation files count as naming it (a Hydra ``_target_``, a
README's ``python tools/x.py``): lint does not read them further.
"""

from __future__ import annotations

import os
import re
import stat

from gpudiag.lint import folders

#: where a configuration, a shell script or a document may name a module or a function
TEXT_FILES = (
    ".yaml",
    ".yml",
    ".json",
    ".toml",
    ".cfg",
    ".ini",
    ".sh",
    ".md",
    ".rst",
    ".txt",
    ".ipynb",
)
_MAX_FILES = 50_000
_SKIP = frozenset({"__pycache__", "node_modules"})
MAX_BYTES = 2 * 1024 * 1024
#: the most bytes kept for one run; past it, files are read again when searched
_KEPT_BYTES = 256 * 1024 * 1024


class ProjectText:
    """One run's listing and bytes of the files under each lint root."""

    def __init__(self) -> None:
        self._files: dict[str, tuple[str, ...]] = {}
        self._bytes: dict[str, bytes | None] = {}
        self._kept = 0

    def files(self, root: str) -> tuple[str, ...]:
        """The ``.py`` and text files under ``root``, bounded; none past the bound (then
        what names a thing is unknown)."""
        found = self._files.get(root)
        if found is None:
            found = self._files[root] = _walk(root)
        return found

    def read(self, path: str) -> bytes | None:
        """A file's bytes (None: unreadable, or over :data:`MAX_BYTES`)."""
        if path in self._bytes:
            return self._bytes[path]
        data: bytes | None = None
        try:
            # a regular file only: opening a FIFO named x.py would wait for a writer
            # (issue 21's hostile folders)
            info = os.stat(path)
            if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_BYTES:
                with open(path, "rb", opener=_nonblocking) as handle:
                    data = handle.read(MAX_BYTES + 1)
        except OSError:
            data = None
        if data is not None and len(data) > MAX_BYTES:
            data = None
        if self._kept + len(data or b"") <= _KEPT_BYTES:
            self._bytes[path] = data
            self._kept += len(data or b"")
        return data

    def naming(self, root: str, word: str) -> list[str] | None:
        """The files under ``root`` in which ``word`` stands as a word; None when one of
        them cannot be read (what it says is unknown)."""
        raw = word.encode()
        pattern = re.compile(rb"\b" + re.escape(raw) + rb"\b")
        out: list[str] = []
        for path in self.files(root):
            data = self.read(path)
            if data is None:
                if path.endswith(".py") and os.path.exists(path):
                    return None  # a module lint cannot read may name it
                continue  # a data file over the bound: no configuration
            # bytes.find first: most files do not hold the word at all, and it is many
            # times faster than the word-boundary search
            if raw in data and pattern.search(data):
                out.append(path)
        return out


def _nonblocking(path: str, flags: int) -> int:
    # a file swapped for a FIFO after the stat still does not block the open
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def root_of(file: str, roots: tuple[str, ...]) -> str | None:
    """The innermost lint root that holds ``file`` (None: a file given alone)."""
    real = os.path.realpath(file)
    inside = [r for r in roots if real.startswith(r.rstrip(os.sep) + os.sep)]
    return max(inside, key=len) if inside else None


def _walk(root: str) -> tuple[str, ...]:
    """The ``.py`` and text files below ``root`` (:func:`gpudiag.lint.folders.walk`), regular
    files only; none past the bound."""
    out: list[str] = []
    for folder, names in folders.walk(root, _kept):
        for name in names:
            path = os.path.join(folder, name)
            if name.endswith((".py", *TEXT_FILES)) and os.path.isfile(path):
                out.append(path)
        if len(out) > _MAX_FILES:
            return ()
    return tuple(out)


def _kept(_: str, name: str) -> bool:
    return not name.startswith(".") and name not in _SKIP
