"""Wrong and right scripts:
reading the file: a parse error, a suppression comment (gpudiag/lint/source.py).
"""

from __future__ import annotations

from gpudiag.lint.examples.pair import Example, pair

EXAMPLES: dict[str, Example] = {
    "LINT-PARSE-ERROR": pair(
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
    "LINT-IGNORE-UNKNOWN-CODE": pair(
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
}
