"""Methods nothing in the project calls (issue 17 item 2; gpudiag/lint/methods.py): a
plain class's method whose name stands nowhere but on its ``def`` line never runs, so
a finding inside it is info. Anything outside the project that may call it keeps it.

Each project is a minimal reproduction of a real pattern (torchmultimodal's FLAVA
``Trainer.imagenet_validate``, left behind a TODO), written under tmp_path."""

from __future__ import annotations

import textwrap
from pathlib import Path

from gpudiag.lint import lint_paths

_TRAINER = """
    import torch


    {decorator}class Trainer{bases}:
        def train(self):
            with torch.cuda.amp.autocast():
                pass
            # TODO: call the evaluation

        def evaluate_extra(self):
            with torch.cuda.amp.autocast():
                pass


    if __name__ == "__main__":
        Trainer().train()
"""


def _severities(root: Path, files: dict[str, str]) -> dict[str, str]:
    """{"<method>": severity} of the LINT-AMP-DEPRECATED findings in train.py files."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    report = lint_paths([str(root)])
    out = {}
    for f in report.findings:
        if f.finding.code == "LINT-AMP-DEPRECATED" and f.path.endswith("train.py"):
            out["train" if f.line < 10 else "evaluate_extra"] = f.finding.severity
    return out


def _trainer(decorator: str = "", bases: str = "") -> str:
    return _TRAINER.format(decorator=decorator, bases=bases)


def test_a_method_nothing_names_is_info(tmp_path: Path) -> None:
    assert _severities(tmp_path, {"train.py": _trainer()}) == {
        "train": "warning",
        "evaluate_extra": "info",
    }
    report = lint_paths([str(tmp_path)])
    notes = [f.finding.message for f in report.findings if f.finding.severity == "info"]
    assert any(
        "(in Trainer.evaluate_extra, which nothing in the project calls)" in n for n in notes
    )


def test_a_use_anywhere_in_the_project_keeps_the_warning(tmp_path: Path) -> None:
    uses = {
        "another module": ("run.py", "from train import Trainer\nTrainer().evaluate_extra()\n"),
        "a configuration": ("conf.yaml", "hooks: [evaluate_extra]\n"),
        "a string": ("hooks.py", "NAMES = ['evaluate_extra']\n"),
    }
    for what, (name, text) in uses.items():
        root = tmp_path / what.replace(" ", "_")
        found = _severities(root, {"train.py": _trainer(), name: text})
        assert found["evaluate_extra"] == "warning", what


def test_who_else_may_call_it_keeps_the_warning(tmp_path: Path) -> None:
    cases = {
        # a framework's hooks: the base class's code calls them by name
        "base": {"train.py": _trainer(bases="(LightningModule)")},
        # a registry builds it, and the framework calls its methods
        "registry": {"train.py": _trainer(decorator="@MODELS.register_module()\n    ")},
        # a library's public module: its users may call any method
        "library": {"setup.py": "", "pkg/__init__.py": "", "pkg/train.py": _trainer()},
    }
    for what, files in cases.items():
        found = _severities(tmp_path / what, files)
        assert found["evaluate_extra"] == "warning", what
    # the examples beside a setup.py are not what its users import
    found = _severities(
        tmp_path / "examples",
        {"setup.py": "", "examples/__init__.py": "", "examples/train.py": _trainer()},
    )
    assert found["evaluate_extra"] == "info"
