"""Wrong and right scripts:
the environment a script sets: CUDA_VISIBLE_DEVICES, fork, MASTER_PORT (rules_env.py).
"""

from __future__ import annotations

from gpudiag.lint.examples.pair import Example, pair

EXAMPLES: dict[str, Example] = {
    "LINT-CVD-AFTER-CUDA-INIT": pair(
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
    "LINT-CVD-AFTER-IMPORT": pair(
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
    "LINT-CUDA-BEFORE-FORK": pair(
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
    "LINT-MASTER-PORT-PER-RANK": pair(
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
}
