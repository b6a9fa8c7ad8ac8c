"""Checkpoint rules: a state dict saved on one side of the DataParallel/DDP wrapper and
loaded on the other, and a checkpoint saved from the wrapper.

Source (torch 2.13): torch/nn/modules/module.py, ``Module.load_state_dict`` raises
"Error(s) in loading state_dict for …: Missing key(s) … Unexpected key(s) …" when the
keys differ, and the wrapper's ``state_dict()`` prefixes every key with ``module.``
(torch/nn/parallel/data_parallel.py and distributed.py keep the model as ``self.module``).

Only a module's ``load_state_dict`` counts (issue 17: ``optimizer.load_state_dict(
ckpt["optimizer"])`` was taken for a model): the receiver must be a module the file
builds or wraps, or a name whose ``.parameters()`` it reads. The finding is an error
only when the file proves the load reads that save: the same file (the same constant
path, or the same dotted name) and the same place in it (``torch.save(sd, p)`` read by
``load_state_dict(torch.load(p))``, or the same key of a checkpoint dict); otherwise a
warning.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from gpudiag.lint.codes import Hit, hit
from gpudiag.lint.facts import Event, Facts
from gpudiag.lint.objects import loaded_parts
from gpudiag.lint.syntax import dotted_key

_MODULE_KINDS = frozenset({"module", "dp", "ddp"})


@dataclass(frozen=True)
class _Match:
    save: Event
    #: the state dict the load would read from this save: "wrapped", "bare" or "other"
    which: str
    #: the load reads exactly this part of the save (no unknown key on the way)
    exact: bool
    #: True: the same file; None: not known
    same_file: bool | None


def _module_load(facts: Facts, ld: Event) -> bool:
    """The receiver is a model: built or wrapped here, or a name the file reads the
    parameters of."""
    return ld.text("receiver") in _MODULE_KINDS or ld.text("key") in facts.param_owners


#: where a load reads in a save: ("direct",) for torch.save(sd, …) itself, ("key", k) for
#: the key k of a checkpoint dict, ("any",) for a key that is not a constant
_Place = tuple[str, ...]
#: which state dict -> the first save that holds it there
_Bucket = dict[str, Event]


@dataclass
class _Saves:
    """The saves, indexed once by where a load reads them and by file (issue 21: each
    load scanning every save was quadratic on a file of many saves and loads)."""

    #: place -> file ("=p" for a constant, "@args.out" for a dotted name) -> bucket
    by_file: dict[_Place, dict[str, _Bucket]]
    #: place -> every save there whose file is not a constant
    computed: dict[_Place, _Bucket]
    #: place -> every save there
    every: dict[_Place, _Bucket]


def _index(saves: list[Event]) -> _Saves:
    index = _Saves({}, {}, {})
    for sv in saves:
        named = sv.data.get("keys")
        places: list[tuple[_Place, str]] = []
        if not isinstance(named, tuple):  # torch.save(model.state_dict(), …)
            places.append((("direct",), str(sv.data.get("which"))))
        else:
            places.extend((("key", str(key)), str(which)) for key, which in named)
            kinds = {which for _, which in named if which in ("wrapped", "bare")}
            if len(kinds) == 1:
                places.append((("any",), kinds.pop()))
        path = sv.data.get("path")
        for place, which in places:
            if isinstance(path, str):
                index.by_file.setdefault(place, {}).setdefault(path, {}).setdefault(which, sv)
            index.every.setdefault(place, {}).setdefault(which, sv)
            if not (isinstance(path, str) and path.startswith("=")):
                index.computed.setdefault(place, {}).setdefault(which, sv)
    return index


def _matches(ld: Event, index: _Saves) -> list[_Match]:
    """The saves ``ld`` may read, one per kind of state dict, the same file first: a load
    from a constant path reads that file or one whose name is computed, never another
    constant path; a load from a computed path may read any."""
    path, keys = loaded_parts(ld.val) if ld.val is not None else (None, ())
    if not keys:
        place: _Place = ("direct",)
    elif isinstance(keys[0], str):
        place = ("key", keys[0])
    else:
        place = ("any",)
    exact = place != ("any",)
    same = index.by_file.get(place, {}).get(path, {}) if path is not None else {}
    others = index.computed if path is not None and path.startswith("=") else index.every
    out = [_Match(sv, which, exact, True) for which, sv in same.items()]
    out += [_Match(sv, which, exact, None) for which, sv in others.get(place, {}).items()]
    return out


def _mismatch_hit(ld: Event, m: _Match) -> Hit:
    into_wrapper = bool(ld.data.get("wrapped"))
    if into_wrapper:
        msg = (
            f"The checkpoint saved at line {m.save.line} holds a bare model's state_dict, "
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
            f"The checkpoint saved at line {m.save.line} holds the DataParallel/DDP "
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
    if m.exact and m.same_file:
        return hit(ld.line, ld.col, "LINT-CKPT-PREFIX-MISMATCH", "error", msg, fix, predicts)
    msg += (
        " (The file names differ or are computed, so this holds when the checkpoint "
        "loaded is the one saved there.)"
    )
    return hit(ld.line, ld.col, "LINT-CKPT-PREFIX-MISMATCH", "warning", msg, fix, predicts)


_RESTORES = re.compile(r"load|restore|resume|restart|checkpoint", re.IGNORECASE)


def _loaded_back_by_a_helper(facts: Facts) -> bool:
    """Whether a wrapper is handed to a function that, by its name, loads a checkpoint
    (``utils.restart_from_checkpoint(path, state_dict=ddp_model)``, DINO's eval_linear):
    the wrapper's own checkpoint is then read back into the wrapper, in another module."""
    wrappers = {e.data.get("bound_to") for e in facts.of("dp", "ddp")} - {None}
    if not wrappers or facts.tree is None:
        return False
    for node in ast.walk(facts.tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if not _RESTORES.search(name):
            continue
        given = [*node.args, *(k.value for k in node.keywords)]
        if any(dotted_key(arg) in wrappers for arg in given):
            return True
    return False


def checkpoint_rules(facts: Facts) -> list[Hit]:
    saves = facts.of("save")
    if not saves or facts.strips_prefix:
        return []
    loads = [ld for ld in facts.of("load") if _module_load(facts, ld)]
    out: list[Hit] = []
    index = _index(saves)
    for ld in loads:
        mine = "wrapped" if ld.data.get("wrapped") else "bare"
        matches = _matches(ld, index)
        if any(m.which == mine for m in matches):
            continue  # a save this load agrees with: which one is read is not known
        wrong = [m for m in matches if m.which in ("wrapped", "bare")]
        if wrong:
            best = max(wrong, key=lambda m: (m.exact and bool(m.same_file), m.exact))
            out.append(_mismatch_hit(ld, best))
    if not loads:
        for sv in saves:
            named = sv.data.get("keys")
            inside = {w for _, w in named} if isinstance(named, tuple) else set()
            if sv.data.get("which") != "wrapped" and "wrapped" not in inside:
                continue
            if _loaded_back_by_a_helper(facts):
                break
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
