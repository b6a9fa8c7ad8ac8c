"""One wrong and right pair of scripts (gpudiag/lint/examples/)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Example:
    """A wrong script, the line where lint reports the code in it, and the fix."""

    wrong: str
    line: int
    right: str


def pair(wrong: str, line: int, right: str) -> Example:
    """An :class:`Example` of two scripts written between triple quotes on their own lines."""
    return Example(wrong.strip("\n") + "\n", line, right.strip("\n") + "\n")
