"""Project reading (issue 17 item 1): linting a file also reads the project modules it
imports, so a set_device, a LOCAL_RANK read or a set_epoch in a helper counts; an import
lint cannot resolve makes the rules that depend on it info at most (item 2).

Each project is a minimal reproduction of a real pattern, written under tmp_path."""

from __future__ import annotations

import textwrap
from pathlib import Path

from gpudiag.lint import lint_paths
from gpudiag.lint.project import UNRESOLVED, Project, Sym
from gpudiag.lint.source import lint_file

_HELPER = """
    import os
    import torch
    import torch.distributed as dist


    def init_distributed_mode(args):
        args.gpu = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(args.gpu)
        dist.init_process_group(backend="nccl")


    def init_without_device(args):
        dist.init_process_group(backend="nccl")
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def _found(root: Path, *paths: str) -> dict[str, list[tuple[int, str, str]]]:
    """{file name relative to root: [(line, code, severity)]} of a lint of ``paths``."""
    report = lint_paths([str(root / p) for p in paths] if paths else [str(root)])
    out: dict[str, list[tuple[int, str, str]]] = {}
    for f in report.findings:
        name = Path(f.path).relative_to(root).as_posix()
        out.setdefault(name, []).append((f.line, f.finding.code, f.finding.severity))
    return out


def _codes(found: dict[str, list[tuple[int, str, str]]], name: str) -> set[tuple[str, str]]:
    return {(code, sev) for _, code, sev in found.get(name, [])}


def test_set_device_in_a_helper_module_counts(tmp_path: Path) -> None:
    """mae/DeiT's util.misc.init_distributed_mode(args), imported three ways."""
    _write(
        tmp_path,
        {
            "util/__init__.py": "",
            "util/misc.py": _HELPER,
            "main_from.py": """
                import torch
                from torch.nn.parallel import DistributedDataParallel as DDP
                from util.misc import init_distributed_mode
                init_distributed_mode(args)
                model = DDP(torch.nn.Linear(2, 2).cuda(), device_ids=[args.gpu])
            """,
            "main_module.py": """
                import torch
                import util.misc as misc
                misc.init_distributed_mode(args)
                x = torch.zeros(2).cuda()
            """,
            "pkg/__init__.py": "from .setup import init_distributed_mode\n",
            "pkg/setup.py": _HELPER,
            "pkg/train.py": """
                import torch
                from . import init_distributed_mode
                init_distributed_mode(None)
                x = torch.zeros(2).cuda()
            """,
        },
    )
    found = _found(tmp_path)
    assert not any(code == "LINT-DDP-NO-SET-DEVICE" for f in found.values() for _, code, _ in f)


def test_a_helper_that_does_not_set_the_device_proves_the_error(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "utils.py": _HELPER,
            "train.py": """
                import torch
                import utils
                utils.init_without_device(None)
                model = torch.nn.Linear(2, 2).cuda()
                x = torch.zeros(2).cuda()
            """,
        },
    )
    # every occurrence, each an error: the project read proves nothing sets the device
    assert sorted(_found(tmp_path)["train.py"]) == [
        (5, "LINT-DDP-NO-SET-DEVICE", "error"),
        (6, "LINT-DDP-NO-SET-DEVICE", "error"),
    ]


def test_a_test_base_class_in_another_module_sets_the_device(tmp_path: Path) -> None:
    """Megatron's Utils.initialize_model_parallel() in setup_class; apex's
    NcclDistributedTestBase, whose process start-up (_run) calls set_device."""
    _write(
        tmp_path,
        {
            "tests/__init__.py": "",
            "tests/utilities.py": """
                import os
                import unittest
                import torch

                class Utils:
                    @staticmethod
                    def initialize_distributed():
                        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))

                    @staticmethod
                    def initialize_model_parallel(tp=1):
                        Utils.initialize_distributed()

                class DistributedTestBase(unittest.TestCase):
                    def setUp(self):
                        self._spawn()

                    @classmethod
                    def _run(cls, rank):
                        torch.cuda.set_device(rank % torch.cuda.device_count())

                class NcclTestBase(DistributedTestBase):
                    backend = "nccl"
            """,
            "tests/unit/test_layers.py": """
                import torch
                import torch.distributed as dist
                from tests.utilities import NcclTestBase, Utils

                class TestAdam(NcclTestBase):
                    def test_step(self):
                        dist.init_process_group("nccl")
                        x = torch.ones(2).cuda()

                class TestBlock:
                    @classmethod
                    def setup_class(cls):
                        Utils.initialize_model_parallel(1)

                    def test_forward(self):
                        dist.init_process_group("nccl")
                        y = torch.ones(2).cuda()
            """,
        },
    )
    assert "tests/unit/test_layers.py" not in _found(tmp_path)


def test_an_unresolved_setup_call_makes_the_rule_info(tmp_path: Path) -> None:
    """A package lint cannot read may set the device (mmcv's init_dist does): info.
    A call whose name says nothing of the sort leaves the error."""
    _write(
        tmp_path,
        {
            "opaque.py": """
                import torch
                import torch.distributed as dist
                from mmcv_like.runner import init_dist
                init_dist("pytorch")
                dist.init_process_group("nccl")
                model = torch.nn.Linear(2, 2).cuda()
            """,
            "plain.py": """
                import torch
                import torch.distributed as dist
                from some_models import build_model
                dist.init_process_group("nccl")
                model = build_model().cuda()
            """,
            "base.py": """
                import torch
                import torch.distributed as dist
                from third_party.testing import DistributedTestCase

                class TestX(DistributedTestCase):
                    def test_x(self):
                        dist.init_process_group("nccl")
                        torch.ones(1).cuda()
            """,
        },
    )
    found = _found(tmp_path)
    assert _codes(found, "opaque.py") == {("LINT-DDP-NO-SET-DEVICE", "info")}
    assert _codes(found, "plain.py") == {("LINT-DDP-NO-SET-DEVICE", "error")}
    assert _codes(found, "base.py") == {("LINT-DDP-NO-SET-DEVICE", "info")}


def test_a_module_above_the_root_is_not_read(tmp_path: Path) -> None:
    """Linting a subfolder: a module outside it is unresolved, so the finding is info
    (read, it would prove the error: its function sets no device)."""
    _write(
        tmp_path,
        {
            "common.py": _HELPER,
            "scripts/train.py": """
                import torch
                from common import init_without_device
                init_without_device()
                x = torch.zeros(1).cuda()
                import torch.distributed as dist
                dist.init_process_group("nccl")
            """,
        },
    )
    found = _found(tmp_path, "scripts")
    assert _codes(found, "scripts/train.py") == {("LINT-DDP-NO-SET-DEVICE", "info")}


def test_local_rank_read_in_a_helper_module(tmp_path: Path) -> None:
    """mae's main_*.py keep --local_rank, and util.misc reads LOCAL_RANK; yolov5's
    hpo.py imports train.py, which reads it at module level; timm's utils package."""
    _write(
        tmp_path,
        {
            "util/misc.py": _HELPER,
            "main_finetune.py": """
                import argparse
                import util.misc as misc
                parser = argparse.ArgumentParser()
                parser.add_argument("--local_rank", default=-1, type=int)
                args = parser.parse_args()
                misc.init_distributed_mode(args)
            """,
            "train.py": """
                import os
                LOCAL_RANK = int(os.getenv("LOCAL_RANK", -1))

                def train(opt):
                    return LOCAL_RANK
            """,
            "utils/loggers/hpo.py": """
                import argparse
                from train import train
                parser = argparse.ArgumentParser()
                parser.add_argument("--local_rank", type=int, default=-1)
                train(parser.parse_args())
            """,
            "alone.py": """
                import argparse
                parser = argparse.ArgumentParser()
                parser.add_argument("--local_rank", type=int, default=0)
                args = parser.parse_args()
                device = f"cuda:{args.local_rank}"
            """,
        },
    )
    found = _found(tmp_path)
    assert "main_finetune.py" not in found
    assert "utils/loggers/hpo.py" not in found
    assert _codes(found, "alone.py") == {("LINT-LOCAL-RANK-ARG", "warning")}


def test_set_epoch_in_an_imported_train_function(tmp_path: Path) -> None:
    """pytorch/examples FSDP: the sampler goes to utils' train(), which calls set_epoch."""
    _write(
        tmp_path,
        {
            "utils/__init__.py": "from .train_utils import *\n",
            "utils/train_utils.py": """
                def train(model, loader, epoch, sampler=None):
                    if sampler:
                        sampler.set_epoch(epoch)
                    for batch in loader:
                        model(batch)
            """,
            "main.py": """
                from torch.utils.data import DataLoader, DistributedSampler
                from utils import train
                sampler = DistributedSampler(ds, shuffle=True)
                loader = DataLoader(ds, sampler=sampler)
                for epoch in range(10):
                    train(model, loader, epoch, sampler=sampler)
                for _ in range(2):
                    for batch in loader:
                        pass
            """,
        },
    )
    assert "main.py" not in _found(tmp_path)


def test_each_module_is_read_once_and_cycles_end(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from .core import setup\n",
            "pkg/core.py": "from . import helpers\n\ndef setup():\n    helpers.bind()\n",
            "pkg/helpers.py": (
                "import torch\nfrom .core import setup\n\n"
                "def bind():\n    setup()\n    torch.cuda.set_device(0)\n"
            ),
            **{
                f"run{i}.py": (
                    "import torch\nimport torch.distributed as dist\nfrom pkg import setup\n"
                    "dist.init_process_group('nccl')\nsetup()\nx = torch.ones(1).cuda()\n"
                )
                for i in range(5)
            },
        },
    )
    project = Project([str(tmp_path)])
    for i in range(5):
        found, _, _ = lint_file(tmp_path / f"run{i}.py", project=project)
        assert not [f for f in found if f.finding.code == "LINT-DDP-NO-SET-DEVICE"]
    assert project.modules_read == 3  # pkg/__init__.py, core.py, helpers.py: once each
    setup = project.resolve(str(tmp_path / "run0.py"), "pkg.setup")
    assert setup == Sym(str((tmp_path / "pkg/core.py").resolve()), "func", "setup")
    assert project.resolve(str(tmp_path / "run0.py"), "pkg.missing") is UNRESOLVED
    assert project.resolve(str(tmp_path / "run0.py"), "numpy.zeros") is None


def test_local_rank_option_beside_an_unreadable_rank_setup_is_info(tmp_path: Path) -> None:
    """mmcv's init_dist(launcher) reads LOCAL_RANK where lint cannot see it: info. A call
    into a package lint cannot read whose name says nothing of ranks leaves the warning."""
    option = (
        "import argparse\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--local_rank', type=int, default=0)\n"
        "args = parser.parse_args()\ndevice = args.local_rank\n"
    )
    _write(
        tmp_path,
        {
            "mm.py": option + "from mmcv_like.runner import init_dist\ninit_dist('pytorch')\n",
            "amp.py": option + "from apex_like import amp\namp.initialize(None, None)\n",
        },
    )
    found = _found(tmp_path)
    assert _codes(found, "mm.py") == {("LINT-LOCAL-RANK-ARG", "info")}
    assert _codes(found, "amp.py") == {("LINT-LOCAL-RANK-ARG", "warning")}


def test_source_text_without_a_file_reads_no_project() -> None:
    """lint_source (and stdin) has no folder to read modules from: every import other than
    torch and the standard library is unresolved, so a set-up helper makes the rule info."""
    from gpudiag.lint import lint_source

    text = textwrap.dedent(
        """
        import torch
        import torch.distributed as dist
        from .utils import setup_distributed
        dist.init_process_group("nccl")
        setup_distributed()
        x = torch.zeros(1).cuda()
        """
    )
    found = lint_source(text)
    assert [(f.finding.code, f.finding.severity) for f in found] == [
        ("LINT-DDP-NO-SET-DEVICE", "info")
    ]


def test_unreadable_or_endless_modules_are_unresolved(tmp_path: Path) -> None:
    """A module that is not Python, one whose name is re-exported in a loop, one nested too
    deeply for Python's parser: each unresolved (info), never a crash."""
    (tmp_path / "broken.py").write_bytes(b"def setup(:\n\xff\xfe")
    _write(
        tmp_path,
        {
            "loop_a.py": "from loop_b import setup_dist\n",
            "loop_b.py": "from loop_a import setup_dist\n",
            "deep.py": "x = " + "(" * 300 + "1" + ")" * 300 + "\ndef init_dist():\n    pass\n",
            **{
                f"use_{name}.py": (
                    "import torch\nimport torch.distributed as dist\n"
                    f"from {name} import {func}\n"
                    f"dist.init_process_group('nccl')\n{func}()\nx = torch.ones(1).cuda()\n"
                )
                for name, func in (
                    ("broken", "setup"),
                    ("loop_a", "setup_dist"),
                    ("deep", "init_dist"),
                )
            },
        },
    )
    found = _found(tmp_path)
    for name in ("use_broken.py", "use_loop_a.py", "use_deep.py"):
        assert _codes(found, name) == {("LINT-DDP-NO-SET-DEVICE", "info")}, name


def test_a_library_function_nothing_in_its_file_calls_is_info(tmp_path: Path) -> None:
    """A module of helpers that main.py calls after its own set_device: the placement in
    the helper depends on a caller lint does not read from the helper's side (issue 17,
    the held-out corpus: NVIDIA's ConvNets Executor and fairseq's all_gather_list were
    two wrong warnings). The same placement in the script's own run is an error."""
    _write(
        tmp_path,
        {
            "dist_utils.py": """
                import torch
                import torch.distributed as dist

                def distributed_init(args):
                    dist.init_process_group(backend="nccl")

                def all_gather_list(data):
                    buffer = torch.zeros(4).cuda()
                    dist.all_reduce(buffer)
                    return buffer
            """,
            "main.py": """
                import torch
                import dist_utils
                dist_utils.distributed_init(None)
                dist_utils.all_gather_list(1)
                model = torch.nn.Linear(2, 2).cuda()
            """,
        },
    )
    found = _found(tmp_path)
    helper = [f for f in found["dist_utils.py"] if f[1] == "LINT-DDP-NO-SET-DEVICE"]
    assert helper == [(9, "LINT-DDP-NO-SET-DEVICE", "info")]
    assert (6, "LINT-DDP-NO-SET-DEVICE", "error") in found["main.py"]
