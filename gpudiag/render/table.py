"""A plain left-aligned text table: two spaces between columns, a dashed rule.

Lighter than tabulate (whose "simple" format pads every header by two more
columns, and whose import reads package metadata) and exact about width: a
cell is as wide as its longest value.
"""

from __future__ import annotations

from collections.abc import Sequence


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """``headers`` over a dashed rule over ``rows``; trailing blanks trimmed."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])
