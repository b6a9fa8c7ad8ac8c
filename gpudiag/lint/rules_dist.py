"""DDP rules: set_device, global vs local rank, samplers, spawn and rendezvous.

The rules on CPU objects in GPU calls (device_ids on a CPU module, a CPU tensor in an
NCCL collective) live in :mod:`gpudiag.lint.rules_cpu`.

Sources (torch 2.13): torch/utils/data/distributed.py (``set_epoch``: "Otherwise, the same
ordering will be always used"), torch/utils/data/dataloader.py ("sampler option
is mutually exclusive with shuffle"); the DDP tutorial (``torch.cuda.set_device``
per rank) and NCCL's "Duplicate GPU detected" error for ranks on one GPU.
"""

from __future__ import annotations

from gpudiag.findings.texts import SAMPLER_SHUFFLE
from gpudiag.lint import shown
from gpudiag.lint.codes import Hit, hit
from gpudiag.lint.facts import Event, Facts
from gpudiag.lint.rules_cpu import cpu_collective_rules as cpu_collective_rules
from gpudiag.lint.rules_cpu import ddp_cpu_rules as ddp_cpu_rules
from gpudiag.lint.values import GLOBAL_RANK_VARS, Val, rank_kind


def _uses_ddp(facts: Facts) -> bool:
    """A DDP script whose ranks use GPUs through NCCL (gloo-only scripts are CPU jobs,
    or tolerate ranks sharing a GPU)."""
    inits = facts.of("init_pg")
    if inits and all(e.data.get("backend") == "gloo" for e in inits):
        return False
    return bool(inits or facts.of("ddp"))


def _per_rank_mask(facts: Facts) -> bool:
    return any(
        e.text("var") == "CUDA_VISIBLE_DEVICES"
        and e.val is not None
        and bool(e.val.tags & {"RANK", "LOCAL", "SPAWN"})
        for e in facts.of("env_set")
    )


def set_device_rules(facts: Facts) -> list[Hit]:
    if not _uses_ddp(facts) or _per_rank_mask(facts):
        return []
    set_procs = facts.procs("set_device")
    out: list[Hit] = []
    seen_procs: set[str] = set()
    for ev in facts.of("placement"):
        if not ev.data.get("bare") or ev.data.get("set_before") or ev.proc in seen_procs:
            continue
        if ev.proc.startswith("def:") and set_procs - {ev.proc}:
            continue  # set elsewhere, in an order the walker cannot know
        seen_procs.add(ev.proc)
        from gpudiag.findings.texts import duplicate_gpu_text  # imported on a hit only: start-up

        later = facts.first_after("set_device", ev.proc, ev.seq)
        what = _placement_text(facts, ev)
        if later is not None:
            why = (
                f"torch.cuda.set_device() is called only later (line {later.line}), so "
                f"{what} still lands on cuda:0 in every rank"
            )
        else:
            why = (
                f"the script never calls torch.cuda.set_device(local_rank), so {what} puts "
                "every rank's tensors on cuda:0"
            )
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-DDP-NO-SET-DEVICE",
                "error",
                f"This DDP script places tensors on the current CUDA device, and {why}: all "
                "ranks share one GPU while the others stay idle.",
                "Call torch.cuda.set_device(local_rank) (local_rank = "
                "int(os.environ['LOCAL_RANK'])) before any CUDA work, or use an explicit "
                "device: model.to(f'cuda:{local_rank}'), DDP(model, device_ids=[local_rank]).",
                "silent: every rank runs on cuda:0 (out of memory there), or with NCCL "
                + duplicate_gpu_text(None),
                "cuda:0",
            )
        )
    return out


def _placement_text(facts: Facts, ev: Event) -> str:
    return f'"{_short(ev.node)}"'


def _short(node: object, limit: int = 50) -> str:
    import ast

    from gpudiag.lint.syntax import unparse

    text = unparse(node) if isinstance(node, ast.AST) else "this call"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _rank_source(val: Val) -> str:
    for var in sorted(GLOBAL_RANK_VARS, key=lambda v: (v != "RANK", v)):
        if f"env:{var}" in val.tags:
            return f"os.environ['{var}']"
    return "dist.get_rank()"


def global_rank_rules(facts: Facts) -> list[Hit]:
    out: list[Hit] = []
    lines: set[int] = set()
    origins: set[int] = set()
    for ev in facts.of("device_use"):
        if ev.val is None or rank_kind(ev.val) != "global" or ev.line in lines:
            continue
        if ev.val.device is not None and ev.val.node is not None:
            # one device string or torch.device(...) used in several places: report it once
            origin_line = getattr(ev.val.node, "lineno", None)
            if id(ev.val.node) in origins or origin_line in lines:
                continue
            origins.add(id(ev.val.node))
        lines.add(ev.line)
        src = _rank_source(ev.val)
        from gpudiag.core.dataparallel import INVALID_ORDINAL  # imported on a hit only

        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-DEVICE-FROM-GLOBAL-RANK",
                "warning",
                f"The GPU index for {shown.text(ev.text('where'))} comes from the global rank "
                f"({src}), "
                "not the local rank: it is right on one node only; on the second node the "
                "global rank is at least the number of GPUs per node.",
                "Use the rank within the node: local_rank = int(os.environ['LOCAL_RANK']) "
                "(or rank % torch.cuda.device_count()), then torch.cuda.set_device(local_rank).",
                INVALID_ORDINAL + " (on every node but the first)",
                "RANK",
            )
        )
    return out


def sampler_rules(facts: Facts) -> list[Hit]:
    out: list[Hit] = []
    for ev in facts.of("loader_shuffle"):
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-SAMPLER-SHUFFLE",
                "error",
                "DataLoader gets both sampler= and shuffle=True: with a sampler the sampler "
                "decides the order, and DataLoader refuses the combination.",
                "Drop shuffle=True: DistributedSampler shuffles by itself (shuffle=True is "
                "its default); call sampler.set_epoch(epoch) at the start of each epoch.",
                SAMPLER_SHUFFLE,
                None,
            )
        )
    calls = facts.of("set_epoch")
    varying = [e for e in calls if not _constant_epoch(facts, e)]
    for ev in calls:
        if not _constant_epoch(facts, ev) or varying:
            continue
        loop_var = shown.text(next((e.text("var") for e in facts.of("epoch_loop")), "epoch"))
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-SET-EPOCH-CONSTANT",
                "warning",
                f"set_epoch({shown.text(ev.text('arg'))}) is called with a constant: "
                "DistributedSampler "
                "seeds its shuffle with seed + epoch, so every epoch sees the data in the "
                "same order.",
                f"Pass the current epoch: for {loop_var} in range(num_epochs): "
                f"sampler.set_epoch({loop_var}).",
                "silent: every epoch iterates the data in the same order "
                "(torch/utils/data/distributed.py: 'Otherwise, the same ordering will be "
                "always used.')",
                None,
            )
        )
    samplers = [e for e in facts.of("sampler") if e.data.get("shuffle")]
    loops = facts.of("epoch_loop")
    if samplers and loops and not calls:
        loop = next((lp for lp in loops if lp.seq > samplers[0].seq), loops[0])
        out.append(
            hit(
                loop.line,
                loop.col,
                "LINT-SET-EPOCH-MISSING",
                "warning",
                f"The DistributedSampler made at line {samplers[0].line} shuffles, but "
                "set_epoch() is never called in this epoch loop: every epoch sees the data "
                "in the same order.",
                f"Call sampler.set_epoch({shown.text(loop.text('var'))}) at the start of each "
                "epoch, "
                "before iterating the DataLoader.",
                "silent: every epoch iterates the data in the same order "
                "(torch/utils/data/distributed.py: 'Otherwise, the same ordering will be "
                "always used.')",
                None,
            )
        )
    return out


def _constant_epoch(facts: Facts, ev: Event) -> bool:
    if ev.data.get("literal") or ev.data.get("loop_constant"):
        return True
    name = ev.text("name")
    if not name or ev.val is None or not ev.val.has_const:
        return False
    return facts.assign_counts.get(name, 0) <= 1


def local_rank_arg_rules(facts: Facts) -> list[Hit]:
    """``--local_rank`` from argv. torch/distributed/launch.py (torch 2.x) passes
    ``--local-rank`` (hyphen) and recommends reading ``LOCAL_RANK``; torchrun passes
    no argument at all (torch/distributed/run.py: "--use-env" is the default)."""
    if facts.reads_local_rank_env:
        return []
    return [
        hit(
            ev.line,
            ev.col,
            "LINT-LOCAL-RANK-ARG",
            "warning",
            "The local rank comes only from a --local_rank option: torchrun does not pass it "
            "(it sets LOCAL_RANK), so every rank keeps the option's default and uses the same "
            "GPU; torch.distributed.launch (torch 2.x) passes --local-rank, which this option "
            "does not accept.",
            "Read local_rank = int(os.environ['LOCAL_RANK']); to keep the option, accept both "
            "spellings with that default: parser.add_argument('--local-rank', '--local_rank', "
            "type=int, default=int(os.environ.get('LOCAL_RANK', 0))).",
            "error: unrecognized arguments: --local-rank=0 (torch.distributed.launch); under "
            "torchrun, silent: every rank gets the default local_rank",
            "LOCAL_RANK",
        )
        for ev in facts.of("local_rank_arg")
    ]


def spawn_rules(facts: Facts) -> list[Hit]:
    """``mp.spawn(fn, args=(world_size))`` and ``init_process_group`` without a rendezvous.

    torch/multiprocessing/spawn.py (torch 2.13) calls ``fn(i, *args)`` in each child;
    env:// rendezvous (torch/distributed/rendezvous.py) needs MASTER_ADDR/MASTER_PORT,
    which torchrun sets but a script that starts its own processes must set itself.
    """
    from gpudiag.core.ddp import env_missing_text  # imported on a hit only

    out: list[Hit] = []
    for ev in facts.of("spawn_args"):
        text = shown.text(ev.text("text"))
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-SPAWN-ARGS-NOT-TUPLE",
                "error",
                f"args=({text}) is not a tuple: parentheses around one value do not make one, "
                f"and every spawned process calls fn(i, *args) with an int.",
                f"Add the comma: args=({text},).",
                "torch.multiprocessing.spawn.ProcessRaisedException: TypeError: Value after * "
                "must be an iterable, not int (Python 3.11; older Pythons: 'fn() argument "
                "after * must be an iterable, not int')",
                None,
            )
        )
    launches = facts.of("spawn_launch", "fork_launch")
    set_vars = {e.text("var") for e in facts.of("env_set")}
    if launches and not {"MASTER_ADDR", "MASTER_PORT"} <= set_vars:
        missing = "MASTER_ADDR" if "MASTER_ADDR" not in set_vars else "MASTER_PORT"
        for ev in facts.of("init_pg"):
            if not ev.data.get("env_rendezvous") or ev.proc == "main":
                continue
            out.append(
                hit(
                    ev.line,
                    ev.col,
                    "LINT-RENDEZVOUS-ENV-MISSING",
                    "error",
                    "init_process_group() uses the env:// rendezvous in processes this script "
                    f"starts itself, but the script never sets {missing}: nothing sets it "
                    "outside torchrun.",
                    "Set os.environ['MASTER_ADDR'] = 'localhost' and "
                    "os.environ['MASTER_PORT'] = '29500' (the same port for all ranks) before "
                    "starting the processes, or pass init_method='tcp://host:port'.",
                    env_missing_text(missing),
                    missing,
                )
            )
    return out
