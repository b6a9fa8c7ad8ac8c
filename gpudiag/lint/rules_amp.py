"""AMP rules: deprecated torch.cuda.amp, GradScaler with bf16 autocast or float16 parameters.

Sources (torch 2.13): torch/cuda/amp/autocast_mode.py, torch/cuda/amp/grad_scaler.py
and torch/cpu/amp/autocast_mode.py (the ``@deprecated`` FutureWarning texts, since
torch 2.4); torch/amp/grad_scaler.py (``unscale_`` raises "Attempting to unscale
FP16 gradients." for float16 gradients); the AMP docs: bfloat16 has float32's
exponent range and needs no loss scaling.
"""

from __future__ import annotations

from gpudiag.findings.texts import UNSCALE_FP16
from gpudiag.lint import names as N
from gpudiag.lint import shown
from gpudiag.lint.codes import Hit, hit
from gpudiag.lint.facts import Facts


def deprecated_rules(facts: Facts) -> list[Hit]:
    """Every call (and every ``from torch.cuda.amp import …`` line) of a deprecated name."""
    by_line: dict[int, list[tuple[str, str]]] = {}
    cols: dict[int, int] = {}
    for ev in facts.of("amp_deprecated"):
        shown, replacement = N.DEPRECATED_AMP[ev.text("path")]
        names = by_line.setdefault(ev.line, [])
        if (shown, replacement) not in names:
            names.append((shown, replacement))
        cols.setdefault(ev.line, ev.col)
    out: list[Hit] = []
    for line, names in sorted(by_line.items()):
        shown = " and ".join(n for n, _ in names)
        verb = "is" if len(names) == 1 else "are"
        out.append(
            hit(
                line,
                cols[line],
                "LINT-AMP-DEPRECATED",
                "warning",
                f"{shown} {verb} deprecated since torch 2.4 and warn{'s' if verb == 'is' else ''} "
                "on every use.",
                "Use " + "; ".join(r for _, r in names) + ".",
                " ".join(
                    f"FutureWarning: `{n}(args...)` is deprecated. Please use `{r}` instead."
                    for n, r in names
                ),
                names[0][0],
            )
        )
    return out


def scaler_rules(facts: Facts) -> list[Hit]:
    scalers = [s for s in facts.of("scaler") if not s.data.get("conditional")]
    if not scalers:
        return []
    out: list[Hit] = []
    scaler = scalers[0]
    autocasts = facts.of("autocast")
    cuda_casts = [a for a in autocasts if a.data.get("device_type") != "cpu"]
    if cuda_casts and all(a.data.get("dtype") == "bf16" for a in cuda_casts):
        out.append(
            hit(
                scaler.line,
                scaler.col,
                "LINT-SCALER-BF16",
                "warning",
                f"GradScaler is used with bf16 autocast (line {cuda_casts[0].line}): bfloat16 "
                "has float32's exponent range, so gradients do not underflow and loss scaling "
                "is not needed.",
                "Drop the GradScaler with bf16: loss.backward(); optimizer.step(). Keep it "
                "only for float16 autocast.",
                "silent: no error; the scaler only adds work (and skips steps whose "
                "gradients hold inf/NaN)",
                None,
            )
        )
    scaler_procs = {s.proc for s in scalers}  # a set: a scan per event was quadratic (issue 21)
    for ev in facts.of("half"):
        if ev.data.get("dtype") != "fp16" or ev.proc not in scaler_procs:
            continue
        key = ev.text("key")
        if not (ev.data.get("module") or (key and key in facts.param_owners)):
            continue
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-SCALER-FP16-PARAMS",
                "error",
                f"The model's parameters are made float16 here "
                f"({shown.text(ev.text('text', key))}), "
                f"and the GradScaler made at line {scaler.line} unscales their gradients: "
                "GradScaler needs float32 parameters (autocast, not .half(), gives the "
                "float16 speed).",
                "Keep the model in float32 and run the forward under torch.autocast('cuda', "
                "dtype=torch.float16); drop .half() / .to(torch.float16).",
                UNSCALE_FP16,
                None,
            )
        )
        break
    return out
