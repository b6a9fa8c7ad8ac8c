"""Methods that nothing in the project calls: code that never runs.

A method of a plain class (no base class, registry or metaclass: nothing outside
the project calls into it, unlike a ``LightningModule``'s hooks or an rpyc service's
``exposed_`` methods) runs only when something names it: ``self.name()``,
``obj.name``, ``getattr(obj, "name")``. When lint was given the project's folder and a
warning or an error lies inside such a method, and its name stands nowhere in the
project but on its own ``def`` line (no ``.py`` file, configuration, script or
document names it), nothing calls it, and the finding is info, noted (issue 17, a
fourteenth held-out corpus: torchmultimodal's FLAVA ``Trainer.imagenet_validate``,
left behind a ``# TODO implement imagenet eval``). Dunder methods, test modules and a
library's public modules (:func:`gpudiag.lint.reach.public`, but for ``examples/``,
``scripts/``, ``tools/``… beside the ``setup.py``) are left alone.
"""

from __future__ import annotations

import ast
import os

from gpudiag.lint import reach
from gpudiag.lint.codes import Hit, demote
from gpudiag.lint.project import Project
from gpudiag.lint.project_text import root_of
from gpudiag.lint.single_node import is_test_path
from gpudiag.lint.syntax import dotted_name

_PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod"})
_NOT_INSTALLED = frozenset(
    {"examples", "example", "scripts", "tools", "benchmarks", "demo", "demos", "projects"}
)
#: class decorators that leave who calls the methods unchanged (torch.distributed.elastic's
#: ``record``, which only records an exception's traceback)
_PLAIN_CLASS_DECORATORS = frozenset(
    {"record", "dataclass", "dataclasses.dataclass", "total_ordering", "functools.total_ordering"}
)


def cap(hits: list[Hit], tree: ast.Module | None, file: str | None, project: Project) -> list[Hit]:
    """``hits``, each warning or error inside a method nothing calls made info."""
    if tree is None or file is None or all(h.finding.severity == "info" for h in hits):
        return hits
    root = root_of(file, project.roots)
    if root is None or is_test_path(file) or _library(file, root):
        return hits
    methods = _plain_methods(tree)
    if not methods:
        return hits
    home = os.path.realpath(file)

    def note_of(h: Hit) -> str | None:
        for cls, fn in methods:
            if fn.lineno < h.line <= (fn.end_lineno or fn.lineno):
                if _uncalled(home, root, fn, project):
                    return f"(in {cls.name}.{fn.name}, which nothing in the project calls)"
                return None
        return None

    return demote(hits, note_of)


def _library(file: str, root: str) -> bool:
    """A library's public module (its users may call any method), unless it sits in a
    folder of examples or scripts, which packaging leaves out
    (``find_packages(exclude=["examples*", …])``)."""
    if not reach.public(file):
        return False
    first = os.path.relpath(os.path.realpath(file), root).split(os.sep)[0]
    return first not in _NOT_INSTALLED


def _plain_methods(
    tree: ast.Module,
) -> list[tuple[ast.ClassDef, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """The non-dunder methods, plainly decorated at most, of the module's classes that
    have no base, decorator or keyword (a metaclass)."""
    out: list[tuple[ast.ClassDef, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef) or cls.keywords:
            continue
        if not all((dotted_name(d) or "") in _PLAIN_CLASS_DECORATORS for d in cls.decorator_list):
            continue  # a registry's: the framework that builds it calls its methods
        if any(not (isinstance(b, ast.Name) and b.id == "object") for b in cls.bases):
            continue
        for fn in cls.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if fn.name.startswith("__") or not all(
                isinstance(d, ast.Name) and d.id in _PLAIN_DECORATORS for d in fn.decorator_list
            ):
                continue
            out.append((cls, fn))
    return out


def _uncalled(
    home: str, root: str, fn: ast.FunctionDef | ast.AsyncFunctionDef, project: Project
) -> bool:
    """Whether ``fn``'s name stands in the project only on its own ``def`` line."""
    key = ("method", home, fn.name, fn.lineno)
    known = project.callers.get(key)
    if isinstance(known, bool):
        return known
    naming = project.text.naming(root, fn.name)
    result = False
    if naming is not None and all(os.path.realpath(p) == home for p in naming):
        data = project.text.read(home)
        if data is not None:
            lines = data.decode("utf-8", "replace").splitlines()
            result = not any(
                reach.word_in(fn.name, text) for at, text in enumerate(lines, 1) if at != fn.lineno
            )
    project.callers[key] = result
    return result
