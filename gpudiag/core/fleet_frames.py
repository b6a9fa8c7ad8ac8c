"""How each node's task hands its results back to ``gpudiag fleet``: framed lines on
standard output (issue 19).

A launcher forwards its tasks' standard output to the node it runs on, whatever file
system the nodes share; per-task output *files* (srun's ``--output`` patterns, Open
MPI's ``--output dir=``) are written by each node's own daemon (slurmstepd's
``_local_file_write``) on that node, so a private directory on the launching node
never sees the others'. So every task prints its results as lines

    @gpudiag-fleet/1 <task> <kind> <seq> <total> <crc32> <base64 chunk>

of at most about 150 characters: the payload (UTF-8 text) is zlib-compressed,
base64-encoded and cut into chunks. Each line carries its task and place, so a
launcher's prefix (``srun --label``, Open MPI's tags), other output and lines of other
tasks in between do not matter; a short line is written in one ``write`` (atomic on a
pipe below ``PIPE_BUF``) and no launcher splits it; a CRC-32 per line refuses a damaged
one. Pure: no I/O here.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

PREFIX = "@gpudiag-fleet/1"
#: Base64 characters per line (72 bytes of compressed payload).
CHUNK = 96
#: The largest payload accepted once inflated (a snapshot file's bound).
MAX_PAYLOAD_BYTES = 64 * 1024 * 1024
#: Lines one payload may have (MAX_PAYLOAD_BYTES of incompressible data, and then some).
MAX_LINES = MAX_PAYLOAD_BYTES * 4 // 3 // CHUNK + 2
KINDS = ("hello", "snapshot", "probe")
_LINE = re.compile(
    re.escape(PREFIX) + r" (\d{1,7}) ([a-z]{1,16}) (\d{1,8}) (\d{1,8}) ([0-9a-f]{8}) "
    rf"([A-Za-z0-9+/=]{{1,{CHUNK}}})(?:\s|$)"
)


def encode(task: int, kind: str, text: str) -> list[str]:
    """The lines (without newlines) that carry ``text`` for ``task``."""
    packed = base64.b64encode(zlib.compress(text.encode("utf-8"), 6)).decode("ascii")
    chunks = [packed[i : i + CHUNK] for i in range(0, len(packed), CHUNK)] or [""]
    total = len(chunks)
    return [
        f"{PREFIX} {task} {kind} {seq} {total} {zlib.crc32(chunk.encode()):08x} {chunk}"
        for seq, chunk in enumerate(chunks)
    ]


@dataclass
class _Parts:
    total: int
    chunks: dict[int, str] = field(default_factory=dict)
    damaged: int = 0


@dataclass
class Frames:
    """What one launcher's output carried: ``texts[(task, kind)]`` for every complete
    payload, ``problems[(task, kind)]`` why one is not (damaged or missing lines)."""

    texts: dict[tuple[int, str], str] = field(default_factory=dict)
    problems: dict[tuple[int, str], str] = field(default_factory=dict)

    def tasks(self) -> set[int]:
        """Every task that sent anything, complete or not."""
        return {t for t, _ in self.texts} | {t for t, _ in self.problems}


def decode(lines: Iterable[str], max_task: int) -> Frames:
    """Collect the payloads in ``lines``; tasks above ``max_task`` are ignored."""
    parts: dict[tuple[int, str], _Parts] = {}
    for line in lines:
        if PREFIX not in line:
            continue
        match = _LINE.search(line)
        if match is None:
            continue
        task, kind, seq, total = int(match[1]), match[2], int(match[3]), int(match[4])
        if task > max_task or kind not in KINDS or not 0 <= seq < total <= MAX_LINES:
            continue
        entry = parts.setdefault((task, kind), _Parts(total))
        if entry.total != total or zlib.crc32(match[6].encode()) != int(match[5], 16):
            entry.damaged += 1
        else:
            entry.chunks[seq] = match[6]
    out = Frames()
    for key, entry in parts.items():
        if len(entry.chunks) < entry.total:
            damaged = f", {entry.damaged} damaged" if entry.damaged else ""
            out.problems[key] = f"{len(entry.chunks)} of {entry.total} lines{damaged}"
            continue
        try:
            raw = base64.b64decode("".join(entry.chunks[i] for i in range(entry.total)))
            inflater = zlib.decompressobj()
            data = inflater.decompress(raw, MAX_PAYLOAD_BYTES + 1)
            if len(data) > MAX_PAYLOAD_BYTES or inflater.unconsumed_tail:
                out.problems[key] = f"larger than {MAX_PAYLOAD_BYTES} bytes"
                continue
            out.texts[key] = data.decode("utf-8")
        except (binascii.Error, zlib.error, UnicodeDecodeError, ValueError) as exc:
            out.problems[key] = f"unreadable ({type(exc).__name__})"
    return out
