"""Read and write machine snapshots (schema ``gpudiag-snapshot/1``, minor version 1.1).

The schema is documented in ``docs/snapshot.md``. Reading is strict about the
required fields and their types, lenient about unknown extra fields (the schema
may grow), so that an older gpudiag can read a newer snapshot.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import stat
from collections.abc import Mapping
from itertools import accumulate, repeat
from operator import sub
from pathlib import Path
from typing import Any

from gpudiag.errors import GpudiagInputError
from gpudiag.model import (
    SNAPSHOT_SCHEMA_MAJOR,
    Gpu,
    GpuProcess,
    GputilGpu,
    HostInfo,
    MigDevice,
    Snapshot,
    SourceStatus,
    TorchDevice,
    TorchInfo,
)
from gpudiag.parsing import MAX_INT_DIGITS


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


def _mig_from_json(raw: object, where: str) -> MigDevice:
    d = _obj(raw, where)
    return MigDevice(
        uuid=_req(d, "uuid", str, where),
        gpu_instance_id=_opt(d, "gpu_instance_id", int, where),
        compute_instance_id=_opt(d, "compute_instance_id", int, where),
        memory_total_mib=_opt(d, "memory_total_mib", int, where),
    )


def _process_from_json(raw: object, where: str) -> GpuProcess:
    d = _obj(raw, where)
    return GpuProcess(
        # Required key; null only in a redacted snapshot (docs/snapshot.md).
        pid=_present(d, "pid", where) and _opt(d, "pid", int, where),
        used_memory_mib=_opt(d, "used_memory_mib", int, where),
        name=_opt(d, "name", str, where),
    )


def gpu_from_json(raw: object, where: str = "gpus[]") -> Gpu:
    """Build a :class:`Gpu` from its snapshot JSON object."""
    d = _obj(raw, where)
    for key in _REQUIRED_GPU:
        if key not in d:
            raise SnapshotError(f"{where}.{key} is required")
    _req(d, "nvml_index", int, where)
    lost = bool(_opt(d, "lost", bool, where) or False)
    uuid = _opt(d, "uuid", str, where)
    if uuid is not None and not uuid.strip():
        raise SnapshotError(f"{where}.uuid must not be empty")
    if uuid is None and not lost:
        raise SnapshotError(f"{where}.uuid is required (null only when lost is true)")
    throttle = d.get("throttle_reasons")
    if throttle is not None and not (
        isinstance(throttle, list) and all(isinstance(t, str) for t in throttle)
    ):
        raise SnapshotError(f"{where}.throttle_reasons must be a list of strings")
    errors = _opt(d, "errors", dict, where) or {}
    return Gpu(
        nvml_index=d["nvml_index"],
        uuid=uuid,
        pci_bus_id=_opt(d, "pci_bus_id", str, where),
        name=_opt(d, "name", str, where),
        memory_total_mib=_opt(d, "memory_total_mib", int, where),
        memory_used_mib=_opt(d, "memory_used_mib", int, where),
        utilization_gpu_percent=_opt(d, "utilization_gpu_percent", int, where),
        temperature_c=_opt(d, "temperature_c", int, where),
        power_draw_w=_float(_opt(d, "power_draw_w", (int, float), where)),
        power_limit_w=_float(_opt(d, "power_limit_w", (int, float), where)),
        multiprocessor_count=_opt(d, "multiprocessor_count", int, where),
        compute_capability=_opt(d, "compute_capability", str, where),
        mig_enabled=_opt(d, "mig_enabled", bool, where),
        mig_devices=tuple(
            _mig_from_json(m, f"{where}.mig_devices[{i}]")
            for i, m in enumerate(_list(d, "mig_devices", where))
        ),
        processes=tuple(
            _process_from_json(p, f"{where}.processes[{i}]")
            for i, p in enumerate(_list(d, "processes", where))
        ),
        ecc_uncorrectable_volatile=_opt(d, "ecc_uncorrectable_volatile", int, where),
        ecc_uncorrectable_aggregate=_opt(d, "ecc_uncorrectable_aggregate", int, where),
        retired_pages_pending=_opt(d, "retired_pages_pending", bool, where),
        remapped_rows_failure=_opt(d, "remapped_rows_failure", bool, where),
        compute_mode=_opt(d, "compute_mode", str, where),
        persistence_mode=_opt(d, "persistence_mode", bool, where),
        throttle_reasons=None if throttle is None else tuple(throttle),
        lost=lost,
        errors={str(k): str(v) for k, v in errors.items()},
    )


def gpu_to_json(gpu: Gpu) -> dict[str, Any]:
    """The snapshot JSON object of one GPU."""
    return {
        "nvml_index": gpu.nvml_index,
        "uuid": gpu.uuid,
        "pci_bus_id": gpu.pci_bus_id,
        "name": gpu.name,
        "memory_total_mib": gpu.memory_total_mib,
        "memory_used_mib": gpu.memory_used_mib,
        "utilization_gpu_percent": gpu.utilization_gpu_percent,
        "temperature_c": gpu.temperature_c,
        "power_draw_w": gpu.power_draw_w,
        "power_limit_w": gpu.power_limit_w,
        "multiprocessor_count": gpu.multiprocessor_count,
        "compute_capability": gpu.compute_capability,
        "mig_enabled": gpu.mig_enabled,
        "mig_devices": [
            {
                "uuid": m.uuid,
                "gpu_instance_id": m.gpu_instance_id,
                "compute_instance_id": m.compute_instance_id,
                "memory_total_mib": m.memory_total_mib,
            }
            for m in gpu.mig_devices
        ],
        "processes": [
            {"pid": p.pid, "used_memory_mib": p.used_memory_mib, "name": p.name}
            for p in gpu.processes
        ],
        "ecc_uncorrectable_volatile": gpu.ecc_uncorrectable_volatile,
        "ecc_uncorrectable_aggregate": gpu.ecc_uncorrectable_aggregate,
        "retired_pages_pending": gpu.retired_pages_pending,
        "remapped_rows_failure": gpu.remapped_rows_failure,
        "compute_mode": gpu.compute_mode,
        "persistence_mode": gpu.persistence_mode,
        "throttle_reasons": None if gpu.throttle_reasons is None else list(gpu.throttle_reasons),
        "lost": gpu.lost,
        "errors": dict(gpu.errors),
    }


def torch_from_json(raw: object) -> TorchInfo | None:
    """Validate and build torch's view (the snapshot's ``torch`` object)."""
    if raw is None:
        return None
    where = "torch"
    d = _obj(raw, where)
    devices = []
    for i, item in enumerate(_list(d, "devices", where)):
        w = f"torch.devices[{i}]"
        dev = _obj(item, w)
        devices.append(
            TorchDevice(
                cuda_ordinal=_req(dev, "cuda_ordinal", int, w),
                name=_opt(dev, "name", str, w),
                uuid=_opt(dev, "uuid", str, w),
                memory_total_mib=_opt(dev, "memory_total_mib", int, w),
                multiprocessor_count=_opt(dev, "multiprocessor_count", int, w),
                compute_capability=_opt(dev, "compute_capability", str, w),
            )
        )
    arch = _list(d, "arch_list", where)
    if not all(isinstance(a, str) for a in arch):
        raise SnapshotError("torch.arch_list must be a list of strings")
    return TorchInfo(
        version=_opt(d, "version", str, where),
        cuda_version=_opt(d, "cuda_version", str, where),
        cpu_only=_opt(d, "cpu_only", bool, where),
        cuda_available=_opt(d, "cuda_available", bool, where),
        device_count=_opt(d, "device_count", int, where),
        arch_list=tuple(arch),
        devices=tuple(devices),
        error=_opt(d, "error", str, where),
        distributed_available=_opt(d, "distributed_available", bool, where),
        nccl_available=_opt(d, "nccl_available", bool, where),
    )


def torch_to_json(info: TorchInfo | None) -> dict[str, Any] | None:
    """The snapshot JSON object of torch's view (None when not collected)."""
    if info is None:
        return None
    return {
        "version": info.version,
        "cuda_version": info.cuda_version,
        "cpu_only": info.cpu_only,
        "cuda_available": info.cuda_available,
        "device_count": info.device_count,
        "arch_list": list(info.arch_list),
        "devices": [
            {
                "cuda_ordinal": d.cuda_ordinal,
                "name": d.name,
                "uuid": d.uuid,
                "memory_total_mib": d.memory_total_mib,
                "multiprocessor_count": d.multiprocessor_count,
                "compute_capability": d.compute_capability,
            }
            for d in info.devices
        ],
        "error": info.error,
        "distributed_available": info.distributed_available,
        "nccl_available": info.nccl_available,
    }


def gputil_from_json(raw: object) -> tuple[GputilGpu, ...] | None:
    """Validate and build GPUtil's view (the snapshot's ``gputil`` list)."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise SnapshotError(f"gputil must be a list or null, not {_type_name(raw)}")
    out = []
    for i, item in enumerate(raw):
        w = f"gputil[{i}]"
        d = _obj(item, w)
        out.append(
            GputilGpu(
                gputil_id=_req(d, "gputil_id", int, w),
                uuid=_opt(d, "uuid", str, w),
                name=_opt(d, "name", str, w),
                memory_total_mib=_opt(d, "memory_total_mib", int, w),
                memory_used_mib=_opt(d, "memory_used_mib", int, w),
                load_percent=_float(_opt(d, "load_percent", (int, float), w)),
                temperature_c=_float(_opt(d, "temperature_c", (int, float), w)),
            )
        )
    return tuple(out)


def gputil_to_json(gpus: tuple[GputilGpu, ...] | None) -> list[dict[str, Any]] | None:
    """The snapshot JSON list of GPUtil's view (None when not collected)."""
    if gpus is None:
        return None
    return [
        {
            "gputil_id": g.gputil_id,
            "uuid": g.uuid,
            "name": g.name,
            "memory_total_mib": g.memory_total_mib,
            "memory_used_mib": g.memory_used_mib,
            "load_percent": g.load_percent,
            "temperature_c": g.temperature_c,
        }
        for g in gpus
    ]


def _str_list(d: Mapping[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    value = d.get(key)
    if value is None:
        return None
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise SnapshotError(f"{where}.{key} must be a list of strings or null")
    return tuple(value)


def host_from_json(raw: object) -> HostInfo | None:
    """Validate and build the host facts (schema 1.1's ``host``; absent before)."""
    if raw is None:
        return None
    where = "host"
    d = _obj(raw, where)
    env = _opt(d, "nvidia_env", dict, where) or {}
    for key, value in env.items():
        if not isinstance(value, str):
            raise SnapshotError(f"host.nvidia_env.{key} must be a string")
    return HostInfo(
        platform=_opt(d, "platform", str, where),
        machine=_opt(d, "machine", str, where),
        dev_nvidia=_str_list(d, "dev_nvidia", where),
        dev_dxg=_opt(d, "dev_dxg", bool, where),
        proc_driver_nvidia=_opt(d, "proc_driver_nvidia", bool, where),
        nvidia_pci_gpus=_opt(d, "nvidia_pci_gpus", int, where),
        container_marks=_str_list(d, "container_marks", where),
        nvidia_env={str(k): v for k, v in env.items()},
    )


def host_to_json(host: HostInfo | None) -> dict[str, Any] | None:
    """The snapshot JSON object of the host facts (None when not collected)."""
    if host is None:
        return None
    return {
        "platform": host.platform,
        "machine": host.machine,
        "dev_nvidia": None if host.dev_nvidia is None else list(host.dev_nvidia),
        "dev_dxg": host.dev_dxg,
        "proc_driver_nvidia": host.proc_driver_nvidia,
        "nvidia_pci_gpus": host.nvidia_pci_gpus,
        "container_marks": None if host.container_marks is None else list(host.container_marks),
        "nvidia_env": dict(host.nvidia_env),
    }


def schema_is_readable(schema: object) -> bool:
    """``gpudiag-snapshot/1`` or ``gpudiag-snapshot/1.N``: same major, any minor.

    Minor versions only add optional fields, which older readers ignore.
    """
    if not isinstance(schema, str):
        return False
    if schema == SNAPSHOT_SCHEMA_MAJOR:
        return True
    head, dot, minor = schema.rpartition(".")
    return head == SNAPSHOT_SCHEMA_MAJOR and dot == "." and minor.isascii() and minor.isdigit()


def _sources_from_json(raw: object) -> dict[str, SourceStatus]:
    if raw is None:
        return {}
    d = _obj(raw, "sources")
    out = {}
    for name, item in d.items():
        w = f"sources.{name}"
        s = _obj(item, w)
        status = _req(s, "status", str, w)
        if status not in ("ok", "unavailable", "error", "skipped"):
            raise SnapshotError(
                f"{w}.status must be ok, unavailable, error or skipped, not {status!r}"
            )
        out[str(name)] = SourceStatus(status=status, reason=_opt(s, "reason", str, w))
    return out


def snapshot_from_json(data: object) -> Snapshot:
    """Validate a parsed JSON document and build a :class:`Snapshot`.

    Raises:
        SnapshotError: the document does not follow ``gpudiag-snapshot/1``.
    """
    d = _obj(data, "snapshot")
    schema = d.get("schema")
    if not schema_is_readable(schema):
        raise SnapshotError(
            f"schema is {schema!r}, expected {SNAPSHOT_SCHEMA_MAJOR!r} or "
            f"'{SNAPSHOT_SCHEMA_MAJOR}.N'"
        )
    for key in _REQUIRED_TOP:
        if key not in d:
            raise SnapshotError(f"required field {key!r} is missing")
    env_raw = _obj(d["env"], "env")
    env: dict[str, str | None] = {"CUDA_VISIBLE_DEVICES": None, "CUDA_DEVICE_ORDER": None}
    for key, value in env_raw.items():
        if value is not None and not isinstance(value, str):
            raise SnapshotError(f"env.{key} must be a string or null, not {_type_name(value)}")
        env[str(key)] = value
    cuda_order = d["cuda_order"]
    if cuda_order is not None and not (
        isinstance(cuda_order, list) and all(isinstance(u, str) for u in cuda_order)
    ):
        raise SnapshotError("cuda_order must be a list of UUID strings or null")
    if not isinstance(d["gpus"], list):
        raise SnapshotError(f"gpus must be a list, not {_type_name(d['gpus'])}")
    gpus = tuple(gpu_from_json(g, f"gpus[{i}]") for i, g in enumerate(d["gpus"]))
    indices = [g.nvml_index for g in gpus]
    if len(set(indices)) != len(indices):
        raise SnapshotError("gpus[].nvml_index values must be unique")
    uuids = [g.uuid.lower() for g in gpus if g.uuid is not None]
    if len(set(uuids)) != len(uuids):
        raise SnapshotError("gpus[].uuid values must be unique")
    if cuda_order is not None and len({u.lower() for u in cuda_order}) != len(cuda_order):
        raise SnapshotError("cuda_order must not list a UUID twice")
    return Snapshot(
        schema=str(schema),
        driver_version=_opt(d, "driver_version", str, "snapshot"),
        cuda_driver_version=_opt(d, "cuda_driver_version", str, "snapshot"),
        env=env,
        cuda_order=None if cuda_order is None else tuple(cuda_order),
        gpus=tuple(sorted(gpus, key=lambda g: g.nvml_index)),
        sources=_sources_from_json(d.get("sources")),
        torch=torch_from_json(d.get("torch")),
        gputil=gputil_from_json(d.get("gputil")),
        hostname=_opt(d, "hostname", str, "snapshot"),
        created_utc=_opt(d, "created_utc", str, "snapshot"),
        host=host_from_json(d.get("host")),
    )


def snapshot_to_json(snap: Snapshot) -> dict[str, Any]:
    """The JSON document of a snapshot, ready for :func:`json.dumps`."""
    return {
        "schema": snap.schema,
        "created_utc": snap.created_utc,
        "hostname": snap.hostname,
        "driver_version": snap.driver_version,
        "cuda_driver_version": snap.cuda_driver_version,
        "env": dict(snap.env),
        "cuda_order": None if snap.cuda_order is None else list(snap.cuda_order),
        "gpus": [gpu_to_json(g) for g in snap.gpus],
        "sources": {
            name: {"status": s.status, "reason": s.reason} for name, s in snap.sources.items()
        },
        "torch": torch_to_json(snap.torch),
        "gputil": gputil_to_json(snap.gputil),
        "host": host_to_json(snap.host),
    }


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


def redact_snapshot(snap: Snapshot) -> Snapshot:
    """The snapshot without what identifies a machine or its users, for a public
    bug report: the host name, and every process's PID and name (null). Process
    memory stays: health findings need it."""
    gpus = tuple(
        dataclasses.replace(
            gpu,
            processes=tuple(dataclasses.replace(p, pid=None, name=None) for p in gpu.processes),
        )
        for gpu in snap.gpus
    )
    return dataclasses.replace(snap, hostname=None, gpus=gpus)


def dump_snapshot(snap: Snapshot) -> str:
    """The snapshot as pretty-printed JSON text."""
    return json.dumps(snapshot_to_json(snap), indent=2) + "\n"
