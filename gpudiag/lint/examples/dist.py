"""Wrong and right scripts:
DDP and its launchers: devices per rank, samplers, spawn, collectives (rules_dist.py).
"""

from __future__ import annotations

from gpudiag.lint.examples.pair import Example, pair

EXAMPLES: dict[str, Example] = {
    "LINT-DDP-NO-SET-DEVICE": pair(
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
    "LINT-DEVICE-FROM-GLOBAL-RANK": pair(
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
    "LINT-DDP-DEVICE-IDS-CPU": pair(
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
    "LINT-SET-EPOCH-CONSTANT": pair(
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
    "LINT-SET-EPOCH-MISSING": pair(
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
    "LINT-SAMPLER-SHUFFLE": pair(
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
    "LINT-LOCAL-RANK-ARG": pair(
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
    "LINT-SPAWN-ARGS-NOT-TUPLE": pair(
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
    "LINT-NCCL-CPU-TENSOR": pair(
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
    "LINT-RENDEZVOUS-ENV-MISSING": pair(
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
