"""Version gates and except fallbacks: code that only some torch versions reach.

Real code keeps the old API for old torch beside the new one (issue 17: 8 of the
deprecated-AMP warnings were wrong for it), e.g. Lightning's
``torch.amp.GradScaler(...) if _TORCH_GREATER_EQUAL_2_4 else torch.cuda.amp.GradScaler()``
or ``try: from torch.amp import X`` / ``except ImportError: from torch.cuda.amp import X``.
Which branch runs depends on the torch installed where the script runs, which lint
cannot see, so every finding on a line inside such a branch is info at most, for
every rule, and its message says why (:data:`GATE_NOTE`, :data:`FALLBACK_NOTE`).
What counts as a gate is listed in docs/lint.md ("Version gates and fallbacks").

Spans are found from the statements only (iteratively, as the walker's survey) and
from the expressions of the lines that name a gate, and only for a file with a
finding to cap: the cost is linear and most files pay nothing.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import re
from collections.abc import Iterable

from gpudiag.lint.codes import Hit
from gpudiag.lint.gates_version import holds_on_modern, is_torch_version_attr
from gpudiag.lint.syntax import dotted_name, ident, inner_blocks

GATE_NOTE = "(under a torch-version gate)"
FALLBACK_NOTE = "(in an except fallback)"

#: A name that holds or computes the torch version: ``TORCH_VERSION``,
#: ``_TORCH_GREATER_EQUAL_2_4`` (Lightning), ``TORCH_2_4`` (ultralytics),
#: ``is_torch_version`` (accelerate), ``is_torch_min_version`` (Megatron),
#: ``is_torch_greater_than_1_6``/``is_torch_less_than_…`` (transformers).
#: Not ``is_torch_available``, ``torch_dtype`` or ``torch_device``.
_GATE_IDENT = re.compile(r"torch_?(?:version|\d)|torch\w*(?:version|greater|less_)", re.IGNORECASE)
#: a quick look at a line before its expressions are read: it may name a gate
_GATE_TEXT = re.compile(r"__version__|hasattr|getattr|" + _GATE_IDENT.pattern, re.IGNORECASE)
#: the exceptions a fallback for a missing module or attribute catches
_FALLBACK_EXC = frozenset({"ImportError", "ModuleNotFoundError", "AttributeError"})
_CATCH_ALL = frozenset({"Exception", "BaseException"})
#: nodes read in one test or try body (an `if` test is short; a hostile one is cut)
_MAX_TEST_NODES = 200
#: rounds of names assigned from gates (`use_new = TORCH_2_4`; `ok = use_new and x`)
_MAX_ROUNDS = 3

_Pos = tuple[int, int]


def _nodes(root: ast.AST, limit: int = _MAX_TEST_NODES) -> Iterable[ast.AST]:
    """``ast.walk``'s nodes, at most ``limit`` of them (iterative)."""
    todo = [root]
    seen = 0
    while todo and seen < limit:
        node = todo.pop()
        seen += 1
        yield node
        todo.extend(ast.iter_child_nodes(node))


def is_gate(expr: ast.AST, derived: set[str] | frozenset[str] = frozenset()) -> bool:
    """Whether an expression reads the torch version (or a name ``derived`` from it)."""
    for node in _nodes(expr):
        if is_torch_version_attr(node):
            return True  # torch.__version__, torch.version.__version__
        name = ident(node)
        if name is not None and (name in derived or _GATE_IDENT.search(name)):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("hasattr", "getattr")
            and node.args
        ):
            # hasattr(torch, "amp"), hasattr(torch.amp, "GradScaler"): a feature probe
            obj = dotted_name(node.args[0])
            if obj is not None and obj.split(".")[0] == "torch":
                return True
    return False


def _caught(handler: ast.ExceptHandler) -> set[str]:
    kinds = handler.type
    elts = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds] if kinds else []
    return {name for e in elts if (name := ident(e)) is not None}


def _probes(body: list[ast.stmt]) -> bool:
    """A try body that tries a module or a torch API: an import, a gate, ``torch.amp``."""
    for stmt in body:
        for node in _nodes(stmt):
            if isinstance(node, (ast.Import, ast.ImportFrom)) or is_gate(node):
                return True
            name = dotted_name(node) if isinstance(node, ast.Attribute) else None
            if name is not None and name.startswith(("torch.amp", "torch.cuda.amp")):
                return True
    return False


def _is_fallback(try_body: list[ast.stmt], handler: ast.ExceptHandler) -> bool:
    caught = _caught(handler)
    if caught & _FALLBACK_EXC:
        return True
    return (handler.type is None or bool(caught & _CATCH_ALL)) and _probes(try_body)


def _block_span(body: list[ast.stmt]) -> tuple[_Pos, _Pos] | None:
    return _span_of(body[0], body[-1]) if body else None


def _span_of(first: ast.stmt, last: ast.stmt) -> tuple[_Pos, _Pos]:
    """From ``first`` (its decorators included) to the end of ``last``."""
    decorators = getattr(first, "decorator_list", None)
    start = (decorators[0].lineno, 0) if decorators else (first.lineno, first.col_offset)
    end = (last.end_lineno or last.lineno, last.end_col_offset or 0)
    return start, end


def _expr_span(node: ast.expr) -> tuple[_Pos, _Pos]:
    return (node.lineno, node.col_offset), (
        node.end_lineno or node.lineno,
        node.end_col_offset or 0,
    )


def _header(stmt: ast.stmt) -> Iterable[ast.AST]:
    """A statement's own expressions, not those of the statements inside it."""
    if not inner_blocks(stmt):
        yield stmt
        return
    for child in ast.iter_child_nodes(stmt):
        if isinstance(child, (ast.expr, ast.withitem)):
            yield child


def _names_gate(gate_lines: list[int], stmt: ast.stmt, inner: list[list[ast.stmt]]) -> bool:
    """Whether a line of the statement's own (``_header``; ``inner``: its blocks) may
    name a gate."""
    blocks = [block for block in inner if block]
    last = min(b[0].lineno for b in blocks) - 1 if blocks else stmt.end_lineno or stmt.lineno
    return _any_between(gate_lines, stmt.lineno, max(last, stmt.lineno))


def _any_between(sorted_lines: list[int], first: int, last: int) -> bool:
    at = bisect.bisect_left(sorted_lines, first)
    return at < len(sorted_lines) and sorted_lines[at] <= last


@dataclasses.dataclass
class Spans:
    """The guarded parts of a module, merged: ``starts[i]``..``ends[i]`` has ``notes[i]``."""

    starts: list[_Pos]
    ends: list[_Pos]
    notes: list[str]

    def note_at(self, line: int, col0: int) -> str | None:
        at = bisect.bisect_right(self.starts, (line, col0)) - 1
        if at >= 0 and (line, col0) < self.ends[at]:
            return self.notes[at]
        return None


def spans(tree: ast.Module, lines: list[str]) -> Spans:
    """The spans of ``tree`` that a torch-version gate or an except fallback guards.

    Linear: one pass over the statements; an expression is read only on a line that
    may name a gate (``_GATE_TEXT``), and without such a line nothing can be a gate
    (a name derived from one is assigned on one), so only fallbacks are looked for."""
    whole = "\n".join(lines)  # one search of the text first: most files name no gate
    gate_lines = (
        [i for i, text in enumerate(lines, 1) if _GATE_TEXT.search(text)]
        if _GATE_TEXT.search(whole)
        else []
    )
    if not gate_lines and "except" not in whole:
        return Spans([], [], [])  # no gate, no fallback: the statements need no reading
    tests: list[tuple[ast.expr, list[tuple[_Pos, _Pos]]]] | None = [] if gate_lines else None
    assigned: list[tuple[list[str], ast.expr, int]] = []
    found: list[tuple[_Pos, _Pos, str]] = []
    blocks: list[list[ast.stmt]] = [tree.body]
    while blocks:
        block = blocks.pop()
        for at, stmt in enumerate(block):
            inner = inner_blocks(stmt)
            blocks.extend(inner)
            _survey(stmt, block, at, tests, assigned, found)
            if tests is not None and _names_gate(gate_lines, stmt, inner):
                # `a if TORCH_2_4 else b` inside the statement's own expressions
                for part in _header(stmt):
                    for node in _nodes(part, 10 * _MAX_TEST_NODES):
                        if isinstance(node, ast.IfExp):
                            modern = holds_on_modern(node.test)
                            spans = [
                                _expr_span(arm)
                                for arm, taken in ((node.body, True), (node.orelse, False))
                                if modern is not taken
                            ]
                            tests.append((node.test, spans))
    if tests is None:
        return _merge(found)
    derived = _derived(assigned, gate_lines, lines)
    for test, guarded in tests:
        if is_gate(test, derived):
            found.extend((start, end, GATE_NOTE) for start, end in guarded)
    return _merge(found)


def _derived(
    assigned: list[tuple[list[str], ast.expr, int]], gate_lines: list[int], lines: list[str]
) -> set[str]:
    """The names assigned a gate (``NEW_AMP = version.parse(torch.__version__) >= …``),
    then those assigned from them (``USE_OLD = not NEW_AMP``), :data:`_MAX_ROUNDS` deep.
    A value is read only where its line names a gate or a name found before."""
    derived: set[str] = set()
    pattern: re.Pattern[str] | None = None
    for _ in range(_MAX_ROUNDS):
        new: set[str] = set()
        for names, value, line in assigned:
            if pattern is None:
                if not _any_between(gate_lines, line, value.end_lineno or line):
                    continue
            elif not pattern.search(lines[line - 1] if line <= len(lines) else ""):
                continue
            if is_gate(value, derived):
                new.update(n for n in names if n not in derived)
        if not new:
            break
        derived |= new
        pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(derived))) + r")\b")
    return derived


def _survey(
    stmt: ast.stmt,
    block: list[ast.stmt],
    at: int,
    tests: list[tuple[ast.expr, list[tuple[_Pos, _Pos]]]] | None,
    assigned: list[tuple[list[str], ast.expr, int]],
    found: list[tuple[_Pos, _Pos, str]],
) -> None:
    """One statement's candidate gate, its fallbacks, and the names it may derive
    (``tests`` None: the file names no gate)."""
    if isinstance(stmt, ast.If) and tests is not None:
        # both branches, but not the script after a branch that only refuses old torch
        # (`if torch < 1.6: raise …` / `else: <the training>`)
        # an arm every torch >= 2.4 takes is not guarded (`>= "1.6"`: gates_version.py)
        modern = holds_on_modern(stmt.test)
        body = None if _refuses(stmt.orelse) or modern is True else _block_span(stmt.body)
        orelse = None if _refuses(stmt.body) or modern is False else _block_span(stmt.orelse)
        guarded = [span for span in (body, orelse) if span]
        if (
            not stmt.orelse
            and modern is not False
            and at + 1 < len(block)
            and _returns(stmt.body)
            and _returns(block)
        ):
            # `if TORCH_2_4: return new()` then `return old()`: the rest of the block is
            # the gate's other branch. Not after a `raise` (horovod: `if amp and torch <
            # 1.6: raise`) nor a bare `return`: what follows is the script itself
            guarded.append(_span_of(block[at + 1], block[-1]))
        tests.append((stmt.test, guarded))
    elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
        body = stmt.body  # type: ignore[attr-defined]
        for handler in stmt.handlers:  # type: ignore[attr-defined]
            span = _block_span(handler.body)
            if span is not None and _is_fallback(body, handler):
                found.append((*span, FALLBACK_NOTE))
    elif tests is None:
        return
    elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        names = [n for t in targets if (n := ident(t)) is not None]
        if names:
            assigned.append((names, stmt.value, stmt.value.lineno))
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        # def is_new_torch(): return version.parse(torch.__version__) >= …
        returns = [s.value for s in stmt.body if isinstance(s, ast.Return) and s.value]
        if len(returns) == 1:
            assigned.append(([stmt.name], returns[0], returns[0].lineno))


def _refuses(body: list[ast.stmt]) -> bool:
    """The block ends in ``raise`` or ``sys.exit(…)``: it stops, it offers no other API."""
    last = body[-1] if body else None
    if isinstance(last, ast.Raise):
        return True
    call = last.value if isinstance(last, ast.Expr) else None
    return isinstance(call, ast.Call) and dotted_name(call.func) in ("sys.exit", "exit", "quit")


def _returns(body: list[ast.stmt]) -> bool:
    """The block ends in ``return <value>`` (not ``return`` nor ``return None``)."""
    last = body[-1] if body else None
    if not isinstance(last, ast.Return) or last.value is None:
        return False
    return not (isinstance(last.value, ast.Constant) and last.value.value is None)


def _merge(found: list[tuple[_Pos, _Pos, str]]) -> Spans:
    """The union of the spans (nested or apart, as a syntax tree's are); an outer span's
    note is kept."""
    found.sort(key=lambda s: (s[0], (-s[1][0], -s[1][1])))
    out = Spans([], [], [])
    for start, end, note in found:
        if out.ends and start < out.ends[-1]:
            out.ends[-1] = max(out.ends[-1], end)
            continue
        out.starts.append(start)
        out.ends.append(end)
        out.notes.append(note)
    return out


def cap(hits: list[Hit], tree: ast.Module | None, lines: list[str]) -> list[Hit]:
    """``hits``, with each one inside a gate or a fallback made info at most and noted."""
    if not hits or tree is None:
        return hits
    guarded = spans(tree, lines)
    if not guarded.starts:
        return hits
    out: list[Hit] = []
    for h in hits:
        note = guarded.note_at(h.line, h.col - 1)
        if note is None:
            out.append(h)
            continue
        out.append(h.as_info(note))
    return out
