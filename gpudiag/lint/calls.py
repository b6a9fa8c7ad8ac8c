"""What each recognised call means: the dispatch from a resolved name or a method."""

from __future__ import annotations

import ast

from gpudiag.lint import names as N
from gpudiag.lint.exprs import ENVIRON, is_environ
from gpudiag.lint.objects import ObjectCalls
from gpudiag.lint.semantics import Semantics
from gpudiag.lint.syntax import (
    argument,
    assigned_in,
    dotted_name,
    dotted_prefixes,
    keyword,
    unparse,
    uses_cuda,
)
from gpudiag.lint.values import (
    SPAWN_INDEX,
    UNKNOWN,
    WEAK_TAGS,
    Val,
    as_int,
    const,
    device_of,
    union,
    weak,
)

_POOL_METHODS = frozenset(
    {
        "map",
        "starmap",
        "imap",
        "imap_unordered",
        "apply",
        "apply_async",
        "map_async",
        "starmap_async",
        "submit",
    }
)
#: nn.Module's own attributes and methods: a wrapper has them too (torch 2.13 nn.Module)


class CallSemantics(ObjectCalls, Semantics):
    """Call handling; :class:`~gpudiag.lint.walker.Walker` adds statements and inlining."""

    # ------------------------------------------------------------------ entry

    def on_import(self, path: str, node: ast.AST) -> None:
        # `from torch.cuda.amp import autocast`: the line to change, besides each call
        if path in N.DEPRECATED_AMP:
            self.event("amp_deprecated", node, data={"path": path, "import": True})

    def on_path(self, path: str, node: ast.AST) -> None:
        # a reference is not a use; `@torch.cuda.amp.custom_fwd` (a decorator) is a call
        if path in N.DEPRECATED_AMP and self.in_decorator:
            self.event("amp_deprecated", node, data={"path": path})

    def eval_call(self, node: ast.Call) -> Val:
        func = node.func
        called = dotted_name(func)
        if called is not None and called in self.names:
            target = self.names[called]
            if target.kind in ("dp", "ddp") and target.node is not None:
                self.event("dp_forward", node, data={"dp": target.node})
        path = self.resolve(func)
        obj: Val | None = None
        callee = UNKNOWN
        if path is None and isinstance(func, ast.Attribute):
            obj = self.eval(func.value)
        elif path is None:
            callee = self.eval(func)
        args = [self.eval(a) for a in node.args]
        kwargs = [(k.arg or "", self.eval(k.value)) for k in node.keywords]
        if path is not None:
            if path in N.DEPRECATED_AMP:
                self.event("amp_deprecated", node, data={"path": path})
            return self.call_path(path, node, args, dict(kwargs))
        if isinstance(func, ast.Attribute) and obj is not None:
            return self.call_method(func.attr, obj, func.value, node, args, dict(kwargs))
        if isinstance(func, ast.Name):
            return self.call_name(func.id, node, args, kwargs)
        if callee.kind == "model_factory":
            # models.__dict__[arch](), getattr(models, arch)(): a model, on the CPU
            return Val(kind="module", node=node, device=self.constructor_device(dict(kwargs)))
        return weak([*args, *(v for _, v in kwargs)])

    # ------------------------------------------------------------------ plain names

    def call_name(
        self, name: str, node: ast.Call, args: list[Val], kwargs: list[tuple[str, Val]]
    ) -> Val:
        factory = self.getattr_factory(name, args)
        if factory is not None:
            return factory
        if name in ("int", "str", "float") and args:
            inner = args[0]
            # scalars only: str() of a list bound to a name costs its length at each use
            if inner.has_const and isinstance(inner.const, (str, int, float)):
                try:
                    conv = {"int": int, "str": str, "float": float}[name](inner.const)
                    return const(conv, node)
                except (TypeError, ValueError, OverflowError):
                    # float() of a 400-digit int overflows; str() of over 4,300 digits
                    # raises ValueError (issue 21: both were tracebacks)
                    pass
            return Val(tags=inner.tags, device=inner.device, node=node)
        if name == "dict" and len(args) == 1 and is_environ(args[0]):
            return ENVIRON  # env = dict(os.environ): a copy (issue 17)
        if name in self.funcs:
            return self.inline(self.funcs[name], args, kwargs, at=node)
        if name in self.classes:
            cls = self.classes[name]
            init = next(
                (
                    f
                    for f in cls.body
                    if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and f.name == "__init__"
                ),
                None,
            )
            if init is not None:
                self.inline(init, args, kwargs, skip_self=True, at=node)
            is_module = any("Module" in unparse(b) for b in cls.bases)
            dev = self.own_class_device(cls, init)
            return Val(
                kind="module" if is_module else "instance", node=node, extra=(name,), device=dev
            )
        return weak([*args, *(v for _, v in kwargs)])

    # ------------------------------------------------------------------ imported paths

    def call_path(self, path: str, node: ast.Call, args: list[Val], kw: dict[str, Val]) -> Val:
        made = self.object_call(path, node, args, kw)
        if made is not None:
            return made
        if path in ("os.getenv", "os.environ.get") and args:
            if args[0].has_const and isinstance(args[0].const, str):
                return Val(tags=self.env_read(args[0].const), node=node)
            return UNKNOWN
        if path in ("os.environ.setdefault", "os.putenv") and len(args) >= 2:
            if args[0].has_const and isinstance(args[0].const, str):
                self.env_set(args[0].const, args[1], node, node.args[1])
            return UNKNOWN
        if path == "os.environ.update":
            self.env_update(node)
            return UNKNOWN
        if path == "os.environ.copy" or (
            path in ("copy.copy", "copy.deepcopy") and len(args) == 1 and is_environ(args[0])
        ):
            return ENVIRON  # a copy of the environment: its variables read as os.environ's
        if path in N.GET_RANK:
            return Val(tags=frozenset({"RANK"}), node=node)
        if path in N.GET_LOCAL_RANK:
            return Val(tags=frozenset({"LOCAL"}), node=node)
        if path in N.DEVICE_COUNT:
            return Val(tags=frozenset({"NGPU"}), node=node)
        if path in N.TORCH_DEVICE:
            return self.make_device(node, args, kw)
        if path in N.CUDA_INIT_FUNCS:
            self.event("cuda_init", node, data={"what": path + "()"})
        if path in N.SET_DEVICE:
            target = argument(node, 0, "device")
            val = self.eval(target) if target is not None else UNKNOWN
            self.event("set_device", node, val, {"path": path})
            self.device_use(node, val, f"{path}()")
            k = as_int(val)
            if k is None:
                dev = device_of(val)
                k = dev[1] if dev is not None and isinstance(dev[1], int) else None
            self.current[self.proc] = k if k is not None else "?"
            return UNKNOWN
        if path in N.DATA_PARALLEL or path in N.DDP:
            return self.wrap(path, node)
        if path in N.INIT_PROCESS_GROUP:
            backend = argument(node, 0, "backend")
            bval = self.eval(backend) if backend is not None else UNKNOWN
            text = bval.const if bval.has_const and isinstance(bval.const, str) else None
            init = keyword(node, "init_method")
            env_rendezvous = init is None or (
                isinstance(init, ast.Constant) and str(init.value).startswith("env://")
            )
            rank = kw.get("rank", args[4] if len(args) > 4 else None)
            size = kw.get("world_size", args[3] if len(args) > 3 else None)
            self.event(
                "init_pg",
                node,
                data={
                    "backend": text,
                    "given": backend is not None,
                    "env_rendezvous": env_rendezvous and keyword(node, "store") is None,
                    # the spawned process's own index as its global rank: one host
                    "spawn_rank": rank is SPAWN_INDEX,
                    "one_process": size is not None and as_int(size) == 1,
                    "init_method": kw.get("init_method"),  # a loopback one: single_node.py
                },
            )
            return UNKNOWN
        if path in N.SPAWN:
            return self.launch(path, node, "spawn")
        if path in N.PROCESS or path.endswith(".Process"):
            return self.launch(path, node, self.start_method)
        if path in N.POOL:
            # ProcessPoolExecutor(mp_context=…), Pool(context=…): the given context's
            # start method (Python 3 docs, concurrent.futures and multiprocessing.pool;
            # lerobot's get_context("spawn"), a fifth held-out corpus)
            given = kw.get("mp_context") or kw.get("context")
            method = given.const if given is not None and given.kind == "mpctx" else None
            return Val(kind="pool", const=method or self.start_method, has_const=True, node=node)
        if path in N.SET_START_METHOD and args and args[0].has_const:
            self.start_method = str(args[0].const)
            return UNKNOWN
        if path in N.GET_CONTEXT and args and args[0].has_const:
            return Val(kind="mpctx", const=str(args[0].const), has_const=True)
        if path in N.DIST_SAMPLER:
            shuffle = kw.get("shuffle")
            off = shuffle is not None and shuffle.has_const and not shuffle.const
            self.event("sampler", node, data={"shuffle": not off})
            return Val(kind="sampler", node=node, extra=(not off,))
        if path in N.DATALOADER:
            return self.dataloader(node, args, kw)
        if path in N.GRAD_SCALER:
            enabled = kw.get("enabled")
            on = not (enabled is not None and enabled.has_const and not enabled.const)
            if on:
                conditional = enabled is not None and not enabled.has_const
                self.event("scaler", node, data={"path": path, "conditional": conditional})
            return Val(kind="scaler" if on else None, node=node)
        if path in N.AUTOCAST:
            self.autocast(path, node, args, kw)
            return Val(kind="autocast", node=node)
        if path in N.TENSOR_FACTORIES:
            self.device_kwarg(node, kw)
            device = kw.get("device")
            dev = device_of(device) if device is not None else None
            if device is not None and dev is None:
                dev = ("unknown", "?")
            return Val(kind="tensor", device=dev, node=node)
        if any(path.startswith(p) for p in N.RANDOM_SOURCES):
            return Val(tags=frozenset({"RANDOM"}), node=node)
        if path.startswith("torch.nn.") and path.rsplit(".", 1)[-1][:1].isupper():
            return Val(kind="module", node=node, device=self.constructor_device(kw, args, path))
        if path.startswith("torchvision.models."):
            return Val(kind="module", node=node, device=self.constructor_device(kw))
        self.device_kwarg(node, kw)
        return weak([*args, *kw.values()])

    # ------------------------------------------------------------------ methods

    def call_method(
        self,
        meth: str,
        obj: Val,
        obj_node: ast.expr,
        node: ast.Call,
        args: list[Val],
        kw: dict[str, Val],
    ) -> Val:
        key = dotted_name(obj_node)
        if is_environ(obj) and meth in ("get", "pop", "copy"):
            # env = os.environ.copy(); env.get("LOCAL_RANK"): read as os.environ's (issue 17)
            if meth == "copy":
                return ENVIRON
            if args and args[0].has_const and isinstance(args[0].const, str):
                return Val(tags=self.env_read(args[0].const), node=node)
            return UNKNOWN
        if obj.kind == "mpctx" and meth in ("Process", "Pool"):
            method = str(obj.const)
            if meth == "Pool":
                return Val(kind="pool", const=method, has_const=True, node=node)
            return self.launch("Process", node, method)
        if obj.kind == "pool" and meth in _POOL_METHODS and args:
            fn = self.funcs.get(str(args[0].const)) if args[0].kind == "func" else None
            if fn is not None:
                self.event(
                    "fork_launch",
                    node,
                    data={
                        "what": f"Pool.{meth}",
                        "method": str(obj.const),
                        "target_uses_cuda": uses_cuda(fn),
                        "target": fn.name,
                    },
                )
            return UNKNOWN
        if obj.kind in ("dp", "ddp"):
            self.wrapper_attr(obj, meth, node)
        if meth in ("cuda", "to", "cpu"):
            return self.place(meth, obj, key, node, args, kw)
        if meth in ("half", "bfloat16"):
            self.event(
                "half",
                node,
                data={
                    "key": key or "",
                    "dtype": "fp16" if meth == "half" else "bf16",
                    "module": obj.kind in ("module", "dp", "ddp"),
                    "text": node,
                },
            )
            return obj.with_tags(frozenset({"HALF"})) if meth == "half" else obj
        if meth == "add_argument":
            flags = {a.const for a in args if a.has_const and isinstance(a.const, str)}
            if "--local_rank" in flags and "--local-rank" not in flags:
                self.event("local_rank_arg", node)
        if meth == "parameters" and key is not None:
            self.facts.param_owners.add(key)
            return UNKNOWN
        if meth == "state_dict":
            if obj.kind in ("dp", "ddp"):
                return Val(kind="state_dict", extra=("wrapped",))
            if obj.kind in ("module", "placed") or (
                key is not None and key in self.facts.param_owners
            ):
                return Val(kind="state_dict", extra=("bare",))
            return Val(kind="state_dict", extra=("other",))
        if meth == "load_state_dict" and args:
            if args[0].kind == "loaded":
                strict = kw.get("strict")
                self.event(
                    "load",
                    node,
                    args[0],
                    {
                        "wrapped": obj.kind in ("dp", "ddp"),
                        "key": key or "",
                        "lenient": strict is not None and strict.has_const and not strict.const,
                        "receiver": obj.kind or "",
                    },
                )
            return UNKNOWN
        if meth == "set_epoch":
            arg = args[0] if args else (kw.get("epoch") or UNKNOWN)
            arg_node = node.args[0] if node.args else keyword(node, "epoch")
            self.event(
                "set_epoch",
                node,
                arg,
                {
                    "is_sampler": obj.kind == "sampler",
                    "arg": arg_node if arg_node is not None else "",
                    "literal": isinstance(arg_node, ast.Constant),
                    "name": arg_node.id if isinstance(arg_node, ast.Name) else "",
                    "in_loop": bool(self.loops),
                    "loop_constant": self.loop_constant(arg_node),
                },
            )
            return UNKNOWN
        if obj.kind == "scaler" and meth in ("scale", "step", "unscale_", "update"):
            self.event("scaler_use", node, data={"method": meth})
            return UNKNOWN
        if obj.kind == "loaded" and meth in ("get", "pop", "items", "copy"):
            return self.loaded_method(meth, obj, args, node)
        if meth in self.methods and (
            key == "self" or obj.kind in ("instance", "module") or key in self.classes
        ):
            return self.inline(self.methods[meth], args, list(kw.items()), skip_self=True, at=node)
        if meth == "start" and obj.kind == "process":
            return UNKNOWN
        self.device_kwarg(node, kw)
        if meth == "format" and obj.has_const and isinstance(obj.const, str):
            # "cuda:{}".format(rank): a device string that keeps the rank's origin
            tags = union([*args, *kw.values()]).tags
            dev = ("cuda", "?") if obj.const.startswith("cuda") and tags else None
            return Val(tags=tags, device=dev, node=node)
        # a method's result is not its receiver's rank: only "random"/"float16" carry on
        return Val(tags=(obj.tags & WEAK_TAGS) | weak([*args, *kw.values()]).tags)

    # ------------------------------------------------------------------ helpers

    def loop_constant(self, arg: ast.expr | None) -> bool:
        """Whether ``arg`` takes the same value in every iteration of the enclosing loops:
        no call in it, and none of its names is a loop variable or assigned in a loop."""
        if arg is None or not self.loops:
            return False
        names: set[str] = set()
        for node in ast.walk(arg):
            if isinstance(node, ast.Call):
                return False
            key = dotted_name(node)
            if key is not None:
                names.add(key)
        if not names:
            return False
        # each name and its dotted prefixes against each loop's sets: no set is copied
        # or scanned per call (issue 21: thousands of set_epoch calls were quadratic)
        loops = [(loop_vars, assigned_in(loop)) for loop_vars, _, loop in self.loops]
        for name in names:  # every enclosing loop, outer ones too
            for prefix in [name, *dotted_prefixes(name)]:
                if any(prefix in loop_vars or prefix in assigned for loop_vars, assigned in loops):
                    return False
        return True
