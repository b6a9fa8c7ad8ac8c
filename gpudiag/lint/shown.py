"""How values from a script are shown in a finding: bounded, whatever the script holds.

A script can hold a 4,000-digit number, a ``device_ids`` list of 100,000 entries or a
``CUDA_VISIBLE_DEVICES`` value of a megabyte; a finding that quoted them whole made
``gpudiag lint`` print megabytes, once per use (issue 21). Numbers of more than
:data:`MAX_SHOWN_DIGITS` digits are shortened, lists are cut after
:data:`MAX_SHOWN_ITEMS` entries and texts after :data:`MAX_SHOWN_CHARS` characters,
each saying how long the whole is (docs/lint.md, "How values are shown").
"""

from __future__ import annotations

import re

#: Numbers longer than this are shortened (the integers gpudiag reads have at most 18
#: digits: gpudiag.parsing.MAX_INT_DIGITS).
MAX_SHOWN_DIGITS = 18
#: Lists longer than this show their first entries, then how many there are.
MAX_SHOWN_ITEMS = 16
#: Texts (a mask value, an expression from the script) longer than this are cut.
MAX_SHOWN_CHARS = 80

_LONG_TOKEN = re.compile(r"\S{" + str(MAX_SHOWN_CHARS + 1) + ",}")


def number(value: int) -> str:
    """``str(value)``, or its first digits and its length: ``99999999…[4000 digits]``."""
    if -(10**MAX_SHOWN_DIGITS) < value < 10**MAX_SHOWN_DIGITS:
        return str(value)
    sign = "-" if value < 0 else ""
    try:
        digits = str(abs(value))
    except ValueError:  # over Python's int/str limit (4,300 digits): a hex literal
        about = int(abs(value).bit_length() * 0.30103) + 1
        return f"{sign}…[about {about} digits]"
    return f"{sign}{digits[:8]}…[{len(digits)} digits]"


def items(values: list[str], sep: str = ", ", total: int | None = None) -> str:
    """``values`` joined, cut after :data:`MAX_SHOWN_ITEMS` with the count said;
    ``total``: the whole list's length, when ``values`` is only its start."""
    n = len(values) if total is None else total
    if n <= MAX_SHOWN_ITEMS:
        return sep.join(values)
    return sep.join(values[: MAX_SHOWN_ITEMS - 1]) + f"{sep}… ({n} in all)"


def int_list(values: list[int], sep: str = ", ") -> str:
    """``[0, 1, 2]``, as ``str(list)`` writes it, bounded (:func:`items`, :func:`number`)."""
    head = (
        values[:MAX_SHOWN_ITEMS]
        if len(values) <= MAX_SHOWN_ITEMS
        else values[: MAX_SHOWN_ITEMS - 1]
    )
    shown = sep.join(number(v) for v in head)
    if len(head) < len(values):
        shown += f"{sep}… ({len(values)} in all)"
    return f"[{shown}]"


def text(value: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """``value``, or its start and its length: ``GPU-aaaa…[1048580 chars]``."""
    if len(value) <= limit:
        return value
    suffix = f"…[{len(value)} chars]"
    return value[: max(1, limit - len(suffix))] + suffix


def quoted(value: str) -> str:
    """``repr(value)``, or the repr of its start and its length, in time bounded by
    :data:`MAX_SHOWN_CHARS` whatever the value's length."""
    if len(value) <= MAX_SHOWN_CHARS:
        return repr(value)
    return repr(value[: MAX_SHOWN_CHARS // 2]) + f"…[{len(value)} chars]"


def message(value: str) -> str:
    """A whole message with every run of over :data:`MAX_SHOWN_CHARS` non-blank
    characters (a value quoted from the script) cut: a safety net under the above."""
    if len(value) <= MAX_SHOWN_CHARS:
        return value
    return _LONG_TOKEN.sub(lambda m: text(m.group(0)), value)
