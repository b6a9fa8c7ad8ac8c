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

from gpudiag.lint import names as N
from gpudiag.lint.syntax import dotted_key
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


@dataclass
class Def:
    """One function or method: what it does itself, and the calls it makes, as written
    (``f``, ``mod.f``, ``self.m``, ``cls.m``, ``super.m``, ``Cls.m``)."""

    caps: set[str] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)
    #: the literal backends its init_process_group calls name (None: not a literal)
    backends: set[str | None] = field(default_factory=set)


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


def summarise(tree: ast.Module, path: str) -> ModuleSummary:
    """One pass over the module: every node is visited once (iteratively: no recursion)."""
    out = ModuleSummary(path)
    skip: set[int] = set()  # constants that name a variable written, not read
    scoped: set[int] = set()  # `with torch.cuda.device(i):` calls: the device is restored
    # (node, the Def its code belongs to (out.top at module level; None in a class body),
    # its class or None)
    top = out.top
    stack: list[tuple[ast.AST, Def | None, ClassInfo | None]] = [
        (node, top, None) for node in reversed(tree.body)
    ]
    while stack:
        node, owner, cls = stack.pop()
        if owner is top and _main_guard(node):
            continue  # runs when the module is the script, not when it is imported
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            owner is None or owner is top
        ):
            owner = Def()
            if cls is not None:
                cls.methods.setdefault(node.name, owner)
            else:
                out.funcs.setdefault(node.name, owner)
            cls = None
        elif isinstance(node, ast.ClassDef) and owner is top:
            info = ClassInfo(bases=[t for t in map(dotted_key, node.bases) if t is not None])
            out.classes.setdefault(node.name, info)
            stack.extend((sub, None, info) for sub in reversed(node.body))
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for name, target in import_aliases(node):
                if name == "*":
                    out.stars.append(target)
                else:
                    out.aliases.setdefault(name, target)
        elif owner is not None:
            _direct(node, owner, out.aliases, skip, scoped)
        for child in ast.iter_child_nodes(node):
            stack.append((child, owner, cls))
    return out


def _main_guard(node: ast.AST) -> bool:
    """``if __name__ == "__main__":``"""
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    )


def _resolved(aliases: dict[str, str], text: str) -> str:
    first, dot, rest = text.partition(".")
    base = aliases.get(first)
    if base is None:
        return text
    return f"{base}{dot}{rest}"


def _direct(
    node: ast.AST, owner: Def, aliases: dict[str, str], skip: set[int], scoped: set[int]
) -> None:
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
            owner.caps.add(SET_DEVICE)  # a mask set here: quiet, as _per_rank_mask is
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
        if node.value in _LOCAL_VARS:
            owner.caps.add(LOCAL_RANK_ENV)
        elif node.value in _RANK_VARS:
            owner.caps.add(RANK_ENV)


def _call(node: ast.Call, owner: Def, aliases: dict[str, str], scoped: set[int]) -> None:
    func = node.func
    if isinstance(func, ast.Attribute):
        if func.attr == "set_epoch":
            owner.caps.add(SET_EPOCH)
        elif func.attr == "set_device":  # get_accelerator().set_device(…): DeepSpeed's
            owner.caps.add(SET_DEVICE)
        elif func.attr == "add_argument" and any(
            isinstance(a, ast.Constant) and a.value in ("--local_rank", "--local-rank")
            for a in node.args
        ):
            owner.caps.add(LOCAL_RANK_OPTION)
        if (
            isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "super"
        ):
            owner.calls.append(f"super.{func.attr}")
            return
    text = dotted_key(func)
    if text is None:
        return
    owner.calls.append(text)
    path = _resolved(aliases, text)
    if path in _SET_DEVICE and id(node) not in scoped:
        owner.caps.add(SET_DEVICE)
    elif path in N.INIT_PROCESS_GROUP or path in _DEEPSPEED_INIT:
        owner.caps.add(INIT_PG)
        backend = node.args[0] if node.args else None
        for kw in node.keywords:
            if kw.arg in ("backend", "dist_backend"):
                backend = kw.value
        literal = isinstance(backend, ast.Constant) and isinstance(backend.value, str)
        owner.backends.add(str(backend.value) if literal else None)  # type: ignore[union-attr]
    elif path in N.GET_LOCAL_RANK:
        owner.caps.add(LOCAL_RANK_ENV)
    if path == "deepspeed" or path.startswith("deepspeed."):
        owner.caps.add(DEEPSPEED)
