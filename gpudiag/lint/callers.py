"""Arms that run only when a caller passes a parameter, and no caller in the project does.

::

    def train_one_epoch(model, loader, scaler, beit_like=True):
        if beit_like:
            ...                                  # what every call runs
        else:
            with torch.cuda.amp.autocast():      # only under beit_like=False
                ...

The ``else`` arm runs only when a caller passes ``beit_like`` (a false value); when every
call of ``train_one_epoch`` in the project leaves it at its default, the arm never runs, and
a warning or an error in it is about code that does not run (issue 17, the ninth held-out
corpus: three deprecated-AMP warnings in EVA-02's and EVA-01's engine_for_pretraining.py,
judged wrong for it). Such a finding is info, noted. Python binds an argument that is not
passed to the parameter's default (Python language reference, "Calls").

The callers are read only when lint was given the project's folder (a lint root holds
the file): every ``.py`` file under it that names the function is parsed and its calls
read. The arm is called dead only when that proves it: at least one call is found, none
passes the parameter (by keyword, by position, or through ``*args``/``**kwargs``), and the
function is used in no other way (handed on as a value, named in a string or in a
configuration file, imported under another name, decorated by a framework). Read only
for a finding in such an arm; each name is searched once per run.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Callable

from gpudiag.lint import shown
from gpudiag.lint.codes import Hit, demote
from gpudiag.lint.compiles import parse
from gpudiag.lint.modules import KNOWN
from gpudiag.lint.project import Project, Sym
from gpudiag.lint.project_text import root_of
from gpudiag.lint.syntax import plainly_decorated


@dataclasses.dataclass(frozen=True)
class _Arm:
    func: ast.FunctionDef | ast.AsyncFunctionDef
    cls: ast.ClassDef | None
    param: str
    default: object
    test_line: int


def cap(hits: list[Hit], tree: ast.Module | None, file: str | None, project: Project) -> list[Hit]:
    """``hits``, each warning or error in an arm no call in the project takes made info."""
    if tree is None or file is None or all(h.finding.severity == "info" for h in hits):
        return hits
    if root_of(file, project.roots) is None:
        return hits  # a file given alone: its callers are not known

    def note_of(h: Hit) -> str | None:
        arm = next((a for a in _arms(tree, h.line) if _never_taken(file, a, project)), None)
        if arm is None:
            return None
        name = f"{arm.cls.name}.{arm.func.name}" if arm.cls else arm.func.name
        return (
            f"(only where a caller passes {arm.param}: the arm of the test at line "
            f"{arm.test_line} runs only then, and no call of {name}() in the project "
            f"does; its default is {shown.text(repr(arm.default))})"
        )

    return demote(hits, note_of)


def _arms(tree: ast.Module, line: int) -> list[_Arm]:
    """The ``if`` arms holding ``line`` whose test is on a parameter of the function they
    are in, outermost first."""
    found: list[_Arm] = []
    func: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    cls: ast.ClassDef | None = None
    body: list[ast.stmt] = tree.body
    while True:
        stmt = next((s for s in body if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
        if stmt is None:
            return found
        if isinstance(stmt, ast.ClassDef):
            cls, func, body = stmt, None, stmt.body
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if func is not None:
                cls = None  # a function nested in a method
            func, body = stmt, stmt.body
        elif isinstance(stmt, ast.If):
            in_body = _holds(stmt.body, line)
            if not in_body and not _holds(stmt.orelse, line):
                return found  # the line is the test's own
            if func is not None:
                arm = _arm(func, cls if func in getattr(cls, "body", ()) else None, stmt, in_body)
                if arm is not None:
                    found.append(arm)
            body = stmt.body if in_body else stmt.orelse
        else:
            body = _blocks(stmt)
            if not body:
                return found


def _holds(body: list[ast.stmt], line: int) -> bool:
    return any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in body)


def _blocks(stmt: ast.stmt) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for item in getattr(stmt, field, ()) or ():
            if isinstance(item, (ast.ExceptHandler, ast.match_case)):
                out.extend(item.body)
            elif isinstance(item, ast.stmt):
                out.append(item)
    return out


def _arm(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    cls: ast.ClassDef | None,
    node: ast.If,
    in_body: bool,
) -> _Arm | None:
    name, truth = _test_on(node.test)
    if name is None or truth is None:
        return None
    defaults = _defaults(func)
    if name not in defaults or _assigned(func, name):
        return None
    default = defaults[name]
    if truth(default) == in_body:
        return None  # the default takes this arm
    return _Arm(func, cls, name, default, node.lineno)


Truth = Callable[[object], bool]


def _test_on(test: ast.expr) -> tuple[str | None, Truth | None]:
    """The parameter an ``if`` tests (``p``, ``not p``, ``p is None``, ``p == "x"``), and the
    test's truth as a function of its value."""
    if isinstance(test, ast.Name):
        return test.id, bool
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        if isinstance(test.operand, ast.Name):
            return test.operand.id, lambda v: not v
        return None, None
    if (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and len(test.ops) == 1
        and isinstance(test.comparators[0], ast.Constant)
    ):
        other = test.comparators[0].value
        op = test.ops[0]
        tests: dict[type, Truth] = {
            ast.Is: lambda v: v is other,
            ast.IsNot: lambda v: v is not other,
            ast.Eq: lambda v: bool(v == other),
            ast.NotEq: lambda v: bool(v != other),
        }
        truth = tests.get(type(op))
        return (test.left.id, truth) if truth is not None else (None, None)
    return None, None


def _defaults(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, object]:
    """Parameters with a constant default (positional ones and keyword-only ones)."""
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    out: dict[str, object] = {}
    for arg, default in zip(
        positional[len(positional) - len(args.defaults) :], args.defaults, strict=True
    ):
        if isinstance(default, ast.Constant):
            out[arg.arg] = default.value
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if isinstance(kw_default, ast.Constant):
            out[arg.arg] = kw_default.value
    return out


def _assigned(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """The function (or a function in it) rebinds ``name``, or declares it global."""
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return True
        if isinstance(node, ast.arg) and node.arg == name and node is not _param(func, name):
            return True  # a lambda's or inner function's own parameter shadows it
    return False


def _param(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> ast.arg | None:
    args = func.args
    return next(
        (a for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg == name), None
    )


def _never_taken(file: str, arm: _Arm, project: Project) -> bool:
    """Every use of the function in the project is a call that leaves ``arm.param``
    unpassed, and at least one call is bound to it."""
    func, cls = arm.func, arm.cls
    if not plainly_decorated(func):
        return False  # a framework may call it with its own arguments
    if cls is not None and (func.name != "__init__" or cls.decorator_list):
        # a method: which object a call is on is not known here; a decorated class
        # (a registry's) is built from configurations
        return False
    name = cls.name if cls is not None else func.name
    positional = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
    if cls is not None:
        positional = positional[1:]  # self
    at = positional.index(arm.param) if arm.param in positional else None
    key = ("uses", file, name)
    if key not in project.callers:
        project.callers[key] = _uses(project, file, name)
    uses = project.callers[key]
    if not isinstance(uses, tuple) or not any(call.bound for call in uses):
        return False
    for call in uses:
        if call.starred or call.keywords is None or arm.param in call.keywords:
            return False
        if at is not None and call.positional > at:
            return False
    return True


@dataclasses.dataclass(frozen=True)
class _Call:
    positional: int
    starred: bool
    keywords: frozenset[str] | None  # None: a **mapping is passed
    bound: bool  # the name is the function's own (same module, or imported from it)


def _uses(project: Project, file: str, name: str) -> tuple[_Call, ...] | None:
    """The calls in the project's Python files that may be of ``name`` defined at the top
    of ``file``; None when it is used any other way, or a file cannot be read."""
    home = os.path.realpath(file)
    root = root_of(file, project.roots)
    naming = project.text.naming(root, name) if root is not None else None
    if naming is None:
        return None
    calls: list[_Call] = []
    for path in naming:
        data = project.text.read(path)
        if data is None or not path.endswith(".py"):
            return None  # a configuration or a document may name it, and bind its parameters
        found = _calls_in(data, name, path, home, project)
        if found is None:
            return None
        calls.extend(found)
    return tuple(calls)


def _calls_in(data: bytes, name: str, path: str, home: str, project: Project) -> list[_Call] | None:
    """The calls of ``name`` in one module (``path``), or None when the function is used
    there some other way. A bare name is the function's when the module is its own or
    imports it from its own; an attribute call ``m.name(...)`` may be."""
    try:
        tree = parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    bare = os.path.realpath(path) == home  # a bare name is bound to the function here
    maybe = False  # a bare name may be the function's: a ``*`` import that may bring it
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    parts = node.module.split(".") if node.module else []
                    star = project.module_file(path, node.level, parts)
                    bare = bare or star == home
                    maybe = maybe or (star is not None or not parts or parts[0] not in KNOWN)
                    continue
                if alias.name != name:
                    continue
                if alias.asname is not None:
                    return None  # imported under another name
                dotted = "." * node.level + (f"{node.module}." if node.module else "") + name
                found = project.resolve(path, dotted)
                if isinstance(found, Sym):
                    bare = found.path == home and found.name == name
                else:
                    return None  # from a module lint cannot find: may be the function
    calls: list[_Call] = []
    callees: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _names(node.func, name):
            callees.add(id(node.func))
            is_bare = isinstance(node.func, ast.Name)
            if is_bare and not bare and not maybe:
                continue  # another function of that name
            keywords = [k.arg for k in node.keywords]
            calls.append(
                _Call(
                    positional=len(node.args),
                    starred=any(isinstance(a, ast.Starred) for a in node.args),
                    keywords=None if None in keywords else frozenset(k for k in keywords if k),
                    bound=is_bare and bare,
                )
            )
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and not bare and not maybe:
            continue
        if _names(node, name) and id(node) not in callees:
            return None  # handed on as a value, or rebound: called where lint cannot see
        if isinstance(node, ast.Constant) and node.value == name:
            return None  # getattr(obj, "name"), a registry key
    return calls


def _names(node: ast.AST, name: str) -> bool:
    if isinstance(node, ast.Name):
        return node.id == name
    return isinstance(node, ast.Attribute) and node.attr == name
