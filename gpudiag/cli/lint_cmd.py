"""``gpudiag lint``: read training scripts for GPU/DDP/AMP pitfalls (docs/lint.md)."""

from __future__ import annotations

import os

import click

from gpudiag.cli.exitcodes import FAILED, OK
from gpudiag.cli.options import json_option

_EPILOG = """\b
Examples:
  gpudiag lint train.py                # path:line:col: CODE [severity] text
  gpudiag lint src/ scripts/train.py   # folders: every .py below them
  gpudiag lint train.py --strict       # exit 1 on warnings too (CI)
  gpudiag lint train.py --json         # one JSON document, like check --json
  gpudiag lint . --output-format github  # annotations in GitHub Actions
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
`gpudiag explain LINT-…` prints a rule's documentation (meaning and fix).

\b
Exit codes: 0 no errors (warnings allowed); 1 errors (a file that does not
parse is an error), or warnings with --strict; 2 bad input (a missing path)."""


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
@click.option("--strict", is_flag=True, default=False, help="Exit 1 on warnings too.")
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
    type=click.Choice(["text", "json", "github"]),
    default=None,
    help="text (default), json (= --json) or github (one GitHub Actions annotation per finding).",
)
@json_option
def lint(
    paths: tuple[str, ...],
    against: bool,
    snapshot_path: str | None,
    strict: bool,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    explain: str | None,
    output_format: str | None,
    as_json: bool,
) -> None:
    """Find GPU, DataParallel, DDP and AMP pitfalls in training scripts before they run.

    Each finding names the file, line and column, the error text torch will give
    (or the silent symptom), and a fix. Scripts are read with Python's ast
    module: nothing is imported or run, and neither torch nor pynvml is loaded.
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
    if not paths:
        raise GpudiagInputError("give at least one script or folder to lint")
    if snapshot_path is not None and not against:
        raise GpudiagInputError("--snapshot needs --check (lint alone does not read a machine)")
    if as_json and output_format not in (None, "json"):
        raise GpudiagInputError(f"--json and --output-format {output_format} conflict: give one")
    form = "json" if as_json else (output_format or "text")
    from gpudiag.lint import lint_paths
    from gpudiag.lint.report import lint_json, render_lint
    from gpudiag.lint.selection import parse_codes, selected
    from gpudiag.lint.source import collect_paths

    selects = parse_codes("--select", select)
    ignores = parse_codes("--ignore", ignore)

    # A missing path is bad input: exit 2 before any work. So is a run that would read
    # no file at all (issue 20: `lint empty/` said "OK", a wrong path passed the gate).
    if paths and not collect_paths(paths):
        from gpudiag.render.text import esc

        raise GpudiagInputError(
            f"no .py file found under {', '.join(esc(p) for p in paths)}: nothing to lint"
        )
    snapshot = None
    driver = None
    if against:
        from gpudiag.machine import live_driver_asker, load_machine

        snapshot = load_machine(snapshot_path)
        driver = None if snapshot_path is not None else live_driver_asker(snapshot)
    report = lint_paths(paths, snapshot=snapshot, env=dict(os.environ), driver=driver)
    report = selected(report, selects, ignores)
    if form == "json":
        click.echo(lint_json(report))
    elif form == "github":
        from gpudiag.lint.github import render_github

        text = render_github(report)
        if text:
            click.echo(text)
    else:
        click.echo(render_lint(report, strict=strict))
    status = report.exit_code(strict=strict)
    click.get_current_context().exit(FAILED if status else OK)
