"""Model → JSON: the snapshot document as gpudiag writes it (``gpudiag snapshot``)."""

from __future__ import annotations

import json
from typing import Any

from gpudiag.model import (
    Gpu,
    GpuPair,
    GputilGpu,
    HostInfo,
    NvLink,
    PciGpu,
    Snapshot,
    TorchInfo,
)
from gpudiag.snapshot.node_json import node_to_json


def _nvlinks_to_json(links: tuple[NvLink, ...] | None) -> list[dict[str, Any]] | None:
    if links is None:
        return None
    return [
        {
            "link": n.link,
            "active": n.active,
            "remote_pci_bus_id": n.remote_pci_bus_id,
            "remote_device_type": n.remote_device_type,
        }
        for n in links
    ]


def pair_to_json(pair: GpuPair) -> dict[str, Any]:
    """The snapshot JSON object of one GPU pair (``gpu_pairs[]``)."""
    return {
        "nvml_index_a": pair.nvml_index_a,
        "nvml_index_b": pair.nvml_index_b,
        "topology": pair.topology,
        "p2p_read": pair.p2p_read,
        "p2p_write": pair.p2p_write,
        "p2p_nvlink": pair.p2p_nvlink,
        "errors": dict(pair.errors),
    }


def _pci_gpus_to_json(gpus: tuple[PciGpu, ...] | None) -> list[dict[str, Any]] | None:
    if gpus is None:
        return None
    return [
        {
            "pci_bus_id": g.pci_bus_id,
            "driver": g.driver,
            "numa_node": g.numa_node,
            "iommu_group_type": g.iommu_group_type,
            "bridges": [{"bdf": b.bdf, "acs_ctl": b.acs_ctl} for b in g.bridges],
        }
        for g in gpus
    ]


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
            {
                "pid": p.pid,
                "used_memory_mib": p.used_memory_mib,
                "name": p.name,
                "in_pid_namespace": p.in_pid_namespace,
                "this_job": p.this_job,
                "this_job_by": p.this_job_by,
                "slurm_job_id": p.slurm_job_id,
                "proc_state": p.proc_state,
            }
            for p in gpu.processes
        ],
        "ecc_uncorrectable_volatile": gpu.ecc_uncorrectable_volatile,
        "ecc_uncorrectable_aggregate": gpu.ecc_uncorrectable_aggregate,
        "retired_pages_pending": gpu.retired_pages_pending,
        "remapped_rows_failure": gpu.remapped_rows_failure,
        "compute_mode": gpu.compute_mode,
        "persistence_mode": gpu.persistence_mode,
        "throttle_reasons": None if gpu.throttle_reasons is None else list(gpu.throttle_reasons),
        "pcie_link_gen_current": gpu.pcie_link_gen_current,
        "pcie_link_gen_max": gpu.pcie_link_gen_max,
        "pcie_link_width_current": gpu.pcie_link_width_current,
        "pcie_link_width_max": gpu.pcie_link_width_max,
        "numa_affinity": None if gpu.numa_affinity is None else list(gpu.numa_affinity),
        "cpu_affinity": gpu.cpu_affinity,
        "nvlinks": _nvlinks_to_json(gpu.nvlinks),
        "fabric_state": gpu.fabric_state,
        "fabric_status": gpu.fabric_status,
        "lost": gpu.lost,
        "errors": dict(gpu.errors),
    }


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
        "kernel_iommu_args": _list_or_none(host.kernel_iommu_args),
        "iommu_devices": _list_or_none(host.iommu_devices),
        "dev_shm_total_mib": host.dev_shm_total_mib,
        "dev_shm_free_mib": host.dev_shm_free_mib,
        "nvidia_uvm_loaded": host.nvidia_uvm_loaded,
        "pci_gpus": _pci_gpus_to_json(host.pci_gpus),
        "host_pid_namespace": host.host_pid_namespace,
    }


def _list_or_none(values: tuple[str, ...] | None) -> list[str] | None:
    return None if values is None else list(values)


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
        "gpu_pairs": None if snap.gpu_pairs is None else [pair_to_json(p) for p in snap.gpu_pairs],
        "node": node_to_json(snap.node),
    }


def dump_snapshot(snap: Snapshot) -> str:
    """The snapshot as pretty-printed JSON text."""
    return json.dumps(snapshot_to_json(snap), indent=2) + "\n"
