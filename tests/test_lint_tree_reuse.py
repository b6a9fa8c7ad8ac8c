"""A module read for another file's lint keeps its parsed tree for its own lint, which the
run does next (issue 17: lint's time; ``Project.take_tree``). The report is the same as a
run that parses every file twice, in the files' order, and a file whose bytes changed
between the two reads is parsed again."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpudiag.lint import lint_paths
from gpudiag.lint import project as P
from gpudiag.lint.project import Project
from gpudiag.lint.summary import Def, ModuleSummary

from .conftest import load_fixture

# a_train.py is linted first and calls into z_helper.py, which is read for its summary
# before its own turn; both have findings of their own
_FILES = {
    "a_train.py": """
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        from z_helper import build

        model = DDP(build().cuda(), device_ids=[0])
        scaler = torch.cuda.amp.GradScaler()
    """,
    "m_other.py": """
        import torch

        with torch.cuda.amp.autocast():
            pass
    """,
    "z_helper.py": """
        import torch

        def build():
            with torch.cuda.amp.autocast():
                return torch.nn.Linear(2, 2)

        def replicate(module):
            return torch.nn.DataParallel(module, device_ids=[0, 9])
    """,
}


def _write(root: Path) -> None:
    for name, text in _FILES.items():
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")


def _hits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files whose lint got a kept tree."""
    hits: list[str] = []
    take = Project.take_tree

    def counting(self: Project, file: str, data: bytes) -> object:
        tree = take(self, file, data)
        if tree is not None:
            hits.append(Path(file).name)
        return tree

    monkeypatch.setattr(Project, "take_tree", counting)
    return hits


def test_a_module_read_for_a_summary_is_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path)
    hits = _hits(monkeypatch)
    report = lint_paths([str(tmp_path)])
    assert hits == ["z_helper.py"]
    monkeypatch.setattr(P, "MAX_KEPT_BYTES", 0)  # nothing kept: each file parsed twice
    again = lint_paths([str(tmp_path)])
    assert hits == ["z_helper.py"]  # no more
    assert report.findings == again.findings
    # z_helper.py was linted second, and is still reported last, in the files' order
    shown = [Path(f.path).name for f in report.findings]
    assert shown == sorted(shown)
    assert {"a_train.py", "m_other.py", "z_helper.py"} <= set(shown)


def test_a_kept_tree_of_other_bytes_is_not_used(tmp_path: Path) -> None:
    _write(tmp_path)
    project = Project([str(tmp_path)])
    helper = str(tmp_path / "z_helper.py")
    project.pending = {project.real(helper): 0}
    assert project.summary(project.real(helper)) is not None
    assert list(project.kept) == [0]
    assert project.take_tree(helper, b"import torch\n") is None  # changed since
    assert project.kept == {} and project.pending == {}
    assert project.take_tree(helper, (tmp_path / "z_helper.py").read_bytes()) is None


def test_the_kept_trees_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path)
    monkeypatch.setattr(P, "MAX_KEPT_BYTES", 10)
    project = Project([str(tmp_path)])
    helper = project.real(str(tmp_path / "z_helper.py"))
    project.pending = {helper: 0}
    assert project.summary(helper) is not None
    assert project.kept == {}


def test_check_reports_the_first_file_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``lint --check`` keeps the first file's check report, as before the reordering."""
    _write(tmp_path)
    hits = _hits(monkeypatch)
    snap = load_fixture("a100x8")
    report = lint_paths([str(tmp_path)], snapshot=snap, env={})
    assert hits == ["z_helper.py"]
    alone = lint_paths([str(tmp_path / "a_train.py")], snapshot=snap, env={})
    last = lint_paths([str(tmp_path / "z_helper.py")], snapshot=snap, env={})
    assert report.check is not None and alone.check is not None
    assert alone.check != last.check  # the test can tell the first file from the last
    assert report.check == alone.check


_SETUP = """
    import os
    import torch


    class Runner:
        @staticmethod
        def init(rank):
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            helper(rank)


    def setup():
        Runner.init(0)
"""


def _defs(summary: ModuleSummary) -> list[Def]:
    methods = [m for c in summary.classes.values() for m in c.methods.values()]
    return [summary.top, *summary.funcs.values(), *methods]


def test_functions_read_from_a_kept_tree_as_from_their_lines(tmp_path: Path) -> None:
    (tmp_path / "setup_mod.py").write_text(textwrap.dedent(_SETUP), encoding="utf-8")
    module = str(tmp_path / "setup_mod.py")
    kept, plain = Project([str(tmp_path)]), Project([str(tmp_path)])
    kept.pending = {kept.real(module): 0}
    one, two = kept.summary(kept.real(module)), plain.summary(plain.real(module))
    assert one is not None and two is not None and list(kept.kept) == [0]
    assert all(d._where.kept is not None for d in _defs(one))
    assert all(d._where.kept is None for d in _defs(two))
    init = one.classes["Runner"].methods["init"]
    assert init.caps == two.classes["Runner"].methods["init"].caps
    assert init.calls == two.classes["Runner"].methods["init"].calls
    assert {"set_device", "local_rank_env"} <= init.caps and "helper" in init.calls
    # its own lint takes the tree: what is not read yet lets go of it
    assert kept.take_tree(module, (tmp_path / "setup_mod.py").read_bytes()) is not None
    left = [d for d in _defs(one) if d._where is not None]
    assert left and all(d._where.kept is None for d in left)
    assert one.funcs["setup"].calls == two.funcs["setup"].calls == ["Runner.init"]
