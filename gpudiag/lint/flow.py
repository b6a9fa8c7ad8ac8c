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
from gpudiag.lint.syntax import dotted_key, unparse
from gpudiag.lint.values import Val

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


def _chain(facts: Facts, node: ast.AST) -> list[tuple[ast.If | ast.IfExp, str]]:
    """The ``if``s (and ``x if c else y``) around ``node``, innermost first, each with the
    arm ``node`` is in."""
    parents = _parents(facts)
    out: list[tuple[ast.If | ast.IfExp, str]] = []
    child, parent = node, parents.get(id(node))
    while parent is not None:
        if isinstance(parent, (ast.If, ast.IfExp)):
            body = parent.body if isinstance(parent.body, list) else [parent.body]
            orelse = parent.orelse if isinstance(parent.orelse, list) else [parent.orelse]
            if any(s is child for s in body):
                out.append((parent, "body"))
            elif any(s is child for s in orelse):
                out.append((parent, "orelse"))
        child, parent = parent, parents.get(id(parent))
    return out


def _condition(test: ast.expr, arm: str) -> tuple[str, bool]:
    """``(the test's text, whether the arm runs when it holds)``; ``not x`` reads as x."""
    holds = arm == "body"
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, holds = test.operand, not holds
    return unparse(test), holds


def tests_around(facts: Facts, node: ast.AST) -> list[tuple[str, bool]]:
    """The tests of the ``if``s around ``node``, innermost first, each as ``(its text,
    whether it holds where node runs)``; ``not x`` reads as ``x`` not holding."""
    return [_condition(test.test, arm) for test, arm in _chain(facts, node)]


def handled_for_both(facts: Facts, access: ast.AST, wrap: ast.AST, attr: str) -> bool:
    """Whether an attribute read through a wrapper sits where the script has already
    told wrapped from bare: in an arm whose test asks (``hasattr(m, "module")``,
    ``isinstance(m, DDP)``), the arm of the wrapper's own condition where it does not
    wrap (``if distributed: m = DDP(m)`` … ``if distributed: … else: m.fc``), or an arm
    whose other arm reads ``m.module.<attr>``."""
    wrapped_when = {_condition(n.test, arm) for n, arm in _chain(facts, wrap)}
    for node, arm in _chain(facts, access):
        text, holds = _condition(node.test, arm)
        if "isinstance(" in text or ("hasattr(" in text and "module" in text):
            return True
        if (text, not holds) in wrapped_when:
            return True
        other = node.orelse if arm == "body" else node.body
        for sub in other if isinstance(other, list) else [other]:
            for inner in ast.walk(sub):
                if (
                    isinstance(inner, ast.Attribute)
                    and inner.attr == attr
                    and isinstance(inner.value, ast.Attribute)
                    and inner.value.attr == "module"
                ):
                    return True
    return False


def uncalled(facts: Facts, proc: str, node: ast.AST) -> bool:
    """Whether ``node`` runs in ``proc`` only because its own function is read on its
    own (``def:NAME``): nothing in the file calls that function."""
    parents = _parents(facts)
    parent = parents.get(id(node))
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
        parent = parents.get(id(parent))
    return parent is not None and proc in (
        f"def:{parent.name}",
        f"def:{parent.name}@{parent.lineno}",
    )


def same_arm(facts: Facts, a: ast.AST, b: ast.AST) -> bool | None:
    """Whether ``b`` lies in the innermost ``if`` arm around ``a`` (None: ``a`` is in no
    ``if``: it runs whatever the tests say)."""
    chain = _chain(facts, a)
    if not chain:
        return None
    node, arm = chain[0]
    return any(other is node and other_arm == arm for other, other_arm in _chain(facts, b))


def exclusive(facts: Facts, a: ast.AST, b: ast.AST) -> bool:
    """Whether ``a`` and ``b`` lie in different arms of one ``if``/``elif``/``else``:
    no run executes both."""
    arms_a = {id(node): arm for node, arm in _chain(facts, a)}
    if not arms_a:
        return False
    arms_b = {id(node): arm for node, arm in _chain(facts, b)}
    return any(arm != arms_b.get(key, arm) for key, arm in arms_a.items())


def discarded(facts: Facts, node: ast.AST) -> bool:
    """Whether ``node`` stands in an expression statement: what it makes is thrown away
    (``torch.empty(1, device="cuda").backward()``), not kept."""
    parents = _parents(facts)
    parent = parents.get(id(node))
    while parent is not None and not isinstance(parent, ast.stmt):
        parent = parents.get(id(parent))
    return isinstance(parent, ast.Expr)


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
        if isinstance(func, ast.Attribute) and func.attr == "to_empty":
            # model.to_empty(device=…): materialised on a device (meta-device init)
            owner = dotted_key(func.value)
            if owner is not None:
                lines.setdefault(owner, []).append(getattr(node, "lineno", 0))
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


def unwrapped_alias(facts: Facts, alias: ast.AST, wrapper: Val) -> Val:
    """The value a name gets from ``alias`` (``g_module = generator``), a name the walker
    holds as a DataParallel/DDP wrapper: the bare module where the alias sits in the arm
    of the wrap's own condition that does not wrap (``if args.distributed: generator =
    DDP(…)`` … ``if args.distributed: g_module = generator.module`` / ``else: g_module =
    generator``). The walker runs both arms, so it saw the wrapper (issue 17, the held-out
    corpus: rosinality's stylegan2 train.py, two false LINT-CKPT-PREFIX-MISMATCH)."""
    if wrapper.node is None:
        return wrapper
    memo = facts.cache.setdefault("wrapped_when", {})  # one wrapper, many aliases: once
    assert isinstance(memo, dict)
    wrapped_when = memo.get(id(wrapper.node))
    if wrapped_when is None:
        wrapped_when = memo[id(wrapper.node)] = set(tests_around(facts, wrapper.node))
    if not any((text, not holds) in wrapped_when for text, holds in tests_around(facts, alias)):
        return wrapper
    return Val(kind="module", device=wrapper.device, node=alias)
