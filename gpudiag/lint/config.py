"""``[tool.gpudiag.lint]`` in ``pyproject.toml``: a project's lint settings (docs/lint.md).

Found as ruff finds its ``[tool.ruff]``: the nearest ``pyproject.toml`` that holds the
table, from the folder of the first path linted (the ``--stdin-filename``'s, for
stdin) upward, else from the working folder upward; ``--config FILE`` names one,
``--isolated`` reads none. A ``pyproject.toml`` without the table is passed over, as
ruff passes over one without ``[tool.ruff]``. Unknown keys, unknown codes and values
of the wrong type are bad input: one line, exit 2 (issue 17, build item 4).

Patterns (``exclude``, ``per-file-ignores``) are relative to the folder of the file
that holds the table, matched as ruff matches them: :func:`fnmatch.fnmatchcase` on the
path relative to that folder (``*`` also matches ``/``), and a pattern without a ``/``
also on the file's or folder's own name.

TOML is read with :mod:`tomllib` (Python 3.11+), or with the ``tomli`` package where
it is installed (Python 3.10); without either, a project that has the table is told
so in one line (``--isolated`` lints without it).
"""

from __future__ import annotations

import importlib
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudiag.errors import GpudiagInputError

if TYPE_CHECKING:
    from gpudiag.lint.report import LintReport

PYPROJECT = "pyproject.toml"
TABLE = "[tool.gpudiag.lint]"
OUTPUT_FORMATS = ("text", "json", "github", "sarif")
#: Every key the table may hold (ruff's spelling: dashes).
KEYS = (
    "select",
    "ignore",
    "exclude",
    "force-exclude",
    "per-file-ignores",
    "output-format",
    "strict",
)
#: The largest ``pyproject.toml`` read: far above any real one, and a FIFO or a
#: device in its place is never read (issue 21's rule for every file gpudiag reads).
MAX_CONFIG_BYTES = 1024 * 1024
# A cheap test before parsing: a file that never writes `tool.gpudiag` (a header, a
# dotted key) or a bare `[tool]` table cannot hold the table, and is not parsed, so an
# unrelated pyproject.toml that is not valid TOML, or Python 3.10 without tomli, never
# stops a run (gpudiag's own pyproject.toml names `gpudiag.cli`, and is not parsed).
_MENTION = re.compile(
    rb"""tool["']?\s*\.\s*["']?gpudiag["']?\s*[.\]=]|^\s*\[\s*["']?tool["']?\s*\]""", re.M
)


@dataclass(frozen=True)
class LintConfig:
    """The settings of one ``[tool.gpudiag.lint]`` table (the defaults when ``path`` is None)."""

    path: str | None = None
    #: The absolute folder patterns are relative to (the table's file's folder).
    root: str = ""
    #: None: every code (or the command line's ``--select``).
    select: frozenset[str] | None = None
    ignore: frozenset[str] = frozenset()
    exclude: tuple[str, ...] = ()
    force_exclude: bool = False
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()
    output_format: str | None = None
    strict: bool | None = None

    def _matches(self, pattern: str, path: str) -> bool:
        negate = pattern.startswith("!")
        pattern = pattern[1:] if negate else pattern
        full = os.path.abspath(path)
        if pattern.startswith("/"):
            hit = fnmatchcase(full, pattern)
        else:
            rel = os.path.relpath(full, self.root) if self.root else full
            under = rel != ".." and not rel.startswith(".." + os.sep)
            hit = under and fnmatchcase(rel.replace(os.sep, "/"), pattern)
            if not hit and "/" not in pattern:
                hit = fnmatchcase(os.path.basename(full), pattern)
        return hit != negate

    def excluded(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``exclude`` covers this file or folder (met in a folder's walk)."""
        text = os.fspath(path)
        return any(self._matches(p, text) for p in self.exclude)

    def excluded_named(self, path: str) -> bool:
        """Whether ``exclude`` covers a path named on the command line, or a folder
        above it below :attr:`root` (``force-exclude``, as ruff's)."""
        if not self.exclude:
            return False
        full = Path(os.path.abspath(path))
        for item in (full, *full.parents):
            if self.excluded(item):
                return True
            if self.root and str(item) == self.root:
                break
        return False

    def skip(self) -> Callable[[Path], bool] | None:
        """The predicate the folder walk prunes with, or None without ``exclude``."""
        return self.excluded if self.exclude else None

    def ignored_in(self, path: str) -> frozenset[str]:
        """The codes and prefixes ``per-file-ignores`` drops in this file."""
        out: set[str] = set()
        for pattern, codes in self.per_file_ignores:
            if self._matches(pattern, path):
                out |= codes
        return frozenset(out)


def _toml_loads() -> Callable[[str], dict[str, Any]] | None:
    """``tomllib.loads`` (Python 3.11+), else ``tomli.loads`` if installed, else None."""
    for name in ("tomllib", "tomli"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        loads: Callable[[str], dict[str, Any]] = module.loads
        return loads
    return None


def _shown(path: Path) -> str:
    """A config path as messages show it: relative to the working folder when that is
    shorter (messages cut any run of over 80 characters)."""
    text = os.fspath(path)
    try:
        rel = os.path.relpath(text)
    except (ValueError, OSError):  # OSError: the working folder was removed
        return text
    return rel if len(rel) < len(text) else text


def _read(path: Path, *, named: bool) -> bytes | None:
    """The file's bytes; None for a discovered path that is no regular file.

    Raises:
        GpudiagInputError: a ``--config`` file that is missing or not a regular file, or
            any config over :data:`MAX_CONFIG_BYTES`, or unreadable.
    """
    shown = _shown(path)
    try:
        info = path.stat()
    except OSError as exc:
        if named:
            raise GpudiagInputError(f"--config {shown}: {exc.strerror or exc}") from None
        return None
    if not stat.S_ISREG(info.st_mode):
        if named:
            raise GpudiagInputError(f"--config {shown}: not a regular file")
        return None
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise GpudiagInputError(f"cannot read {shown}: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise GpudiagInputError(
            f"cannot read {shown}: over {MAX_CONFIG_BYTES // 1024} KiB, too large for a "
            "pyproject.toml"
        )
    return data


def _table(path: Path, data: bytes) -> dict[str, Any] | None:
    """The ``[tool.gpudiag.lint]`` table of a file's text, or None when it has none.

    Raises:
        GpudiagInputError: not UTF-8 or not TOML, ``tool.gpudiag.lint`` not a table, or no
            TOML reader on Python 3.10 (a file that mentions the table).
    """
    shown = _shown(path)
    if not _MENTION.search(data):
        return None
    loads = _toml_loads()
    if loads is None:
        raise GpudiagInputError(
            f"{shown} may hold {TABLE}, and reading TOML on Python 3.10 needs the tomli "
            "package: pip install tomli (or lint with --isolated)"
        )
    try:
        doc = loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise GpudiagInputError(f"{shown}: not UTF-8 text (byte {exc.start})") from None
    except ValueError as exc:  # tomllib.TOMLDecodeError
        raise GpudiagInputError(f"{shown}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise GpudiagInputError(
            f"{shown}: its TOML nests arrays or tables too deeply to read"
        ) from None
    node: Any = doc
    for key in ("tool", "gpudiag", "lint"):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    if not isinstance(node, dict):
        raise GpudiagInputError(f"{shown}: tool.gpudiag.lint must be a table ({TABLE})")
    return node


def find_config(start: str | os.PathLike[str]) -> tuple[Path, dict[str, Any]] | None:
    """The nearest ``pyproject.toml`` holding the table, and the table, from ``start`` (a
    folder, or a file's folder) upward to the file system's root; None when none does."""
    here = Path(os.path.abspath(start))
    try:
        is_folder = here.is_dir()
    except OSError:  # a name over the system's limit (a --stdin-filename): not a folder
        is_folder = False
    if not is_folder:
        here = here.parent
    for folder in (here, *here.parents):
        candidate = folder / PYPROJECT
        data = _read(candidate, named=False)
        table = None if data is None else _table(candidate, data)
        if table is not None:
            return candidate, table
    return None


def _strings(shown: str, key: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GpudiagInputError(f"{shown}: {TABLE} {key} must be a list of strings")
    return value


def _flag(shown: str, key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise GpudiagInputError(f"{shown}: {TABLE} {key} must be true or false")
    return value


def _pattern(shown: str, key: str, text: str) -> str:
    pattern = text.strip()
    while pattern.startswith("./"):
        pattern = pattern[2:]
    pattern = pattern.rstrip("/") or pattern
    if not pattern or pattern == "!":
        raise GpudiagInputError(f"{shown}: {TABLE} {key} has an empty pattern")
    return pattern


def parse_table(path: Path, table: Mapping[str, Any]) -> LintConfig:
    """A validated :class:`LintConfig` from the table read in ``path``.

    Raises:
        GpudiagInputError: an unknown key, an unknown code or prefix, a value of the
            wrong type, an unknown output format.
    """
    from gpudiag.lint.selection import parse_codes

    shown = _shown(path)
    unknown = [k for k in table if k not in KEYS]
    if unknown:
        name = str(unknown[0])[:60]
        raise GpudiagInputError(
            f"{shown}: unknown key {name!r} in {TABLE} (known: {', '.join(KEYS)})"
        )
    where = f"{shown}: {TABLE}"
    fields: dict[str, Any] = {"path": os.fspath(path), "root": str(path.parent)}
    if "select" in table:
        codes = parse_codes(f"{where} select", _strings(shown, "select", table["select"]))
        fields["select"] = codes or None  # an empty list: every code, as with none
    if "ignore" in table:
        fields["ignore"] = parse_codes(
            f"{where} ignore", _strings(shown, "ignore", table["ignore"])
        )
    if "exclude" in table:
        fields["exclude"] = tuple(
            _pattern(shown, "exclude", p) for p in _strings(shown, "exclude", table["exclude"])
        )
    for key, attr in (("force-exclude", "force_exclude"), ("strict", "strict")):
        if key in table:
            fields[attr] = _flag(shown, key, table[key])
    if "output-format" in table:
        form = table["output-format"]
        if form not in OUTPUT_FORMATS:
            raise GpudiagInputError(
                f"{where} output-format must be one of {', '.join(OUTPUT_FORMATS)}"
            )
        fields["output_format"] = form
    if "per-file-ignores" in table:
        fields["per_file_ignores"] = _per_file(shown, where, table["per-file-ignores"])
    return LintConfig(**fields)


def _per_file(shown: str, where: str, value: object) -> tuple[tuple[str, frozenset[str]], ...]:
    from gpudiag.lint.selection import parse_codes

    if not isinstance(value, dict):
        raise GpudiagInputError(
            f"{shown}: {TABLE} per-file-ignores must be a table of pattern = [codes]"
        )
    out = []
    for pattern, codes in value.items():
        key = f"per-file-ignores {str(pattern)[:60]!r}"
        out.append(
            (
                _pattern(shown, key, pattern),
                parse_codes(f"{where} {key}", _strings(shown, key, codes)),
            )
        )
    return tuple(out)


def load_config(path: Path, *, named: bool = False) -> LintConfig:
    """The settings of the table in ``path`` (``named``: given by ``--config``).

    Raises:
        GpudiagInputError: as :func:`parse_table`, or a ``--config`` file without the table.
    """
    data = _read(path, named=named)
    table = None if data is None else _table(path, data)
    if table is None:
        raise GpudiagInputError(f"--config {_shown(path)}: it has no {TABLE} table")
    return parse_table(Path(os.path.abspath(path)), table)


def resolve_config(
    named: str | None, *, isolated: bool, starts: Iterable[str | os.PathLike[str]]
) -> LintConfig:
    """The settings a run uses: ``--config``'s file, none under ``--isolated``, else the
    first table found upward from each of ``starts`` in turn (the first path linted,
    then the working folder)."""
    if isolated:
        return LintConfig()
    if named is not None:
        return load_config(Path(named), named=True)
    seen: set[str] = set()
    for start in starts:
        key = os.path.abspath(start)
        if key in seen:
            continue
        seen.add(key)
        found = find_config(start)
        if found is not None:
            return parse_table(*found)
    return LintConfig()


def effective(
    select: frozenset[str], ignore: frozenset[str], config: LintConfig
) -> tuple[frozenset[str], frozenset[str]]:
    """The ``(select, ignore)`` a run applies, as ruff layers its options (ruff 0.0.238,
    "the highest-priority select is the basis"): a ``--select`` on the command line
    replaces the table's ``select`` and ``ignore`` both; without one, the table's
    ``select`` (every code when absent) less the table's ``ignore`` and ``--ignore``."""
    if select:
        return select, ignore
    return config.select or frozenset(), config.ignore | ignore


def per_file(report: LintReport, config: LintConfig) -> LintReport:
    """The report less the findings ``per-file-ignores`` drops in their file."""
    if not config.per_file_ignores:
        return report
    import dataclasses

    from gpudiag.lint.selection import covers

    dropped: dict[str, frozenset[str]] = {}
    kept = []
    for f in report.findings:
        if f.path not in dropped:
            dropped[f.path] = config.ignored_in(f.path)
        if not any(covers(p, f.finding.code) for p in dropped[f.path]):
            kept.append(f)
    return dataclasses.replace(report, findings=tuple(kept))
