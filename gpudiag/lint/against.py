"""``gpudiag lint --check``: feed the script's hard-coded values to ``check``'s validators.

The values a script writes as literals (``CUDA_VISIBLE_DEVICES``, ``device_ids``,
``output_device``, ``set_device(N)``, where the model is moved, the DDP backend,
the autocast dtype) become a :class:`~gpudiag.core.request.CheckRequest` for
:func:`gpudiag.core.check.run_check`, unchanged; each finding it returns is placed
at the line of the script that supplied the value. Findings about the machine alone (health,
inventory) are left to ``gpudiag check``.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpudiag.core.check import Report, run_check
from gpudiag.core.request import FROM_SNAPSHOT, CheckRequest, RequestError
from gpudiag.core.visibility import DriverAsker
from gpudiag.errors import GpudiagInputError
from gpudiag.lint.codes import Hit, LintFinding
from gpudiag.lint.exprs import MAX_CONST_ITEMS
from gpudiag.lint.facts import Event, Facts
from gpudiag.lint.rules_dp import script_mask
from gpudiag.lint.rules_env import torch_import_inits
from gpudiag.lint.values import Val, as_int, int_list
from gpudiag.model import Snapshot


@dataclass
class ScriptValues:
    """The literals found, each with the event that wrote it."""

    visible: tuple[str, Event] | None = None
    order: tuple[str, Event] | None = None
    device_ids: tuple[list[int], Event] | None = None
    dataparallel: Event | None = None
    output_device: tuple[int, Event] | None = None
    set_device: tuple[int, Event] | None = None
    module_device: tuple[str, Event] | None = None
    backend: tuple[str, Event] | None = None
    ddp: Event | None = None
    amp: tuple[str, Event] | None = None
    given: list[str] = field(default_factory=list)


def script_values(facts: Facts) -> ScriptValues:
    """What a script hard-codes that ``check`` understands."""
    out = ScriptValues()
    dp = facts.first("dp")
    anchor = dp or facts.first("set_device") or facts.first("init_pg")
    if anchor is not None:
        mask = script_mask(facts, anchor)
        if mask is not None:
            out.visible = (",".join(mask[1].entries), mask[0])
    elif facts.of("env_set"):
        last = facts.events[-1]
        mask = script_mask(facts, last)
        if mask is not None:
            out.visible = (",".join(mask[1].entries), mask[0])
    out.order = _script_order(facts, anchor)
    for ev in facts.of("set_device"):
        k = as_int(ev.val) if ev.val is not None else None
        if k is not None and ev.proc == (dp.proc if dp else ev.proc):
            out.set_device = (k, ev)
            break
    if dp is not None:
        out.dataparallel = dp
        ids_val = dp.data.get("ids")
        ids = int_list(ids_val) if isinstance(ids_val, Val) else None
        _refuse_long_literal(ids_val, dp)
        if ids is not None:
            out.device_ids = (ids, dp)
        out_val = dp.data.get("out")
        k = as_int(out_val) if isinstance(out_val, Val) else None
        if k is not None:
            out.output_device = (k, dp)
        module = dp.val
        if module is not None and module.device is not None:
            kind, index = module.device
            if kind == "cpu":
                out.module_device = ("cpu", dp)
            elif kind == "cuda" and index is None:
                out.module_device = ("cuda", dp)
            elif kind == "cuda" and isinstance(index, int):
                out.module_device = (f"cuda:{index}", dp)
    init = facts.first("init_pg")
    if init is not None:
        backend = init.data.get("backend")
        if backend in ("nccl", "gloo"):
            out.backend = (str(backend), init)
    out.ddp = facts.first("ddp")
    for ev in facts.of("autocast"):
        dtype = ev.data.get("dtype")
        if ev.data.get("device_type") == "cuda" and dtype in ("bf16", "fp16"):
            out.amp = (str(dtype), ev)
            break
    return out


def _script_order(facts: Facts, anchor: Event | None) -> tuple[str, Event] | None:
    """The literal CUDA_DEVICE_ORDER the script sets before ``anchor`` (or at all) and
    before CUDA initialises in its process: check must resolve with it (issue 20:
    lint --check ignored a script's os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID")."""
    sets = [
        e
        for e in facts.of("env_set")
        if e.text("var") == "CUDA_DEVICE_ORDER"
        and isinstance(e.data.get("value"), str)
        and (anchor is None or e.seq < anchor.seq)
    ]
    for ev in reversed(sets):
        init = facts.first_in("cuda_init", ev.proc)
        if init is None or ev.seq < init.seq:
            return str(ev.data["value"]), ev
    return None


def _refuse_long_literal(ids_val: object, dp: Event) -> None:
    """A ``device_ids`` literal longer than the walker reads as a constant (issue 21).
    Fed as "not given", check would say DataParallel uses the default ids, which the
    script does not; its whole list cannot be fed either (100,000 ids printed 9.9 MB).

    Raises:
        GpudiagInputError: always, for such a literal (one line, exit 2).
    """
    node = ids_val.node if isinstance(ids_val, Val) else None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and len(node.elts) > MAX_CONST_ITEMS:
        raise GpudiagInputError(
            f"the script's device_ids (line {dp.line}) lists {len(node.elts)} ids; lint "
            f"--check reads a device_ids literal of at most {MAX_CONST_ITEMS} (docs/lint.md)"
        )


def _line_for(code: str, values: ScriptValues) -> Event | None:
    if code.startswith("DP-SET-DEVICE-") and values.set_device is not None:
        return values.set_device[1]
    if code.startswith("DP-"):
        if values.dataparallel is not None:
            return values.dataparallel
        return values.set_device[1] if values.set_device is not None else None
    if code.startswith("DDP-"):
        if values.backend is not None:
            return values.backend[1]
        return values.ddp
    if code.startswith("HEALTH-AMP-") and values.amp is not None:
        return values.amp[1]
    if code.startswith("VIS-ORDER-") and values.order is not None:
        return values.order[1]
    if code.startswith("VIS-") and values.visible is not None:
        return values.visible[1]
    return None


def script_request(v: ScriptValues) -> CheckRequest:
    """The :class:`CheckRequest` for the script's hard-coded values.

    Raises:
        GpudiagInputError: a literal ``check`` cannot take, named by the script's line.
    """
    try:
        return CheckRequest(
            visible=v.visible[0] if v.visible is not None else FROM_SNAPSHOT,
            order=v.order[0] if v.order is not None else FROM_SNAPSHOT,
            device_ids=v.device_ids[0] if v.device_ids is not None else None,
            dataparallel=v.dataparallel is not None,
            output_device=v.output_device[0] if v.output_device is not None else None,
            set_device=v.set_device[0] if v.set_device is not None else None,
            module_device=v.module_device[0] if v.module_device is not None else None,
            backend=v.backend[0] if v.backend is not None else None,
            amp=v.amp[0] if v.amp is not None else None,
        )
    except RequestError as exc:
        raise GpudiagInputError(exc.worded(lambda f: _script_spelling(f, v))) from None


#: How a script writes each value lint --check reads.
_SCRIPT_NAMES = {
    "visible": "CUDA_VISIBLE_DEVICES",
    "order": "CUDA_DEVICE_ORDER",
    "device_ids": "device_ids",
    "dataparallel": "DataParallel",
    "output_device": "output_device",
    "set_device": "torch.cuda.set_device",
    "module_device": "the model's device",
    "backend": "init_process_group backend",
    "amp": "autocast dtype",
}


def _script_spelling(field: str, v: ScriptValues) -> str:
    """``the script's device_ids (line 7)``: where the value came from."""
    value = getattr(v, field, None)
    ev = value if isinstance(value, Event) else value[1] if isinstance(value, tuple) else None
    where = f" (line {ev.line})" if ev is not None else ""
    return f"the script's {_SCRIPT_NAMES.get(field, field)}{where}"


def check_script(
    facts: Facts,
    snapshot: Snapshot,
    *,
    env: Mapping[str, str],
    driver: DriverAsker | None = None,
) -> tuple[list[Hit], Report]:
    """Run ``check`` with the script's values; its findings placed at the script's lines.

    The snapshot knows torch's version, which lint alone does not: under torch 1.12.0
    ``import torch`` initialised CUDA, so a CUDA_VISIBLE_DEVICES set after it is ignored
    (LINT-CVD-AFTER-CUDA-INIT, :func:`~gpudiag.lint.rules_env.torch_import_inits`) and
    check runs with the mask the process really has."""
    v = script_values(facts)
    torch_version = snapshot.torch.version if snapshot.torch is not None else None
    hits: list[Hit] = torch_import_inits(facts, torch_version)
    ignored = {h.line for h in hits}
    if v.visible is not None and v.visible[1].line in ignored:
        v.visible = None
    if v.order is not None and v.order[1].line in ignored:
        v.order = None
    report = run_check(snapshot, script_request(v), env=env, driver=driver)
    for finding in report.findings:
        ev = _line_for(finding.code, v)
        if ev is not None:
            hits.append(Hit(ev.line, ev.col, finding))
    return hits, report


#: The check finding codes each lint rule duplicates: the same torch error, predicted
#: for the same call. ``lint --check`` keeps the check finding (it names the physical
#: GPUs) and drops the lint one when both are on the same line.
DUPLICATES: Mapping[str, frozenset[str]] = {
    "LINT-IDS-UNDER-MASK": frozenset(
        {
            "DP-INVALID-DEVICE-ID",
            "DP-OUTPUT-DEVICE-INVALID",
            "DP-SET-DEVICE-INVALID",
            "DP-MODULE-DEVICE-INVALID",
        }
    ),
    "LINT-DP-MODULE-DEVICE": frozenset({"DP-MODULE-DEVICE-MISMATCH"}),
}
#: Lint findings that a finding ``--check`` adds on the same line corrects: under torch
#: 1.12.0 the info "set after import torch … this works" is wrong, and the snapshot's
#: torch version says so (:func:`~gpudiag.lint.rules_env.torch_import_inits`).
CORRECTED: Mapping[str, str] = {"LINT-CVD-AFTER-IMPORT": "LINT-CVD-AFTER-CUDA-INIT"}


def merge(lint_hits: list[Hit], check_hits: list[Hit]) -> list[Hit]:
    """Both lists; a lint finding that :data:`DUPLICATES` a check finding on the same
    line is dropped (the validator's names the physical GPUs), and so is one a finding
    of ``--check`` :data:`CORRECTED` on that line."""
    covered = {(h.line, h.finding.code) for h in check_hits}
    kept = [
        h
        for h in lint_hits
        if not any((h.line, code) in covered for code in DUPLICATES.get(h.finding.code, ()))
        and (h.line, CORRECTED.get(h.finding.code)) not in covered
    ]
    return kept + check_hits


def lint_with_check(
    path: str,
    facts: Facts,
    text: str,
    snapshot: Snapshot,
    *,
    env: Mapping[str, str],
    driver: DriverAsker | None = None,
) -> tuple[list[LintFinding], Report]:
    """``lint --check`` on one script: its lint findings and ``check``'s with the values
    it hard-codes, merged and placed (suppressions applied); and the check report."""
    from gpudiag.lint.source import rules  # source imports the rules, not this
    from gpudiag.lint.suppression import place

    hits, report = check_script(facts, snapshot, env=env, driver=driver)
    return place(path, merge(rules(facts), hits), text), report
