"""Reading a snapshot file with every input bounded: size, nesting, long numbers, Unicode.

A snapshot may come from anywhere (a bug report, another machine), so the file is refused
before parsing when it is not a regular file or too large, and the text is checked in linear
passes before :func:`json.loads` sees it.
"""

from __future__ import annotations

import json
import os
import re
import stat
from itertools import accumulate, repeat
from operator import sub
from pathlib import Path
from typing import Any

from gpudiag.model import Snapshot
from gpudiag.parsing import MAX_INT_DIGITS
from gpudiag.snapshot.fields import SnapshotError
from gpudiag.snapshot.read import snapshot_from_json

#: The largest snapshot file read (docs/snapshot.md). A real 8-GPU capture is
#: under 40 KiB; the bound stops /dev/zero-like and padded files before parsing.
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024
#: Deepest nesting of arrays and objects accepted; the schema needs 4.
MAX_NESTING = 32

#: A JSON number outside strings with more digits than this in a row is refused
#: before parsing: ``int()`` refuses over 4,300 digits (a ValueError), and
#: where that limit is off (PYTHONINTMAXSTRDIGITS=0) conversion is quadratic.
#: ``repr`` of a float never writes more than 17 digits in a row.
_LONG_NUMBER_RE = re.compile(f"[0-9]{{{MAX_INT_DIGITS + 1},}}")
_SURROGATE_ESCAPE_RE = re.compile(r"\\u[dD][89a-fA-F]")
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _outside_strings(text: str) -> str:
    """``text`` with every JSON string's content removed, in linear C-speed passes.

    Escaped backslashes go first, then escaped quotes, so that every ``"`` left
    opens or closes a string; the pieces between them alternate.
    """
    plain = text.replace("\\\\", "").replace('\\"', "")
    return "".join(plain.split('"')[0::2])


def _nesting_depth(outside: str) -> int:
    """The deepest nesting of ``[``/``{`` in ``outside`` (strings already removed)."""
    brackets = outside.encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKETS)
    steps = brackets.translate(_BRACKET_STEPS)  # open: 2, close: 0; minus 1 each
    return max(accumulate(map(sub, steps, repeat(1))), default=0)


def _json_constant(text: str) -> float:
    # NaN and Infinity are not JSON (RFC 8259); Python's json reads them.
    raise SnapshotError(f"{text} is not a JSON number")


def parse_snapshot_text(text: str, name: str = "snapshot") -> Any:
    """Parse snapshot JSON with every input bounded; raises SnapshotError (one line).

    Numbers have at most 18 digits in a row, NaN/Infinity are refused, nesting
    is at most MAX_NESTING deep, and no string may hold a lone UTF-16 surrogate
    (``"\\ud800"``: valid JSON syntax, but no UTF-8 text can carry it, so it
    would crash every later print). Each check is a linear pass.
    """
    outside = _outside_strings(text)
    long_number = _LONG_NUMBER_RE.search(outside)
    if long_number is not None:
        raise SnapshotError(
            f"{name} holds a number with {len(long_number.group())} digits; numbers have "
            f"at most {MAX_INT_DIGITS}"
        )
    if _nesting_depth(outside) > MAX_NESTING:
        raise SnapshotError(f"{name} is nested more than {MAX_NESTING} levels deep")
    try:
        data = json.loads(text, parse_constant=_json_constant)
    except SnapshotError as exc:
        raise SnapshotError(f"{name}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise SnapshotError(
            f"{name} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except (ValueError, RecursionError) as exc:  # a backstop; the checks above come first
        raise SnapshotError(f"{name} is not valid JSON ({type(exc).__name__})") from None
    if _SURROGATE_ESCAPE_RE.search(text) is not None:
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise SnapshotError(
                f"{name} holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape "
                "without its pair); strings must be valid Unicode"
            ) from None
    return data


def _read_bounded(p: Path) -> bytes:
    """The file's bytes: a regular file of at most MAX_SNAPSHOT_BYTES, or an error.

    Opened with O_NONBLOCK so that a FIFO cannot block the open, then checked
    with fstat before anything is read: ``/dev/zero``, a FIFO or a directory is
    refused at once, and a huge file is refused by its size, unread.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(p, flags)
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot {p}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SnapshotError(f"snapshot {p} is not a regular file")
        if info.st_size > MAX_SNAPSHOT_BYTES:
            raise SnapshotError(
                f"snapshot {p} is {info.st_size} bytes; snapshots are limited to 64 MiB"
            )
        chunks = []
        total = 0
        while True:  # to EOF, but never past the limit (a file that is still growing)
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_SNAPSHOT_BYTES:
                raise SnapshotError(f"snapshot {p} grew past the 64 MiB limit while read")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot {p}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def load_snapshot(path: str | Path) -> Snapshot:
    """Read a snapshot file.

    Raises:
        SnapshotError: unreadable file, not a regular file, over 64 MiB, invalid
            JSON, unbounded input, or wrong schema; the message names the file
            and the problem in one line.
    """
    p = Path(path)
    raw = _read_bounded(p)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SnapshotError(f"snapshot {p} is not UTF-8 text") from None
    data = parse_snapshot_text(text, f"snapshot {p}")
    try:
        return snapshot_from_json(data)
    except SnapshotError as exc:
        raise SnapshotError(f"snapshot {p} is invalid: {exc}") from None
