"""Assignments in a script: the dotted key of a target, and how often each name is assigned.

Read by the walker (its name table) and by :class:`~gpudiag.lint.facts.Facts` (rules ask
whether a name is assigned once, e.g. an epoch counter), so it sits below both.
"""

from __future__ import annotations

import ast


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
