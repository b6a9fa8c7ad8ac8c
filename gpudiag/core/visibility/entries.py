"""Reading one ``CUDA_VISIBLE_DEVICES`` entry the way the driver does (pure, no I/O).

C's ``strtoul`` for integer entries, the driver's 32-bit index, the hex digits of a
``GPU-``/``MIG-`` entry, the entry's kind, and quoting an entry for a message. The
rules are in ``docs/visible-devices.md``.
"""

from __future__ import annotations

from typing import Literal

#: What HTCondor puts in CUDA_VISIBLE_DEVICES when a job was given no GPU.
NO_DEV_FILES = "NoDevFiles"

# C's isspace() in the "C" locale: what strtoul skips, and what we trim. Python's
# str.strip() also strips \x1c-\x1f and Unicode spaces, which C does not.
C_SPACE = " \t\n\v\f\r"


def hides_every_gpu_on_purpose(spec: str | None) -> bool:
    """``CUDA_VISIBLE_DEVICES`` set to "no device" on purpose: empty, blank or NoDevFiles."""
    return spec is not None and spec.strip(C_SPACE) in ("", NO_DEV_FILES)


DIGITS = "0123456789"

EntryKind = Literal["integer", "uuid"]


def quote_value(text: str) -> str:
    """Quote an entry for a one-line message (JSON-like double quotes)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    for raw, shown in (("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"), ("\v", "\\v"), ("\f", "\\f")):
        escaped = escaped.replace(raw, shown)
    return f'"{escaped}"'


_ULONG_MAX = 2**64 - 1
_UINT32_MASK = 2**32 - 1
#: A UUID's hex digits: the driver stops reading an entry after the 32nd.
UUID_HEX_DIGITS = 32
_HEX = "0123456789abcdefABCDEF"


def c_strtoul(text: str) -> int | None:
    """C ``strtoul(text, &end, 10)``: the ``unsigned long`` value, or None without a digit.

    Leading C white space is skipped, then an optional sign, then the leading
    ASCII digits; anything after them is ignored. A value past ``ULONG_MAX``
    saturates to ``ULONG_MAX`` (ERANGE, whatever the sign); a minus sign negates
    in unsigned arithmetic (``-1`` is ``ULONG_MAX``), as C specifies.
    """
    body = text.lstrip(C_SPACE)
    negative = False
    if body[:1] in ("+", "-"):
        negative = body[0] == "-"
        body = body[1:]
    end = 0
    while end < len(body) and body[end] in DIGITS:
        end += 1
    if end == 0:
        return None
    digits = body[:end].lstrip("0") or "0"
    # int() would refuse > 4300 digits; anything over 20 digits saturates anyway.
    if len(digits) > 20 or int(digits) > _ULONG_MAX:
        return _ULONG_MAX
    value = int(digits)
    return (-value) % (_ULONG_MAX + 1) if negative else value


def cuda_index(text: str) -> int | None:
    """The device index CUDA reads from an integer entry, or None without a digit.

    The driver keeps the low 32 bits of strtoul's result (recorded on driver
    580.159.04, ``tests/truth/h100-driver-580.json``: ``4294967296`` and
    ``-4294967296`` select GPU 0, ``4294967297`` means 1, ``2147483648``,
    ``2^64`` and ``-1`` select nothing).
    """
    value = c_strtoul(text)
    return None if value is None else value & _UINT32_MASK


def uuid_hex(body: str) -> str | None:
    """The hex digits CUDA reads from a UUID entry after its ``GPU-``/``MIG-`` prefix.

    Recorded on driver 580.159.04 (``tests/truth/h100-driver-580.json``): dashes
    are skipped anywhere, hex digits match case-insensitively, reading stops
    after the 32nd digit (the rest of the entry is ignored), and any other
    character before that (white space, ``g``, ``:``, ``/``) makes the entry
    select nothing. Returns the digits in lower case, or None for an invalid
    entry or one without a digit.
    """
    digits: list[str] = []
    for char in body:
        if len(digits) == UUID_HEX_DIGITS:
            break
        if char == "-":
            continue
        if char not in _HEX:
            return None
        digits.append(char.lower())
    return "".join(digits) or None


def entry_kind(raw: str) -> EntryKind:
    # Case-sensitive and untrimmed: " GPU-…" and "gpu-…" are read as integers
    # (no digit: invalid), recorded on driver 580.
    return "uuid" if raw.startswith(("GPU-", "MIG-")) else "integer"
