"""A plain left-aligned text table: two spaces between columns, a dashed rule.

Lighter than tabulate (whose "simple" format pads every header by two more
columns, and whose import reads package metadata) and exact about width: a
cell is as wide as its longest value.
"""

from __future__ import annotations

from collections.abc import Sequence


def fit_column(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    column: int,
    minimum: int = 12,
) -> list[list[str]]:
    """``rows`` with ``column``'s cells cut (``…``) so the table fits ``width``.

    The column is never cut below ``minimum`` characters (nor its header's length);
    rows stay as they are when the table already fits. Issue 20: the list table was
    81-84 columns on an 80-column terminal.
    """
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    total = sum(widths) + 2 * (len(widths) - 1)
    room = widths[column] - max(0, total - width)
    room = max(room, minimum, len(headers[column]))
    if room >= widths[column]:
        return [list(r) for r in rows]
    out = []
    for row in rows:
        cells = list(row)
        if len(cells[column]) > room:
            cells[column] = cells[column][: room - 1].rstrip() + "…"
        out.append(cells)
    return out


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """``headers`` over a dashed rule over ``rows``; trailing blanks trimmed."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])
