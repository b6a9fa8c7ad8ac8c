"""An iterative walk of a folder tree, for lint's own file list and for the project's text.

Iterative: ``os.walk`` recurses once per level before Python 3.12 (issue 21: a
1,200-deep tree raised RecursionError). Like ``os.walk``: top-down, each folder's
entries sorted, links to folders not followed, a folder that cannot be listed passed
over. A folder reached twice (a bind mount of its parent) is read once, so the walk ends.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator


def walk(top: str, keep: Callable[[str, str], bool]) -> Iterator[tuple[str, list[str]]]:
    """(folder, its files' names, sorted) for ``top`` and each folder below it that
    ``keep(parent, name)`` keeps."""
    seen: set[tuple[int, int]] = set()
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            info = os.stat(folder)
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue
        dirs: list[str] = []
        files: list[str] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            (dirs if is_dir else files).append(entry.name)
        yield folder, sorted(files)
        subs = sorted(d for d in dirs if keep(folder, d))
        for name in reversed(subs):  # popped in sorted order, each tree before the next
            sub = os.path.join(folder, name)
            if not os.path.islink(sub):
                stack.append(sub)
