"""CUDA contexts every DDP rank makes on cuda:0 (issue 18, "memory held by others"), read
with the project: a set_device in a helper module the script imports counts, wherever
the call that makes the context stands against it. The single-file cases are the
``*_ddp_context_*`` and ``*_ddp_load_*`` fixtures of tests/fixtures/lint/.

Each project is a minimal reproduction of a real pattern, written under tmp_path."""

from __future__ import annotations

import textwrap
from pathlib import Path

from gpudiag.lint import lint_paths, lint_source

_CODE = "LINT-DDP-CUDA0-CONTEXT"
_LOAD = "LINT-DDP-LOAD-NO-MAP-LOCATION"

_HELPER = """
    import os
    import torch
    import torch.distributed as dist


    def setup_distributed():
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        dist.init_process_group(backend="nccl")
        return local_rank
"""


def _lint(root: Path, files: dict[str, str], script: str) -> list[tuple[int, str, str]]:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    report = lint_paths([str(root)])
    return [
        (f.line, f.finding.code, f.finding.severity)
        for f in report.findings
        if Path(f.path).name == script and f.finding.code in (_CODE, _LOAD)
    ]


def test_set_device_in_a_helper_module_after_the_call(tmp_path: Path) -> None:
    """synchronize() before the project's setup_distributed(), which sets the device: a
    context on cuda:0 in every rank, at the line of the call only."""
    found = _lint(
        tmp_path,
        {
            "utils/__init__.py": "",
            "utils/dist.py": _HELPER,
            "train.py": """
                import torch
                from utils.dist import setup_distributed

                torch.cuda.synchronize()
                local_rank = setup_distributed()
                torch.cuda.synchronize()
                model = torch.nn.Linear(2, 2).cuda()
            """,
        },
        "train.py",
    )
    assert found == [(5, _CODE, "warning")]


def test_set_device_in_a_helper_module_before_the_call(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        {
            "utils/__init__.py": "",
            "utils/dist.py": _HELPER,
            "train.py": """
                import torch
                from utils.dist import setup_distributed

                local_rank = setup_distributed()
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
                free, total = torch.cuda.mem_get_info()
            """,
        },
        "train.py",
    )
    assert found == []


def test_an_unreadable_setup_before_the_call_makes_it_info(tmp_path: Path) -> None:
    """mmcv-style init_dist() from a package lint cannot read may select the device."""
    found = _lint(
        tmp_path,
        {
            "utils/__init__.py": "",
            "utils/dist.py": _HELPER,
            "train.py": """
                import torch
                from mmcv.runner import init_dist
                from utils.dist import setup_distributed

                init_dist("pytorch")
                torch.cuda.synchronize()
                local_rank = setup_distributed()
            """,
        },
        "train.py",
    )
    assert found == [(7, _CODE, "info")]


def test_a_helper_module_is_no_ddp_script_of_its_own(tmp_path: Path) -> None:
    """A module of functions (synchronize in one, set_device in another) is not a rank:
    the order its functions run in is its callers'."""
    found = _lint(
        tmp_path,
        {
            "lib.py": """
                import torch


                def timed(fn):
                    torch.cuda.synchronize()
                    return fn()


                def pin(rank):
                    torch.cuda.set_device(rank)
            """,
        },
        "lib.py",
    )
    assert found == []


def test_every_load_without_map_location_is_reported() -> None:
    """Every occurrence: the model's and the optimizer's checkpoints, one line each."""
    script = textwrap.dedent(
        """
        import os
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl")
        net = torch.nn.Linear(2, 2).cuda()
        opt = torch.optim.AdamW(net.parameters())


        def resume(path):
            state = torch.load(path)
            net.load_state_dict(state["net"])
            opt.load_state_dict(torch.load(path + ".opt"))


        resume("ckpt")
        model = DDP(net, device_ids=[local_rank])
        if dist.get_rank() == 0:
            torch.save({"net": net.state_dict()}, "ckpt")
            torch.save(opt.state_dict(), "ckpt.opt")
        """
    )
    found = [(f.line, f.finding.severity) for f in lint_source(script) if f.finding.code == _LOAD]
    assert found == [(15, "warning"), (17, "warning")]


def test_a_load_another_arm_maps_is_info() -> None:
    """pytorch/examples imagenet: without map_location only where no GPU is chosen (one
    process drives every GPU), with it in the arm of each rank's own GPU."""
    script = textwrap.dedent(
        """
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
        from torch.nn.parallel import DistributedDataParallel as DDP


        def worker(gpu, args):
            dist.init_process_group("nccl", init_method="tcp://127.0.0.1:23456",
                                    world_size=2, rank=gpu)
            torch.cuda.set_device(gpu)
            net = torch.nn.Linear(2, 2).cuda(gpu)
            if args.resume:
                if args.gpu is None:
                    checkpoint = torch.load(args.resume)
                else:
                    checkpoint = torch.load(args.resume, map_location=f"cuda:{gpu}")
                net.load_state_dict(checkpoint["state_dict"])
            model = DDP(net, device_ids=[gpu])
            torch.save({"state_dict": model.module.state_dict()}, "checkpoint.pth.tar")


        if __name__ == "__main__":
            mp.spawn(worker, nprocs=2, args=(None,))
        """
    )
    found = [(f.line, f.finding.severity) for f in lint_source(script) if f.finding.code == _LOAD]
    assert found == [(15, "info")]


_WARM_UP = """\
import os

import torch
import torch.distributed as dist

{early}
dist.init_process_group(backend="nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
model = torch.nn.Linear(2, 2).cuda()
"""


def _codes(text: str) -> list[tuple[int, str, str]]:
    return [
        (f.line, f.finding.code, f.finding.severity)
        for f in lint_source(text)
        if f.finding.code in (_CODE, "LINT-DDP-NO-SET-DEVICE")
    ]


def test_a_tensor_made_before_set_device_and_thrown_away_is_a_context() -> None:
    """modded-nanogpt's ``torch.empty(1, device='cuda', requires_grad=True).backward()`` at
    import, before the set_device: each rank moves to its own GPU afterwards but leaves a
    context on GPU 0 (a fifth held-out corpus: 3 false LINT-DDP-NO-SET-DEVICE errors that
    said every rank trains on GPU 0). What is kept (a model moved in place, a tensor bound
    to a name) still lands on cuda:0: that stays the error."""
    early = "torch.empty(1, device='cuda', requires_grad=True).backward()"
    assert _codes(_WARM_UP.format(early=early)) == [(6, _CODE, "warning")]
    kept = "warm = torch.empty(1, device='cuda', requires_grad=True)"
    assert _codes(_WARM_UP.format(early=kept)) == [(6, "LINT-DDP-NO-SET-DEVICE", "error")]
    moved = "head = torch.nn.Linear(2, 2)\nhead.cuda()"
    assert _codes(_WARM_UP.format(early=moved)) == [(7, "LINT-DDP-NO-SET-DEVICE", "error")]


def test_a_module_with_nothing_to_move_makes_no_placement() -> None:
    """FasterViT's and MambaVision's module-level ``torch.nn.KLDivLoss(...).cuda()``:
    a loss with no parameter or buffer moves nothing and starts no context (an eighth
    held-out corpus, 2 false LINT-DDP-NO-SET-DEVICE errors). A weighted loss holds a
    buffer, and a Linear parameters: those are still placements."""
    for early in (
        "kl = torch.nn.KLDivLoss(reduction='batchmean').cuda()",
        "act = torch.nn.GELU().cuda()",
    ):
        assert _codes(_WARM_UP.format(early=early)) == []
    for early in (
        "ce = torch.nn.CrossEntropyLoss(weight=torch.ones(3)).cuda()",
        "head = torch.nn.Linear(2, 2).cuda()",
    ):
        assert _codes(_WARM_UP.format(early=early)) == [(6, "LINT-DDP-NO-SET-DEVICE", "error")]
