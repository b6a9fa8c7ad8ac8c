"""Where two places of a script stand to each other: exclusive branches, calls between.

The walker runs every arm of an ``if`` one after the other, so a value bound in the
``else`` arm is what a later statement sees even when that statement sits in the
``if`` arm. Rules that need to know whether two calls can run in the same run ask
here, from the syntax tree alone. The parent map is built once per file, and only
when a rule has a candidate finding to confirm (most files never need it).
"""

from __future__ import annotations

import ast
import bisect

from gpudiag.lint.facts import Facts
from gpudiag.lint.syntax import dotted_key

#: calls that only look at a model: passing it to them moves nothing
_LOOKS_ONLY = frozenset(
    {"print", "len", "str", "repr", "id", "type", "isinstance", "hasattr", "getattr", "sum"}
)
_LOG_METHODS = frozenset(
    {"info", "debug", "warning", "warn", "error", "log", "print", "convert_sync_batchnorm"}
)


def _parents(facts: Facts) -> dict[int, ast.AST]:
    """``id(node) -> its parent`` for every node of the file, built once (iterative)."""
    cached = facts.cache.get("parents")
    if isinstance(cached, dict):
        return cached
    parents: dict[int, ast.AST] = {}
    if facts.tree is not None:
        stack: list[ast.AST] = [facts.tree]
        while stack:
            node = stack.pop()
            for child in ast.iter_child_nodes(node):
                parents[id(child)] = node
                stack.append(child)
    facts.cache["parents"] = parents
    return parents


def _arms(facts: Facts, node: ast.AST) -> dict[int, str]:
    """``id(if node) -> "body"/"orelse"`` for every ``if`` (or ``x if c else y``) ``node``
    lies in, and which arm."""
    parents = _parents(facts)
    out: dict[int, str] = {}
    child = node
    parent = parents.get(id(child))
    while parent is not None:
        if isinstance(parent, (ast.If, ast.IfExp)):
            body = parent.body if isinstance(parent.body, list) else [parent.body]
            orelse = parent.orelse if isinstance(parent.orelse, list) else [parent.orelse]
            if any(s is child for s in body):
                out[id(parent)] = "body"
            elif any(s is child for s in orelse):
                out[id(parent)] = "orelse"
        child, parent = parent, parents.get(id(parent))
    return out


def exclusive(facts: Facts, a: ast.AST, b: ast.AST) -> bool:
    """Whether ``a`` and ``b`` lie in different arms of one ``if``/``elif``/``else``:
    no run executes both."""
    arms_a = _arms(facts, a)
    if not arms_a:
        return False
    arms_b = _arms(facts, b)
    return any(arm != arms_b.get(key, arm) for key, arm in arms_a.items())


def enclosing_function(facts: Facts, node: ast.AST) -> ast.AST | None:
    """The ``def`` (or, at the top level, the module) ``node`` is written in."""
    parents = _parents(facts)
    parent = parents.get(id(node))
    while parent is not None:
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            return parent
        parent = parents.get(id(parent))
    return None


def _handed(facts: Facts, scope: ast.AST) -> dict[str, list[int]]:
    """``name -> the sorted lines of the calls in scope that take it as an argument``,
    built once per scope (issue 21: one walk per DDP call was quadratic)."""
    memo = facts.cache.setdefault("handed", {})
    assert isinstance(memo, dict)
    found = memo.get(id(scope))
    if isinstance(found, dict):
        return found
    lines: dict[str, list[int]] = {}
    for node in ast.walk(scope):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in _LOOKS_ONLY:
            continue
        if isinstance(func, ast.Attribute) and func.attr in _LOG_METHODS:
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            key = dotted_key(arg)
            if key is not None:
                lines.setdefault(key, []).append(getattr(node, "lineno", 0))
    for found_lines in lines.values():
        found_lines.sort()
    memo[id(scope)] = lines
    return lines


def passed_to_a_call(facts: Facts, key: str, start: ast.AST, end: ast.AST) -> bool:
    """Whether ``key`` (``model``) is handed, as itself, to a call written between
    ``start`` and ``end`` (exclusive) in ``end``'s function, which could move it in place
    out of the walker's sight; calls that only look at it (``print``, ``len``, a logger)
    do not count."""
    scope = enclosing_function(facts, end)
    if scope is None or not key:
        return False
    first = getattr(start, "lineno", 0)
    if enclosing_function(facts, start) is not scope:
        first = getattr(scope, "lineno", 0)
    last = getattr(end, "lineno", 0)
    lines = _handed(facts, scope).get(key, [])
    at = bisect.bisect_left(lines, first)
    return at < len(lines) and lines[at] < last
