"""The files lint does not walk (gpudiag/lint/relevance.py): none may hide a finding.

A file without torch, CUDA, the environment, multiprocessing, a local rank, set_epoch,
state_dict or half is parsed, not walked (issue 17: lint's time). These tests hold the
skip to what it claims: every script that gets a finding in the fixtures and in the
explain examples is walked, and what a skipped file can still get (a parse error, an
unknown code in a suppression comment) it still gets.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudiag.lint import lint_source
from gpudiag.lint.examples import EXAMPLES
from gpudiag.lint.relevance import might_find

FIXTURES = Path(__file__).parent / "fixtures" / "lint"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("import torch\n", True),
        ("from Torch import x\n", True),  # any case
        ("os.environ['CUDA_VISIBLE_DEVICES'] = '1'\n", True),
        ("v = os.getenv('RANK')\n", True),
        ("parser.add_argument('--local-rank')\n", True),
        ("r = int(env['LOCAL_RANK'])\n", True),
        ("import pycuda.autoinit\n", True),
        ("import deepspeed\n", True),
        ("from concurrent.futures import ProcessPoolExecutor\n", True),
        ("import multiprocessing as mp\n", True),
        ("loader.sampler.set_epoch(0)\n", True),
        ("model.load_state_dict(sd)\n", True),
        ("model = model.half()\n", True),
        ("def tokenize(s):\n    return s.split()\n", False),
        ("import numpy as np\nx = np.zeros(3)\n", False),
        ("", False),
    ],
)
def test_might_find(text: str, expected: bool) -> None:
    assert might_find(text) is expected


def _fixtures_with_findings() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*.py.txt") if "# expect[" in p.read_text())


@pytest.mark.parametrize("path", _fixtures_with_findings(), ids=lambda p: p.name)
def test_every_fixture_with_a_finding_is_walked(path: Path) -> None:
    assert might_find(path.read_text())


@pytest.mark.parametrize("code", sorted(EXAMPLES))
def test_every_wrong_example_is_walked(code: str) -> None:
    assert might_find(EXAMPLES[code].wrong)


def test_a_skipped_file_still_gets_its_parse_error() -> None:
    found = lint_source("def broken(:\n    pass\n")
    assert [f.finding.code for f in found] == ["LINT-PARSE-ERROR"]


def test_a_skipped_file_still_gets_an_unknown_suppressed_code() -> None:
    text = "x = 1  # gpudiag: ignore[LINT-NO-SUCH-CODE]\n"
    assert not might_find(text)
    assert [f.finding.code for f in lint_source(text)] == ["LINT-IGNORE-UNKNOWN-CODE"]


def test_the_same_script_with_torch_is_walked_and_found() -> None:
    # the skip is the only difference: a file with an anchor gets its finding
    text = "import torch\nfrom torch.cuda.amp import GradScaler\nscaler = GradScaler()\n"
    assert might_find(text)
    assert "LINT-AMP-DEPRECATED" in {f.finding.code for f in lint_source(text)}
