"""AMP rules: deprecated torch.cuda.amp, GradScaler with bf16 autocast or 16-bit parameters.

Sources (torch 2.13): torch/cuda/amp/autocast_mode.py, torch/cuda/amp/grad_scaler.py
and torch/cpu/amp/autocast_mode.py (the ``@deprecated`` FutureWarning texts, since
torch 2.4); torch/amp/grad_scaler.py (``unscale_`` raises "Attempting to unscale
FP16 gradients." for float16 gradients, and leaves an optimizer with
``_step_supports_amp_scaling`` to unscale its own); aten/src/ATen/native/cuda/
AmpKernels.cu (the CUDA unscale kernel has no bfloat16 version); the AMP docs:
bfloat16 has float32's exponent range and needs no loss scaling.
"""

from __future__ import annotations

import ast

from gpudiag.findings.texts import UNSCALE_BF16_CUDA, UNSCALE_FP16
from gpudiag.lint import names as N
from gpudiag.lint import shown
from gpudiag.lint.codes import Hit, hit
from gpudiag.lint.facts import Event, Facts
from gpudiag.lint.syntax import argument
from gpudiag.model import Severity

#: the arguments a deprecation text shows, when not "(args...)"
_ARGS = {"torch.cuda.amp.autocast_mode._cast": "(value, dtype)"}
#: calls whose second argument names a type, not a use of it
_TYPE_CHECKS = frozenset({"isinstance", "issubclass", "assertIsInstance", "assertNotIsInstance"})


def deprecated_rules(facts: Facts) -> list[Hit]:
    """Every call (and every ``from torch.cuda.amp import …`` line) of a deprecated name.

    A use is reported wherever the walker reads it, called or not (a library's function
    is called from elsewhere): the FutureWarning comes whenever the line runs on torch
    >= 2.4, whatever torch the repository pins. Under a torch-version gate or in an
    except fallback the line runs only on old torch (gpudiag.lint.gates: info). An
    import line whose names nothing in the file uses warns of nothing itself: info."""
    by_line: dict[int, list[tuple[str, str]]] = {}
    cols: dict[int, int] = {}
    imports: dict[int, list[Event]] = {}
    uses: dict[int, bool] = {}
    for ev in facts.of("amp_deprecated"):
        shown_name, replacement = N.DEPRECATED_AMP[ev.text("path")]
        names = by_line.setdefault(ev.line, [])
        if (shown_name, replacement) not in names:
            names.append((shown_name, replacement))
        cols.setdefault(ev.line, ev.col)
        if ev.data.get("import"):
            imports.setdefault(ev.line, []).append(ev)
        else:
            uses[ev.line] = True
    used = _used_imports(facts, [ev for evs in imports.values() for ev in evs])
    out: list[Hit] = []
    for line, names in sorted(by_line.items()):
        shown_names = " and ".join(n for n, _ in names)
        verb = "is" if len(names) == 1 else "are"
        idle = line in imports and not uses.get(line) and line not in used
        message = (
            f"{shown_names} {verb} deprecated since torch 2.4, imported here but not used "
            "in this file: nothing here warns."
            if idle
            else f"{shown_names} {verb} deprecated since torch 2.4 and "
            f"warn{'s' if verb == 'is' else ''} on every use."
        )
        out.append(
            hit(
                line,
                cols[line],
                "LINT-AMP-DEPRECATED",
                "info" if idle else "warning",
                message,
                "Use " + "; ".join(r for _, r in names) + ".",
                " ".join(
                    f"FutureWarning: `{n}{_ARGS.get(n, '(args...)')}` is deprecated. "
                    f"Please use `{r}` instead."
                    for n, r in names
                ),
                names[0][0],
            )
        )
    return out


def _used_imports(facts: Facts, events: list[Event]) -> set[int]:
    """The lines of the import events whose imported name the file uses: as a value, a call or a
    decorator; not only as the type of an ``isinstance`` check or in an annotation.
    One walk of the tree, for a file that imports a deprecated name."""
    if not events or facts.tree is None:
        return set()
    local: dict[str, list[Event]] = {}
    for ev in events:
        stmt = ev.node
        if not isinstance(stmt, ast.ImportFrom):
            continue
        for alias in stmt.names:
            if f"{stmt.module}.{alias.name}" == ev.text("path"):
                local.setdefault(alias.asname or alias.name, []).append(ev)
    skip: set[int] = set()
    found: set[str] = set()
    for node in ast.walk(facts.tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in _TYPE_CHECKS and len(node.args) > 1:
                skip.update(id(n) for n in ast.walk(node.args[1]))
        elif isinstance(node, ast.arg) and node.annotation is not None:
            skip.update(id(n) for n in ast.walk(node.annotation))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns:
            skip.update(id(n) for n in ast.walk(node.returns))
        elif isinstance(node, ast.AnnAssign):
            skip.update(id(n) for n in ast.walk(node.annotation))
        elif (
            isinstance(node, ast.Name)
            and node.id in local
            and isinstance(node.ctx, ast.Load)
            and id(node) not in skip
        ):
            found.add(node.id)
    return {ev.line for name in found for ev in local[name]}


def scaler_rules(facts: Facts) -> list[Hit]:
    scalers = [s for s in facts.of("scaler") if not s.data.get("conditional")]
    if not scalers:
        return []
    out: list[Hit] = []
    autocasts = facts.of("autocast")
    cuda_casts = [a for a in autocasts if a.data.get("device_type") != "cpu"]
    if cuda_casts and all(a.data.get("dtype") == "bf16" for a in cuda_casts):
        for scaler in scalers:
            out.append(
                hit(
                    scaler.line,
                    scaler.col,
                    "LINT-SCALER-BF16",
                    "warning",
                    f"GradScaler is used with bf16 autocast (line {cuda_casts[0].line}): "
                    "bfloat16 has float32's exponent range, so gradients do not underflow "
                    "and loss scaling is not needed.",
                    "Drop the GradScaler with bf16: loss.backward(); optimizer.step(). Keep "
                    "it only for float16 autocast.",
                    "silent: no error; the scaler only adds work (and skips steps whose "
                    "gradients hold inf/NaN)",
                    None,
                )
            )
    return out + _param_hits(facts, scalers)


def _related(owners: str, key: str) -> bool:
    """``model`` and ``model``, ``model.module`` or ``model.encoder``: the same weights
    (``owners``: the dotted names an optimizer's parameters come from, blank-separated)."""
    return any(
        owner == key or owner.startswith(key + ".") or key.startswith(owner + ".")
        for owner in owners.split()
    )


def _own_scaling(facts: Facts) -> bool:
    """The file writes an optimizer class that unscales its own gradients."""
    return any("_step_supports_amp_scaling" in line for line in facts.source_lines)


def _torch_optim(path: str) -> bool:
    return path.startswith("torch.optim.")


def _scaler_device(scaler: Event) -> str | None:
    """``cuda``, ``cpu`` (or another) for the GradScaler's device; None when computed."""
    if ".cuda." in scaler.text("path"):
        return "cuda"
    node = scaler.node
    where = argument(node, 0, "device") if isinstance(node, ast.Call) else None
    if where is None:
        return "cuda"  # torch.amp.GradScaler(device="cuda") is the default
    if isinstance(where, ast.Constant) and isinstance(where.value, str):
        return where.value.split(":")[0]
    return None


def _param_hits(facts: Facts, scalers: list[Event]) -> list[Hit]:
    """LINT-SCALER-FP16-PARAMS: each line that makes a model's weights float16 (or
    bfloat16, under a CUDA scaler) in a process that makes or steps a GradScaler.

    error: a torch.optim optimizer over those weights is stepped (``scaler.step`` /
    ``unscale_``) by the scaler after the line: torch raises. warning: the optimizer
    over them is torch's, but the step is not seen (another function or module).
    info: its optimizer is not torch.optim's (it may unscale its own gradients:
    ``_step_supports_amp_scaling``), or no optimizer over them is visible."""
    first: dict[str, Event] = {}
    for made in scalers:
        first.setdefault(made.proc, made)
    made_at = {id(made.node): made for made in scalers}
    optimizers = facts.of("optimizer")
    steps: dict[str, list[Event]] = {}
    for step in facts.of("scaler_step"):
        steps.setdefault(step.proc, []).append(step)
        # a method that steps the scaler its class's __init__ made (self.scaler)
        scaler_of = made_at.get(id(step.data.get("scaler")))
        if scaler_of is not None:
            first.setdefault(step.proc, scaler_of)
    out: list[Hit] = []
    # `model = model.cuda().half()` is two events: the call's (a module, no name yet)
    # and the binding's (the name): one line, one model
    modules = {ev.line for ev in facts.of("half") if ev.data.get("module")}
    seen: set[int] = set()
    for ev in facts.of("half"):
        scaler = first.get(ev.proc)
        dtype = ev.data.get("dtype")
        key = ev.text("key")
        if scaler is None or not key or ev.line in seen:
            continue
        if not (ev.line in modules or key in facts.param_owners):
            continue
        device = _scaler_device(scaler)
        if dtype == "bf16" and device not in ("cuda", None):
            continue  # the CPU kernel unscales bfloat16
        if dtype not in ("fp16", "bf16"):
            continue
        seen.add(ev.line)
        mine = [o for o in optimizers if _related(o.text("owner"), key)]
        torch_opt = [o for o in mine if _torch_optim(o.text("path"))]
        proven = [
            s
            for s in steps.get(ev.proc, [])
            if s.seq > ev.seq and _torch_optim(s.text("path")) and _related(s.text("owner"), key)
        ]
        stepped = [s.text("path") for s in steps.get(ev.proc, [])]
        other = next(
            (p for p in [*(o.text("path") for o in mine), *stepped] if p and not _torch_optim(p)),
            "",
        )
        severity: Severity
        if not torch_opt and not other and "" in stepped and not _own_scaling(facts):
            # the scaler steps an optimizer made where lint cannot see: most are torch's
            severity, why = "warning", ""
        elif not torch_opt:
            severity = "info"
            if other:
                why = (
                    f" Its optimizer ({shown.text(other.rsplit('.', 1)[-1])}) is not "
                    "torch.optim's and may unscale its own gradients "
                    "(_step_supports_amp_scaling, as apex's fused optimizers do)."
                )
            elif "" in stepped:
                why = (
                    " The file defines an optimizer that unscales its own gradients "
                    "(_step_supports_amp_scaling)."
                )
            elif stepped:
                why = " The optimizer the scaler steps holds other parameters (maybe frozen)."
            else:
                why = " No optimizer over them is visible in this file."
        elif proven and (dtype == "fp16" or device == "cuda"):
            severity, why = "error", ""
        else:
            severity, why = "warning", ""
        half = dtype == "fp16"
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-SCALER-FP16-PARAMS",
                severity,
                f"The model's parameters are made {'float16' if half else 'bfloat16'} here "
                f"({shown.text(ev.text('text', key))}), "
                f"and the GradScaler made at line {scaler.line} unscales their gradients: "
                + (
                    "GradScaler needs float32 parameters (autocast, not .half(), gives the "
                    "float16 speed)."
                    if half
                    else "the CUDA unscale kernel has no bfloat16 version (and bfloat16 "
                    "needs no loss scaling)."
                )
                + why,
                "Keep the model in float32 and run the forward under torch.autocast('cuda', "
                "dtype=torch.float16); drop .half() / .to(torch.float16) / torch_dtype=."
                if half
                else "Drop the GradScaler for bfloat16 weights (loss.backward(); "
                "optimizer.step()), or keep them float32 under torch.autocast.",
                UNSCALE_FP16 if half else UNSCALE_BF16_CUDA,
                None,
            )
        )
    return out
