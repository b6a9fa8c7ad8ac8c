"""Functions and classes that nothing in the project uses: code that never runs.

A module-level function or class runs only when something uses it: a call, a reference
handed on, a subclass. When lint was given the project's folder and a warning or an
error lies inside one, every ``.py`` file under the folder that names it is read for its
uses; a use inside another function or class leads to that one's uses, and a use at
module level runs when its module does (:mod:`gpudiag.lint.reach`). When no chain of uses
reaches code that runs, the finding is info, noted (issue 17: a dead evaluation function
imported and never called, NativeScaler classes nothing builds, ``CheckpointFunction``
copies whose ``.apply`` is commented out, an ``autocast`` wrapper nothing imports:
held-out corpora 4 to 10, 14 warnings judged wrong).

Anything lint cannot follow counts as a use that runs: a decorator other than torch's
grad modes and ``staticmethod``/``classmethod`` (a registry, a CLI, a fixture); a test
module; a library's public module (:func:`gpudiag.lint.reach.public`); a configuration,
shell script, document, notebook or string naming it; an import of it under another
name, from a module lint cannot resolve, or ``*``; an attribute of that name
(``engine.final_test(...)``) unless it is on ``self``/``cls`` or a standard-library or
torch module; a file lint cannot read or parse; a name in more than 400 files, or a chain
of more than 60 uses.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import os

from gpudiag.lint import reach
from gpudiag.lint.codes import Hit, demote
from gpudiag.lint.compiles import parse
from gpudiag.lint.modules import KNOWN
from gpudiag.lint.project import Project, Sym
from gpudiag.lint.project_text import root_of
from gpudiag.lint.single_node import is_test_path
from gpudiag.lint.syntax import dotted_name, plainly_decorated

_MAX_NAMING = 400
_MAX_SYMBOLS = 60
_Defn = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


class _Alive(Exception):
    """Something lint cannot follow uses it: the search stops."""


def cap(hits: list[Hit], tree: ast.Module | None, file: str | None, project: Project) -> list[Hit]:
    """``hits``, each warning or error inside a function or class nothing uses made info."""
    if tree is None or file is None or all(h.finding.severity == "info" for h in hits):
        return hits
    if root_of(file, project.roots) is None:
        return hits
    home = os.path.realpath(file)
    key = ("index", home)
    table = project.callers.get(key)
    if not isinstance(table, _Index):
        table = project.callers[key] = _index(tree)  # its own tree: not parsed again

    def note_of(h: Hit) -> str | None:
        name = table.at(h.line)
        if name is None or not unused(home, name, project):
            return None
        return f"(in {name}, which nothing in the project uses)"

    return demote(hits, note_of)


@dataclasses.dataclass
class _Index:
    """What :func:`unused` asks of one module, read in one walk and kept for the run: its
    top-level definitions, the lines that run only when one is used (a function's body,
    a method's body; a decorator, a default or a class body's own statements run with
    the module), its ``from`` imports, and where each name and attribute is used."""

    defs: dict[str, tuple[str, bool] | None]  # name -> (kind, plain decorators); None: twice
    starts: list[int]
    spans: list[tuple[int, int, str]]
    imports: list[tuple[int, str | None, str, str | None]]  # level, module, name, asname
    names: dict[str, list[tuple[int, bool]]]  # id -> (line, loaded)
    attrs: dict[str, list[int]]  # attr -> lines (not on self/cls or a known module)
    strings: str  # every string constant but docstrings

    def at(self, line: int) -> str | None:
        """The function or class whose use runs ``line``; None: it runs with the module."""
        at = bisect.bisect_right(self.starts, line) - 1
        if at < 0 or line > self.spans[at][1]:
            return None
        return self.spans[at][2]


def _index(tree: ast.Module) -> _Index:
    defs: dict[str, tuple[str, bool] | None] = {}
    spans: list[tuple[int, int, str]] = []
    for stmt in tree.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        kind = "class" if isinstance(stmt, ast.ClassDef) else "func"
        # a second definition of the name: which one runs is not known here
        defs[stmt.name] = (kind, plainly_decorated(stmt)) if stmt.name not in defs else None
        if isinstance(stmt, ast.ClassDef):
            methods = [
                s for s in stmt.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
            ]
            spans.extend((_body_start(m), m.end_lineno or m.lineno, stmt.name) for m in methods)
        else:
            spans.append((_body_start(stmt), stmt.end_lineno or stmt.lineno, stmt.name))
    spans.sort()
    docstrings: set[int] = set()
    imports: list[tuple[int, str | None, str, str | None]] = []
    names: dict[str, list[tuple[int, bool]]] = {}
    attrs: dict[str, list[int]] = {}
    strings: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            # ast.walk visits a node before its children: the docstring is known in time
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
        elif isinstance(node, ast.Name):
            names.setdefault(node.id, []).append((node.lineno, isinstance(node.ctx, ast.Load)))
        elif isinstance(node, ast.Attribute):
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue  # an attribute of an instance: not a module's function
            if (dotted_name(base) or "").split(".")[0] in KNOWN:
                continue  # torch.cuda.amp.autocast, os.path.join
            attrs.setdefault(node.attr, []).append(node.lineno)
        elif isinstance(node, ast.ImportFrom):
            imports.extend((node.level, node.module, a.name, a.asname) for a in node.names)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            strings.append(node.value)
    return _Index(defs, [s for s, _, _ in spans], spans, imports, names, attrs, "\n".join(strings))


def _body_start(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return fn.body[0].lineno if fn.body else fn.lineno


def unused(home: str, name: str, project: Project) -> bool:
    """Whether no chain of uses leads from code that runs to ``name``, defined at the top
    of ``home`` (False whenever that is not proved)."""
    key = ("unused", home, name)
    known = project.callers.get(key)
    if isinstance(known, bool):
        return known
    root = root_of(home, project.roots)
    seen = {(home, name)}
    pending = [(home, name)]
    try:
        if root is None or _used_here(home, name, project):
            raise _Alive
        while pending:
            module, symbol = pending.pop()
            for user in _users(module, symbol, root, project):
                if user not in seen:
                    seen.add(user)
                    pending.append(user)
                    if len(seen) > _MAX_SYMBOLS:
                        raise _Alive
    except _Alive:
        project.callers[key] = False
        return False
    for module, symbol in seen:
        project.callers[("unused", module, symbol)] = True
    return True


def _used_here(home: str, name: str, project: Project) -> bool:
    """A chain of uses within ``home`` alone that reaches its module level, in a module
    that runs (a script's ``main()`` calls ``train()``): alive, with no search of the
    project, which most findings need not pay for."""
    table = _indexed(home, project)
    if table is None:
        return False
    seen = {name}
    pending = [name]
    while pending and len(seen) <= _MAX_SYMBOLS:
        symbol = pending.pop()
        for line, loaded in table.names.get(symbol, ()):
            user = table.at(line)
            if user is None:
                if loaded and not reach.unreached(home, project):
                    return True
            elif user not in seen:
                seen.add(user)
                pending.append(user)
    return False


def _users(module: str, name: str, root: str, project: Project) -> list[tuple[str, str]]:
    """The functions and classes that use ``name`` of ``module``; raises :class:`_Alive`
    for a use at module level of a module that runs, or one lint cannot follow."""
    if name.startswith("__") or is_test_path(module) or reach.public(module):
        raise _Alive
    own = _indexed(module, project)
    defn = own.defs.get(name) if own is not None else None
    if defn is None or not defn[1]:
        raise _Alive  # defined twice, or decorated by a registry, a CLI, a fixture
    if defn[0] == "class" and project.opaque_bases(Sym(module, "class", name)):
        # a subclass of a framework's class: the framework may find it by scanning the
        # module (diffusers' community pipelines are loaded by file name)
        raise _Alive
    naming = project.text.naming(root, name)
    if naming is None or len(naming) > _MAX_NAMING:
        raise _Alive
    users: list[tuple[str, str]] = []
    for path in naming:
        if not path.endswith(".py"):
            raise _Alive  # a configuration or a document names it
        real = os.path.realpath(path)
        for user in _uses_in(real, module, name, project):
            if user is None:
                if not reach.unreached(real, project):
                    raise _Alive  # used at module level of a module that runs
            elif not (real == module and user == name):
                users.append((real, user))
    return users


def _indexed(path: str, project: Project) -> _Index | None:
    key = ("index", path)
    if key not in project.callers:
        data = project.text.read(path)
        try:
            project.callers[key] = _index(parse(data)) if data is not None else None
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            project.callers[key] = None
    found = project.callers[key]
    return found if isinstance(found, _Index) else None


def _uses_in(path: str, module: str, name: str, project: Project) -> list[str | None]:
    """Where ``path`` uses ``name`` of ``module``: the function or class each use is in,
    None for module level; raises :class:`_Alive` for a use lint cannot follow."""
    table = _indexed(path, project)
    if table is None:
        raise _Alive  # a file lint cannot read or parse may use it
    if reach.word_in(name, table.strings):
        raise _Alive  # named in a string: getattr, a registry, __all__
    bound = path == module  # a bare name here is the definition's
    for level, from_module, imported, asname in table.imports:
        if imported == "*":
            # ``from m import *`` brings it when m is its module, or may (unread)
            parts = from_module.split(".") if from_module else []
            star = project.module_file(path, level, parts)
            known = star is not None or (not level and parts[:1] and parts[0] in KNOWN)
            bound = bound or star == module or not known
            continue
        if imported != name:
            continue
        dotted = "." * level + (f"{from_module}." if from_module else "") + name
        found = project.resolve(path, dotted)
        if found is None:
            mine = False  # torch's, the standard library's: another of that name
        elif not isinstance(found, Sym):
            raise _Alive  # from a module lint cannot read: it may be this one
        else:
            mine = found.path == module and found.name == name
            if mine and asname is not None:
                raise _Alive  # this one, under another name
        if path == module and not mine:
            raise _Alive  # its own module imports another of that name
        bound = bound or mine
    users: list[str | None] = []
    if bound:
        for line, loaded in table.names.get(name, ()):
            if not loaded:
                raise _Alive  # rebound: what runs under the name is not known
            users.append(table.at(line))
    users.extend(table.at(line) for line in table.attrs.get(name, ()))
    return users
