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
  gpudiag explain                     # every code, one line each

\b
The text is gpudiag's finding documentation, installed with it. Exit codes:
0 printed; 2 an unknown code.""",
)
@click.argument("code", required=False, metavar="[CODE]")
def explain(code: str | None) -> None:
    """Explain a finding code: what it means, an example, and the fix."""
    from gpudiag.findings_doc import findings_doc_text, parse_sections
    from gpudiag.render.text import esc

    text = findings_doc_text()
    if text is None:
        raise GpudiagInputError(
            "the finding documentation is not installed with this gpudiag (findings.md missing)"
        )
    sections = parse_sections(text)
    if code is None:
        for name, body in sections.items():
            severity = _field(body, "Severity") or "?"
            click.echo(f"{name:<32} {severity}")
        raise SystemExit(OK)
    wanted = code.strip().upper()
    if wanted not in sections:
        import difflib

        close = difflib.get_close_matches(wanted, list(sections), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `gpudiag explain` lists them"
        raise GpudiagInputError(f"unknown finding code {esc(repr(code))}{hint}")
    click.echo(wanted)
    click.echo(sections[wanted])  # our own shipped text, printed as written


def _field(body: str, name: str) -> str | None:
    marker = f"**{name}:**"
    for line in body.splitlines():
        if marker in line:
            return line.split(marker, 1)[1].strip()
    return None
