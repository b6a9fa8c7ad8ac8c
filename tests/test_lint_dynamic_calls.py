"""Calls whose target is chosen at run time (issue 17 item 2): lint cannot tell which
function runs, so what the rules conclude from its absence is info at most.

Each project is a minimal reproduction of a real pattern, written under tmp_path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpudiag.lint import lint_paths

_HELPERS = """
    import torch
    import torch.distributed as dist


    def init_dist_pytorch(local_rank):
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl")


    def init_dist_slurm(local_rank):
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl")
"""

_SCRIPT = "import torch\nimport torch.distributed as dist\nfrom tools import common\n{call}\n"


_MODEL = """model = torch.nn.Linear(2, 2).cuda()
model = torch.nn.parallel.DistributedDataParallel(model)
"""


def _codes(tmp_path: Path, call: str) -> set[tuple[str, str]]:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "__init__.py").write_text("")
    (tmp_path / "tools" / "common.py").write_text(textwrap.dedent(_HELPERS))
    script = tmp_path / "train.py"
    script.write_text(_SCRIPT.format(call=call) + _MODEL)
    report = lint_paths([str(tmp_path)])
    return {
        (f.finding.code, f.finding.severity)
        for f in report.findings
        if Path(f.path).name == "train.py"
    }


@pytest.mark.parametrize(
    "name",
    [
        "'init_dist_%s' % launcher",  # OpenPCDet's tools/train.py
        'f"init_dist_{launcher}"',
        '"init_dist_" + launcher',
        '"init_dist_{}".format(launcher)',
    ],
)
def test_a_setup_function_picked_by_name_makes_the_error_info(tmp_path: Path, name: str) -> None:
    call = f'launcher = "pytorch"\ngetattr(common, {name})(0)'
    assert _codes(tmp_path, call) == {("LINT-DDP-NO-SET-DEVICE", "info")}


@pytest.mark.parametrize(
    "call",
    [
        # a name that says nothing of set-up, and a fixed name lint follows like any other
        'launcher = "x"\ngetattr(common, "build_%s" % launcher)(0)',
        'getattr(common, "unrelated")(0)',
    ],
)
def test_other_calls_leave_the_error(tmp_path: Path, call: str) -> None:
    assert _codes(tmp_path, call) == {("LINT-DDP-NO-SET-DEVICE", "error")}
