"""Each DDP rank's GPU: set_device missing, hard-coded, or fed a physical GPU index.

Sources (torch 2.13): torch/nn/parallel/distributed.py (the DDP docstring:
``torch.cuda.set_device(i)`` "where i is from 0 to N-1" before wrapping);
torch/cuda/__init__.py ``synchronize`` and torch/cuda/memory.py's statistics use "the
current device, given by current_device(), if device is None"; NCCL's "Duplicate GPU
detected" for two ranks on one GPU; the CUDA Programming Guide (CUDA_VISIBLE_DEVICES:
the devices it lists are renumbered from 0).

Certainty decides severity (issue 17 item 2): what the file and the project modules it
calls prove is an error; what a call lint cannot follow (an ``opaque_setup`` event: a
helper of a package it cannot read, ``init_dist``…) or a framework (deepspeed,
accelerate…) may have done makes the finding info.
"""

from __future__ import annotations

from gpudiag.lint import shown
from gpudiag.lint.codes import Hit, hit
from gpudiag.lint.facts import Event, Facts
from gpudiag.lint.values import as_int, device_of

_SETS = ("set_device", "set_device_via")
_CVD_TAG = "env:CUDA_VISIBLE_DEVICES"


def uses_ddp(facts: Facts) -> bool:
    """A DDP script whose ranks use GPUs through NCCL (gloo-only scripts are CPU jobs,
    or tolerate ranks sharing a GPU)."""
    # a project helper's init_process_group makes a script, not a library module whose
    # uncalled functions reach it, a DDP script (accelerate's utils/bnb.py)
    inits = [
        e
        for e in facts.of("init_pg", "init_pg_via")
        if e.kind == "init_pg" or not e.proc.startswith("def:")
    ]
    if inits and all(e.data.get("backend") == "gloo" for e in inits):
        return False
    return bool(inits or facts.of("ddp"))


def per_rank_mask(facts: Facts) -> bool:
    return any(
        e.text("var") == "CUDA_VISIBLE_DEVICES"
        and e.val is not None
        and bool(e.val.tags & {"RANK", "LOCAL", "SPAWN"})
        for e in facts.of("env_set")
    )


def opaque_text(op: Event) -> str:
    """``init_dist() (line 5), which lint cannot read,`` or, for a project function that
    calls such code, ``setup() in utils.py (line 5), which calls code lint cannot read,``."""
    if op.data.get("picked"):
        return f"{op.text('what')} (line {op.line}), a function picked by name at run time,"
    which = "calls code lint cannot read" if op.data.get("indirect") else "lint cannot read"
    return f"{shown.text(op.text('what'))} (line {op.line}), which {which},"


def unseen_setup(facts: Facts, ev: Event) -> str | None:
    """What lint cannot see that may have set this rank's device before ``ev``: a
    framework, or a call it cannot follow in the same process before it (anywhere, for a
    function nothing in the file calls)."""
    if facts.frameworks:
        return f"the script uses {sorted(facts.frameworks)[0]}, which sets devices up itself"
    for op in facts.of("opaque_setup"):
        if op.proc == ev.proc and op.seq < ev.seq:
            return f"{opaque_text(op)} runs before it"
        if ev.proc.startswith("def:") and op.proc.startswith("def:"):
            return f"{opaque_text(op)} may run first"
    return None


def groups_of_one(facts: Facts) -> set[str]:
    """The processes that start process groups, each of one (``world_size=1``)."""
    inits: dict[str, list[Event]] = {}
    for e in facts.of("init_pg"):
        inits.setdefault(e.proc, []).append(e)
    return {p for p, evs in inits.items() if all(e.data.get("one_process") for e in evs)}


def only_groups_of_one(facts: Facts) -> bool:
    """Whether the file starts process groups, each of one process, and no project script
    launches it (a launcher would start several such processes)."""
    started = {e.proc for e in facts.of("init_pg")}
    return bool(started) and started <= groups_of_one(facts) and not facts.launched_by


def rank_process(facts: Facts, proc: str) -> bool:
    """Whether ``proc`` is a rank: not the parent of a script that starts its own ranks."""
    if proc != "main":
        return True
    inits = facts.of("init_pg", "init_pg_via")
    return not (facts.of("spawn_launch", "fork_launch") and all(e.proc != "main" for e in inits))


def set_device_rules(facts: Facts) -> list[Hit]:
    if not uses_ddp(facts) or per_rank_mask(facts):
        return []
    out = [*_no_set_device(facts), *_current_device(facts), *_constant(facts)]
    return out


def _no_set_device(facts: Facts) -> list[Hit]:
    if only_groups_of_one(facts):
        # every process group is of one process (world_size=1, rank=0: esm's fold.py
        # starts one for FSDP's CPU offloading): there is no other rank to share cuda:0
        # with (a twelfth held-out corpus of issue 17: 2 false errors)
        return []
    set_procs = {e.proc for e in facts.of(*_SETS)}
    out: list[Hit] = []
    for ev in facts.of("placement"):
        if not ev.data.get("bare") or ev.data.get("set_before"):
            continue
        if ev.proc.startswith("def:") and set_procs - {ev.proc}:
            continue  # set elsewhere, in an order the walker cannot know
        if not rank_process(facts, ev.proc):
            continue  # the parent, before it starts the ranks: one process
        from gpudiag.findings.texts import duplicate_gpu_text  # imported on a hit only: start-up

        later = next((e for e in facts.of(*_SETS) if e.proc == ev.proc and e.seq > ev.seq), None)
        if later is not None and later.node is ev.node:
            # one project call given device="cuda" that sets the device itself: which it
            # does first lies inside it (DiffSynth-Studio's from_pretrained(device="cuda",
            # use_usp=True) sets the rank's device, then builds on it; a nineteenth
            # held-out corpus of issue 17: 3 false errors)
            continue
        what = f'"{_short(ev.node)}"'
        if later is not None and not ev.text("key") and ev.node is not None:
            from gpudiag.lint.flow import discarded  # on a candidate only

            if discarded(facts, ev.node):
                out.append(_stray_context(facts, ev, later, what))
                continue
        if later is not None:
            why = (
                f"torch.cuda.set_device() is called only later (line {later.line}), so "
                f"{what} still lands on cuda:0 in every rank"
            )
        else:
            why = (
                "neither the script nor the project modules it calls set the device "
                f"(torch.cuda.set_device(local_rank)), so {what} puts every rank's tensors "
                "on cuda:0"
            )
        unseen = unseen_setup(facts, ev)
        if unseen is None and ev.proc.startswith("def:"):
            # a library module's function: its callers, elsewhere, may have set the device
            # (issue 17, the held-out corpus: NVIDIA's ConvNets Executor and fairseq's
            # all_gather_list, built and called after main.py's set_device)
            unseen = (
                "nothing in this file calls the function it is in; its caller may set the device"
            )
        note = f" Not certain: {unseen}." if unseen else ""
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-DDP-NO-SET-DEVICE",
                "info" if unseen else "error",
                f"This DDP script places tensors on the current CUDA device, and {why}: all "
                f"ranks share one GPU while the others stay idle.{note}",
                "Call torch.cuda.set_device(local_rank) (local_rank = "
                "int(os.environ['LOCAL_RANK'])) before any CUDA work, or use an explicit "
                "device: model.to(f'cuda:{local_rank}'), DDP(model, device_ids=[local_rank]).",
                "silent: every rank runs on cuda:0 (out of memory there), or with NCCL "
                + duplicate_gpu_text(None),
                "cuda:0",
            )
        )
    return out


def _stray_context(facts: Facts, ev: Event, later: Event, what: str) -> Hit:
    """A tensor made on cuda:0 before a later set_device and thrown away: the rank moves
    to its own GPU afterwards, but its CUDA context stays on GPU 0 (modded-nanogpt's
    ``torch.empty(1, device='cuda', requires_grad=True).backward()`` at import, a fifth
    held-out corpus: 3 false errors that claimed every rank trains on GPU 0)."""
    unseen = unseen_setup(facts, ev)
    note = f" Not certain: {unseen}." if unseen else ""
    return hit(
        ev.line,
        ev.col,
        "LINT-DDP-CUDA0-CONTEXT",
        "info" if unseen or ev.proc.startswith("def:") else "warning",
        f"{what} is made on the current device and thrown away, and this DDP rank calls "
        f"torch.cuda.set_device() only later (line {later.line}): until then the current "
        "device is cuda:0, so every rank makes a CUDA context (a few hundred MiB) on GPU 0 "
        f"and keeps it for the whole run.{note}",
        "Call torch.cuda.set_device(local_rank) first, before any CUDA work, or name the "
        "device: device=f'cuda:{local_rank}'.",
        "silent: every rank's process on GPU 0 in nvidia-smi, a CUDA context each; CUDA out "
        "of memory on GPU 0 when it is nearly full",
        "cuda:0",
    )


def _current_device(facts: Facts) -> list[Hit]:
    """A rank that puts its tensors on cuda:<local rank> explicitly but never sets the
    device, then calls what works on the current device (cuda:0):
    ``torch.cuda.synchronize()``, the memory statistics."""
    set_procs = {e.proc for e in facts.of(*_SETS)}
    explicit = {e.proc for e in facts.of("device_use") if e.proc not in set_procs}
    out: list[Hit] = []
    for ev in facts.of("current_device_use"):
        if ev.proc not in explicit or ev.proc.startswith("def:"):
            continue
        if not rank_process(facts, ev.proc):
            continue
        unseen = unseen_setup(facts, ev)
        note = f" Not certain: {unseen}." if unseen else ""
        what = ev.text("what")
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-DDP-CURRENT-DEVICE",
                "info" if unseen else "warning",
                "This DDP rank puts its tensors on its own GPU explicitly but never calls "
                f"torch.cuda.set_device(), and {what}() works on the current device, cuda:0 "
                "in every rank: each rank creates a CUDA context on GPU 0 (memory there) and "
                f"waits on, or measures, GPU 0 instead of its own.{note}",
                "Call torch.cuda.set_device(local_rank) once, before any CUDA work, or pass "
                f"the device: {what}(local_rank).",
                "silent: a CUDA context on GPU 0 per rank; timings and memory figures of GPU 0",
                "cuda:0",
            )
        )
    return out


def _constant(facts: Facts) -> list[Hit]:
    """``torch.cuda.set_device(1)`` in every rank of a DDP script: one GPU for all."""
    procs_with_rank = {e.proc for e in facts.of("device_use")}
    variable = {
        e.proc
        for e in facts.of(*_SETS)
        if e.kind == "set_device_via" or _constant_ordinal(e) is None
    }
    starts = bool(facts.of("spawn_launch"))
    # one rank, no GPU to share (FasterViT's and MambaVision's datasets.py __main__ blocks)
    alone = groups_of_one(facts)
    # a process that sets RANK to a constant itself: however many were started, they
    # would all be that rank, and the group would never form; it works as one process
    # only (Lumina-T2X's sample.py: os.environ["RANK"] = str(rank) in main(args, 0, …),
    # a sixteenth held-out corpus of issue 17: three false warnings)
    alone |= {
        e.proc
        for e in facts.of("env_set")
        if e.text("var") == "RANK" and isinstance(e.data.get("value"), str)
    }
    # a call that another process makes with a rank of its own: the constant is one
    # caller's argument, not every rank's (BigVGAN's train.py: mp.spawn(train, …) with
    # several GPUs, train(0, a, h) with one; an eighteenth held-out corpus of issue 17:
    # 1 false error)
    per_rank = {(e.line, e.col) for e in facts.of("set_device") if _constant_ordinal(e) is None}
    out: list[Hit] = []
    for ev in facts.of("set_device"):
        k = _constant_ordinal(ev)
        if k is None or ev.proc in variable or ev.proc in procs_with_rank or ev.proc in alone:
            continue
        if (ev.line, ev.col) in per_rank:
            continue
        if ev.proc.startswith("def:") or not rank_process(facts, ev.proc):
            continue
        unseen = unseen_setup(facts, ev)
        note = f" Not certain: {unseen}." if unseen else ""
        from gpudiag.findings.texts import duplicate_gpu_text  # on a hit only

        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-DDP-SET-DEVICE-CONSTANT",
                "info" if unseen else ("error" if starts else "warning"),
                f"torch.cuda.set_device({k}) is a constant in a DDP script: every rank on a "
                f"node selects cuda:{k}, so they share one GPU (and where each rank sees one "
                f"GPU, cuda:{k} may not exist).{note}",
                "Select the rank's own GPU: torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) "
                "(with mp.spawn, the index each process gets).",
                "silent: all ranks on one GPU (out of memory), or with NCCL "
                + duplicate_gpu_text(None),
                f"cuda:{k}",
            )
        )
    return out


def _constant_ordinal(ev: Event) -> int | None:
    if ev.val is None or ev.val.tags:
        return None
    k = as_int(ev.val)
    if k is None:
        dev = device_of(ev.val) if ev.val.has_const else None
        k = dev[1] if dev is not None and isinstance(dev[1], int) else None
    return k


def physical_id_rules(facts: Facts) -> list[Hit]:
    """An entry of CUDA_VISIBLE_DEVICES (a physical GPU index, nvidia-smi's numbering)
    used as a CUDA ordinal: under the mask the visible GPUs are renumbered from 0."""
    out: list[Hit] = []
    for ev in facts.of("set_device", "placement"):
        val = ev.val
        if val is None or _CVD_TAG not in val.tags:
            continue
        where = "torch.cuda.set_device()" if ev.kind == "set_device" else f'"{_short(ev.node)}"'
        from gpudiag.findings.texts import INVALID_ORDINAL_MESSAGE  # on a hit only

        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-DEVICE-FROM-CVD",
                "warning",
                f"The GPU index for {where} is read from CUDA_VISIBLE_DEVICES: that is a "
                "physical GPU number, but CUDA numbers the GPUs the mask lets through from 0, "
                "so under CUDA_VISIBLE_DEVICES=2,3 GPU 3 is cuda:1 and cuda:3 does not exist.",
                "Use the position in the mask, not the entry: the local rank itself "
                "(torch.cuda.set_device(local_rank)); the mask already chose the GPUs.",
                "RuntimeError: " + INVALID_ORDINAL_MESSAGE + " (or silently another GPU)",
                "CUDA_VISIBLE_DEVICES",
            )
        )
    return out


def _short(node: object, limit: int = 50) -> str:
    import ast

    from gpudiag.lint.syntax import unparse

    text = unparse(node) if isinstance(node, ast.AST) else "this call"
    return text if len(text) <= limit else text[: limit - 3] + "..."
