"""The finding codes' documentation (``docs/findings.md``), as installed with gpudiag.

The build copies ``docs/findings.md`` into the package (``gpudiag/_docs/``,
see ``setup.py``), so ``gpudiag explain CODE`` works from an installed wheel; a
source checkout (an editable install) reads ``docs/findings.md`` itself.
"""

from __future__ import annotations

import re
from pathlib import Path

DOC_NAME = "findings.md"
_SECTION = re.compile(r"^### (\S+)\n(.*?)(?=^##+ |\Z)", re.M | re.S)


def findings_doc_text() -> str | None:
    """The text of ``findings.md``: the packaged copy first, then the checkout's."""
    here = Path(__file__).resolve().parent
    for path in (here / "_docs" / DOC_NAME, here.parent / "docs" / DOC_NAME):
        try:
            return path.read_text(encoding="utf-8")
        except OSError:
            continue
    return None


def parse_sections(text: str) -> dict[str, str]:
    """``{CODE: its section's body}`` from the ``### CODE`` headings."""
    return {code: body.strip() for code, body in _SECTION.findall(text)}
