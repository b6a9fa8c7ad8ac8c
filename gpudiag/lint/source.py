"""Read, parse and lint one source file; collect files from folders; suppressions.

A file that cannot be decoded or parsed is reported as one ``LINT-PARSE-ERROR``
finding at the place Python points to, like a compiler's syntax error: linting a
folder goes on with the other files, and the exit code is 1. A path that does not
exist is bad input (:class:`~gpudiag.errors.GpudiagInputError`, exit 2).
"""

from __future__ import annotations

import ast
import io
import os
import re
import stat
import tokenize
from collections.abc import Iterable
from pathlib import Path

from gpudiag.errors import GpudiagInputError
from gpudiag.lint.codes import Hit, LintFinding, hit
from gpudiag.lint.facts import Facts
from gpudiag.lint.rules_amp import deprecated_rules, scaler_rules
from gpudiag.lint.rules_dist import (
    cpu_collective_rules,
    ddp_cpu_rules,
    global_rank_rules,
    local_rank_arg_rules,
    sampler_rules,
    set_device_rules,
    spawn_rules,
)
from gpudiag.lint.rules_dp import (
    checkpoint_rules,
    dp_module_rules,
    mask_rules,
    wrapper_attribute_rules,
)
from gpudiag.lint.rules_env import cvd_rules, fork_rules, master_port_rules
from gpudiag.lint.walker import Walker

_IGNORE_RE = re.compile(r"#\s*gpudiag:\s*ignore(?:\[([A-Za-z0-9_,\s-]*)\])?")
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


def collect_paths(paths: Iterable[str]) -> list[Path]:
    """The ``.py`` files named or found under the folders named, in a stable order.

    Raises:
        GpudiagInputError: a path that does not exist, or that names (or a folder
            holds, as ``*.py``) something other than a regular file of at most
            :data:`MAX_LINT_BYTES`.
    """
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(
                    d
                    for d in dirs
                    if not d.startswith(".")
                    and d not in _SKIP_DIRS
                    and not (Path(root, d) / "pyvenv.cfg").exists()
                )
                found = [Path(root, f) for f in sorted(files) if f.endswith(".py")]
                for file in found:
                    _regular(file, str(file))
                out += found
        elif path.exists():
            _regular(path, raw)
            out.append(path)
        else:
            raise GpudiagInputError(f"no such file or folder: {raw!r}")
    return out


def decode(data: bytes) -> str:
    """Decode source as Python does (PEP 263 cookie, UTF-8 default, BOM).

    Raises:
        SyntaxError / UnicodeError / LookupError: not valid Python source text.
    """
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    return text[1:] if text.startswith("\ufeff") else text


def suppressions(text: str) -> dict[int, frozenset[str] | None]:
    """Line → the codes ignored there (None: every code), from ``# gpudiag: ignore[…]``."""
    out: dict[int, frozenset[str] | None] = {}
    if not _IGNORE_RE.search(text):
        return out  # the common case: no suppression anywhere, no need to tokenize
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return out
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        m = _IGNORE_RE.search(tok.string)
        if m is None:
            continue
        codes = None
        if m.group(1) is not None:
            codes = frozenset(c.strip().upper() for c in m.group(1).split(",") if c.strip())
        out[tok.start[0]] = codes
    return out


def analyse(tree: ast.Module, lines: list[str]) -> Facts:
    """The facts of one parsed module."""
    return Walker(tree, lines).run()


def rules(facts: Facts) -> list[Hit]:
    """Every rule's hits on one module."""
    mask_hits, explained = mask_rules(facts)
    hits = [
        *cvd_rules(facts),
        *fork_rules(facts),
        *master_port_rules(facts),
        *set_device_rules(facts),
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
    return hits


def parse_error(path: str, exc: BaseException) -> LintFinding:
    line, col = 1, 1
    if isinstance(exc, SyntaxError):
        line = exc.lineno or 1
        col = exc.offset or 1
        what = f"{type(exc).__name__}: {exc.msg}"
    elif isinstance(exc, UnicodeDecodeError):
        what = f"not valid {exc.encoding} text ({exc.reason} at byte {exc.start})"
    else:
        what = str(exc) or type(exc).__name__
    found = hit(
        line,
        col,
        "LINT-PARSE-ERROR",
        "error",
        f"Cannot parse this file as Python: {what}. Nothing in it was checked.",
        "Fix the syntax (python -m py_compile FILE shows the same error), or save the file "
        "as UTF-8 / declare its encoding (# -*- coding: … -*-).",
        None,
        None,
    )
    return LintFinding(path, found.line, found.col, found.finding)


def lint_text(text: str, path: str = "<string>") -> tuple[list[LintFinding], Facts | None]:
    """Lint Python source text; returns the findings (sorted, suppressions applied) and facts."""
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError) as exc:
        return [parse_error(path, exc)], None
    lines = text.splitlines()
    facts = analyse(tree, lines)
    return place(path, rules(facts), text), facts


def place(path: str, hits: Iterable[Hit], text: str) -> list[LintFinding]:
    """Give hits their file, drop suppressed and repeated ones, sort by position."""
    ignored = suppressions(text)
    seen: set[tuple[int, str, str]] = set()
    out: list[LintFinding] = []
    for h in hits:
        codes = ignored.get(h.line, frozenset())
        if h.line in ignored and (codes is None or h.finding.code in codes):
            continue
        key = (h.line, h.finding.code, h.finding.message)
        if key in seen:
            continue
        seen.add(key)
        out.append(LintFinding(path, h.line, h.col, h.finding))
    out.sort(key=lambda f: (f.line, f.col, f.finding.code))
    return out


def lint_file(path: Path, shown: str | None = None) -> tuple[list[LintFinding], Facts | None, str]:
    """Lint one file: (findings, facts or None when it did not parse, its text)."""
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
    try:
        text = decode(data)
    except (SyntaxError, UnicodeError, LookupError) as exc:
        # UnicodeError, not only UnicodeDecodeError: `# coding: undefined` names a
        # codec whose decode raises the base class (issue 21: it was a traceback)
        return [parse_error(name, exc)], None, ""
    findings, facts = lint_text(text, name)
    return findings, facts, text
