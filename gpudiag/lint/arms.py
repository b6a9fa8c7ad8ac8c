"""What a name holds after an ``if`` whose arms set it differently.

The walker runs an ``if``'s arms one after the other, so without this a name set in
every arm would hold the last arm's value afterwards: ``if distributed: device =
local_rank`` / ``else: device = "cpu"`` left ``device`` on the CPU, and the
``DDP(model.to(device), device_ids=[device])`` that only the first arm's runs reach was
a false ``LINT-DDP-DEVICE-IDS-CPU`` error (a seventh held-out corpus: opacus'
examples/cifar10.py). After the statement, a name the arms (or the arms and the path
that takes none) leave on the CPU and on a GPU holds the value one of them left on a GPU,
as ``a if c else b`` does (:func:`gpudiag.lint.values.union`); one they leave holding
different constants holds none (InternVideo's ``args.gpu``: ``LOCAL_RANK``, or 0 in the
one-process fallback, was a constant ``set_device(0)``; mmf's ``set_torch_grad_scaler``
turned off in one arm hid the ``GradScaler`` the other path builds). Names are the walker's
dotted keys; what the arms assign is read from their statements (not their expressions),
once per ``if``, and kept on its node (lint's time: a full walk of every ``if`` cost 12%).
"""

from __future__ import annotations

import ast

from gpudiag.lint.syntax import dotted_name, flat_targets, inner_blocks
from gpudiag.lint.values import Dev, Val, device_of


class ArmValues:
    """The values an ``if`` statement's arms leave in the names they assign."""

    __slots__ = ("_after", "_before", "_keys")

    def __init__(self, stmt: ast.If, names: dict[str, Val]) -> None:
        self._keys = _assigned(stmt)
        self._before = {k: names.get(k) for k in self._keys} if self._keys else {}
        self._after: list[dict[str, Val | None]] = []

    def arm_done(self, names: dict[str, Val]) -> None:
        if self._keys:
            self._after.append({k: names.get(k) for k in self._keys})

    def merge(self, names: dict[str, Val], every_path_has_an_arm: bool) -> None:
        """A name the paths through the statement leave on the CPU and on a GPU: the value
        the last of them left on a GPU."""
        if not self._keys or not self._after:
            return
        paths = self._after if every_path_has_an_arm else [*self._after, self._before]
        for key in self._keys:
            vals = [path.get(key) for path in paths]
            known = [v for v in vals if v is not None]
            kinds = [(_device(v) or ("",))[0] for v in known]
            if "cpu" not in kinds or "cuda" not in kinds:
                # args.gpu = LOCAL_RANK in one arm, 0 in another: no one constant after it
                plain = all(v.kind is None and v.device is None and not v.extra for v in known)
                if plain and len({(v.has_const, repr(v.const)) for v in known}) > 1:
                    names[key] = Val(tags=frozenset().union(*(v.tags for v in known)))
                continue
            # as for ``a if c else b`` (values.union): the GPU arm's value (the last one
            # walked), so a rule that needs a name on the CPU does not take one arm for all
            names[key] = [v for v, kind in zip(known, kinds, strict=True) if kind == "cuda"][-1]


def _device(val: Val) -> Dev | None:
    return val.device if val.device is not None else device_of(val)


_TARGETS = (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)


def _assigned(stmt: ast.If) -> frozenset[str]:
    """The dotted names the statements under ``stmt`` assign (its own scope only)."""
    found = getattr(stmt, "_gpudiag_assigned", None)
    if isinstance(found, frozenset):
        return found
    out: set[str] = set()
    stack: list[ast.stmt] = [stmt]
    while stack:
        node = stack.pop()
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, _TARGETS):
            targets = [node.target]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
        for target in targets:
            out.update(k for k in map(dotted_name, flat_targets(target)) if k is not None)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for block in inner_blocks(node):
                stack.extend(block)
    result = frozenset(out)
    stmt._gpudiag_assigned = result  # type: ignore[attr-defined]
    return result
