"""A module nothing in the project imports, runs or names holds no warning
(gpudiag/lint/reach.py; issue 17, the tenth held-out corpus: CogVideo's vendored sgm
autoencoding losses, whose package nothing imports, and the modules only it imports).

Each project is a minimal reproduction written under tmp_path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpudiag.lint import lint_paths

_DECORATED = """
    import torch
    from torch.cuda.amp import custom_fwd


    class Quantize(torch.autograd.Function):
        @staticmethod
        @custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, x):
            return x.round()
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def _severities(root: Path, name: str, target: Path | None = None) -> set[str]:
    report = lint_paths([str(target if target is not None else root)])
    return {
        f.finding.severity
        for f in report.findings
        if Path(f.path).as_posix().endswith(name) and f.finding.code == "LINT-AMP-DEPRECATED"
    }


def test_a_chain_nothing_imports_is_info(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "train.py": "from sgm.models import build\n\nbuild()\n",
            "sgm/__init__.py": "",
            "sgm/models.py": "def build():\n    return None\n",
            # the losses package imports the loss, which imports the quantiser; nothing
            # imports the losses package
            "sgm/losses/__init__.py": "from .video_loss import VideoLoss\n",
            "sgm/losses/video_loss.py": "from sgm.quantize import Quantize\n\nclass VideoLoss:\n    pass\n",
            "sgm/quantize.py": _DECORATED,
        },
    )
    assert _severities(tmp_path, "sgm/quantize.py") == {"info"}
    report = lint_paths([str(tmp_path)])
    assert any("nothing in the project imports" in f.finding.message for f in report.findings)


@pytest.mark.parametrize(
    "files",
    [
        # imported by a script (top-level work)
        {"train.py": "from sgm.quantize import Quantize\n\nprint(Quantize)\n"},
        # through the package, from a script that names only a sibling module
        {
            "train.py": "import sgm.losses.other\n\nprint(1)\n",
            "sgm/losses/other.py": "",
            "sgm/losses/__init__.py": "from sgm.quantize import Quantize\n\nLOSSES = [Quantize]\n",
        },
        # by a test module (pytest collects it)
        {"tests/test_quantize.py": "from sgm.quantize import Quantize\n\nassert Quantize\n"},
        # a script guarded by __main__
        {
            "tools/run.py": "from sgm.quantize import Quantize\n\nif __name__ == '__main__':\n    pass\n"
        },
        # named in a configuration, a document, or a string
        {"configs/vq.yaml": "target: sgm.quantize.Quantize\n"},
        {"README.md": "python -c 'import sgm.quantize'\n"},
        {"registry.py": "MODULES = ['sgm.quantize']\n"},
        # an import naming it that lint cannot resolve
        {"train.py": "from vendor.quantize import Quantize\n\nprint(Quantize)\n"},
        # a library's public module: its top package sits beside setup.py
        {"setup.py": "from setuptools import setup\n\nsetup(name='sgm')\n"},
        # the module runs as a script itself
        {"sgm/quantize.py": textwrap.dedent(_DECORATED) + "\nprint(Quantize)\n"},
    ],
)
def test_what_may_run_it_keeps_the_warning(tmp_path: Path, files: dict[str, str]) -> None:
    _write(tmp_path, {"sgm/__init__.py": "", "sgm/quantize.py": _DECORATED, **files})
    assert _severities(tmp_path, "sgm/quantize.py") == {"warning"}


def test_a_file_given_alone_keeps_the_warning(tmp_path: Path) -> None:
    _write(tmp_path, {"sgm/__init__.py": "", "sgm/quantize.py": _DECORATED})
    assert _severities(tmp_path, "sgm/quantize.py", tmp_path / "sgm/quantize.py") == {"warning"}
    assert _severities(tmp_path, "sgm/quantize.py") == {"info"}
