"""An arm that runs only when a caller passes a parameter, in a project where no call does,
holds no warning (gpudiag/lint/callers.py; issue 17, the ninth held-out corpus: EVA-02's
engine_for_pretraining.py, whose MAE arms need beit_like=False, which no caller passes).

Each project is a minimal reproduction written under tmp_path; the real pattern is
described, not copied."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpudiag.lint import lint_paths

_ENGINE = """
    import torch


    def train_one_epoch(model, batch, scaler, beit_like=True, fp16=True):
        if beit_like:
            with torch.cuda.amp.autocast():
                loss = model(batch)
        else:
            with torch.cuda.amp.autocast():
                loss = model(batch, mae=True)
        return loss
"""
#: the lines of the two autocasts in _ENGINE (after dedent, the leading newline kept)
_LIVE, _DEAD = 7, 10


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def _severities(root: Path, target: Path | None = None) -> dict[int, str]:
    """{line: severity} of the deprecated-AMP findings in engine.py."""
    report = lint_paths([str(target if target is not None else root)])
    return {
        f.line: f.finding.severity
        for f in report.findings
        if Path(f.path).name == "engine.py" and f.finding.code == "LINT-AMP-DEPRECATED"
    }


def test_the_arm_no_caller_takes_is_info_and_says_why(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "engine.py": _ENGINE,
            "main.py": """
                from engine import train_one_epoch

                for epoch in range(3):
                    train_one_epoch(None, None, None, fp16=False)
            """,
        },
    )
    assert _severities(tmp_path) == {_LIVE: "warning", _DEAD: "info"}
    report = lint_paths([str(tmp_path)])
    note = next(f.finding.message for f in report.findings if f.line == _DEAD)
    assert "only where a caller passes beit_like" in note and "train_one_epoch()" in note


@pytest.mark.parametrize(
    "call",
    [
        "train_one_epoch(None, None, None, beit_like=False)",  # by keyword
        "train_one_epoch(None, None, None, False)",  # by position
        "train_one_epoch(None, None, None, **options)",  # maybe, through a mapping
        "train_one_epoch(*arguments)",  # maybe, through a sequence
        "engine.train_one_epoch(None, None, None, beit_like=False)",  # through the module
    ],
)
def test_a_caller_that_passes_it_keeps_the_warning(tmp_path: Path, call: str) -> None:
    _write(
        tmp_path,
        {
            "engine.py": _ENGINE,
            "main.py": f"""
                import engine
                from engine import train_one_epoch

                options = {{}}
                arguments = []
                train_one_epoch(None, None, None)
                {call}
            """,
        },
    )
    assert _severities(tmp_path) == {_LIVE: "warning", _DEAD: "warning"}


@pytest.mark.parametrize(
    "files",
    [
        # handed on as a value: called where lint cannot see
        {"main.py": "from engine import train_one_epoch\nrun = train_one_epoch\nrun(1, 2, 3)\n"},
        # imported under another name
        {"main.py": "from engine import train_one_epoch as step\nstep(1, 2, 3)\n"},
        # named in a configuration, which may bind its parameters
        {
            "main.py": "from engine import train_one_epoch\ntrain_one_epoch(1, 2, 3)\n",
            "config.yaml": "_target_: engine.train_one_epoch\nbeit_like: false\n",
        },
        # only calls through the module: which function they reach is not proved
        {"main.py": "import engine\n\nengine.train_one_epoch(1, 2, 3)\n"},
        # found by a registry's string
        {"main.py": "import engine\ngetattr(engine, 'train_one_epoch')(1, 2, 3)\n"},
    ],
)
def test_a_use_lint_cannot_follow_keeps_the_warning(tmp_path: Path, files: dict[str, str]) -> None:
    _write(tmp_path, {"engine.py": _ENGINE, **files})
    assert _severities(tmp_path) == {_LIVE: "warning", _DEAD: "warning"}


def test_a_same_named_function_elsewhere_does_not_count(tmp_path: Path) -> None:
    # EVA-01 and EVA-02 each have an engine_for_pretraining.train_one_epoch; only
    # EVA-01's caller passes beit_like
    _write(
        tmp_path,
        {
            "two/engine.py": _ENGINE,
            "two/main.py": "from engine import train_one_epoch\ntrain_one_epoch(1, 2, 3)\n",
            "one/engine.py": _ENGINE,
            "one/main.py": (
                "from engine import train_one_epoch\ntrain_one_epoch(1, 2, 3, beit_like=False)\n"
            ),
        },
    )
    report = lint_paths([str(tmp_path)])
    got = {
        (Path(f.path).parent.name, f.line): f.finding.severity
        for f in report.findings
        if f.finding.code == "LINT-AMP-DEPRECATED"
    }
    assert got == {
        ("one", _LIVE): "warning",
        ("one", _DEAD): "warning",
        ("two", _LIVE): "warning",
        ("two", _DEAD): "info",
    }


def test_a_file_given_alone_keeps_the_warning(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "engine.py": _ENGINE,
            "main.py": "from engine import train_one_epoch\ntrain_one_epoch(1, 2, 3)\n",
        },
    )
    assert _severities(tmp_path, tmp_path / "engine.py") == {_LIVE: "warning", _DEAD: "warning"}


def test_a_framework_decorator_keeps_the_warning(tmp_path: Path) -> None:
    decorated = _ENGINE.replace(
        "    def train_one_epoch", "    @hydra.main(config_path='conf')\n    def train_one_epoch"
    ).replace("import torch\n", "import hydra\n    import torch\n")
    _write(
        tmp_path,
        {
            "engine.py": decorated,
            "main.py": "from engine import train_one_epoch\ntrain_one_epoch()\n",
        },
    )
    assert set(_severities(tmp_path).values()) == {"warning"}


@pytest.mark.parametrize(
    ("test", "default", "dead"),
    [
        ("use_old_amp", "False", True),  # `if p:` with a false default: the if-arm is dead
        ("not use_old_amp", "False", False),
        ("use_old_amp is None", "None", False),
        ("use_old_amp is not None", "None", True),
        ("use_old_amp == 'apex'", "'native'", True),
        ("use_old_amp != 'native'", "'native'", True),
    ],
)
def test_the_default_decides_which_arm_is_dead(
    tmp_path: Path, test: str, default: str, dead: bool
) -> None:
    _write(
        tmp_path,
        {
            "engine.py": f"""
                import torch


                class Trainer:
                    def __init__(self, model, use_old_amp={default}):
                        self.model = model
                        if {test}:
                            self.scaler = torch.cuda.amp.GradScaler()
            """,
            "main.py": "from engine import Trainer\nTrainer(None)\n",
        },
    )
    assert _severities(tmp_path) == {9: "info" if dead else "warning"}


def test_a_parameter_the_function_rebinds_is_not_its_default(tmp_path: Path) -> None:
    rebinding = _ENGINE.replace(
        "        if beit_like:", "        beit_like = model is not None\n        if beit_like:"
    )
    _write(
        tmp_path,
        {
            "engine.py": rebinding,
            "main.py": "from engine import train_one_epoch\ntrain_one_epoch(1, 2, 3)\n",
        },
    )
    assert set(_severities(tmp_path).values()) == {"warning"}


def test_a_registered_class_is_built_from_configurations(tmp_path: Path) -> None:
    # mmengine's @MODELS.register_module(): built as dict(type=..., use_old_amp=True)
    _write(
        tmp_path,
        {
            "engine.py": """
                import torch
                from registry import MODELS


                @MODELS.register_module()
                class Trainer:
                    def __init__(self, model, use_old_amp=False):
                        if use_old_amp:
                            self.scaler = torch.cuda.amp.GradScaler()
            """,
            "registry.py": "MODELS = None\n",
            "main.py": "from engine import Trainer\nTrainer(None)\n",
        },
    )
    assert _severities(tmp_path) == {10: "warning"}


@pytest.mark.parametrize(("default", "severity"), [("True", "info"), ("False", "warning")])
def test_an_elif_test_runs_only_where_the_if_before_it_fails(
    tmp_path: Path, default: str, severity: str
) -> None:
    _write(
        tmp_path,
        {
            "engine.py": f"""
                import torch


                def make_scaler(model, native={default}):
                    if native:
                        return None
                    elif torch.cuda.amp.GradScaler().is_enabled():
                        return model
            """,
            "main.py": "from engine import make_scaler\nmake_scaler(None)\n",
        },
    )
    assert _severities(tmp_path) == {8: severity}


def test_a_call_through_a_star_import_counts(tmp_path: Path) -> None:
    # a second script takes everything from the engine and calls it with the flag
    _write(
        tmp_path,
        {
            "engine.py": _ENGINE,
            "main.py": "from engine import train_one_epoch\n\ntrain_one_epoch(1, 2, 3)\n",
            "mae.py": "from engine import *\n\ntrain_one_epoch(1, 2, 3, beit_like=False)\n",
        },
    )
    assert _severities(tmp_path) == {_LIVE: "warning", _DEAD: "warning"}
