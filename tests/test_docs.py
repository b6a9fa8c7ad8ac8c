"""Every finding code is declared, emitted only if declared, and documented."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import gpudiag.core

ROOT = Path(__file__).resolve().parent.parent
FINDINGS_DOC = ROOT / "docs" / "findings.md"
CODE_RE = re.compile(
    r'"((?:SRC|INV|VIS|DP|DDP|HEALTH|HOST|ENV|CHECK|API|LINT)-[A-Z0-9]+(?:-[A-Z0-9]+)*)"'
)


def _core_modules() -> list[object]:
    """Every module that declares finding codes: the pure core, and the Python API."""
    names = [f"gpudiag.core.{info.name}" for info in pkgutil.iter_modules(gpudiag.core.__path__)]
    mods = [importlib.import_module(name) for name in [*names, "gpudiag.api", "gpudiag.lint.codes"]]
    return [mod for mod in mods if hasattr(mod, "CODES")]


def _declared() -> dict[str, str]:
    codes: dict[str, str] = {}
    for mod in _core_modules():
        for code, title in mod.CODES.items():  # type: ignore[attr-defined]
            assert code not in codes, f"{code} declared twice"
            codes[code] = title
    return codes


def test_core_modules_declare_codes() -> None:
    names = {m.__name__ for m in _core_modules()}  # type: ignore[attr-defined]
    assert {"gpudiag.core.inventory", "gpudiag.core.visibility"} <= names


@pytest.mark.parametrize("path", sorted((ROOT / "gpudiag").rglob("*.py")), ids=lambda p: p.name)
def test_every_code_in_the_source_is_declared(path: Path) -> None:
    declared = _declared()
    used = set(CODE_RE.findall(path.read_text()))
    assert used <= set(declared), f"undeclared codes in {path.name}: {sorted(used - set(declared))}"


def test_every_declared_code_is_emitted_somewhere() -> None:
    # A declared code that no source file mentions outside its CODES entry is dead.
    sources = "\n".join(p.read_text() for p in (ROOT / "gpudiag").rglob("*.py"))
    for code in _declared():
        assert sources.count(f'"{code}"') >= 2, f"{code} is declared but never emitted"


def test_every_code_is_documented_with_an_example() -> None:
    text = FINDINGS_DOC.read_text()
    sections = dict(re.findall(r"^### (\S+)\n(.*?)(?=^### |\Z)", text, re.M | re.S))
    declared = _declared()
    missing = sorted(set(declared) - set(sections))
    assert not missing, f"codes missing from docs/findings.md: {missing}"
    stale = sorted(set(sections) - set(declared))
    assert not stale, f"docs/findings.md documents unknown codes: {stale}"
    for code, body in sections.items():
        assert re.search(r"example", body, re.I), f"{code} has no example in docs/findings.md"
        assert re.search(r"severity", body, re.I), f"{code} has no severity in docs/findings.md"
