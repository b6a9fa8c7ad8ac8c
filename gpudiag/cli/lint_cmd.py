"""``gpudiag lint``: read training scripts for GPU/DDP/AMP pitfalls (docs/lint.md)."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

import click

from gpudiag.cli.exitcodes import FAILED, OK
from gpudiag.cli.options import json_option

if TYPE_CHECKING:
    from gpudiag.lint.config import LintConfig
    from gpudiag.lint.report import LintReport
    from gpudiag.model import Snapshot

_EPILOG = """\b
Examples:
  gpudiag lint train.py                # path:line:col: CODE [severity] text
  gpudiag lint src/ scripts/train.py   # folders: every .py below them
  gpudiag lint train.py --strict       # exit 1 on warnings too (CI)
  gpudiag lint train.py --json         # one JSON document, like check --json
  gpudiag lint . --output-format github  # annotations in GitHub Actions
  gpudiag lint . --output-format sarif > lint.sarif  # for code scanning
  cat train.py | gpudiag lint - --stdin-filename train.py   # stdin
  gpudiag lint train.py --check        # also feed the script's literals
                                       # (device_ids, CUDA_VISIBLE_DEVICES,
                                       # set_device, backend, autocast dtype)
                                       # to `check` on this machine
  gpudiag lint train.py --check --snapshot node.json
  gpudiag lint src/ --select LINT-AMP,LINT-DDP --ignore LINT-DDP-NO-SET-DEVICE

\b
The script is parsed, never imported or run. Silence one finding with a
comment on its line:
  model.cuda()  # gpudiag: ignore[LINT-DDP-NO-SET-DEVICE]
`gpudiag explain LINT-…` prints a rule's documentation: what it means, a
wrong and a right script, and the fix.

\b
Settings: the nearest pyproject.toml with a [tool.gpudiag.lint] table, upward
from the first path (else from the working folder), as ruff finds its own:
  [tool.gpudiag.lint]
  select = ["LINT"]                      # codes or prefixes
  ignore = ["LINT-CVD-AFTER-IMPORT"]
  exclude = ["third_party", "build/*"]   # relative to that folder
  per-file-ignores = { "tests/*" = ["LINT-SET-EPOCH-MISSING"] }
  output-format = "github"               # text, json, github, sarif
  strict = true
The command line wins: --select replaces the table's select and ignore,
--ignore adds to its ignore. --config FILE names the file; --isolated reads
none. An unknown key or code is bad input.

\b
Exit codes: 0 no errors (warnings allowed); 1 errors (a file that does not
parse is an error), or warnings with --strict; 2 bad input (a missing path,
a bad [tool.gpudiag.lint], `-` beside other paths)."""


@click.command("lint", epilog=_EPILOG, short_help="Find GPU/DDP/AMP pitfalls in training scripts.")
@click.argument("paths", nargs=-1, metavar="PATH...")
@click.option(
    "--check",
    "against",
    is_flag=True,
    default=False,
    help="Also run `check` on this machine (or --snapshot) with the values the script "
    "hard-codes, and report its findings at the script's lines.",
)
@click.option(
    "--snapshot",
    "snapshot_path",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    default=None,
    help="With --check: use the machine in FILE (from `gpudiag snapshot`) instead of this one.",
)
@click.option(
    "--strict/--no-strict",
    default=None,
    help="Exit 1 on warnings too (default: the table's strict, else off).",
)
@click.option(
    "--select",
    metavar="CODE",
    multiple=True,
    help="Report only these codes or prefixes (repeatable, or comma-separated; e.g. LINT-AMP).",
)
@click.option(
    "--ignore",
    metavar="CODE",
    multiple=True,
    help="Drop these codes or prefixes (repeatable, or comma-separated; e.g. "
    "LINT-SET-EPOCH-MISSING). Dropped findings do not count for the exit status.",
)
@click.option(
    "--explain", metavar="CODE", default=None, help="Print what a finding code means, and exit."
)
@click.option(
    "--output-format",
    "output_format",
    type=click.Choice(["text", "json", "github", "sarif"]),
    default=None,
    help="text (default), json (= --json), github (GitHub Actions annotations) or sarif "
    "(SARIF 2.1.0, for code scanning).",
)
@click.option(
    "--config",
    "config_path",
    metavar="FILE",
    default=None,
    help="Read [tool.gpudiag.lint] from FILE, not from the nearest pyproject.toml.",
)
@click.option(
    "--isolated",
    is_flag=True,
    default=False,
    help="Read no pyproject.toml: the command line's options only.",
)
@click.option(
    "--stdin-filename",
    metavar="NAME",
    default=None,
    help="With - (the script read from stdin): the path to report it at; the "
    "pyproject.toml search and per-file-ignores use it too.",
)
@json_option
def lint(
    paths: tuple[str, ...],
    against: bool,
    snapshot_path: str | None,
    strict: bool | None,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    explain: str | None,
    output_format: str | None,
    config_path: str | None,
    isolated: bool,
    stdin_filename: str | None,
    as_json: bool,
) -> None:
    """Find GPU, DataParallel, DDP and AMP pitfalls in training scripts before they run.

    Each finding names the file, line and column, the error text torch will give
    (or the silent symptom), and a fix. Scripts are read with Python's ast
    module: nothing is imported or run, and neither torch nor pynvml is loaded.
    A PATH of - reads the script from stdin.
    """
    from gpudiag.errors import GpudiagInputError
    from gpudiag.lint.codes import CODES

    if explain is not None:
        code = explain.strip().upper()
        if code not in CODES:
            raise GpudiagInputError(
                f"unknown lint code {explain!r}; `gpudiag explain` lists every code"
            )
        click.echo(f"{code}: {CODES[code]}. Details: gpudiag explain {code}")
        return
    stdin = paths == ("-",) or (not paths and stdin_filename is not None)
    if "-" in paths and not stdin:
        raise GpudiagInputError(
            "- (read stdin) must be the only path: lint stdin, or files, in one run"
        )
    if stdin_filename is not None and not stdin_filename.strip():
        raise GpudiagInputError("--stdin-filename needs a file name")
    if stdin_filename is not None and not stdin:
        raise GpudiagInputError("--stdin-filename names what - reads: give - as the only path")
    if not paths and not stdin:
        raise GpudiagInputError("give at least one script or folder to lint (- reads stdin)")
    if snapshot_path is not None and not against:
        raise GpudiagInputError("--snapshot needs --check (lint alone does not read a machine)")
    if as_json and output_format not in (None, "json"):
        raise GpudiagInputError(f"--json and --output-format {output_format} conflict: give one")
    if config_path is not None and isolated:
        raise GpudiagInputError("--config and --isolated conflict: give one")
    from gpudiag.lint.config import effective, per_file, resolve_config
    from gpudiag.lint.selection import parse_codes, selected

    selects = parse_codes("--select", select)
    ignores = parse_codes("--ignore", ignore)
    first = stdin_filename if stdin else paths[0]
    config = resolve_config(config_path, isolated=isolated, starts=_starts(first))
    selects, ignores = effective(selects, ignores, config)
    form = "json" if as_json else (output_format or config.output_format or "text")
    strict = bool(config.strict) if strict is None else strict

    snapshot = None
    driver = None
    if against:
        from gpudiag.machine import live_driver_asker, load_machine

        snapshot = load_machine(snapshot_path)
        driver = None if snapshot_path is not None else live_driver_asker(snapshot)
    env = dict(os.environ)
    if stdin:
        from gpudiag.lint.stdin import STDIN, lint_stdin, read_stdin

        name = stdin_filename if stdin_filename is not None else STDIN
        if config.force_exclude and stdin_filename is not None and config.excluded_named(name):
            report = _nothing()
        else:
            data = read_stdin(getattr(sys.stdin, "buffer", None))
            report = lint_stdin(data, name, snapshot=snapshot, env=env, driver=driver)
    else:
        report = _lint_paths(paths, config, snapshot=snapshot, env=env, driver=driver)
    report = per_file(selected(report, selects, ignores), config)
    _print(report, form, strict)
    status = report.exit_code(strict=strict)
    click.get_current_context().exit(FAILED if status else OK)


def _starts(first: str | None) -> list[str]:
    """Where the pyproject.toml search starts: the first path, then the working folder
    (which may have been removed: then the first path alone)."""
    out = [first] if first is not None else []
    with contextlib.suppress(OSError):
        out.append(os.getcwd())
    return out


def _nothing() -> LintReport:
    from gpudiag.lint.report import LintReport

    return LintReport((), ())


def _lint_paths(
    paths: tuple[str, ...],
    config: LintConfig,
    *,
    snapshot: Snapshot | None,
    env: dict[str, str],
    driver: object,
) -> LintReport:
    """Lint the paths given, less what ``exclude`` covers: in a folder's walk always; a
    path named on the command line only with ``force-exclude`` (as ruff)."""
    from gpudiag.errors import GpudiagInputError
    from gpudiag.lint import lint_paths
    from gpudiag.lint.source import collect_paths

    named = [p for p in paths if not (config.force_exclude and config.excluded_named(p))]
    if not named:
        return _nothing()  # pre-commit passed only excluded files: nothing to do
    skip = config.skip()
    # A missing path is bad input: exit 2 before any work. So is a run that would read
    # no file at all (issue 20: `lint empty/` said "OK", a wrong path passed the gate).
    dangling: list[str] = []
    if not collect_paths(named, skip, dangling):
        from gpudiag.render.text import esc

        left = " that [tool.gpudiag.lint] exclude leaves" if skip is not None else ""
        raise GpudiagInputError(
            f"no .py file found under {', '.join(esc(p) for p in named)}{left}: nothing to lint"
        )
    if dangling:
        from gpudiag.render.text import esc

        more = f" and {len(dangling) - 1} more" if len(dangling) > 1 else ""
        click.echo(
            f"gpudiag: lint: skipped {esc(dangling[0])}{more}: a link that points nowhere",
            err=True,
        )
    return lint_paths(named, snapshot=snapshot, env=env, driver=driver, skip=skip)


def _print(report: LintReport, form: str, strict: bool) -> None:
    if form == "json":
        from gpudiag.lint.report import lint_json

        click.echo(lint_json(report))
    elif form == "sarif":
        from gpudiag.lint.sarif import render_sarif

        click.echo(render_sarif(report))
    elif form == "github":
        from gpudiag.lint.github import render_github

        text = render_github(report)
        if text:
            click.echo(text)
    else:
        from gpudiag.lint.report import render_lint

        click.echo(render_lint(report, strict=strict))
