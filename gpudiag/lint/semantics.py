"""The meaning of recognised calls, below the dispatch in :mod:`gpudiag.lint.calls`.

Devices (``.cuda()``, ``.to()``, ``torch.device``, ``device=``), DataParallel/DDP
wrappers, process launchers, DataLoaders and autocast: each turns a call into
values and events for the rules.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from gpudiag.lint import names as N
from gpudiag.lint.exprs import ExprEval
from gpudiag.lint.names import NN_MODULE_ATTRS
from gpudiag.lint.syntax import (
    argument,
    class_members,
    dotted_name,
    is_static,
    keyword,
    uses_cuda,
)
from gpudiag.lint.values import SPAWN_INDEX, UNKNOWN, Dev, Val, as_int, device_of


class Semantics(ExprEval):
    """Devices, wrappers, launchers, loaders and autocast; the dispatch lives in a subclass."""

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
        at: ast.AST | None = None,
    ) -> Val:
        raise NotImplementedError

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
                                "text": node,
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
                        "text": node,
                    },
                )
        if dev is None:
            return obj.with_tags(frozenset({"HALF"})) if halved else obj
        ordinal: int | None = None
        if dev[0] == "cuda" and self.holds_nothing(node.func):
            return obj  # nn.KLDivLoss().cuda(): nothing to move, no CUDA context
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
        module_node = argument(node, 0, "module")
        module = self.peek_val(module_node)
        ids_node = argument(node, 1, "device_ids")
        out_node = argument(node, 2, "output_device")
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
                "ids_text": ids_node if ids_node is not None else "",
                "out": out,
                "out_given": out_node is not None,
                "module_key": dotted_name(module_node) if module_node is not None else "",
                "module_text": module_node if module_node is not None else "",
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
        target_node = keyword(node, "target") if "Process" in path else argument(node, 0, "fn")
        args_node = keyword(node, "args")
        if args_node is None and "Process" not in path:
            args_node = argument(node, 1, "args")  # spawn(fn, args=(), nprocs=1, …)
        if "start_processes" in path:
            sm = keyword(node, "start_method")
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
        elif isinstance(target_node, ast.Attribute) and dotted_name(target_node.value) in (
            "self",
            "cls",
        ):
            fn = self.methods.get(target_node.attr)  # mp.spawn(cls._worker, …): vissl's tests
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
                # a random value (a free port) drawn here, in the parent, is drawn once and
                # every child gets the same one: in the children it is no longer random
                extra = [self.peek_val(e) for e in args_node.elts]
                extra = [replace(v, tags=v.tags - {"RANDOM"}) for v in extra]
            saved = self.proc
            self.proc = f"{'fork' if method == 'fork' else 'spawn'}:{fn.name}"
            # torch.multiprocessing.spawn calls fn(i, *args): i is the local process index
            call_args = extra if "Process" in path else [SPAWN_INDEX, *extra]
            bound_self = isinstance(target_node, ast.Attribute) and not is_static(fn)
            self.inline(fn, call_args, [], at=node, skip_self=bound_self)
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
            self.event("spawn_args", args_node, val, {"text": args_node})

    def dataloader(self, node: ast.Call, args: list[Val], kw: dict[str, Val]) -> Val:
        self.dataloader_workers(node, args, kw)
        sampler_node = keyword(node, "sampler")
        sampler = self.peek_val(sampler_node)
        shuffle = kw.get("shuffle")
        sampler_given = sampler_node is not None and not (
            isinstance(sampler_node, ast.Constant) and sampler_node.value is None
        )
        if sampler_given and shuffle is not None and shuffle.has_const and shuffle.const is True:
            # where each value was made: `sampler = DistributedSampler(…)` and `shuffle =
            # True` in the two arms of one `if` never meet (rules_epoch, with gpudiag.lint.flow)
            none = sampler.has_const and sampler.const is None
            self.event(
                "loader_shuffle", node, data={"made": (sampler.node, shuffle.node), "none": none}
            )
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
