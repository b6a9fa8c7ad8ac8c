"""The walker, linked to the rest of the project and to the loops around each call.

:class:`LinkedWalker` walks one file as :class:`~gpudiag.lint.walker.Walker` does, and:

* resolves relative imports, and each call to an imported name, through
  :class:`~gpudiag.lint.project.Project`: a project function, class or method that sets
  the device, reads ``LOCAL_RANK``, calls ``set_epoch`` or ``init_process_group`` adds
  ``set_device_via`` / ``set_epoch_via`` / ``init_pg_via`` events at the call (issue 17
  item 1); a call into a package it cannot read whose name says it sets the job up
  (``init_dist``) adds an ``opaque_setup`` event, which makes the rules that depend on
  it info at most (item 2). A class of the file deriving from a project class gets what
  its bases' ``__init__``/``setUp`` do before each of its methods;
* keeps the loops around a call when it follows the call into a function, so an epoch
  loop is recognised by what it does, not by its variable's name: a loop around the
  iteration of a DataLoader whose sampler is a DistributedSampler (``loader_loop``).
"""

from __future__ import annotations

import ast

from gpudiag.lint import summary as S
from gpudiag.lint.exprs import ENVIRON
from gpudiag.lint.facts import Facts
from gpudiag.lint.project import UNRESOLVED, Project, Resolution, Sym
from gpudiag.lint.summary import import_aliases
from gpudiag.lint.syntax import dotted_name, keyword, statements
from gpudiag.lint.values import UNKNOWN, Val, union
from gpudiag.lint.walker import Walker

#: Frameworks that set devices and ranks up themselves, and whose launchers differ from
#: torchrun (issue 17: deepspeed's launcher passes --local_rank).
FRAMEWORKS = frozenset(
    """deepspeed accelerate lightning pytorch_lightning lightning_fabric mmengine mmcv
    colossalai ignite composer""".split()  # noqa: SIM905
)
#: torch calls that work on the current CUDA device when given none (torch 2.13
#: torch/cuda/__init__.py synchronize, torch/cuda/memory.py: "the current device, given
#: by current_device(), if device is None"). Not dist.barrier(): torch 2.13 picks the
#: device a collective of the group used first, or rank % device count (its docstring).
_CURRENT_DEVICE = frozenset(
    {
        "torch.cuda.synchronize",
        "torch.cuda.memory_allocated",
        "torch.cuda.max_memory_allocated",
        "torch.cuda.memory_reserved",
        "torch.cuda.max_memory_reserved",
        "torch.cuda.reset_peak_memory_stats",
    }
)
_CVD_TAG = "env:CUDA_VISIBLE_DEVICES"
_GETENV = frozenset({"os.getenv", "os.environ.get"})
#: Calls and methods whose result is still made of a CUDA_VISIBLE_DEVICES value's entries.
_KEEPS_CVD = frozenset({"split", "strip", "rstrip", "lstrip", "list", "map", "tuple", "sorted"})
#: How many nodes of a ``for`` loop's iterable are looked at for a DataLoader.
_MAX_ITER_NODES = 64


class LinkedWalker(Walker):
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
        #: the loops around the statement walked, through functions followed into
        self.loop_stack: list[ast.stmt] = []
        self.class_stack: list[ast.ClassDef | None] = []
        #: each method of the file -> its class
        self.owner: dict[ast.AST, ast.ClassDef] = {}
        for node in statements(tree.body):
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.owner[member] = node
        #: the modules the file imports (``a.b``; ``.x`` relative), in order
        self.imported: list[str] = []
        #: dotted names passed to a DataLoader as sampler=
        self.loader_samplers: set[str] = set()
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
            if top in S.INERT_PACKAGES or top in _STDLIB or path.startswith("."):
                return None
            return UNRESOLVED
        return self.project.resolve(self.path, path)

    def run(self) -> Facts:
        facts = super().run()
        if facts.of("local_rank_arg") and not facts.reads_local_rank_env:
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
                return

    # ------------------------------------------------------------------ calls

    def call_path(self, path: str, node: ast.Call, args: list[Val], kw: dict[str, Val]) -> Val:
        if path in _CURRENT_DEVICE and not node.args and not node.keywords:
            self.event("current_device_use", node, data={"what": path})
        found = self.target(path)
        out = super().call_path(path, node, args, kw)
        if isinstance(found, Sym):
            self.apply(found, node)
            if found.kind == "class":
                return Val(kind="project", node=node, extra=(found,))
        elif found is UNRESOLVED:
            self.opaque(path, node)
        return out

    def call_name(
        self, name: str, node: ast.Call, args: list[Val], kwargs: list[tuple[str, Val]]
    ) -> Val:
        if name in _KEEPS_CVD and any(_CVD_TAG in a.tags for a in args):
            super().call_name(name, node, args, kwargs)
            return Val(tags=frozenset({_CVD_TAG}), node=node)
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
        if _CVD_TAG in obj.tags and meth in _KEEPS_CVD:
            # os.environ["CUDA_VISIBLE_DEVICES"].split(",")[i]: still a physical GPU number
            super().call_method(meth, obj, obj_node, node, args, kw)
            return Val(tags=frozenset({_CVD_TAG}), node=node)
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
        out = super().call_method(meth, obj, obj_node, node, args, kw)
        if meth == "add_argument" and any(a.const == "--local-rank" for a in args):
            # the script accepts torch 2's spelling too (maybe in another branch: a gate)
            self.event("local_rank_dash", node)
        if meth == "set_epoch":
            ev = self.facts.events[-1] if self.facts.events else None
            if ev is not None and ev.kind == "set_epoch" and ev.node is node:
                key = dotted_name(obj_node) or ""
                ev.data["loader_sampler"] = key in self.loader_samplers or (
                    key.endswith(".sampler") and obj.kind == "sampler"
                )
                ev.data["in_any_loop"] = bool(self.loop_stack)
        return out

    def _eval(self, node: ast.expr) -> Val:
        if isinstance(node, ast.IfExp):
            # RandomSampler(ds) if args.local_rank == -1 else DistributedSampler(ds): the
            # distributed run gets the DistributedSampler (Hugging Face's examples)
            self.eval(node.test)
            body, orelse = self.eval(node.body), self.eval(node.orelse)
            for val in (body, orelse):
                if val.kind == "sampler":
                    return val
            return union([body, orelse])
        if isinstance(node, ast.DictComp) and self.environ_item(node.value):
            # {k: os.environ[k] for k in (...)}: a copy of (part of) the environment, as
            # pytorch/examples distributed/ddp/example.py reads RANK (issue 17)
            for gen in node.generators:
                self.eval(gen.iter)
            return ENVIRON
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Subscript)
            and (self.resolve(node.func.value) or "").startswith("torchvision.models.__dict__")
        ):
            # models.__dict__[args.arch](): a torchvision model, built on the CPU (the
            # ImageNet example); set_device does not move it (issue 17: a missed
            # device_ids on a CPU module)
            super()._eval(node)
            return Val(kind="module", node=node)
        return super()._eval(node)

    def environ_item(self, node: ast.expr) -> bool:
        """``os.environ[k]``, ``os.environ.get(k…)`` or ``os.getenv(k…)``."""
        if isinstance(node, ast.Subscript):
            return self.resolve(node.value) == "os.environ"
        return isinstance(node, ast.Call) and self.resolve(node.func) in _GETENV

    def dataloader(self, node: ast.Call, args: list[Val], kw: dict[str, Val]) -> Val:
        key = dotted_name(keyword(node, "sampler"))
        if key is not None:
            self.loader_samplers.add(key)
        return super().dataloader(node, args, kw)

    def apply(self, sym: Sym, node: ast.AST) -> None:
        """The events of a call to a project function, class or method."""
        assert self.project is not None
        self.apply_caps(self.project.caps(sym), sym, node)

    def apply_caps(self, caps: frozenset[str], sym: Sym, node: ast.AST) -> None:
        if not caps or self.project is None:
            return
        via = sym.shown
        if S.SET_DEVICE in caps:
            self.event("set_device_via", node, UNKNOWN, {"via": via})
            self.current[self.proc] = "?"
        elif S.OPAQUE_SETUP in caps:
            self.event("opaque_setup", node, data={"what": via})
        if S.LOCAL_RANK_ENV in caps:
            self.facts.reads_local_rank_env = True
            self.facts.reads_launcher_rank = True
        if S.RANK_ENV in caps:
            self.facts.reads_launcher_rank = True
        if S.SET_EPOCH in caps:
            self.event("set_epoch_via", node, UNKNOWN, {"via": via})
        if S.INIT_PG in caps:
            backends = self.project.backends(sym)
            backend = next(iter(backends)) if len(backends) == 1 else None
            self.event("init_pg_via", node, data={"backend": backend, "via": via})
        if S.DEEPSPEED in caps:
            self.facts.frameworks.add("deepspeed")

    def opaque(self, path: str, node: ast.AST) -> None:
        """A call lint cannot follow: noted when its name says it may set the job up."""
        if S.SETUP_NAME.search(path.rsplit(".", 1)[-1]):
            self.event("opaque_setup", node, data={"what": path.lstrip(".")})

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
                    self.event("opaque_setup", node, data={"what": base.shown})
            elif base is UNRESOLVED:
                self.event("opaque_setup", node, data={"what": "a base class lint cannot read"})

    def inline(
        self,
        fn: ast.FunctionDef | ast.AsyncFunctionDef,
        args: list[Val],
        kwargs: list[tuple[str, Val]],
        *,
        skip_self: bool = False,
    ) -> Val:
        cls = self.owner.get(fn)
        self.class_stack.append(cls)
        try:
            if self.depth == 0 and cls is not None and self.proc.startswith("def:"):
                # a test method: its project bases' set-up (any of their methods) ran first
                self.from_bases(cls, None, fn)
            return super().inline(fn, args, kwargs, skip_self=skip_self)
        finally:
            self.class_stack.pop()

    # ------------------------------------------------------------------ loops

    def _exec_stmt(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.While):
            self.loop_stack.append(stmt)
            try:
                super()._exec_stmt(stmt)
            finally:
                self.loop_stack.pop()
            return
        super()._exec_stmt(stmt)

    def exec_for(self, stmt: ast.For | ast.AsyncFor) -> None:
        self.loop_stack.append(stmt)
        try:
            super().exec_for(stmt)
        finally:
            self.loop_stack.pop()
        sampler = self.loader_sampler(stmt.iter)
        if sampler is not None:
            self.event(
                "loader_loop",
                stmt,
                sampler,
                {"outer": tuple(self.loop_stack), "shuffle": bool(sampler.extra[:1] == (True,))},
            )

    def loader_sampler(self, node: ast.expr) -> Val | None:
        """The DistributedSampler of the DataLoader a loop iterates (``for b in loader``,
        ``enumerate(tqdm(loader))``), or None."""
        for count, sub in enumerate(ast.walk(node)):
            if count >= _MAX_ITER_NODES:
                break
            val = self.cache.get(sub)
            if val is None:
                continue
            if val.kind == "loader" and val.extra and isinstance(val.extra[0], Val):
                inner = val.extra[0]
                if inner.kind == "sampler":
                    return inner
        return None


def _defines(cls: ast.ClassDef, name: str) -> bool:
    return any(
        isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == name for m in cls.body
    )


def _is_super(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


_STDLIB = frozenset(__import__("sys").stdlib_module_names)
