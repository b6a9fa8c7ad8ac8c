"""Expression evaluation for the walker: imports, names, environment reads and writes.

:class:`ExprEval` turns an expression into a :class:`~gpudiag.lint.values.Val`
and records the events expressions cause; call semantics live in
:mod:`gpudiag.lint.calls`.
"""

from __future__ import annotations

import ast

from gpudiag.lint import names as N
from gpudiag.lint.facts import Event, Facts
from gpudiag.lint.folding import MAX_CONST_CHARS, as_text, fold
from gpudiag.lint.syntax import MAX_DOTTED_PARTS, dotted_key, unparse
from gpudiag.lint.values import (
    GLOBAL_RANK_VARS,
    LOCAL_RANK_VARS,
    UNKNOWN,
    WEAK_TAGS,
    Val,
    const,
    parse_device_text,
    union,
)

_ENV_PATHS = frozenset({"os.environ"})
#: How deep the walker follows nested expressions and statements, together (each level
#: a few Python frames). Python's parser builds trees thousands of levels deep (a
#: 400-term ``a+a+…``, a 400-attribute chain) and the walk is recursive: past this
#: depth a value is unknown and a statement is not read, so the walk stays well under
#: Python's default recursion limit of 1000 frames (issue 21; docs/lint.md).
MAX_NESTING = 100
#: A list, tuple or set literal of more items is not read as a constant (``device_ids``
#: has one entry per GPU): rules look at a constant list once per use, and one name
#: bound to a list of 100,000 ids can be used thousands of times (issue 21).
MAX_CONST_ITEMS = 64
_GETENV = frozenset({"os.getenv", "os.environ.get"})


#: A copy of the environment (``dict(os.environ)``, ``os.environ.copy()``): reading a
#: variable from it reads the variable (issue 17); writing to it sets nothing.
ENVIRON = Val(kind="environ")


def is_environ(val: Val) -> bool:
    """``os.environ`` itself (bound to another name) or a copy of it."""
    return val.kind == "environ" or (val.kind == "path" and val.const in _ENV_PATHS)


def env_tags(var: str) -> frozenset[str]:
    """Tags of a value read from environment variable ``var``."""
    tags = {f"env:{var}"}
    if var in GLOBAL_RANK_VARS:
        tags.add("RANK")
    if var in LOCAL_RANK_VARS:
        tags.add("LOCAL")
    return frozenset(tags)


class ExprEval:
    """State shared by the walker and expression evaluation."""

    facts: Facts
    funcs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.names: dict[str, Val] = {}
        self.proc = "main"
        self.seq = 0
        #: (loop variable names, is an epoch loop, the loop node)
        self.loops: list[tuple[frozenset[str], bool, ast.AST]] = []
        self.cache: dict[ast.AST, Val] = {}
        #: expressions and statements being walked, one inside the other (MAX_NESTING)
        self.nesting = 0

    # ------------------------------------------------------------------ events

    def event(
        self,
        kind: str,
        node: ast.AST,
        val: Val | None = None,
        data: dict[str, object] | None = None,
    ) -> Event:
        self.seq += 1
        ev = Event(self.seq, kind, node, self.proc, val, data or {})
        self.facts.add(ev)
        return ev

    # ------------------------------------------------------------------ imports

    def do_import(self, stmt: ast.Import | ast.ImportFrom) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    self.aliases[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    self.aliases[root] = root
                if alias.name == "torch" or alias.name.startswith("torch."):
                    self.event("import_torch", stmt)
            return
        if stmt.level or stmt.module is None:
            return
        for alias in stmt.names:
            full = f"{stmt.module}.{alias.name}"
            self.aliases[alias.asname or alias.name] = full
            self.on_import(full, stmt)
        if stmt.module == "torch" or stmt.module.startswith("torch."):
            self.event("import_torch", stmt)

    def resolve(self, node: ast.AST) -> str | None:
        """The imported dotted path an expression names, or None. Iterative (issue 21)."""
        attrs: list[str] = []
        while isinstance(node, ast.Attribute):
            if len(attrs) >= MAX_DOTTED_PARTS:
                return None
            attrs.append(node.attr)
            node = node.value
        # a call (mp.get_context("spawn").Process) or anything else: no module path
        if not isinstance(node, ast.Name) or node.id in self.names:
            return None
        # `os.getenv(…)` without `import os` still reads the environment (NVIDIA's BERT)
        base = self.aliases.get(node.id) or ("os" if node.id == "os" else None)
        return None if base is None else ".".join([base, *reversed(attrs)])

    def eval(self, node: ast.expr | None) -> Val:
        if node is None or self.nesting >= MAX_NESTING:
            return UNKNOWN
        kind = type(node)
        if kind is ast.Name:  # the leaves, most of what is read: no dispatch
            val = self.eval_name(node)  # type: ignore[arg-type]
        elif kind is ast.Constant:
            val = const(node.value, node)  # type: ignore[attr-defined]
        else:  # no try/finally: an exception ends the file's walk (source.py says so)
            self.nesting += 1
            val = self._eval(node)
            self.nesting -= 1
        self.cache[node] = val
        return val

    def eval_name(self, node: ast.Name) -> Val:
        if node.id in self.names:
            return self.names[node.id]
        path = self.aliases.get(node.id)
        if path is not None:
            return Val(kind="path", const=path, has_const=True, node=node)
        if node.id in self.funcs:
            return Val(kind="func", const=node.id, has_const=True, node=node)
        return UNKNOWN

    def _eval(self, node: ast.expr) -> Val:
        """Any expression but a name or a constant (:meth:`eval` reads those)."""
        if isinstance(node, ast.Attribute):
            return self.eval_attribute(node)
        if isinstance(node, ast.Subscript):
            return self.eval_subscript(node)
        if isinstance(node, ast.Call):
            return self.eval_call(node)
        if isinstance(node, ast.JoinedStr):
            return self.eval_fstring(node)
        if isinstance(node, ast.BinOp):
            return self.eval_binop(node)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            vals = [self.eval(e) for e in node.elts]
            if len(vals) > MAX_CONST_ITEMS:
                return Val(tags=union(vals).tags, node=node, extra=tuple(vals[:MAX_CONST_ITEMS]))
            if all(v.has_const for v in vals):
                return Val(
                    const=[v.const for v in vals],
                    has_const=True,
                    tags=union(vals).tags,
                    node=node,
                    extra=tuple(vals),
                )
            return Val(tags=union(vals).tags, node=node, extra=tuple(vals))
        if isinstance(node, ast.Dict):
            keys = [self.eval(k) for k in node.keys if k is not None]
            vals = [self.eval(v) for v in node.values]
            found = self.dict_value(node, vals)
            if found is not None:
                return found
            sd = [v for v in vals if v.kind == "state_dict"]
            if sd:
                kinds = {v.extra for v in sd}
                for which in (("wrapped",), ("bare",), ("other",)):
                    if which in kinds:
                        return Val(kind="state_dict", extra=which)
            if any(k is None and is_environ(v) for k, v in zip(node.keys, vals, strict=False)):
                return ENVIRON  # {**os.environ, ...}: a copy of the environment
            return Val(tags=union(keys + vals).tags)
        if isinstance(node, ast.IfExp):
            self.eval(node.test)
            a, b = self.eval(node.body), self.eval(node.orelse)
            return union([a, b])
        if isinstance(node, ast.BoolOp):
            return union([self.eval(v) for v in node.values])
        if isinstance(node, ast.Compare):
            left = self.eval(node.left)
            for op, c in zip(node.ops, node.comparators, strict=False):
                right = self.eval(c)
                # 'LOCAL_RANK' not in os.environ reads it (mmseg's tools/train.py; InternVL)
                env = self.resolve(c) in _ENV_PATHS or is_environ(right)
                if env and isinstance(op, (ast.In, ast.NotIn)) and isinstance(left.const, str):
                    self.env_read(left.const)
            return UNKNOWN
        if isinstance(node, ast.UnaryOp):
            inner = self.eval(node.operand)
            if (
                isinstance(node.op, ast.USub)
                and isinstance(inner.const, (int, float))
                and not isinstance(inner.const, bool)
            ):
                return const(-inner.const, node)
            return Val(tags=inner.tags)
        if isinstance(node, ast.NamedExpr):
            val = self.eval(node.value)
            self.names[node.target.id] = val
            return val
        if isinstance(node, ast.Lambda):
            return UNKNOWN
        vals = [self.eval(c) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]
        return Val(tags=union(vals).tags)

    def eval_attribute(self, node: ast.Attribute) -> Val:
        key = dotted_key(node)
        if key is not None and key in self.names:
            return self.names[key]
        path = self.resolve(node)
        if path is not None:
            self.on_path(path, node)
            if path.startswith("torch.") and path.split(".")[-1] in _DTYPES:
                return Val(kind="dtype", const=_DTYPES[path.split(".")[-1]], has_const=True)
            return Val(kind="path", const=path, has_const=True, node=node)
        base = self.eval(node.value)
        if base.kind in ("dp", "ddp"):
            self.wrapper_attr(base, node.attr, node)
        if node.attr == "module" and base.kind in ("dp", "ddp"):
            return Val(kind="module", device=base.device, node=node)
        if node.attr == "sampler" and base.kind == "loader" and base.extra:
            inner = base.extra[0]
            return inner if isinstance(inner, Val) else UNKNOWN
        if node.attr in ("local_rank", "local_process_index", "local_rank_id"):
            return Val(tags=frozenset({"LOCAL"}))
        return Val(tags=base.tags & WEAK_TAGS)

    def eval_subscript(self, node: ast.Subscript) -> Val:
        direct = self.resolve(node.value) in _ENV_PATHS
        base = UNKNOWN if direct else self.eval(node.value)
        index = self.eval(node.slice)
        if direct or is_environ(base):
            # os.environ["RANK"], or a copy's: env = dict(os.environ); env["RANK"] (issue 17)
            if index.has_const and isinstance(index.const, str):
                return Val(tags=self.env_read(index.const), node=node)
            return UNKNOWN
        if base.kind == "loaded":
            return Val(kind="loaded", node=node)
        if base.has_const and isinstance(base.const, (list, tuple)) and index.has_const:
            i = index.const
            if isinstance(i, int) and -len(base.const) <= i < len(base.const):
                return const(base.const[i], node)
        return Val(tags=base.tags | (index.tags & WEAK_TAGS))

    def eval_fstring(self, node: ast.JoinedStr) -> Val:
        parts: list[str] = []
        vals: list[Val] = []
        known = True
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                parts.append(value.value)
            elif isinstance(value, ast.FormattedValue):
                inner = self.eval(value.value)
                vals.append(inner)
                shown = as_text(inner.const) if inner.has_const else None
                if shown is not None and value.format_spec is None:
                    parts.append(shown)
                else:
                    parts.append("{}")
                    known = False
        if known and sum(len(p) for p in parts) > MAX_CONST_CHARS:
            return Val(tags=union(vals).tags, node=node)
        text = "".join(parts)
        if known:
            return const(text, node)
        tags = union(vals).tags
        dev = parse_device_text(text.replace("{}", "0")) if "{}" in text else None
        if dev is not None:
            dev = (dev[0], "?")
        val = Val(tags=tags, device=dev, node=node)
        if dev is not None and dev[0] == "cuda" and tags & {"RANK", "LOCAL", "SPAWN"}:
            self.event("device_use", node, val, {"where": f"the device string {unparse(node)}"})
        return val

    def eval_binop(self, node: ast.BinOp) -> Val:
        left, right = self.eval(node.left), self.eval(node.right)
        if isinstance(node.op, ast.Mod) and left.has_const and isinstance(left.const, str):
            # "cuda:%d" % rank
            if left.const.startswith("cuda"):
                return Val(tags=right.tags, device=("cuda", "?"), node=node)
            return Val(tags=right.tags)
        if left.has_const and right.has_const:
            try:
                value = fold(node.op, left.const, right.const)
            except Exception:  # an expression the script would fail on itself
                value = None
            if value is not None:
                return const(value, node)
        tags = left.tags | right.tags
        if isinstance(node.op, ast.Mod):
            # rank % torch.cuda.device_count(): a node-local index
            tags = (tags - {"RANK"}) | {"LOCAL"} if tags & {"RANK", "LOCAL"} else tags
        if isinstance(node.op, ast.FloorDiv):
            tags = tags - {"RANK", "LOCAL", "SPAWN"}
        return Val(tags=tags, node=node)

    def holds_nothing(self, method: ast.expr) -> bool:
        """``nn.KLDivLoss(…).cuda``: the receiver is built from a torch.nn module with no
        parameter or buffer (:data:`gpudiag.lint.names.HOLD_NOTHING`)."""
        made = method.value if isinstance(method, ast.Attribute) else None
        if not isinstance(made, ast.Call) or made.args:
            return False
        weighted = any(k.arg in ("weight", "pos_weight") or k.arg is None for k in made.keywords)
        return not weighted and self.resolve(made.func) in N.HOLD_NOTHING

    def env_read(self, var: str) -> frozenset[str]:
        tags = env_tags(var)
        if tags & {"RANK", "LOCAL"}:
            self.facts.reads_launcher_rank = True
        if "LOCAL" in tags:
            self.facts.reads_local_rank_env = True
            self.facts.harness_reads_local_rank = True
        return tags

    # ------------------------------------------------------------------ env writes

    def env_assign(self, target: ast.Subscript, val: Val, value_node: ast.AST) -> None:
        if self.resolve(target.value) not in _ENV_PATHS:
            return
        index = self.eval(target.slice)
        if index.has_const and isinstance(index.const, str):
            self.env_set(index.const, val, target, value_node)

    def env_set(self, var: str, val: Val, node: ast.AST, value_node: ast.AST | None) -> None:
        text = as_text(val.const) if val.has_const and isinstance(val.const, (str, int)) else None
        self.event("env_set", node, val, {"var": var, "value": text})

    # ------------------------------------------------------------------ hooks

    def eval_call(self, node: ast.Call) -> Val:
        raise NotImplementedError

    def wrapper_attr(self, obj: Val, attr: str, node: ast.AST) -> None:
        """An attribute read through a DataParallel/DDP wrapper."""

    def dict_value(self, node: ast.Dict, vals: list[Val]) -> Val | None:
        """A dict literal's value when a subclass knows it better (a checkpoint), or None."""
        return None

    in_decorator = False

    def on_import(self, path: str, node: ast.AST) -> None:
        """A name imported with ``from … import``."""

    def on_path(self, path: str, node: ast.AST) -> None:
        """A torch path is mentioned (a decorator, a reference)."""


_DTYPES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
}
