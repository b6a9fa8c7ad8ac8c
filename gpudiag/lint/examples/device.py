"""Wrong and right scripts:
which GPU a DDP rank selects: constants, CUDA_VISIBLE_DEVICES entries and the current
device (rules_device.py); the CUDA contexts ranks make on cuda:0 (rules_context.py).
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
    "LINT-DDP-CUDA0-CONTEXT": pair(
        """
import os

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
free, total = torch.cuda.mem_get_info()
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
""",
        7,
        """
import os

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
free, total = torch.cuda.mem_get_info()
dist.init_process_group("nccl")
""",
    ),
    "LINT-DDP-LOAD-NO-MAP-LOCATION": pair(
        """
import os

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
net = torch.nn.Linear(8, 8).cuda()
if os.path.exists("net.pt"):
    net.load_state_dict(torch.load("net.pt"))
if dist.get_rank() == 0:
    torch.save(net.state_dict(), "net.pt")
""",
        11,
        """
import os

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
net = torch.nn.Linear(8, 8).cuda()
if os.path.exists("net.pt"):
    net.load_state_dict(torch.load("net.pt", map_location="cpu"))
if dist.get_rank() == 0:
    torch.save(net.state_dict(), "net.pt")
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
