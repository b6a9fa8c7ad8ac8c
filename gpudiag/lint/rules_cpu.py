"""Rules on CPU objects handed to GPU-only calls: ``DistributedDataParallel(device_ids=…)``
on a module still on the CPU, and a collective on a CPU tensor in an NCCL-only group.

Sources (torch 2.13): torch/nn/parallel/distributed.py (the device_ids ValueError,
:data:`~gpudiag.findings.texts.DDP_DEVICE_IDS_CPU`), torch/distributed/distributed_c10d.py
(a group's backends by device type; "No backend type associated with device type cpu").
"""

from __future__ import annotations

import re

from gpudiag.findings.texts import DDP_DEVICE_IDS_CPU, NO_BACKEND_CPU
from gpudiag.lint import shown
from gpudiag.lint.codes import Hit, hit
from gpudiag.lint.facts import Facts
from gpudiag.lint.values import Val, int_list

_DEFAULT_DEVICE_RE = re.compile(r"set_default_device|with\s+torch\.device\(")


def _default_device(facts: Facts) -> bool:
    """The file sets a default device (``torch.set_default_device``, ``with
    torch.device(…)``): modules and tensors are made there, which the walker does not
    follow. Read from the text, once per file."""
    found = facts.cache.get("default_device")
    if not isinstance(found, bool):
        found = facts.cache["default_device"] = any(
            _DEFAULT_DEVICE_RE.search(line) for line in facts.source_lines
        )
    return found


def ddp_cpu_rules(facts: Facts) -> list[Hit]:
    """DDP(module, device_ids=[…]) on a module the script builds on the CPU and never
    moves: its own class, ``torch.nn.*``, ``torchvision.models.*``, one looked up by name
    (``models.__dict__[arch]()``, ``getattr(models, arch)()``) or ``timm.create_model``.
    torch 2.13 torch/nn/parallel/distributed.py raises the ValueError in
    :data:`~gpudiag.findings.texts.DDP_DEVICE_IDS_CPU`. An error when nothing else can
    have moved the module: a warning when it was handed to another function on the way
    (which may move it in place), info in a function nothing in the file calls, none under
    a default device (``with torch.device``)."""
    out: list[Hit] = []
    gloo = any(e.data.get("backend") == "gloo" for e in facts.of("init_pg"))
    for ev in facts.of("ddp"):
        ids = ev.data.get("ids")
        if not ev.data.get("ids_given") or not isinstance(ids, Val):
            continue
        if ids.has_const and not ids.const:  # None or []
            continue
        module = ev.val
        if module is None:
            continue
        on_cpu = module.device is None or module.device[0] == "cpu"
        # only a model the script builds itself (its own class, torch.nn.*, torchvision)
        if not on_cpu or module.kind != "module":
            continue
        if _default_device(facts):
            continue  # built under a default device the walker does not follow
        from gpudiag.lint.flow import passed_to_a_call  # imported on a candidate only

        handed = module.node is not None and passed_to_a_call(
            facts, ev.text("module_key"), module.node, ev.node
        )
        id_list = int_list(ids)
        ids_text = (
            shown.int_list(id_list) if id_list is not None else shown.text(ev.text("ids_text"))
        )
        out_val = ev.data.get("out")
        out_text = "None"
        if ev.data.get("out_given") and isinstance(out_val, Val):
            out_text = _const_text(out_val.const) if out_val.has_const else "…"
        backend = " (backend gloo)" if gloo else ""
        module_text = shown.text(ev.text("module_text"))
        unless = (
            f" (unless the call that {module_text} is handed to on the way moves it)"
            if handed
            else ""
        )
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-DDP-DEVICE-IDS-CPU",
                # a function nothing in the file calls: what its objects hold depends on
                # a caller lint does not see (issue 17: timm's task class was handed a
                # student model the caller had already moved)
                "info" if ev.proc.startswith("def:") else "warning" if handed else "error",
                f"DistributedDataParallel gets device_ids={shown.text(ev.text('ids_text'))} but "
                f"the module {module_text} is still on the CPU{backend}{unless}: "
                "device_ids is only "
                "for a module that lives on one GPU.",
                "Move the module to its GPU first (model.to(local_rank)) and keep "
                "device_ids=[local_rank]; for CPU training with gloo, drop device_ids: "
                "DDP(model).",
                DDP_DEVICE_IDS_CPU.format(ids=ids_text, out=out_text),
                None,
            )
        )
    return out


def cpu_collective_rules(facts: Facts) -> list[Hit]:
    """A collective on a CPU tensor when the only backend is NCCL (torch 2.13: a process
    group made with ``backend="nccl"`` has no CPU backend; with no backend given torch
    creates gloo for CPU and NCCL for CUDA, so that case is fine). A collective in a group
    of its own (``group=``) runs on that group's backend: ``dist.new_group(backend="gloo")``
    takes CPU tensors (issue 17: Megatron-LM's gloo control group), one with no backend
    gets the default group's, and one the file does not make is not known (info)."""
    inits = facts.of("init_pg")
    if not inits or any(e.data.get("backend") != "nccl" for e in inits):
        return []
    if facts.of("cpu_collective") and _default_device(facts):
        return []  # tensors made under torch.set_default_device("cuda") are on the GPU
    out: list[Hit] = []
    for ev in facts.of("cpu_collective"):
        group = ev.text("group", "default")
        if "gloo" in group or group not in ("default", "nccl", "unknown"):
            continue  # a gloo group (or another backend) takes CPU tensors
        unknown = group == "unknown"
        what = f"dist.{ev.text('what')}() gets a tensor on the CPU"
        msg = (
            f"{what} in the group {shown.text(ev.text('group_text'))}, made where lint does "
            "not see its backend: an NCCL group (as the default group is here) only moves "
            "CUDA tensors, a gloo group takes this one."
            if unknown
            else f"{what}, but the process group was made with backend='nccl' (line "
            f"{inits[0].line}), which only moves CUDA tensors."
        )
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-NCCL-CPU-TENSOR",
                "info" if unknown else "error",
                msg,
                "Move the tensor to this rank's GPU first (t = t.cuda(), after "
                "torch.cuda.set_device(local_rank)), or create the group with "
                "backend='cpu:gloo,cuda:nccl' (or a gloo group) for CPU collectives.",
                NO_BACKEND_CPU,
                None,
            )
        )
    return out


def _const_text(value: object) -> str:
    """A constant from the script as torch's message prints it, bounded (issue 21)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return shown.number(value)
    return shown.text(str(value))
