"""Rules about the process: CUDA_VISIBLE_DEVICES timing, fork after CUDA, MASTER_PORT.

When torch initialises CUDA (torch 2.13, torch/cuda/__init__.py): lazily, on the
first call that needs the CUDA runtime (``_lazy_init``), never at ``import
torch``. ``torch.cuda.is_available()`` calls ``torch._C._cuda_getDeviceCount()``,
a CUDA runtime call that runs ``cuInit`` without marking torch initialised
(unless ``PYTORCH_NVML_BASED_CUDA_CHECK=1``); ``device_count()`` asks NVML first.
Recorded on an H100 with torch 2.11: a CUDA_VISIBLE_DEVICES change after
``import torch`` or ``device_count()`` was honoured, after ``is_available()``,
``get_device_name()`` or ``.cuda()`` it was ignored.
"""

from __future__ import annotations

from gpudiag.findings.texts import FORK_ERROR
from gpudiag.lint import shown
from gpudiag.lint.codes import Hit, hit
from gpudiag.lint.facts import Event, Facts
from gpudiag.lint.flow import exclusive, uncalled
from gpudiag.model import Severity

_MASK_VARS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
#: visibility variables whose value, copied into the mask, names devices already chosen
#: (ROCm's runtime reads ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES at start-up)
_COPIED = frozenset(
    f"env:{v}" for v in ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
)


def cuda_init_before(facts: Facts, ev: Event) -> Event | None:
    """The first CUDA initialisation in ``ev``'s process that runs before it."""
    first = facts.first_in("cuda_init", ev.proc)
    return first if first is not None and first.seq < ev.seq else None


def _init_in_the_same_run(facts: Facts, ev: Event) -> Event | None:
    """A CUDA initialisation before ``ev`` that can run in the same run: the first one,
    else the last one before ``ev``, unless written in another arm of an ``if`` than
    ``ev`` (``if gpu: x.cuda()`` / ``else: os.environ[...] = ""``)."""
    first = cuda_init_before(facts, ev)
    if first is None or not exclusive(facts, first.node, ev.node):
        return first
    last = facts.last_before("cuda_init", ev.proc, ev.seq)
    if last is not None and not exclusive(facts, last.node, ev.node):
        return last
    return None


def _torch_imported_before(facts: Facts, ev: Event) -> Event | None:
    """The first ``import torch`` in ``ev``'s process or the main one, if before ``ev``."""
    found = [facts.first_in("import_torch", proc) for proc in {ev.proc, "main"}]
    first = min((e for e in found if e is not None), key=lambda e: e.seq, default=None)
    return first if first is not None and first.seq < ev.seq else None


def _shown(ev: Event) -> str:
    value = ev.data.get("value")
    if not isinstance(value, str):
        return ev.text("var")
    return f"{shown.text(ev.text('var'))}={shown.quoted(value)}"


def _import_init_before(facts: Facts, ev: Event, kind: str) -> Event | None:
    """The first import of ``kind`` (``import_cuda_init``: one that always initialises
    CUDA, ``import pycuda.autoinit``; ``import_cuda_init_likely``: ``import deepspeed``)
    in ``ev``'s process or the main one (a spawned child imports the script's modules
    again), if before ``ev``."""
    found = [facts.first_in(kind, proc) for proc in {ev.proc, "main"}]
    first = min((e for e in found if e is not None), key=lambda e: e.seq, default=None)
    return first if first is not None and first.seq < ev.seq else None


def _after_init_hit(facts: Facts, ev: Event, init: Event, *, likely: bool = False) -> Hit:
    # an import that likely initialises CUDA, before a function nothing in the file calls:
    # two things lint does not know (issue 17, the held-out corpus: gpt-neox's tests hold
    # an unused set_cuda_visible() after `import deepspeed`)
    severity: Severity = "error"
    if likely:
        severity = "info" if uncalled(facts, ev.proc, ev.node) else "warning"
    copied = sorted(t.removeprefix("env:") for t in (ev.val.tags if ev.val else ()) if t in _COPIED)
    note = ""
    if copied:
        # CUDA_VISIBLE_DEVICES = os.getenv("ROCR_VISIBLE_DEVICES"): the devices are already
        # chosen by the variable it copies; the write tells code that reads the
        # environment (verl's ROCm workers, in LLaVA-NeXT: a fifteenth held-out corpus of
        # issue 17, a false error)
        severity = "info"
        note = (
            f" Not certain: the value is read from {copied[0]}, which already chose this "
            "process's devices; the write may only tell code that reads the environment."
        )
    var = ev.text("var")
    why = shown.text(init.text("why"))
    by = f"{shown.text(init.text('what'))} at line {init.line}"
    if likely:
        by += f", which initialises CUDA in the releases in use ({why})"
    elif why:
        by += f" ({why})"
    return hit(
        ev.line,
        ev.col,
        "LINT-CVD-AFTER-CUDA-INIT",
        severity,
        f"{_shown(ev)} is set after CUDA was initialised by {by}: CUDA reads {var} "
        "once, at initialisation, so this process keeps the devices it saw then "
        f"and the new value is silently ignored.{note}",
        f"Set {var} before the first CUDA call: at the very top of the script, "
        f"before importing anything that touches torch.cuda, or in the shell "
        f"({var}=… python train.py).",
        f"silent: the new {var} is ignored; torch.cuda.device_count() and cuda:N "
        "still follow the value CUDA read at initialisation",
        var,
    )


def cvd_rules(facts: Facts) -> list[Hit]:
    out: list[Hit] = []
    for ev in facts.of("env_set"):
        var = ev.text("var")
        if var not in _MASK_VARS:
            continue
        init = _init_in_the_same_run(facts, ev) or _import_init_before(
            facts, ev, "import_cuda_init"
        )
        if init is not None:
            out.append(_after_init_hit(facts, ev, init))
            continue
        likely = _import_init_before(facts, ev, "import_cuda_init_likely")
        if likely is not None:
            out.append(_after_init_hit(facts, ev, likely, likely=True))
            continue
        imported = _torch_imported_before(facts, ev)
        if imported is not None and var == "CUDA_VISIBLE_DEVICES":
            out.append(
                hit(
                    ev.line,
                    ev.col,
                    "LINT-CVD-AFTER-IMPORT",
                    "info",
                    f"{_shown(ev)} is set after import torch (line {imported.line}) but "
                    "before any CUDA call: this works, because torch initialises CUDA lazily, "
                    "at the first CUDA call, not at import (except torch 1.12.0, whose import "
                    "initialised CUDA: pytorch/pytorch#80876, fixed in 1.12.1; lint --check "
                    "knows the torch version). It stops working as soon as anything above it "
                    "(torch.cuda.is_available(), .cuda()) initialises CUDA.",
                    "Set it before import torch, or in the shell, so no later edit can "
                    "initialise CUDA first.",
                    None,
                    var,
                )
            )
    return out


def torch_import_inits(facts: Facts, torch_version: str | None) -> list[Hit]:
    """``lint --check``: under torch 1.12.0, ``import torch`` initialised CUDA (a CUDA call
    at import in torch/_prims/utils.py, from pytorch/pytorch#76626; reported as #80876 and
    #81758, fixed by #80899 in 1.12.1), so CUDA_VISIBLE_DEVICES set after it was ignored."""
    if torch_version is None or torch_version.split("+")[0] != "1.12.0":
        return []
    out: list[Hit] = []
    for ev in facts.of("env_set"):
        if ev.text("var") not in _MASK_VARS or cuda_init_before(facts, ev) is not None:
            continue
        imported = _torch_imported_before(facts, ev)
        if imported is None or any(
            _import_init_before(facts, ev, kind) is not None
            for kind in ("import_cuda_init", "import_cuda_init_likely")
        ):
            continue
        init = Event(
            imported.seq,
            "cuda_init",
            imported.node,
            imported.proc,
            data={
                "what": "import torch",
                "why": f"torch {torch_version}: pytorch/pytorch#80876, fixed in 1.12.1",
            },
        )
        out.append(_after_init_hit(facts, ev, init))
    return out


def fork_rules(facts: Facts) -> list[Hit]:
    out: list[Hit] = []
    for ev in facts.of("fork_launch"):
        if ev.data.get("method") != "fork" or ev.data.get("target_uses_cuda") is not True:
            continue
        init = cuda_init_before(facts, ev)
        if init is None and ev.data.get("any_time"):
            # DataLoader workers fork when the loader is iterated, after the model's .cuda()
            init = facts.first_after("cuda_init", ev.proc, ev.seq)
        if init is None:
            continue
        target = shown.text(ev.text("target")) or "the child"
        what = shown.text(ev.text("what")) or "A child process"
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-CUDA-BEFORE-FORK",
                "error",
                f"{what} runs {target}, which uses CUDA, in "
                f"processes started with the 'fork' start method, and the parent initialises "
                f"CUDA ({shown.text(init.text('what'))} at line {init.line}): a forked child "
                "cannot use CUDA.",
                "Start the children with torch.multiprocessing.spawn (or "
                "multiprocessing.get_context('spawn')), or keep every CUDA call out of the "
                "parent until the children are started.",
                FORK_ERROR,
                target,
            )
        )
    return out


def master_port_rules(facts: Facts) -> list[Hit]:
    out: list[Hit] = []
    for ev in facts.of("env_set"):
        if ev.text("var") != "MASTER_PORT" or ev.val is None:
            continue
        tags = ev.val.tags
        per_rank = bool(tags & {"RANK", "LOCAL", "SPAWN"})
        in_child = ev.proc.startswith(("spawn:", "fork:"))
        # drawn once in a process that then starts the ranks itself: they share it
        # (issue 17); a random value handed to the children arrives without "RANDOM"
        parent = facts.first_after("spawn_launch", ev.proc, ev.seq) or facts.first_after(
            "fork_launch", ev.proc, ev.seq
        )
        random_here = (
            "RANDOM" in tags and (in_child or facts.reads_launcher_rank) and parent is None
        )
        if not (per_rank or random_here):
            continue
        why = "from the rank" if per_rank else "at random in every rank's process"
        # a random port in a function the file never calls: who calls it (the launching
        # process, once, or every rank) is not visible
        unseen = not per_rank and not in_child and ev.proc.startswith("def:")
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-MASTER-PORT-PER-RANK",
                "info" if unseen else "error",
                f"MASTER_PORT is computed {why}: each rank then looks for the rendezvous on "
                "its own port, so the ranks never meet and init_process_group() waits until "
                "it times out.",
                "Choose MASTER_PORT once, before the ranks start (in the launcher, or in the "
                "parent before mp.spawn), so every rank gets the same value; under torchrun "
                "leave it to --master-port / --rdzv-endpoint.",
                "silent: dist.init_process_group() hangs, then fails with a timeout "
                "(DistNetworkError / DistStoreError: timed out waiting for the other ranks)",
                "MASTER_PORT",
            )
        )
    return out
