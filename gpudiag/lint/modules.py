"""Where a linted file's imports are found on disk (issue 17 item 1, "Project reading").

An absolute import from a file is looked for in the file's folder, the folders above it
up to the lint root that holds it, and the roots; a relative import from the file's
package. Every lookup is cached for the run, and each folder is listed once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable

#: Top-level modules that are never the project's (the standard library, torch).
KNOWN = frozenset(sys.stdlib_module_names) | {"torch", "torchvision", "torchaudio", "__future__"}


class ModuleFinder:
    """The module files a project's imports name, looked up once per run."""

    def __init__(self, roots: Iterable[str] = ()) -> None:
        self.roots = tuple(dict.fromkeys(os.path.realpath(r) for r in roots))
        self._dirs: dict[str, tuple[str, ...]] = {}
        self._folder: dict[str, str] = {}  # file -> its real folder
        self._found: dict[tuple[tuple[str, ...], str], tuple[str, int] | None] = {}
        #: each folder's entries, listed once: a lookup costs no system call (issue 17:
        #: a stat per part and folder was 2% of lint's time on the corpus)
        self._listings: dict[str, dict[str, bool]] = {}

    def search_dirs(self, file: str) -> tuple[str, ...]:
        """Where an absolute import from ``file`` is looked for, first match wins: the
        file's folder, the folders above it up to the lint root that holds it, the roots;
        for a file outside every root, the folder above the package it is part of
        (``python -m pkg.train``). Nothing above a root: a module there is unresolved."""
        here = self.folder(file)
        found = self._dirs.get(here)
        if found is not None:
            return found
        dirs = [here]
        inside = [r for r in self.roots if here == r or here.startswith(r.rstrip(os.sep) + os.sep)]
        top = max(inside, key=len) if inside else None
        up = here
        while top is not None and up != top and os.path.dirname(up) != up:
            up = os.path.dirname(up)
            dirs.append(up)
        dirs.extend(self.roots)
        if top is None:
            # a file given alone: the folder above the package it is part of
            up = here
            while os.path.isfile(os.path.join(up, "__init__.py")) and os.path.dirname(up) != up:
                up = os.path.dirname(up)
            dirs.append(up)
        result = tuple(dict.fromkeys(dirs))
        self._dirs[here] = result
        return result

    def _locate(self, dirs: tuple[str, ...], parts: list[str]) -> tuple[str, int] | None:
        """The module file the longest prefix of ``parts`` names, and how many parts it
        took; None when the first part is no module or package in any of ``dirs``."""
        key = (dirs, ".".join(parts))
        if key in self._found:
            return self._found[key]
        result = None
        for base in dirs:
            result = _descend(self.listing, base, parts)
            if result is not None:
                break
        self._found[key] = result
        return result

    def module_file(self, file: str, level: int, parts: list[str]) -> str | None:
        """The module file that ``parts`` (after ``level`` dots) names, imported from
        ``file``; None when lint cannot find all of it, or it is no project module."""
        if level:
            found = self._relative(file, level, parts)
        elif parts and parts[0] not in KNOWN:
            found = self._locate(self.search_dirs(file), parts)
        else:
            return None
        return found[0] if found is not None and found[1] == len(parts) else None

    def folder(self, file: str) -> str:
        found = self._folder.get(file)
        if found is None:
            found = self._folder[file] = os.path.dirname(os.path.realpath(file))
        return found

    def _relative(self, file: str, level: int, parts: list[str]) -> tuple[str, int] | None:
        base = self.folder(file)
        for _ in range(level - 1):
            base = os.path.dirname(base)
        key = ((base,), "." + ".".join(parts))
        if key not in self._found:
            self._found[key] = _descend(self.listing, base, parts, package=True)
        return self._found[key]

    def listing(self, folder: str) -> dict[str, bool]:
        found = self._listings.get(folder)
        if found is None:
            found = self._listings[folder] = _listing(folder)
        return found

    def is_module(self, file: str, dotted: str) -> bool:
        """Whether ``dotted`` (absolute) names a module or package of the project."""
        parts = dotted.split(".")
        if not parts[0] or parts[0] in KNOWN:
            return False
        return self._locate(self.search_dirs(file), parts) is not None


def _descend(
    listing: Callable[[str], dict[str, bool]],
    base: str,
    parts: list[str],
    *,
    package: bool = False,
) -> tuple[str, int] | None:
    """The module file under ``base`` that the longest prefix of ``parts`` names, looked
    up in the folders' ``listing`` (name -> whether it is a folder).

    ``package``: ``base`` is itself a package (a relative import), so an empty prefix
    names its ``__init__.py``."""
    cur = base
    last: tuple[str, int] | None = None
    if package and listing(base).get("__init__.py") is False:
        last = (os.path.join(base, "__init__.py"), 0)
    for i, part in enumerate(parts):
        if not part.isidentifier():
            break
        here = listing(cur)
        sub = os.path.join(cur, part)
        if here.get(part + ".py") is False:
            return (sub + ".py", i + 1)
        if not here.get(part):
            break
        if listing(sub).get("__init__.py") is False:
            last = (os.path.join(sub, "__init__.py"), i + 1)
        cur = sub
    return last


def _listing(folder: str) -> dict[str, bool]:
    """A folder's entries: name -> whether it is a folder (links followed, as
    ``os.path.isdir`` does); empty when it cannot be listed."""
    out: dict[str, bool] = {}
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    if entry.is_dir():
                        out[entry.name] = True
                    elif entry.is_file():
                        out[entry.name] = False
                except OSError:
                    continue
    except OSError:
        pass
    return out
