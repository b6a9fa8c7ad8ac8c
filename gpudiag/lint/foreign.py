"""``.py`` files of another language's project vendored into this one: test input, not
Python this project runs.

CodeBLEU, copied into many code-model evaluation repositories, vendors the tree-sitter
Python grammar (``parser/tree-sitter-python/``: ``package.json``, ``Cargo.toml``,
``binding.gyp``, ``grammar.js``). Its ``examples/`` and ``test/`` hold ``.py`` files that
are Python 2, mixed tabs and spaces or deliberately unfinished: the grammar's test input.
They do not parse, and no Python runs them (issue 17, the tenth held-out corpus: ten
``LINT-PARSE-ERROR`` errors in LLaMA-Adapter's gorilla/ copy). A file that does not parse
is info, not an error, when a folder between it and the lint root (the root excluded: a
repository may keep a ``package.json`` for its tooling) is such a project's, and no
folder on the way, that one included, is a Python package (``__init__.py``,
``setup.py``, ``pyproject.toml``, ``setup.cfg``).
"""

from __future__ import annotations

import os

#: files that make a folder the root of a JavaScript, Rust, node-gyp or tree-sitter project
_MANIFESTS = ("package.json", "Cargo.toml", "binding.gyp", "grammar.js")
_PYTHON = ("__init__.py", "setup.py", "pyproject.toml", "setup.cfg")
_MAX_UP = 8


def foreign_project(file: str | None, roots: tuple[str, ...]) -> str | None:
    """The folder (relative to the lint root) of the non-Python project ``file`` lies in,
    and its manifest (``parser/tree-sitter-python (package.json)``), or None."""
    if file is None:
        return None
    folder = os.path.dirname(os.path.realpath(file))
    root = max(
        (r for r in roots if folder.startswith(r.rstrip(os.sep) + os.sep)), key=len, default=None
    )
    if root is None:
        return None
    for _ in range(_MAX_UP):
        if folder == root or len(folder) <= len(root):
            return None
        try:
            entries = set(os.listdir(folder))
        except OSError:
            return None
        if entries.intersection(_PYTHON):
            return None
        manifest = next((m for m in _MANIFESTS if m in entries), None)
        if manifest is not None:
            return f"{os.path.relpath(folder, root)} ({manifest})"
        folder = os.path.dirname(folder)
    return None
