"""Which arm of a torch-version gate every current torch takes.

A gate hides from lint which branch runs (:mod:`gpudiag.lint.gates`), except where the
test itself proves it: ``version.parse(torch.__version__) >= version.parse("1.6")`` holds
on every torch since 1.6, so its body runs on the torch the rules predict for (the
deprecations they report date from torch 2.4: torch/cuda/amp/grad_scaler.py at 2.4.0).
Such an arm is not guarded; the other arm still is. Issue 17: transformers' trainer
imported ``torch.cuda.amp.autocast`` under ``>= 1.6``, which every torch >= 2.4 reaches.

Read: one comparison of the torch version (``torch.__version__``, a ``parse``/``Version``/
``LooseVersion`` of it, a name holding it, or a ``torch_version()`` call) with a literal
version (``"1.6"``, ``parse("1.6.0")``, ``(1, 6)``); names that spell the bound
(``_TORCH_GREATER_EQUAL_1_6``, ``is_torch_greater_than_1_6``, ultralytics' ``TORCH_1_9``);
accelerate's ``is_torch_version(">=", "1.6")``; Megatron-LM's ``is_torch_min_version("2.4.0")``
and transformers' ``is_torch_greater_or_equal("2.4")``; and ``not`` of any of these.
Anything else: unknown.
"""

from __future__ import annotations

import ast
import re

from gpudiag.lint.syntax import dotted_name, ident

#: the oldest torch the rules predict for: every rule's message is about torch >= 2.4
MODERN = (2, 4)

_VERSION = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?")
_GE_NAME = re.compile(
    r"(?:greater_equal|greater_or_equal(?:_than)?|greater_than_or_equal|ge|gte)_(\d+)_(\d+)$"
    r"|^_?torch_(\d+)_(\d+)$",
    re.IGNORECASE,
)
_GT_NAME = re.compile(r"greater_than_(\d+)_(\d+)$", re.IGNORECASE)
_LT_NAME = re.compile(r"(?:less_than|lt)_(\d+)_(\d+)$", re.IGNORECASE)
#: functions of one version that hold from it on: Megatron-LM's megatron/core/utils.py
#: is_torch_min_version("2.4.0"), transformers' is_torch_greater_or_equal("2.4")
_MIN_VERSION = frozenset({"is_torch_min_version", "is_torch_greater_or_equal"})
_FLIP = {ast.GtE: ast.LtE, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.Lt: ast.Gt}


def _literal(node: ast.AST) -> tuple[int, int] | None:
    """``"1.6"``, ``"1.6.0"``, ``parse("1.6")``, ``Version("1.6")``, ``(1, 6)``."""
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        node = node.args[0]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        m = _VERSION.match(node.value)
        return (int(m.group(1)), int(m.group(2) or 0)) if m else None
    if isinstance(node, ast.Tuple) and node.elts:
        parts = [
            e.value
            for e in node.elts[:2]
            if isinstance(e, ast.Constant)
            and isinstance(e.value, int)
            and not isinstance(e.value, bool)
        ]
        if len(parts) == min(2, len(node.elts)):
            return (parts[0], parts[1] if len(parts) > 1 else 0)
    return None


def is_torch_version_attr(node: ast.AST) -> bool:
    """``X.__version__`` with ``X`` a torch name (``torch.version.__version__`` too)."""
    if not (isinstance(node, ast.Attribute) and node.attr == "__version__"):
        return False
    base = dotted_name(node.value)
    return base is not None and "torch" in base.split(".")[0].lower()


def _is_torch_version(node: ast.AST) -> bool:
    """The torch version itself, parsed or not (not a slice of it: ``[:3]`` compares text)."""
    if isinstance(node, ast.Call) and len(node.args) == 1:
        node = node.args[0]
    elif isinstance(node, ast.Call) and not node.args and not node.keywords:
        node = node.func  # fairscale.internal's torch_version(): the version as a tuple
    if is_torch_version_attr(node):
        return True
    name = ident(node)
    if name is not None:
        return name.lower() in {"torch_version", "_torch_version", "torch_ver"}
    return False


def _holds_on_modern(op: ast.cmpop, bound: tuple[int, int]) -> bool | None:
    """Whether ``torch_version OP bound`` holds for every torch >= MODERN (None: unknown)."""
    if isinstance(op, ast.GtE):
        return True if bound <= MODERN else None
    if isinstance(op, ast.Gt):
        return True if bound < MODERN else None
    if isinstance(op, (ast.Lt, ast.LtE)):
        return False if bound <= MODERN else None
    return None


def holds_on_modern(test: ast.AST) -> bool | None:
    """True / False when the test has that value on every torch >= :data:`MODERN`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = holds_on_modern(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        flip = _FLIP.get(type(op))
        if flip is None:
            return None
        if _is_torch_version(right) and not _is_torch_version(left):
            left, right, op = right, left, flip()
        if not _is_torch_version(left):
            return None
        bound = _literal(right)
        return None if bound is None else _holds_on_modern(op, bound)
    name = ident(test)
    if isinstance(test, ast.Call):
        func = test.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if called == "is_torch_version" and len(test.args) == 2:
            op_node, version = test.args
            ops = {">=": ast.GtE(), ">": ast.Gt(), "<": ast.Lt(), "<=": ast.LtE()}
            if isinstance(op_node, ast.Constant) and op_node.value in ops:
                bound = _literal(version)
                if bound is not None:
                    return _holds_on_modern(ops[op_node.value], bound)
            return None
        if called in _MIN_VERSION and len(test.args) == 1 and not test.keywords:
            bound = _literal(test.args[0])
            return None if bound is None else _holds_on_modern(ast.GtE(), bound)
        name = called if not test.args and not test.keywords else None
    if name is None:
        return None
    for pattern, op in ((_GT_NAME, ast.Gt()), (_GE_NAME, ast.GtE()), (_LT_NAME, ast.Lt())):
        m = pattern.search(name)
        if m:
            major, minor = (g for g in m.groups() if g is not None)
            return _holds_on_modern(op, (int(major), int(minor)))
    return None
