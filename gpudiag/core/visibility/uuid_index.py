"""The index of UUID prefixes that ``GPU-``/``MIG-`` entries are matched against."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from gpudiag.core.visibility.order import in_mig_mode, uuid_of
from gpudiag.model import Gpu, uuid_key


def _hex_key(uuid: str) -> str:
    """A UUID's 32 hex digits in lower case: what the driver compares an entry with."""
    return (uuid_key(uuid) or "").replace("-", "")


def match_hex(digits: str, candidates: _PrefixIndex) -> list[object]:
    # The entry's hex digits are a prefix of the device UUID's 32 digits
    # (CUDA Programming Guide: "enough digits from the beginning of the GPU
    # UUID"); dashes and case do not matter (recorded table, rule 1).
    return candidates.match(digits)


class _PrefixIndex:
    """UUIDs sorted once, so that the ones starting with a prefix are one run
    found by bisection: a scan of every GPU per entry made resolution quadratic
    (50,000 UUID entries on 100,000 GPUs)."""

    def __init__(self, pairs: Sequence[tuple[str, object]]) -> None:
        ordered = sorted(((_hex_key(uuid), obj) for uuid, obj in pairs), key=lambda p: p[0])
        self.keys = [key for key, _ in ordered]
        self.objs = [obj for _, obj in ordered]

    def match(self, prefix: str) -> list[object]:
        out = []
        position = bisect.bisect_left(self.keys, prefix)
        while position < len(self.keys) and self.keys[position].startswith(prefix):
            out.append(self.objs[position])
            position += 1
        return out


_INDEX_CACHE: dict[tuple[int, str], tuple[Sequence[Gpu], _PrefixIndex]] = {}


def pool_index(pool: Sequence[Gpu], kind: str) -> _PrefixIndex:
    """The prefix index of ``pool``'s GPU UUIDs (``gpu``), MIG-mode GPU UUIDs
    (``mig-gpu``), or MIG UUIDs with the UUIDs of GPUs not in MIG mode (``mig``),
    built once per pool (held with it, so its id cannot be reused meanwhile)."""
    cached = _INDEX_CACHE.get((id(pool), kind))
    if cached is not None and cached[0] is pool:
        return cached[1]
    if kind == "gpu":
        pairs: list[tuple[str, object]] = [(uuid_of(g), g) for g in pool]
    elif kind == "mig-gpu":
        pairs = [(uuid_of(g), g) for g in pool if in_mig_mode(g)]
    else:
        pairs = [(m.uuid, (g, m)) for g in pool if in_mig_mode(g) for m in g.mig_devices]
        # The driver also matches MIG-<hex> against a full GPU's UUID: recorded on
        # driver 580 (MIG-300c76ef… selected the H100, which was not in MIG mode).
        pairs += [(uuid_of(g), (g, None)) for g in pool if not in_mig_mode(g)]
    if len(_INDEX_CACHE) > 16:
        _INDEX_CACHE.clear()
    index = _PrefixIndex(pairs)
    _INDEX_CACHE[(id(pool), kind)] = (pool, index)
    return index
