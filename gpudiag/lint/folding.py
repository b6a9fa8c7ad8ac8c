"""Constant folding for the lint walker: what ``a op b`` and ``str(v)`` give, within
bounds that keep hostile files linear (issue 21)."""

from __future__ import annotations

import ast

#: A string the walker computes (``"cuda:" + x``, an f-string) longer than this is not
#: known: ``a = a + a`` doubles it on every line (issue 21).
MAX_CONST_CHARS = 4096
#: An integer the walker computes beyond this is not known (no GPU index, rank or port
#: comes near it).
MAX_CONST_INT = 2**63


def as_text(value: object) -> str | None:
    """``str(value)`` of a scalar constant; None for a list (its text costs its length at
    every use of a name bound to it) and for an integer over Python's int/str digit
    limit (a hex literal of 5,000 digits: ``str()`` raises ValueError; issue 21)."""
    if not isinstance(value, (str, int, float)) and value is not None:
        return None
    try:
        return str(value)
    except ValueError:
        return None


def fold(op: ast.operator, a: object, b: object) -> object:
    """``a op b`` for the few operations the walker folds, or None (unknown); results
    beyond :data:`MAX_CONST_INT` / :data:`MAX_CONST_CHARS` are unknown (issue 21)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return None
    value: object = None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(op, ast.Add):
            value = a + b
        elif isinstance(op, ast.Sub):
            value = a - b
        elif isinstance(op, ast.Mult) and abs(a) < 1e9 and abs(b) < 1e9:
            value = a * b
        if isinstance(value, int) and not -MAX_CONST_INT < value < MAX_CONST_INT:
            return None
        return value
    if isinstance(a, str) and isinstance(b, str) and isinstance(op, ast.Add):
        return a + b if len(a) + len(b) <= MAX_CONST_CHARS else None
    return None
