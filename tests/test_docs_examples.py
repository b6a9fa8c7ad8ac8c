"""The documented examples are real output (issue 20: docs an installed user can trust).

Every example in docs/*.md of the form ``gpudiag list|check|topo … --snapshot F.json …``
→ text, where F.json is a fixture, is run; the command must report (exit 0 or 1) and
print the documented text (its first 50 characters, spacing aside). Examples that
describe an environment in words ("(under torchrun, …)") or a modified snapshot
("<a100x8 with …>") are not runnable as written and are counted, not run.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = {p.name: str(p) for p in (ROOT / "tests" / "fixtures").glob("*.json")}
_EXAMPLE = re.compile(
    r"`(gpudiag (?:list|check|topo) [^`]*?--snapshot ([a-z0-9_]+\.json)[^`]*)`\s*(?:→|->)\s*"
    r"(?:[a-z ]*:\s*)?`?([^`\n]+(?:\n  [^-\n][^`\n]*)*)"
)


def _examples() -> list[tuple[str, str, str]]:
    out = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for m in _EXAMPLE.finditer(page.read_text(encoding="utf-8")):
            command, fixture, text = m.groups()
            if fixture in FIXTURES and "(" not in command and "<" not in command:
                out.append((page.name, command, text))
    return out


EXAMPLES = _examples()


def test_there_are_examples_to_run() -> None:
    assert len(EXAMPLES) >= 40  # the finder must not silently find nothing


@pytest.mark.parametrize(("page", "command", "text"), EXAMPLES, ids=lambda v: str(v)[:60])
def test_documented_example_is_real_output(page: str, command: str, text: str) -> None:
    args = [FIXTURES.get(a, a) for a in shlex.split(command)[1:]]
    result = CliRunner().invoke(main, [*args, "-v"], env={"COLUMNS": "10000"})
    assert result.exit_code in (0, 1), result.output
    wanted = " ".join(text.replace("…", "").split())[:50]
    assert wanted in " ".join(result.output.split()), f"{page}: {command}"
