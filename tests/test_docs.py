"""Every catalogued finding code is documented in docs/findings.md, and only those.

The catalogue (gpudiag/findings/catalog.py) is the list of codes; tests/test_catalog.py
holds it to the code base (every code emitted is catalogued, and vice versa).
"""

from __future__ import annotations

import re
from pathlib import Path

from gpudiag.findings.catalog import CATALOG
from gpudiag.findings_doc import parse_sections

ROOT = Path(__file__).resolve().parent.parent
FINDINGS_DOC = ROOT / "docs" / "findings.md"


def _sections() -> dict[str, str]:
    return parse_sections(FINDINGS_DOC.read_text(encoding="utf-8"))


def test_every_code_is_documented_with_an_example() -> None:
    sections = _sections()
    missing = sorted(set(CATALOG) - set(sections))
    assert not missing, f"codes missing from docs/findings.md: {missing}"
    stale = sorted(set(sections) - set(CATALOG))
    assert not stale, f"docs/findings.md documents codes the catalogue lacks: {stale}"
    for code, body in sections.items():
        assert re.search(r"example", body, re.I), f"{code} has no example in docs/findings.md"
        assert re.search(r"severity", body, re.I), f"{code} has no severity in docs/findings.md"


def test_documented_severities_are_the_catalogues() -> None:
    # The **Severity:** item names the default first, then the others.
    for code, body in _sections().items():
        item = body.split("**Severity:**", 1)[1]
        item = re.split(r"\n- \*\*", item)[0]
        named: list[str] = []
        for word in re.findall(r"\b(error|warning|info)\b", item):
            if word not in named:
                named.append(word)
        assert tuple(named) == CATALOG[code].severities, (code, named)
