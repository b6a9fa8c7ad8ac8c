"""The walker, linked to the rest of the project.

:class:`LinkedWalker` walks one file as :class:`~gpudiag.lint.loopflow.FlowWalker` does, and
resolves relative imports, and each call to an imported name, through
  :class:`~gpudiag.lint.project.Project`: a project function, class or method that sets
  the device, reads ``LOCAL_RANK``, calls ``set_epoch`` or ``init_process_group`` adds
  ``set_device_via`` / ``set_epoch_via`` / ``init_pg_via`` events at the call (issue 17
  item 1); a call into a package it cannot read whose name says it sets the job up
  (``init_dist``) adds an ``opaque_setup`` event, which makes the rules that depend on
  it info at most (item 2). A class of the file deriving from a project class gets what
  what any method of its project bases does before each of its uncalled methods (tests).
"""

from __future__ import annotations

import ast
import sys

from gpudiag.lint import gated, shown
from gpudiag.lint import summary as S
from gpudiag.lint.facts import Facts
from gpudiag.lint.loopflow import FlowWalker
from gpudiag.lint.project import UNRESOLVED, Project, Resolution, Sym
from gpudiag.lint.single_node import is_test_path
from gpudiag.lint.summary import import_aliases
from gpudiag.lint.syntax import dotted_name
from gpudiag.lint.values import UNKNOWN, Val, rank_kind

_STDLIB = frozenset(sys.stdlib_module_names)
#: Frameworks that set devices and ranks up themselves, and whose launchers differ from
#: torchrun (issue 17: deepspeed's launcher passes --local_rank).
FRAMEWORKS = frozenset(
    """deepspeed accelerate lightning pytorch_lightning lightning_fabric mmengine mmcv
    colossalai ignite composer""".split()  # noqa: SIM905
)


class LinkedWalker(FlowWalker):
    """One module's walk, with the project around it (``project`` None: no other module)."""

    def __init__(
        self,
        tree: ast.Module,
        lines: list[str],
        project: Project | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(tree, lines)
        self.project = project
        self.path = path
        self.class_stack: list[ast.ClassDef | None] = []
        #: each method of the file -> its class: the walker's survey, the class body's own
        direct = {id(member) for cls in set(self.owner.values()) for member in cls.body}
        self.owner = {fn: cls for fn, cls in self.owner.items() if id(fn) in direct}
        #: the modules the file imports (``a.b``; ``.x`` relative), in order
        self.imported: list[str] = []
        self._bases: dict[ast.ClassDef, list[Resolution | ast.ClassDef]] = {}

    # ------------------------------------------------------------------ imports

    def do_import(self, stmt: ast.Import | ast.ImportFrom) -> None:
        found = import_aliases(stmt)
        if isinstance(stmt, ast.ImportFrom):
            module = "." * stmt.level + (stmt.module or "")
            self.imported.append(module)
            self.imported.extend(t for _, t in found)  # `from pkg import module`
        else:
            self.imported.extend(alias.name for alias in stmt.names)
        for _, target in found:
            top = target.split(".")[0]
            if top in FRAMEWORKS and not (
                self.project is not None
                and self.path is not None
                and self.project.is_module(self.path, top)
            ):
                self.facts.frameworks.add(top)  # not when linting the framework itself
        if isinstance(stmt, ast.ImportFrom) and stmt.level:
            # `from .utils import setup`: bound to ".utils.setup", found from this file
            for name, target in found:
                if name != "*":
                    self.aliases[name] = target
            return
        super().do_import(stmt)

    def target(self, path: str) -> Resolution:
        """What an imported dotted path names in the project (None: torch, stdlib…)."""
        if path.startswith("torch.") or path == "torch":
            return None
        if self.project is None or self.path is None:
            top = path.split(".")[0]
            if top in S.INERT_PACKAGES or top in _STDLIB:
                return None
            return UNRESOLVED
        try:
            return self.project.resolve(self.path, path)
        except RecursionError:  # deep in a deeply nested file's walk: as unreadable
            return UNRESOLVED

    def run(self) -> Facts:
        facts = super().run()
        # asked by LINT-LOCAL-RANK-ARG, and by LINT-DEVICE-FROM-GLOBAL-RANK in a test
        # module (single_node.py: a harness that reads LOCAL_RANK means to span nodes)
        for_option = facts.of("local_rank_arg") and not facts.reads_local_rank_env
        if for_option or (
            not facts.harness_reads_local_rank
            and any(
                e.val is not None and rank_kind(e.val) == "global" for e in facts.of("device_use")
            )
        ):
            self.import_time_reads()
        return facts

    def import_time_reads(self) -> None:
        """LOCAL_RANK read at module level by a project module the file imports (yolov5's
        train.py: ``LOCAL_RANK = int(os.getenv("LOCAL_RANK", -1))``): importing it reads
        it. Looked for only when a rule needs it: it reads the modules imported."""
        if self.project is None or self.path is None:
            return
        for dotted in dict.fromkeys(self.imported):
            if not dotted.strip("."):
                continue
            caps = self.project.module_top(self.path, dotted)
            if S.LOCAL_RANK_ENV in caps:
                self.facts.reads_local_rank_env = True
                if is_test_path(dotted.replace(".", "/")):
                    self.facts.harness_reads_local_rank = True
                    return

    # ------------------------------------------------------------------ calls

    def call_path(self, path: str, node: ast.Call, args: list[Val], kw: dict[str, Val]) -> Val:
        found = self.target(path)
        out = super().call_path(path, node, args, kw)
        if isinstance(found, Sym):
            self.apply(found, node)
            if found.kind == "class":
                return Val(kind="project", node=node, extra=(found,))
        elif found is UNRESOLVED:
            self.opaque(path, node)
            if any(v.kind in ("loader", "sampler") for v in [*args, *kw.values()]):
                # a sampler or DataLoader handed to code lint cannot read: it may set_epoch
                self.event("opaque_sampler_use", node, data={"what": path.lstrip(".")})
        return out

    def eval_call(self, node: ast.Call) -> Val:
        # a call of a call's result only (getattr(...)(...)): rare, and every call passes here
        picked = _picked_by_name(node.func) if type(node.func) is ast.Call else None
        if picked is not None and S.SETUP_NAME.search(picked[1]):
            # getattr(common_utils, 'init_dist_%s' % args.launcher)(...): which function
            # runs is chosen at run time (OpenPCDet's tools/train.py; issue 17, a
            # thirteenth held-out corpus: a false error that no rank sets its device)
            what = shown.text(f"getattr({ast.unparse(picked[0])}, '{picked[1]}…')()")
            self.event("opaque_setup", node, data={"what": what, "picked": True})
        return super().eval_call(node)

    def call_name(
        self, name: str, node: ast.Call, args: list[Val], kwargs: list[tuple[str, Val]]
    ) -> Val:
        cls = self.classes.get(name) if name not in self.funcs else None
        if cls is not None and not _defines(cls, "__init__"):
            # a class of this file without __init__: its bases' runs
            self.from_bases(cls, ("__init__",), node)
        return super().call_name(name, node, args, kwargs)

    def call_method(
        self,
        meth: str,
        obj: Val,
        obj_node: ast.expr,
        node: ast.Call,
        args: list[Val],
        kw: dict[str, Val],
    ) -> Val:
        cls = self.class_stack[-1] if self.class_stack else None
        if obj.kind == "project" and obj.extra and isinstance(obj.extra[0], Sym):
            if self.project is not None:
                found = self.project.method(obj.extra[0], meth)
                if found is not None:
                    self.apply(found, node)
        elif cls is not None and (
            _is_super(obj_node)
            or (dotted_name(obj_node) in ("self", "cls") and not _defines(cls, meth))
        ):
            self.from_bases(cls, (meth,), node)
        return super().call_method(meth, obj, obj_node, node, args, kw)

    def apply(self, sym: Sym, node: ast.AST) -> None:
        """The events of a call to a project function, class or method."""
        assert self.project is not None
        unpassed: frozenset[str] = frozenset()
        try:
            # a process group started only under `if flag:` for a flag this call leaves
            # off does not count (gpudiag/lint/gated.py)
            unpassed = gated.unpassed(node, self.project.gates(sym))
            caps = self.project.caps(sym, unpassed=unpassed)
        except RecursionError:  # deep in a deeply nested file's walk: as unreadable
            caps = frozenset({S.OPAQUE_SETUP})
        self.apply_caps(caps, sym, node, unpassed)

    def apply_caps(
        self, caps: frozenset[str], sym: Sym, node: ast.AST, unpassed: frozenset[str] = frozenset()
    ) -> None:
        if not caps or self.project is None:
            return
        via = sym.shown
        if S.SET_DEVICE in caps:
            self.event("set_device_via", node, UNKNOWN, {"via": via})
            self.current[self.proc] = "?"
        elif S.OPAQUE_SETUP in caps:
            self.event("opaque_setup", node, data={"what": via, "indirect": True})
        if S.LOCAL_RANK_ENV in caps:
            self.facts.reads_local_rank_env = True
            self.facts.reads_launcher_rank = True
            if is_test_path(sym.path):
                self.facts.harness_reads_local_rank = True
        if S.RANK_ENV in caps:
            self.facts.reads_launcher_rank = True
        if S.SET_EPOCH in caps:
            self.event("set_epoch_via", node, UNKNOWN, {"via": via})
        if S.INIT_PG in caps:
            backends = self.project.backends(sym, unpassed)
            backend = next(iter(backends)) if len(backends) == 1 else None
            self.event("init_pg_via", node, data={"backend": backend, "via": via})
        if S.DEEPSPEED in caps:
            self.facts.frameworks.add("deepspeed")

    def opaque(self, path: str, node: ast.AST) -> None:
        """A call lint cannot follow: noted when its name says it may set the job up."""
        if S.SETUP_NAME.search(path.rsplit(".", 1)[-1]):
            self.event("opaque_setup", node, data={"what": path.lstrip(".") + "()"})

    # ------------------------------------------------------------------ classes

    def bases_of(self, cls: ast.ClassDef) -> list[Resolution | ast.ClassDef]:
        """A class's bases: a class of this file, a project class, UNRESOLVED or None."""
        found = self._bases.get(cls)
        if found is not None:
            return found
        out: list[Resolution | ast.ClassDef] = []
        self._bases[cls] = out  # a class that derives from itself ends here
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in self.classes:
                out.append(self.classes[base.id])
                continue
            path = self.resolve(base)
            out.append(self.target(path) if path is not None else None)
        return out

    def from_bases(
        self, cls: ast.ClassDef, names: tuple[str, ...] | None, node: ast.AST, depth: int = 0
    ) -> None:
        """Apply what ``names`` (methods; None: any method) of ``cls``'s project bases do."""
        if depth > 8:
            return
        for base in self.bases_of(cls):
            if isinstance(base, ast.ClassDef):
                if names is None or not any(_defines(base, n) for n in names):
                    self.from_bases(base, names, node, depth + 1)
            elif isinstance(base, Sym) and base.kind == "class" and self.project is not None:
                if names is None:
                    self.apply_caps(self.project.class_caps(base), base, node)
                    continue
                for name in names:
                    meth = self.project.method(base, name)
                    if meth is not None:
                        self.apply(meth, node)
                if self.project.opaque_bases(base):
                    self.event("opaque_setup", node, data={"what": base.shown, "indirect": True})
            elif base is UNRESOLVED:
                self.event("opaque_setup", node, data={"what": "a base class"})

    def inline(
        self,
        fn: ast.FunctionDef | ast.AsyncFunctionDef,
        args: list[Val],
        kwargs: list[tuple[str, Val]],
        *,
        skip_self: bool = False,
        at: ast.AST | None = None,
    ) -> Val:
        cls = self.owner.get(fn)
        self.class_stack.append(cls)
        try:
            if self.depth == 0 and cls is not None and self.proc.startswith("def:"):
                # a test method: its project bases' set-up (any of their methods) ran first
                self.from_bases(cls, None, fn)
            return super().inline(fn, args, kwargs, skip_self=skip_self, at=at)
        finally:
            self.class_stack.pop()


def _defines(cls: ast.ClassDef, name: str) -> bool:
    return any(
        isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == name for m in cls.body
    )


def _is_super(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


def _picked_by_name(func: ast.expr) -> tuple[ast.expr, str] | None:
    """``(obj, prefix)`` of ``getattr(obj, <name made at run time>)``: the constant start
    of the name (``'init_dist_%s' % x``, ``f"init_dist_{x}"``, ``"init_" + x``,
    ``"init_{}".format(x)``), or None for any other callee."""
    if not (
        isinstance(func, ast.Call)
        and isinstance(func.func, ast.Name)
        and func.func.id == "getattr"
        and len(func.args) >= 2
    ):
        return None
    name = func.args[1]
    if isinstance(name, ast.Constant):
        return None  # a fixed name: an attribute like any other
    head: ast.expr | None = None
    if isinstance(name, ast.JoinedStr) and name.values:
        head = name.values[0]
    elif isinstance(name, ast.BinOp) and isinstance(name.op, (ast.Mod, ast.Add)):
        head = name.left
    elif (
        isinstance(name, ast.Call)
        and isinstance(name.func, ast.Attribute)
        and name.func.attr == "format"
    ):
        head = name.func.value
    if not (isinstance(head, ast.Constant) and isinstance(head.value, str)):
        return None
    prefix = head.value.split("%")[0].split("{")[0]
    return (func.args[0], prefix) if prefix else None
