"""``gpudiag explain CODE``: a finding's documentation, from the installed package."""

from __future__ import annotations

import click

from gpudiag.cli.exitcodes import OK
from gpudiag.errors import GpudiagInputError


@click.command(
    "explain",
    short_help="Print a finding code's documentation (meaning, example, fix).",
    epilog="""\b
Examples:
  gpudiag explain VIS-ORDER-MIXED     # one finding
  gpudiag explain vis-order-mixed     # codes are case-insensitive
  gpudiag explain                     # every code by area: severity, title

\b
The text is gpudiag's finding documentation, installed with it. Exit codes: 0
printed; 2 an unknown code.""",
)
@click.argument("code", required=False, metavar="[CODE]")
def explain(code: str | None) -> None:
    """Explain a finding code: what it means, an example, and the fix."""
    from gpudiag.findings.catalog import CATALOG
    from gpudiag.render.text import esc

    if code is None:
        _list_codes()
        raise SystemExit(OK)
    wanted = code.strip().upper()
    if wanted not in CATALOG:
        import difflib

        close = difflib.get_close_matches(wanted, list(CATALOG), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `gpudiag explain` lists them"
        raise GpudiagInputError(f"unknown finding code {esc(repr(code))}{hint}")
    from gpudiag.findings_doc import findings_doc_text, parse_sections

    text = findings_doc_text()
    section = parse_sections(text).get(wanted) if text is not None else None
    if section is None:
        raise GpudiagInputError(
            f"the documentation of {wanted} is not installed with this gpudiag "
            "(findings.md missing)"
        )
    click.echo(wanted)
    click.echo(section)  # our own shipped text, printed as written


#: The listing's width: gpudiag's output fits 100 columns.
_WIDTH = 100


def _list_codes() -> None:
    """Every catalogued code, grouped by area: code, default severity, title."""
    import textwrap

    from gpudiag.findings.catalog import AREAS, codes_in

    for n, (area, description) in enumerate(AREAS.items()):
        if n:
            click.echo("")
        click.echo(textwrap.fill(f"{area}: {description}", _WIDTH, subsequent_indent="    "))
        for info in codes_in(area):
            head = f"  {info.code:<28} {info.severity:<7} "
            lines = textwrap.wrap(info.title, _WIDTH - len(head), break_on_hyphens=False)
            click.echo(head + lines[0])
            for line in lines[1:]:
                click.echo(" " * len(head) + line)
