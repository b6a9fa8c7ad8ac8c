"""A function or class nothing in the project uses holds no warning
(gpudiag/lint/unused.py; issue 17: an evaluation function imported and never called,
CheckpointFunction copies whose .apply is commented out, NativeScaler classes nothing
builds, across held-out corpora 4 to 10).

Each project is a minimal reproduction written under tmp_path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpudiag.lint import lint_paths

_ENGINE = """
    import torch


    def train_one_epoch(model, batch):
        with torch.autocast("cuda"):
            return model(batch)


    def final_test(model, batch):
        with torch.cuda.amp.autocast():
            return model(batch)
"""
_DEAD_LINE = 11  # the deprecated autocast in final_test
_RUN = "from engine import train_one_epoch, final_test\n\ntrain_one_epoch(None, None)\n"


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def _severity(root: Path, target: Path | None = None) -> str | None:
    report = lint_paths([str(target if target is not None else root)])
    found = [
        f.finding.severity
        for f in report.findings
        if Path(f.path).name == "engine.py" and f.line == _DEAD_LINE
    ]
    return found[0] if found else None


def test_imported_and_never_called_is_info(tmp_path: Path) -> None:
    _write(tmp_path, {"engine.py": _ENGINE, "main.py": _RUN})
    assert _severity(tmp_path) == "info"
    report = lint_paths([str(tmp_path)])
    assert any(
        "final_test, which nothing in the project uses" in f.finding.message
        for f in report.findings
    )


def test_used_only_by_an_unused_function_is_info(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "engine.py": textwrap.dedent(_ENGINE)
            + "\n\ndef evaluate(model):\n    return final_test(model, None)\n",
            "main.py": _RUN,
        },
    )
    assert _severity(tmp_path) == "info"


@pytest.mark.parametrize(
    "main",
    [
        _RUN + "final_test(None, None)\n",  # called at module level of a script
        _RUN + "def main():\n    final_test(None, None)\n\nmain()\n",  # through main()
        _RUN + "hooks = [final_test]\n",  # handed on as a value
        _RUN + "import engine\nengine.final_test(None, None)\n",  # through the module
        _RUN + "getattr(__import__('engine'), 'final_test')\n",  # named in a string
        "from engine import *\n\nfinal_test(None, None)\n",  # through a star import
        "from engine import final_test as evaluate\n\nevaluate(None, None)\n",  # renamed
    ],
)
def test_a_use_keeps_the_warning(tmp_path: Path, main: str) -> None:
    _write(tmp_path, {"engine.py": _ENGINE, "main.py": main})
    assert _severity(tmp_path) == "warning"


@pytest.mark.parametrize(
    "files",
    [
        {
            "tests/test_engine.py": "from engine import final_test\n\ndef test_it():\n    final_test(1, 2)\n"
        },
        {"configs/eval.yaml": "evaluate: engine.final_test\n"},  # a configuration names it
        {"setup.py": "", "engine/__init__.py": ""},  # a library's public module
    ],
)
def test_what_lint_cannot_follow_keeps_the_warning(tmp_path: Path, files: dict[str, str]) -> None:
    engine = "engine/core.py" if "engine/__init__.py" in files else "engine.py"
    _write(
        tmp_path,
        {
            engine: _ENGINE,
            "main.py": _RUN.replace("engine", engine[:-3].replace("/", ".")),
            **files,
        },
    )
    report = lint_paths([str(tmp_path)])
    got = {
        f.finding.severity
        for f in report.findings
        if f.line == _DEAD_LINE and f.path.endswith(engine)
    }
    assert got == {"warning"}


def test_a_decorated_function_and_a_framework_subclass_keep_the_warning(tmp_path: Path) -> None:
    decorated = _ENGINE.replace("    def final_test", "    @app.command()\n    def final_test")
    _write(tmp_path, {"engine.py": "app = None\n" + textwrap.dedent(decorated), "main.py": _RUN})
    report = lint_paths([str(tmp_path)])
    assert {
        f.finding.severity
        for f in report.findings
        if "autocast" in f.finding.message and f.line == _DEAD_LINE + 2
    } == {"warning"}


@pytest.mark.parametrize(
    "two_main",
    [
        _RUN + "final_test(None, None)\n",
        # LLaMA-Adapter: alpaca_finetuning_v1 imports its own util.misc's
        # NativeScalerWithGradNormCount as NativeScaler; chat65b's copy is never built
        "from engine import final_test as evaluate\n\nevaluate(None, None)\n",
    ],
)
def test_a_namesake_in_another_subproject_does_not_count(tmp_path: Path, two_main: str) -> None:
    _write(
        tmp_path,
        {
            "one/engine.py": _ENGINE,
            "one/main.py": _RUN,
            "two/engine.py": _ENGINE,
            "two/main.py": two_main,
        },
    )
    report = lint_paths([str(tmp_path)])
    got = {
        Path(f.path).parent.name: f.finding.severity
        for f in report.findings
        if Path(f.path).name == "engine.py" and f.line == _DEAD_LINE
    }
    assert got == {"one": "info", "two": "warning"}


def test_a_file_given_alone_keeps_the_warning(tmp_path: Path) -> None:
    _write(tmp_path, {"engine.py": _ENGINE, "main.py": _RUN})
    assert _severity(tmp_path, tmp_path / "engine.py") == "warning"
