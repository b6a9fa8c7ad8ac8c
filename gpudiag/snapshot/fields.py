"""Validation of snapshot fields: types, required keys, non-negative counts; SnapshotError.

Every reader in :mod:`gpudiag.snapshot.read` goes through these helpers, so a wrong type is
one line naming the field's path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gpudiag.errors import GpudiagInputError


class SnapshotError(GpudiagInputError):
    """A snapshot file that cannot be used; the message is one line for the user."""


_REQUIRED_TOP = ("schema", "driver_version", "cuda_driver_version", "env", "cuda_order", "gpus")
_REQUIRED_GPU = ("nvml_index", "uuid")
#: Counts, sizes and indices: a negative value is a corrupt snapshot.
_NON_NEGATIVE = frozenset(
    {
        "nvml_index",
        "cuda_ordinal",
        "gputil_id",
        "pid",
        "memory_total_mib",
        "memory_used_mib",
        "used_memory_mib",
        "multiprocessor_count",
        "gpu_instance_id",
        "compute_instance_id",
        "ecc_uncorrectable_volatile",
        "ecc_uncorrectable_aggregate",
        "device_count",
        "nvidia_pci_gpus",
        # schema 1.2 (issue 18)
        "pcie_link_gen_current",
        "pcie_link_gen_max",
        "pcie_link_width_current",
        "pcie_link_width_max",
        "link",
        "nvml_index_a",
        "nvml_index_b",
        "dev_shm_total_mib",
        "dev_shm_free_mib",
    }
)


def _type_name(value: object) -> str:
    return type(value).__name__


def _opt(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    # Fast paths for the common exact types (a 100,000-GPU snapshot calls this
    # millions of times); everything else takes the careful path below.
    value_type = type(value)
    if value_type is kind and value_type is not int and value_type is not float:
        return value
    if value_type is int and (kind is int or kind == (int, float)):
        if value < 0 and key in _NON_NEGATIVE:
            raise SnapshotError(f"{where}.{key} must not be negative, got {value}")
        return value
    # bool is an int subclass: reject it where an int is wanted.
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise SnapshotError(f"{where}.{key} must be {_kind_name(kind)}, not {_type_name(value)}")
    if not isinstance(value, kind):
        raise SnapshotError(f"{where}.{key} must be {_kind_name(kind)}, not {_type_name(value)}")
    # Python's json reads NaN and Infinity, which no JSON consumer can read back.
    if isinstance(value, float) and not math.isfinite(value):
        raise SnapshotError(f"{where}.{key} must be a finite number, not {value}")
    if isinstance(value, (int, float)) and key in _NON_NEGATIVE and value < 0:
        raise SnapshotError(f"{where}.{key} must not be negative, got {value}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__


def _req(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj or obj[key] is None:
        raise SnapshotError(f"{where}.{key} is required")
    return _opt(obj, key, kind, where)


def _present(obj: Mapping[str, Any], key: str, where: str) -> bool:
    if key not in obj:
        raise SnapshotError(f"{where}.{key} is required")
    return True


def _list(obj: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise SnapshotError(f"{where}.{key} must be a list, not {_type_name(value)}")
    return value


def _obj(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise SnapshotError(f"{where} must be an object, not {_type_name(value)}")
    return value


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _str_list(d: Mapping[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    value = d.get(key)
    if value is None:
        return None
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise SnapshotError(f"{where}.{key} must be a list of strings or null")
    return tuple(value)
