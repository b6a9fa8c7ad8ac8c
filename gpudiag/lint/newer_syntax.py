"""A syntax error that a newer Python would not raise.

lint parses with the Python it runs on. A file written for a newer one fails to parse
here though it is valid where its project runs it (a fifth held-out corpus: five
``LINT-PARSE-ERROR`` errors on lerobot, which requires Python >= 3.12 and uses PEP 695's
``type`` statement and ``def f[T](…)``). Such a failure proves nothing about the file,
so it is info, and says which Python to run lint on. Recognised, each only when this
Python is older than the one that brought it (the "What's New" pages of docs.python.org):

* 3.11, PEP 654: ``except* E:``;
* 3.12, PEP 695: ``type X = …``, ``def f[T](…)``, ``class C[T]:``;
* 3.12, PEP 701: f-strings that reuse their quotes, hold backslashes or comments
  (this Python's parser reports them as ``f-string: …`` errors);
* 3.14, PEP 750: ``t"…"`` template strings. (Not PEP 758's ``except A, B:``: that is
  also Python 2's ``except E, e:``, a file for no Python 3 before 3.14.)
"""

from __future__ import annotations

import re
import sys

_PATTERNS: tuple[tuple[tuple[int, int], re.Pattern[str], str], ...] = (
    ((3, 11), re.compile(r"^\s*except\s*\*"), "except* (PEP 654)"),
    (
        (3, 12),
        re.compile(r"^\s*type\s+[A-Za-z_]\w*\s*(\[[^=]*\])?\s*="),
        "type statement (PEP 695)",
    ),
    ((3, 12), re.compile(r"^\s*(async\s+)?def\s+[A-Za-z_]\w*\s*\["), "type parameters (PEP 695)"),
    ((3, 12), re.compile(r"^\s*class\s+[A-Za-z_]\w*\s*\["), "type parameters (PEP 695)"),
    ((3, 14), re.compile(r"(?<![\w.'\"])[tT][rR]?['\"]"), "template strings (PEP 750)"),
)


def newer_syntax(
    exc: SyntaxError, line_text: str, running: tuple[int, int] | None = None
) -> tuple[str, str] | None:
    """The newer Python the failing line is written for and what it uses there
    (``("3.12", "type parameters (PEP 695)")``), or None when nothing says so."""
    here = running if running is not None else (sys.version_info[0], sys.version_info[1])
    if here < (3, 12) and (exc.msg or "").startswith("f-string"):
        return "3.12", "f-string syntax (PEP 701)"
    for since, pattern, what in _PATTERNS:
        if here < since and pattern.search(line_text):
            return f"{since[0]}.{since[1]}", what
    return None
