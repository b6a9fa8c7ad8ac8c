"""A file that parses but does not compile gets one LINT-PARSE-ERROR, not the findings
about what it would do (gpudiag/lint/compiles.py; issue 17, the eighth held-out corpus:
a repeated ``help=`` keyword in an eval script judged to make its warnings wrong)."""

from __future__ import annotations

import ast
import warnings

import pytest

from gpudiag.lint import lint_source
from gpudiag.lint.compiles import compile_error, parse

_WARNED = """\
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl")
"""


def _codes(text: str) -> list[tuple[int, str, str]]:
    return [(f.line, f.finding.code, f.finding.severity) for f in lint_source(text)]


def test_the_warning_is_reported_where_the_file_compiles() -> None:
    assert (7, "LINT-DEVICE-FROM-GLOBAL-RANK", "warning") in _codes(_WARNED)


@pytest.mark.parametrize(
    ("broken", "line", "words"),
    [
        # CPython's compiler, not its parser, rejects these (Python/compile.c, symtable.c)
        (
            "import argparse\np = argparse.ArgumentParser()\n"
            "p.add_argument('--n', help='a', help='b')\n",
            3,
            "keyword argument repeated",
        ),
        ("def f(a, a):\n    return a\n", 1, "duplicate argument"),
        ("return 1\n", 1, "'return' outside function"),
    ],
)
def test_a_file_that_does_not_compile_reports_only_that(broken: str, line: int, words: str) -> None:
    text = _WARNED + broken
    found = lint_source(text)
    assert [(f.finding.code, f.finding.severity) for f in found] == [("LINT-PARSE-ERROR", "error")]
    assert found[0].line == len(_WARNED.splitlines()) + line
    assert words in found[0].finding.message
    assert "cannot compile" in found[0].finding.message
    # and Python agrees: the same error from compiling the same source
    with pytest.raises(SyntaxError, match=words):
        compile(text, "<test>", "exec", dont_inherit=True)


def test_a_file_with_only_info_is_not_compiled() -> None:
    # a broken file whose findings are all info keeps them: the check is before a warning
    text = "return 1\n"
    assert _codes(text) == []


def test_compile_error_ignores_syntax_warnings_and_future_flags() -> None:
    # "invalid escape sequence" is a warning, not an error, even under -W error
    assert compile_error(parse("x = '\\d'\n"), "<test>") is None
    # gpudiag's own `from __future__ import annotations` does not leak into the check
    tree = ast.parse("from __future__ import annotations\ndef f() -> Undefined: ...\n")
    assert compile_error(tree, "<test>") is None
    # and a future import that is not first does not compile
    late = ast.parse("import os\nfrom __future__ import annotations\n")
    failed = compile_error(late, "<test>")
    assert failed is not None and "__future__" in failed.msg


def test_escape_warnings_in_the_file_are_not_lint_s_under_w_error() -> None:
    # '\d' warns when parsed (DeprecationWarning on 3.11, SyntaxWarning from 3.12); a test
    # run under PYTHONWARNINGS=error turned it into a false LINT-PARSE-ERROR
    text = _WARNED + "import re\nPATTERN = re.compile('\\d+')\n"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("error")
        found = _codes(text)
    assert (7, "LINT-DEVICE-FROM-GLOBAL-RANK", "warning") in found
    assert "LINT-PARSE-ERROR" not in {code for _, code, _ in found}
    assert seen == []


def test_a_file_whose_findings_are_all_info_still_reports_that_it_does_not_compile() -> None:
    """A finding demoted to info (here a mask set after ``import torch`` but before any
    CUDA call) must not hide that the file does not compile at all."""
    text = (
        "import os\nimport torch\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n"
        "import argparse\np = argparse.ArgumentParser()\n"
        "p.add_argument('--n', help='a', help='b')\n"
    )
    assert [(c, s) for _, c, s in _codes(text)] == [("LINT-PARSE-ERROR", "error")]
    fine = text.replace(", help='b'", "")
    assert [(c, s) for _, c, s in _codes(fine)] == [("LINT-CVD-AFTER-IMPORT", "info")]
