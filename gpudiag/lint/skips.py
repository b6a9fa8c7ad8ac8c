"""Tests that do not run on current torch: skip markers (issue 17, the held-out corpus).

A test function marked ``@pytest.mark.skip`` or ``@unittest.skip(...)`` (itself or its
class), or whose first statement is ``pytest.skip(...)``, never runs; one marked
``@pytest.mark.skipif(<torch-version gate>)`` (``unittest.skipIf``) runs only on the torch
the gate leaves, and ``unittest.skipUnless(<gate>)`` only where it holds. Unless the gate
tells that every torch >= 2.4 runs it (:func:`gpudiag.lint.gates_version.holds_on_modern`),
what lint finds only in such a test's walk (its body, and the helpers only it reaches) is
info at most, noted, as under a version gate (:mod:`gpudiag.lint.gates`). Sources: pytest's
skipping docs (``pytest.mark.skip``, ``skipif``, ``pytest.skip()``), Python's unittest
(``skip``, ``skipIf``, ``skipUnless``). fairscale's FSDP tests are skipped on torch >= 1.14
and kept deprecated AMP calls in the helpers they spawn: 7 wrong warnings.
"""

from __future__ import annotations

import ast
import bisect

from gpudiag.lint.codes import Hit, demote
from gpudiag.lint.facts import Facts
from gpudiag.lint.gates import is_gate
from gpudiag.lint.gates_version import holds_on_modern
from gpudiag.lint.syntax import dotted_name

SKIPPED_NOTE = "(only in a test skipped on current torch)"
_ALWAYS = ("mark.skip", "unittest.skip")
_SKIP_IF = ("mark.skipif", "unittest.skipIf")
_CALLS_SKIP = ("pytest.skip",)


def skipped(fn: ast.FunctionDef | ast.AsyncFunctionDef, cls: ast.ClassDef | None) -> bool:
    """Whether the test ``fn`` (a method of ``cls``) does not run on current torch."""
    decorators = [*fn.decorator_list, *(cls.decorator_list if cls is not None else ())]
    if any(_skips(deco) for deco in decorators):
        return True
    first = fn.body[0] if fn.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Call):
        name = dotted_name(first.value.func) or ""
        return name.endswith(_CALLS_SKIP)
    return False


def _skips(deco: ast.expr) -> bool:
    name = dotted_name(deco.func if isinstance(deco, ast.Call) else deco) or ""
    if name.endswith(_ALWAYS):
        return True
    unless = name.endswith("unittest.skipUnless")
    if not (unless or name.endswith(_SKIP_IF)) or not isinstance(deco, ast.Call):
        return False
    test = deco.args[0] if deco.args else None
    test = (
        test
        if test is not None
        else next((k.value for k in deco.keywords if k.arg == "condition"), None)
    )
    if test is None or not is_gate(test):
        return False
    modern = holds_on_modern(test)
    # skipif(gate): runs where the gate is false; skipUnless(gate): where it holds
    return modern is None or modern != unless


def cap(hits: list[Hit], facts: Facts) -> list[Hit]:
    """``hits``, with each one that only a skipped test's walk reaches made info."""
    ranges = facts.skipped
    if not ranges or all(h.finding.severity == "info" for h in hits):
        return hits
    # walks follow one another: the ranges are in order and apart, so a bisection finds
    # the one a sequence number may lie in (a file of thousands of skipped tests stays
    # linear; issue 21)
    starts = [start for start, _ in ranges]

    def in_skipped(seq: int) -> bool:
        at = bisect.bisect_left(starts, seq) - 1
        return at >= 0 and seq <= ranges[at][1]

    seqs: dict[int, list[int]] = {}
    for ev in facts.events:
        seqs.setdefault(ev.line, []).append(ev.seq)

    def note_of(h: Hit) -> str | None:
        at = seqs.get(h.line)
        return SKIPPED_NOTE if at and all(in_skipped(seq) for seq in at) else None

    return demote(hits, note_of)
