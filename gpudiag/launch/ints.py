"""The one integer reader for launcher variables, and their ranges.

``check``, ``probe`` and ``lint --check`` all read a launcher variable through
:func:`read_int`, so they agree on what is an integer: ASCII digits with an
optional sign, at most 18 of them (:func:`gpudiag.parsing.is_int_text`). Python's
``int()`` also takes ``' 3'``, ``'1_0'`` and ``'٣'``, and torch and training
scripts call it, so :func:`read_int` tells those apart from values ``int()``
refuses: ``check`` words its finding by what torch would do; ``probe`` refuses
them all (issue 16: probe used to run as rank 10 of 20 on ``RANK=1_0
WORLD_SIZE=٢٠``, which check rejects).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from gpudiag.parsing import MAX_INT_DIGITS, is_int_text

_DIGITS_ONLY = re.compile(r"[+-]?[0-9]+")
#: Longer digit strings are out of range for any rank, size or port (and int() of more
#: than 4300 digits raises).
BIG = 10**MAX_INT_DIGITS
#: The allowed range of each integer variable torch or Slurm sets.
RANGES: dict[str, tuple[int, int]] = {
    "RANK": (0, BIG),
    "LOCAL_RANK": (0, BIG),
    "WORLD_SIZE": (1, BIG),
    "LOCAL_WORLD_SIZE": (1, BIG),
    # rendezvous.py::_create_c10d_store: `if not 0 <= port < 2**16: raise ValueError`.
    "MASTER_PORT": (0, 65535),
    "SLURM_PROCID": (0, BIG),
    "SLURM_LOCALID": (0, BIG),
    "SLURM_NTASKS": (1, BIG),
    "SLURM_NTASKS_PER_NODE": (1, BIG),
    "SLURM_GPUS_ON_NODE": (0, BIG),
}
RANGE_TEXT = {
    var: "a port from 0 to 65535" if var == "MASTER_PORT" else f"an integer >= {low}"
    for var, (low, _) in RANGES.items()
}
#: The smallest value of each launcher field (``gpudiag.launch.table.FIELDS``).
FIELD_MINIMUM = {"rank": 0, "world_size": 1, "local_rank": 0, "local_world_size": 1, "node_rank": 0}

Kind = Literal["int", "empty", "too_long", "python_only", "not_int"]


@dataclass(frozen=True)
class IntText:
    """One variable's text, read strictly.

    Attributes:
        value: the integer, when ``kind`` is ``int``; else None.
        kind: ``int``; ``empty``; ``too_long`` (only digits, more than 18);
            ``python_only`` (``int()`` takes it: ``' 3'``, ``'1_0'``, ``'٣'``);
            ``not_int`` (``int()`` refuses it too).
        int_error: what Python's ``int()`` raises for it, or None.
    """

    value: int | None
    kind: Kind
    int_error: str | None = None

    @property
    def reason(self) -> str:
        """Why it cannot be used, in words (empty for an integer)."""
        return {
            "int": "",
            "empty": "empty",
            "too_long": "not a plain integer",
            "python_only": "not a plain integer",
            "not_int": "not a plain integer",
        }[self.kind]


def parse_env_int(raw: str) -> int | None:
    """Parse a launcher integer strictly: ASCII digits with an optional sign, nothing else.

    No whitespace, underscores or non-ASCII digits (``'²'``, ``'٣'``), and at most
    18 digits (:func:`gpudiag.parsing.is_int_text`), so it never raises (``int()`` of
    5000 digits does).
    None when the value is not such an integer.
    """
    return int(raw) if is_int_text(raw) else None


def python_int_error(raw: str) -> str | None:
    """What Python's ``int()`` (what torch and training scripts call) raises, or None."""
    try:
        int(raw)
    except ValueError as exc:
        return f"ValueError: {exc}"
    return None


def read_int(raw: str) -> IntText:
    """The one reading of a launcher variable's text (never raises)."""
    if raw == "":
        return IntText(None, "empty", python_int_error(raw))
    value = parse_env_int(raw)
    if value is not None:
        return IntText(value, "int")
    error = python_int_error(raw)
    if _DIGITS_ONLY.fullmatch(raw):
        return IntText(None, "too_long", error)
    return IntText(None, "python_only" if error is None else "not_int", error)
