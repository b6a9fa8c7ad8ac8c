"""lint --check resolves with the CUDA_DEVICE_ORDER the script sets (issue 20)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main

from .conftest import fixture_path

SCRIPT = """import os
{order}os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
import torch
model = torch.nn.DataParallel(torch.nn.Linear(2, 2).cuda(), device_ids=[0, 1])
"""


@pytest.mark.parametrize(
    ("order_line", "order", "mixed_warning"),
    [
        ('os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"\n', "PCI_BUS_ID", False),
        ("", "FASTEST_FIRST", True),  # mixed4's default order numbers GPUs otherwise
    ],
)
def test_script_order_reaches_check(
    tmp_path: Path, order_line: str, order: str, mixed_warning: bool
) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(order=order_line))
    args = ["lint", "--check", "--snapshot", str(fixture_path("mixed4")), str(script), "--json"]
    doc = json.loads(CliRunner().invoke(main, args).stdout)
    assert doc["cuda_device_order"] == order
    codes = [f["code"] for f in doc["findings"]]
    assert ("VIS-ORDER-MIXED" in codes) is mixed_warning
