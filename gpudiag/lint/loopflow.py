"""Data flow the rules need beyond the walker's: loops around calls, DataLoaders and
their samplers, copies of the environment, CUDA_VISIBLE_DEVICES entries.

:class:`FlowWalker` walks one file as :class:`~gpudiag.lint.walker.Walker` does, and:

* keeps the loops around a call when it follows the call into a function, so an epoch
  loop is recognised by what it does, not by its variable's name: a loop around the
  iteration of a DataLoader whose sampler is a DistributedSampler (``loader_loop``
  events; issue 17: ``for _ in trange(num_train_epochs)`` was missed);
* reads ``RandomSampler(ds) if … else DistributedSampler(ds)`` as the distributed run's
  sampler, and ``a, b = make_loaders()`` name by name when the function was followed;
* reads a copy of the environment (``{k: os.environ[k] for k in …}``) as os.environ;
* keeps a CUDA_VISIBLE_DEVICES entry's origin through ``.split(",")[i]`` and ``int()``;
* notes the calls that work on the current device (``torch.cuda.synchronize()``), those
  that make a CUDA context there, and each ``torch.load`` with the ``load_state_dict``
  calls its checkpoint reaches (:mod:`gpudiag.lint.ctx_calls`).
"""

from __future__ import annotations

import ast

from gpudiag.lint import names as N
from gpudiag.lint.ctx_calls import (
    CONTEXT_CALLS,
    map_location_given,
    note_part,
    on_current_device,
    origin_of,
)
from gpudiag.lint.exprs import ENVIRON
from gpudiag.lint.syntax import dotted_name, keyword
from gpudiag.lint.values import Val, union
from gpudiag.lint.walker import Walker

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
#: The expressions this walker reads its own way (the others, most, as the walker does):
#: a node type `_eval` below looks at must be here (tests/test_lint_context.py fails).
_FLOW_NODES = frozenset({ast.IfExp, ast.DictComp, ast.Call, ast.Subscript})
#: How many nodes of a ``for`` loop's iterable are looked at for a DataLoader.
_MAX_ITER_NODES = 64


class FlowWalker(Walker):
    """The walker, with the loops around each call and the flows above."""

    def __init__(self, tree: ast.Module, lines: list[str]) -> None:
        super().__init__(tree, lines)
        #: the loops around the statement walked, through functions followed into
        self.loop_stack: list[ast.stmt] = []
        #: dotted names passed to a DataLoader as sampler=
        self.loader_samplers: set[str] = set()
        #: id of a checkpoint (or a part of one) -> (it, the torch.load call that read it)
        self.loads: dict[int, tuple[Val, ast.Call]] = {}

    def call_path(self, path: str, node: ast.Call, args: list[Val], kw: dict[str, Val]) -> Val:
        if path in _CURRENT_DEVICE and not node.args and not node.keywords:
            self.event("current_device_use", node, data={"what": path})
        context = CONTEXT_CALLS.get(path)
        if context is not None and on_current_device(path, node):
            data = {"what": path, "after_init": context[1], "set_before": self.proc in self.current}
            self.event("context_call", node, data=data)
        out = super().call_path(path, node, args, kw)
        if path in N.TORCH_LOAD:
            self.loads[id(out)] = (out, node)
            self.event("torch_load", node, out, {"mapped": map_location_given(node)})
        elif path in N.TORCH_SAVE and args:
            self.event("torch_save", node, data={"state": args[0].kind == "state_dict"})
        if path == "torch.cuda.current_device":
            # the current device's index: cuda:0 until set_device, like a bare "cuda"
            return Val(device=("cuda", None), node=node)
        if path.split(".")[0] == "tqdm" and args and args[0].kind == "loader":
            return args[0]  # epoch_iterator = tqdm(train_dataloader): iterates the loader
        return out

    def call_name(
        self, name: str, node: ast.Call, args: list[Val], kwargs: list[tuple[str, Val]]
    ) -> Val:
        if name in _KEEPS_CVD and any(_CVD_TAG in a.tags for a in args):
            super().call_name(name, node, args, kwargs)
            return Val(tags=frozenset({_CVD_TAG}), node=node)
        out = super().call_name(name, node, args, kwargs)
        if name in ("enumerate", "iter") and args and args[0].kind == "loader":
            return args[0]  # batches = enumerate(loader): iterates the loader
        return out

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
        out = super().call_method(meth, obj, obj_node, node, args, kw)
        if obj.kind == "loaded" and out.kind == "loaded":
            note_part(out, obj, self.loads)  # ckpt.get("model"): read by ckpt's torch.load
        elif meth == "load_state_dict" and args and args[0].kind == "loaded":
            ev = self.facts.events[-1] if self.facts.events else None
            if ev is not None and ev.kind == "load" and ev.node is node:
                ev.data["origin"] = origin_of(args[0], self.loads)
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
        if type(node) not in _FLOW_NODES:
            return super()._eval(node)
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
        if isinstance(node, ast.Subscript):
            out = super()._eval(node)
            if out.kind == "loaded":
                # ckpt["model"]: read by ckpt's torch.load
                note_part(out, self.cache.get(node.value, out), self.loads)
            return out
        return super()._eval(node)

    def environ_item(self, node: ast.expr) -> bool:
        """``os.environ[k]``, ``os.environ.get(k…)`` or ``os.getenv(k…)``."""
        if isinstance(node, ast.Subscript):
            return self.resolve(node.value) == "os.environ"
        return isinstance(node, ast.Call) and self.resolve(node.func) in _GETENV

    def bind(self, target: ast.AST, val: Val, value_node: ast.AST) -> None:
        if (
            isinstance(target, (ast.Tuple, ast.List))
            and not isinstance(value_node, (ast.Tuple, ast.List))
            and len(val.extra) == len(target.elts)
            and all(isinstance(v, Val) for v in val.extra)
            and not any(isinstance(e, ast.Starred) for e in target.elts)
        ):
            # train_loader, eval_loader = create_loaders(…), whose `return a, b` was
            # followed: each name gets its value (DeepSpeed-Chat's create_datasets)
            for sub, item in zip(target.elts, val.extra, strict=True):
                self.bind(sub, item, value_node)  # type: ignore[arg-type]
            return
        super().bind(target, val, value_node)

    def dataloader(self, node: ast.Call, args: list[Val], kw: dict[str, Val]) -> Val:
        key = dotted_name(keyword(node, "sampler"))
        if key is not None:
            self.loader_samplers.add(key)
        return super().dataloader(node, args, kw)

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
                {
                    "outer": tuple(self.loop_stack),
                    "shuffle": bool(sampler.extra[:1] == (True,)),
                    "evaluates": _evaluates(stmt) or _eval_data(stmt.iter, sampler.node),
                },
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


def _evaluates(loop: ast.For | ast.AsyncFor) -> bool:
    """Whether a loop over a DataLoader evaluates: ``torch.no_grad()``, ``inference_mode``
    or ``.eval()`` in its body and no ``backward()``/``step()``/``zero_grad()``. Its order
    does not matter (Hugging Face's evaluate() over a DistributedSampler that shuffles by
    default, run once per checkpoint)."""
    evaluating = False
    for node in ast.walk(loop):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("backward", "step", "zero_grad"):
                return False
            evaluating = evaluating or name in ("no_grad", "inference_mode", "eval")
    return evaluating


_EVAL_WORDS = frozenset({"eval", "evaluation", "val", "valid", "validation", "test", "dev"})


def _eval_data(*nodes: ast.AST | None) -> bool:
    """Whether the loop's DataLoader, or the sampler's dataset, is named for evaluation
    (``eval_dataloader``, ``DistributedSampler(val_set)``): a pass over it that sums
    scores (bertology's head importance) is no epoch of training."""
    for top in nodes:
        if top is None:
            continue
        for count, node in enumerate(ast.walk(top)):
            if count >= _MAX_ITER_NODES:
                break
            name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
            if isinstance(name, str) and _EVAL_WORDS & set(name.lower().split("_")):
                return True
    return False
