"""Wrong and right scripts: mixed precision: the deprecated API, GradScaler (rules_amp.py)."""

from __future__ import annotations

from gpudiag.lint.examples.pair import Example, pair

EXAMPLES: dict[str, Example] = {
    "LINT-AMP-DEPRECATED": pair(
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
    "LINT-SCALER-BF16": pair(
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
    "LINT-SCALER-FP16-PARAMS": pair(
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
}
