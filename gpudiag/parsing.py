"""Strict parsing of integer option values, shared by every command.

Stricter than ``int()``: only ASCII digits with an optional sign, at most 18 of
them. ``str.isdigit`` accepts ``'²'`` (which ``int()`` then rejects) and ``int()``
refuses strings over 4300 digits with a ValueError; neither may reach a user
as a traceback.
"""

from __future__ import annotations

import re

from gpudiag.errors import GpudiagInputError

#: The most digits any integer gpudiag reads may have: every count, index and
#: size fits, and ``int()`` of it is cheap and cannot hit Python's 4,300-digit limit.
MAX_INT_DIGITS = 18
_INT_RE = re.compile(rf"[+-]?[0-9]{{1,{MAX_INT_DIGITS}}}")


def is_int_text(text: str) -> bool:
    """True when ``text`` (already trimmed) is a plain decimal integer."""
    return _INT_RE.fullmatch(text) is not None


def int_or_none(text: str, *, minimum: int | None = None) -> int | None:
    """``text`` (trimmed) as an integer, or None when it is not a plain decimal
    integer of at most 18 digits or is below ``minimum``. Never raises.

    For values where a bad one is not an error of its own, e.g. a
    ``SLURM_JOB_GPUS`` entry that may also be a UUID, or ``OMP_NUM_THREADS``.
    """
    value = text.strip()
    if not is_int_text(value):
        return None
    number = int(value)
    if minimum is not None and number < minimum:
        return None
    return number


def parse_int(name: str, text: str, *, minimum: int | None = None) -> int:
    """``text`` as an integer, for the option (or variable) called ``name``.

    Raises:
        GpudiagInputError: not a plain decimal integer, or below ``minimum``.
    """
    value = text.strip()
    if not is_int_text(value):
        raise GpudiagInputError(f"{name} {show_value(text)} is not an integer")
    number = int(value)
    if minimum is not None and number < minimum:
        raise GpudiagInputError(f"{name} must be {minimum} or more, got {number}")
    return number


def parse_int_list(name: str, text: str, *, minimum: int | None = None) -> list[int]:
    """A comma-separated list of integers, e.g. ``--device-ids 0,1``.

    Raises:
        GpudiagInputError: an entry that is not an integer, or below ``minimum``.
    """
    values = []
    for part in text.split(","):
        item = part.strip()
        if not is_int_text(item):
            raise GpudiagInputError(
                f"{name} {show_value(text)}: {show_value(item)} is not an integer "
                "(use comma-separated cuda ordinals like 0,1)"
            )
        number = int(item)
        if minimum is not None and number < minimum:
            raise GpudiagInputError(f"{name} {show_value(text)}: {number} is below {minimum}")
        values.append(number)
    return values


def show_value(text: str) -> str:
    """``repr(text)``, cut to 40 characters: a one-line message whatever was typed."""
    shown = repr(text)
    return shown if len(shown) <= 40 else shown[:37] + "…'"
