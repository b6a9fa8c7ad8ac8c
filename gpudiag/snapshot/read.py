"""JSON → model: validate a parsed snapshot document and build :class:`~gpudiag.model.Snapshot`.

Strict about the required fields and their types, lenient about unknown extra fields (the
schema may grow), so that an older gpudiag can read a newer snapshot.
"""

from __future__ import annotations

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
from gpudiag.snapshot.fields import (
    _REQUIRED_GPU,
    _REQUIRED_TOP,
    SnapshotError,
    _float,
    _list,
    _obj,
    _opt,
    _present,
    _req,
    _str_list,
    _type_name,
)
from gpudiag.snapshot.node_json import node_from_json
from gpudiag.snapshot.read_links import (
    int_list,
    nvlinks_from_json,
    pairs_from_json,
    pci_gpus_from_json,
)


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
        in_pid_namespace=_opt(d, "in_pid_namespace", bool, where),
        this_job=_opt(d, "this_job", bool, where),
        this_job_by=_opt(d, "this_job_by", str, where),
        slurm_job_id=_opt(d, "slurm_job_id", str, where),
        proc_state=_opt(d, "proc_state", str, where),
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
        pcie_link_gen_current=_opt(d, "pcie_link_gen_current", int, where),
        pcie_link_gen_max=_opt(d, "pcie_link_gen_max", int, where),
        pcie_link_width_current=_opt(d, "pcie_link_width_current", int, where),
        pcie_link_width_max=_opt(d, "pcie_link_width_max", int, where),
        numa_affinity=int_list(d, "numa_affinity", where),
        cpu_affinity=_opt(d, "cpu_affinity", str, where),
        nvlinks=nvlinks_from_json(d, where),
        fabric_state=_opt(d, "fabric_state", str, where),
        fabric_status=_opt(d, "fabric_status", str, where),
        lost=lost,
        errors={str(k): str(v) for k, v in errors.items()},
    )


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


def host_from_json(raw: object) -> HostInfo | None:
    """Validate and build the host facts (schema 1.1's ``host``, grown in 1.2; absent before)."""
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
        kernel_iommu_args=_str_list(d, "kernel_iommu_args", where),
        iommu_devices=_str_list(d, "iommu_devices", where),
        dev_shm_total_mib=_opt(d, "dev_shm_total_mib", int, where),
        dev_shm_free_mib=_opt(d, "dev_shm_free_mib", int, where),
        nvidia_uvm_loaded=_opt(d, "nvidia_uvm_loaded", bool, where),
        pci_gpus=pci_gpus_from_json(d, where),
        host_pid_namespace=_opt(d, "host_pid_namespace", bool, where),
    )


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
        gpu_pairs=pairs_from_json(d.get("gpu_pairs"), set(indices)),
        node=node_from_json(d.get("node")),
    )
