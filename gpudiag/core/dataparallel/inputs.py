"""The user's DataParallel inputs: the module device's spelling, and the ids they likely meant.

Users often pass nvidia-smi numbers or CUDA_VISIBLE_DEVICES entries where torch wants cuda
ordinals; the fixes name the ordinals those became.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudiag.core.describe import join_and as _join
from gpudiag.errors import GpudiagInputError
from gpudiag.model import Resolution, VisibleDevice
from gpudiag.parsing import is_int_text, show_value


def parse_module_device(text: str | None) -> tuple[str, int | None] | None:
    """``cpu``, ``cuda``, ``cuda:K`` or ``K`` → (type, ordinal or None).

    Raises:
        GpudiagInputError: any other spelling.
    """
    if text is None:
        return None
    value = text.strip().lower()
    if value == "cpu":
        return ("cpu", None)
    if value == "cuda":
        return ("cuda", None)
    number = value[5:] if value.startswith("cuda:") else value
    # torch.device accepts plain ASCII ordinals only ("cuda:01", "cuda:²" raise).
    if is_int_text(number) and number[0] not in "+-" and (number == "0" or number[0] != "0"):
        return ("cuda", int(number))
    raise GpudiagInputError(
        f"module_device {show_value(text)} is not cpu, cuda, cuda:K or K (K a non-negative integer)"
    )


def _suggest_ids(ids: Sequence[int], resolution: Resolution) -> list[int] | None:
    # Users usually pass nvidia-smi numbers or the CUDA_VISIBLE_DEVICES entries
    # themselves; map each to the ordinal it became, entry text first.
    # Both lookups built once, the first device winning as a scan would: linear in
    # ids (issue 21), not ids x devices.
    by_entry: dict[str, VisibleDevice] = {}
    by_index: dict[int, VisibleDevice] = {}
    for d in resolution.devices:
        by_entry.setdefault((d.entry or "").strip(), d)
        if d.mig_uuid is None:
            by_index.setdefault(d.nvml_index, d)
    mapped: list[int] = []
    for wanted in ids:
        hit = by_entry.get(str(wanted)) or by_index.get(wanted)
        if hit is None:
            return None
        mapped.append(hit.cuda_ordinal)
    if len(set(mapped)) != len(mapped):
        return None
    return mapped


def _cvd_for(devices: Sequence[VisibleDevice]) -> str:
    # UUIDs would be unambiguous; the entries as written keep the fix readable.
    seen = dict.fromkeys(d.mig_uuid or d.entry or d.uuid for d in devices)
    return ",".join(seen)


def _physical_hint(ordinals: Sequence[int], resolution: Resolution) -> str:
    mapped = _suggest_ids(ordinals, resolution)
    if mapped is None:
        return "."
    return (
        f"; physical GPU {_join([str(o) for o in ordinals])} is cuda:"
        f"{_join([str(m) for m in mapped])} here."
    )
