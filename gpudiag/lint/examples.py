"""A wrong and a right script for each lint code: what ``gpudiag explain LINT-…`` shows.

Each pair is a short, complete script (never a test fixture's path: issue 17, build
item 4). ``wrong`` gets its code at ``line``; ``right`` is the same script fixed, and
gets no warning or error at all. tests/test_lint_examples.py lints every pair, so an
example cannot drift from what the rules report. The snippets are at most 76
columns wide: ``explain`` indents them by 4 and every screen fits 80 (issue 20).

Every ``LINT-`` code that a script can trigger has a pair; :data:`WITHOUT_EXAMPLE`
names any code that has none and says why (none today: even ``LINT-PARSE-ERROR``'s
right script is simply the same one that parses).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Example:
    """A wrong script, the line where lint reports the code in it, and the fix."""

    wrong: str
    line: int
    right: str


def _pair(wrong: str, line: int, right: str) -> Example:
    return Example(wrong.strip("\n") + "\n", line, right.strip("\n") + "\n")


#: ``{code: its wrong and right scripts}``, in the catalogue's order.
EXAMPLES: dict[str, Example] = {
    "LINT-PARSE-ERROR": _pair(
        """
def train(model:
    model.cuda()
""",
        1,
        """
def train(model):
    model.cuda()
""",
    ),
    "LINT-IGNORE-UNKNOWN-CODE": _pair(
        """
import torch

scaler = torch.cuda.amp.GradScaler()  # gpudiag: ignore[LINT-AMP-DEPRECATD]
""",
        3,
        """
import torch

scaler = torch.cuda.amp.GradScaler()  # gpudiag: ignore[LINT-AMP-DEPRECATED]
""",
    ),
    "LINT-CVD-AFTER-CUDA-INIT": _pair(
        """
import os

import torch

if torch.cuda.is_available():
    os.environ["CUDA_VISIBLE_DEVICES"] = "2"
    model = torch.nn.Linear(8, 8).cuda()
""",
        6,
        """
import os

os.environ["CUDA_VISIBLE_DEVICES"] = "2"  # before torch starts CUDA
import torch

if torch.cuda.is_available():
    model = torch.nn.Linear(8, 8).cuda()
""",
    ),
    "LINT-CVD-AFTER-IMPORT": _pair(
        """
import os

import torch

os.environ["CUDA_VISIBLE_DEVICES"] = "1"
model = torch.nn.Linear(8, 8).cuda()
""",
        5,
        """
import os

os.environ["CUDA_VISIBLE_DEVICES"] = "1"
import torch

model = torch.nn.Linear(8, 8).cuda()
""",
    ),
    "LINT-CUDA-BEFORE-FORK": _pair(
        """
import multiprocessing as mp

import torch


def work(i):
    print(i, torch.ones(2).cuda().sum())


if __name__ == "__main__":
    print(torch.cuda.is_available())
    p = mp.Process(target=work, args=(0,))
    p.start()
    p.join()
""",
        12,
        """
import multiprocessing as mp

import torch


def work(i):
    print(i, torch.ones(2).cuda().sum())


if __name__ == "__main__":
    mp.set_start_method("spawn")
    print(torch.cuda.is_available())
    p = mp.Process(target=work, args=(0,))
    p.start()
    p.join()
""",
    ),
    "LINT-MASTER-PORT-PER-RANK": _pair(
        """
import os

import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(12355 + rank)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
""",
        9,
        """
import os

import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "12355"
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
""",
    ),
    "LINT-DDP-NO-SET-DEVICE": _pair(
        """
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group("nccl")
model = torch.nn.Linear(8, 8).cuda()
model = DDP(model, device_ids=[local_rank])
""",
        9,
        """
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
model = torch.nn.Linear(8, 8).cuda()
model = DDP(model, device_ids=[local_rank])
""",
    ),
    "LINT-DEVICE-FROM-GLOBAL-RANK": _pair(
        """
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl")
""",
        7,
        """
import os

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
""",
    ),
    "LINT-DDP-DEVICE-IDS-CPU": _pair(
        """
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group("gloo")
model = DDP(torch.nn.Linear(8, 8), device_ids=[local_rank])
""",
        9,
        """
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
model = DDP(torch.nn.Linear(8, 8))  # CPU training: no device_ids
""",
    ),
    "LINT-SET-EPOCH-CONSTANT": _pair(
        """
from torch.utils.data import DataLoader, DistributedSampler


def train(dataset, epochs):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(0)
        for batch in loader:
            print(epoch, batch)
""",
        8,
        """
from torch.utils.data import DataLoader, DistributedSampler


def train(dataset, epochs):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            print(epoch, batch)
""",
    ),
    "LINT-SET-EPOCH-MISSING": _pair(
        """
from torch.utils.data import DataLoader, DistributedSampler


def train(dataset, epochs):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, sampler=sampler)
    for epoch in range(epochs):
        for batch in loader:
            print(epoch, batch)
""",
        7,
        """
from torch.utils.data import DataLoader, DistributedSampler


def train(dataset, epochs):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            print(epoch, batch)
""",
    ),
    "LINT-SAMPLER-SHUFFLE": _pair(
        """
from torch.utils.data import DataLoader, DistributedSampler


def make_loader(dataset):
    sampler = DistributedSampler(dataset)
    return DataLoader(dataset, sampler=sampler, shuffle=True)
""",
        6,
        """
from torch.utils.data import DataLoader, DistributedSampler


def make_loader(dataset):
    sampler = DistributedSampler(dataset)  # shuffles by itself
    return DataLoader(dataset, sampler=sampler)
""",
    ),
    "LINT-IDS-UNDER-MASK": _pair(
        """
import os

os.environ["CUDA_VISIBLE_DEVICES"] = "1,2"
import torch

model = torch.nn.Linear(8, 8).cuda()
model = torch.nn.DataParallel(model, device_ids=[1, 2])
""",
        7,
        """
import os

os.environ["CUDA_VISIBLE_DEVICES"] = "1,2"
import torch

model = torch.nn.Linear(8, 8).cuda()
model = torch.nn.DataParallel(model, device_ids=[0, 1])  # GPUs 1 and 2
""",
    ),
    "LINT-DP-MODULE-DEVICE": _pair(
        """
import torch

model = torch.nn.Linear(8, 8).cuda()
model = torch.nn.DataParallel(model, device_ids=[1, 2])
""",
        4,
        """
import torch

model = torch.nn.Linear(8, 8).to("cuda:1")
model = torch.nn.DataParallel(model, device_ids=[1, 2])
""",
    ),
    "LINT-CKPT-SAVE-WRAPPED": _pair(
        """
import torch

model = torch.nn.DataParallel(torch.nn.Linear(8, 8).cuda())
torch.save(model.state_dict(), "model.pt")
""",
        4,
        """
import torch

model = torch.nn.DataParallel(torch.nn.Linear(8, 8).cuda())
torch.save(model.module.state_dict(), "model.pt")
""",
    ),
    "LINT-CKPT-PREFIX-MISMATCH": _pair(
        """
import torch

net = torch.nn.Linear(8, 8)
dp = torch.nn.DataParallel(net.cuda())
torch.save(dp.state_dict(), "net.pt")
net.load_state_dict(torch.load("net.pt"))
""",
        6,
        """
import torch

net = torch.nn.Linear(8, 8)
dp = torch.nn.DataParallel(net.cuda())
torch.save(dp.module.state_dict(), "net.pt")
net.load_state_dict(torch.load("net.pt"))
""",
    ),
    "LINT-AMP-DEPRECATED": _pair(
        """
import torch

scaler = torch.cuda.amp.GradScaler()
""",
        3,
        """
import torch

scaler = torch.amp.GradScaler("cuda")
""",
    ),
    "LINT-SCALER-BF16": _pair(
        """
import torch


def step(model, opt, x):
    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
""",
        5,
        """
import torch


def step(model, opt, x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).sum()
    loss.backward()
    opt.step()
""",
    ),
    "LINT-SCALER-FP16-PARAMS": _pair(
        """
import torch

model = torch.nn.Linear(8, 8).cuda().half()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")
with torch.autocast("cuda", dtype=torch.float16):
    loss = model(torch.randn(4, 8, device="cuda")).sum()
scaler.scale(loss).backward()
scaler.step(opt)
""",
        3,
        """
import torch

model = torch.nn.Linear(8, 8).cuda()  # float32: autocast makes fp16
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")
with torch.autocast("cuda", dtype=torch.float16):
    loss = model(torch.randn(4, 8, device="cuda")).sum()
scaler.scale(loss).backward()
scaler.step(opt)
""",
    ),
    "LINT-WRAPPER-ATTRIBUTE": _pair(
        """
from torch import nn


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(8, 4)
        self.decoder = nn.Linear(4, 8)


model = nn.DataParallel(AutoEncoder().cuda())
model.encoder.requires_grad_(False)
""",
        12,
        """
from torch import nn


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(8, 4)
        self.decoder = nn.Linear(4, 8)


model = nn.DataParallel(AutoEncoder().cuda())
model.module.encoder.requires_grad_(False)
""",
    ),
    "LINT-LOCAL-RANK-ARG": _pair(
        """
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=0)
args = parser.parse_args()
torch.cuda.set_device(args.local_rank)
""",
        6,
        """
import os

import torch

local_rank = int(os.environ["LOCAL_RANK"])  # torchrun sets it
torch.cuda.set_device(local_rank)
""",
    ),
    "LINT-SPAWN-ARGS-NOT-TUPLE": _pair(
        """
import torch.multiprocessing as mp


def train(rank, world_size):
    print(rank, world_size)


if __name__ == "__main__":
    world_size = 2
    mp.spawn(train, args=(world_size), nprocs=world_size)
""",
        10,
        """
import torch.multiprocessing as mp


def train(rank, world_size):
    print(rank, world_size)


if __name__ == "__main__":
    world_size = 2
    mp.spawn(train, args=(world_size,), nprocs=world_size)
""",
    ),
    "LINT-NCCL-CPU-TENSOR": _pair(
        """
import os

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group(backend="nccl")
total = torch.tensor([1.0])
dist.all_reduce(total)
""",
        10,
        """
import os

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group(backend="nccl")
total = torch.tensor([1.0]).cuda()
dist.all_reduce(total)
""",
    ),
    "LINT-RENDEZVOUS-ENV-MISSING": _pair(
        """
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
""",
        6,
        """
import os

import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "29500"
    mp.spawn(worker, args=(2,), nprocs=2)
""",
    ),
}

#: ``{code: why it has no wrong/right pair}`` for the lint codes without one. Empty:
#: every code a script can trigger has a pair (a new code gets one, or a reason here).
WITHOUT_EXAMPLE: dict[str, str] = {}


def render(code: str, indent: str = "    ") -> list[str]:
    """The lines ``gpudiag explain`` prints for ``code``'s pair (none without one)."""
    example = EXAMPLES.get(code)
    if example is None:
        return []
    lines = [f"- **Wrong:** `gpudiag lint` reports {code} at line {example.line}:", ""]
    lines += [(indent + line).rstrip() for line in example.wrong.splitlines()]
    lines += ["", "- **Right:**", ""]
    lines += [(indent + line).rstrip() for line in example.right.splitlines()]
    return [*lines, ""]
