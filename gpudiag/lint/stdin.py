"""``gpudiag lint -``: lint source text read from standard input (as ``ruff check -``).

Bounded as a file is (:data:`~gpudiag.lint.source.MAX_LINT_BYTES`), decoded as Python
decodes a file (PEP 263 cookie, UTF-8, BOM), and reported under ``--stdin-filename``
(``-`` without one), which is also the path ``per-file-ignores`` matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, TYPE_CHECKING

from gpudiag.errors import GpudiagInputError
from gpudiag.lint.source import MAX_LINT_BYTES

if TYPE_CHECKING:
    from gpudiag.lint.report import LintReport
    from gpudiag.model import Snapshot

#: The path shown for stdin without ``--stdin-filename`` (ruff's).
STDIN = "-"


def read_stdin(stream: IO[bytes] | None) -> bytes:
    """At most :data:`MAX_LINT_BYTES` of ``stream``.

    Raises:
        GpudiagInputError: stdin is closed, or holds more than the limit.
    """
    if stream is None:
        raise GpudiagInputError("cannot lint stdin: standard input is closed")
    data = stream.read(MAX_LINT_BYTES + 1)
    if len(data) > MAX_LINT_BYTES:
        raise GpudiagInputError(
            f"cannot lint stdin: more than lint's limit of {MAX_LINT_BYTES // (1024 * 1024)} "
            "MiB per file"
        )
    return data


def lint_stdin(
    data: bytes,
    name: str = STDIN,
    *,
    snapshot: Snapshot | None = None,
    env: Mapping[str, str] | None = None,
    driver: object = None,
) -> LintReport:
    """Lint ``data`` as the file ``name``; with ``snapshot``, also run ``check`` with the
    values it hard-codes (``gpudiag lint - --check``), as :func:`gpudiag.lint.lint_paths`."""
    from gpudiag.lint.report import LintReport
    from gpudiag.lint.source import decode, lint_text, parse_error

    try:
        text = decode(data)
    except (SyntaxError, UnicodeError, LookupError) as exc:
        return LintReport((name,), (parse_error(name, exc),))
    findings, facts = lint_text(text, name)
    check_report = None
    if snapshot is not None and facts is not None:
        from gpudiag.lint.against import lint_with_check

        findings, check_report = lint_with_check(
            name,
            facts,
            text,
            snapshot,
            env=env or {},
            driver=driver,  # type: ignore[arg-type]
        )
    return LintReport((name,), tuple(findings), check_report)
