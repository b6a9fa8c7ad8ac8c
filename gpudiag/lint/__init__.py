"""``gpudiag lint``: find GPU, DataParallel, DDP and AMP pitfalls in training scripts.

Pure: a script is read with :mod:`ast`, never imported or run, and nothing here
imports torch or pynvml. Rules are documented in ``docs/lint.md``; their codes
in :data:`gpudiag.lint.codes.CODES` and ``docs/findings.md``.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gpudiag.lint.codes import CODES, LintFinding

if TYPE_CHECKING:
    from gpudiag.core.check import Report
    from gpudiag.lint.project import Project
    from gpudiag.lint.report import LintReport
    from gpudiag.model import Snapshot

__all__ = ["CODES", "LintFinding", "LintReport", "lint_paths", "lint_source"]


def lint_source(text: str, path: str = "<string>") -> list[LintFinding]:
    """Lint Python source text (suppression comments applied)."""
    from gpudiag.lint.source import lint_text

    return lint_text(text, path)[0]


def lint_paths(
    paths: Iterable[str],
    *,
    snapshot: Snapshot | None = None,
    env: Mapping[str, str] | None = None,
    driver: object = None,
    skip: Callable[[Path], bool] | None = None,
) -> LintReport:
    """Lint files and folders; with ``snapshot``, also run ``check`` with each
    script's hard-coded values (``gpudiag lint --check``); ``skip`` prunes what a
    folder's walk meets (``[tool.gpudiag.lint] exclude``).

    Raises:
        GpudiagInputError: a path that does not exist or cannot be read.
    """
    from gpudiag.lint.project import Project
    from gpudiag.lint.source import collect_paths, no_cyclic_gc

    if isinstance(paths, (str, os.PathLike)):
        # one path, not the characters of one (issue 21: "/dev/null" walked "/")
        paths = [os.fspath(paths)]
    paths = list(paths)
    files = collect_paths(paths, skip)
    # issue 17: a folder given is a project root; its modules are read once for the run
    project = Project(p for p in paths if os.path.isdir(p))
    # The cyclic garbage collector, run between files, walked every summary the project
    # read so far, again and again: 5% of a run on the corpus (issue 17: lint's time).
    # A file's walk leaves no cycles (the peak memory of a corpus run is the same
    # without it); one collection every _COLLECT_EVERY files bounds what one could leave.
    with no_cyclic_gc():
        return _lint_files(files, project, snapshot, env, driver)


_COLLECT_EVERY = 512


def _lint_files(
    files: list[Path],
    project: Project,
    snapshot: Snapshot | None,
    env: Mapping[str, str] | None,
    driver: object,
) -> LintReport:
    from gpudiag.lint.report import LintReport
    from gpudiag.lint.source import lint_file

    # A module another file's lint read keeps its tree for its own lint, which runs next
    # (Project.take_tree); the report keeps the files' order.
    project.pending = {project.real(os.fspath(f)): place for place, f in enumerate(files)}
    results: list[tuple[list[LintFinding], Report | None] | None] = [None] * len(files)
    first_left = 0
    for count in range(1, len(files) + 1):
        if count % _COLLECT_EVERY == 0:
            gc.collect()
        place = next(iter(project.kept), None)
        if place is None:
            while results[first_left] is not None:
                first_left += 1
            place = first_left
        file = files[place]
        found, facts, text = lint_file(file, project=project)
        report = None
        if snapshot is not None and facts is not None:
            from gpudiag.lint.against import lint_with_check

            found, report = lint_with_check(
                str(file),
                facts,
                text,
                snapshot,
                env=env or {},
                driver=driver,  # type: ignore[arg-type]
            )
        results[place] = (found, report)
    findings = [f for done in results if done is not None for f in done[0]]
    reports = (done[1] for done in results if done is not None and done[1] is not None)
    check_report = next(reports, None)
    return LintReport(tuple(str(f) for f in files), tuple(findings), check_report)


def lint_file_path(path: str | Path) -> list[LintFinding]:
    """Lint one file."""
    from gpudiag.lint.source import lint_file

    return lint_file(Path(path))[0]


def __getattr__(name: str) -> object:
    # PEP 562: LintReport loads with its module, which `gpudiag lint` needs only at the end
    if name == "LintReport":
        from gpudiag.lint.report import LintReport

        return LintReport
    raise AttributeError(f"module 'gpudiag.lint' has no attribute {name!r}")
