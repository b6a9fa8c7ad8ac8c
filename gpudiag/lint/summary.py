"""What one module of the linted project does, read once: its imports, and for each of its
functions, classes and methods what it does directly and whom it calls.

Project reading (issue 17 item 1, docs/lint.md "Project reading"): a call in the linted
file to a function of another module of the same project counts as doing what that
function (and what it calls, in the project) does. This module reads one module's syntax
tree in a single pass; :mod:`gpudiag.lint.project` finds the modules and joins the calls.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from gpudiag.lint import gated as G
from gpudiag.lint import names as N
from gpudiag.lint.def_lines import Where
from gpudiag.lint.syntax import dotted_key, inner_blocks
from gpudiag.lint.values import GLOBAL_RANK_VARS, LOCAL_RANK_VARS

#: What a function can do that the rules ask about.
SET_DEVICE = "set_device"  # torch.cuda.set_device, set_default_device, a per-rank mask
LOCAL_RANK_ENV = "local_rank_env"  # reads LOCAL_RANK (or another node-local rank variable)
RANK_ENV = "rank_env"  # reads RANK (or another launcher's global rank)
SET_EPOCH = "set_epoch"  # calls .set_epoch(…)
INIT_PG = "init_pg"  # torch.distributed.init_process_group (or deepspeed.init_distributed)
LOCAL_RANK_OPTION = "local_rank_option"  # add_argument("--local_rank" / "--local-rank")
DEEPSPEED = "deepspeed"  # calls into deepspeed (its launcher passes --local_rank)
#: calls a function of a package the lint cannot read whose name says it sets up the job
#: (``init_dist``, ``setup_distributed``…): it may well set the device
OPAQUE_SETUP = "opaque_setup"

#: Names of calls into a package lint cannot read that may set up devices or ranks.
SETUP_NAME = re.compile(r"dist|parallel|init|setup|device|gpu|cuda|launch|rank|accelerat", re.I)
#: Top-level packages known to set up nothing on a GPU: a call into them is not opaque.
INERT_PACKAGES = frozenset(
    """numpy wandb tqdm yaml PIL cv2 matplotlib pandas sklearn scipy tensorboardX
    tensorboard omegaconf fire absl einops datasets tokenizers sentencepiece requests
    packaging pytest unittest mock click rich h5py lmdb psutil setuptools jsonargparse
    safetensors huggingface_hub regex nltk termcolor""".split()  # noqa: SIM905
)
_DEEPSPEED_INIT = frozenset({"deepspeed.init_distributed", "deepspeed.comm.init_distributed"})
_SET_DEVICE = N.SET_DEVICE | {"torch.set_default_device"}
_LOCAL_VARS = frozenset(LOCAL_RANK_VARS)
_RANK_VARS = frozenset(GLOBAL_RANK_VARS)


#: dotted path of each name imported
Names = dict[str, str]


class Def:
    """One function or method (or a module's own code): what it does itself, and the
    calls it makes, as written (``f``, ``mod.f``, ``self.m``, ``cls.m``, ``super.m``,
    ``Cls.m``). Read when first asked, from its own lines parsed again: a module is read
    for the one name a linted file calls, most of its functions are never asked about,
    and keeping their syntax trees would keep every module read in memory (issue 17:
    lint's time and memory)."""

    __slots__ = (
        "_aliases",
        "_backends",
        "_calls",
        "_caps",
        "_gates",
        "_local",
        "_where",
    )

    def __init__(self, where: Where | None = None, aliases: Names | None = None) -> None:
        #: where its code is (None: read already, or nothing to read)
        self._where = where
        self._aliases = aliases if aliases is not None else {}
        self._caps: set[str] = set()
        self._calls: list[str] = []
        self._backends: set[str | None] = set()
        self._local: Names = {}
        #: what it does only under ``if param:`` for a parameter off by default
        #: (:mod:`gpudiag.lint.gated`): parameter -> (its position, those arms' summary)
        self._gates: dict[str, tuple[int | None, Def]] = {}

    @property
    def caps(self) -> set[str]:
        self._read()
        return self._caps

    @property
    def calls(self) -> list[str]:
        self._read()
        return self._calls

    @property
    def backends(self) -> set[str | None]:
        """The literal backends its init_process_group calls name (None: not a literal)."""
        self._read()
        return self._backends

    @property
    def gates(self) -> dict[str, tuple[int | None, Def]]:
        """What it does only for a caller that passes a parameter off by default, and
        each such parameter's position (None: keyword-only)."""
        self._read()
        return self._gates

    @property
    def local_aliases(self) -> Names:
        """The names imported inside it (``from .dist import init_dist`` in a function)."""
        self._read()
        return self._local

    def release(self) -> None:
        if self._where is not None:
            self._where.kept = None

    def _read(self) -> None:
        where, self._where = self._where, None
        if where is None:
            return
        top = where.first == 0
        roots = where.roots()
        aliases = _Aliases(self._aliases, self._local)
        skip: set[int] = set()  # constants that name a variable written, not read
        scoped: set[int] = set()  # `with torch.cuda.device(i):` calls: the device is restored
        gating = G.Gating({} if top else G.gate_params(roots), roots)
        self._walk(roots, self, aliases, skip, scoped, top, gating)

    def _gated_def(self, param: str, gating: G.Gating) -> Def | None:
        """The summary of ``if param:`` arms; None where the function assigns ``param``."""
        if param in gating.checked:
            return gating.checked[param]
        found: Def | None = None
        if not G.assigns(gating.roots, param):
            found = Def(None, self._aliases)
            found._local = self._local  # the function's own imports, wherever they stand
            self._gates[param] = (gating.gates[param], found)
        gating.checked[param] = found
        return found

    def _walk(
        self,
        roots: list[ast.AST],
        owner: Def,
        aliases: _Aliases,
        skip: set[int],
        scoped: set[int],
        top: bool,
        gating: G.Gating,
    ) -> None:
        stack = list(reversed(roots))
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for name, target in import_aliases(node):
                    if name != "*":
                        self._local.setdefault(name, target)
                continue
            if top and (
                _main_guard(node) or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            ):
                continue  # the script's own run; the module's functions
            if top and isinstance(node, ast.ClassDef):
                # a class body runs on import (Megatron-LM's tests/unit_tests/
                # test_utilities.py: ``class Utils: local_rank = int(os.environ[...])``);
                # its methods do not
                stack.extend(reversed(node.body))
                continue
            kind = type(node)
            if gating.gates and isinstance(node, ast.If):
                param = G.gate_of(node.test, gating.gates)
                arm = self._gated_def(param, gating) if param is not None else None
                if arm is not None:  # `if use_usp:`: the arm runs for a caller passing it
                    self._walk(list(node.body), arm, aliases, skip, scoped, top, gating)
                    stack.extend([node.test, *node.orelse][::-1])
                    continue
            if kind in _DIRECT_KINDS:
                _direct(node, owner, aliases, skip, scoped)
            # ast.iter_child_nodes, in its order, less the generators' cost (2.4 million
            # nodes on the corpus) and the leaves nothing here reads (contexts, operators)
            fields = _CHILD_FIELDS.get(kind)
            if fields is None:
                fields = _CHILD_FIELDS[kind] = _child_fields(kind)
            for name in fields:
                value = getattr(node, name, None)
                if isinstance(value, list):
                    stack.extend(v for v in value if isinstance(v, ast.AST))
                elif isinstance(value, ast.AST):
                    stack.append(value)


#: the nodes :func:`_direct` reads
_DIRECT_KINDS = frozenset({ast.Call, ast.With, ast.AsyncWith, ast.Subscript, ast.Constant})
#: fields that never hold a node :meth:`Def._read` reads: names, numbers, and the
#: context and operator leaves
_LEAF_FIELDS = frozenset(
    """ctx op ops id attr arg name module level kind conversion type_comment simple
    is_async""".split()  # noqa: SIM905
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(kind: type) -> tuple[str, ...]:
    if kind is ast.Constant:
        return ()
    return tuple(f for f in getattr(kind, "_fields", ()) if f not in _LEAF_FIELDS)


class _Aliases:
    """A module's imports, then a function's own (the module's first: setdefault)."""

    __slots__ = ("local", "module")

    def __init__(self, module: dict[str, str], local: dict[str, str]) -> None:
        self.module = module
        self.local = local

    def get(self, name: str) -> str | None:
        found = self.module.get(name)
        return found if found is not None else self.local.get(name)


@dataclass
class ClassInfo:
    bases: list[str] = field(default_factory=list)
    methods: dict[str, Def] = field(default_factory=dict)


@dataclass
class ModuleSummary:
    path: str
    #: name -> the dotted path it was imported as (leading dots: relative to this module)
    aliases: dict[str, str] = field(default_factory=dict)
    funcs: dict[str, Def] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    #: modules this one imports everything from (``from x import *``)
    stars: list[str] = field(default_factory=list)
    #: what its module-level code does when it is imported (not under __name__ == "__main__")
    top: Def = field(default_factory=Def)

    def release(self) -> None:
        """Let go of the module's syntax tree: a function not read yet is read from its
        own lines."""
        for cls in self.classes.values():
            for found in cls.methods.values():
                found.release()
        for found in (self.top, *self.funcs.values()):
            found.release()


def import_aliases(stmt: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(name bound, dotted path) for each name an import binds; a relative import's path
    starts with its level's dots (``from ..a import b`` -> ``..a.b``); ``*`` is bound as
    ``*`` to the module."""
    out: list[tuple[str, str]] = []
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.asname:
                out.append((alias.asname, alias.name))
            else:
                root = alias.name.split(".")[0]
                out.append((root, root))
        return out
    base = "." * stmt.level + (stmt.module or "")
    for alias in stmt.names:
        if alias.name == "*":
            out.append(("*", base))
        else:
            sep = "" if base.endswith(".") or not base else "."
            out.append((alias.asname or alias.name, f"{base}{sep}{alias.name}"))
    return out


def summarise(
    tree: ast.Module, path: str, source: bytes = b"", *, kept: bool = False
) -> ModuleSummary:
    """The module's imports, functions, classes and methods, found by walking its
    statements (iteratively: no recursion); what each function does is read when first
    asked, from ``source`` (:class:`Def`), or from ``tree`` while it is ``kept`` (until
    :meth:`ModuleSummary.release`)."""
    out = ModuleSummary(path)
    # the lines as the parser numbers them (\r\n, \r and \n end a line)
    lines = source.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    out.top = Def(Where(lines, tree, kept), out.aliases)
    # (statement, at module level, its class or None); a function's body is not entered
    stack: list[tuple[ast.stmt, bool, ClassInfo | None]] = [
        (node, True, None) for node in reversed(tree.body)
    ]
    while stack:
        node, at_top, cls = stack.pop()
        if at_top and _main_guard(node):
            continue  # runs when the module is the script, not when it is imported
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            table = cls.methods if cls is not None else out.funcs
            if node.name not in table:  # the first definition of a name (as before)
                # decorators and defaults are the function's code too, as before
                table[node.name] = Def(Where(lines, node, kept), out.aliases)
            continue
        if isinstance(node, ast.ClassDef) and at_top:
            info = ClassInfo(bases=[t for t in map(dotted_key, node.bases) if t is not None])
            out.classes.setdefault(node.name, info)
            stack.extend((sub, False, info) for sub in reversed(node.body))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for name, target in import_aliases(node):
                if name == "*":
                    out.stars.append(target)
                else:
                    out.aliases.setdefault(name, target)
            continue
        # a class inside a class: its methods are the outer class's, as before
        inner = [(sub, at_top, cls) for block in inner_blocks(node) for sub in block]
        stack.extend(reversed(inner))
    return out


def _main_guard(node: ast.AST) -> bool:
    """``if __name__ == "__main__":``"""
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    )


def _resolved(aliases: _Aliases, text: str) -> str:
    first, dot, rest = text.partition(".")
    base = aliases.get(first)
    if base is None:
        return text
    return f"{base}{dot}{rest}"


def _direct(node: ast.AST, owner: Def, aliases: _Aliases, skip: set[int], scoped: set[int]) -> None:
    """What one node of a function does by itself."""
    if isinstance(node, ast.Call):
        _call(node, owner, aliases, scoped)
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        scoped.update(id(item.context_expr) for item in node.items)
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
        skip.add(id(node.slice))
        if (
            isinstance(node.slice, ast.Constant)
            and node.slice.value == "CUDA_VISIBLE_DEVICES"
            and _resolved(aliases, dotted_key(node.value) or "") == "os.environ"
        ):
            owner._caps.add(SET_DEVICE)  # a mask set here: quiet, as _per_rank_mask is
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
        if node.value in _LOCAL_VARS:
            owner._caps.add(LOCAL_RANK_ENV)
        elif node.value in _RANK_VARS:
            owner._caps.add(RANK_ENV)


def _call(node: ast.Call, owner: Def, aliases: _Aliases, scoped: set[int]) -> None:
    func = node.func
    if isinstance(func, ast.Attribute):
        if func.attr == "set_epoch":
            owner._caps.add(SET_EPOCH)
        elif func.attr == "set_device":  # get_accelerator().set_device(…): DeepSpeed's
            owner._caps.add(SET_DEVICE)
        elif func.attr == "add_argument" and any(
            isinstance(a, ast.Constant) and a.value in ("--local_rank", "--local-rank")
            for a in node.args
        ):
            owner._caps.add(LOCAL_RANK_OPTION)
        if (
            isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "super"
        ):
            owner._calls.append(f"super.{func.attr}")
            return
    text = dotted_key(func)
    if text is None:
        return
    owner._calls.append(text)
    path = _resolved(aliases, text)
    if path in _SET_DEVICE and id(node) not in scoped:
        owner._caps.add(SET_DEVICE)
    elif path in N.INIT_PROCESS_GROUP or path in _DEEPSPEED_INIT:
        owner._caps.add(INIT_PG)
        backend = node.args[0] if node.args else None
        for kw in node.keywords:
            if kw.arg in ("backend", "dist_backend"):
                backend = kw.value
        literal = isinstance(backend, ast.Constant) and isinstance(backend.value, str)
        owner._backends.add(str(backend.value) if literal else None)  # type: ignore[union-attr]
    elif path in N.GET_LOCAL_RANK:
        owner._caps.add(LOCAL_RANK_ENV)
    if path == "deepspeed" or path.startswith("deepspeed."):
        owner._caps.add(DEEPSPEED)
