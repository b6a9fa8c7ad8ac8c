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
import dataclasses
from typing import TYPE_CHECKING

from gpudiag.lint.syntax import dotted_name, dotted_prefixes, flat_targets, inner_blocks
from gpudiag.lint.values import ONE_PATH_WRAPPER, Dev, Val, device_of

if TYPE_CHECKING:
    from gpudiag.lint.walker import Walker


def exec_if(walker: Walker, stmt: ast.If) -> None:
    """Walk an ``if`` statement: an ``elif`` ladder, arm after arm, without recursion
    (issue 21: ~490 arms recursed); an arm decided false is skipped, one decided true
    ends the ladder. Each arm starts from the names as they were before the statement."""
    arm, arms = stmt, ArmValues(stmt, walker.names)
    walked = False
    while True:
        if walked:
            arms.next_arm(walker.names, walker.below)  # an elif's test too
        walker.eval(arm.test)
        taken = walker.decided(arm.test)
        if taken is not False:
            walker.exec_block(arm.body)
            arms.arm_done(walker.names)
            walked = True
        if taken is True:
            break  # the other arms never run
        if len(arm.orelse) == 1 and isinstance(arm.orelse[0], ast.If):
            arm = arm.orelse[0]
            continue
        if arm.orelse:
            if walked:
                arms.next_arm(walker.names, walker.below)
            walker.exec_block(arm.orelse)
            arms.arm_done(walker.names)
        break
    if walked:
        arms.last_values(walker.names, walker.below)
    arms.merge(walker.names, taken is True or bool(arm.orelse))


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

    def next_arm(self, names: dict[str, Val], below: dict[str, set[str]]) -> None:
        """Before an ``elif``/``else`` arm: the names as they were before the statement,
        since the arms exclude each other (DPR's setup_cfg_gpu: the SLURM arm's
        ``cfg.local_rank = SLURM_PROCID`` was read in the torch.distributed.launch arm,
        two false warnings in an eighteenth held-out corpus of issue 17)."""
        for key in self._keys:
            before = self._before[key]
            if before is None:
                names.pop(key, None)
            else:
                _put(names, below, key, before)

    def last_values(self, names: dict[str, Val], below: dict[str, set[str]]) -> None:
        """After the arms: each name holds what the last arm that set it left (as when the
        arms ran one after the other), before :meth:`merge` weighs the paths."""
        for key in self._keys:
            before = self._before[key]
            for after in reversed(self._after):
                val = after.get(key)
                if val is not before:
                    if val is None:
                        names.pop(key, None)
                    else:
                        _put(names, below, key, val)
                    break

    def merge(self, names: dict[str, Val], every_path_has_an_arm: bool) -> None:
        """A name the paths through the statement leave on the CPU and on a GPU: the value
        the last of them left on a GPU."""
        if not self._keys or not self._after:
            return
        paths = self._after if every_path_has_an_arm else [*self._after, self._before]
        for key in self._keys:
            vals = [path.get(key) for path in paths]
            known = [v for v in vals if v is not None]
            wrapped = [v.kind in _WRAPPERS for v in known]
            if every_path_has_an_arm and any(wrapped) and not all(wrapped):
                wrapper = [v for v, w in zip(known, wrapped, strict=True) if w][-1]
                others = [v for v, w in zip(known, wrapped, strict=True) if not w]
                if all(v.kind == "module" for v in others):
                    # `if distributed: model = DDP(model)` / `else: model = model.cuda()`:
                    # what is read through the name afterwards is read through DDP on the
                    # distributed path, where it fails (a wrapper attribute's error)
                    names[key] = wrapper
                else:
                    # `if with_fsdp: model = FSDP(model)` / `else: model = DDP(model, …)`:
                    # the other path holds what lint cannot read (FSDP forwards attributes);
                    # fairscale's test_fsdp_freezing_weights reads `model.trunk` only with
                    # FSDP: a false LINT-WRAPPER-ATTRIBUTE error once each arm started afresh
                    names[key] = dataclasses.replace(
                        wrapper, tags=wrapper.tags | {ONE_PATH_WRAPPER}
                    )
                continue
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


_WRAPPERS = frozenset({"dp", "ddp"})


def _put(names: dict[str, Val], below: dict[str, set[str]], key: str, val: Val) -> None:
    """Bind ``key`` as the walker does: in ``below`` too, under each of its prefixes, so a
    later rebinding of a prefix forgets it (walker.forget_below)."""
    names[key] = val
    for prefix in dotted_prefixes(key):
        below.setdefault(prefix, set()).add(key)


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
