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
    click.echo(_with_example(wanted, section))  # our own shipped text, wrapped


def _with_example(code: str, section: str) -> str:
    """The section wrapped to the terminal; for a lint code, its ``**Example:**`` item
    replaced by a wrong and a right script (gpudiag/lint/examples.py, which the tests
    lint: issue 17 printed a test fixture's path here)."""
    if not code.startswith("LINT-"):
        return _fit(section)
    from gpudiag.lint.examples import render

    pair = render(code)
    if not pair:
        return _fit(section)
    lines = section.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("- **Example:**")), None)
    if start is None:
        before, after = lines, []
    else:
        end = start + 1
        while end < len(lines) and lines[end].startswith("  "):
            end += 1  # the item's continuation lines
        before, after = lines[:start], lines[end:]
    parts = [_fit("\n".join(before)), *pair]
    if after:
        parts.append(_fit("\n".join(after)))
    return "\n".join(parts).rstrip("\n")


#: At most this wide, narrower on a narrower terminal (issue 20: every screen fits 80).
_WIDTH = 100


def _width() -> int:
    from gpudiag.render.text import terminal_width

    return min(_WIDTH, terminal_width(_WIDTH))


def _fit(markdown: str) -> str:
    """The section re-flowed to the terminal: each bullet (with its continuation
    lines) or paragraph becomes one text, wrapped with its continuation hanging
    under the bullet's text; blank lines and code fences stay."""
    from gpudiag.render.text import wrap

    width = _width()
    items: list[str] = []
    verbatim = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            verbatim = not verbatim
            items.append("\0" + line)
        elif verbatim or not line.strip():
            items.append("\0" + line)
        elif line.startswith("  ") and items and not items[-1].startswith("\0"):
            items[-1] += " " + line.strip()
        else:
            items.append(line)
    out: list[str] = []
    for item in items:
        if item.startswith("\0"):
            out.append(item[1:])
        else:
            hang = "  " if item.startswith("- ") else ""
            out += wrap(item, width, hang=hang)
    return "\n".join(out)


def _list_codes() -> None:
    """Every catalogued code, grouped by area: code, default severity, title."""
    import textwrap

    from gpudiag.findings.catalog import AREAS, codes_in

    width = _width()
    for n, (area, description) in enumerate(AREAS.items()):
        if n:
            click.echo("")
        click.echo(textwrap.fill(f"{area}: {description}", width, subsequent_indent="    "))
        for info in codes_in(area):
            head = f"  {info.code:<28} {info.severity:<7} "
            lines = textwrap.wrap(info.title, width - len(head), break_on_hyphens=False)
            click.echo(head + lines[0])
            for line in lines[1:]:
                click.echo(" " * len(head) + line)
