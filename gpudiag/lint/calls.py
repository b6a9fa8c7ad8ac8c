"""What each recognised call means: devices, wrappers, launchers, samplers, AMP, checkpoints."""

from __future__ import annotations

import ast
import functools

from gpudiag.lint import names as N
from gpudiag.lint.exprs import ExprEval
from gpudiag.lint.values import (
    UNKNOWN,
    WEAK_TAGS,
    Dev,
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
NN_MODULE_ATTRS = frozenset(
    # nn.Module's public methods and the attributes DataParallel / DistributedDataParallel
    # set on themselves (torch 2.13 torch/nn/modules/module.py, torch/nn/parallel/*.py)
    """forward training parameters named_parameters buffers named_buffers children
    named_children modules named_modules state_dict load_state_dict train eval to cuda cpu
    xpu mtia ipu half float double bfloat16 type zero_grad apply requires_grad_
    register_buffer register_parameter register_module add_module register_forward_hook
    register_forward_pre_hook register_full_backward_hook register_full_backward_pre_hook
    register_backward_hook register_state_dict_pre_hook register_state_dict_post_hook
    register_load_state_dict_pre_hook register_load_state_dict_post_hook get_submodule
    set_submodule get_parameter get_buffer get_extra_state set_extra_state extra_repr
    share_memory to_empty compile module device_ids output_device dim no_sync join
    join_device join_hook join_process_group process_group register_comm_hook
    src_device_obj device device_type device_mesh reducer logger static_graph
    find_unused_parameters gradient_as_bucket_view mixed_precision broadcast_buffers
    bucket_bytes_cap parameters_to_ignore require_backward_grad_sync
    require_forward_param_sync is_multi_device_module scatter gather replicate
    parallel_apply""".split()  # noqa: SIM905 - a word list reads better than 82 quotes
)


def _kw(node: ast.Call, name: str) -> ast.expr | None:
    for kw in node.keywords:
        if kw.arg == name:
            return kw.value
    return None


def _arg(node: ast.Call, index: int, name: str) -> ast.expr | None:
    found = _kw(node, name)
    if found is not None:
        return found
    positional = [a for a in node.args if not isinstance(a, ast.Starred)]
    return positional[index] if index < len(positional) else None


@functools.lru_cache(maxsize=256)
def uses_cuda(fn: ast.AST) -> bool:
    """Whether a function body visibly uses CUDA (``.cuda()``, ``cuda`` strings, torch.cuda)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and node.attr in ("cuda", "set_device"):
            return True
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and (node.value.startswith("cuda") or node.value == "nccl")
        ):
            return True
    return False


class CallSemantics(ExprEval):
    """Call handling; :class:`~gpudiag.lint.walker.Walker` adds statements and inlining."""

    funcs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    classes: dict[str, ast.ClassDef]

    def __init__(self) -> None:
        super().__init__()
        #: per process: the ordinal of torch.cuda.set_device(K) ("?" when computed)
        self.current: dict[str, int | str] = {}
        self.start_method = "fork"

    def inline(
        self,
        fn: ast.FunctionDef | ast.AsyncFunctionDef,
        args: list[Val],
        kwargs: list[tuple[str, Val]],
        *,
        skip_self: bool = False,
    ) -> Val:
        raise NotImplementedError

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
        called = _key(func)
        if called is not None and called in self.names:
            target = self.names[called]
            if target.kind in ("dp", "ddp") and target.node is not None:
                self.event("dp_forward", node, data={"dp": target.node})
        path = self.resolve(func)
        obj: Val | None = None
        if path is None and isinstance(func, ast.Attribute):
            obj = self.eval(func.value)
        elif path is None:
            self.eval(func)
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
        return weak([*args, *(v for _, v in kwargs)])

    # ------------------------------------------------------------------ plain names

    def call_name(
        self, name: str, node: ast.Call, args: list[Val], kwargs: list[tuple[str, Val]]
    ) -> Val:
        if name in ("int", "str", "float") and args:
            inner = args[0]
            if inner.has_const:
                try:
                    conv = {"int": int, "str": str, "float": float}[name](inner.const)
                    return const(conv, node)
                except (TypeError, ValueError):
                    pass
            return Val(tags=inner.tags, device=inner.device, node=node)
        if name in self.funcs:
            return self.inline(self.funcs[name], args, kwargs)
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
                self.inline(init, args, kwargs, skip_self=True)
            is_module = any("Module" in ast.unparse(b) for b in cls.bases)
            # a model that puts its own layers on a GPU in __init__ is not on the CPU
            dev: Dev | None = ("unknown", "?") if init is not None and uses_cuda(init) else None
            return Val(
                kind="module" if is_module else "instance", node=node, extra=(name,), device=dev
            )
        return weak([*args, *(v for _, v in kwargs)])

    # ------------------------------------------------------------------ imported paths

    def call_path(self, path: str, node: ast.Call, args: list[Val], kw: dict[str, Val]) -> Val:
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
            target = _arg(node, 0, "device")
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
            backend = _arg(node, 0, "backend")
            bval = self.eval(backend) if backend is not None else UNKNOWN
            text = bval.const if bval.has_const and isinstance(bval.const, str) else None
            init = _kw(node, "init_method")
            env_rendezvous = init is None or (
                isinstance(init, ast.Constant) and str(init.value).startswith("env://")
            )
            self.event(
                "init_pg",
                node,
                data={
                    "backend": text,
                    "given": backend is not None,
                    "env_rendezvous": env_rendezvous and _kw(node, "store") is None,
                },
            )
            return UNKNOWN
        if path in N.SPAWN:
            return self.launch(path, node, "spawn")
        if path in N.PROCESS or path.endswith(".Process"):
            return self.launch(path, node, self.start_method)
        if path in N.POOL:
            return Val(kind="pool", const=self.start_method, has_const=True, node=node)
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
        if path in N.TORCH_SAVE and args:
            sd = args[0]
            if sd.kind == "state_dict" and sd.extra in (("wrapped",), ("bare",)):
                self.event("save", node, data={"wrapped": sd.extra == ("wrapped",)})
            return UNKNOWN
        if path in N.TORCH_LOAD:
            return Val(kind="loaded", node=node)
        if path in N.COLLECTIVES:
            tensor_node = _arg(node, 0, "tensor")
            tensor = self.peek_val(tensor_node)
            if tensor_node is not None and path.endswith("all_gather") and args:
                tensor = args[1] if len(args) > 1 else UNKNOWN
            if tensor.kind == "tensor" and (tensor.device is None or tensor.device[0] == "cpu"):
                self.event("cpu_collective", node, data={"what": path.rsplit(".", 1)[-1]})
            return UNKNOWN
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
            return Val(kind="module", node=node)
        if path.startswith("torchvision.models."):
            return Val(kind="module", node=node)
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
        key = _key(obj_node)
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
                    "text": ast.unparse(node),
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
                    data={
                        "wrapped": obj.kind in ("dp", "ddp"),
                        "key": key or "",
                        "lenient": strict is not None and strict.has_const and not strict.const,
                    },
                )
            return UNKNOWN
        if meth == "set_epoch":
            arg = args[0] if args else (kw.get("epoch") or UNKNOWN)
            arg_node = node.args[0] if node.args else _kw(node, "epoch")
            self.event(
                "set_epoch",
                node,
                arg,
                {
                    "is_sampler": obj.kind == "sampler",
                    "arg": ast.unparse(arg_node) if arg_node is not None else "",
                    "literal": isinstance(arg_node, ast.Constant),
                    "name": arg_node.id if isinstance(arg_node, ast.Name) else "",
                    "in_loop": bool(self.loops),
                },
            )
            return UNKNOWN
        if obj.kind == "scaler" and meth in ("scale", "step", "unscale_", "update"):
            self.event("scaler_use", node, data={"method": meth})
            return UNKNOWN
        if obj.kind == "loaded" and meth in ("get", "pop", "items", "copy"):
            return Val(kind="loaded", node=node)
        if meth in self.methods and (
            key == "self" or obj.kind in ("instance", "module") or key in self.classes
        ):
            return self.inline(self.methods[meth], args, list(kw.items()), skip_self=True)
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

    def device_use(self, node: ast.AST, val: Val, where: str) -> None:
        if val.tags & {"RANK", "LOCAL", "SPAWN"}:
            self.event("device_use", node, val, {"where": where})

    def make_device(self, node: ast.Call, args: list[Val], kw: dict[str, Val]) -> Val:
        first = args[0] if args else kw.get("type", UNKNOWN)
        index = args[1] if len(args) > 1 else kw.get("index")
        dev = device_of(first) if first.kind != "path" else None
        if dev is None and first.device is not None:
            dev = first.device
        tags = first.tags
        if index is not None:
            tags = tags | index.tags
            k = as_int(index)
            if dev is not None:
                dev = (dev[0], k if k is not None else "?")
        val = Val(tags=tags, device=dev, kind="device", node=node)
        if dev is not None and dev[0] == "cuda" and dev[1] == "?":
            self.device_use(node, val, "torch.device()")
        return val

    def place(
        self,
        meth: str,
        obj: Val,
        key: str | None,
        node: ast.Call,
        args: list[Val],
        kw: dict[str, Val],
    ) -> Val:
        dev: Dev | None = None
        target: Val = UNKNOWN
        halved = False
        if meth == "cpu":
            dev = ("cpu", None)
        elif meth == "cuda":
            target = args[0] if args else kw.get("device", UNKNOWN)
            if not args and "device" not in kw:
                dev = ("cuda", None)
            else:
                found = device_of(target)
                dev = ("cuda", found[1]) if found is not None else ("cuda", "?")
        else:
            for cand in [*args, kw.get("device", UNKNOWN)]:
                if cand.kind == "dtype":
                    halved = halved or cand.const == "fp16"
                    if cand.const in ("fp16", "bf16"):
                        self.event(
                            "half",
                            node,
                            data={
                                "key": key or "",
                                "dtype": str(cand.const),
                                "module": obj.kind in ("module", "dp", "ddp"),
                                "text": ast.unparse(node),
                            },
                        )
                    continue
                found = device_of(cand)
                if found is not None:
                    dev, target = found, cand
                    break
            if dev is None and any(
                c.kind != "dtype" for c in [*args, *([kw["device"]] if "device" in kw else [])]
            ):
                # .to(x) with an x the walker cannot read: moved somewhere, not known where
                if obj.kind in ("dp", "ddp") and obj.node is not None:
                    self.event(
                        "dp_moved", node, data={"dp": obj.node, "ordinal": None, "dev": None}
                    )
                moved = Val(
                    kind=obj.kind,
                    device=("unknown", "?"),
                    node=obj.node if obj.kind in ("dp", "ddp") else node,
                    tags=obj.tags,
                    extra=obj.extra,
                )
                if key is not None and obj.kind != "path":
                    self.names[key] = moved  # `model.to(device)` moves a module in place
                return moved
            dtype = kw.get("dtype")
            halved = halved or (dtype is not None and dtype.const == "fp16")
            if dtype is not None and dtype.const in ("fp16", "bf16"):
                self.event(
                    "half",
                    node,
                    data={
                        "key": key or "",
                        "dtype": str(dtype.const),
                        "module": obj.kind in ("module", "dp", "ddp"),
                        "text": ast.unparse(node),
                    },
                )
        if dev is None:
            return obj.with_tags(frozenset({"HALF"})) if halved else obj
        ordinal: int | None = None
        if dev[0] == "cuda":
            self.device_use(node, target, f".{meth}()")
            self.event("cuda_init", node, data={"what": f".{meth}()"})
            if dev[1] is None:
                cur = self.current.get(self.proc, 0)
                ordinal = cur if isinstance(cur, int) else None
            elif isinstance(dev[1], int):
                ordinal = dev[1]
            self.event(
                "placement",
                node,
                target,
                {"key": key or "", "bare": dev[1] is None, "set_before": self.proc in self.current},
            )
        kind = obj.kind if obj.kind in ("module", "dp", "ddp", "instance") else None
        if kind is None and key is not None and key in self.facts.param_owners:
            kind = "module"
        if obj.kind in ("dp", "ddp") and obj.node is not None:
            self.event("dp_moved", node, data={"dp": obj.node, "ordinal": ordinal, "dev": dev})
        keep_node = obj.node if obj.kind in ("dp", "ddp") else node
        placed = Val(
            kind=kind or "placed",
            device=dev,
            ordinal=ordinal,
            node=keep_node,
            tags=obj.tags,
            extra=obj.extra if kind in ("module", "dp", "ddp", "instance") else (),
        )
        if key is not None and obj.kind not in ("path",):
            self.names[key] = placed
        return placed

    def device_kwarg(self, node: ast.Call, kw: dict[str, Val]) -> None:
        """``torch.zeros(..., device="cuda")``: a tensor made on a GPU."""
        val = kw.get("device")
        if val is None:
            return
        dev = device_of(val)
        if dev is None or dev[0] != "cuda":
            return
        self.device_use(node, val, "device=")
        self.event("cuda_init", node, data={"what": "a tensor created with device=cuda"})
        self.event(
            "placement",
            node,
            val,
            {"key": "", "bare": dev[1] is None, "set_before": self.proc in self.current},
        )

    def wrap(self, path: str, node: ast.Call) -> Val:
        kind = "dp" if path in N.DATA_PARALLEL else "ddp"
        module_node = _arg(node, 0, "module")
        module = self.peek_val(module_node)
        ids_node = _arg(node, 1, "device_ids")
        out_node = _arg(node, 2, "output_device")
        ids = self.peek_val(ids_node)
        out = self.peek_val(out_node)
        for item in ids.extra:
            if isinstance(item, Val):
                self.device_use(node, item, "device_ids")
        if out_node is not None:
            self.device_use(node, out, "output_device")
        self.event(
            kind,
            node,
            module,
            {
                "ids": ids,
                "ids_given": ids_node is not None,
                "ids_text": ast.unparse(ids_node) if ids_node is not None else "",
                "out": out,
                "out_given": out_node is not None,
                "module_key": _key(module_node) if module_node is not None else "",
                "module_text": ast.unparse(module_node) if module_node is not None else "",
            },
        )
        self.event("cuda_init", node, data={"what": path.rsplit(".", 1)[-1] + "()"})
        return Val(
            kind=kind,
            device=module.device,
            ordinal=module.ordinal,
            node=node,
            extra=module.extra if module.kind == "module" else (),
        )

    def peek_val(self, node: ast.expr | None) -> Val:
        if node is None:
            return UNKNOWN
        return self.cache.get(node, UNKNOWN)

    def launch(self, path: str, node: ast.Call, method: str) -> Val:
        target_node = _kw(node, "target") if "Process" in path else _arg(node, 0, "fn")
        args_node = _kw(node, "args")
        if "start_processes" in path:
            sm = _kw(node, "start_method")
            method = "spawn"
            if isinstance(sm, ast.Constant) and isinstance(sm.value, str):
                method = sm.value
        if args_node is not None and not isinstance(args_node, (ast.Tuple, ast.List)):
            self.spawn_args(args_node, node)
        fn = None
        if isinstance(target_node, ast.Name):
            fn = self.funcs.get(target_node.id)
            bound = self.names.get(target_node.id)
            if bound is not None:
                fn = self.funcs.get(str(bound.const)) if bound.kind == "func" else None
        self.event(
            "fork_launch" if method == "fork" else "spawn_launch",
            node,
            data={
                "what": path,
                "method": method,
                "target_uses_cuda": (None if fn is None else uses_cuda(fn))
                or self.passes_cuda(args_node),
                "target": fn.name if fn is not None else "",
            },
        )
        if fn is not None:
            extra: list[Val] = []
            if isinstance(args_node, (ast.Tuple, ast.List)):
                extra = [self.peek_val(e) for e in args_node.elts]
            saved = self.proc
            self.proc = f"{'fork' if method == 'fork' else 'spawn'}:{fn.name}"
            if "Process" in path:
                call_args = extra
            else:
                # torch.multiprocessing.spawn calls fn(i, *args): i is the local process index
                call_args = [Val(tags=frozenset({"SPAWN", "LOCAL"})), *extra]
            self.inline(fn, call_args, [])
            self.proc = saved
        return Val(kind="process", node=node)

    def passes_cuda(self, args_node: ast.expr | None) -> bool | None:
        """Whether a launcher's ``args=(...)`` hands the child something already on a GPU."""
        if not isinstance(args_node, (ast.Tuple, ast.List)):
            return None
        for elt in args_node.elts:
            dev = self.peek_val(elt).device
            if dev is not None and dev[0] == "cuda":
                return True
        return None

    def spawn_args(self, args_node: ast.expr, node: ast.Call) -> None:
        """``args=(world_size)``: parentheses around one value make no tuple."""
        val = self.peek_val(args_node)
        if (val.has_const and isinstance(val.const, (list, tuple, str))) or val.extra:
            return
        line = self.facts.source_lines[args_node.lineno - 1] if self.facts.source_lines else ""
        before = line[: args_node.col_offset].rstrip()
        if before.endswith("("):
            self.event("spawn_args", args_node, val, {"text": ast.unparse(args_node)})

    def dataloader(self, node: ast.Call, args: list[Val], kw: dict[str, Val]) -> Val:
        self.dataloader_workers(node, args, kw)
        sampler_node = _kw(node, "sampler")
        sampler = self.peek_val(sampler_node)
        shuffle = kw.get("shuffle")
        sampler_given = sampler_node is not None and not (
            isinstance(sampler_node, ast.Constant) and sampler_node.value is None
        )
        if sampler_given and shuffle is not None and shuffle.has_const and shuffle.const is True:
            self.event("loader_shuffle", node)
        return Val(kind="loader", node=node, extra=(sampler,) if sampler_given else ())

    def dataloader_workers(self, node: ast.Call, args: list[Val], kw: dict[str, Val]) -> None:
        """Workers of a DataLoader are forked; a dataset that uses CUDA cannot run there."""
        workers = as_int(kw.get("num_workers", UNKNOWN))
        if not workers or workers <= 0 or "multiprocessing_context" in kw:
            return
        dataset = args[0] if args else kw.get("dataset", UNKNOWN)
        cls = (
            self.classes.get(dataset.extra[0])
            if dataset.extra and isinstance(dataset.extra[0], str)
            else None
        )
        if cls is None:
            return
        getitem = next(
            (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__getitem__"),
            None,
        )
        if getitem is None or not uses_cuda(getitem):
            return
        self.event(
            "fork_launch",
            node,
            data={
                "what": "DataLoader workers",
                "method": self.start_method,
                "target_uses_cuda": True,
                "target": f"{cls.name}.__getitem__",
                "any_time": True,
            },
        )

    def wrapper_attr(self, obj: Val, attr: str, node: ast.AST) -> None:
        """An attribute of the wrapped model read through the DataParallel/DDP wrapper."""
        if attr in NN_MODULE_ATTRS or attr.startswith("__") or not obj.extra:
            return
        cls = self.classes.get(str(obj.extra[0]))
        if cls is None or attr not in class_members(cls):
            return
        self.event("wrapper_attr", node, obj, {"attr": attr, "class": cls.name})

    def autocast(self, path: str, node: ast.Call, args: list[Val], kw: dict[str, Val]) -> None:
        dtype = kw.get("dtype")
        device_type = None
        if path in ("torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"):
            first = args[0] if args else kw.get("device_type", UNKNOWN)
            device_type = str(first.const) if first.has_const else None
        elif "cuda" in path:
            device_type = "cuda"
        elif "cpu" in path:
            device_type = "cpu"
        if dtype is None and len(args) > 1 and args[1].kind == "dtype":
            dtype = args[1]
        name = None
        if dtype is None:
            # torch.autocast defaults: float16 on CUDA, bfloat16 on CPU
            name = "fp16" if device_type == "cuda" else ("bf16" if device_type == "cpu" else None)
        elif dtype.kind == "dtype" and isinstance(dtype.const, str):
            name = dtype.const
        enabled = kw.get("enabled")
        off = enabled is not None and enabled.has_const and not enabled.const
        if not off:
            self.event("autocast", node, data={"dtype": name, "device_type": device_type})

    def env_update(self, node: ast.Call) -> None:
        for k in node.keywords:
            if k.arg is not None:
                self.env_set(k.arg, self.peek_val(k.value), node, k.value)
        if node.args and isinstance(node.args[0], ast.Dict):
            d = node.args[0]
            for key_node, value_node in zip(d.keys, d.values, strict=False):
                if isinstance(key_node, ast.Constant) and isinstance(key_node.value, str):
                    self.env_set(key_node.value, self.peek_val(value_node), node, value_node)


@functools.lru_cache(maxsize=256)
def class_members(cls: ast.ClassDef) -> frozenset[str]:
    """Methods and ``self.X`` attributes a class defines."""
    out: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in cls.body:
            out.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            out.add(node.attr)
    return frozenset(out)


def _key(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _key(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None
