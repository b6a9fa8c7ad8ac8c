"""A file whose top-level relative import names no module in its package cannot be
imported, so its warnings are info (gpudiag/lint/imports_missing.py; issue 17, a
twenty-second held-out sample: wanda's copy of transformers' trainer.py, whose
``from .integrations import …`` points into transformers). Own minimal reproductions."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudiag.lint import lint_paths

_TRAINER = """\
{header}
import torch


def step(model, batch):
    with torch.cuda.amp.autocast():
        return model(batch)
"""


def _severity(root: Path, header: str, beside: tuple[str, ...] = ()) -> str:
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    for name in beside:
        target = pkg / name
        if name.endswith("/"):
            target.mkdir()
            (target / "__init__.py").write_text("", encoding="utf-8")
        else:
            target.write_text("x = 1\n", encoding="utf-8")
    (pkg / "trainer.py").write_text(_TRAINER.format(header=header), encoding="utf-8")
    (root / "train.py").write_text("from pkg.trainer import step\n\nstep(print, 1)\n")
    report = lint_paths([str(root)])
    found = [f for f in report.findings if f.finding.code == "LINT-AMP-DEPRECATED"]
    assert len(found) == 1
    if found[0].finding.severity == "info":
        assert "cannot be imported: `from .integrations import …`" in found[0].finding.message
    return found[0].finding.severity


def test_a_relative_import_of_a_module_that_is_not_there_makes_it_info(tmp_path: Path) -> None:
    assert _severity(tmp_path, "from .integrations import hp_params") == "info"


@pytest.mark.parametrize(
    ("header", "beside"),
    [
        ("from .integrations import hp_params", ("integrations.py",)),  # it is there
        ("from .integrations import hp_params", ("integrations/",)),  # a package
        ("from .integrations import hp_params", ("integrations.cpython-311-x86_64-linux-gnu.so",)),
        ("from ._C import ops", ()),  # built at install time
        ("from ._version import __version__", ()),  # generated at install time
        ("from . import integrations", ()),  # may be an attribute of __init__.py
        ("try:\n    from .integrations import hp_params\nexcept ImportError:\n    pass", ()),
        ("from integrations import hp_params", ()),  # absolute: may be installed
    ],
    ids=["module", "package", "compiled", "private", "version", "from-dot", "try", "absolute"],
)
def test_an_import_that_may_work_keeps_the_warning(
    tmp_path: Path, header: str, beside: tuple[str, ...]
) -> None:
    assert _severity(tmp_path, header, beside) == "warning"
