"""Issue 17: every definition is read, version gates and except fallbacks cap findings at
info, and the GradScaler rules take their certainty from the optimizer.

Each script is a minimal reproduction of a pattern met in public training repositories
(a second class's forward with the old autocast; Lightning's / accelerate's version
gates; timm's except fallback; apex's fused optimizer that unscales its own gradients;
from_pretrained(torch_dtype=torch.float16) before a GradScaler)."""

from __future__ import annotations

import ast
import time

import pytest

from gpudiag.findings.texts import UNSCALE_BF16_CUDA, UNSCALE_FP16
from gpudiag.lint import LintFinding, lint_source
from gpudiag.lint.codes import hit
from gpudiag.lint.gates import FALLBACK_NOTE, GATE_NOTE, cap, is_gate
from gpudiag.lint.source import lint_text


def _found(text: str, code: str | None = None) -> list[tuple[int, str]]:
    return [
        (f.line, f.finding.severity)
        for f in lint_source(text)
        if code is None or f.finding.code == code
    ]


def _only(text: str, code: str) -> list[LintFinding]:
    return [f for f in lint_source(text) if f.finding.code == code]


# ---------------------------------------------------------------- every definition


def test_every_class_s_forward_is_read() -> None:
    text = """\
import torch

class A(torch.nn.Module):
    def forward(self, x):
        with torch.cuda.amp.autocast():
            return x

class B(torch.nn.Module):
    def forward(self, x):
        with torch.cuda.amp.autocast():
            return x

class C(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scaler = torch.cuda.amp.GradScaler()
"""
    assert _found(text, "LINT-AMP-DEPRECATED") == [(5, "warning"), (10, "warning"), (16, "warning")]


@pytest.mark.parametrize(
    "calls",
    [
        ["first = make().cuda()", "second = make()", "third = make()"],
        ["first = make(2).cuda()", "second = make(4)", "third = make(2)"],
    ],
)
def test_a_body_walked_twice_still_returns_at_a_third_call(calls: list[str]) -> None:
    """A body is walked at most twice (issue 17: lint's time); a later call with the
    arguments of an earlier walk gets what that walk returned: the CPU module here."""
    text = "\n".join(
        [
            "import os",
            "import torch",
            "import torch.distributed as dist",
            "from torch.nn.parallel import DistributedDataParallel as DDP",
            "def make(n=2):",
            "    return torch.nn.Linear(n, n)",
            'dist.init_process_group("nccl")',
            "torch.cuda.set_device(int(os.environ['LOCAL_RANK']))",
            *calls,
            "model = DDP(third, device_ids=[0])",
        ]
    )
    assert [line for line, _ in _found(text, "LINT-DDP-DEVICE-IDS-CPU")] == [12]


_SPAWNED_TWICE = """\
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

def _init(rank, world_size):
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)

def _worker(rank, world_size):
    _init(rank, world_size)
    model = torch.nn.Linear(2, 2).cuda()
    DDP(model, device_ids=[rank])

def test_one():
    mp.spawn(_worker, args=(2,), nprocs=2)

def test_two():
    mp.spawn(_worker, args=(4,), nprocs=4)
"""


def test_a_body_not_walked_again_still_sets_the_device() -> None:
    """A helper walked twice already (on its own, then from ``_worker``) is not walked in
    the spawned rank; its ``set_device`` still counts there (issue 17, the held-out
    corpus: fairscale's tests set the device in a ``_dist_init`` helper of the same
    file, and every placement after it was a false LINT-DDP-NO-SET-DEVICE error)."""
    assert _found(_SPAWNED_TWICE, "LINT-DDP-NO-SET-DEVICE") == []
    # the same script whose helper does not set the device is still an error, in the rank
    unset = _SPAWNED_TWICE.replace("    torch.cuda.set_device(rank)\n", "")
    assert _found(unset, "LINT-DDP-NO-SET-DEVICE") == [(11, "error")]


def test_both_definitions_under_if_else_are_read() -> None:
    text = """\
import torch

if torch.cuda.is_available():
    def step(x):
        with torch.cuda.amp.autocast():
            return x
else:
    def step(x):
        with torch.cpu.amp.autocast():
            return x
step(1)
"""
    assert _found(text, "LINT-AMP-DEPRECATED") == [(5, "warning"), (9, "warning")]


def test_a_decorator_imported_by_name_is_reported_where_applied() -> None:
    text = """\
import torch
from torch.cuda.amp import custom_bwd, custom_fwd

class F(torch.autograd.Function):
    @staticmethod
    @custom_fwd
    def forward(ctx, x):
        return x

    @staticmethod
    @custom_bwd
    def backward(ctx, g):
        return g
"""
    assert _found(text, "LINT-AMP-DEPRECATED") == [(2, "warning"), (6, "warning"), (11, "warning")]


def test_two_classes_methods_are_two_processes() -> None:
    # a float16 model in one class and a GradScaler in another are not one process
    text = """\
import torch

class Export:
    def run(self):
        self.model = torch.nn.Linear(2, 2).cuda().half()
        opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

class Train:
    def run(self):
        scaler = torch.amp.GradScaler("cuda")
        scaler.step(self.opt)
"""
    assert _found(text, "LINT-SCALER-FP16-PARAMS") == []


def test_a_later_method_starts_from_its_own_class_s_init() -> None:
    # what the walk of another class's method put in `self` is forgotten; what the
    # method's own class's __init__ put there is kept
    text = """\
import torch

class A:
    def __init__(self):
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def run(self):
        pass

class B:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")

    def run(self):
        self.scaler.step(self.opt)
"""
    _, facts = lint_text(text)
    assert facts is not None
    steps = facts.of("scaler_step")
    assert [(s.line, s.text("path")) for s in steps] == [(15, "")]  # not A's SGD
    assert steps[0].proc == "def:run@14"


def test_a_method_stepping_its_init_s_scaler_is_checked() -> None:
    text = """\
import torch

class Trainer:
    def __init__(self):
        self.model = torch.nn.Linear(2, 2).cuda()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.scaler = torch.amp.GradScaler("cuda")

    def fit(self, x):
        self.model.half()
        self.scaler.scale(self.model(x).sum()).backward()
        self.scaler.step(self.opt)
"""
    assert _found(text, "LINT-SCALER-FP16-PARAMS") == [(10, "error")]


# ---------------------------------------------------------------- version gates


@pytest.mark.parametrize(
    "test",
    [
        "torch.__version__ >= '2.4'",
        "version.parse(torch.__version__) >= version.parse('2.4')",
        "packaging.version.Version(torch.__version__).release >= (2, 4)",
        "_TORCH_GREATER_EQUAL_2_4",
        "TORCH_2_4 and x",
        "not TORCH_VERSION >= (2, 4)",
        "digit_version(TORCH_VERSION) < digit_version('1.10.0')",
        "is_torch_version('>=', '2.4.0')",
        "is_torch_greater_or_equal('2.4')",
        "is_torch_greater_than_1_6",
        "utils.is_torch_min_version('2.4.0a0')",
        "hasattr(torch, 'amp')",
        "hasattr(torch.amp, 'GradScaler')",
        "getattr(torch.cuda.amp, 'custom_fwd', None) is None",
    ],
)
def test_what_counts_as_a_gate(test: str) -> None:
    assert is_gate(ast.parse(test, mode="eval").body)


@pytest.mark.parametrize(
    "test",
    [
        "is_torch_available()",
        "torch.cuda.is_available()",
        "args.amp",
        "torch_dtype == torch.float16",
        "hasattr(model, 'module')",
        "sys.version_info >= (3, 8)",
    ],
)
def test_what_is_not_a_gate(test: str) -> None:
    assert not is_gate(ast.parse(test, mode="eval").body)


def test_both_branches_of_a_gate_and_the_ternary_are_info_with_a_note() -> None:
    text = """\
import torch
from utils import TORCH_2_4, is_torch_version

scaler = torch.amp.GradScaler("cuda") if TORCH_2_4 else torch.cuda.amp.GradScaler()
if is_torch_version("<", "2.4"):
    ctx = torch.cuda.amp.autocast()
else:
    ctx = torch.cpu.amp.autocast()
with torch.cuda.amp.autocast():
    pass
"""
    found = _only(text, "LINT-AMP-DEPRECATED")
    # line 8 is the arm every torch >= 2.4 takes (`not < 2.4`): not guarded, it warns
    assert [(f.line, f.finding.severity) for f in found] == [
        (4, "info"),
        (6, "info"),
        (8, "warning"),
        (9, "warning"),
    ]
    assert all(f.finding.message.endswith(GATE_NOTE) for f in found[:2])
    assert not any(f.finding.message.endswith(GATE_NOTE) for f in found[2:])


def test_a_name_or_function_computed_from_the_version_is_a_gate() -> None:
    text = """\
import torch
from packaging import version

NEW_AMP = version.parse(torch.__version__) >= version.parse("2.4")
USE_OLD = not NEW_AMP

def has_new_amp():
    return hasattr(torch.amp, "GradScaler")

if USE_OLD:
    a = torch.cuda.amp.autocast()
if not has_new_amp():
    b = torch.cuda.amp.GradScaler()
"""
    assert _found(text, "LINT-AMP-DEPRECATED") == [(11, "info"), (13, "info")]


def test_code_after_an_early_return_under_a_gate_is_guarded() -> None:
    text = """\
import torch
from utils import TORCH_2_4

def scaler():
    if TORCH_2_4:
        return torch.amp.GradScaler("cuda")
    return torch.cuda.amp.GradScaler()

def other():
    if torch.cuda.is_available():
        return None
    return torch.cuda.amp.GradScaler()
"""
    assert _found(text, "LINT-AMP-DEPRECATED") == [(7, "info"), (12, "warning")]


def test_except_fallbacks_are_info_with_a_note() -> None:
    text = """\
import torch

try:
    from torch.amp import GradScaler
except ImportError:
    from torch.cuda.amp import GradScaler

try:
    s = torch.amp.GradScaler(device="cuda")
except (AttributeError, TypeError):
    s = torch.cuda.amp.GradScaler()

try:
    fwd = torch.amp.custom_fwd(device_type="cuda")
except:  # noqa: E722
    fwd = torch.cuda.amp.custom_fwd()

try:
    run()
except Exception:
    s = torch.cuda.amp.GradScaler()
"""
    found = _only(text, "LINT-AMP-DEPRECATED")
    assert [(f.line, f.finding.severity) for f in found] == [
        (6, "info"),
        (11, "info"),
        (16, "info"),
        (21, "warning"),  # a catch-all around code that probes no API: not a fallback
    ]
    assert all(f.finding.message.endswith(FALLBACK_NOTE) for f in found[:3])


@pytest.mark.parametrize(
    ("first", "fallback", "expected"),
    [
        # the try's import is what current torch gives: its uses do not warn
        ("torch.amp", "torch.cuda.amp", [(6, "info")]),
        # the try imports the old API, which current torch still has: its uses warn
        ("torch.cuda.amp", "torch.amp", [(4, "warning"), (9, "warning")]),
    ],
)
def test_a_name_imported_in_try_and_in_its_fallback_is_the_try_s(
    first: str, fallback: str, expected: list[tuple[int, str]]
) -> None:
    """The code after ``try: import X / except ImportError: import X`` sees the try's X
    (issue 17, the held-out corpus: ignite's tests used torch.amp.GradScaler, and each
    use was reported as the fallback's deprecated torch.cuda.amp.GradScaler)."""
    text = f"""\
import torch
from torch import nn
try:
    from {first} import GradScaler
except ImportError:
    from {fallback} import GradScaler

def test_scaler():
    scaler = GradScaler(enabled=False)
"""
    assert _found(text, "LINT-AMP-DEPRECATED") == expected


_SKIPPED_TEST = """\
import pytest
import torch
import unittest

def helper(x):
    with torch.cuda.amp.autocast():
        return x

{marker}
def test_it():
    {first}
    helper(1)
"""


@pytest.mark.parametrize(
    ("marker", "first", "severity"),
    [
        # never runs on current torch: what only it reaches is info
        ('@pytest.mark.skipif(torch_version() >= (1, 14, 0), reason="old")', "pass", "info"),
        ('@pytest.mark.skipif(torch.__version__ >= "2.0", reason="old")', "pass", "info"),
        ('@unittest.skipUnless(torch.__version__ < "2.0", "old")', "pass", "info"),
        ('@pytest.mark.skip("broken at head")', "pass", "info"),
        ("@pytest.mark.skip", "pass", "info"),
        ("", 'pytest.skip("until the issue is fixed")', "info"),
        # a version gate whose direction lint cannot read: as under any version gate
        ("@pytest.mark.skipif(torch_version_is_old(), reason='old')", "pass", "info"),
        # not a torch-version gate at all: the test runs
        ("@pytest.mark.skipif(OLD_TORCH, reason='old')", "pass", "warning"),
        # runs on every current torch: the warning stands
        ('@pytest.mark.skipif(not is_torch_min_version("2.4.0"), reason="new")', "pass", "warning"),
        ('@unittest.skipIf(torch.__version__ < "2.0", "new")', "pass", "warning"),
        ("@pytest.mark.skipif(not torch.cuda.is_available(), reason='gpu')", "pass", "warning"),
        ("", "pass", "warning"),
    ],
)
def test_a_helper_only_a_skipped_test_reaches_is_info(
    marker: str, first: str, severity: str
) -> None:
    """Issue 17, the held-out corpus: fairscale's FSDP tests are skipped on torch >= 1.14
    (or at head) and reach deprecated AMP only through their helpers."""
    found = _only(_SKIPPED_TEST.format(marker=marker, first=first), "LINT-AMP-DEPRECATED")
    assert [(f.line, f.finding.severity) for f in found] == [(6, severity)]
    assert found[0].finding.message.endswith("(only in a test skipped on current torch)") == (
        severity == "info"
    )


def test_a_helper_a_live_test_reaches_too_stays_a_warning() -> None:
    text = _SKIPPED_TEST.format(marker="@pytest.mark.skip", first="pass") + (
        "\ndef test_live():\n    helper(2)\n"
    )
    assert _found(text, "LINT-AMP-DEPRECATED") == [(6, "warning")]


def test_the_cap_applies_to_every_rule() -> None:
    # another rule's error under a gate (issue 17: `--local_rank` added only under 1.x)
    text = """\
import os
import torch
from utils import TORCH_VERSION

torch.cuda.init()
if TORCH_VERSION < (1, 10):
    os.environ["CUDA_VISIBLE_DEVICES"] = "1"
os.environ["CUDA_VISIBLE_DEVICES"] = "0"
"""
    found = _found(text, "LINT-CVD-AFTER-CUDA-INIT")
    assert found == [(7, "info"), (8, "error")]


def test_cap_makes_only_the_guarded_hits_info() -> None:
    tree = ast.parse("if not TORCH_2_4:\n    a()\nb()\n")
    hits = [
        hit(2, 5, "LINT-AMP-DEPRECATED", "warning", "m.", None, None),
        hit(3, 1, "LINT-AMP-DEPRECATED", "error", "m.", None, None),
    ]
    capped = cap(hits, tree, ["if not TORCH_2_4:", "    a()", "b()"])
    assert [(h.finding.severity, h.finding.message) for h in capped] == [
        ("info", f"m. {GATE_NOTE}"),
        ("error", "m."),
    ]


# ---------------------------------------------------------------- deprecated imports


def test_an_import_nothing_uses_is_info() -> None:
    text = """\
import torch
from torch.cuda.amp import GradScaler
from torch.cuda.amp import autocast

def test(scaler):
    assert isinstance(scaler, GradScaler)

with autocast():
    pass
"""
    assert _found(text, "LINT-AMP-DEPRECATED") == [(2, "info"), (3, "warning"), (8, "warning")]


# ---------------------------------------------------------------- GradScaler rules


_TRAIN = """\
for x in loader:
    scaler.scale(model(x).float().mean()).backward()
    scaler.step(optimizer)
    scaler.update()
"""


def test_torch_dtype_float16_weights_with_a_torch_optimizer_is_an_error() -> None:
    text = (
        "import torch\nfrom transformers import AutoModel\n"
        "model = AutoModel.from_pretrained('m', torch_dtype=torch.float16).cuda()\n"
        "optimizer = torch.optim.AdamW(model.parameters())\n"
        "scaler = torch.amp.GradScaler('cuda')\n" + _TRAIN
    )
    found = _only(text, "LINT-SCALER-FP16-PARAMS")
    assert [(f.line, f.finding.severity) for f in found] == [(3, "error")]
    assert found[0].finding.predicts == UNSCALE_FP16


@pytest.mark.parametrize(
    "make",
    [
        "model = model.to(torch.bfloat16)",
        "model.bfloat16()",
        "model = model.to(dtype=torch.bfloat16)",
    ],
)
def test_bfloat16_weights_under_a_cuda_scaler_is_an_error(make: str) -> None:
    text = (
        "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"
        f"{make}\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "scaler = torch.cuda.amp.GradScaler()\n" + _TRAIN
    )
    found = _only(text, "LINT-SCALER-FP16-PARAMS")
    assert [(f.line, f.finding.severity) for f in found] == [(3, "error")]
    assert found[0].finding.predicts == UNSCALE_BF16_CUDA


def test_an_optimizer_that_may_unscale_its_own_gradients_is_info() -> None:
    text = (
        "import torch\nfrom apex.optimizers import FusedLAMB\n"
        "model = torch.nn.Linear(2, 2).cuda().half()\n"
        "optimizer = FusedLAMB(model.parameters(), lr=0.1)\n"
        "scaler = torch.amp.GradScaler('cuda')\n" + _TRAIN
    )
    found = _only(text, "LINT-SCALER-FP16-PARAMS")
    assert [(f.line, f.finding.severity) for f in found] == [(3, "info")]
    assert "_step_supports_amp_scaling" in found[0].finding.message


def test_an_optimizer_made_out_of_sight_is_a_warning() -> None:
    text = (
        "import torch\nfrom helpers import build_optimizer\n"
        "model = torch.nn.Linear(2, 2).cuda().half()\n"
        "optimizer = build_optimizer(model)\n"
        "scaler = torch.amp.GradScaler('cuda')\n" + _TRAIN
    )
    assert _found(text, "LINT-SCALER-FP16-PARAMS") == [(3, "warning")]


def test_every_float16_model_is_reported() -> None:
    text = (
        "import torch\n"
        "model = torch.nn.Linear(2, 2).cuda().half()\n"
        "head = torch.nn.Linear(2, 2).cuda().half()\n"
        "optimizer = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.1)\n"
        "opt2 = torch.optim.SGD(head.parameters(), lr=0.1)\n"
        "scaler = torch.amp.GradScaler('cuda')\n" + _TRAIN + "scaler.step(opt2)\n"
    )
    assert _found(text, "LINT-SCALER-FP16-PARAMS") == [(2, "error"), (3, "error")]


def test_a_scaler_per_bf16_autocast_every_occurrence() -> None:
    text = """\
import torch
s1 = torch.amp.GradScaler("cuda")
s2 = torch.amp.GradScaler("cuda")
with torch.autocast("cuda", dtype=torch.bfloat16):
    pass
"""
    assert _found(text, "LINT-SCALER-BF16") == [(2, "warning"), (3, "warning")]


# ---------------------------------------------------------------- linear time


def _best(text: str, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        lint_source(text)
        times.append(time.perf_counter() - start)
    return min(times)


def _classes(n: int) -> str:
    unit = (
        "class C{i}(torch.nn.Module):\n"
        "    def __init__(self):\n        self.s = torch.cuda.amp.GradScaler()\n"
        "    def forward(self, x):\n        return self.helper(x)\n"
        "    def helper(self, x):\n        with torch.cuda.amp.autocast():\n"
        "            return x.half()\n"
    )
    return "import torch\n" + "".join(unit.format(i=i) for i in range(n))


def _gates(n: int) -> str:
    unit = (
        "if TORCH_2_4:\n    s = torch.amp.GradScaler('cuda')\nelse:\n"
        "    s = torch.cuda.amp.GradScaler()\n"
        "t = torch.cuda.amp.autocast() if not hasattr(torch, 'amp') else None\n"
        "try:\n    from torch.amp import autocast\nexcept ImportError:\n"
        "    from torch.cuda.amp import autocast\n"
    )
    return "import torch\nfrom u import TORCH_2_4\n" + unit * n


@pytest.mark.parametrize("make", [_classes, _gates])
def test_many_definitions_and_gates_take_linear_time(make) -> None:  # type: ignore[no-untyped-def]
    # every definition read once more, every gate and fallback read once: x4, ~x4
    small, large = _best(make(150)), _best(make(600))
    assert large < 9 * small + 0.05, (small, large)
    found = lint_source(make(600))
    assert found and all(f.line > 0 for f in found)


def test_a_gate_that_refuses_old_torch_does_not_guard_the_script_after_it() -> None:
    # horovod: `if amp and torch < 1.6: raise ValueError(...)`, then the training itself
    text = """\
import torch
from packaging import version

def main(args):
    if args.amp and version.parse(torch.__version__) < version.parse("1.6.0"):
        raise ValueError("needs torch >= 1.6")
    if version.parse(torch.__version__) < version.parse("2.0"):
        return None
    scaler = torch.cuda.amp.GradScaler()
    return scaler
"""
    assert _found(text, "LINT-AMP-DEPRECATED") == [(9, "warning")]


def test_the_other_branch_of_a_refusal_is_the_script() -> None:
    text = """\
import sys
import torch
from utils import TORCH_VERSION

if TORCH_VERSION < (1, 6):
    raise SystemExit("needs torch >= 1.6")
else:
    scaler = torch.cuda.amp.GradScaler()
if TORCH_VERSION >= (1, 6):
    ctx = torch.cuda.amp.autocast()
else:
    sys.exit("needs torch >= 1.6")
"""
    assert _found(text, "LINT-AMP-DEPRECATED") == [(8, "warning"), (10, "warning")]


# ------------------------------------------- the arm every current torch takes (issue 17)


def test_an_arm_every_torch_since_2_4_takes_is_not_guarded() -> None:
    """transformers' trainer: `if version.parse(torch.__version__) >= version.parse("1.6"):
    from torch.cuda.amp import autocast` runs on every torch >= 2.4, where it warns; the
    other arm (only old torch) stays guarded."""
    text = """\
import torch
from packaging import version
from utils import TORCH_1_9, _TORCH_GREATER_EQUAL_2_4

if version.parse(torch.__version__) >= version.parse("1.6"):
    a = torch.cuda.amp.autocast()
else:
    b = torch.cuda.amp.autocast()
if torch.__version__ < "1.10":
    c = torch.cuda.amp.GradScaler()
else:
    d = torch.cuda.amp.GradScaler()
e = torch.amp.GradScaler("cuda") if _TORCH_GREATER_EQUAL_2_4 else torch.cuda.amp.GradScaler()
if not TORCH_1_9:
    f = torch.cuda.amp.GradScaler()
if version.parse(torch.__version__) >= version.parse("2.5"):
    g = torch.cuda.amp.GradScaler()
"""
    assert _found(text, "LINT-AMP-DEPRECATED") == [
        (6, "warning"),
        (8, "info"),
        (10, "info"),
        (12, "warning"),
        (13, "info"),
        (15, "info"),
        (17, "info"),  # >= 2.5: torch 2.4 itself does not take it, so it stays a gate
    ]


@pytest.mark.parametrize(
    ("test", "expected"),
    [
        ('version.parse(torch.__version__) >= version.parse("1.6")', True),
        ('torch.__version__ >= "2.4"', True),
        ('torch.__version__ > "2.4"', None),
        ('"1.10" > torch.__version__', False),
        ("TORCH_VERSION >= (1, 8)", True),
        ('is_torch_version(">=", "2.0.0")', True),
        ('is_torch_version("<", "2.4")', False),
        ("is_torch_greater_than_1_6", True),
        ("_TORCH_GREATER_EQUAL_2_6", None),
        ("not _TORCH_GREATER_EQUAL_1_12", False),
        ('torch.__version__[:3] >= "1.6"', None),
        ('hasattr(torch, "amp")', None),
    ],
)
def test_which_arm_current_torch_takes(test: str, expected: bool | None) -> None:
    from gpudiag.lint.gates_version import holds_on_modern

    assert holds_on_modern(ast.parse(test, mode="eval").body) is expected


def test_an_optimizer_class_of_the_file_that_unscales_its_own_gradients_is_info() -> None:
    text = (
        "import torch\n"
        "class ZeroOpt(torch.optim.Optimizer):\n"
        "    _step_supports_amp_scaling = True\n"
        "model = torch.nn.Linear(2, 2).cuda().half()\n"
        "optimizer = ZeroOpt(model.parameters(), {})\n"
        "scaler = torch.amp.GradScaler('cuda')\n" + _TRAIN
    )
    found = _only(text, "LINT-SCALER-FP16-PARAMS")
    assert [(f.line, f.finding.severity) for f in found] == [(4, "info")]
    assert "_step_supports_amp_scaling" in found[0].finding.message
