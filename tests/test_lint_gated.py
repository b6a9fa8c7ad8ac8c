"""A process group that a project function starts only under ``if flag:``, for a flag off
by default, is not started by a call that leaves the flag off (gpudiag/lint/gated.py;
issue 17, a nineteenth held-out sample: DiffSynth-Studio's validate scripts call
``WanVideoPipeline.from_pretrained(device="cuda", …)`` without ``use_usp``, 157 false
errors). Each project is a minimal reproduction written under tmp_path."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from gpudiag.lint import lint_paths
from gpudiag.lint.gated import gate_params, unpassed

_PIPE = """
    import torch
    import torch.distributed as dist


    class Pipeline:
        def __init__(self, device):
            self.device = device

        @staticmethod
        def from_pretrained(device="cuda", use_usp=False):
            if use_usp:
                dist.init_process_group("nccl")
            return Pipeline(device)
"""

_RUN = """
    import torch

    from pkg.pipe import Pipeline

    pipe = Pipeline.from_pretrained({args})
    x = torch.zeros(3).cuda()
"""


def _project(root: Path, args: str, pipe: str = _PIPE) -> Path:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (root / "pkg" / "pipe.py").write_text(textwrap.dedent(pipe), encoding="utf-8")
    run = root / "run.py"
    run.write_text(textwrap.dedent(_RUN.format(args=args)), encoding="utf-8")
    return run


def _codes(root: Path) -> list[tuple[int, str, str]]:
    report = lint_paths([str(root)])
    return [
        (f.line, f.finding.code, f.finding.severity)
        for f in report.findings
        if Path(f.path).name == "run.py"
    ]


def test_a_call_that_leaves_the_flag_off_starts_no_process_group(tmp_path: Path) -> None:
    _project(tmp_path, 'device="cuda"')
    assert _codes(tmp_path) == []


@pytest.mark.parametrize("args", ['device="cuda", use_usp=True', '"cuda", True', "**options"])
def test_a_call_that_may_turn_it_on_keeps_the_error(tmp_path: Path, args: str) -> None:
    _project(tmp_path, args)
    assert (7, "LINT-DDP-NO-SET-DEVICE", "error") in _codes(tmp_path)


def test_a_flag_the_function_sets_itself_is_no_gate(tmp_path: Path) -> None:
    pipe = _PIPE.replace(
        "            if use_usp:",
        '            use_usp = use_usp or "WORLD_SIZE" in os.environ\n            if use_usp:',
    ).replace("import torch\n", "import os\n    import torch\n", 1)
    _project(tmp_path, 'device="cuda"', pipe)
    assert (7, "LINT-DDP-NO-SET-DEVICE", "error") in _codes(tmp_path)


def test_a_flag_on_by_default_is_no_gate(tmp_path: Path) -> None:
    _project(tmp_path, 'device="cuda"', _PIPE.replace("use_usp=False", "use_usp=True"))
    assert (7, "LINT-DDP-NO-SET-DEVICE", "error") in _codes(tmp_path)


def test_the_call_that_sets_the_device_and_is_given_one_is_not_an_error(tmp_path: Path) -> None:
    """from_pretrained(device="cuda", use_usp=True) that sets the rank's device itself:
    which comes first, the device set or the model built, lies inside the call."""
    pipe = _PIPE.replace(
        '                dist.init_process_group("nccl")\n',
        '                dist.init_process_group("nccl")\n'
        "                torch.cuda.set_device(dist.get_rank())\n",
    )
    _project(tmp_path, 'device="cuda", use_usp=True', pipe)
    assert (6, "LINT-DDP-NO-SET-DEVICE", "error") not in _codes(tmp_path)


def test_gate_parameters_and_what_a_call_passes() -> None:
    fn = ast.parse("def f(a, b=None, c=False, d=0, *, e=None, g=1): pass").body[0]
    assert isinstance(fn, ast.FunctionDef)
    gates = gate_params(list(ast.iter_child_nodes(fn)))
    assert gates == {"b": 1, "c": 2, "e": None}  # 0 is not False: only False and None
    call = ast.parse("f(a=1)").body[0].value  # type: ignore[attr-defined]
    assert unpassed(call, gates) == {"b", "c", "e"}
    # one positional argument may be b, if f is a method whose self is not written
    call = ast.parse("obj.f(1)").body[0].value  # type: ignore[attr-defined]
    assert unpassed(call, gates) == {"c", "e"}
    call = ast.parse("f(1, c=True)").body[0].value  # type: ignore[attr-defined]
    assert unpassed(call, gates) == {"e"}
    call = ast.parse("f(1, e=3, *rest)").body[0].value  # type: ignore[attr-defined]
    assert unpassed(call, gates) == set()


def test_a_gloo_group_stays_gloo_when_an_unrelated_flag_is_left_off(tmp_path: Path) -> None:
    """A review of the change: with a gate left off, the call's backends were not kept,
    and a gloo-only setup became a DDP script with an unknown backend (a false error)."""
    pipe = """
        import torch.distributed as dist


        def setup(rank=0, verbose=False):
            dist.init_process_group("gloo")
            if verbose:
                print("started")
    """
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pkg" / "h.py").write_text(textwrap.dedent(pipe), encoding="utf-8")
    run = "import torch\nfrom pkg.h import setup\n\nsetup()\nx = torch.zeros(3).cuda()\n"
    (tmp_path / "run.py").write_text(run, encoding="utf-8")
    assert _codes(tmp_path) == []


def test_a_nested_function_s_parameter_of_that_name_is_no_gate(tmp_path: Path) -> None:
    """A review of the change: ``def worker(distributed): if distributed: …`` inside
    ``run_job(distributed=False)`` tests the inner parameter, which run_job passes."""
    pipe = """
        import torch
        import torch.distributed as dist


        def run_job(rank=0, distributed=False):
            def worker(distributed):
                if distributed:
                    dist.init_process_group("nccl")

            worker(torch.cuda.device_count() > 1)
    """
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pkg" / "h.py").write_text(textwrap.dedent(pipe), encoding="utf-8")
    run = "import torch\nfrom pkg.h import run_job\n\nrun_job()\nx = torch.zeros(3).cuda()\n"
    (tmp_path / "run.py").write_text(run, encoding="utf-8")
    assert (5, "LINT-DDP-NO-SET-DEVICE", "error") in _codes(tmp_path)
