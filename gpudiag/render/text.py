"""Terminal-safe text: escaping, shortening, wrapping and colour.

Every string that reaches human output from a snapshot, the environment or an
option goes through :func:`safe` (or :func:`esc` for a value): a GPU name with an
ESC sequence must not set the window title, and one with a newline must not
forge table lines. Control characters are shown as Python-style escapes.
"""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from dataclasses import dataclass

#: Echoed values longer than this are cut, and their full length said.
MAX_VALUE_CHARS = 80

# C0 and C1 controls, DEL, and the Unicode line/paragraph separators and bidi
# overrides that a terminal or an editor would act on.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LONG_TOKEN = re.compile(r"\S{" + str(MAX_VALUE_CHARS + 1) + ",}")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(match: re.Match[str]) -> str:
    char = match.group(0)
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def shorten(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    """``text`` cut to about ``limit`` characters, saying its full length."""
    if len(text) <= limit:
        return text
    suffix = f"…[{len(text)} chars]"
    return text[: max(1, limit - len(suffix))] + suffix


def esc(value: object, limit: int = MAX_VALUE_CHARS) -> str:
    """One value for a table cell or a message: controls escaped, then shortened."""
    return shorten(_CONTROL.sub(_escape_char, str(value)), limit)


def safe(text: str) -> str:
    """A whole message: controls escaped; any run of over 80 non-blank characters
    (an echoed value) shortened with its length said."""
    escaped = _CONTROL.sub(_escape_char, text)
    return _LONG_TOKEN.sub(lambda m: shorten(m.group(0)), escaped)


def terminal_width(default: int = 100) -> int:
    """The terminal's width (``COLUMNS`` first, as :func:`shutil.get_terminal_size` reads it)."""
    width = shutil.get_terminal_size((default, 24)).columns
    return max(40, width)


def wrap(text: str, width: int, *, indent: str = "", hang: str = "    ") -> list[str]:
    """``text`` wrapped to ``width`` columns: first line at ``indent``, the rest at
    ``indent + hang`` (a hanging indent). Words longer than a line are split."""
    return textwrap.wrap(
        text,
        width=max(20, width),
        initial_indent=indent,
        subsequent_indent=indent + hang,
        break_on_hyphens=False,
        break_long_words=True,
    ) or [indent.rstrip()]


def colour_wanted(isatty: bool, environ: dict[str, str] | None = None) -> bool:
    """Colour on a terminal, unless ``NO_COLOR`` is set to anything non-empty
    (https://no-color.org)."""
    env = os.environ if environ is None else environ
    return isatty and not env.get("NO_COLOR")


_CODES = {"red": "31", "yellow": "33", "cyan": "36", "green": "32", "bold": "1", "dim": "2"}
SEVERITY_COLOUR = {"error": "red", "warning": "yellow", "info": "cyan"}


@dataclass(frozen=True)
class Style:
    """How human output looks: width, colour and verbosity (-q 0, default 1, -v 2)."""

    width: int = 100
    colour: bool = False
    verbosity: int = 1

    def paint(self, text: str, colour: str, bold: bool = False) -> str:
        """``text`` in ``colour`` (ANSI SGR) when colour is on."""
        if not self.colour or not text:
            return text
        codes = ";".join(([_CODES["bold"]] if bold else []) + [_CODES[colour]])
        return f"\x1b[{codes}m{text}\x1b[0m"


PLAIN = Style()
