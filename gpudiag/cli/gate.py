"""Options that make gpudiag a good pre-job gate: ``--ignore CODE`` and ``--json-out FILE``.

``--ignore`` drops accepted findings (by their stable code, docs/findings.md)
before the exit status is decided; ``--json-out`` keeps the JSON document in a
file beside the human report, so a job log and a machine both get the reasons.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from gpudiag.errors import GpudiagInputError

if TYPE_CHECKING:
    from gpudiag.core.check import Report
    from gpudiag.model import Finding

F = TypeVar("F", bound=Callable[..., Any])

_CODE_RE = re.compile(r"[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+")


def ignore_option(func: F) -> F:
    """``--ignore CODE`` (repeatable): findings with that code are dropped."""
    return click.option(
        "--ignore",
        "ignore",
        metavar="CODE",
        multiple=True,
        help="Drop findings with this code (repeatable, or comma-separated; e.g. "
        "VIS-ORDER-MIXED). They no longer count for the exit status; stderr says how "
        "many were dropped. `gpudiag explain` lists the codes.",
    )(func)


def json_out_option(func: F) -> F:
    """``--json-out FILE``: the JSON document written to FILE as well."""
    return click.option(
        "--json-out",
        "json_out",
        metavar="FILE",
        type=click.Path(dir_okay=False),
        default=None,
        help="Also write the --json document to FILE (atomically), beside the human "
        "report on stdout, so a job log keeps the reasons and a tool can read them.",
    )(func)


def known_codes() -> frozenset[str]:
    """Every finding code: the catalogue's (docs/findings.md documents each one).

    Imported here, not at module level: ``gpudiag --help`` does not need it.
    """
    from gpudiag.findings.catalog import CATALOG

    return frozenset(CATALOG)


def parse_ignore(values: Iterable[str]) -> frozenset[str]:
    """``--ignore`` values as a set of known codes.

    Raises:
        GpudiagInputError: a code the catalogue does not declare (a typo would
            otherwise silently ignore nothing).
    """
    wanted: set[str] = set()
    for value in values:
        for part in value.replace(",", " ").split():
            code = part.strip().upper()
            wanted.add(code)
    if not wanted:
        return frozenset()
    known = known_codes()
    for code in sorted(wanted):
        if not _CODE_RE.fullmatch(code) or code not in known:
            shown = code if len(code) <= 60 else code[:57] + "…"
            raise GpudiagInputError(
                f"--ignore {shown}: no such finding code (`gpudiag explain` lists them)"
            )
    return frozenset(wanted)


def drop_ignored(
    findings: Sequence[Finding], ignore: frozenset[str]
) -> tuple[list[Finding], list[Finding]]:
    """(kept, dropped) findings."""
    kept = [f for f in findings if f.code not in ignore]
    dropped = [f for f in findings if f.code in ignore]
    return kept, dropped


def report_without(report: Report, ignore: frozenset[str]) -> tuple[Report, list[Finding]]:
    """The check report with ignored findings removed, and ``ok`` recomputed."""
    if not ignore:
        return report, []
    kept, dropped = drop_ignored(report.findings, ignore)
    ok = not any(f.severity == "error" for f in kept)
    return dataclasses.replace(report, findings=tuple(kept), ok=ok), dropped


def say_dropped(dropped: Sequence[Finding]) -> None:
    """One line on stderr naming what ``--ignore`` dropped."""
    if dropped:
        codes = ", ".join(sorted({f.code for f in dropped}))
        click.echo(f"gpudiag: ignored {len(dropped)} finding(s): {codes}", err=True)


#: A failure line on stderr is cut to the terminal's width, at most this: a job log
#: needs the code and the gist, and every screen fits its terminal (issue 20).
_LINE_CHARS = 100


def failing(findings: Sequence[Finding], *, strict: bool) -> list[Finding]:
    """The findings that fail the gate: errors, and warnings too under ``--strict``
    (as :meth:`gpudiag.core.check.Report.exit_code` counts them)."""
    return [f for f in findings if f.severity == "error" or (strict and f.severity == "warning")]


def say_why_failed(findings: Sequence[Finding], *, strict: bool, command: str) -> None:
    """On stderr, one line per finding that fails the gate, when stdout is JSON.

    ``check --json > gpudiag.json || exit 1`` (the README's Slurm line) exited 1
    with nothing in the job log (issue 20): the reason was only in the JSON file.
    """
    import shutil

    from gpudiag.render.text import safe

    width = min(_LINE_CHARS, shutil.get_terminal_size((_LINE_CHARS, 24)).columns)
    failed = failing(findings, strict=strict)
    for f in failed:
        line = f"gpudiag: {f.severity} {f.code}: " + safe(f.message).split(". ")[0].rstrip(".")
        if len(line) > width:
            line = line[: width - 1].rstrip() + "…"
        click.echo(line, err=True)
    if failed:
        what = "error(s)" if not strict else "error(s) or warning(s) (--strict)"
        click.echo(
            f"gpudiag: {command} failed: {len(failed)} {what}; the JSON report has the fixes",
            err=True,
        )


def write_json_out(path: str | None, text: str) -> None:
    """Writes the JSON document to ``--json-out`` (atomically), if given."""
    if path is None:
        return
    from gpudiag.cli.files import write_file_atomically

    # The command's own input is never the output (issue 21: -o over --snapshot).
    ctx = click.get_current_context(silent=True)
    snapshot_path = ctx.params.get("snapshot_path") if ctx is not None else None
    inputs = (snapshot_path,) if isinstance(snapshot_path, str) else ()
    write_file_atomically(path, text if text.endswith("\n") else text + "\n", inputs)
