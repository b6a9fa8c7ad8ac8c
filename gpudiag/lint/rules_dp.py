"""DataParallel rules: GPU indexes under the script's own mask, the module's device, checkpoints.

Sources (torch 2.13): torch/nn/parallel/data_parallel.py (``DataParallel.__init__``
checks every id with ``_get_device_index`` / ``get_device_properties``, which
asserts "Invalid device id"; ``forward`` raises "module must have its parameters
and buffers on device …"), torch/nn/modules/module.py (``load_state_dict``'s
"Missing key(s)" / "Unexpected key(s)"), and the DataParallel tutorial's
``model.module`` note. gpudiag.core.dataparallel predicts the same texts for
``gpudiag check``.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudiag.lint import shown
from gpudiag.lint.codes import Hit, hit
from gpudiag.lint.facts import Event, Facts
from gpudiag.lint.values import Val, as_int, device_of, int_list


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
        if mask is None:
            continue
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


def _module_at_forward(facts: Facts, ev: Event) -> tuple[str, int | None] | None:
    """Where DataParallel's module is when it runs: ("cuda", ordinal) / ("cpu", None),
    or None when unknown. A later ``.cuda()``/``.to()`` on the wrapper moves it."""
    moves = _wrapper_index(facts, "dp_moved").get(id(ev.node), [])
    if moves and moves[-1].seq > ev.seq:
        last = moves[-1]
        dev = last.data.get("dev")
        ordinal = last.data.get("ordinal")
        if isinstance(dev, tuple) and dev[0] == "cpu":
            return ("cpu", None)
        return ("cuda", ordinal) if isinstance(ordinal, int) else None
    module = ev.val
    if module is None:
        return None
    if module.device is None:
        forward = id(ev.node) in _wrapper_index(facts, "dp_forward")
        return ("cpu", None) if module.kind == "module" and forward else None
    if module.device[0] == "cuda" and module.ordinal is not None:
        return ("cuda", module.ordinal)
    return None


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
        where = _module_at_forward(facts, ev)
        if where is None or where == ("cuda", first_id):
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


def checkpoint_rules(facts: Facts) -> list[Hit]:
    saves = facts.of("save")
    loads = facts.of("load")
    if not saves or facts.strips_prefix:
        return []
    out: list[Hit] = []
    # the first save of each kind, found once (issue 21: each load scanned every save)
    first_save = {
        kind: next((s for s in saves if bool(s.data.get("wrapped")) == kind), None)
        for kind in (True, False)
    }
    for ld in loads:
        into_wrapper = bool(ld.data.get("wrapped"))
        other = first_save[not into_wrapper]
        if other is None:
            continue
        if into_wrapper:
            msg = (
                f"The checkpoint saved at line {other.line} holds a bare model's state_dict, "
                "and it is loaded here into the DataParallel/DDP wrapper, whose keys start "
                "with 'module.'."
            )
            predicts = (
                "RuntimeError: Error(s) in loading state_dict for DistributedDataParallel: "
                'Missing key(s) in state_dict: "module.…". Unexpected key(s) in state_dict: "…".'
            )
            fix = (
                "Load into the inner model: model.module.load_state_dict(state_dict), or load "
                "before wrapping the model."
            )
        else:
            msg = (
                f"The checkpoint saved at line {other.line} holds the DataParallel/DDP "
                "wrapper's state_dict (every key starts with 'module.'), and it is loaded "
                "here into a bare model."
            )
            predicts = (
                "RuntimeError: Error(s) in loading state_dict for <model>: Missing key(s) in "
                'state_dict: "…". Unexpected key(s) in state_dict: "module.…".'
            )
            fix = (
                "Save the inner model: torch.save(model.module.state_dict(), path), or strip "
                "the prefix: {k.removeprefix('module.'): v for k, v in state_dict.items()}."
            )
        if ld.data.get("lenient"):
            predicts = (
                "silent: with strict=False no key matches, so nothing is loaded and the model "
                "keeps its random initial weights"
            )
        out.append(
            hit(ld.line, ld.col, "LINT-CKPT-PREFIX-MISMATCH", "error", msg, fix, predicts, None)
        )
    if not loads:
        for sv in saves:
            if not sv.data.get("wrapped"):
                continue
            out.append(
                hit(
                    sv.line,
                    sv.col,
                    "LINT-CKPT-SAVE-WRAPPED",
                    "warning",
                    "This saves the DataParallel/DDP wrapper's state_dict: every key starts "
                    "with 'module.', so loading the checkpoint into a bare model (for "
                    "inference, or on one GPU) fails.",
                    "Save the inner model: torch.save(model.module.state_dict(), path).",
                    "RuntimeError: Error(s) in loading state_dict for <model>: Missing key(s) "
                    'in state_dict: "…". Unexpected key(s) in state_dict: "module.…". '
                    "(when loaded into the bare model)",
                    None,
                )
            )
    return out


def wrapper_attribute_rules(facts: Facts) -> list[Hit]:
    """``model.fc`` / ``model.generate()`` after ``model = DataParallel(model)``:
    nn.Module.__getattr__ finds only the wrapper's own attributes (torch 2.13,
    torch/nn/modules/module.py), the model's are under ``.module``."""
    out: list[Hit] = []
    seen: set[tuple[int, str]] = set()
    for ev in facts.of("wrapper_attr"):
        attr, cls = ev.text("attr"), ev.text("class")
        if (ev.line, attr) in seen or ev.val is None:
            continue
        seen.add((ev.line, attr))
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
