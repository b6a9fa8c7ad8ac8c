"""CUDA contexts every DDP rank makes on cuda:0 (issue 18, "memory held by others").

Until ``torch.cuda.set_device`` the current device of every process is cuda:0, and a CUDA
context costs a few hundred MiB of the GPU it is made on: a rank that makes one there
before selecting its own GPU leaves its PID, and that memory, on GPU 0 for the rest of
the run (``nvidia-smi`` lists every rank on GPU 0). Two ways lint can see:

- ``LINT-DDP-CUDA0-CONTEXT``: a call that works on the current device
  (``torch.cuda.synchronize()``, ``mem_get_info()``, ``Stream()``, ``empty_cache()`` once
  CUDA is initialised) before the rank's ``set_device``, and a tensor made there and
  thrown away (``rules_device._stray_context``); kept placements (``.cuda()``,
  ``device="cuda"``) are LINT-DDP-NO-SET-DEVICE's. Sources in :mod:`gpudiag.lint.ctx_calls`.
- ``LINT-DDP-LOAD-NO-MAP-LOCATION``: ``torch.load`` without ``map_location`` restores
  each tensor to the device it was saved from (torch 2.13 torch/serialization.py
  ``default_restore_location``), so a checkpoint rank 0 saved from cuda:0 lands on cuda:0
  in every rank. The PyTorch DDP tutorial (intermediate/ddp_tutorial, "Save and Load
  Checkpoints"): "configure map_location properly to prevent processes stepping into
  others' devices". ``weights_only`` changes nothing to the placement.

Certainty (issue 17 item 2): a context is memory, not a crash, so warning at most. The
load's checkpoint is not visible: a warning only when the script itself writes a
state dict with ``torch.save`` (its ranks' GPU tensors) and the load feeds a model's or
an optimizer's ``load_state_dict``; info when its content is not known. A call that
only rank 0 makes (``if rank == 0:``) is rank 0's own GPU, and one a run without ranks
makes (``if args.local_rank == -1:``) is one process's: quiet.
"""

from __future__ import annotations

import re

from gpudiag.lint.codes import Hit, hit
from gpudiag.lint.facts import Event, Facts
from gpudiag.lint.rules_device import per_rank_mask, rank_process, unseen_setup, uses_ddp

_SETS = ("set_device", "set_device_via")
#: an ``if`` test that holds on rank 0 only: ``rank == 0``, ``local_rank in [-1, 0]``,
#: ``is_main_process()``, ``dist.get_rank() == 0``…
_RANK_ZERO = re.compile(
    r"rank\w*(\(\))?\s*(==\s*0|<=\s*0|<\s*1)\b|rank\w*(\(\))?\s+in\s*[\[\(]\s*-1\s*,\s*0\s*[\]\)]"
    r"|main_process|is_master|master_process|rank_?0|rank_zero|is_main\b",
    re.IGNORECASE,
)
#: a test that is a rank itself: ``if not rank:`` holds on rank 0 only
_RANK_NAME = re.compile(r"^[\w.]*rank(\(\))?$", re.IGNORECASE)
#: a test that holds in a run without ranks: ``local_rank == -1`` (Hugging Face's examples)
_NOT_DISTRIBUTED = re.compile(r"rank\w*(\(\))?\s*==\s*-1\b", re.IGNORECASE)
#: a test that holds in a distributed run only: ``args.distributed``,
#: ``dist.is_initialized()``, ``world_size > 1``
_DISTRIBUTED = re.compile(
    r"^[\w.]*(distributed|ddp)[\w.]*(\(\))?$|is_initialized\(\)$|world_size\s*>\s*1$",
    re.IGNORECASE,
)
#: cuda_init events that do not initialise torch's CUDA state (is_available asks the
#: driver for a count; torch/cuda/__init__.py, torch 2.13)
_NOT_LAZY_INIT = ("torch.cuda.is_available()", "torch.cuda.get_arch_list()", "import ")
_MODEL_KINDS = frozenset({"module", "dp", "ddp", "placed", "optimizer"})


def _one_process_only(facts: Facts, ev: Event) -> bool:
    """Whether ``ev`` stands where one process only runs it: in an arm only rank 0 takes
    (``if rank == 0:``, ``if not rank:``), or that a run without ranks takes
    (``if args.local_rank == -1:``, the ``else`` of ``if args.distributed:``)."""
    from gpudiag.lint.flow import tests_around  # on a candidate only: builds parents

    for text, holds in tests_around(facts, ev.node):
        text = text.strip()
        if holds and (_RANK_ZERO.search(text) or _NOT_DISTRIBUTED.search(text)):
            return True
        if not holds and (_RANK_NAME.match(text) or _DISTRIBUTED.search(text)):
            return True
    return False


def _initialised_before(facts: Facts, ev: Event) -> Event | None:
    """An event before ``ev`` in its process that initialises torch's CUDA state."""
    found = [
        facts.last_before("placement", ev.proc, ev.seq),
        facts.last_before("context_call", ev.proc, ev.seq),
    ]
    init = facts.last_before("cuda_init", ev.proc, ev.seq)
    while init is not None and init.text("what").startswith(_NOT_LAZY_INIT):
        init = facts.last_before("cuda_init", ev.proc, init.seq)
    found.append(init)
    known = [e for e in found if e is not None]
    return max(known, key=lambda e: e.seq) if known else None


def context_rules(facts: Facts) -> list[Hit]:
    """Every rule of this module on one file."""
    if not uses_ddp(facts) or per_rank_mask(facts):
        return []
    return [*_context_before_set_device(facts), *_load_without_map_location(facts)]


def _context_before_set_device(facts: Facts) -> list[Hit]:
    out: list[Hit] = []
    for ev in facts.of("context_call"):
        if ev.data.get("set_before") or not rank_process(facts, ev.proc):
            continue
        found = [facts.first_after(kind, ev.proc, ev.seq) for kind in _SETS]
        later = min((e for e in found if e is not None), key=lambda e: e.seq, default=None)
        if later is None:
            continue  # never set here: LINT-DDP-NO-SET-DEVICE / LINT-DDP-CURRENT-DEVICE
        what = ev.text("what")
        init = _initialised_before(facts, ev) if ev.data.get("after_init") else None
        if ev.data.get("after_init") and init is None:
            continue  # empty_cache() before CUDA is initialised does nothing
        from gpudiag.lint.flow import enclosing_function, exclusive  # on a candidate only

        if exclusive(facts, ev.node, later.node) or _one_process_only(facts, ev):
            continue
        unseen = unseen_setup(facts, ev)
        if unseen is None and enclosing_function(facts, ev.node) is not enclosing_function(
            facts, later.node
        ):
            unseen = (
                f"set_device (line {later.line}) is in another function, whose order "
                "against this call lint takes from the calls it follows"
            )
        note = f" Not certain: {unseen}." if unseen else ""
        works = (
            f"frees cached memory through the current device once CUDA is initialised (here "
            f"at line {init.line})"
            if init is not None
            else "works on the current device"
        )
        fix = (
            "with torch.cuda.device(local_rank): torch.cuda.empty_cache()"
            if init is not None
            else f"{what}(local_rank)"
        )
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-DDP-CUDA0-CONTEXT",
                "info" if unseen else "warning",
                f"{what}() {works}, and this DDP rank calls torch.cuda.set_device() only "
                f"later (line {later.line}): until then the current device is cuda:0, so "
                "every rank makes a CUDA context (a few hundred MiB) on GPU 0 and keeps it "
                f"for the whole run.{note}",
                "Call torch.cuda.set_device(local_rank) first, before any CUDA call, or name "
                f"the device: {fix}.",
                "silent: every rank's process on GPU 0 in nvidia-smi, a CUDA context each; "
                "CUDA out of memory on GPU 0 when it is nearly full",
                "cuda:0",
            )
        )
    return out


def _load_without_map_location(facts: Facts) -> list[Hit]:
    loads = [e for e in facts.of("torch_load") if not e.data.get("mapped")]
    if not loads:
        return []
    saves_state = any(e.data.get("state") for e in facts.of("torch_save"))
    mapped_files = {
        e.val.extra[0]
        for e in facts.of("torch_load")
        if e.data.get("mapped") and e.val is not None and e.val.extra and e.val.extra[0]
    }
    #: each torch.load call -> the load_state_dict calls of a model or an optimizer it feeds
    feeds: dict[int, list[Event]] = {}
    for ld in facts.of("load"):
        origin = ld.data.get("origin")
        if origin is not None and _into_model(facts, ld):
            feeds.setdefault(id(origin), []).append(ld)
    out: list[Hit] = []
    for ev in loads:
        if not rank_process(facts, ev.proc) or _one_process_only(facts, ev):
            continue
        into = feeds.get(id(ev.node), [])
        unseen: str | None = None
        path = ev.val.extra[0] if ev.val is not None and ev.val.extra else None
        if path is not None and path in mapped_files:
            unseen = "another torch.load of the same file passes map_location"
        elif not into:
            unseen = (
                "what the file holds is not visible (tensors saved from a GPU, or CPU "
                "tensors and plain values)"
            )
        elif not saves_state:
            unseen = (
                "the script does not write this checkpoint itself: whether its tensors "
                "were saved from a GPU is not visible"
            )
        elif ev.proc.startswith("def:"):
            unseen = "nothing in this file calls the function that loads it"
        note = f" Not certain: {unseen}." if unseen else ""
        target = f" (read here into {into[0].text('key') or 'a model'})" if into else ""
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-DDP-LOAD-NO-MAP-LOCATION",
                "info" if unseen else "warning",
                "torch.load() without map_location puts every tensor back on the device it "
                "was saved from: in this DDP script, a checkpoint rank 0 saved from cuda:0 "
                f"lands on cuda:0 in every rank{target}, so each rank makes a CUDA context on "
                f"GPU 0 and holds a copy of the checkpoint there.{note}",
                "Pass map_location: torch.load(path, map_location='cpu') (then "
                "load_state_dict copies to the model's GPU), or "
                "map_location=f'cuda:{local_rank}'.",
                "silent: every rank's process on GPU 0 in nvidia-smi with a copy of the "
                "checkpoint; CUDA out of memory on GPU 0 for a large one",
                "map_location",
            )
        )
    return out


def _into_model(facts: Facts, ld: Event) -> bool:
    """A ``load_state_dict`` of a model or an optimizer (their state holds tensors), not
    of a scheduler or a scaler (numbers)."""
    key = ld.text("key")
    if ld.text("receiver") in _MODEL_KINDS or key in facts.param_owners:
        return True
    last = key.rsplit(".", 1)[-1].lower()
    return "optim" in last or last.endswith(("model", "net", "module"))
