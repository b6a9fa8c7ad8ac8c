"""Read, parse and lint one source file; collect files from folders.

A file that cannot be decoded or parsed is reported as one ``LINT-PARSE-ERROR``
finding at the place Python points to, like a compiler's syntax error: linting a
folder goes on with the other files, and the exit code is 1. A path that does not
exist is bad input (:class:`~gpudiag.errors.GpudiagInputError`, exit 2).
"""

from __future__ import annotations

import ast
import errno
import gc
import io
import os
import stat
import sys
import tokenize
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from gpudiag.errors import GpudiagInputError
from gpudiag.findings.finding import Severity
from gpudiag.lint import callers, folders, gates, imports_missing, methods, reach, skips, unused
from gpudiag.lint.codes import Hit, LintFinding, hit
from gpudiag.lint.compiles import compile_error, parse
from gpudiag.lint.facts import Facts
from gpudiag.lint.foreign import foreign_project
from gpudiag.lint.linked import LinkedWalker
from gpudiag.lint.newer_syntax import newer_syntax
from gpudiag.lint.project import Project
from gpudiag.lint.relevance import might_find, quiet
from gpudiag.lint.rules_amp import deprecated_rules, scaler_rules
from gpudiag.lint.rules_context import context_rules
from gpudiag.lint.rules_device import physical_id_rules, set_device_rules
from gpudiag.lint.rules_dist import (
    cpu_collective_rules,
    ddp_cpu_rules,
    global_rank_rules,
    local_rank_arg_rules,
    spawn_rules,
)
from gpudiag.lint.rules_dp import (
    checkpoint_rules,
    dp_module_rules,
    mask_rules,
    wrapper_attribute_rules,
)
from gpudiag.lint.rules_env import cvd_rules, fork_rules, master_port_rules
from gpudiag.lint.rules_epoch import sampler_rules
from gpudiag.lint.suppression import place
from gpudiag.lint.syntax import clear_caches

_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})


#: The largest file lint reads (issue 21: 50 MB ran 180 s and took 22 GB; a 64 GiB
#: sparse file ended in MemoryError). Hand-written training scripts are far below.
MAX_LINT_BYTES = 4 * 1024 * 1024

_NOT_REGULAR = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def _regular(path: Path, shown: str) -> os.stat_result:
    """The file's status, when it is a regular file lint may read.

    Raises:
        GpudiagInputError: a device, FIFO or socket (``/dev/zero`` never ends, a
            FIFO blocks), or a file over :data:`MAX_LINT_BYTES`.
    """
    try:
        info = path.stat()
    except OSError as exc:
        raise GpudiagInputError(f"cannot read {shown!r}: {exc.strerror or exc}") from None
    for test, kind in _NOT_REGULAR:
        if test(info.st_mode):
            raise GpudiagInputError(
                f"cannot lint {shown!r}: it is {kind}; lint reads regular files"
            )
    if info.st_size > MAX_LINT_BYTES:
        raise GpudiagInputError(
            f"cannot lint {shown!r}: {info.st_size} bytes is over lint's limit of "
            f"{MAX_LINT_BYTES // (1024 * 1024)} MiB per file"
        )
    return info


def collect_paths(
    paths: Iterable[str],
    skip: Callable[[Path], bool] | None = None,
    dangling: list[str] | None = None,
) -> list[Path]:
    """The ``.py`` files named or found under the folders named, in a stable order;
    ``skip`` prunes files and folders met in a folder's walk (``exclude``, docs/lint.md).
    A ``.py`` link a folder holds that points nowhere (or loops) is passed over, and
    added to ``dangling``: Python cannot import it either, and one such link in a
    repository must not stop the lint of all of it (issue 17: icefall's recipes link
    to files it no longer has).

    Raises:
        GpudiagInputError: a path that does not exist or cannot be read, or that names
            (or a folder holds, as ``*.py``) something other than a regular file of at
            most :data:`MAX_LINT_BYTES`.
    """
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        try:
            info = path.stat()
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                raise GpudiagInputError(f"no such file or folder: {raw!r}") from None
            raise GpudiagInputError(f"cannot read {raw!r}: {exc.strerror or exc}") from None
        if stat.S_ISDIR(info.st_mode):
            out += _python_files(path, skip, dangling)
        else:
            _regular(path, raw)
            out.append(path)
    return out


def _python_files(
    top: Path, skip: Callable[[Path], bool] | None = None, dangling: list[str] | None = None
) -> list[Path]:
    """The ``.py`` files below ``top`` in ``os.walk``'s order (top-down, sorted), without
    hidden folders, ``__pycache__``/``node_modules``/``site-packages`` and virtual
    environments (:func:`gpudiag.lint.folders.walk`: iterative, links to folders not
    followed, each folder read once)."""

    def keep(folder: str, name: str) -> bool:
        return (
            not name.startswith(".")
            and name not in _SKIP_DIRS
            and not os.path.exists(os.path.join(folder, name, "pyvenv.cfg"))
            and (skip is None or not skip(Path(folder, name)))
        )

    out: list[Path] = []
    for folder, names in folders.walk(os.fspath(top), keep):
        found = [Path(folder, f) for f in names if f.endswith(".py")]
        if skip is not None:
            found = [f for f in found if not skip(f)]
        for file in found:
            if os.path.islink(file) and not os.path.exists(file):
                if dangling is not None:
                    dangling.append(str(file))
                continue
            _regular(file, str(file))
            out.append(file)
    return out


def decode(data: bytes) -> str:
    """Decode source as Python does (PEP 263 cookie, UTF-8 default, BOM).

    Raises:
        SyntaxError / UnicodeError / LookupError: not valid Python source text.
    """
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    return text[1:] if text.startswith("\ufeff") else text


def analyse(
    tree: ast.Module, lines: list[str], project: Project | None = None, file: str | None = None
) -> Facts:
    """The facts of one module; with its ``project`` and ``file``, calls into the project's
    other modules count (docs/lint.md, "Project reading")."""
    return LinkedWalker(tree, lines, project, file).run()


def rules(facts: Facts) -> list[Hit]:
    """Every rule's hits on one module."""
    mask_hits, explained = mask_rules(facts)
    hits = [
        *cvd_rules(facts),
        *fork_rules(facts),
        *master_port_rules(facts),
        *set_device_rules(facts),
        *context_rules(facts),
        *physical_id_rules(facts),
        *global_rank_rules(facts),
        *ddp_cpu_rules(facts),
        *sampler_rules(facts),
        *mask_hits,
        *dp_module_rules(facts, explained),
        *checkpoint_rules(facts),
        *wrapper_attribute_rules(facts),
        *local_rank_arg_rules(facts),
        *spawn_rules(facts),
        *cpu_collective_rules(facts),
        *deprecated_rules(facts),
        *scaler_rules(facts),
    ]
    # info at most under a torch-version gate or in an except fallback (issue 17), and
    # where only a test skipped on current torch reaches it (the held-out corpus)
    return skips.cap(gates.cap(hits, facts.tree, facts.source_lines), facts)


def parse_error(
    path: str,
    exc: BaseException,
    *,
    walk: bool = False,
    compiled: bool = False,
    foreign: str | None = None,
) -> LintFinding:
    """The ``LINT-PARSE-ERROR`` finding for a file that cannot be decoded or parsed (or,
    with ``walk``, that lint's own walk could not follow: a backstop, issue 21; with
    ``compiled``, that parses but that Python's compiler rejects: lint/compiles.py);
    ``foreign``: the other language's project it lies in (lint/foreign.py), info."""
    line, col = 1, 1
    fix = (
        "Fix the syntax (python -m py_compile FILE shows the same error), or save the file "
        "as UTF-8 / declare its encoding (# -*- coding: … -*-)."
    )
    severity: Severity = "error"
    if isinstance(exc, SyntaxError):
        line = exc.lineno or 1
        col = exc.offset or 1
        what = f"{type(exc).__name__}: {exc.msg}"
        newer = newer_syntax(exc, exc.text or "")
        if newer is not None:
            # most likely valid where its project runs it: this proves nothing (info)
            version, construct = newer
            here = f"{sys.version_info[0]}.{sys.version_info[1]}"
            severity = "info"
            what += f" (at Python {version}'s {construct}, newer than this Python {here})"
            fix = f"Run gpudiag lint under Python {version} or newer to check this file."
    elif isinstance(exc, UnicodeDecodeError):
        what = f"not valid {exc.encoding} text ({exc.reason} at byte {exc.start})"
    elif isinstance(exc, (RecursionError, MemoryError)):
        # issue 21: Python's parser (or, past MAX_NESTING's margin, the walk) gives up
        # on an expression or an elif ladder nested thousands of levels deep
        who = (
            "for lint to follow at this recursion limit"
            if walk
            else "for Python's parser to build its syntax tree"
        )
        detail = f": {exc}" if str(exc) else ""
        what = f"it nests expressions or blocks too deeply {who} ({type(exc).__name__}{detail})"
        fix = (
            "Split the expression or the if/elif ladder into smaller parts (a list, a "
            "loop, a dict lookup); python -m py_compile FILE fails on it too."
        )
    else:
        what = str(exc) or type(exc).__name__
    message = f"Cannot parse this file as Python: {what}. Nothing in it was checked."
    if compiled:
        message = (
            f"Python cannot compile this file: {what}. It fails on import, so nothing in "
            "it runs, and nothing else in it is reported."
        )
        fix = "Fix the error: python -m py_compile FILE shows the same one."
    if foreign is not None and severity == "error":
        # most likely the other project's test input, which nothing runs as Python
        severity = "info"
        message += (
            f" It lies in {foreign}, another language's project: its .py files are most "
            "likely test input, not Python this project runs."
        )
    found = hit(
        line,
        col,
        "LINT-PARSE-ERROR",
        severity,
        message,
        fix,
        None,
        None,
    )
    return LintFinding(path, found.line, found.col, found.finding)


def lint_text(
    text: str,
    path: str = "<string>",
    *,
    project: Project | None = None,
    file: str | None = None,
    tree: ast.Module | None = None,
) -> tuple[list[LintFinding], Facts | None]:
    """Lint Python source text; returns the findings (sorted, suppressions applied) and facts.
    ``file``: where the text was read from, so the project's modules beside it are read;
    ``tree``: the text already parsed."""
    # The syntax tree of a 4 MiB file has millions of nodes and holds no reference cycle;
    # the cyclic garbage collector, run again and again while they are made, tripled the
    # time of the parse (issue 21: measured 24 s -> 6 s for a 4 MiB `a+a+…` file).
    with no_cyclic_gc():
        return _lint_text(text, path, project, file, tree)


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """The cyclic garbage collector off, then as it was."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _lint_text(
    text: str, path: str, project: Project | None, file: str | None, tree: ast.Module | None
) -> tuple[list[LintFinding], Facts | None]:
    try:
        tree = tree if tree is not None else parse(text, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        # RecursionError ("during ast construction") and MemoryError (the parser's own
        # stack) for valid Python nested thousands of levels deep (issue 21)
        return [parse_error(path, exc, foreign=_foreign(file, project))], None
    lines = text.splitlines()
    try:
        facts = analyse(tree, lines, project, file) if might_find(text) else quiet(tree, lines)
        facts.path = file
        if project is not None and file is not None and facts.of("local_rank_arg"):
            # only LINT-LOCAL-RANK-ARG reads it: no folder listing for the other files
            facts.launched_by = project.launches.launchers_of(file)
        hits = rules(facts)
        if project is not None:
            # a branch no caller in the project takes (lint/callers.py)
            hits = callers.cap(hits, tree, file, project)
            hits = unused.cap(hits, tree, file, project)  # a function nothing uses
            hits = methods.cap(hits, tree, file, project)  # a method nothing calls
            hits = reach.cap(hits, file, project)  # a module nothing runs (lint/reach.py)
        hits = imports_missing.cap(hits, tree, file)  # a module Python cannot import
        found = place(path, hits, text)
        if found:
            # a second certainty check before any finding (lint/compiles.py): a file the
            # compiler rejects reports that alone, whatever its other findings' severity
            failed = compile_error(tree, path)
            if failed is not None:
                foreign = _foreign(file, project)
                return [parse_error(path, failed, compiled=True, foreign=foreign)], None
    except RecursionError as exc:
        # A backstop: the walk is bounded (MAX_NESTING) to well under Python's default
        # recursion limit, but a caller may already be deep in its own stack.
        return [parse_error(path, exc, walk=True)], None
    finally:
        clear_caches()
    return found, facts


def _foreign(file: str | None, project: Project | None) -> str | None:
    return foreign_project(file, project.roots) if project is not None else None


def lint_file(
    path: Path, shown: str | None = None, project: Project | None = None
) -> tuple[list[LintFinding], Facts | None, str]:
    """Lint one file: (findings, facts or None when it did not parse, its text), reading
    the modules it imports through ``project`` (one per run: its cache)."""
    name = shown if shown is not None else str(path)
    _regular(path, name)
    try:
        with path.open("rb") as handle:
            # bounded: the file may have grown since it was checked
            data = handle.read(MAX_LINT_BYTES + 1)
    except OSError as exc:
        raise GpudiagInputError(f"cannot read {name!r}: {exc.strerror or exc}") from exc
    if len(data) > MAX_LINT_BYTES:
        _regular(path, name)  # raises: now over the limit
    project = project if project is not None else Project()
    tree = project.take_tree(os.fspath(path), data)
    try:
        text = decode(data)
    except (SyntaxError, UnicodeError, LookupError) as exc:
        # UnicodeError, not only UnicodeDecodeError: `# coding: undefined` names a
        # codec whose decode raises the base class (issue 21: it was a traceback)
        return [parse_error(name, exc, foreign=_foreign(os.fspath(path), project))], None, ""
    findings, facts = lint_text(text, name, project=project, file=os.fspath(path), tree=tree)
    return findings, facts, text
