"""Issue 17: the DataParallel, checkpoint, environment and CPU-object rules say what the
file proves (error), what is very likely (warning) and what depends on what lint cannot
see (info); every occurrence is reported; torch 1.12.0's ``import torch`` is known to
``lint --check``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.lint import lint_source

from .conftest import fixture_path


def _found(source: str) -> list[tuple[int, str, str]]:
    text = textwrap.dedent(source)
    return [(f.line, f.finding.code, f.finding.severity) for f in lint_source(text)]


def _codes(source: str, code: str) -> list[tuple[int, str]]:
    return [(line, sev) for line, c, sev in _found(source) if c == code]


# ---------------------------------------------------------------- checkpoints

_SAVE_WRAPPED = """
    import torch
    import torch.nn as nn

    model = nn.DataParallel(nn.Linear(4, 4)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, SAVE_PATH)
    fresh = nn.Linear(4, 4)
    ckpt = torch.load(LOAD_PATH)
    fresh.load_state_dict(ckpt[KEY])
    opt.load_state_dict(ckpt["opt"])
"""


def _ckpt(save: str, load: str, key: str) -> list[tuple[int, str]]:
    src = _SAVE_WRAPPED.replace("SAVE_PATH", save).replace("LOAD_PATH", load)
    return _codes(src.replace("KEY", key), "LINT-CKPT-PREFIX-MISMATCH")


def test_ckpt_error_only_for_the_same_file_and_key() -> None:
    assert _ckpt('"c.pt"', '"c.pt"', '"model"') == [(10, "error")]
    assert _ckpt("args.out", "args.out", '"model"') == [(10, "error")]


def test_ckpt_warning_when_the_file_is_not_known_to_be_the_same() -> None:
    assert _ckpt('"c.pt"', "args.resume", '"model"') == [(10, "warning")]
    assert _ckpt('"c.pt"', '"c.pt"', "args.key") == [(10, "warning")]


def test_ckpt_nothing_for_another_file_or_another_key() -> None:
    assert _ckpt('"c.pt"', '"pretrained.pt"', '"model"') == []
    assert _ckpt('"c.pt"', '"c.pt"', '"ema"') == []


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        # the alias of the not-wrapping arm is the bare model (rosinality's stylegan2)
        ("    if args.distributed:\n        g = gen.module\n    else:\n        g = gen\n", []),
        # an alias that is the wrapper in every arm saves module.-prefixed keys
        ("    g = gen\n", [(15, "error")]),
    ],
)
def test_ckpt_an_alias_in_the_arm_that_does_not_wrap_is_bare(
    alias: str, expected: list[tuple[int, str]]
) -> None:
    """Issue 17, the held-out corpus: ``if args.distributed: g_module = generator.module``
    / ``else: g_module = generator`` saves the bare model whichever arm runs; the walker
    runs both arms and saw the wrapper, two false LINT-CKPT-PREFIX-MISMATCH."""
    text = (
        "import torch\nimport torch.nn as nn\n\n"
        "def train(args, gen):\n" + alias + '    torch.save({"g": g.state_dict()}, "c.pt")\n\n'
        "def main(args):\n"
        "    gen = nn.Linear(4, 4).cuda()\n"
        '    ckpt = torch.load("c.pt")\n'
        "    if args.distributed:\n"
        "        gen = nn.parallel.DistributedDataParallel(gen, device_ids=[0])\n"
        "    train(args, gen)\n"
        "    fresh = nn.Linear(4, 4)\n"
        '    fresh.load_state_dict(ckpt["g"])\n'
    )
    found = [
        (f.line, f.finding.severity)
        for f in lint_source(text)
        if f.finding.code == "LINT-CKPT-PREFIX-MISMATCH"
    ]
    assert found == expected


def test_only_a_module_load_counts() -> None:
    # issue 17: optimizer.load_state_dict(ckpt["optimizer"]) was read as a model's load
    found = _found(
        """
        import torch
        import torch.nn as nn
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(nn.Linear(4, 4).cuda(), device_ids=[0])
        optimizer = torch.optim.AdamW(model.parameters())
        scaler = torch.amp.GradScaler("cuda")
        ckpt = torch.load("run.pt")
        optimizer.load_state_dict(ckpt["optimizer"])
        scaler.load_state_dict(ckpt["scaler"])
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scaler": scaler.state_dict()}, "run.pt")
        """
    )
    assert [c for c in found if c[1] == "LINT-CKPT-PREFIX-MISMATCH"] == []


def test_a_name_whose_parameters_are_read_is_a_model() -> None:
    found = _codes(
        """
        import torch
        from mylib import build

        net = build()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        net.load_state_dict(torch.load("w.pt"))
        wrapped = torch.nn.DataParallel(net)
        torch.save(wrapped.state_dict(), "w.pt")
        """,
        "LINT-CKPT-PREFIX-MISMATCH",
    )
    assert found == [(7, "error")]


def test_every_mismatched_load_is_reported() -> None:
    found = _codes(
        """
        import torch
        import torch.nn as nn

        net = nn.DataParallel(nn.Linear(2, 2)).cuda()
        torch.save(net.state_dict(), "w.pt")
        a = nn.Linear(2, 2)
        a.load_state_dict(torch.load("w.pt"))
        b = nn.Linear(2, 2)
        b.load_state_dict(torch.load("w.pt"))
        """,
        "LINT-CKPT-PREFIX-MISMATCH",
    )
    assert found == [(8, "error"), (10, "error")]


# ---------------------------------------------------------------- DataParallel's device


def test_dp_cpu_in_a_gpu_script_stays_an_error() -> None:
    found = _codes(
        """
        import torch
        import torch.nn as nn

        net = nn.DataParallel(nn.Linear(2, 2)).cpu()
        y = net(torch.ones(1, 2).cuda())
        """,
        "LINT-DP-MODULE-DEVICE",
    )
    assert found == [(5, "error")]


def test_dp_on_own_modules_that_hold_no_parameters_is_not_reported() -> None:
    """DataParallel checks parameters and buffers only (torch 2.13 data_parallel.py):
    a class with no __init__ on nn.Module alone holds none, and a decorated class may be
    another class (issue 17, the held-out corpus: fairscale's @skippable Stash and Pop).
    A class with an __init__, undecorated, is still on the CPU."""
    found = _codes(
        """
        import torch
        import torch.nn as nn
        import mylib
        from mylib import skippable

        class Empty(nn.Module):
            def forward(self, x):
                return x * 2

        @skippable(stash=["foo"])
        class Stash(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)

        a = nn.DataParallel(nn.Sequential(Empty(), Empty()), device_ids=[0, 1])
        a(torch.ones(1, 2).cuda())
        b = nn.DataParallel(Stash(), device_ids=[0, 1])
        b(torch.ones(1, 2).cuda())
        c = nn.DataParallel(Net(), device_ids=[0, 1])
        c(torch.ones(1, 2).cuda())

        class Other(mylib.Module):  # another library's base may hold parameters
            def forward(self, x):
                return x

        d = nn.DataParallel(Other(), device_ids=[0, 1])
        d(torch.ones(1, 2).cuda())
        """,
        "LINT-DP-MODULE-DEVICE",
    )
    assert found == [(26, "error"), (33, "error")]


def test_a_move_in_the_same_arm_still_counts() -> None:
    found = _codes(
        """
        import torch
        import torch.nn as nn

        if torch.cuda.device_count() > 1:
            net = nn.DataParallel(nn.Linear(2, 2), device_ids=[1, 2]).cuda()
        else:
            net = nn.Linear(2, 2)
        """,
        "LINT-DP-MODULE-DEVICE",
    )
    assert found == [(6, "error")]


# ---------------------------------------------------------------- MASTER_PORT


def test_a_port_drawn_in_each_rank_is_still_an_error() -> None:
    found = _codes(
        """
        import os
        import random

        local_rank = int(os.environ["LOCAL_RANK"])
        os.environ["MASTER_PORT"] = str(random.randint(20000, 30000))
        """,
        "LINT-MASTER-PORT-PER-RANK",
    )
    assert found == [(6, "error")]


# ---------------------------------------------------------------- NCCL and CPU tensors


def test_a_group_lint_cannot_see_is_info() -> None:
    found = _codes(
        """
        import torch
        import torch.distributed as dist
        from megatron_like import parallel_state

        dist.init_process_group("nccl")
        t = torch.zeros(2)
        dist.all_reduce(t, group=parallel_state.get_cpu_group())
        dist.all_reduce(t, group=dist.new_group(backend="nccl"))
        """,
        "LINT-NCCL-CPU-TENSOR",
    )
    assert found == [(8, "info"), (9, "error")]


# ---------------------------------------------------------------- device_ids on the CPU


def test_device_ids_cpu_warning_when_the_model_went_through_a_helper() -> None:
    found = _codes(
        """
        import os
        import torch.distributed as dist
        import torchvision.models as models
        from torch.nn.parallel import DistributedDataParallel as DDP
        from helpers import place_on_gpu

        rank = int(os.environ["LOCAL_RANK"])
        dist.init_process_group("nccl")
        model = models.__dict__["resnet18"]()
        place_on_gpu(model, rank)
        model = DDP(model, device_ids=[rank])
        """,
        "LINT-DDP-DEVICE-IDS-CPU",
    )
    assert found == [(12, "warning")]


def test_device_ids_cpu_not_under_a_default_device() -> None:
    found = _codes(
        """
        import os
        import torch
        import torchvision.models as models
        from torch.nn.parallel import DistributedDataParallel as DDP

        rank = int(os.environ["LOCAL_RANK"])
        torch.set_default_device(f"cuda:{rank}")
        model = models.resnet18()
        model = DDP(model, device_ids=[rank])
        """,
        "LINT-DDP-DEVICE-IDS-CPU",
    )
    assert found == []


def test_device_ids_cpu_every_occurrence() -> None:
    found = _codes(
        """
        import torch.nn as nn
        from torch.nn.parallel import DistributedDataParallel as DDP

        enc = DDP(nn.Linear(2, 2), device_ids=[0])
        dec = DDP(nn.Linear(2, 2), device_ids=[0])
        ok = DDP(nn.Linear(2, 2, device="cuda:0"), device_ids=[0])
        """,
        "LINT-DDP-DEVICE-IDS-CPU",
    )
    assert found == [(5, "error"), (6, "error")]


def test_device_ids_cpu_a_container_of_moved_modules_is_not_on_the_cpu() -> None:
    """nn.Sequential(trunk, head) after trunk.to(device) and head.to(device) is on the GPU
    (issue 17, the held-out corpus: fairscale's OSS tests); a container of modules built
    on the CPU, or of CPU modules moved nowhere, still is on the CPU."""
    found = _codes(
        """
        import os
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        rank = int(os.environ["LOCAL_RANK"])
        dist.init_process_group("nccl")
        torch.cuda.set_device(rank)
        trunk = torch.nn.Linear(3, 5)
        trunk.to(torch.device("cuda"))
        head = torch.nn.Linear(5, 3).to(torch.device("cuda"))
        moved = DDP(torch.nn.Sequential(trunk, head), device_ids=[rank])
        listed = DDP(torch.nn.ModuleList([head]), device_ids=[rank])
        cpu = DDP(torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU()), device_ids=[rank])
        cpu_list = DDP(torch.nn.ModuleList([torch.nn.Linear(3, 5)]), device_ids=[rank])
        """,
        "LINT-DDP-DEVICE-IDS-CPU",
    )
    assert found == [(15, "error"), (16, "error")]


# ---------------------------------------------------------------- CUDA_VISIBLE_DEVICES


def test_cvd_after_private_and_import_inits() -> None:
    found = _codes(
        """
        import os
        import torch

        torch.cuda._lazy_init()
        os.environ["CUDA_VISIBLE_DEVICES"] = "1"
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        """,
        "LINT-CVD-AFTER-CUDA-INIT",
    )
    assert found == [(6, "error"), (7, "error")]


def test_an_import_in_the_parent_counts_for_a_spawned_child() -> None:
    found = _codes(
        """
        import os
        import pycuda.autoinit
        import torch.multiprocessing as mp

        def worker(i):
            os.environ["CUDA_VISIBLE_DEVICES"] = str(i)

        mp.spawn(worker, nprocs=2)
        """,
        "LINT-CVD-AFTER-CUDA-INIT",
    )
    assert found == [(7, "error")]


def test_after_a_likely_import_init_a_function_nothing_calls_is_info() -> None:
    """``import deepspeed`` likely initialised CUDA; a mask set in a function nothing in
    the file calls is info, one set in the script itself a warning (issue 17, the
    held-out corpus: gpt-neox's tests keep an unused set_cuda_visible())."""
    found = _codes(
        """
        import os
        import deepspeed

        def set_visible(ids):
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(ids)

        def set_one():
            os.environ["CUDA_VISIBLE_DEVICES"] = "1"

        def run_test():  # nothing here calls it, but it calls set_one()
            set_one()

        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        """,
        "LINT-CVD-AFTER-CUDA-INIT",
    )
    assert found == [(6, "info"), (9, "warning"), (14, "warning")]


_AFTER_IMPORT = """\
import os
import torch

os.environ["CUDA_VISIBLE_DEVICES"] = "1"
model = torch.nn.DataParallel(torch.nn.Linear(2, 2).cuda(), device_ids=[0])
"""


def _check_with_torch(tmp_path: Path, version: str) -> dict[str, object]:
    snap = json.loads(fixture_path("a100x8").read_text())
    snap["torch"]["version"] = version
    snap_path = tmp_path / "snap.json"
    snap_path.write_text(json.dumps(snap))
    script = tmp_path / "train.py"
    script.write_text(_AFTER_IMPORT)
    args = ["lint", "--check", "--snapshot", str(snap_path), str(script), "--json"]
    out: dict[str, object] = json.loads(CliRunner().invoke(main, args).stdout)
    return out


def test_torch_1_12_0_import_initialises_cuda_under_check(tmp_path: Path) -> None:
    # pytorch/pytorch#80876: under 1.12.0 the mask set after import torch is ignored
    doc = _check_with_torch(tmp_path, "1.12.0+cu113")
    found = {(f["line"], f["code"], f["severity"]) for f in doc["findings"]}  # type: ignore[attr-defined]
    assert (4, "LINT-CVD-AFTER-CUDA-INIT", "error") in found
    assert not any(code == "LINT-CVD-AFTER-IMPORT" for _, code, _ in found)
    assert doc["cuda_visible_devices"] is None  # the script's mask never reached CUDA


def test_torch_1_12_1_keeps_the_info(tmp_path: Path) -> None:
    doc = _check_with_torch(tmp_path, "1.12.1+cu113")
    codes = {f["code"] for f in doc["findings"]}  # type: ignore[attr-defined]
    assert "LINT-CVD-AFTER-IMPORT" in codes
    assert "LINT-CVD-AFTER-CUDA-INIT" not in codes
    assert doc["cuda_visible_devices"] == "1"


# ---------------------------------------------------------------- branches and helpers


def test_a_model_that_moves_itself_in_init_is_not_on_the_cpu() -> None:
    found = _codes(
        """
        import os
        import torch.nn as nn
        from torch.nn.parallel import DistributedDataParallel as DDP

        class Net(nn.Module):
            def __init__(self, device):
                super().__init__()
                self.fc = nn.Linear(2, 2)
                self.to(device)

        rank = int(os.environ["LOCAL_RANK"])
        net = DDP(Net(f"cuda:{rank}"), device_ids=[rank])
        meta = nn.Linear(2, 2)
        meta.to_empty(device=f"cuda:{rank}")
        other = DDP(meta, device_ids=[rank])
        """,
        "LINT-DDP-DEVICE-IDS-CPU",
    )
    assert found == [(16, "warning")]


def test_cpu_collectives_under_a_default_device_are_not_reported() -> None:
    found = _codes(
        """
        import torch
        import torch.distributed as dist

        dist.init_process_group("nccl")
        torch.set_default_device("cuda")
        dist.all_reduce(torch.zeros(1))
        """,
        "LINT-NCCL-CPU-TENSOR",
    )
    assert found == []


def test_cvd_set_in_the_other_arm_of_the_cuda_call() -> None:
    found = _found(
        """
        import os
        import sys
        import torch

        if sys.argv[1] == "gpu":
            x = torch.ones(1).cuda()
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        """
    )
    assert [f for f in found if f[1] == "LINT-CVD-AFTER-CUDA-INIT"] == [
        (10, "LINT-CVD-AFTER-CUDA-INIT", "error")
    ]


def test_a_mask_in_another_arm_does_not_renumber_the_ids() -> None:
    found = _codes(
        """
        import os
        import sys
        import torch.nn as nn

        if sys.argv[1] == "pair":
            os.environ["CUDA_VISIBLE_DEVICES"] = "2,3"
        else:
            model = nn.DataParallel(nn.Linear(2, 2).cuda(), device_ids=[0, 1, 2, 3])
        """,
        "LINT-IDS-UNDER-MASK",
    )
    assert found == []


def test_a_random_port_in_a_function_nothing_calls_is_info() -> None:
    found = _codes(
        """
        import os
        import random

        def setup_env():
            os.environ["MASTER_PORT"] = str(random.randint(20000, 30000))

        rank = int(os.environ.get("RANK", 0))
        """,
        "LINT-MASTER-PORT-PER-RANK",
    )
    assert found == [(6, "info")]


def test_ddp_device_ids_in_a_method_nothing_calls_is_info() -> None:
    """Issue 17 (timm's distillation task): the wrapped module is built from a model the
    caller hands in, already moved; a method nothing in the file calls proves nothing."""
    source = """\
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

class Task:
    def __init__(self, student):
        self.student = student
        self.trainable = torch.nn.Linear(4, 4)

    def prepare_distributed(self, device_ids):
        self.trainable = DDP(self.trainable, device_ids=device_ids)
"""
    assert _codes(source, "LINT-DDP-DEVICE-IDS-CPU") == [(10, "info")]
    model = "\nmodel = torch.nn.Linear(4, 4)\nDDP(model, device_ids=[0])\n"
    assert _codes(source + model, "LINT-DDP-DEVICE-IDS-CPU") == [(10, "info"), (13, "error")]
