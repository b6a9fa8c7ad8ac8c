"""``gpudiag docs [TOPIC]``: gpudiag's documentation pages, from the installed package."""

from __future__ import annotations

import click

from gpudiag.cli.exitcodes import OK
from gpudiag.errors import GpudiagInputError


@click.command(
    "docs",
    short_help="Print a documentation page (cli, check, visible-devices, snapshot…).",
    epilog="""\b
Examples:
  gpudiag docs                   # the pages, one line each
  gpudiag docs visible-devices   # how CUDA reads CUDA_VISIBLE_DEVICES
  gpudiag docs cli | less        # every command, option, JSON key, exit code

\b
The pages are installed with gpudiag (the same text as docs/*.md in its
source). `gpudiag explain CODE` prints one finding's section. Exit codes: 0
printed; 2 an unknown topic.""",
)
@click.argument("topic", required=False, metavar="[TOPIC]")
def docs(topic: str | None) -> None:
    """Print one of gpudiag's documentation pages, or list them."""
    from gpudiag.findings_doc import doc_text, doc_topics
    from gpudiag.render.text import esc

    topics = doc_topics()
    if not topics:
        raise GpudiagInputError("no documentation is installed with this gpudiag")
    if topic is None:
        width = max(map(len, topics))
        room = _COLUMNS - width - 2
        for name, page in topics.items():
            title = _title(page.read_text(encoding="utf-8"))
            title = title if len(title) <= room else title[: room - 1].rstrip() + "…"
            click.echo(f"{name:<{width}}  {title}")
        raise SystemExit(OK)
    wanted = topic.strip().lower().removesuffix(".md")
    text = doc_text(wanted)
    if text is None:
        import difflib

        close = difflib.get_close_matches(wanted, list(topics), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise GpudiagInputError(
            f"no documentation page {esc(repr(topic))}{hint} (`gpudiag docs` lists them)"
        )
    click.echo(text, nl=not text.endswith("\n"))  # our own shipped text, printed as written


#: The listing fits an 80-column terminal (issue 20).
_COLUMNS = 80


def _title(text: str) -> str:
    """A page's first heading, without its ``#`` marks and code quotes."""
    for line in text.splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip().replace("`", "")
    return ""
