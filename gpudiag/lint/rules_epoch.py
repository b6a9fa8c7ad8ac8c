"""Samplers: shuffle= with sampler=, and DistributedSampler.set_epoch missing or constant.

Sources (torch 2.13): torch/utils/data/distributed.py (``set_epoch``: "calling the
:meth:`set_epoch` method at the beginning of each epoch **before** creating the
:class:`DataLoader` iterator is necessary to make shuffling work properly across
multiple epochs. Otherwise, the same ordering will be always used."; the order is seeded
with ``seed + epoch``), torch/utils/data/dataloader.py ("sampler option is mutually
exclusive with shuffle").

An epoch loop is recognised by what it does (issue 17: 16 real misses were
``for _ in trange(num_train_epochs)``): a loop around the iteration of a DataLoader
whose sampler is a DistributedSampler (``loader_loop`` events, gpudiag.lint.linked).
A ``set_epoch`` made by a project function the file calls counts (``set_epoch_via``).
"""

from __future__ import annotations

import ast

from gpudiag.findings.texts import SAMPLER_SHUFFLE
from gpudiag.lint import shown
from gpudiag.lint.codes import Hit, hit
from gpudiag.lint.facts import Event, Facts
from gpudiag.model import Severity

_SAME_ORDER = (
    "silent: every epoch iterates the data in the same order "
    "(torch/utils/data/distributed.py: 'Otherwise, the same ordering will be always used.')"
)


def sampler_rules(facts: Facts) -> list[Hit]:
    out: list[Hit] = []
    for ev in facts.of("loader_shuffle"):
        severity = _shuffle_certainty(facts, ev)
        if severity is None:
            continue
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-SAMPLER-SHUFFLE",
                severity,
                "DataLoader gets both sampler= and shuffle=True: with a sampler the sampler "
                "decides the order, and DataLoader refuses the combination.",
                "Drop shuffle=True: DistributedSampler shuffles by itself (shuffle=True is "
                "its default); call sampler.set_epoch(epoch) at the start of each epoch.",
                SAMPLER_SHUFFLE,
                None,
            )
        )
    return [*out, *_constant_rules(facts), *_missing_rules(facts)]


def _shuffle_certainty(facts: Facts, ev: Event) -> Severity | None:
    """The walker runs both arms of an ``if``, so the sampler and the ``shuffle=True`` it
    sees may come from arms no run takes together (issue 17, the held-out corpus: NVIDIA's
    Tacotron2, ``if distributed: sampler, shuffle = DistributedSampler(…), False`` /
    ``else: None, True``, was a false error). None: no run has both; a warning when the
    sampler seen is ``None`` from one arm and ``shuffle=True`` from outside it (the other
    arm's sampler, unseen, meets it); else an error."""
    made = ev.data.get("made")
    if not isinstance(made, tuple) or not all(isinstance(n, ast.AST) for n in made):
        return None if ev.data.get("none") else "error"
    from gpudiag.lint.flow import exclusive, same_arm  # on a candidate only: the parent map

    if exclusive(facts, made[0], made[1]):
        return None
    if not ev.data.get("none"):
        return "error"
    together = same_arm(facts, made[0], made[1])
    return None if together is None or together else "warning"


def _constant_rules(facts: Facts) -> list[Hit]:
    """set_epoch(<the same value every epoch>) on a DistributedSampler (or on what the
    script passes to a DataLoader as its sampler), inside a loop: not a dataset's
    set_epoch, nor a test that sets 0 and then 1 (issue 17: 10 wrong findings)."""
    calls = facts.of("set_epoch")
    if facts.of("set_epoch_via") or any(not _constant_epoch(facts, e) for e in calls):
        return []
    out: list[Hit] = []
    for ev in calls:
        if not (ev.data.get("is_sampler") or ev.data.get("loader_sampler")):
            continue
        if not ev.data.get("in_any_loop", ev.data.get("in_loop")):
            continue
        loop_var = "epoch"
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-SET-EPOCH-CONSTANT",
                "warning",
                f"set_epoch({shown.text(ev.text('arg'))}) is called with a constant: "
                "DistributedSampler seeds its shuffle with seed + epoch, so every epoch sees "
                "the data in the same order.",
                f"Pass the current epoch: for {loop_var} in range(num_epochs): "
                f"sampler.set_epoch({loop_var}).",
                _SAME_ORDER,
                None,
            )
        )
    return out


def _constant_epoch(facts: Facts, ev: Event) -> bool:
    if ev.data.get("literal") or ev.data.get("loop_constant"):
        return True
    name = ev.text("name")
    if not name or ev.val is None or not ev.val.has_const:
        return False
    return facts.assign_counts.get(name, 0) <= 1


def _missing_rules(facts: Facts) -> list[Hit]:
    """A shuffling DistributedSampler's DataLoader iterated inside a loop (the epoch
    loop), and no set_epoch anywhere (in the file, or in a project function it calls).
    Reported at each such epoch loop; info for a loop named for epochs whose iteration
    lint cannot see."""
    if facts.of("set_epoch", "set_epoch_via"):
        return []
    out: list[Hit] = []
    seen: set[int] = set()
    for ev in facts.of("loader_loop"):
        outer = ev.data.get("outer")
        if not ev.data.get("shuffle") or not isinstance(outer, tuple) or not outer:
            continue
        if ev.data.get("evaluates"):
            continue  # an evaluation loop: its order does not matter
        loop = _epoch_loop(outer)
        if id(loop) in seen or _reseeded(ev, loop):
            continue
        seen.add(id(loop))
        sampler = ev.val.node if ev.val is not None else None
        made = f" made at line {sampler.lineno}" if isinstance(sampler, ast.expr) else ""
        var = _loop_var(loop)
        opaque = facts.of("opaque_sampler_use")
        note = (
            f" Not certain: the sampler goes to {shown.text(opaque[0].text('what'))}() "
            f"(line {opaque[0].line}), which lint cannot read."
            if opaque
            else ""
        )
        out.append(
            hit(
                loop.lineno,
                loop.col_offset + 1,
                "LINT-SET-EPOCH-MISSING",
                "info" if opaque else "warning",
                f"This loop iterates the DataLoader at line {ev.line} once per pass, and its "
                f"DistributedSampler{made} shuffles, but set_epoch() is never called: "
                f"every epoch sees the data in the same order.{note}",
                f"Call sampler.set_epoch({var}) at the start of each epoch, before "
                "iterating the DataLoader.",
                _SAME_ORDER,
                None,
            )
        )
    return out or _named_loop(facts)


def _named_loop(facts: Facts) -> list[Hit]:
    """A loop named for epochs and a shuffling DistributedSampler, but the DataLoader's
    iteration is not visible (a function lint cannot follow gets it): info."""
    samplers = [e for e in facts.of("sampler") if e.data.get("shuffle")]
    loops = [lp for lp in facts.of("epoch_loop") if samplers and lp.seq > samplers[0].seq]
    return [
        hit(
            loop.line,
            loop.col,
            "LINT-SET-EPOCH-MISSING",
            "info",
            f"The DistributedSampler made at line {samplers[0].line} shuffles, but set_epoch() "
            "is never called in this epoch loop: every epoch sees the data in the same order. "
            "Not certain: the DataLoader is iterated where lint cannot see it, which may call "
            "set_epoch().",
            f"Call sampler.set_epoch({shown.text(loop.text('var'))}) at the start of each "
            "epoch, before iterating the DataLoader.",
            _SAME_ORDER,
            None,
        )
        for loop in loops[:1]
    ]


def _reseeded(ev: Event, loop: ast.stmt) -> bool:
    """A sampler made anew in each pass of the loop with a seed it is given
    (``DistributedSampler(ds, seed=epoch)``): each pass has its own order."""
    node = ev.val.node if ev.val is not None else None
    return (
        isinstance(node, ast.Call)
        and any(k.arg == "seed" for k in node.keywords)
        and loop.lineno <= node.lineno <= (loop.end_lineno or loop.lineno)
    )


def _epoch_loop(outer: tuple[object, ...]) -> ast.stmt:
    """Of the loops around a DataLoader's iteration, the epoch loop: the innermost one
    whose variable says epoch, else the innermost one."""
    loops = [lp for lp in outer if isinstance(lp, (ast.For, ast.AsyncFor, ast.While))]
    for loop in reversed(loops):
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            names = [n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)]
            if any("epoch" in n.lower() or n.lower() == "ep" for n in names):
                return loop
    return loops[-1]


def _loop_var(loop: ast.stmt) -> str:
    target = loop.target if isinstance(loop, (ast.For, ast.AsyncFor)) else None
    if isinstance(target, ast.Name) and target.id != "_":
        return shown.text(target.id)
    return "epoch"
