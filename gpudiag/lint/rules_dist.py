"""DDP rules: global vs local rank, device_ids on a CPU module, --local_rank, spawn.

Sources (torch 2.13): torch/nn/parallel/distributed.py (the device_ids ValueError),
torch/distributed/launch.py and run.py (--local-rank, LOCAL_RANK),
torch/multiprocessing/spawn.py, torch/distributed/rendezvous.py. set_device rules are in
:mod:`gpudiag.lint.rules_device`, sampler rules in :mod:`gpudiag.lint.rules_epoch`, the
rules on CPU objects in GPU calls in :mod:`gpudiag.lint.rules_cpu`.
"""

from __future__ import annotations

import bisect
import re

from gpudiag.lint import shown
from gpudiag.lint.codes import Hit, hit
from gpudiag.lint.facts import Event, Facts
from gpudiag.lint.launch_scripts import OLD_TORCH
from gpudiag.lint.rules_cpu import cpu_collective_rules as cpu_collective_rules
from gpudiag.lint.rules_cpu import ddp_cpu_rules as ddp_cpu_rules
from gpudiag.lint.rules_device import only_groups_of_one, opaque_text
from gpudiag.lint.values import GLOBAL_RANK_VARS, Val, rank_kind


def _rank_source(val: Val) -> str:
    for var in sorted(GLOBAL_RANK_VARS, key=lambda v: (v != "RANK", v)):
        if f"env:{var}" in val.tags:
            return f"os.environ['{var}']"
    return "dist.get_rank()"


def global_rank_rules(facts: Facts) -> list[Hit]:
    out: list[Hit] = []
    lines: set[int] = set()
    origins: set[int] = set()
    unnamed: set[tuple[str, object, frozenset[str]]] = set()
    single: str | None = None
    for ev in facts.of("device_use"):
        if ev.val is None or rank_kind(ev.val) != "global" or ev.line in lines:
            continue
        if ev.val.device is not None and ev.val.node is not None:
            # one device string or torch.device(...) used in several places: report it once
            origin_line = getattr(ev.val.node, "lineno", None)
            if id(ev.val.node) in origins or origin_line in lines:
                continue
            origins.add(id(ev.val.node))
            unnamed.add((ev.proc, ev.val.device, ev.val.tags))
        elif ev.val.device is not None:
            # a device whose origin is lost (`torch.device(f"cuda:{dist.get_rank()}") if
            # dist.is_initialized() else self._execution_device`), handed on and used
            # again: one mistake, reported once per process (HunyuanVideo's pipeline, a
            # nineteenth held-out sample of issue 17: one line reported 15 times)
            same = (ev.proc, ev.val.device, ev.val.tags)
            if same in unnamed:
                continue
            unnamed.add(same)
        lines.add(ev.line)
        src = _rank_source(ev.val)
        from gpudiag.core.dataparallel import INVALID_ORDINAL  # imported on a hit only
        from gpudiag.lint.single_node import single_node_reason

        # ranks started on this host only: the global rank is the local one (info)
        single = single if single is not None else (single_node_reason(facts) or "")
        note = f" Here {single}, so it holds." if single else ""

        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-DEVICE-FROM-GLOBAL-RANK",
                "info" if single else "warning",
                f"The GPU index for {shown.text(ev.text('where'))} comes from the global rank "
                f"({src}), "
                "not the local rank: it is right on one node only; on the second node the "
                f"global rank is at least the number of GPUs per node.{note}",
                "Use the rank within the node: local_rank = int(os.environ['LOCAL_RANK']) "
                "(or rank % torch.cuda.device_count()), then torch.cuda.set_device(local_rank).",
                INVALID_ORDINAL + " (on every node but the first)",
                "RANK",
            )
        )
    return out


_RANK_SETUP = re.compile(r"^[a-z_][a-z0-9_]*(dist|rank|launch)[a-z0-9_]*$|^(dist|launch)")


def local_rank_arg_rules(facts: Facts) -> list[Hit]:
    """``--local_rank`` from argv. torch/distributed/launch.py (torch 2.x) passes
    ``--local-rank`` (hyphen) and recommends reading ``LOCAL_RANK``; torchrun passes
    no argument at all (torch/distributed/run.py: "--use-env" is the default).

    Quiet when the file, or a project module it calls, reads LOCAL_RANK, and when a
    script that starts its own ranks (mp.spawn) assigns the attribute itself. Info when
    the launcher may well pass it (deepspeed's passes --local_rank:
    deepspeed/launcher/launch.py), or the option is defined in a function nothing in
    the file calls (who parses it, and how it is launched, is not visible)."""
    if facts.of("local_rank_dash"):
        return []
    if facts.reads_local_rank_env:
        # LOCAL_RANK is read, but torch 2's torch.distributed.launch, which the project's
        # scripts or docs start it with, passes --local-rank: argparse rejects it
        return _rejected_by_launch(facts)
    if facts.of("spawn_launch", "fork_launch") and any(
        key == "local_rank" or key.endswith(".local_rank") for key in facts.assign_counts
    ):
        # mp.spawn's worker sets args.local_rank = its index (issue 17); so does a script
        # that starts a multiprocessing.Process per GPU after `args.local_rank = rank`
        # (a tenth held-out corpus: denoising-diffusion-gan's train_ddgan.py)
        return []
    if only_groups_of_one(facts):
        # init_process_group(world_size=1, rank=0): a group of one, whatever the option
        # says (a sixth held-out corpus: Cream's CDARTS test_seg.py)
        return []
    # a call lint cannot read that, by its name, sets ranks up: mmcv's init_dist,
    # setup_distributed(), get_local_rank() (not amp.initialize, not a class)
    rank_setup = [
        e
        for e in facts.of("opaque_setup")
        if not e.data.get("indirect")
        and _RANK_SETUP.search(e.text("what").rsplit(".", 1)[-1].removesuffix("()"))
    ]
    # the project's own shell script starts it with torch's launcher only: certain
    torch_launched = bool(facts.launched_by) and not facts.launched_by & {"deepspeed", OLD_TORCH}
    out: list[Hit] = []
    for ev in facts.of("local_rank_arg"):
        note = ""
        if torch_launched and not _read_elsewhere(facts, ev):
            # nothing reads the option (CodeFormer's basicsr/train.py takes the GPU from
            # RANK): no rank keeps a default GPU; what remains is torch 2's launcher's
            # --local-rank, which argparse rejects (a thirteenth held-out corpus of
            # issue 17: a warning that claimed every rank shares a GPU)
            out.extend(_rejected_by_launch(facts, [ev]))
            continue
        if torch_launched:
            note = f" The project's scripts or docs start it with {sorted(facts.launched_by)[0]}."
        elif "deepspeed" in facts.launched_by:
            # LLM-Pruner's README starts post_training.py with `deepspeed --include=…`, which
            # passes --local_rank=N (a twenty-second held-out sample of issue 17)
            note = (
                " Not certain: the project's scripts or docs start it with the deepspeed "
                "launcher, which passes --local_rank."
            )
        elif facts.frameworks:
            framework = sorted(facts.frameworks)[0]
            note = (
                f" Not certain: the script uses {framework}"
                + (", whose launcher passes --local_rank" if framework == "deepspeed" else "")
                + "."
            )
        elif rank_setup:
            note = f" Not certain: {opaque_text(rank_setup[0])} may read LOCAL_RANK."
        elif ev.proc.startswith("def:"):
            note = (
                " Not certain: nothing in this file calls the function that adds the option; "
                "the script that does may read LOCAL_RANK."
            )
        elif not facts.of(
            "init_pg", "init_pg_via", "ddp", "opaque_setup", "device_use", "set_device"
        ):
            # nothing distributed in sight (Cream's cal_model.py gates a print on it)
            note = (
                " Not certain: the script starts no process group, wraps no model in DDP "
                "and picks no GPU with it; the option may decide nothing."
            )
        elif not _read_elsewhere(facts, ev):
            note = (
                " Not certain: nothing else in this file reads local_rank (the rank may come "
                "from elsewhere); a function it hands the options to may."
            )
        out.append(
            hit(
                ev.line,
                ev.col,
                "LINT-LOCAL-RANK-ARG",
                "info" if note and not torch_launched else "warning",
                "The local rank comes only from a --local_rank option: torchrun does not pass "
                "it (it sets LOCAL_RANK), so every rank keeps the option's default and uses the "
                "same GPU; torch.distributed.launch (torch 2.x) passes --local-rank, which this "
                f"option does not accept.{note}",
                "Read local_rank = int(os.environ['LOCAL_RANK']); to keep the option, accept "
                "both spellings with that default: parser.add_argument('--local-rank', "
                "'--local_rank', type=int, default=int(os.environ.get('LOCAL_RANK', 0))).",
                "error: unrecognized arguments: --local-rank=0 (torch.distributed.launch); "
                "under torchrun, silent: every rank gets the default local_rank",
                "LOCAL_RANK",
            )
        )
    return out


def _read_elsewhere(facts: Facts, ev: Event) -> bool:
    """Whether ``local_rank`` is written anywhere in the file but the option's own lines
    (``args.local_rank``, ``getattr(args, "local_rank")``, a comment): read from the text,
    so any mention keeps the rule as certain as before (issue 17, the held-out corpus:
    swav's main_deepclusterv2.py declares it "not used", and takes rank % GPUs)."""
    mentions = facts.cache.get("local_rank_lines")
    if not isinstance(mentions, list):  # once per file: a file may declare it many times
        mentions = [at for at, line in enumerate(facts.source_lines, 1) if "local_rank" in line]
        facts.cache["local_rank_lines"] = mentions
    first = getattr(ev.node, "lineno", 0)
    last = getattr(ev.node, "end_lineno", None) or first
    within = bisect.bisect_right(mentions, last) - bisect.bisect_left(mentions, first)
    return len(mentions) > within


def _rejected_by_launch(facts: Facts, events: list[Event] | None = None) -> list[Hit]:
    """``--local_rank`` declared alone, ``LOCAL_RANK`` read, and the project starts the
    script with torch.distributed.launch only: torch 2.x's passes ``--local-rank=N``
    (torch/distributed/launch.py), which ``parse_args`` rejects (``parse_known_args``
    would keep it aside); that the project also shows torchrun does not help who follows
    the launch line. Issue 17: mmengine's examples/distributed_training.py, which
    its docs start so."""
    launched = facts.launched_by
    # one of the ways the project documents fails (torchrun beside it does not help)
    if (
        "torch.distributed.launch" not in launched
        or launched & {"deepspeed", OLD_TORCH}
        or any("parse_known_args" in line for line in facts.source_lines)
    ):
        return []
    return [
        hit(
            ev.line,
            ev.col,
            "LINT-LOCAL-RANK-ARG",
            "warning",
            "The option is spelled --local_rank only, and the project's scripts or docs "
            "start this script with torch.distributed.launch, which in torch 2.x passes "
            "--local-rank=N: argparse rejects it, and the script stops before it starts.",
            "Accept both spellings: parser.add_argument('--local-rank', '--local_rank', "
            "type=int, default=int(os.environ.get('LOCAL_RANK', 0))), or start it with "
            "torchrun.",
            "error: unrecognized arguments: --local-rank=0",
            "LOCAL_RANK",
        )
        for ev in (facts.of("local_rank_arg") if events is None else events)
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
    # init_process_group in a project helper (init_pg_via): its rendezvous is not visible
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
