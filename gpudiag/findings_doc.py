"""gpudiag's documentation (``docs/*.md``), as installed with it.

The build copies the user documentation into the package (``gpudiag/_docs/``, see
``setup.py``), so ``gpudiag explain CODE`` and ``gpudiag docs TOPIC`` work from an
installed wheel; a source checkout (an editable install) reads ``docs/`` itself.
"""

from __future__ import annotations

import re
from pathlib import Path

DOC_NAME = "findings.md"
_SECTION = re.compile(r"^### (\S+)\n(.*?)(?=^##+ |\Z)", re.M | re.S)


#: Pages of docs/ that are for gpudiag's developers, not shipped (setup.py reads this).
DEVELOPER_PAGES = ("development.md",)


def doc_topics() -> dict[str, Path]:
    """``{topic: page}``: the packaged pages first, else the checkout's ``docs/``."""
    here = Path(__file__).resolve().parent
    for folder in (here / "_docs", here.parent / "docs"):
        try:
            pages = sorted(p for p in folder.glob("*.md") if p.name not in DEVELOPER_PAGES)
        except OSError:
            continue
        if pages:
            return {page.stem: page for page in pages}
    return {}


def doc_text(topic: str) -> str | None:
    """The text of one page (``findings``, ``cli``…), or None when it is not installed."""
    page = doc_topics().get(topic)
    if page is None:
        return None
    try:
        return page.read_text(encoding="utf-8")
    except OSError:
        return None


def findings_doc_text() -> str | None:
    """The text of ``findings.md``: the packaged copy first, then the checkout's."""
    return doc_text(DOC_NAME.removesuffix(".md"))


def parse_sections(text: str) -> dict[str, str]:
    """``{CODE: its section's body}`` from the ``### CODE`` headings."""
    return {code: body.strip() for code, body in _SECTION.findall(text)}
