"""What each ``CUDA_VISIBLE_DEVICES`` entry selects: a GPU, a MIG device, or the list's end."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from gpudiag.core.visibility.entries import (
    C_SPACE,
    DIGITS,
    NO_DEV_FILES,
    UUID_HEX_DIGITS,
    EntryKind,
    c_strtoul,
    cuda_index,
    entry_kind,
    uuid_hex,
)
from gpudiag.core.visibility.order import Order, gpu_label, in_mig_mode
from gpudiag.core.visibility.uuid_index import match_hex, pool_index
from gpudiag.model import Gpu, MigDevice, short_uuid


class Target(NamedTuple):
    """What one valid entry selects: a GPU, and for MIG the instance."""

    gpu: Gpu
    mig: MigDevice | None
    key: str  # what duplicates are compared on
    how: str  # explanation text up to the device
    mig_guess: bool = False  # MIG instance picked by CUDA, which one is undocumented
    mig_missing: bool = False  # GPU in MIG mode without instance


class Stop(NamedTuple):
    reason: str  # explanation text
    looks_like_device: bool  # the user meant a device here (not a terminator)


def _mig_target(gpu: Gpu, key: str, how: str) -> Target:
    """A GPU in MIG mode picked by index or GPU UUID: CUDA shows its MIG instance.

    The MIG User Guide ("CUDA Device Enumeration") documents only MIG UUIDs;
    published runs show an index or GPU UUID of a MIG-mode GPU exposing one of
    its MIG devices. Which one, with several, is not documented: we take the
    first NVML lists and flag it (VIS-MIG-UNCERTAIN).
    """
    if not gpu.mig_devices:
        return Target(gpu, None, key, how, mig_missing=True)
    mig = gpu.mig_devices[0]
    how += f" is in MIG mode → its MIG device {short_uuid(mig.uuid)}"
    return Target(gpu, mig, key, how, mig_guess=len(gpu.mig_devices) > 1)


def gpu_target(gpu: Gpu, key: str, how: str) -> Target:
    if in_mig_mode(gpu):
        return _mig_target(gpu, key, how)
    return Target(gpu, None, key, how)


def _read_integer(raw: str, pool: Sequence[Gpu], order: str) -> Target | Stop:
    value = cuda_index(raw)
    if value is None:
        return Stop("no digits (not an index or a UUID)", looks_like_device=False)
    text = raw.strip(C_SPACE)
    read = c_strtoul(raw)
    if read is not None and read != value:
        sign = text[0] if text[0] in "+-" else ""
        digits = text[len(sign) :]
        digits = digits[: len(digits) - len(digits.lstrip(DIGITS))] or digits
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
            return Stop(f"negative (CUDA reads it as {value}: no such device)", False)
        count = len(pool)
        have = "no GPU" if count == 0 else f"{count} GPU(s): 0–{count - 1}"
        return Stop(f"{shown} → no such device (CUDA sees {have})", looks_like_device=True)
    gpu = pool[value]
    how = shown
    if gpu.nvml_index != value:
        how += f" → {order} position {value}"
    how += f" → {gpu_label(gpu)}"
    return gpu_target(gpu, f"int:{value}", how)


def _bad_uuid(raw: str) -> Stop:
    return Stop(
        "not a UUID CUDA can read (after GPU-/MIG- it accepts only hex digits and "
        "dashes up to the 32nd digit, no spaces)",
        looks_like_device=True,
    )


def _read_gpu_uuid(raw: str, pool: Sequence[Gpu]) -> Target | Stop:
    digits = uuid_hex(raw[len("GPU-") :])
    if digits is None:
        return _bad_uuid(raw)
    found = match_hex(digits, pool_index(pool, "gpu"))
    if not found:
        return Stop("UUID prefix matches no GPU", looks_like_device=True)
    if len(found) > 1:
        # Not recorded on hardware (one GPU): we assume an ambiguous prefix is invalid.
        return Stop(f"ambiguous (prefix of {len(found)} GPU UUIDs)", looks_like_device=True)
    gpu = found[0]
    assert isinstance(gpu, Gpu)
    whole = len(digits) == UUID_HEX_DIGITS
    how = f"UUID {'' if whole else 'prefix '}of {gpu_label(gpu)}"
    return gpu_target(gpu, f"gpu:{gpu.uuid}", how)


def _mig_how(gpu: Gpu, mig: MigDevice) -> str:
    ids = ""
    if mig.gpu_instance_id is not None and mig.compute_instance_id is not None:
        ids = f" (GPU instance {mig.gpu_instance_id}, compute instance {mig.compute_instance_id})"
    return f"MIG device {short_uuid(mig.uuid)}{ids} on {gpu_label(gpu)}"


def _read_legacy_mig(raw: str, pool: Sequence[Gpu]) -> Target | Stop | None:
    # Legacy form MIG-GPU-<uuid>/<gpu instance>/<compute instance> (MIG User
    # Guide, CUDA 11.0-11.3 drivers), on a GPU in MIG mode only. On driver 580 it
    # selects nothing on a GPU that is not in MIG mode (recorded table).
    parts = raw[len("MIG-") :].split("/")
    if len(parts) != 3 or not all(p and set(p) <= set(DIGITS) for p in parts[1:]):
        return None
    found = match_hex(uuid_hex(parts[0][len("GPU-") :]) or "-", pool_index(pool, "mig-gpu"))
    if len(found) != 1:
        return None
    gpu = found[0]
    assert isinstance(gpu, Gpu)
    gi, ci = int(parts[1]), int(parts[2])
    for mig in gpu.mig_devices:
        if mig.gpu_instance_id == gi and mig.compute_instance_id == ci:
            return Target(gpu, mig, f"mig:{mig.uuid}", _mig_how(gpu, mig))
    return Stop(
        f"{gpu_label(gpu)} has no MIG device with GPU instance {gi} and compute instance {ci}",
        looks_like_device=True,
    )


def _read_mig(raw: str, pool: Sequence[Gpu]) -> Target | Stop:
    if raw.startswith("MIG-GPU-"):
        legacy = _read_legacy_mig(raw, pool)
        if legacy is not None:
            return legacy
    digits = uuid_hex(raw[len("MIG-") :])
    if digits is None:
        return _bad_uuid(raw)
    found = match_hex(digits, pool_index(pool, "mig"))
    if not found:
        return Stop("UUID prefix matches no MIG device or GPU", looks_like_device=True)
    if len(found) > 1:
        return Stop(f"ambiguous (prefix of {len(found)} UUIDs)", looks_like_device=True)
    pair = found[0]
    assert isinstance(pair, tuple)
    gpu, mig = pair
    if mig is None:
        how = f"MIG- prefix, but the UUID of {gpu_label(gpu)} (not in MIG mode)"
        return Target(gpu, None, f"gpu:{gpu.uuid}", how)
    return Target(gpu, mig, f"mig:{mig.uuid}", _mig_how(gpu, mig))


class Entry:
    """One comma-separated entry and what reading it gave."""

    __slots__ = ("duplicate_of", "position", "raw", "result", "trimmed")

    def __init__(self, position: int, raw: str, trimmed: str) -> None:
        self.position = position
        self.raw = raw
        self.trimmed = trimmed
        self.result: Target | Stop | None = None  # None: after the end of the list
        self.duplicate_of: int | None = None


def split(spec: str) -> list[Entry]:
    return [
        Entry(position=i + 1, raw=raw, trimmed=raw.strip(C_SPACE))
        for i, raw in enumerate(spec.split(","))
    ]


def read_entries(entries: list[Entry], order: Order) -> tuple[int | None, int | None]:
    """Fill each entry's result; return (stop position, duplicate position)."""
    first_kind: EntryKind | None = None
    seen: dict[str, int] = {}
    for entry in entries:
        trimmed = entry.trimmed
        if not trimmed:
            entry.result = Stop("empty entry", looks_like_device=False)
            return entry.position, None
        if trimmed == NO_DEV_FILES and entry.position == 1:
            # HTCondor's deliberate "no GPU"; CUDA reads it as text with no digits.
            entry.result = Stop("no digits (HTCondor's 'no GPU' value)", looks_like_device=False)
            return entry.position, None
        if entry.trimmed.startswith(("GPU-", "MIG-")) and not entry.raw.startswith(
            ("GPU-", "MIG-")
        ):
            # Recorded on driver 580: "  GPU-300c76ef" selects nothing.
            entry.result = Stop("white space before a UUID: CUDA reads no UUID", True)
            return entry.position, None
        kind = entry_kind(entry.raw)
        if first_kind is None:
            first_kind = kind
        elif kind != first_kind:
            other = "integer" if first_kind == "integer" else "UUID"
            entry.result = Stop(
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
        if isinstance(result, Stop):
            return entry.position, None
        if result.key in seen:
            entry.duplicate_of = seen[result.key]
            return None, entry.position
        seen[result.key] = entry.position
    return None, None
