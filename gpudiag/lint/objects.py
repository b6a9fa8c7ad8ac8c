"""Models, checkpoints, process groups, and imports that start CUDA: what a script builds.

A mixin of :class:`~gpudiag.lint.calls.CallSemantics`. It knows:

- a model built by name (``models.__dict__[arch]()``, ``getattr(models, arch)()``,
  ``timm.create_model``): a module, on the CPU until moved;
- which checkpoint a ``load_state_dict`` reads: the file (``torch.load(path)``) and the
  keys (``ckpt["model"]``), and which state dicts a ``torch.save`` writes under which key;
- the backend of a group made with ``dist.new_group(backend=…)``, and the group a
  collective runs in;
- imports that initialise CUDA (``pycuda.autoinit``; ``deepspeed`` in the releases in use).
"""

from __future__ import annotations

import ast

from gpudiag.lint import names as N
from gpudiag.lint.exprs import ExprEval
from gpudiag.lint.syntax import argument, dotted_key, dotted_name, uses_cuda
from gpudiag.lint.values import UNKNOWN, Dev, Val

#: which state dict: a DataParallel/DDP wrapper's (keys "module.…"), a bare model's, other
SD_KINDS = ("wrapped", "bare", "other")


def path_id(val: Val, node: ast.AST | None) -> str | None:
    """How a checkpoint file is named: ``=ckpt.pt`` for a constant, ``@args.resume`` for a
    dotted name, None when unknown."""
    if val.has_const and isinstance(val.const, str):
        return "=" + val.const
    key = dotted_key(node)
    return "@" + key if key else None


def loaded_parts(val: Val) -> tuple[str | None, tuple[str | None, ...]]:
    """The file and the keys (None: not a constant) of a value read from ``torch.load``."""
    if len(val.extra) == 2 and isinstance(val.extra[1], tuple):
        path = val.extra[0]
        return (path if isinstance(path, str) else None), val.extra[1]
    return None, ()


def _loaded(base: Val, key: object, node: ast.AST) -> Val:
    path, keys = loaded_parts(base)
    step = key if isinstance(key, str) else None
    return Val(kind="loaded", node=node, extra=(path, (*keys, step)))


def _is_registry(path: str | None) -> bool:
    """``torchvision.models``, ``timm.models``, a project's ``models`` package."""
    return path is not None and (path in N.MODEL_REGISTRIES or path.endswith(".models"))


def _made_on(kw: dict[str, Val]) -> Dev | None:
    """A constructor's ``device=``: the module is made there (unknown where: not the CPU)."""
    return ("unknown", "?") if "device" in kw or "device_map" in kw else None


#: modules whose arguments are their members (torch/nn/modules/container.py)
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})
_MODULE_KINDS = frozenset({"module", "dp", "ddp", "instance"})


def _members(vals: list[Val]) -> list[Val]:
    """The values a constructor gets, a list's or tuple's elements in place of it."""
    out: list[Val] = []
    for val in vals:
        if val.kind is None and val.extra and all(isinstance(v, Val) for v in val.extra):
            out.extend(v for v in val.extra if isinstance(v, Val))
        else:
            out.append(val)
    return out


def _bare_module(base: ast.expr) -> bool:
    """``nn.Module``, ``torch.nn.Module`` or ``Module``: a base that adds no parameter."""
    return dotted_name(base) in ("Module", "nn.Module", "torch.nn.Module")


class ObjectCalls(ExprEval):
    """Models, checkpoints, process groups and CUDA-starting imports."""

    # ------------------------------------------------------------------ imports

    def do_import(self, stmt: ast.Import | ast.ImportFrom) -> None:
        super().do_import(stmt)
        if isinstance(stmt, ast.Import):
            modules = [alias.name for alias in stmt.names]
        elif stmt.module is not None and not stmt.level:
            modules = [stmt.module, *(f"{stmt.module}.{a.name}" for a in stmt.names)]
        else:
            return
        for module in modules:
            parts = module.split(".")
            for i in range(1, len(parts) + 1):
                found = N.IMPORTS_INIT_CUDA.get(".".join(parts[:i]))
                if found is None:
                    continue
                what = f"import {'.'.join(parts[:i])}"
                source, certain = found
                kind = "import_cuda_init" if certain else "import_cuda_init_likely"
                self.event(kind, stmt, data={"what": what, "why": source})
                if certain:
                    self.event("cuda_init", stmt, data={"what": what, "why": source})
                return

    def own_class_device(self, cls: ast.ClassDef, init: ast.AST | None) -> Dev | None:
        """Where a new instance of the script's own class is: on the CPU (None), or not
        known to be (``("unknown", "?")``) when its ``__init__`` puts layers on a GPU or
        moves the module; when a decorator may have replaced the class; or when it has
        no ``__init__`` and derives from ``nn.Module`` alone, so it holds no parameter or
        buffer, and DataParallel's and DDP's device checks (torch 2.13
        torch/nn/parallel/data_parallel.py, distributed.py) look at nothing (issue 17,
        the held-out corpus: fairscale's ``@skippable`` Stash/Pop modules)."""
        if init is not None and (uses_cuda(init) or self.moves_itself(init)):
            return ("unknown", "?")
        if cls.decorator_list:
            return ("unknown", "?")
        if init is None and cls.bases and all(_bare_module(b) for b in cls.bases):
            return ("unknown", "?")
        return None

    def moves_itself(self, init: ast.AST) -> bool:
        """Whether a class's ``__init__`` moves the new module (``self.to(device)``,
        ``self.cuda()``, ``self.to_empty(…)``): then it is not known to be on the CPU.
        Memoised per file, by node (a class made thousands of times is read once)."""
        memo = self.facts.cache.setdefault("moves_itself", {})
        assert isinstance(memo, dict)
        if id(init) not in memo:
            memo[id(init)] = any(
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("to", "cuda", "to_empty")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "self"
                for node in ast.walk(init)
            )
        return bool(memo[id(init)])

    # ------------------------------------------------------------------ values

    def dict_value(self, node: ast.Dict, vals: list[Val]) -> Val | None:
        """A checkpoint dict: which state dicts it holds, under which constant keys."""
        kinds = {str(v.extra[0]) for v in vals if v.kind == "state_dict" and v.extra}
        if not kinds:
            return None
        which = next(w for w in SD_KINDS if w in kinds)
        named: list[tuple[str, str]] = []
        for key_node, val in zip(node.keys, vals, strict=False):
            if key_node is None or val.kind != "state_dict" or not val.extra:
                continue
            key = self.cache.get(key_node)
            if key is not None and key.has_const and isinstance(key.const, str):
                named.append((key.const, str(val.extra[0])))
        return Val(kind="state_dict", extra=(which, tuple(named)))

    def eval_subscript(self, node: ast.Subscript) -> Val:
        registry = isinstance(node.value, ast.Attribute) and node.value.attr == "__dict__"
        val = super().eval_subscript(node)
        if registry and isinstance(node.value, ast.Attribute):
            # models.__dict__[arch]: a model class looked up by name
            base = self.resolve(node.value.value) or dotted_key(node.value.value)
            if _is_registry(base):
                return Val(kind="model_factory", node=node)
        if val.kind == "loaded":
            index = self.cache.get(node.slice, UNKNOWN)
            base_val = self.cache.get(node.value, UNKNOWN)
            return _loaded(base_val, index.const if index.has_const else None, node)
        return val

    def getattr_factory(self, name: str, args: list[Val]) -> Val | None:
        """``getattr(models, arch)``: a model class looked up by name."""
        if (
            name == "getattr"
            and args
            and args[0].kind == "path"
            and _is_registry(str(args[0].const))
        ):
            return Val(kind="model_factory")
        return None

    def loaded_method(self, meth: str, obj: Val, args: list[Val], node: ast.Call) -> Val:
        """``ckpt.get("model")``, ``ckpt.pop("model")``, ``ckpt.copy()``."""
        if meth in ("get", "pop") and args:
            return _loaded(obj, args[0].const if args[0].has_const else None, node)
        path, keys = loaded_parts(obj)
        return Val(kind="loaded", node=node, extra=(path, keys))

    # ------------------------------------------------------------------ calls

    def object_call(
        self, path: str, node: ast.Call, args: list[Val], kw: dict[str, Val]
    ) -> Val | None:
        """The value of a call to one of these objects' functions, or None."""
        if path in N.TORCH_SAVE:
            if args:
                self.save(node, args[0])
            return UNKNOWN
        if path in N.TORCH_LOAD:
            where = argument(node, 0, "f")
            given = self.cache.get(where, UNKNOWN) if where is not None else UNKNOWN
            return Val(kind="loaded", node=node, extra=(path_id(given, where), ()))
        if path in N.COLLECTIVES:
            self.collective(path, node, args)
            return UNKNOWN
        if path in N.NEW_GROUP:
            backend_node = argument(node, 2, "backend")
            backend = self.cache.get(backend_node, UNKNOWN) if backend_node else UNKNOWN
            if backend_node is None:
                return Val(kind="group", const=None, has_const=True, node=node)
            text = backend.const if backend.has_const and isinstance(backend.const, str) else ""
            return Val(kind="group", const=text or "?", has_const=True, node=node)
        if path in N.MODEL_FACTORIES:
            return Val(kind="module", node=node, device=_made_on(kw))
        if path in N.CUDA_INIT_PRIVATE:
            self.event("cuda_init", node, data={"what": path + "()"})
            return Val(tags=frozenset({"NGPU"}), node=node)
        if path.endswith(".convert_sync_batchnorm") and args and args[0].kind == "module":
            return args[0]  # the same module, its BatchNorms replaced, where it was
        return None

    def save(self, node: ast.Call, sd: Val) -> None:
        if sd.kind != "state_dict" or not sd.extra:
            return
        which = str(sd.extra[0])
        named = sd.extra[1] if len(sd.extra) > 1 and isinstance(sd.extra[1], tuple) else None
        kinds = {which} | {str(k) for _, k in named or ()}
        if not kinds & {"wrapped", "bare"}:
            return
        where = argument(node, 1, "f")
        given = self.cache.get(where, UNKNOWN) if where is not None else UNKNOWN
        self.event(
            "save",
            node,
            data={
                "wrapped": which == "wrapped",
                "which": which,
                # None: torch.save(model.state_dict(), …) itself; else (key, which) pairs
                "keys": named,
                "path": path_id(given, where),
            },
        )

    def collective(self, path: str, node: ast.Call, args: list[Val]) -> None:
        name = path.rsplit(".", 1)[-1]
        tensor_node = argument(node, 0, "tensor")
        tensor = self.cache.get(tensor_node, UNKNOWN) if tensor_node is not None else UNKNOWN
        if tensor_node is not None and name == "all_gather" and args:
            tensor = args[1] if len(args) > 1 else UNKNOWN
        if tensor.kind != "tensor" or (tensor.device is not None and tensor.device[0] != "cpu"):
            return
        group_node = argument(node, N.COLLECTIVE_GROUP_ARG.get(name, 99), "group")
        if group_node is None or (
            isinstance(group_node, ast.Constant) and group_node.value is None
        ):
            group = "default"
        else:
            val = self.cache.get(group_node, UNKNOWN)
            if val.kind != "group":
                group = "unknown"
            elif val.const is None:
                group = "default"  # new_group() without backend: the default group's
            else:
                group = str(val.const)
        self.event(
            "cpu_collective",
            node,
            data={"what": name, "group": group, "group_text": group_node or ""},
        )

    def constructor_device(
        self, kw: dict[str, Val], args: list[Val] | None = None, path: str = ""
    ) -> Dev | None:
        """Where ``torch.nn.Linear(…, device=…)`` builds its module. A module built of
        other modules is where they are: ``nn.Sequential(trunk, head)`` after
        ``trunk.to(device)`` is not on the CPU (issue 17, the held-out corpus: fairscale's
        tests wrapped it in DDP with device_ids, and lint called that an error)."""
        made = _made_on(kw)
        if made is not None or not args:
            return made
        container = path.rsplit(".", 1)[-1] in _CONTAINERS
        for val in _members([*args, *kw.values()]):
            if val.kind in _MODULE_KINDS and val.device is not None and val.device[0] != "cpu":
                return ("unknown", "?")  # a member already moved to a GPU
            if container and val.kind not in _MODULE_KINDS:
                return ("unknown", "?")  # a member lint cannot place: not the CPU for certain
        return None
