"""Wrong and right scripts:
which GPU a DDP rank selects: constants, CUDA_VISIBLE_DEVICES entries and the current
device (rules_device.py).
"""

from __future__ import annotations

from gpudiag.lint.examples.pair import Example, pair

EXAMPLES: dict[str, Example] = {
    "LINT-DDP-CURRENT-DEVICE": pair(
        """
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("nccl")
gpu = int(os.environ["LOCAL_RANK"])
model = DDP(torch.nn.Linear(8, 8).to(gpu), device_ids=[gpu])
model(torch.randn(4, 8).to(gpu)).sum().backward()
torch.cuda.synchronize()
""",
        11,
        """
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

gpu = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(gpu)
dist.init_process_group("nccl")
model = DDP(torch.nn.Linear(8, 8).to(gpu), device_ids=[gpu])
model(torch.randn(4, 8).to(gpu)).sum().backward()
torch.cuda.synchronize()
""",
    ),
    "LINT-DDP-SET-DEVICE-CONSTANT": pair(
        """
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group(backend="nccl")
torch.cuda.set_device(1)
model = DDP(torch.nn.Linear(2, 2).cuda(), device_ids=[1])
""",
        6,
        """
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group(backend="nccl")
torch.cuda.set_device(local_rank)
model = DDP(torch.nn.Linear(2, 2).cuda(), device_ids=[local_rank])
""",
    ),
    "LINT-DEVICE-FROM-CVD": pair(
        """
import os

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
gpu = int(os.environ["CUDA_VISIBLE_DEVICES"].split(",")[local_rank])
torch.cuda.set_device(gpu)
dist.init_process_group("nccl")
""",
        8,
        """
import os

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
""",
    ),
}
