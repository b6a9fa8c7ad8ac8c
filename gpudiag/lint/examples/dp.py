"""Wrong and right scripts:
DataParallel: device ids, the module's device, the wrapper, checkpoints (rules_dp.py).
"""

from __future__ import annotations

from gpudiag.lint.examples.pair import Example, pair

EXAMPLES: dict[str, Example] = {
    "LINT-IDS-UNDER-MASK": pair(
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
    "LINT-DP-MODULE-DEVICE": pair(
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
    "LINT-WRAPPER-ATTRIBUTE": pair(
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
    "LINT-CKPT-SAVE-WRAPPED": pair(
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
    "LINT-CKPT-PREFIX-MISMATCH": pair(
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
}
