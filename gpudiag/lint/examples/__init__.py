"""A wrong and a right script for each lint code: what ``gpudiag explain LINT-…`` shows.

Each pair is a short, complete script (never a test fixture's path: issue 17, build
item 4). ``wrong`` gets its code at ``line``; ``right`` is the same script fixed, and
gets no warning or error at all. tests/test_lint_examples.py lints every pair, so an
example cannot drift from what the rules report. The snippets are at most 76
columns wide: ``explain`` indents them by 4 and every screen fits 80 (issue 20).

Every ``LINT-`` code that a script can trigger has a pair; :data:`WITHOUT_EXAMPLE`
names any code that has none and says why (none today: even ``LINT-PARSE-ERROR``'s
right script is simply the same one that parses).
"""

from __future__ import annotations

from gpudiag.lint.examples import amp, device, dist, dp, env, files
from gpudiag.lint.examples.pair import Example

__all__ = ["EXAMPLES", "WITHOUT_EXAMPLE", "Example", "render"]

#: ``{code: its wrong and right scripts}``: one module per rule module, each beside
#: the concept its rules check.
EXAMPLES: dict[str, Example] = {
    **files.EXAMPLES,
    **env.EXAMPLES,
    **dist.EXAMPLES,
    **device.EXAMPLES,
    **dp.EXAMPLES,
    **amp.EXAMPLES,
}

#: ``{code: why it has no wrong/right pair}`` for the lint codes without one. Empty:
#: every code a script can trigger has a pair (a new code gets one, or a reason here).
WITHOUT_EXAMPLE: dict[str, str] = {}


def render(code: str, indent: str = "    ") -> list[str]:
    """The lines ``gpudiag explain`` prints for ``code``'s pair (none without one)."""
    example = EXAMPLES.get(code)
    if example is None:
        return []
    lines = [f"- **Wrong:** `gpudiag lint` reports {code} at line {example.line}:", ""]
    lines += [(indent + line).rstrip() for line in example.wrong.splitlines()]
    lines += ["", "- **Right:**", ""]
    lines += [(indent + line).rstrip() for line in example.right.splitlines()]
    return [*lines, ""]
