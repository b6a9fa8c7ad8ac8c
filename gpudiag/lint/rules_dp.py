"""DataParallel rules: GPU indexes under the script's own mask, the module's device, checkpoints.

Sources (torch 2.13): torch/nn/parallel/data_parallel.py (``DataParallel.__init__``
checks every id with ``_get_device_index`` / ``get_device_properties``, which
asserts "Invalid device id"; ``forward`` raises "module must have its parameters
and buffers on device …"), and the DataParallel tutorial's ``model.module`` note.
gpudiag.core.dataparallel predicts the same texts for ``gpudiag check``. The checkpoint
rules live in :mod:`gpudiag.lint.rules_ckpt`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from gpudiag.lint import shown
from gpudiag.lint.codes import Hit, hit
from gpudiag.lint.facts import Event, Facts
from gpudiag.lint.flow import exclusive, handled_for_both
from gpudiag.lint.rules_ckpt import checkpoint_rules as checkpoint_rules
from gpudiag.lint.values import ONE_PATH_WRAPPER, Val, as_int, device_of, int_list


@dataclass(frozen=True)
class Mask:
    """A literal CUDA_VISIBLE_DEVICES value, read once per value (issue 21: a value of
    a megabyte, used thousands of times, was split and quoted at every use)."""

    entries: list[str]
    #: entry -> its first position: the cuda ordinal that physical GPU became
    ordinal: dict[str, int]
    #: the value and its GPUs as findings show them (bounded: gpudiag.lint.shown)
    value: str
    phys: str
    ords: str


def _mask_of(facts: Facts, value: str) -> Mask | None:
    """The parsed mask, or None for a value that is empty or has an empty entry."""
    memo = facts.cache.setdefault("masks", {})
    assert isinstance(memo, dict)
    if value not in memo:
        entries = [e.strip() for e in value.split(",")]
        mask = None
        if value.strip() != "" and all(entries):
            n = len(entries)
            ordinal: dict[str, int] = {}
            for i, entry in enumerate(entries):
                ordinal.setdefault(entry, i)
            head = entries[: shown.MAX_SHOWN_ITEMS]
            mask = Mask(
                entries,
                ordinal,
                shown.text(",".join(entries)),
                _listed([shown.text(e) for e in head], n),
                _listed([f"cuda:{o}" for o in range(len(head))], n),
            )
        memo[value] = mask
    found = memo[value]
    return found if isinstance(found, Mask) else None


def script_mask(facts: Facts, before: Event) -> tuple[Event, Mask] | None:
    """The literal CUDA_VISIBLE_DEVICES the script set before ``before`` (and before CUDA),
    in ``before``'s process or the main one."""
    if "cvd_set" not in facts.by_kind:
        masks = [e for e in facts.of("env_set") if e.text("var") == "CUDA_VISIBLE_DEVICES"]
        facts.by_kind["cvd_set"] = masks
    procs = {before.proc, "main"}
    last = [facts.last_before("cvd_set", proc, before.seq) for proc in procs]
    ev = max((e for e in last if e is not None), key=lambda e: e.seq, default=None)
    if ev is None:
        return None
    value = ev.data.get("value")
    mask = _mask_of(facts, value) if isinstance(value, str) else None
    if mask is None:
        return None
    init = facts.first_in("cuda_init", ev.proc)
    if init is not None and init.seq < ev.seq:
        return None  # CUDA never saw this mask (LINT-CVD-AFTER-CUDA-INIT says so)
    return ev, mask


def _suggest(ids: list[int], mask: Mask) -> list[int] | None:
    out: list[int] = []
    for i in ids:
        # str() only of a short number: an int of over 4,300 digits cannot be one
        at = mask.ordinal.get(str(i)) if -(10**18) < i < 10**18 else None
        if at is None:
            return None
        out.append(at)
    return out


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _listed(head: list[str], n: int) -> str:
    """``a, b and c``; for a list of more than the ``head`` shown, ``a, b, … (n in all)``."""
    if n <= len(head):
        return _join(head)
    return shown.items(head, total=n)


def _mask_hit(
    ev: Event,
    what: str,
    bad: list[int],
    ids: list[int],
    mask: tuple[Event, Mask],
    predicts: str,
) -> Hit:
    mask_ev, gpus = mask
    n = len(gpus.entries)
    value, phys, ords = gpus.value, gpus.phys, gpus.ords
    suggestion = _suggest(ids, gpus)
    if suggestion is not None:
        fixed = shown.items([str(s) for s in suggestion], ",")
        fix = (
            f"Under CUDA_VISIBLE_DEVICES={value}, GPUs {phys} are {ords}: use {what}=[{fixed}]."
            if "ids" in what or len(suggestion) > 1
            else f"Under CUDA_VISIBLE_DEVICES={value}, GPUs {phys} are {ords}: use {fixed}."
        )
    else:
        fix = f"Use indexes 0..{n - 1}: under CUDA_VISIBLE_DEVICES={value}, GPUs {phys} are {ords}."
    given = shown.int_list(bad) if len(bad) > 1 or "ids" in what else shown.number(bad[0])
    return hit(
        ev.line,
        ev.col,
        "LINT-IDS-UNDER-MASK",
        "error",
        f"{what}={given} names a GPU that does "
        f"not exist under CUDA_VISIBLE_DEVICES={shown.quoted(value)} (set at line "
        f"{mask_ev.line}): this process sees {n} GPU(s), numbered cuda:0..cuda:{n - 1}; "
        "indexes are cuda ordinals, not nvidia-smi numbers.",
        fix,
        predicts,
        "CUDA_VISIBLE_DEVICES",
    )


def mask_rules(facts: Facts) -> tuple[list[Hit], set[int]]:
    """LINT-IDS-UNDER-MASK, and the seqs of DataParallel calls it already explains."""
    out: list[Hit] = []
    explained: set[int] = set()
    for ev in facts.of("dp", "ddp", "set_device", "placement"):
        mask = script_mask(facts, ev)
        if mask is None or exclusive(facts, mask[0].node, ev.node):
            continue  # no mask, or one set in another arm of an if: never both
        # imported only for a script that sets a mask: start-up time
        from gpudiag.core.dataparallel import INVALID_DEVICE_ID, INVALID_ORDINAL

        n = len(mask[1].entries)
        if ev.kind in ("dp", "ddp"):
            ids_val = ev.data.get("ids")
            ids = int_list(ids_val) if isinstance(ids_val, Val) else None
            if ids:
                bad = [i for i in ids if i >= n]
                if bad:
                    predicts = INVALID_DEVICE_ID if ev.kind == "dp" else INVALID_ORDINAL
                    out.append(_mask_hit(ev, "device_ids", ids, ids, mask, predicts))
                    explained.add(ev.seq)
                    continue
            out_val = ev.data.get("out")
            k = as_int(out_val) if isinstance(out_val, Val) else None
            if k is not None and k >= n:
                out.append(_mask_hit(ev, "output_device", [k], [k], mask, INVALID_ORDINAL))
                explained.add(ev.seq)
            continue
        val = ev.val
        if val is None:
            continue
        dev = device_of(val)
        k = dev[1] if dev is not None and dev[0] == "cuda" and isinstance(dev[1], int) else None
        if k is not None and k >= n:
            what = "torch.cuda.set_device" if ev.kind == "set_device" else "device"
            out.append(_mask_hit(ev, what, [k], [k], mask, INVALID_ORDINAL))
    return out, explained


def _wrapper_index(facts: Facts, kind: str) -> dict[int, list[Event]]:
    """The events of ``kind`` (``dp_moved``, ``dp_forward``) by the wrapper they act on,
    built once (issue 21: every wrapper scanned every move)."""
    key = f"by_wrapper:{kind}"
    cached = facts.cache.get(key)
    if isinstance(cached, dict):
        return cached
    index: dict[int, list[Event]] = {}
    for ev in facts.of(kind):
        index.setdefault(id(ev.data.get("dp")), []).append(ev)
    facts.cache[key] = index
    return index


def _moved_to(move: Event) -> tuple[str, int | None] | None:
    dev = move.data.get("dev")
    ordinal = move.data.get("ordinal")
    if isinstance(dev, tuple) and dev[0] == "cpu":
        return ("cpu", None)
    return ("cuda", ordinal) if isinstance(ordinal, int) else None


def _module_at_forward(
    facts: Facts, ev: Event, first_id: int
) -> tuple[tuple[str, int | None] | None, bool]:
    """Where DataParallel's module is when it runs: ("cuda", ordinal) / ("cpu", None),
    or None when unknown; and whether a ``.cpu()``/``.to("cpu")`` on the wrapper put it
    there. A later ``.cuda()``/``.to()`` on the wrapper moves it, unless it is written in
    another arm of an ``if`` than the wrapper (issue 17: pytorch/examples imagenet wraps
    in one arm, ``model.to(device)`` on the CPU in the ``else``)."""
    moves = [m for m in _wrapper_index(facts, "dp_moved").get(id(ev.node), []) if m.seq > ev.seq]
    for move in reversed(moves):
        where = _moved_to(move)
        if where is None or where == ("cuda", first_id):
            return where, False  # no finding: no need to ask the syntax tree
        if not exclusive(facts, move.node, ev.node):
            bare = move.data.get("dev") == ("cuda", None)
            if bare and _current_from_another_arm(facts, move, move.node):
                return None, False
            return where, where[0] == "cpu"
    module = ev.val
    if module is None:
        return None, False
    if module.device is None:
        forward = id(ev.node) in _wrapper_index(facts, "dp_forward")
        if forward and _kept_on_self(facts, ev.node):
            # self.encoder = nn.DataParallel(self.encoder) in a module's __init__: whoever
            # builds the module moves it, wrapper and all (model.cuda(): CMC's
            # LinearProbing.py, a fifteenth held-out corpus of issue 17: two false errors)
            return None, False
        return (("cpu", None) if module.kind == "module" and forward else None), False
    if module.device[0] == "cuda" and module.ordinal is not None:
        bare = module.device[1] is None and module.node is not None
        if bare and _current_from_another_arm(facts, ev, module.node):
            return None, False
        return ("cuda", module.ordinal), False
    return None, False


def _kept_on_self(facts: Facts, node: object) -> bool:
    """Whether ``node`` (a wrapper's construction) is assigned to an attribute of
    ``self``: a part of a module its users move."""
    found = facts.cache.get("dp_on_self")
    if isinstance(found, set):
        return id(node) in found
    kept: set[int] = set()
    for stmt in ast.walk(facts.tree) if facts.tree is not None else ():
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
            for t in stmt.targets
        ):
            kept.add(id(stmt.value))
    facts.cache["dp_on_self"] = kept
    return id(node) in kept


def _current_from_another_arm(facts: Facts, at: Event, placed: object) -> bool:
    """Whether the ``set_device`` a bare ``.cuda()`` got its ordinal from (the last one
    before ``at``) is written in another arm of an ``if`` than the ``.cuda()``."""
    chosen = facts.last_before("set_device", at.proc, at.seq)
    return (
        chosen is not None and isinstance(placed, ast.AST) and exclusive(facts, chosen.node, placed)
    )


def _uses_cuda(facts: Facts) -> bool:
    """Whether the script itself uses CUDA (DataParallel's own check aside): then it
    runs where GPUs are visible."""
    found = facts.cache.get("uses_cuda")
    if not isinstance(found, bool):
        found = facts.cache["uses_cuda"] = any(
            e.text("what") not in ("DataParallel()", "DistributedDataParallel()")
            for e in facts.of("cuda_init")
        )
    return found


def dp_module_rules(facts: Facts, explained: set[int]) -> list[Hit]:
    out: list[Hit] = []
    for ev in facts.of("dp"):
        if ev.seq in explained or ev.val is None:
            continue
        ids_val = ev.data.get("ids")
        ids = int_list(ids_val) if isinstance(ids_val, Val) else None
        if ev.data.get("ids_given") and not ids:
            continue
        if ids is not None and len(ids) == 1:
            continue  # one id: DataParallel moves the module there itself
        first_id = ids[0] if ids else 0
        if not -(10**18) < first_id < 10**18:
            continue  # DataParallel refuses such an id before it runs (LINT-IDS-UNDER-MASK)
        where, put_on_cpu = _module_at_forward(facts, ev, first_id)
        if where is None or where == ("cuda", first_id):
            continue
        if put_on_cpu and not _uses_cuda(facts):
            out.append(_cpu_only_hit(ev, first_id))
            continue
        from gpudiag.core.dataparallel import module_mismatch_text  # imported on a hit only

        first = str(first_id)
        found = "cpu" if where[0] == "cpu" else f"cuda:{shown.number(where[1] or 0)}"
        ids_text = shown.text(ev.text("ids_text")) or "(all visible GPUs)"
        if where[0] == "cpu":
            fix = (
                f"Move the model to cuda:{first} before the first forward: "
                f"model.to('cuda:{first}') (or model.cuda() when device_ids starts at 0)."
            )
        else:
            fix = (
                f"Move the model to cuda:{first} first (model.to('cuda:{first}')), or list its "
                f"device first (device_ids=[{shown.number(where[1] or 0)}, …]); to use physical "
                "GPUs by number, "
                "set CUDA_VISIBLE_DEVICES before CUDA starts and number device_ids from 0."
            )
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-DP-MODULE-DEVICE",
                "error",
                f"DataParallel(device_ids={ids_text}) gets a module that is on {found} when it "
                f"runs, but DataParallel needs it on device_ids[0] = cuda:{first}.",
                fix,
                module_mismatch_text(first_id, found),
                f"cuda:{first}",
            )
        )
    return out


def _cpu_only_hit(ev: Event, first_id: int) -> Hit:
    """DataParallel(model).cpu() in a script that never uses CUDA: with no GPU visible,
    DataParallel.__init__ leaves device_ids empty and forward() calls the module itself
    (torch 2.13 torch/nn/parallel/data_parallel.py); with GPUs it raises."""
    from gpudiag.core.dataparallel import module_mismatch_text  # imported on a hit only

    return hit(
        ev.line,
        ev.col,
        "LINT-DP-MODULE-DEVICE",
        "info",
        "DataParallel's module is moved to the CPU and the script uses no GPU: this runs "
        "only where no GPU is visible (DataParallel then calls the module itself); on a "
        f"machine with GPUs DataParallel needs the module on cuda:{first_id}.",
        "On a CPU-only path, call the model without DataParallel; else move it to "
        f"cuda:{first_id}.",
        module_mismatch_text(first_id, "cpu") + " (where a GPU is visible)",
        f"cuda:{first_id}",
    )


def wrapper_attribute_rules(facts: Facts) -> list[Hit]:
    """``model.fc`` / ``model.generate()`` after ``model = DataParallel(model)``:
    nn.Module.__getattr__ finds only the wrapper's own attributes (torch 2.13,
    torch/nn/modules/module.py), the model's are under ``.module``."""
    out: list[Hit] = []
    seen: set[tuple[int, str]] = set()
    for ev in facts.of("wrapper_attr"):
        attr, cls = ev.text("attr"), ev.text("class")
        if (ev.line, attr) in seen or ev.val is None or ONE_PATH_WRAPPER in ev.val.tags:
            continue  # a wrapper of one path only: the read may be on another (arms.py)
        seen.add((ev.line, attr))
        wrap = ev.val.node
        if wrap is not None and handled_for_both(facts, ev.node, wrap, attr):
            continue  # issue 17: `if distributed: m.module.x … else: m.x`
        attr, cls = shown.text(attr), shown.text(cls)
        wrapper = "DataParallel" if ev.val.kind == "dp" else "DistributedDataParallel"
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-WRAPPER-ATTRIBUTE",
                "error",
                f"'{attr}' belongs to {cls}, but it is read through the {wrapper} wrapper, "
                "which does not forward attributes to the model it wraps.",
                f"Use model.module.{attr} (the wrapped {cls}).",
                f"AttributeError: '{wrapper}' object has no attribute '{attr}'",
                None,
            )
        )
    return out
