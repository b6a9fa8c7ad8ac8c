"""How torch reads ``CUDA_VISIBLE_DEVICES`` itself, per torch version (pure, no I/O).

torch parses the variable with its own code before CUDA is initialised
(``torch/cuda/__init__.py``: ``_parse_visible_devices``, ``_device_count_nvml``,
``_transform_uuid_to_ordinals``, ``_get_nvml_device_index``).
``tests/test_visibility_torch_oracle.py`` checks :func:`torch_view` against the real
torch functions.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from gpudiag.findings.texts import torch_version_tuple
from gpudiag.model import Snapshot

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
