"""A process group a project function starts only when its caller asks for one.

``def from_pretrained(…, use_usp: bool = False)`` whose ``if use_usp:`` arm calls
``init_process_group``: a caller that never passes ``use_usp`` gets no process group, so
its script is not a DDP script (DiffSynth-Studio's inference and validation scripts call
``WanVideoPipeline.from_pretrained(torch_dtype=…, device="cuda", model_configs=[…])``; a
nineteenth held-out sample of issue 17: 157 false ``LINT-DDP-NO-SET-DEVICE`` errors).
The arm is gated by a parameter when its test is the bare parameter (or one operand of an
``and``), the parameter's default is ``False`` or ``None``, and the function never
assigns it. Only the process group is taken away: what the arm would quiet (a
``set_device``, a ``LOCAL_RANK`` read) still counts, so a gate can only remove findings
that rest on a process group the caller never starts.
"""

from __future__ import annotations

import ast
from collections.abc import Container
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpudiag.lint.summary import Def

#: a parameter -> its position among the positional parameters (None: keyword-only)
Gates = dict[str, int | None]


class Gating:
    """A function's parameters off by default, and which of them turned out to be gates
    (None: the function assigns it), while its body is summarised."""

    __slots__ = ("checked", "gates", "roots")

    def __init__(self, gates: Gates, roots: list[ast.AST]) -> None:
        self.gates = gates
        self.roots = roots
        self.checked: dict[str, Def | None] = {}


def gate_params(roots: list[ast.AST]) -> Gates:
    """The parameters of a function (its child nodes) whose default is False or None."""
    args = next((n for n in roots if isinstance(n, ast.arguments)), None)
    if args is None:
        return {}
    out: Gates = {}
    positional = [*args.posonlyargs, *args.args]
    for at, (arg, default) in enumerate(
        zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True),
        start=len(positional) - len(args.defaults),
    ):
        if _off(default):
            out[arg.arg] = at
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if kw_default is not None and _off(kw_default):
            out[arg.arg] = None
    return out


def _off(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and (node.value is False or node.value is None)


def gate_of(test: ast.expr, gates: Container[str]) -> str | None:
    """The parameter an ``if`` test needs true, when it is one of ``gates``."""
    if isinstance(test, ast.Name):
        return test.id if test.id in gates else None
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for value in test.values:
            if isinstance(value, ast.Name) and value.id in gates:
                return value.id
    return None


def assigns(roots: list[ast.AST], name: str) -> bool:
    """Whether the function's body binds ``name`` again (then the default tells nothing)."""
    for root in roots:
        if isinstance(root, ast.arguments):
            continue
        for node in ast.walk(root):
            if (
                isinstance(node, ast.Name)
                and node.id == name
                and not isinstance(node.ctx, ast.Load)
            ):
                return True
            if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
                return True
            # a nested function's parameter, an `except … as`, a match capture: another
            # variable of that name, whose `if name:` is not the caller's flag
            if isinstance(node, ast.arg) and node.arg == name:
                return True
            if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and (
                node.name == name
            ):
                return True
            if isinstance(node, ast.MatchMapping) and node.rest == name:
                return True
    return False


def unpassed(call: ast.AST, gates: Gates) -> frozenset[str]:
    """The gate parameters a call does not pass (none, with ``*args`` or ``**kwargs``). A
    positional argument counts as passed at its own position and the next one (a method's
    ``self`` is not written at the call)."""
    if not gates or not isinstance(call, ast.Call):
        return frozenset()
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return frozenset()
    named = {k.arg for k in call.keywords}
    count = len(call.args)
    return frozenset(
        name for name, at in gates.items() if name not in named and (at is None or at > count)
    )
