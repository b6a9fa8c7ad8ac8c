"""Pure queries on a script's syntax tree, below the walker, the call semantics and the facts.

Call arguments (:func:`keyword`, :func:`argument`), dotted names, what a file or a loop
assigns (the walker's name table; :class:`~gpudiag.lint.facts.Facts` asks whether a name is
assigned once, e.g. an epoch counter), a class's members, whether a function uses CUDA.
"""

from __future__ import annotations

import ast
import functools


def assign_counts(tree: ast.AST) -> dict[str, int]:
    """How many times each dotted name is assigned anywhere (loops count as many)."""
    counts: dict[str, int] = {}

    def add(target: ast.AST, weight: int) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                add(elt, weight)
            return
        key = dotted_key(target)
        if key is not None:
            counts[key] = counts.get(key, 0) + weight

    def block(body: list[ast.stmt]) -> None:
        # statements only: a walrus or a comprehension variable is rarely an epoch counter
        for node in body:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    add(t, 1)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                add(node.target, 2 if isinstance(node, ast.AugAssign) else 1)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                add(node.target, 2)
            for name in ("body", "orelse", "finalbody"):
                inner = getattr(node, name, None)
                if isinstance(inner, list):
                    block(inner)
            for handler in getattr(node, "handlers", ()):
                block(handler.body)
            for case in getattr(node, "cases", ()):
                block(case.body)

    if isinstance(tree, ast.Module):
        block(tree.body)
    return counts


def dotted_key(node: ast.AST) -> str | None:
    """``model``, ``self.model``, ``args.local_rank``; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_key(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def keyword(node: ast.Call, name: str) -> ast.expr | None:
    for kw in node.keywords:
        if kw.arg == name:
            return kw.value
    return None


def argument(node: ast.Call, index: int, name: str) -> ast.expr | None:
    found = keyword(node, name)
    if found is not None:
        return found
    positional = [a for a in node.args if not isinstance(a, ast.Starred)]
    return positional[index] if index < len(positional) else None


@functools.lru_cache(maxsize=256)
def uses_cuda(fn: ast.AST) -> bool:
    """Whether a function body visibly uses CUDA (``.cuda()``, ``cuda`` strings, torch.cuda)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and node.attr in ("cuda", "set_device"):
            return True
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and (node.value.startswith("cuda") or node.value == "nccl")
        ):
            return True
    return False


_TARGETED = (ast.AugAssign, ast.AnnAssign, ast.NamedExpr, ast.For, ast.AsyncFor, ast.comprehension)


@functools.lru_cache(maxsize=256)
def assigned_in(loop: ast.AST) -> frozenset[str]:
    """The dotted names a loop's body assigns (``epoch``, ``self.epoch``, ``e`` of ``e += 1``)."""
    out: set[str] = set()
    for node in ast.walk(loop):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, _TARGETED):
            targets = [node.target]
        for target in targets:
            for sub in ast.walk(target):
                key = dotted_name(sub)
                if key is not None:
                    out.add(key)
    return frozenset(out)


@functools.lru_cache(maxsize=256)
def class_members(cls: ast.ClassDef) -> frozenset[str]:
    """Methods and ``self.X`` attributes a class defines."""
    out: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in cls.body:
            out.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            out.add(node.attr)
    return frozenset(out)


def dotted_name(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None
