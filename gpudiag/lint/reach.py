"""Modules nothing in the project imports, runs or names: code that never runs.

A module runs when it is imported, or run as a script. When lint is given the project's
folder and a file has a warning or an error, the modules that import it are looked for
(every ``.py`` file under the folder that names it, parsed, its imports resolved as
:mod:`gpudiag.lint.modules` resolves them), and theirs in turn. When none of them can be
run by itself and nothing else names any of them, nothing in the project runs the file,
and its findings are info, noted (issue 17, the tenth held-out corpus: CogVideo vendors
sgm's autoencoding losses, whose package nothing imports, and with it magvit2 and two
quantisers that use the deprecated AMP decorators at import: eight warnings judged wrong).
Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` first (Python's
import system, "Regular packages").

Anything lint cannot follow keeps a module alive, so that the warning stays:

* it can be run: a test module (pytest collects it), ``__main__``/``setup``/``conftest``,
  a file that mentions ``__main__``, or one with statements that do work at module level
  (a call, a loop, a ``with``): a script;
* it is named where lint does not read imports: a configuration, a shell script, a
  document, a notebook (``python tools/x.py``, a Hydra ``_target_``), or a string in a
  Python file (``importlib.import_module("pkg.x")``, a registry);
* an import naming it that lint cannot resolve, a Python file it cannot parse, a name
  too common to search (more than 400 files), a chain of more than 100 importers;
* a public module of a library: its top-level package sits beside a ``setup.py`` or a
  ``pyproject.toml``, so its users import it.
"""

from __future__ import annotations

import ast
import os

from gpudiag.lint.codes import Hit, demote
from gpudiag.lint.compiles import parse
from gpudiag.lint.project import Project
from gpudiag.lint.project_text import root_of
from gpudiag.lint.single_node import is_test_path

UNREACHED_NOTE = "(in a module nothing in the project imports, runs or names)"
_RUNNABLE = frozenset({"__main__.py", "setup.py", "conftest.py", "manage.py"})
_WORK = (ast.Expr, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)
#: module-level calls that only declare something (a library module makes them too)
_DECLARES = frozenset(
    {
        "namedtuple",
        "NamedTuple",
        "TypeVar",
        "NewType",
        "ParamSpec",
        "getLogger",
        "get_logger",
        "partial",
        "compile",
        "get",
        "getenv",
        "Registry",
        "field",
        "defaultdict",
        "OrderedDict",
        "dict",
        "list",
        "set",
        "tuple",
        "frozenset",
        "object",
        "Enum",
        "IntEnum",
        "dataclass",
        "cast",
        "Path",
        "join",
        "dirname",
        "abspath",
        "realpath",
        "basename",
        "property",
        "staticmethod",
        "classmethod",
        "register",
        "register_module",
        "lru_cache",
        "cache",
        "wraps",
        "float",
        "int",
        "str",
        "bool",
        "range",
        "len",
        "zip",
        "sorted",
    }
)
_MAX_NAMING = 400
_MAX_MODULES = 100


def cap(hits: list[Hit], file: str | None, project: Project) -> list[Hit]:
    """``hits``, each warning or error made info when nothing in the project runs ``file``."""
    if file is None or all(h.finding.severity == "info" for h in hits):
        return hits
    if not unreached(file, project):
        return hits
    return demote(hits, lambda _: UNREACHED_NOTE)


def unreached(file: str, project: Project) -> bool:
    """Whether no module that runs by itself, and nothing that names one, leads to ``file``
    through imports (False whenever that is not proved)."""
    root = root_of(file, project.roots)
    if root is None:
        return False  # a file given alone: its importers are not known
    home = os.path.realpath(file)
    known = project.callers.get(("reach", home))
    if isinstance(known, bool):
        return known
    seen = {home}
    pending = [home]
    while pending:
        module = pending.pop()
        importers = None if _runnable(module, project) else _importers(module, root, project)
        if importers is None or len(seen) > _MAX_MODULES:
            project.callers[("reach", home)] = False
            return False
        for importer in importers:
            if importer not in seen:
                seen.add(importer)
                pending.append(importer)
    # the importers of any of them are among them: none is reached either
    for module in seen:
        project.callers[("reach", module)] = True
    return True


def _runnable(module: str, project: Project) -> bool:
    """Run by itself (a script, a test), or a library's public module."""
    name = os.path.basename(module)
    if name in _RUNNABLE or is_test_path(module) or public(module):
        return True
    data = project.text.read(module)
    if data is None or b"__main__" in data:
        return True
    try:
        tree = parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    return any(_works(stmt) for stmt in tree.body)


def _works(stmt: ast.stmt) -> bool:
    """A module-level statement that does something when the file runs: a loop, a
    ``with``, a call (``scaler = torch.cuda.amp.GradScaler()``), other than one that only
    declares (``namedtuple``, ``getLogger``, ``TypeVar``…), which libraries do too."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if isinstance(stmt, ast.ClassDef) or _docstring(stmt):
        return False
    if isinstance(stmt, _WORK):
        return True
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call):
            func = node.func
            last = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if last not in _DECLARES:
                return True
    return False


def _docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, (str, type(Ellipsis)))
    )


def public(module: str) -> bool:
    """In a package whose top-level folder sits beside a ``setup.py`` or a
    ``pyproject.toml``: a library's, which its users import."""
    folder = os.path.dirname(module)
    top = None
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        top = folder
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if top is None:
        return False
    above = os.path.dirname(top)
    return any(os.path.isfile(os.path.join(above, n)) for n in ("setup.py", "pyproject.toml"))


def _importers(module: str, root: str, project: Project) -> list[str] | None:
    """The project's Python files whose imports run ``module``; None when something else
    names it, or lint cannot tell."""
    package = os.path.basename(module) == "__init__.py"
    word = os.path.basename(os.path.dirname(module)) if package else module[: -len(".py")]
    word = os.path.basename(word)
    if not word.isidentifier():
        return None
    naming = project.text.naming(root, word)
    if naming is None or len(naming) > _MAX_NAMING:
        return None
    out: list[str] = []
    for path in naming:
        real = os.path.realpath(path)
        if real == module:
            continue
        if not path.endswith(".py"):
            return None  # a configuration, a script or a document names it
        loads = _loads(path, word, module, package, project)
        if loads is None:
            return None
        if loads:
            out.append(real)
    return out


def _loads(path: str, word: str, module: str, package: bool, project: Project) -> bool | None:
    """Whether ``path``'s imports run ``module``; None when lint cannot tell (an import
    naming ``word`` it cannot resolve, a string naming it, a file it cannot parse)."""
    data = project.text.read(path)
    if data is None:
        return None
    try:
        tree = parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    inside = os.path.dirname(module) + os.sep
    docstrings = docstring_ids(tree)
    found = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings and word_in(word, node.value):
                return None  # importlib, a registry, a subprocess: named in a string
            continue
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        for level, parts in _targets(node):
            if not parts or parts[-1] != word:
                continue  # another module, or a name inside the module
            file = project.module_file(path, level, parts)
            if file is None:
                return None  # names it, and lint cannot find where it leads
            if file == module or (package and file.startswith(inside)):
                found = True
    return found


def docstring_ids(tree: ast.AST) -> set[int]:
    """The ``id`` of every docstring's constant in ``tree``: prose, which names nothing."""
    return {id(d) for n in ast.walk(tree) if (d := _docstring_of(n)) is not None}


def _docstring_of(node: ast.AST) -> ast.expr | None:
    """The docstring's constant of a module, class or function (prose, not a name)."""
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        first = node.body[0] if node.body else None
        if isinstance(first, ast.Expr) and _docstring(first):
            return first.value
    return None


def word_in(word: str, text: str) -> bool:
    """Whether ``word`` stands in ``text`` as a word (not inside an identifier)."""
    at = text.find(word)
    while at >= 0:
        before = text[at - 1] if at else " "
        end = at + len(word)
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        at = text.find(word, at + 1)
    return False


def _targets(node: ast.Import | ast.ImportFrom) -> list[tuple[int, list[str]]]:
    """Every module an import runs, as (level, parts): ``import a.b`` runs ``a`` and
    ``a.b``; ``from .a import b`` runs ``.a`` and, if it is a module, ``.a.b``."""
    out: list[tuple[int, list[str]]] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            parts = alias.name.split(".")
            out.extend((0, parts[:k]) for k in range(1, len(parts) + 1))
        return out
    base = node.module.split(".") if node.module else []
    out.extend((node.level, base[:k]) for k in range(0 if node.level else 1, len(base) + 1))
    out.extend((node.level, [*base, alias.name]) for alias in node.names if alias.name != "*")
    return out
