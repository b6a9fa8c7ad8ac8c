"""Issue 17, the held-out corpus: values bound in the arms of an ``if``.

The walker runs both arms of an ``if`` one after the other, so the values a later call
sees may come from arms no run takes together. Each script is a minimal reproduction
of a pattern met in public training repositories nobody here wrote (NVIDIA's Tacotron2
``train.py`` chose its sampler and ``shuffle`` per arm and was a false error)."""

from __future__ import annotations

import textwrap

import pytest

from gpudiag.lint import lint_source

_HEAD = """\
from torch.utils.data import DataLoader, DistributedSampler

def make(ds, distributed):
"""


def _shuffle(body: str) -> list[str]:
    text = _HEAD + textwrap.indent(textwrap.dedent(body), "    ")
    return [
        f.finding.severity for f in lint_source(text) if f.finding.code == "LINT-SAMPLER-SHUFFLE"
    ]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # the sampler and shuffle chosen together, per arm (Tacotron2): no run has both
        (
            """
            if distributed:
                sampler = DistributedSampler(ds)
                shuffle = False
            else:
                sampler = None
                shuffle = True
            return DataLoader(ds, shuffle=shuffle, sampler=sampler)
            """,
            [],
        ),
        # the same, arms the other way round
        (
            """
            if not distributed:
                sampler = None
                shuffle = True
            else:
                sampler = DistributedSampler(ds)
                shuffle = False
            return DataLoader(ds, shuffle=shuffle, sampler=sampler)
            """,
            [],
        ),
        # shuffle=True only in the arm that makes no sampler
        (
            """
            shuffle = False
            sampler = None
            if distributed:
                sampler = DistributedSampler(ds)
            else:
                shuffle = True
            return DataLoader(ds, shuffle=shuffle, sampler=sampler)
            """,
            [],
        ),
        # sampler=None is no sampler: DataLoader accepts it with shuffle=True
        (
            """
            sampler = None
            return DataLoader(ds, shuffle=True, sampler=sampler)
            """,
            [],
        ),
        # shuffle=True whatever the arm: the distributed arm's sampler meets it
        (
            """
            if distributed:
                sampler = DistributedSampler(ds)
            else:
                sampler = None
            return DataLoader(ds, shuffle=True, sampler=sampler)
            """,
            ["warning"],
        ),
        (
            """
            sampler = DistributedSampler(ds) if distributed else None
            return DataLoader(ds, shuffle=True, sampler=sampler)
            """,
            ["error"],
        ),
        (
            """
            sampler = DistributedSampler(ds)
            return DataLoader(ds, shuffle=True, sampler=sampler)
            """,
            ["error"],
        ),
        (
            """
            return DataLoader(ds, shuffle=True, sampler=DistributedSampler(ds))
            """,
            ["error"],
        ),
    ],
)
def test_sampler_shuffle_only_where_one_run_has_both(body: str, expected: list[str]) -> None:
    assert _shuffle(body) == expected


_FLAG = """\
import torch
import torch.distributed as dist

def make(new_data=True):
    if new_data:
        x = None
    else:
        x = torch.zeros(2).to(torch.device("cuda"))
    if not new_data:
        x = torch.ones(2).cuda()
    return x

dist.init_process_group("nccl")
make(new_data={flag})
"""


@pytest.mark.parametrize(("flag", "lines"), [("True", []), ("False", [8, 10])])
def test_an_arm_a_constant_flag_never_takes_is_not_walked(flag: str, lines: list[int]) -> None:
    """``make(new_data=True)``: the ``else`` arm never runs there (issue 17, the held-out
    corpus: fairscale's benchmark placed data only in the arm its flag turned off, and
    that was a false LINT-DDP-NO-SET-DEVICE error)."""
    found = [
        (f.line, f.finding.severity)
        for f in lint_source(_FLAG.format(flag=flag))
        if f.finding.code == "LINT-DDP-NO-SET-DEVICE"
    ]
    assert found == [(line, "error") for line in lines]


def test_in_a_loop_a_flag_may_take_the_other_arm_on_the_next_pass() -> None:
    text = """\
import torch
import torch.distributed as dist

dist.init_process_group("nccl")
first = True
for batch in range(3):
    if first:
        first = False
    else:
        x = torch.zeros(2).cuda()
"""
    found = [f.line for f in lint_source(text) if f.finding.code == "LINT-DDP-NO-SET-DEVICE"]
    assert found == [10]


_SPAWNED_FLAG = """\
import contextlib

import torch
import torch.multiprocessing as mp


class TestModel:
    def test_without_amp(self):
        with_amp = {flag}
        self._run(with_amp=with_amp)

    @classmethod
    def _run(cls, with_amp):
        mp.spawn(cls._worker, (with_amp, "sync"), nprocs=2)

    @staticmethod
    def _worker(gpu_id, with_amp, sync_file):
        for step in range(5):
            context = contextlib.suppress()
            if with_amp:
                context = torch.cuda.amp.autocast()
            with context:
                pass
"""


@pytest.mark.parametrize(("flag", "lines"), [("False", []), ("True", [21])])
def test_a_flag_no_loop_sets_decides_its_arm_in_the_loop(flag: str, lines: list[int]) -> None:
    """vissl's tests/test_vit_fsdp.py: ``with_amp = False`` reaches the worker through a
    classmethod and ``mp.spawn(cls._worker, (…, with_amp, …))`` (positional args); the
    worker's loop never sets it, so its ``if with_amp:`` arm never runs (a fourth
    held-out corpus, 2 wrong warnings)."""
    found = [
        f.line
        for f in lint_source(_SPAWNED_FLAG.format(flag=flag))
        if f.finding.code == "LINT-AMP-DEPRECATED"
    ]
    assert found == lines


_DEVICE_ARMS = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def setup():
    dist.init_process_group("nccl")
    return 0, 2


def main(args):
    if args.local_rank != -1:
        local_rank, world_size = setup()
        device = {gpu}
    else:
        device = "cpu"
        world_size = 1
    model = torch.nn.Linear(2, 2)
    model = model.to(device)
    if world_size > 1:
        model = DDP(model, device_ids=[device])


main(None)
"""


@pytest.mark.parametrize("gpu", ["local_rank", 'torch.device("cuda", local_rank)'])
def test_a_name_one_arm_puts_on_a_gpu_and_another_on_the_cpu(gpu: str) -> None:
    """opacus' examples/cifar10.py: ``device`` is the local rank in the distributed arm and
    "cpu" in the other; DDP is built only where it is the GPU. The arms are walked one
    after the other, so the last one's "cpu" used to stand for both: a false
    LINT-DDP-DEVICE-IDS-CPU error (a seventh held-out corpus). A model left on the CPU
    on every path keeps the error."""
    found = [f.finding.code for f in lint_source(_DEVICE_ARMS.format(gpu=gpu))]
    assert "LINT-DDP-DEVICE-IDS-CPU" not in found
    cpu = _DEVICE_ARMS.format(gpu='"cpu"')
    errors = [(f.line, f.finding.severity) for f in lint_source(cpu)]
    assert (21, "error") in errors


_GPU_ARMS = """\
import os
import torch
import torch.distributed as dist


def init_distributed_mode(args):
    if "RANK" in os.environ:
        args.rank = int(os.environ["RANK"])
        args.world_size = int(os.environ["WORLD_SIZE"])
        args.gpu = int(os.environ["LOCAL_RANK"])
    else:
        args.rank, args.gpu, args.world_size = 0, 0, 1
    dist.init_process_group("nccl", world_size=args.world_size, rank=args.rank)
    torch.cuda.set_device(args.gpu)


init_distributed_mode(None)
"""


def test_a_name_the_arms_leave_holding_different_constants_holds_none() -> None:
    """InternVideo's (and DINO's) init_distributed_mode: ``args.gpu`` is LOCAL_RANK in
    one arm and 0 in the one-process fallback; the last arm's 0 used to make a constant
    ``set_device(0)`` (an eighth held-out corpus, 2 wrong warnings). A device that is 0
    on every path stays a constant."""
    codes = [f.finding.code for f in lint_source(_GPU_ARMS)]
    assert "LINT-DDP-SET-DEVICE-CONSTANT" not in codes
    constant = _GPU_ARMS.replace('args.gpu = int(os.environ["LOCAL_RANK"])', "args.gpu = 0")
    codes = [f.finding.code for f in lint_source(constant)]
    assert "LINT-DDP-SET-DEVICE-CONSTANT" in codes


def test_a_flag_one_arm_turns_off_does_not_hide_the_other_path() -> None:
    """mmf's trainer: ``use_torch = True``, turned off in one arm; the GradScaler under
    ``if use_torch:`` runs on the other path (a third held-out corpus, found now)."""
    text = """\
import torch


def setup(fp16, sharded):
    use_torch = True
    if fp16 and sharded:
        use_torch = False
    if use_torch:
        return torch.cuda.amp.GradScaler(enabled=fp16)
"""
    assert [f.line for f in lint_source(text) if f.finding.code == "LINT-AMP-DEPRECATED"] == [9]


_EXCLUSIVE_ARMS = """\
import os
import torch
import torch.distributed as dist


def setup(cfg):
    if cfg.distributed_port > 0:
        rank = int(os.environ["SLURM_PROCID"])
        cfg.local_rank = rank
        torch.cuda.set_device(int(os.environ["SLURM_LOCALID"]))
        dist.init_process_group("nccl", init_method="tcp://a:1", world_size=2, rank=rank)
    elif cfg.local_rank == -1:
        cfg.device = "cuda"
    else:
        torch.cuda.set_device(cfg.local_rank)
        dist.init_process_group("nccl")
"""
# within the same arm, and after the statement, the global rank is still seen
_SAME_ARM = _EXCLUSIVE_ARMS.replace(
    '        torch.cuda.set_device(int(os.environ["SLURM_LOCALID"]))\n',
    "        torch.cuda.set_device(cfg.local_rank)\n",
)
_AFTER_ARMS = _EXCLUSIVE_ARMS.replace(
    '    else:\n        torch.cuda.set_device(cfg.local_rank)\n        dist.init_process_group("nccl")\n',
    "    torch.cuda.set_device(cfg.local_rank)\n",
)


_ONE_PATH_WRAPPER = """\
import torch
from torch.nn.parallel import DistributedDataParallel
from fairscale.nn import FullyShardedDataParallel


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = torch.nn.Linear(2, 2)


def worker(gpu, with_fsdp, freeze):
    torch.cuda.set_device(gpu)
    torch.distributed.init_process_group("nccl")
    model = Model().cuda()
    if with_fsdp:
        model = FullyShardedDataParallel(model)
    else:
        model = DistributedDataParallel(model, device_ids=[gpu])
    if freeze:
        for p in model.trunk.parameters():
            p.grad = None
"""
# DDP on every path that reaches the read: the error stays
_DDP_BOTH = _ONE_PATH_WRAPPER.replace(
    "model = FullyShardedDataParallel(model)",
    "model = DistributedDataParallel(model, device_ids=[gpu], find_unused_parameters=True)",
)
# the other arm keeps the plain model: the read goes through DDP on the distributed path
_DDP_OR_PLAIN = _ONE_PATH_WRAPPER.replace(
    "model = FullyShardedDataParallel(model)", "model = model.half()"
)
_DDP_ALONE = _ONE_PATH_WRAPPER.replace(
    "    if with_fsdp:\n        model = FullyShardedDataParallel(model)\n    else:\n",
    "    if True:\n",
)


# a dotted name an arm sets, put back after the statement, is forgotten when its prefix
# is bound again (a review of the change: a stale "cpu" made a false error)
_REBOUND = """\
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main(args):
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    if args.cpu:
        args.opt.device = "cpu"
    else:
        args.opt = load()
    args.opt = load()
    model = DDP(torch.nn.Linear(2, 2).to(args.opt.device), device_ids=[args.opt.device])


main(parse())
"""


@pytest.mark.parametrize(
    ("text", "code", "lines"),
    [
        (_EXCLUSIVE_ARMS, "LINT-DEVICE-FROM-GLOBAL-RANK", []),
        (_SAME_ARM, "LINT-DEVICE-FROM-GLOBAL-RANK", [10]),
        (_AFTER_ARMS, "LINT-DEVICE-FROM-GLOBAL-RANK", [14]),
        (_ONE_PATH_WRAPPER, "LINT-WRAPPER-ATTRIBUTE", []),
        (_DDP_BOTH, "LINT-WRAPPER-ATTRIBUTE", [21]),
        (_DDP_OR_PLAIN, "LINT-WRAPPER-ATTRIBUTE", [21]),
        (_REBOUND, "LINT-DDP-DEVICE-IDS-CPU", []),
        (_DDP_ALONE, "LINT-WRAPPER-ATTRIBUTE", [19]),
    ],
    ids=[
        "exclusive",
        "same-arm",
        "after",
        "one-path-wrapper",
        "ddp-both",
        "ddp-or-plain",
        "rebound",
        "ddp-alone",
    ],
)
def test_each_arm_starts_from_the_names_before_the_if(
    text: str, code: str, lines: list[int]
) -> None:
    """DPR's setup_cfg_gpu (held-out 18, 2 false warnings): the SLURM arm sets
    ``cfg.local_rank`` to the global rank; the torch.distributed.launch arm reads the
    launcher's, which that assignment never reaches. fairscale's
    test_fsdp_freezing_weights (found while the arms were made to start afresh):
    ``model.trunk`` after FSDP in one arm, DDP in the other; FSDP forwards the attribute,
    and the test reads it only with FSDP, so no error for a wrapper of one path."""
    assert [f.line for f in lint_source(text) if f.finding.code == code] == lines
