"""Walk a module in (approximate) execution order and record :class:`~gpudiag.lint.facts.Facts`.

Statements run in source order (an ``if``'s arms one after the other; what they leave
in a name is merged, :mod:`gpudiag.lint.arms`); a call to a function or class of the
same file is inlined at the call site (bounded), so ``main()`` under ``if __name__ ==
"__main__":`` runs where it is called, and the target of ``mp.spawn`` runs as a new
process. Functions nothing calls are walked at the end, each as its own process
(``def:NAME``). A call by name (``f()``, ``self.f()``) resolves to the first definition
of that name in the file; every other one runs at the end as its own process
(``def:NAME@LINE``; issue 17: deprecated AMP hidden in a second class's ``forward``),
from what its class's ``__init__`` left in ``self``, following only bodies not read yet.
Names live in one table keyed by their dotted spelling (``model``, ``self.model``,
``args.local_rank``): crude, but enough for the rules' data flow; it never runs the script.
"""

from __future__ import annotations

import ast

from gpudiag.lint import names as N
from gpudiag.lint.amp_calls import AmpCalls
from gpudiag.lint.arms import exec_if
from gpudiag.lint.exprs import MAX_NESTING
from gpudiag.lint.facts import Facts, Setup
from gpudiag.lint.flow import unwrapped_alias
from gpudiag.lint.skips import skipped
from gpudiag.lint.survey import Survey
from gpudiag.lint.syntax import assigned_in, dotted_key, dotted_prefixes, imported, unparse
from gpudiag.lint.values import UNKNOWN, Val, const, union

#: how many times one body is followed (four, before, cost 7% of the corpus run and
#: changed no finding on it); a later call with an earlier one's arguments gets its return
_MAX_INLINE = 2
#: the ``self.…`` names kept from a class's ``__init__`` for its other methods
_MAX_KEPT = 64
_MAX_DEPTH = 12


class Walker(AmpCalls):
    """One module's walk; :meth:`run` returns its facts."""

    def __init__(self, tree: ast.Module, lines: list[str]) -> None:
        super().__init__()
        self.tree = tree
        self.facts = Facts(source_lines=lines)
        #: dotted name -> the dotted names bound below it (``self`` -> ``self.model``…):
        #: binding a name forgets those without scanning every name (issue 21: quadratic)
        self.below: dict[str, set[str]] = {}
        survey = Survey(tree)
        self.facts.tree = tree
        self.funcs = survey.funcs
        self.methods = survey.methods
        self.classes = survey.classes
        self.others = survey.others
        self.owner = survey.owner
        self.inlined: dict[ast.AST, int] = {}
        #: how many times one body is followed into (fewer once the later definitions run)
        self.max_inline = _MAX_INLINE
        #: each walk of a body: its arguments and what it returned
        self.walked: dict[ast.AST, list[tuple[list[Val], list[tuple[str, Val]], Val]]] = {}
        #: what each walked body set up (a device…), replayed at a call not walked again
        self.setups: dict[ast.AST, Setup] = {}
        self.returns: list[list[Val]] = []
        self.depth = 0

    # ------------------------------------------------------------------ set-up

    def run(self) -> Facts:
        self.exec_block(self.tree.body)
        uncalled = [
            *((fn, False) for fn in reversed(self.funcs.values())),
            *((fn, True) for fn in self.methods.values()),
            *self.others,  # after the first definitions: their walk is as before
        ]
        used: set[str] = set()
        first_defs = len(self.funcs) + len(self.methods)
        after_init: dict[ast.ClassDef, dict[str, Val]] = {}
        for at, (fn, is_method) in enumerate(uncalled):
            if fn in self.inlined:
                continue
            cls = self.owner.get(fn)
            if at >= first_defs:
                # the later definitions follow a call only into a body not read yet: each
                # is read once more, not up to _MAX_INLINE times (the time stays linear
                # and near what it was when only first definitions were read)
                self.max_inline = 1
                # each later definition from what its class's __init__ left in `self`, not
                # from what another method (or another class) put there: the order the
                # methods are read in is not the order a caller calls them in
                self.reset_self(after_init.get(cls) if cls is not None else None)
            # one process per definition: two classes' `train` are not one process
            proc = f"def:{fn.name}"
            if proc in used:
                proc = f"def:{fn.name}@{fn.lineno}"
            used.add(proc)
            saved = self.proc
            self.proc = proc
            start = self.seq
            self.inline(fn, [], [], skip_self=is_method)
            if skipped(fn, cls):
                self.facts.skipped.append((start, self.seq))
            self.proc = saved
            if cls is not None and fn.name == "__init__":
                bound = self.below.get("self", set())
                if len(bound) <= _MAX_KEPT:  # bounded: restored before each method
                    after_init[cls] = {k: self.names[k] for k in bound if k in self.names}
        return self.facts

    def reset_self(self, kept: dict[str, Val] | None) -> None:
        """Forget every ``self.…`` name, then bind ``kept`` (at most :data:`_MAX_KEPT`)."""
        self.names.pop("self", None)
        self.forget_below("self")
        for key, val in (kept or {}).items():
            self.names[key] = val
            for prefix in dotted_prefixes(key):
                self.below.setdefault(prefix, set()).add(key)

    # ------------------------------------------------------------------ statements

    def exec_block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.exec_stmt(stmt)

    def exec_stmt(self, stmt: ast.stmt) -> None:
        if self.nesting >= MAX_NESTING:
            return  # issue 21: see MAX_NESTING
        self.nesting += 1
        self._exec_stmt(stmt)  # as eval: an exception ends the walk
        self.nesting -= 1

    def _exec_stmt(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self.do_import(stmt)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.in_decorator = True
            self.decorate(stmt.decorator_list)
            if isinstance(stmt, ast.ClassDef):
                for member in stmt.body:
                    if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.decorate(member.decorator_list)
            self.in_decorator = False
        elif isinstance(stmt, ast.Assign):
            val = self.eval(stmt.value)
            for target in stmt.targets:
                self.bind(target, val, stmt.value)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.bind(stmt.target, self.eval(stmt.value), stmt.value)
        elif isinstance(stmt, ast.AugAssign):
            val = self.eval(stmt.value)
            old = self.eval(stmt.target)
            self.bind(stmt.target, union([old, val]), stmt.value)
        elif isinstance(stmt, ast.Expr):
            self.eval(stmt.value)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.exec_for(stmt)
        elif isinstance(stmt, ast.While):
            self.eval(stmt.test)
            self.loops.append((frozenset(), False, stmt))
            self.exec_block(stmt.body)
            self.loops.pop()
            self.exec_block(stmt.orelse)
        elif isinstance(stmt, ast.If):
            exec_if(self, stmt)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                val = self.eval(item.context_expr)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, val, item.context_expr)
            self.exec_block(stmt.body)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            self.exec_block(stmt.body)  # type: ignore[attr-defined]
            # `try: from torch.amp import GradScaler` / `except ImportError: from
            # torch.cuda.amp import GradScaler`: the code after it sees the try's import,
            # the one that succeeds on the torch it runs on (issue 17, the held-out
            # corpus: ignite's tests read the fallback's deprecated GradScaler)
            body: list[ast.stmt] = stmt.body  # type: ignore[attr-defined]
            tried = {n: self.aliases[n] for n in imported(body) if n in self.aliases}
            for handler in stmt.handlers:  # type: ignore[attr-defined]
                self.exec_block(handler.body)
            self.aliases.update(tried)
            self.exec_block(stmt.orelse)  # type: ignore[attr-defined]
            self.exec_block(stmt.finalbody)  # type: ignore[attr-defined]
        elif isinstance(stmt, ast.Return):
            val = self.eval(stmt.value) if stmt.value is not None else UNKNOWN
            if self.returns:
                self.returns[-1].append(val)
        elif isinstance(stmt, ast.Match):
            self.eval(stmt.subject)
            for case in stmt.cases:
                self.exec_block(case.body)
        else:
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.expr):
                    self.eval(child)
                elif isinstance(child, ast.stmt):
                    self.exec_stmt(child)

    def decided(self, test: ast.expr) -> bool | None:
        """Whether an ``if`` whose test is a flag (``if new_data:``, ``if not x:``) holding
        a constant takes its arm (None: both arms run); in a loop, only a flag no loop around
        it sets, or a later pass could take the other arm (docs/lint.md; vissl's tests)."""
        negated = False
        while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, not negated
        if not isinstance(test, ast.Name):
            return None
        if any(test.id in names or test.id in assigned_in(loop) for names, _, loop in self.loops):
            return None
        val = self.peek(test)
        if not val.has_const:
            return None
        if not isinstance(val.const, bool) and val.const is not None:
            return None
        return bool(val.const) != negated

    def decorate(self, decorators: list[ast.expr]) -> None:
        for deco in decorators:
            self.eval(deco)
            # `@custom_fwd` imported by name: applying it warns (a dotted
            # `@torch.cuda.amp.custom_fwd` and a call `@custom_fwd(...)` are seen on
            # their own, on_path / eval_call)
            if isinstance(deco, ast.Name):
                path = self.resolve(deco)
                if path in N.DEPRECATED_AMP:
                    self.event("amp_deprecated", deco, data={"path": path})

    def exec_for(self, stmt: ast.For | ast.AsyncFor) -> None:
        it = self.eval(stmt.iter)
        names = frozenset(n.id for n in ast.walk(stmt.target) if isinstance(n, ast.Name))
        epoch = any("epoch" in n.lower() or n.lower() == "ep" for n in names)
        if epoch and isinstance(stmt.target, ast.Name):
            self.event("epoch_loop", stmt, data={"var": stmt.target.id})
        elem = Val(tags=it.tags - {"RANDOM"}, kind="loopvar")
        self.bind(stmt.target, elem, stmt.target)
        self.loops.append((names, epoch, stmt))
        self.exec_block(stmt.body)
        self.loops.pop()
        self.exec_block(stmt.orelse)

    def bind(self, target: ast.AST, val: Val, value_node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            elts = None
            if isinstance(value_node, (ast.Tuple, ast.List)) and len(value_node.elts) == len(
                target.elts
            ):
                elts = [self.peek(e) for e in value_node.elts]
            for i, sub in enumerate(target.elts):
                self.bind(sub, elts[i] if elts else Val(tags=val.tags), value_node)
            return
        if isinstance(target, ast.Starred):
            self.bind(target.value, Val(tags=val.tags), value_node)
            return
        if isinstance(target, ast.Subscript):
            self.env_assign(target, val, value_node)
            self.eval(target.value)
            return
        key = dotted_key(target)
        if key is not None and "HALF" in val.tags and isinstance(value_node, ast.Call):
            # model = Net().cuda().half(): the float16 model gets its name here
            self.event(
                "half",
                value_node,
                data={
                    "key": key,
                    "dtype": "fp16",
                    "module": False,
                    "text": f"{key} = {unparse(value_node)}",
                },
            )
        if key is not None:
            if isinstance(value_node, ast.Call):
                self.name_dtyped(key, value_node)
            if val.kind in ("dp", "ddp") and val.node is value_node:
                for ev in reversed(self.facts.events):
                    if ev.node is value_node and ev.kind == val.kind:
                        ev.data["bound_to"] = key
                        break
            elif val.kind in ("dp", "ddp") and isinstance(value_node, (ast.Name, ast.Attribute)):
                val = unwrapped_alias(self.facts, value_node, val)
            self.names[key] = val
            # a new `self.model` replaces what was known about `self.model.xyz`
            self.forget_below(key)
            if "." in key:
                for prefix in dotted_prefixes(key):
                    self.below.setdefault(prefix, set()).add(key)

    def forget_below(self, key: str) -> None:
        """Forget the dotted names bound below ``key`` (each is forgotten once per
        binding, so a file's bindings cost linear time; issue 21: 1 MB took 47 s)."""
        for old in self.below.pop(key, ()):
            self.names.pop(old, None)
            for prefix in dotted_prefixes(old):
                if prefix != key:
                    others = self.below.get(prefix)
                    if others is not None:
                        others.discard(old)

    def peek(self, node: ast.expr) -> Val:
        """The value of an expression already evaluated (no new events)."""
        if isinstance(node, ast.Constant):
            return const(node.value, node)
        key = dotted_key(node)
        if key is not None and key in self.names:
            return self.names[key]
        return self.cache.get(node, UNKNOWN)

    # ------------------------------------------------------------------ inlining

    def inline(
        self,
        fn: ast.FunctionDef | ast.AsyncFunctionDef,
        args: list[Val],
        kwargs: list[tuple[str, Val]],
        *,
        skip_self: bool = False,
        at: ast.AST | None = None,
    ) -> Val:
        count = self.inlined.get(fn, 0)
        if count >= self.max_inline or self.depth >= _MAX_DEPTH:
            self.replay(fn, at)
            # a body walked already with these arguments returns what it returned then
            # (`first = make(); second = make()`), without its walk
            for before, before_kw, result in self.walked.get(fn, ()):
                if before == args and before_kw == kwargs:
                    return result
            return UNKNOWN
        self.inlined[fn] = count + 1
        params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
        if skip_self and params:
            params = params[1:]
        saved: dict[str, Val | None] = {}
        bound: dict[str, Val] = {p: UNKNOWN for p in params}
        bound.update({a.arg: UNKNOWN for a in fn.args.kwonlyargs})
        for name, val in zip(params, args, strict=False):
            bound[name] = val
        for name, val in kwargs:
            if name in bound:
                bound[name] = val
        for name, val in bound.items():
            saved[name] = self.names.get(name)
            self.names[name] = val
        start = self.seq
        self.depth += 1
        self.returns.append([])
        loops, self.loops = self.loops, []
        try:
            self.exec_block(fn.body)
        finally:
            self.loops = loops
            self.depth -= 1
            results = self.returns.pop()
            for name, old in saved.items():
                if old is None:
                    self.names.pop(name, None)
                else:
                    self.names[name] = old
        result = results[0] if len(results) == 1 else union(results) if results else UNKNOWN
        self.walked.setdefault(fn, []).append((args, kwargs, result))
        setup = self.facts.setup_since(start)
        if setup is not None:
            earlier = self.setups.get(fn)
            self.setups[fn] = setup if earlier is None else earlier | setup
        return result

    def replay(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, at: ast.AST | None) -> None:
        """A call whose body is not walked again (the bound) still sets up, in this
        process, what an earlier walk of it did: ``_dist_init(rank)``'s ``set_device`` in
        a third rank (fairscale's tests: each placement after it was a false error)."""
        setup = self.setups.get(fn)
        if setup is None:
            return
        node = at if at is not None else fn
        via = f"{fn.name}()"
        if setup.sets_device:
            self.event("set_device_via", node, UNKNOWN, {"via": via})
            self.current[self.proc] = "?"
        elif setup.opaque:
            self.event("opaque_setup", node, data={"what": via, "indirect": True})
        if setup.inits:
            backend = next(iter(setup.backends)) if len(setup.backends) == 1 else None
            self.event("init_pg_via", node, data={"backend": backend, "via": via})
