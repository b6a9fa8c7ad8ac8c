"""What the GradScaler rules need from calls: optimizers, their parameters, and
16-bit weights set by ``torch_dtype=``.

Sources (torch 2.13): torch/amp/grad_scaler.py. ``GradScaler.unscale_`` (and ``step``,
which calls it) walks ``optimizer.param_groups`` and raises "Attempting to unscale FP16
gradients." for a float16 gradient; ``step`` leaves an optimizer with
``_step_supports_amp_scaling`` (apex's fused and ZeRO-style optimizers) to unscale
its own gradients. So only a torch.optim optimizer over the float16 model proves the
failure; another optimizer may do its own unscaling.
"""

from __future__ import annotations

import ast

from gpudiag.lint.calls import CallSemantics
from gpudiag.lint.facts import Event
from gpudiag.lint.syntax import argument, dotted_name, keyword
from gpudiag.lint.values import Val

#: torch's own optimizers (torch.optim.Adam, torch.optim.adamw.AdamW), not its schedulers
_NOT_OPTIM = ("torch.optim.lr_scheduler.", "torch.optim.swa_utils.")
#: another library's optimizer class (apex FusedAdam, DistributedFusedLAMB, bnb AdamW8bit)
_OPTIM_TOKENS = ("Adam", "LAMB", "Lamb", "SGD", "Optim", "Lion", "Adagrad", "RMSprop", "LARS")
#: nodes read in an optimizer's first argument to find whose parameters it holds
_MAX_PARAM_NODES = 64
#: calls followed down a chain (`X.from_pretrained(…, torch_dtype=…).to(dev).eval()`)
_MAX_CHAIN = 8


def params_owners(arg: ast.expr | None) -> str:
    """``model`` for ``model.parameters()`` (also inside a list, a filter or a
    comprehension over it; ``named_parameters`` too), ``model head`` for both
    models' parameters; "" when none is seen."""
    if arg is None or isinstance(arg, (ast.Name, ast.Attribute, ast.Constant)):
        return ""  # `DataParallel(m)`, `Adam(params)`: no .parameters() call in it
    owners: list[str] = []
    todo: list[ast.AST] = [arg]
    seen = 0
    while todo and seen < _MAX_PARAM_NODES:
        node = todo.pop()
        seen += 1
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("parameters", "named_parameters")
        ):
            name = dotted_name(node.func.value)
            if name is not None and name not in owners:
                owners.append(name)
        todo.extend(ast.iter_child_nodes(node))
    return " ".join(owners)


class AmpCalls(CallSemantics):
    """Optimizers, ``scaler.step(opt)`` / ``unscale_(opt)`` and ``torch_dtype=`` weights."""

    def __init__(self) -> None:
        super().__init__()
        #: an optimizer's call -> (what it resolves to, whose parameters it holds:
        #: dotted names separated by blanks)
        self.optimizers: dict[ast.AST, tuple[str, str]] = {}
        #: a call with torch_dtype=float16/bfloat16 -> its "half" event (named at bind)
        self.dtyped: dict[ast.AST, Event] = {}

    def eval_call(self, node: ast.Call) -> Val:
        val = super().eval_call(node)
        dtype_node = keyword(node, "torch_dtype")
        if dtype_node is not None:
            dtype = self.cache.get(dtype_node)
            if dtype is not None and dtype.kind == "dtype" and dtype.const in ("fp16", "bf16"):
                # from_pretrained(…, torch_dtype=torch.float16): the weights are 16-bit
                self.dtyped[node] = self.event(
                    "half",
                    node,
                    data={
                        "key": "",
                        "dtype": str(dtype.const),
                        "module": True,
                        "text": node,
                        "torch_dtype": True,
                    },
                )
        return val

    def call_path(self, path: str, node: ast.Call, args: list[Val], kw: dict[str, Val]) -> Val:
        val = super().call_path(path, node, args, kw)
        last = path.rpartition(".")[2]
        if not last[:1].isupper():
            return val  # an optimizer is a class: most calls stop here
        torch_optim = path.startswith("torch.optim.") and not path.startswith(_NOT_OPTIM)
        named = any(token in last for token in _OPTIM_TOKENS)
        owner = (
            params_owners(argument(node, 0, "params")) if torch_optim or named or node.args else ""
        )
        if torch_optim or named or owner:
            # apex FusedAdam(model.parameters()), bnb.optim.AdamW8bit(…): an optimizer
            # lint cannot read; only torch.optim's are known to need float32 gradients
            self.optimizers[node] = (path, owner)
            self.event("optimizer", node, data={"path": path, "owner": owner})
            if val.kind in (None, "optimizer") and val.node is not node:
                return Val(kind="optimizer", node=node, tags=val.tags)
        return val

    def call_method(
        self,
        meth: str,
        obj: Val,
        obj_node: ast.expr,
        node: ast.Call,
        args: list[Val],
        kw: dict[str, Val],
    ) -> Val:
        if obj.kind == "scaler" and meth in ("step", "unscale_"):
            opt = args[0] if args else kw.get("optimizer")
            made = opt.node if opt is not None else None
            path, owner = self.optimizers.get(made, ("", "")) if made is not None else ("", "")
            data: dict[str, object] = {"method": meth, "path": path, "owner": owner}
            if obj.node is not None:
                data["scaler"] = obj.node  # the GradScaler(...) call: its line, its event
            self.event("scaler_step", node, data=data)
        return super().call_method(meth, obj, obj_node, node, args, kw)

    def name_dtyped(self, key: str, value_node: ast.AST) -> None:
        """``model = X.from_pretrained(…, torch_dtype=…)…``: the 16-bit model's name."""
        node = value_node
        for _ in range(_MAX_CHAIN):
            if not isinstance(node, ast.Call):
                return
            ev = self.dtyped.get(node)
            if ev is not None:
                if not ev.data.get("key"):
                    ev.data["key"] = key
                return
            if not isinstance(node.func, ast.Attribute):
                return
            node = node.func.value
