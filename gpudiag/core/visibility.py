"""Exact ``CUDA_VISIBLE_DEVICES`` / ``CUDA_DEVICE_ORDER`` resolution (pure, no I/O).

The rules are CUDA's, as documented in the CUDA Programming Guide ("CUDA
Environment Variables": ``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER``), the
MIG User Guide ("CUDA Device Enumeration") and published hardware runs; every
rule, with examples and the points that are not documented by NVIDIA, is in
``docs/visible-devices.md``.

torch reads the same variable with its own parser before CUDA is initialised
(``torch/cuda/__init__.py``: ``_parse_visible_devices``, ``_device_count_nvml``,
``_transform_uuid_to_ordinals``, ``_get_nvml_device_index``). Where torch's
reading differs from CUDA's, a finding says so; :func:`torch_view` reproduces
torch's reading and ``tests/test_visibility_torch_oracle.py`` checks it against
the real torch functions.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

from gpudiag.findings.texts import (
    INVALID_ORDINAL_MESSAGE,
    NO_CUDA_GPUS,
    PROPERTIES_ASSERT,
    cuda_error_also,
    cuinit_failure_text,
    invalid_ordinal,
    torch_version_tuple,
    unexpected_device_count,
)
from gpudiag.model import (
    EntryExplanation,
    Finding,
    Gpu,
    MigDevice,
    Resolution,
    Snapshot,
    VisibleDevice,
    short_uuid,
    uuid_key,
)
from gpudiag.parsing import int_or_none

PCI_BUS_ID = "PCI_BUS_ID"
FASTEST_FIRST = "FASTEST_FIRST"

#: What HTCondor puts in CUDA_VISIBLE_DEVICES when a job was given no GPU.
NO_DEV_FILES = "NoDevFiles"

CODES: dict[str, str] = {
    "VIS-TRUNCATED": "An invalid CUDA_VISIBLE_DEVICES entry ends the list early",
    "VIS-DUPLICATE": "A duplicate CUDA_VISIBLE_DEVICES entry: cuInit fails, no GPU is usable",
    "VIS-NO-DEVICES": "CUDA_VISIBLE_DEVICES exposes no GPU",
    "VIS-ENTRY-TRAILING": "An integer entry has trailing text that CUDA ignores",
    "VIS-UUID-SPACE": "White space around a UUID entry: the entry selects nothing",
    "VIS-UUID-CASE": "A lower-case 'gpu-'/'mig-' prefix: the entry selects nothing",
    "VIS-TORCH-RAISES": "torch.cuda.device_count() raises on this value",
    "VIS-TORCH-COUNT": "torch's device count before CUDA initialisation differs from CUDA's",
    "VIS-TORCH-NVML-ORDER": "torch's NVML-based queries would read a different GPU",
    "VIS-MIG-MULTIPLE": "Several MIG devices selected: CUDA uses only the first",
    "VIS-MIG-HIDES-GPU": "A MIG device is enumerated, so CUDA hides the non-MIG GPUs",
    "VIS-MIG-NO-INSTANCE": "A GPU in MIG mode with no MIG instance exposes nothing",
    "VIS-MIG-UNCERTAIN": "Which MIG instance CUDA picks is not documented",
    "VIS-INDEX-MISMATCH": "CUDA device numbers differ from nvidia-smi's",
    "VIS-ORDER-MIXED": "Mixed GPU models without CUDA_DEVICE_ORDER=PCI_BUS_ID",
    "VIS-ORDER-UNCERTAIN": "CUDA's FASTEST_FIRST order is unknown on a mixed-model node",
    "VIS-ORDER-INVALID": "CUDA_DEVICE_ORDER has another value: cuInit fails, no GPU is usable",
    "VIS-SLURM-MISMATCH": "Slurm's GPU allocation differs from what CUDA_VISIBLE_DEVICES exposes",
    "VIS-CVD-CHANGED": "CUDA_VISIBLE_DEVICES changed after CUDA was initialised",
    "VIS-DRIVER-DISAGREES": "The CUDA driver's mapping differs from the rules' answer",
    "VIS-DRIVER-UNMATCHED": "The CUDA driver enumerated a device missing from the inventory",
}

#: torch functions that look a device up in NVML through
#: ``torch.cuda._get_nvml_device_index`` (torch/cuda/__init__.py, torch/cuda/memory.py),
#: which reads CUDA_VISIBLE_DEVICES integers as NVML indices and ignores CUDA_DEVICE_ORDER.
TORCH_NVML_FUNCTIONS = (
    "torch.cuda.utilization",
    "torch.cuda.memory_usage",
    "torch.cuda.device_memory_used",
    "torch.cuda.temperature",
    "torch.cuda.power_draw",
    "torch.cuda.clock_rate",
    "torch.cuda.list_gpu_processes",
)

# C's isspace() in the "C" locale: what strtoul skips, and what we trim. Python's
# str.strip() also strips \x1c-\x1f and Unicode spaces, which C does not.
_C_SPACE = " \t\n\v\f\r"
_DIGITS = "0123456789"

EntryKind = Literal["integer", "uuid"]


# --------------------------------------------------------------------------- helpers


def quote_value(text: str) -> str:
    """Quote an entry for a one-line message (JSON-like double quotes)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    for raw, shown in (("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"), ("\v", "\\v"), ("\f", "\\f")):
        escaped = escaped.replace(raw, shown)
    return f'"{escaped}"'


_q = quote_value  # short name for the many messages below


_ULONG_MAX = 2**64 - 1
_UINT32_MASK = 2**32 - 1
#: A UUID's hex digits: the driver stops reading an entry after the 32nd.
_UUID_HEX_DIGITS = 32
_HEX = "0123456789abcdefABCDEF"


def c_strtoul(text: str) -> int | None:
    """C ``strtoul(text, &end, 10)``: the ``unsigned long`` value, or None without a digit.

    Leading C white space is skipped, then an optional sign, then the leading
    ASCII digits; anything after them is ignored. A value past ``ULONG_MAX``
    saturates to ``ULONG_MAX`` (ERANGE, whatever the sign); a minus sign negates
    in unsigned arithmetic (``-1`` is ``ULONG_MAX``), as C specifies.
    """
    body = text.lstrip(_C_SPACE)
    negative = False
    if body[:1] in ("+", "-"):
        negative = body[0] == "-"
        body = body[1:]
    end = 0
    while end < len(body) and body[end] in _DIGITS:
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
        if len(digits) == _UUID_HEX_DIGITS:
            break
        if char == "-":
            continue
        if char not in _HEX:
            return None
        digits.append(char.lower())
    return "".join(digits) or None


def _gpu_label(gpu: Gpu) -> str:
    return f"GPU {gpu.nvml_index} (nvidia-smi index {gpu.nvml_index})"


def _enumerable(snapshot: Snapshot) -> list[Gpu]:
    # CUDA cannot enumerate a GPU that fell off the bus; NVML still numbers it.
    return [g for g in snapshot.gpus if not g.lost and g.uuid is not None]


def _in_mig_mode(gpu: Gpu) -> bool:
    return bool(gpu.mig_enabled)


def _uuid_of(gpu: Gpu) -> str:
    assert gpu.uuid is not None  # _enumerable() keeps only GPUs with a UUID
    return gpu.uuid


# --------------------------------------------------------------------------- order


class _Order(NamedTuple):
    name: str
    pool: tuple[Gpu, ...]
    certain: bool
    findings: tuple[Finding, ...]


def _models_differ(gpus: Sequence[Gpu]) -> bool:
    if len(gpus) < 2:
        return False
    names = {g.name for g in gpus}
    return len(names) > 1 or None in names  # an unknown model may differ


def _cuda_order_pool(snapshot: Snapshot, gpus: list[Gpu]) -> list[Gpu] | None:
    """The GPUs in the driver's recorded FASTEST_FIRST order, or None if unknown.

    ``snapshot.cuda_order`` may name MIG devices (that is what the driver lists
    on a MIG node); each stands for its parent GPU. The order is only used when
    it accounts for every enumerable GPU.
    """
    if snapshot.cuda_order is None:
        return None
    by_uuid: dict[str, Gpu] = {}
    for gpu in gpus:
        by_uuid[_uuid_of(gpu).lower()] = gpu
        for mig in gpu.mig_devices:
            by_uuid[mig.uuid.lower()] = gpu
    ordered: list[Gpu] = []
    placed: set[int] = set()  # by identity: `in ordered` compared dataclasses, quadratic
    for uuid in snapshot.cuda_order:
        found = by_uuid.get(uuid.lower())
        if found is not None and id(found) not in placed:
            placed.add(id(found))
            ordered.append(found)
    if len(ordered) != len(gpus):
        return None
    return ordered


def order_is_valid(order: str | None) -> bool:
    """Whether cuInit accepts this ``CUDA_DEVICE_ORDER`` (unset counts as valid)."""
    return order is None or order in (PCI_BUS_ID, FASTEST_FIRST)


def _resolve_order(order: str | None, snapshot: Snapshot) -> _Order:
    findings: list[Finding] = []
    if order == PCI_BUS_ID:
        name = PCI_BUS_ID
    else:
        name = FASTEST_FIRST
        if not order_is_valid(order):
            # Recorded on driver 580.159.04 (tests/truth/h100-driver-580.json): any
            # other value, lower case, surrounding spaces and "" included, makes
            # cuInit fail with CUDA_ERROR_INVALID_DEVICE, so no GPU is usable.
            findings.append(
                Finding(
                    code="VIS-ORDER-INVALID",
                    severity="error",
                    message=f"CUDA_DEVICE_ORDER={_q(str(order))} is not exactly PCI_BUS_ID or "
                    "FASTEST_FIRST: cuInit fails with CUDA_ERROR_INVALID_DEVICE, so no GPU is "
                    "usable at all in this process (the driver accepts no other spelling, not "
                    "even lower case or surrounding spaces).",
                    fix="export CUDA_DEVICE_ORDER=PCI_BUS_ID (nvidia-smi order), or unset it.",
                    predicts=unexpected_device_count(),
                    subject="CUDA_DEVICE_ORDER",
                )
            )
    gpus = _enumerable(snapshot)
    # nvidia-smi (NVML) numbers GPUs by PCI bus id, so PCI order is nvml_index order.
    pci = sorted(gpus, key=lambda g: g.nvml_index)
    if name == PCI_BUS_ID:
        return _Order(name, tuple(pci), True, tuple(findings))
    known = _cuda_order_pool(snapshot, gpus)
    if known is not None:
        return _Order(name, tuple(known), True, tuple(findings))
    if not _models_differ(gpus):
        # Identical GPUs: FASTEST_FIRST ties are broken by PCI bus id.
        return _Order(name, tuple(pci), True, tuple(findings))
    findings.append(
        Finding(
            code="VIS-ORDER-UNCERTAIN",
            severity="warning",
            message="This node mixes GPU models and the driver's FASTEST_FIRST order was "
            "not recorded, so which GPU each CUDA index means is uncertain; gpudiag "
            "assumed nvidia-smi (PCI bus) order.",
            fix="Set CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA numbers GPUs like nvidia-smi, "
            "or record the order with `gpudiag snapshot` on the machine.",
            subject="CUDA_DEVICE_ORDER",
        )
    )
    return _Order(name, tuple(pci), False, tuple(findings))


# --------------------------------------------------------------------------- entries


class _Target(NamedTuple):
    """What one valid entry selects: a GPU, and for MIG the instance."""

    gpu: Gpu
    mig: MigDevice | None
    key: str  # what duplicates are compared on
    how: str  # explanation text up to the device
    mig_guess: bool = False  # MIG instance picked by CUDA, which one is undocumented
    mig_missing: bool = False  # GPU in MIG mode without instance


class _Stop(NamedTuple):
    reason: str  # explanation text
    looks_like_device: bool  # the user meant a device here (not a terminator)


def _mig_target(gpu: Gpu, key: str, how: str) -> _Target:
    """A GPU in MIG mode picked by index or GPU UUID: CUDA shows its MIG instance.

    The MIG User Guide ("CUDA Device Enumeration") documents only MIG UUIDs;
    published runs show an index or GPU UUID of a MIG-mode GPU exposing one of
    its MIG devices. Which one, with several, is not documented: we take the
    first NVML lists and flag it (VIS-MIG-UNCERTAIN).
    """
    if not gpu.mig_devices:
        return _Target(gpu, None, key, how, mig_missing=True)
    mig = gpu.mig_devices[0]
    how += f" is in MIG mode → its MIG device {short_uuid(mig.uuid)}"
    return _Target(gpu, mig, key, how, mig_guess=len(gpu.mig_devices) > 1)


def _gpu_target(gpu: Gpu, key: str, how: str) -> _Target:
    if _in_mig_mode(gpu):
        return _mig_target(gpu, key, how)
    return _Target(gpu, None, key, how)


def _hex_key(uuid: str) -> str:
    """A UUID's 32 hex digits in lower case: what the driver compares an entry with."""
    return (uuid_key(uuid) or "").replace("-", "")


def _match_hex(digits: str, candidates: _PrefixIndex) -> list[object]:
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


def _pool_index(pool: Sequence[Gpu], kind: str) -> _PrefixIndex:
    """The prefix index of ``pool``'s GPU UUIDs (``gpu``), MIG-mode GPU UUIDs
    (``mig-gpu``), or MIG UUIDs with the UUIDs of GPUs not in MIG mode (``mig``),
    built once per pool (held with it, so its id cannot be reused meanwhile)."""
    cached = _INDEX_CACHE.get((id(pool), kind))
    if cached is not None and cached[0] is pool:
        return cached[1]
    if kind == "gpu":
        pairs: list[tuple[str, object]] = [(_uuid_of(g), g) for g in pool]
    elif kind == "mig-gpu":
        pairs = [(_uuid_of(g), g) for g in pool if _in_mig_mode(g)]
    else:
        pairs = [(m.uuid, (g, m)) for g in pool if _in_mig_mode(g) for m in g.mig_devices]
        # The driver also matches MIG-<hex> against a full GPU's UUID: recorded on
        # driver 580 (MIG-300c76ef… selected the H100, which was not in MIG mode).
        pairs += [(_uuid_of(g), (g, None)) for g in pool if not _in_mig_mode(g)]
    if len(_INDEX_CACHE) > 16:
        _INDEX_CACHE.clear()
    index = _PrefixIndex(pairs)
    _INDEX_CACHE[(id(pool), kind)] = (pool, index)
    return index


def _read_integer(raw: str, pool: Sequence[Gpu], order: str) -> _Target | _Stop:
    value = cuda_index(raw)
    if value is None:
        return _Stop("no digits (not an index or a UUID)", looks_like_device=False)
    text = raw.strip(_C_SPACE)
    read = c_strtoul(raw)
    if read is not None and read != value:
        sign = text[0] if text[0] in "+-" else ""
        digits = text[len(sign) :]
        digits = digits[: len(digits) - len(digits.lstrip(_DIGITS))] or digits
        written = sign + (digits if len(digits) <= 24 else digits[:23] + "…")
        # Wrapped or saturated: say what the driver made of it.
        shown = f"integer {written} → {value} (CUDA keeps the low 32 bits of strtoul's result)"
    else:
        shown = f"integer {value}"
        if text != str(value):
            shown += " (read like strtoul: sign and leading digits only)"
    if value >= len(pool):
        if text.startswith("-"):
            # "-1" is the documented way to end a list (CUDA Programming Guide's
            # example 0,2,-1,1), not a device the user meant.
            return _Stop(f"negative (CUDA reads it as {value}: no such device)", False)
        count = len(pool)
        have = "no GPU" if count == 0 else f"{count} GPU(s): 0–{count - 1}"
        return _Stop(f"{shown} → no such device (CUDA sees {have})", looks_like_device=True)
    gpu = pool[value]
    how = shown
    if gpu.nvml_index != value:
        how += f" → {order} position {value}"
    how += f" → {_gpu_label(gpu)}"
    return _gpu_target(gpu, f"int:{value}", how)


def _bad_uuid(raw: str) -> _Stop:
    return _Stop(
        "not a UUID CUDA can read (after GPU-/MIG- it accepts only hex digits and "
        "dashes up to the 32nd digit, no spaces)",
        looks_like_device=True,
    )


def _read_gpu_uuid(raw: str, pool: Sequence[Gpu]) -> _Target | _Stop:
    digits = uuid_hex(raw[len("GPU-") :])
    if digits is None:
        return _bad_uuid(raw)
    found = _match_hex(digits, _pool_index(pool, "gpu"))
    if not found:
        return _Stop("UUID prefix matches no GPU", looks_like_device=True)
    if len(found) > 1:
        # Not recorded on hardware (one GPU): we assume an ambiguous prefix is invalid.
        return _Stop(f"ambiguous (prefix of {len(found)} GPU UUIDs)", looks_like_device=True)
    gpu = found[0]
    assert isinstance(gpu, Gpu)
    whole = len(digits) == _UUID_HEX_DIGITS
    how = f"UUID {'' if whole else 'prefix '}of {_gpu_label(gpu)}"
    return _gpu_target(gpu, f"gpu:{gpu.uuid}", how)


def _mig_how(gpu: Gpu, mig: MigDevice) -> str:
    ids = ""
    if mig.gpu_instance_id is not None and mig.compute_instance_id is not None:
        ids = f" (GPU instance {mig.gpu_instance_id}, compute instance {mig.compute_instance_id})"
    return f"MIG device {short_uuid(mig.uuid)}{ids} on {_gpu_label(gpu)}"


def _read_legacy_mig(raw: str, pool: Sequence[Gpu]) -> _Target | _Stop | None:
    # Legacy form MIG-GPU-<uuid>/<gpu instance>/<compute instance> (MIG User
    # Guide, CUDA 11.0-11.3 drivers), on a GPU in MIG mode only. On driver 580 it
    # selects nothing on a GPU that is not in MIG mode (recorded table).
    parts = raw[len("MIG-") :].split("/")
    if len(parts) != 3 or not all(p and set(p) <= set(_DIGITS) for p in parts[1:]):
        return None
    found = _match_hex(uuid_hex(parts[0][len("GPU-") :]) or "-", _pool_index(pool, "mig-gpu"))
    if len(found) != 1:
        return None
    gpu = found[0]
    assert isinstance(gpu, Gpu)
    gi, ci = int(parts[1]), int(parts[2])
    for mig in gpu.mig_devices:
        if mig.gpu_instance_id == gi and mig.compute_instance_id == ci:
            return _Target(gpu, mig, f"mig:{mig.uuid}", _mig_how(gpu, mig))
    return _Stop(
        f"{_gpu_label(gpu)} has no MIG device with GPU instance {gi} and compute instance {ci}",
        looks_like_device=True,
    )


def _read_mig(raw: str, pool: Sequence[Gpu]) -> _Target | _Stop:
    if raw.startswith("MIG-GPU-"):
        legacy = _read_legacy_mig(raw, pool)
        if legacy is not None:
            return legacy
    digits = uuid_hex(raw[len("MIG-") :])
    if digits is None:
        return _bad_uuid(raw)
    found = _match_hex(digits, _pool_index(pool, "mig"))
    if not found:
        return _Stop("UUID prefix matches no MIG device or GPU", looks_like_device=True)
    if len(found) > 1:
        return _Stop(f"ambiguous (prefix of {len(found)} UUIDs)", looks_like_device=True)
    pair = found[0]
    assert isinstance(pair, tuple)
    gpu, mig = pair
    if mig is None:
        how = f"MIG- prefix, but the UUID of {_gpu_label(gpu)} (not in MIG mode)"
        return _Target(gpu, None, f"gpu:{gpu.uuid}", how)
    return _Target(gpu, mig, f"mig:{mig.uuid}", _mig_how(gpu, mig))


def _entry_kind(raw: str) -> EntryKind:
    # Case-sensitive and untrimmed: " GPU-…" and "gpu-…" are read as integers
    # (no digit: invalid), recorded on driver 580.
    return "uuid" if raw.startswith(("GPU-", "MIG-")) else "integer"


# --------------------------------------------------------------------------- torch


@dataclass(frozen=True)
class TorchView:
    """How torch reads ``CUDA_VISIBLE_DEVICES`` before CUDA is initialised.

    Attributes:
        raises: the exception ``torch.cuda.device_count()`` raises, or None.
        count: what ``torch.cuda.device_count()`` returns from NVML before CUDA
            initialisation, or None when torch asks CUDA instead (MIG values,
            NVML unavailable, a GPU without UUID).
        nvml_indices: the NVML index torch's NVML-based functions use for
            ``cuda:i`` (``_get_nvml_device_index``), or None when not computable.
    """

    raises: str | None
    count: int | None
    nvml_indices: tuple[int, ...] | None


def _torch_strtoul(text: str) -> int:
    """torch's ``_strtoul``: Python ``str.isdigit`` (any Unicode digit) and ``int()``.

    Raises ValueError exactly where torch does: a sign not followed by a digit
    (``-``, ``+x``), or a digit ``int()`` rejects (``²``).
    """
    if not text:
        return -1
    end = 0
    for pos, char in enumerate(text):
        if char.isdigit() or (pos == 0 and char in "+-"):
            end = pos + 1
        else:
            break
    return int(text[:end]) if end else -1


def torch_parse_visible(spec: str | None) -> list[int] | list[str]:
    """Re-implementation of ``torch.cuda._parse_visible_devices`` (CUDA builds).

    Raises:
        ValueError: where torch raises (``int()`` of a lone sign...).
    """
    if spec is None:
        return list(range(64))
    for prefix in ("GPU-", "MIG-"):
        if spec.startswith(prefix):
            texts: list[str] = []
            seen_texts: set[str] = set()  # sets beside the lists: linear in entries
            for elem in spec.split(","):
                if elem in seen_texts:  # raw-string duplicate: torch returns no device
                    return []
                if not elem.startswith(prefix):  # untrimmed: " GPU-x" stops here
                    break
                texts.append(elem)
                seen_texts.add(elem)
            return texts
    values: list[int] = []
    seen_values: set[int] = set()
    for elem in spec.split(","):
        value = _torch_strtoul(elem.strip())
        if value in seen_values:
            return []
        if value < 0:
            break
        values.append(value)
        seen_values.add(value)
    return values


def _torch_uuid_ordinals(candidates: Sequence[str], uuids: Sequence[str]) -> list[int]:
    # torch's _transform_uuid_to_ordinals: unique prefix, first miss stops, dup empties.
    # The UUIDs sorted once: the ones starting with a prefix are one run found
    # by bisection, so 50,000 candidates on 100,000 GPUs stay fast.
    ordered = sorted((uuid, i) for i, uuid in enumerate(uuids))
    keys = [uuid for uuid, _ in ordered]
    ordinals: list[int] = []
    seen: set[int] = set()
    for candidate in candidates:
        first = bisect.bisect_left(keys, candidate)
        if first >= len(keys) or not keys[first].startswith(candidate):
            break
        if first + 1 < len(keys) and keys[first + 1].startswith(candidate):
            break  # not unique
        hit = ordered[first][1]
        if hit in seen:
            return []
        ordinals.append(hit)
        seen.add(hit)
    return ordinals


def _torch_113_strtoul(text: str) -> int:
    # torch 1.13's _strtoul: leading str.isdigit() characters only, no sign.
    end = 0
    while end < len(text) and text[end].isdigit():
        end += 1
    return int(text[:end]) if end else -1


def _torch_view_113(spec: str | None, snapshot: Snapshot, nvml_usable: bool) -> TorchView:
    """torch 1.13 (PR #84879): a *set* of integers, UUID entries read as -1.

    ``_device_count_nvml`` returns ``len(set(range(raw_count)) & visible)``:
    duplicates collapse, nothing stops the list, and ``GPU-``/``MIG-`` values
    count 0 devices (pytorch issue #90543, fixed in 2.0 by PR #92315).
    """
    if spec is None:
        values: set[int] = set(range(64))
    else:
        try:
            values = {_torch_113_strtoul(elem.strip()) for elem in spec.split(",")}
        except ValueError as exc:  # int() of a digit it rejects ('²')
            return TorchView(raises=f"ValueError: {exc}", count=None, nvml_indices=None)
    if not nvml_usable:
        return TorchView(raises=None, count=None, nvml_indices=None)
    count = len(set(range(len(snapshot.gpus))) & values)
    # _get_nvml_device_index arrived in 2.1 (PR #94568): no NVML-index mapping here.
    return TorchView(raises=None, count=count, nvml_indices=None)


def torch_view(spec: str | None, snapshot: Snapshot) -> TorchView:
    """What the snapshot's torch (CUDA build, NVML present) makes of ``spec``.

    Per torch version (``docs/visible-devices.md``, "torch versions"):

    * up to 1.12: ``device_count()`` asks CUDA (no parser of its own): count None;
    * 1.13: :func:`_torch_view_113`;
    * 2.0 and later (PR #92315): ``_parse_visible_devices`` returns a list that
      stops at the first negative, is emptied by a duplicate, and holds ``GPU-``/
      ``MIG-`` strings; ``_device_count_nvml`` matches UUID prefixes against NVML's
      UUIDs, defers ``MIG-`` values to CUDA (count None) and trims integers at
      NVML's device count, which includes lost GPUs and GPUs in MIG mode. From 2.1,
      ``_get_nvml_device_index`` takes integer entries as NVML indices whatever
      ``CUDA_DEVICE_ORDER`` says.

    An unknown version is read as a current torch.
    """
    version = torch_version_tuple(snapshot.torch.version if snapshot.torch is not None else None)
    nvml_ok = snapshot.sources.get("nvml")
    nvml_usable = bool(snapshot.gpus) and (nvml_ok is None or nvml_ok.status == "ok")
    if version is not None and version < (1, 13):
        return TorchView(raises=None, count=None, nvml_indices=None)
    if version is not None and version < (2, 0):
        return _torch_view_113(spec, snapshot, nvml_usable)
    try:
        parsed = torch_parse_visible(spec)
    except ValueError as exc:
        return TorchView(raises=f"ValueError: {exc}", count=None, nvml_indices=None)
    if not parsed:
        return TorchView(raises=None, count=0, nvml_indices=())
    if not nvml_usable:
        return TorchView(raises=None, count=None, nvml_indices=None)
    maps_nvml = version is None or version >= (2, 1)
    if isinstance(parsed[0], str):
        texts = [str(p) for p in parsed]
        if texts[0].startswith("MIG-"):
            return TorchView(raises=None, count=None, nvml_indices=None)
        uuids = [g.uuid for g in snapshot.gpus]
        if any(u is None for u in uuids):  # nvmlDeviceGetUUID fails: torch asks CUDA
            return TorchView(raises=None, count=None, nvml_indices=None)
        ordinals = _torch_uuid_ordinals(texts, [str(u) for u in uuids])
        nvml = [snapshot.gpus[o].nvml_index for o in ordinals]
        return TorchView(
            raises=None, count=len(nvml), nvml_indices=tuple(nvml) if maps_nvml else None
        )
    ints = [int(p) for p in parsed]
    raw_count = len(snapshot.gpus)
    count = len(ints)
    for pos, value in enumerate(ints):
        if value >= raw_count:
            count = pos
            break
    return TorchView(raises=None, count=count, nvml_indices=tuple(ints) if maps_nvml else None)


# --------------------------------------------------------------------------- resolver


class _Entry:
    """One comma-separated entry and what reading it gave."""

    __slots__ = ("duplicate_of", "position", "raw", "result", "trimmed")

    def __init__(self, position: int, raw: str, trimmed: str) -> None:
        self.position = position
        self.raw = raw
        self.trimmed = trimmed
        self.result: _Target | _Stop | None = None  # None: after the end of the list
        self.duplicate_of: int | None = None


def _split(spec: str) -> list[_Entry]:
    return [
        _Entry(position=i + 1, raw=raw, trimmed=raw.strip(_C_SPACE))
        for i, raw in enumerate(spec.split(","))
    ]


def _read_entries(entries: list[_Entry], order: _Order) -> tuple[int | None, int | None]:
    """Fill each entry's result; return (stop position, duplicate position)."""
    first_kind: EntryKind | None = None
    seen: dict[str, int] = {}
    for entry in entries:
        trimmed = entry.trimmed
        if not trimmed:
            entry.result = _Stop("empty entry", looks_like_device=False)
            return entry.position, None
        if trimmed == NO_DEV_FILES and entry.position == 1:
            # HTCondor's deliberate "no GPU"; CUDA reads it as text with no digits.
            entry.result = _Stop("no digits (HTCondor's 'no GPU' value)", looks_like_device=False)
            return entry.position, None
        if entry.trimmed.startswith(("GPU-", "MIG-")) and not entry.raw.startswith(
            ("GPU-", "MIG-")
        ):
            # Recorded on driver 580: "  GPU-300c76ef" selects nothing.
            entry.result = _Stop("white space before a UUID: CUDA reads no UUID", True)
            return entry.position, None
        kind = _entry_kind(entry.raw)
        if first_kind is None:
            first_kind = kind
        elif kind != first_kind:
            other = "integer" if first_kind == "integer" else "UUID"
            entry.result = _Stop(
                f"a {'UUID' if kind == 'uuid' else 'integer'} after {other} entries "
                "(CUDA does not mix indices and UUIDs)",
                looks_like_device=True,
            )
            return entry.position, None
        if kind == "integer":
            result = _read_integer(entry.raw, order.pool, order.name)
        elif entry.raw.startswith("MIG-"):
            result = _read_mig(entry.raw, order.pool)
        else:
            result = _read_gpu_uuid(entry.raw, order.pool)
        entry.result = result
        if isinstance(result, _Stop):
            return entry.position, None
        if result.key in seen:
            entry.duplicate_of = seen[result.key]
            return None, entry.position
        seen[result.key] = entry.position
    return None, None


_END = "the list ends here; later entries are ignored"


def resolve_visible(spec: str | None, order: str | None, snapshot: Snapshot) -> Resolution:
    """Which physical devices ``cuda:0``, ``cuda:1``, … are under ``spec`` and ``order``.

    Args:
        spec: the ``CUDA_VISIBLE_DEVICES`` value; None when unset.
        order: the ``CUDA_DEVICE_ORDER`` value; None when unset (FASTEST_FIRST).
        snapshot: the machine's inventory.

    Returns:
        The devices in ``cuda_ordinal`` order, one explanation per entry, and findings.
    """
    resolved_order = _resolve_order(order, snapshot)
    findings: list[Finding] = list(resolved_order.findings)
    certain = resolved_order.certain
    pool = resolved_order.pool

    entries: list[_Entry] = []
    stop_at: int | None = None
    dup_at: int | None = None
    deliberate_none = False
    targets: list[tuple[_Entry | None, _Target]]
    if spec is None:
        targets = [(None, _gpu_target(g, f"gpu:{g.uuid}", _gpu_label(g))) for g in pool]
    else:
        entries = _split(spec)
        deliberate_none = not spec.strip(_C_SPACE) or spec.strip(_C_SPACE) == NO_DEV_FILES
        stop_at, dup_at = _read_entries(entries, resolved_order)
        targets = []
        if dup_at is None:
            for item in entries:
                if isinstance(item.result, _Target):
                    targets.append((item, item.result))

    # MIG rules (MIG User Guide, "CUDA Device Enumeration"): a CUDA process
    # enumerates a single MIG device, and once it does, non-MIG GPUs are hidden.
    chosen_mig: _Target | None = None
    extra_migs: list[_Target] = []
    for _, target in targets:
        if target.mig is not None:
            if chosen_mig is None:
                chosen_mig = target
            else:
                extra_migs.append(target)
    devices: list[VisibleDevice] = []
    ordinal_of: dict[int, int] = {}
    fate: dict[int, str] = {}
    hidden: list[_Target] = []
    empty_mig: list[_Target] = []
    for source, target in targets:
        pos = source.position if source is not None else -1
        if target.mig_missing:
            empty_mig.append(target)
            fate[pos] = " → in MIG mode with no MIG device: nothing to enumerate"
            continue
        if chosen_mig is not None and target is not chosen_mig:
            if target.mig is not None:
                fate[pos] = " → not enumerated: CUDA enumerates only one MIG device per process"
            else:
                hidden.append(target)
                fate[pos] = " → hidden: a MIG device is enumerated, so CUDA hides non-MIG GPUs"
            continue
        ordinal = len(devices)
        devices.append(
            VisibleDevice(
                cuda_ordinal=ordinal,
                nvml_index=target.gpu.nvml_index,
                uuid=_uuid_of(target.gpu),
                mig_uuid=target.mig.uuid if target.mig is not None else None,
                entry=source.raw if source is not None else None,
            )
        )
        if source is not None:
            ordinal_of[source.position] = ordinal

    explanations = _explain(spec, entries, stop_at, dup_at, ordinal_of, fate)

    # ---- findings about the list itself
    if spec is not None:
        findings.extend(_list_findings(spec, entries, stop_at, dup_at, snapshot))
    if chosen_mig is not None and chosen_mig.mig is not None and extra_migs:
        findings.append(
            Finding(
                code="VIS-MIG-MULTIPLE",
                severity="warning",
                message=f"{1 + len(extra_migs)} MIG devices are selected, but a CUDA process "
                f"enumerates only one: cuda:0 is {short_uuid(chosen_mig.mig.uuid)} and the "
                "others are ignored.",
                fix="Run one process per MIG device, each with CUDA_VISIBLE_DEVICES=MIG-<uuid> "
                "(torchrun/DDP across MIG devices of one process is not possible).",
                subject="CUDA_VISIBLE_DEVICES",
            )
        )
    if chosen_mig is not None and chosen_mig.mig_guess:
        certain = False
        findings.append(
            Finding(
                code="VIS-MIG-UNCERTAIN",
                severity="warning",
                message=f"{_gpu_label(chosen_mig.gpu)} is in MIG mode with "
                f"{len(chosen_mig.gpu.mig_devices)} MIG devices; NVIDIA does not document "
                "which one CUDA picks, gpudiag assumed the first nvidia-smi lists.",
                fix="Name the MIG device: CUDA_VISIBLE_DEVICES=MIG-<uuid> (see nvidia-smi -L).",
                subject=chosen_mig.gpu.uuid,
            )
        )
    if hidden:
        names = ", ".join(_gpu_label(t.gpu) for t in hidden)
        findings.append(
            Finding(
                code="VIS-MIG-HIDES-GPU",
                severity="warning",
                message=f"A MIG device is enumerated, so CUDA hides the non-MIG GPU(s) {names}.",
                fix="Run MIG work and full-GPU work in separate processes, each with its own "
                "CUDA_VISIBLE_DEVICES.",
                subject="CUDA_VISIBLE_DEVICES",
            )
        )
    for target in empty_mig:
        findings.append(
            Finding(
                code="VIS-MIG-NO-INSTANCE",
                severity="warning",
                message=f"{_gpu_label(target.gpu)} is in MIG mode but has no MIG device, "
                "so CUDA can run nothing on it.",
                fix="Create MIG instances (nvidia-smi mig -cgi … -C) or disable MIG mode "
                "(nvidia-smi -i N -mig 0).",
                subject=target.gpu.uuid,
            )
        )
    cuinit_error: str | None = None
    if dup_at is not None or not order_is_valid(order):
        cuinit_error = "CUDA_ERROR_INVALID_DEVICE"
        if devices:
            explanations = _order_invalid_explanations(explanations)
            devices = []
    elif not devices and (snapshot.gpus or snapshot.driver_version is not None):
        cuinit_error = "CUDA_ERROR_NO_DEVICE"
    if not devices and spec is not None and cuinit_error != "CUDA_ERROR_INVALID_DEVICE":
        findings.append(_no_devices(spec, deliberate_none, snapshot))
    if order_is_valid(order):
        findings.extend(_order_findings(spec, entries, resolved_order, snapshot))
    findings.extend(_mismatch_findings(devices))
    findings.extend(_torch_findings(spec, devices, snapshot, cuinit_error))
    return Resolution(
        spec=spec,
        order=resolved_order.name,
        devices=tuple(devices),
        explanations=explanations,
        findings=tuple(findings),
        method="rules",
        certain=certain,
        cuinit_error=cuinit_error,
    )


def _order_invalid_explanations(
    explanations: tuple[EntryExplanation, ...],
) -> tuple[EntryExplanation, ...]:
    tail = " → but cuInit fails (CUDA_DEVICE_ORDER is invalid): no device"
    return tuple(
        replace(e, outcome="ignored", text=e.text + tail) if e.outcome == "visible" else e
        for e in explanations
    )


def _explain(
    spec: str | None,
    entries: list[_Entry],
    stop_at: int | None,
    dup_at: int | None,
    ordinal_of: Mapping[int, int],
    fate: Mapping[int, str],
) -> tuple[EntryExplanation, ...]:
    if spec is None:
        return ()
    out: list[EntryExplanation] = []
    if spec.strip(_C_SPACE) == NO_DEV_FILES and len(entries) == 1:
        return (
            EntryExplanation(
                1, spec, "stop", f"{_q(spec)} → HTCondor's 'no GPU assigned' value: no device"
            ),
        )
    if not spec.strip(_C_SPACE) and len(entries) == 1:
        return (EntryExplanation(1, spec, "stop", f"{_q(spec)} → empty value: no device"),)
    for entry in entries:
        shown = _q(entry.raw)
        result = entry.result
        if result is None:
            end = stop_at if stop_at is not None else dup_at
            out.append(
                EntryExplanation(
                    entry.position,
                    entry.raw,
                    "ignored",
                    f"{shown} → ignored: the list ended at entry {end}",
                )
            )
        elif isinstance(result, _Stop):
            out.append(
                EntryExplanation(
                    entry.position, entry.raw, "stop", f"{shown} → {result.reason}: {_END}"
                )
            )
        elif dup_at is not None:
            if entry.position == dup_at:
                text = (
                    f"{shown} → {result.how} → duplicate of entry {entry.duplicate_of}: "
                    "CUDA then exposes no device at all"
                )
                out.append(EntryExplanation(entry.position, entry.raw, "stop", text))
            else:
                text = f"{shown} → {result.how} → dropped: entry {dup_at} duplicates an entry"
                out.append(EntryExplanation(entry.position, entry.raw, "ignored", text))
        elif entry.position in ordinal_of:
            text = f"{shown} → {result.how} → cuda:{ordinal_of[entry.position]}"
            out.append(EntryExplanation(entry.position, entry.raw, "visible", text))
        else:
            text = f"{shown} → {result.how}{fate.get(entry.position, '')}"
            out.append(EntryExplanation(entry.position, entry.raw, "ignored", text))
    return tuple(out)


def _list_findings(
    spec: str,
    entries: list[_Entry],
    stop_at: int | None,
    dup_at: int | None,
    snapshot: Snapshot,
) -> list[Finding]:
    findings: list[Finding] = []
    if stop_at is not None:
        stop = entries[stop_at - 1]
        assert isinstance(stop.result, _Stop)
        dropped = len(entries) - stop_at
        if dropped > 0 or stop.result.looks_like_device:
            later = f"; the {dropped} later entr{'y is' if dropped == 1 else 'ies are'} ignored"
            findings.append(
                Finding(
                    code="VIS-TRUNCATED",
                    severity="warning",
                    message=f"CUDA_VISIBLE_DEVICES={_q(spec)}: entry {stop_at} "
                    f"({_q(stop.raw)}) is invalid ({stop.result.reason}), so the list "
                    f"ends before it{later if dropped else ''}.",
                    fix="Remove or correct that entry; list only valid, distinct indices "
                    "or UUIDs (see nvidia-smi -L).",
                    subject="CUDA_VISIBLE_DEVICES",
                )
            )
    if dup_at is not None:
        dup = entries[dup_at - 1]
        findings.append(
            Finding(
                code="VIS-DUPLICATE",
                severity="error",
                message=f"CUDA_VISIBLE_DEVICES={_q(spec)}: entry {dup_at} ({_q(dup.raw)}) "
                f"selects the same device as entry {dup.duplicate_of}: cuInit fails with "
                "CUDA_ERROR_INVALID_DEVICE, so no GPU is usable in this process. torch counts "
                "0 devices and torch.cuda.is_available() is False.",
                fix="List each GPU once.",
                predicts=unexpected_device_count(),
                subject="CUDA_VISIBLE_DEVICES",
            )
        )
    reached = entries if stop_at is None and dup_at is None else entries[: (stop_at or dup_at)]
    spaced = [
        e
        for e in reached
        if isinstance(e.result, _Stop)
        and e.raw != e.trimmed
        and e.trimmed.startswith(("GPU-", "MIG-"))
    ]
    if spaced:
        first = spaced[0]
        findings.append(
            Finding(
                code="VIS-UUID-SPACE",
                severity="warning",
                message=f"Entry {first.position} ({_q(first.raw)}) has white space around a "
                "UUID: CUDA reads no UUID there, so the entry selects nothing and the list "
                "ends before it.",
                fix="Remove the spaces: CUDA_VISIBLE_DEVICES="
                + ",".join(e.trimmed for e in entries),
                subject="CUDA_VISIBLE_DEVICES",
            )
        )
    findings.extend(_case_findings(entries))
    trailing = [
        e
        for e in reached
        if isinstance(e.result, _Target)
        and _entry_kind(e.raw) == "integer"
        and e.trimmed.lstrip("+-").lstrip(_DIGITS) != ""
    ]
    if trailing:
        read = ", ".join(f"{_q(e.raw)} as {cuda_index(e.raw)}" for e in trailing)
        findings.append(
            Finding(
                code="VIS-ENTRY-TRAILING",
                severity="warning",
                message=f"CUDA reads an index like C's strtoul, keeping only the leading "
                f"digits: it reads {read}. Ranges (0-3) and hex (0x1) are not supported.",
                fix="Write each index in decimal, separated by commas: e.g. 0,1,2,3.",
                subject="CUDA_VISIBLE_DEVICES",
            )
        )
    return findings


def _case_findings(entries: list[_Entry]) -> list[Finding]:
    # The prefix is case-sensitive (recorded on driver 580: "gpu-300c76ef" selects
    # nothing), while the hex after it is not (that difference is torch's, and
    # VIS-TORCH-COUNT reports it).
    for entry in entries:
        head = entry.trimmed[:4]
        if head.upper() not in ("GPU-", "MIG-") or head == head.upper():
            continue
        fixed = head.upper() + entry.trimmed[4:].lower()
        return [
            Finding(
                code="VIS-UUID-CASE",
                severity="warning",
                message=f"Entry {entry.position} ({_q(entry.raw)}) starts with {_q(head)}: "
                "CUDA recognises only the upper-case prefixes 'GPU-' and 'MIG-', so it reads "
                "the entry as an index, finds no digit, and the entry selects nothing.",
                fix=f"Write it as nvidia-smi -L prints it: {_q(fixed)}.",
                subject="CUDA_VISIBLE_DEVICES",
            )
        ]
    return []


def _no_devices(spec: str, deliberate: bool, snapshot: Snapshot) -> Finding:
    # With no device cuInit fails (CUDA_ERROR_NO_DEVICE, recorded on driver 580 for
    # "", " " and "NoDevFiles" too): an error for a job that is checked for GPUs,
    # even when hiding them was deliberate.
    if deliberate:
        return Finding(
            code="VIS-NO-DEVICES",
            severity="error",
            message=f"CUDA_VISIBLE_DEVICES={_q(spec)} hides every GPU: cuInit fails with "
            "CUDA_ERROR_NO_DEVICE, torch.cuda.is_available() is False and the job runs "
            "without CUDA.",
            fix="If the job needs a GPU, unset CUDA_VISIBLE_DEVICES or list the GPUs to use "
            "(check the job's GPU request); if it is meant to run on the CPU, skip this check.",
            predicts=NO_CUDA_GPUS,
            subject="CUDA_VISIBLE_DEVICES",
        )
    where = "this machine has no GPU CUDA can use" if not _enumerable(snapshot) else ""
    return Finding(
        code="VIS-NO-DEVICES",
        severity="error",
        message=f"CUDA_VISIBLE_DEVICES={_q(spec)} exposes no GPU: cuInit fails with "
        "CUDA_ERROR_NO_DEVICE" + (f" ({where})." if where else "."),
        fix="Use indices from 0 to the GPU count - 1, or UUIDs from `nvidia-smi -L`.",
        predicts=NO_CUDA_GPUS,
        subject="CUDA_VISIBLE_DEVICES",
    )


def _order_findings(
    spec: str | None, entries: list[_Entry], order: _Order, snapshot: Snapshot
) -> list[Finding]:
    if order.name == PCI_BUS_ID or not _models_differ(order.pool):
        return []
    uses_indices = spec is None or (
        bool(entries) and entries[0].trimmed != "" and _entry_kind(entries[0].trimmed) == "integer"
    )
    if not uses_indices or not order.certain:
        # UUID lists do not depend on the order; an unknown order has VIS-ORDER-UNCERTAIN.
        return []
    pci = sorted(order.pool, key=lambda g: g.nvml_index)
    differs = list(order.pool) != pci
    detail = (
        "here FASTEST_FIRST numbers the GPUs differently from nvidia-smi: "
        + ", ".join(f"CUDA {i} = nvidia-smi {g.nvml_index}" for i, g in enumerate(order.pool))
        if differs
        else "FASTEST_FIRST happens to match nvidia-smi order today, but that is not guaranteed"
    )
    return [
        Finding(
            code="VIS-ORDER-MIXED",
            severity="warning",
            message=f"This node mixes GPU models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: "
            f"CUDA numbers GPUs fastest first, not like nvidia-smi ({detail}).",
            fix="export CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA indices match nvidia-smi.",
            subject="CUDA_DEVICE_ORDER",
        )
    ]


def _mismatch_findings(devices: Sequence[VisibleDevice]) -> list[Finding]:
    pairs = [d for d in devices if d.mig_uuid is None and d.cuda_ordinal != d.nvml_index]
    if not pairs:
        return []
    text = ", ".join(f"cuda:{d.cuda_ordinal} is nvidia-smi GPU {d.nvml_index}" for d in pairs)
    return [
        Finding(
            code="VIS-INDEX-MISMATCH",
            severity="info",
            message=f"Inside this process device numbers differ from nvidia-smi's: {text}.",
            fix="Use cuda:<cuda_ordinal> in code and the nvidia-smi index (or UUID) with "
            "nvidia-smi; gpudiag list shows both.",
            subject="CUDA_VISIBLE_DEVICES",
        )
    ]


def _torch_findings(
    spec: str | None,
    devices: Sequence[VisibleDevice],
    snapshot: Snapshot,
    cuinit_error: str | None,
) -> list[Finding]:
    view = torch_view(spec, snapshot)
    findings: list[Finding] = []
    shown = "unset" if spec is None else _q(spec)
    if view.raises is not None:
        return [
            Finding(
                code="VIS-TORCH-RAISES",
                severity="error",
                message=f"With CUDA_VISIBLE_DEVICES={shown}, torch.cuda.device_count() (and "
                f"everything calling it) raises {view.raises} (torch's parser calls int() "
                f"on a sign with no digit after it). CUDA itself exposes {len(devices)} "
                "device(s).",
                fix="Remove the entry with a lone '+' or '-' (ranges like 0-3 are not "
                "supported either: list indices, e.g. 0,1,2,3).",
                predicts=view.raises,
                subject="CUDA_VISIBLE_DEVICES",
            )
        ]
    if view.count is not None and view.count != len(devices):
        findings.append(_torch_count_finding(shown, view.count, devices, snapshot, cuinit_error))
    if view.nvml_indices is not None:
        wrong = [
            (d, view.nvml_indices[d.cuda_ordinal])
            for d in devices
            if d.mig_uuid is None
            and d.cuda_ordinal < len(view.nvml_indices)
            # Past torch's own count torch refuses the device before asking NVML.
            and (view.count is None or d.cuda_ordinal < view.count)
            and view.nvml_indices[d.cuda_ordinal] != d.nvml_index
        ]
        if wrong:
            text = ", ".join(
                f"cuda:{d.cuda_ordinal} → nvidia-smi GPU {n} (it is GPU {d.nvml_index})"
                for d, n in wrong
            )
            findings.append(
                Finding(
                    code="VIS-TORCH-NVML-ORDER",
                    severity="warning",
                    message="torch's NVML-based functions ("
                    + ", ".join(TORCH_NVML_FUNCTIONS)
                    + ") take CUDA_VISIBLE_DEVICES integers as nvidia-smi indices and ignore "
                    f"CUDA_DEVICE_ORDER, so they would read the wrong GPU: {text}.",
                    fix="Set CUDA_DEVICE_ORDER=PCI_BUS_ID, or select GPUs by UUID.",
                    subject="CUDA_VISIBLE_DEVICES",
                )
            )
    return findings


_TORCH_COUNT_FIX = (
    "Write CUDA_VISIBLE_DEVICES so torch and CUDA read it alike: distinct, valid, "
    "comma-separated indices, or UUIDs exactly as `nvidia-smi -L` prints them ('GPU-', "
    "lower-case hex with its dashes, nothing after), no spaces, no MIG mixed with GPUs."
)


def _torch_count_finding(
    shown: str,
    torch_count: int,
    devices: Sequence[VisibleDevice],
    snapshot: Snapshot,
    cuinit_error: str | None,
) -> Finding:
    """torch.cuda.device_count() (from NVML, before CUDA initialises) differs from CUDA.

    torch >= 1.13 counts devices with NVML and its own parser
    (``torch.cuda._device_count_nvml``); CUDA initialises later with the driver's
    reading. Recorded on torch 2.11 / driver 580: torch counts 1 and the first CUDA
    call raises where cuInit fails; torch counts 0 while the driver enumerates
    the GPU for upper-case, dash-free, over-long UUIDs and 2^32.
    """
    cuda_count = len(devices)
    head = (
        f"With CUDA_VISIBLE_DEVICES={shown}, torch.cuda.device_count() returns {torch_count} "
        f"(torch reads the value itself, with NVML, before CUDA initialises)"
    )
    version = snapshot.torch.version if snapshot.torch is not None else None
    if cuda_count == 0:
        return Finding(
            code="VIS-TORCH-COUNT",
            severity="warning",
            message=f"{head}, but CUDA exposes no device: torch.cuda.is_available() is False "
            "and the first CUDA call raises.",
            fix=_TORCH_COUNT_FIX,
            predicts=cuinit_failure_text(cuinit_error),
            subject="CUDA_VISIBLE_DEVICES",
        )
    if torch_count == 0:
        return Finding(
            code="VIS-TORCH-COUNT",
            severity="error",
            message=f"{head}, but CUDA exposes {cuda_count}: torch believes there is no GPU, "
            "so code that counts devices (DataParallel, spawn loops, "
            "torchrun --nproc-per-node=gpu) silently runs on the CPU, and "
            "torch.cuda.get_device_properties(0) fails.",
            fix=_TORCH_COUNT_FIX,
            predicts="AssertionError: Invalid device id",
            subject="CUDA_VISIBLE_DEVICES",
        )
    more = torch_count > cuda_count
    return Finding(
        code="VIS-TORCH-COUNT",
        severity="warning",
        message=f"{head}, but CUDA exposes {cuda_count}; code that sizes its work from it "
        "(DataParallel, torchrun --nproc-per-node=gpu, spawn loops) "
        + (f"fails on cuda:{cuda_count}." if more else "leaves GPUs unused."),
        fix=_TORCH_COUNT_FIX,
        # get_device_properties (DataParallel) asserts; set_device(k) is a CUDA error.
        predicts=PROPERTIES_ASSERT if more else None,
        predicts_also=(
            (
                f"torch.cuda.set_device({cuda_count}): {invalid_ordinal(version)}",
                *cuda_error_also(version, INVALID_ORDINAL_MESSAGE),
            )
            if more
            else ()
        ),
        subject="CUDA_VISIBLE_DEVICES",
    )


# --------------------------------------------------------------------------- slurm


def slurm_findings(
    env: Mapping[str, str], resolution: Resolution, snapshot: Snapshot
) -> list[Finding]:
    """Slurm's GPU allocation versus what ``CUDA_VISIBLE_DEVICES`` exposes.

    ``SLURM_STEP_GPUS`` (else ``SLURM_JOB_GPUS``) lists the allocated GPUs as
    node-wide indices (the gres.conf/NVML numbering) or, with some
    configurations, UUIDs. Under ``ConstrainDevices=yes`` a job sees only its
    GPUs, renumbered from 0, so indices beyond the visible inventory are compared
    by count only.
    """
    name = "SLURM_STEP_GPUS" if env.get("SLURM_STEP_GPUS") else "SLURM_JOB_GPUS"
    value = env.get(name)
    if not value:
        return []
    entries = [e.strip(_C_SPACE) for e in value.split(",") if e.strip(_C_SPACE)]
    exposed = [d for d in resolution.devices]
    exposed_text = (
        ", ".join(
            f"nvidia-smi {d.nvml_index}" + (f" ({short_uuid(d.mig_uuid)})" if d.mig_uuid else "")
            for d in exposed
        )
        or "none"
    )
    by_uuid = {(g.uuid or "").lower(): g.nvml_index for g in snapshot.gpus if g.uuid is not None}
    migs = {m.uuid.lower(): g.nvml_index for g in snapshot.gpus for m in g.mig_devices}
    wanted: set[int] = set()
    constrained = False
    for entry in entries:
        # Strict: '²'.isdigit() is True but int('²') raises, and int() refuses
        # over 4,300 digits; such an entry is then "not a GPU of this machine".
        index = int_or_none(entry, minimum=0) if entry[:1] not in "+-" else None
        if index is not None:
            if index >= len(snapshot.gpus):
                constrained = True
            wanted.add(index)
        elif entry.lower() in by_uuid:
            wanted.add(by_uuid[entry.lower()])
        elif entry.lower() in migs:
            wanted.add(migs[entry.lower()])
        else:
            return [
                Finding(
                    code="VIS-SLURM-MISMATCH",
                    severity="warning",
                    message=f"{name}={_q(value)} names {_q(entry)}, which is not a GPU of "
                    f"this machine; CUDA_VISIBLE_DEVICES exposes {exposed_text}.",
                    fix="Run gpudiag inside the job step (srun), and let Slurm set "
                    "CUDA_VISIBLE_DEVICES instead of overriding it.",
                    subject=name,
                )
            ]
    have = {d.nvml_index for d in exposed}
    if constrained:
        if len(wanted) == len(have):
            return []
        detail = f"Slurm allocated {len(wanted)} GPU(s) but CUDA exposes {len(have)}"
    elif wanted == have:
        return []
    else:
        detail = (
            f"Slurm allocated nvidia-smi GPU(s) {', '.join(map(str, sorted(wanted)))} but "
            f"CUDA_VISIBLE_DEVICES exposes {exposed_text}"
        )
    return [
        Finding(
            code="VIS-SLURM-MISMATCH",
            severity="warning",
            message=f"{name}={_q(value)}: {detail}; the job may use GPUs it was not given, "
            "or leave its own idle.",
            fix="Do not override CUDA_VISIBLE_DEVICES inside a Slurm job; request GPUs "
            "with --gpus/--gres and use cuda:0..N-1.",
            subject=name,
        )
    ]


# --------------------------------------------------------------------------- python API


def cvd_changed_after_init(cvd_at_init: str | None, cvd_now: str | None) -> Finding | None:
    """The finding for ``CUDA_VISIBLE_DEVICES`` changed after CUDA initialised, or None.

    CUDA reads the variable once, in ``cuInit``; later changes to ``os.environ``
    have no effect on this process (torch's ``device_count`` docstring notes the
    same: the count is cached once CUDA is initialised).
    """
    if cvd_at_init == cvd_now:
        return None

    def shown(value: str | None) -> str:
        return "unset" if value is None else _q(value)

    return Finding(
        code="VIS-CVD-CHANGED",
        severity="error",
        message=f"CUDA_VISIBLE_DEVICES changed from {shown(cvd_at_init)} to {shown(cvd_now)} "
        "after CUDA was initialised in this process; CUDA read it once at initialisation, "
        f"so this process still sees the devices of {shown(cvd_at_init)}.",
        fix="Set CUDA_VISIBLE_DEVICES before the first CUDA call (before importing code that "
        "touches torch.cuda), or start a new process with the new value.",
        subject="CUDA_VISIBLE_DEVICES",
    )


# --------------------------------------------------------------------------- driver


def _body(uuid: str) -> str:
    return uuid_key(uuid) or ""


def apply_driver_mapping(
    resolution: Resolution, driver_uuids: Sequence[str], snapshot: Snapshot
) -> Resolution:
    """The mapping the CUDA driver reported, checked against the rules' answer.

    ``driver_uuids`` are the UUIDs a fresh process enumerated with the same
    environment, in CUDA ordinal order (``GPU-…`` or ``MIG-…``). They are joined
    with the inventory on the UUID's hex digits, so a MIG UUID reported with a
    ``GPU-`` prefix (or the reverse) still joins.
    """
    gpu_by_body: dict[str, Gpu] = {}
    mig_by_body: dict[str, tuple[Gpu, MigDevice]] = {}
    for gpu in snapshot.gpus:
        if gpu.uuid is not None:
            gpu_by_body[_body(gpu.uuid)] = gpu
        for mig in gpu.mig_devices:
            mig_by_body[_body(mig.uuid)] = (gpu, mig)
    entry_by_key = {(d.uuid, d.mig_uuid): d.entry for d in resolution.devices}
    devices: list[VisibleDevice] = []
    findings = [
        f
        for f in resolution.findings
        # The driver settles what the rules could only assume.
        if f.code not in ("VIS-ORDER-UNCERTAIN", "VIS-MIG-UNCERTAIN")
    ]
    unmatched: list[str] = []
    key: tuple[str, str | None]
    for uuid in driver_uuids:
        body = _body(uuid)
        if body in mig_by_body:
            gpu, mig = mig_by_body[body]
            key = (_uuid_of(gpu), mig.uuid)
        elif body in gpu_by_body:
            gpu = gpu_by_body[body]
            key = (_uuid_of(gpu), None)
        else:
            unmatched.append(uuid)
            continue
        devices.append(
            VisibleDevice(
                cuda_ordinal=len(devices),
                nvml_index=gpu.nvml_index,
                uuid=key[0],
                mig_uuid=key[1],
                entry=entry_by_key.get(key),
            )
        )
    certain = True
    if unmatched:
        certain = False
        findings.append(
            Finding(
                code="VIS-DRIVER-UNMATCHED",
                severity="warning",
                message=f"The CUDA driver enumerated {', '.join(unmatched)}, which the "
                "inventory (NVML) does not list; those devices are left out of the mapping.",
                fix="Take a fresh snapshot; if it persists, compare `nvidia-smi -L` with the "
                "driver's view (a GPU may be hidden from NVML by a container).",
                subject="CUDA_VISIBLE_DEVICES",
            )
        )
    rules = [(d.uuid, d.mig_uuid) for d in resolution.devices]
    driver = [(d.uuid, d.mig_uuid) for d in devices]
    if rules != driver or unmatched:

        def listing(pairs: Sequence[tuple[str, str | None]]) -> str:
            return "[" + ", ".join(short_uuid(m or u) for u, m in pairs) + "]"

        findings.append(
            Finding(
                code="VIS-DRIVER-DISAGREES",
                severity="warning",
                message=f"For CUDA_VISIBLE_DEVICES="
                f"{'unset' if resolution.spec is None else _q(resolution.spec)} the CUDA "
                f"driver enumerated {listing(driver)} but gpudiag's rules predicted "
                f"{listing(rules)}; the driver's answer is shown.",
                fix="Trust the driver's mapping; please report the value and "
                "`gpudiag snapshot` output so the rules can be corrected.",
                subject="CUDA_VISIBLE_DEVICES",
            )
        )
    cuinit_error = resolution.cuinit_error
    if devices:
        cuinit_error = None
    elif cuinit_error is None:
        cuinit_error = "CUDA_ERROR_NO_DEVICE"
    return replace(
        resolution,
        devices=tuple(devices),
        findings=tuple(findings),
        method="driver",
        certain=certain,
        cuinit_error=cuinit_error,
    )


#: Asks the CUDA driver what a (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER) pair
#: exposes: the UUIDs in ordinal order, or None when the driver can't be asked.
DriverAsker = Callable[[str | None, str | None], Sequence[str] | None]


def resolve_checked(
    spec: str | None, order: str | None, snapshot: Snapshot, driver: DriverAsker | None = None
) -> Resolution:
    """:func:`resolve_visible`, confirmed by the CUDA driver when ``driver`` can ask it.

    The rules' answer stands when there is no driver to ask (a snapshot, no
    GPU); otherwise the driver's enumeration wins and a disagreement becomes a
    ``VIS-DRIVER-DISAGREES`` finding (:func:`apply_driver_mapping`).
    """
    resolution = resolve_visible(spec, order, snapshot)
    if driver is None:
        return resolution
    uuids = driver(spec, order)
    return resolution if uuids is None else apply_driver_mapping(resolution, uuids, snapshot)
