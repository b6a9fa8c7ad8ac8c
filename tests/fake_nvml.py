"""The one fake NVML: the pynvml API, driven by snapshot data.

It sits exactly at the pynvml boundary (the ``nvml=`` argument of
:func:`gpudiag.backends.nvml.collect_nvml`) and raises the *real*
``pynvml.NVMLError_*`` classes, so the backend's except clauses are exercised as
they are against the C library. Constants and error classes come from the real
``pynvml`` module. Faults are injected by name, not by mocking:

* ``init_error``: an NVML error code raised by ``nvmlInit`` (e.g.
  ``pynvml.NVML_ERROR_LIBRARY_NOT_FOUND``);
* ``lost``: nvml indices whose GPU falls off the bus; ``lost_after`` says after
  how many successful per-GPU calls it happens (0: the handle itself fails);
* ``unsupported``: names of per-GPU functions that raise ``NotSupported``;
* ``missing``: names of functions the "driver" lacks (``NVMLError_FunctionNotFound``,
  e.g. ``nvmlDeviceGetGpuFabricInfoV`` before r550).

Schema 1.2's links come from the snapshot too: each GPU's PCIe, affinity, NVLink and
fabric fields, and ``gpu_pairs`` for ``nvmlDeviceGetTopologyCommonAncestor`` and
``nvmlDeviceGetP2PStatus``. A field the snapshot lacks answers ``NotSupported``, as
the real library does for a fact it does not have; ``nvlinks: null`` answers
``Unknown`` (not collected), ``nvlinks: []`` ``NotSupported`` for every link.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pynvml

_MIB = 1024 * 1024


@dataclass
class _Handle:
    nvml_index: int
    mig: Mapping[str, Any] | None = None


class FakeNvml:
    """A stand-in for the ``pynvml`` module, built from a snapshot's JSON."""

    def __init__(
        self,
        snapshot_json: Mapping[str, Any],
        *,
        init_error: int | None = None,
        lost: Iterable[int] = (),
        lost_after: int = 0,
        unsupported: Iterable[str] = (),
        missing: Iterable[str] = (),
    ) -> None:
        self._snap = copy.deepcopy(dict(snapshot_json))
        self._gpus = sorted(
            (g for g in self._snap["gpus"] if not g.get("lost")), key=lambda g: g["nvml_index"]
        )
        # A GPU recorded as lost in the snapshot is lost here too.
        self._lost = set(lost) | {g["nvml_index"] for g in self._snap["gpus"] if g.get("lost")}
        self._lost_after = lost_after
        self._calls: dict[int, int] = {}
        self._unsupported = set(unsupported)
        self._missing = set(missing)
        self.p2p_indices: list[object] = []
        self._init_error = init_error
        self.initialised = False
        self.shutdown_calls = 0

    # -- module surface: constants and error classes come from the real pynvml --
    def __getattr__(self, name: str) -> Any:
        if name.startswith(("NVML", "nvmlClocks", "c_nvml")):
            return getattr(pynvml, name)
        raise AttributeError(name)

    def _raise(self, code: int) -> None:
        raise pynvml.NVMLError(code)

    def _require_init(self) -> None:
        if not self.initialised:
            self._raise(pynvml.NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: _Handle, func: str) -> Mapping[str, Any]:
        self._require_init()
        i = handle.nvml_index
        if i in self._lost:
            done = self._calls.get(i, 0)
            if done >= self._lost_after:
                self._raise(pynvml.NVML_ERROR_GPU_IS_LOST)
            self._calls[i] = done + 1
        if func in self._missing:
            self._raise(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        if func in self._unsupported:
            self._raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return next(g for g in self._snap["gpus"] if g["nvml_index"] == i)

    def _field(self, handle: _Handle, func: str, key: str) -> Any:
        gpu = self._gpu(handle, func)
        value = gpu.get(key)
        if value is None:
            # The snapshot could not collect it on the real machine either.
            self._raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return value

    # -- library lifecycle --
    def nvmlInit(self) -> None:
        if self._init_error is not None:
            self._raise(self._init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self._require_init()
        self.initialised = False
        self.shutdown_calls += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._require_init()
        return str(self._snap["driver_version"])

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._require_init()
        major, minor = str(self._snap["cuda_driver_version"]).split(".")
        return int(major) * 1000 + int(minor) * 10

    def nvmlDeviceGetCount(self) -> int:
        self._require_init()
        return len(self._snap["gpus"])

    def nvmlDeviceGetHandleByIndex(self, nvml_index: int) -> _Handle:
        self._require_init()
        if not 0 <= nvml_index < len(self._snap["gpus"]):
            self._raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        handle = _Handle(nvml_index)
        if nvml_index in self._lost and self._lost_after == 0:
            self._raise(pynvml.NVML_ERROR_GPU_IS_LOST)
        return handle

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        self._require_init()
        for g in self._snap["gpus"]:
            for p in g.get("processes", []):
                if p["pid"] == pid and p.get("name"):
                    return str(p["name"])
        self._raise(pynvml.NVML_ERROR_NOT_FOUND)
        raise AssertionError("unreachable")

    # -- per-GPU queries (MIG handles answer the few a MIG device supports) --
    def nvmlDeviceGetUUID(self, h: _Handle) -> str:
        if h.mig is not None:
            return str(h.mig["uuid"])
        return str(self._field(h, "nvmlDeviceGetUUID", "uuid"))

    def nvmlDeviceGetPciInfo(self, h: _Handle) -> Any:
        return SimpleNamespace(busId=self._field(h, "nvmlDeviceGetPciInfo", "pci_bus_id").encode())

    def nvmlDeviceGetName(self, h: _Handle) -> str:
        return str(self._field(h, "nvmlDeviceGetName", "name"))

    def nvmlDeviceGetMemoryInfo(self, h: _Handle) -> Any:
        if h.mig is not None:
            total = h.mig["memory_total_mib"]
            return SimpleNamespace(total=total * _MIB, used=0, free=total * _MIB)
        gpu = self._gpu(h, "nvmlDeviceGetMemoryInfo")
        if gpu.get("memory_total_mib") is None:
            self._raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        total = gpu["memory_total_mib"] * _MIB
        used = (gpu.get("memory_used_mib") or 0) * _MIB
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, h: _Handle) -> Any:
        return SimpleNamespace(
            gpu=self._field(h, "nvmlDeviceGetUtilizationRates", "utilization_gpu_percent"),
            memory=0,
        )

    def nvmlDeviceGetTemperature(self, h: _Handle, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return int(self._field(h, "nvmlDeviceGetTemperature", "temperature_c"))

    def nvmlDeviceGetPowerUsage(self, h: _Handle) -> int:
        return round(self._field(h, "nvmlDeviceGetPowerUsage", "power_draw_w") * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, h: _Handle) -> int:
        return round(self._field(h, "nvmlDeviceGetEnforcedPowerLimit", "power_limit_w") * 1000)

    def nvmlDeviceGetCudaComputeCapability(self, h: _Handle) -> tuple[int, int]:
        cc = self._field(h, "nvmlDeviceGetCudaComputeCapability", "compute_capability")
        major, minor = str(cc).split(".")
        return int(major), int(minor)

    def nvmlDeviceGetAttributes(self, h: _Handle) -> Any:
        return SimpleNamespace(
            multiprocessorCount=self._field(h, "nvmlDeviceGetAttributes", "multiprocessor_count")
        )

    def nvmlDeviceGetMigMode(self, h: _Handle) -> tuple[int, int]:
        enabled = self._field(h, "nvmlDeviceGetMigMode", "mig_enabled")
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if enabled else pynvml.NVML_DEVICE_MIG_DISABLE
        return mode, mode

    def nvmlDeviceGetMaxMigDeviceCount(self, h: _Handle) -> int:
        self._gpu(h, "nvmlDeviceGetMaxMigDeviceCount")
        return 7  # A100: up to seven instances

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: _Handle, slot: int) -> _Handle:
        gpu = self._gpu(h, "nvmlDeviceGetMigDeviceHandleByIndex")
        migs = gpu.get("mig_devices", [])
        if slot >= len(migs):
            self._raise(pynvml.NVML_ERROR_NOT_FOUND)
        return _Handle(h.nvml_index, mig=migs[slot])

    def nvmlDeviceGetGpuInstanceId(self, h: _Handle) -> int:
        assert h.mig is not None
        return int(h.mig["gpu_instance_id"])

    def nvmlDeviceGetComputeInstanceId(self, h: _Handle) -> int:
        assert h.mig is not None
        return int(h.mig["compute_instance_id"])

    def nvmlDeviceGetComputeRunningProcesses(self, h: _Handle) -> list[Any]:
        gpu = self._gpu(h, "nvmlDeviceGetComputeRunningProcesses")
        return [
            SimpleNamespace(
                pid=p["pid"],
                usedGpuMemory=None
                if p.get("used_memory_mib") is None
                else p["used_memory_mib"] * _MIB,
            )
            for p in gpu.get("processes", [])
        ]

    def nvmlDeviceGetTotalEccErrors(self, h: _Handle, error_type: int, counter: int) -> int:
        assert error_type == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        key = (
            "ecc_uncorrectable_volatile"
            if counter == pynvml.NVML_VOLATILE_ECC
            else "ecc_uncorrectable_aggregate"
        )
        return int(self._field(h, "nvmlDeviceGetTotalEccErrors", key))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: _Handle) -> int:
        pending = self._field(h, "nvmlDeviceGetRetiredPagesPendingStatus", "retired_pages_pending")
        return pynvml.NVML_FEATURE_ENABLED if pending else pynvml.NVML_FEATURE_DISABLED

    def nvmlDeviceGetRemappedRows(self, h: _Handle) -> tuple[int, int, int, int]:
        failed = self._field(h, "nvmlDeviceGetRemappedRows", "remapped_rows_failure")
        return 0, 0, 0, int(bool(failed))

    def nvmlDeviceGetComputeMode(self, h: _Handle) -> int:
        mode = self._field(h, "nvmlDeviceGetComputeMode", "compute_mode")
        codes = {"Default": 0, "Exclusive_Thread": 1, "Prohibited": 2, "Exclusive_Process": 3}
        return codes[mode]

    def nvmlDeviceGetPersistenceMode(self, h: _Handle) -> int:
        on = self._field(h, "nvmlDeviceGetPersistenceMode", "persistence_mode")
        return pynvml.NVML_FEATURE_ENABLED if on else pynvml.NVML_FEATURE_DISABLED

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: _Handle) -> int:
        from gpudiag.backends.nvml import CLOCK_EVENT_REASONS

        names = self._field(h, "nvmlDeviceGetCurrentClocksEventReasons", "throttle_reasons")
        bits = {n: b for b, n in CLOCK_EVENT_REASONS}
        mask = 0
        for name in names:
            mask |= bits[name]
        return mask

    # -- schema 1.2: the links around and between GPUs --
    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: _Handle) -> int:
        return int(self._field(h, "nvmlDeviceGetCurrPcieLinkGeneration", "pcie_link_gen_current"))

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: _Handle) -> int:
        return int(self._field(h, "nvmlDeviceGetMaxPcieLinkGeneration", "pcie_link_gen_max"))

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: _Handle) -> int:
        return int(self._field(h, "nvmlDeviceGetCurrPcieLinkWidth", "pcie_link_width_current"))

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: _Handle) -> int:
        return int(self._field(h, "nvmlDeviceGetMaxPcieLinkWidth", "pcie_link_width_max"))

    @staticmethod
    def _words(bits: Iterable[int], size: int) -> list[int]:
        words = [0] * size
        for bit in bits:
            words[bit // 64] |= 1 << (bit % 64)
        return words

    def nvmlDeviceGetMemoryAffinity(self, h: _Handle, size: int, scope: int) -> list[int]:
        assert scope == pynvml.NVML_AFFINITY_SCOPE_NODE and isinstance(size, int)
        nodes = self._field(h, "nvmlDeviceGetMemoryAffinity", "numa_affinity")
        return self._words(nodes, size)

    def nvmlDeviceGetCpuAffinityWithinScope(self, h: _Handle, size: int, scope: int) -> list[int]:
        assert scope == pynvml.NVML_AFFINITY_SCOPE_NODE and isinstance(size, int)
        text = str(self._field(h, "nvmlDeviceGetCpuAffinityWithinScope", "cpu_affinity"))
        cpus: list[int] = []
        for part in text.split(","):
            first, _, last = part.partition("-")
            cpus += range(int(first), int(last or first) + 1)
        return self._words(cpus, size)

    def _link(self, h: _Handle, func: str, link: int) -> Mapping[str, Any]:
        gpu = self._gpu(h, func)
        links = gpu.get("nvlinks")
        if links is None:  # not collected on the real machine
            self._raise(pynvml.NVML_ERROR_UNKNOWN)
        assert isinstance(link, int) and 0 <= link < pynvml.NVML_NVLINK_MAX_LINKS
        for item in links:
            if item["link"] == link:
                return item  # type: ignore[no-any-return]
        if links and link > max(item["link"] for item in links):
            self._raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        self._raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        raise AssertionError("unreachable")

    def nvmlDeviceGetNvLinkState(self, h: _Handle, link: int) -> int:
        item = self._link(h, "nvmlDeviceGetNvLinkState", link)
        return pynvml.NVML_FEATURE_ENABLED if item["active"] else pynvml.NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: _Handle, link: int) -> Any:
        remote = self._link(h, "nvmlDeviceGetNvLinkRemotePciInfo", link)["remote_pci_bus_id"]
        if remote is None:
            self._raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(busId=str(remote).encode())

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: _Handle, link: int) -> int:
        kind = self._link(h, "nvmlDeviceGetNvLinkRemoteDeviceType", link)["remote_device_type"]
        codes = {
            "GPU": pynvml.NVML_NVLINK_DEVICE_TYPE_GPU,
            "IBMNPU": pynvml.NVML_NVLINK_DEVICE_TYPE_IBMNPU,
            "NVSwitch": pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH,
            "Unknown": pynvml.NVML_NVLINK_DEVICE_TYPE_UNKNOWN,
        }
        if kind is None:
            self._raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return codes[kind]

    def _fabric(self, h: _Handle, func: str, ref: Any) -> int:
        gpu = self._gpu(h, func)
        state = gpu.get("fabric_state")
        if state is None:
            self._raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        states = {
            "Not Supported": pynvml.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED,
            "Not Started": pynvml.NVML_GPU_FABRIC_STATE_NOT_STARTED,
            "In Progress": pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS,
            "Completed": pynvml.NVML_GPU_FABRIC_STATE_COMPLETED,
        }
        status_text = gpu.get("fabric_status") or "Success"
        texts = {text: code for code, text in pynvml.NVMLError._errcode_to_string.items()}
        info = ref._obj  # ctypes.byref(structure), as the real call takes it
        info.state = states[state]
        info.status = 0 if status_text == "Success" else texts[status_text]
        return pynvml.NVML_SUCCESS

    def nvmlDeviceGetGpuFabricInfoV(self, h: _Handle, ref: Any) -> int:
        assert isinstance(ref._obj, pynvml.c_nvmlGpuFabricInfoV_t)
        assert ref._obj.version == pynvml.nvmlGpuFabricInfo_v2
        return self._fabric(h, "nvmlDeviceGetGpuFabricInfoV", ref)

    def nvmlDeviceGetGpuFabricInfo(self, h: _Handle, ref: Any) -> int:
        assert isinstance(ref._obj, pynvml.c_nvmlGpuFabricInfo_t)
        return self._fabric(h, "nvmlDeviceGetGpuFabricInfo", ref)

    def _pair(self, ha: _Handle, hb: _Handle, func: str, key: str) -> Any:
        self._gpu(ha, func)
        self._gpu(hb, func)
        a, b = sorted((ha.nvml_index, hb.nvml_index))
        for pair in self._snap.get("gpu_pairs") or ():
            if (pair["nvml_index_a"], pair["nvml_index_b"]) == (a, b):
                if pair.get(key) is None:
                    break
                return pair[key]
        self._raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        raise AssertionError("unreachable")

    def nvmlDeviceGetTopologyCommonAncestor(self, ha: _Handle, hb: _Handle) -> int:
        name = self._pair(ha, hb, "nvmlDeviceGetTopologyCommonAncestor", "topology")
        levels = {
            "BOARD": pynvml.NVML_TOPOLOGY_INTERNAL,
            "PIX": pynvml.NVML_TOPOLOGY_SINGLE,
            "PXB": pynvml.NVML_TOPOLOGY_MULTIPLE,
            "PHB": pynvml.NVML_TOPOLOGY_HOSTBRIDGE,
            "NODE": pynvml.NVML_TOPOLOGY_NODE,
            "SYS": pynvml.NVML_TOPOLOGY_SYSTEM,
        }
        return levels[name]

    def nvmlDeviceGetP2PStatus(self, ha: _Handle, hb: _Handle, index: int) -> int:
        # ctypes passes only an int: pynvml's NVML_P2P_CAPS_INDEX_READ is the tuple (0,).
        assert type(index) is int, index
        self.p2p_indices.append(index)
        keys = {0: "p2p_read", 1: "p2p_write", 2: "p2p_nvlink"}
        name = self._pair(ha, hb, "nvmlDeviceGetP2PStatus", keys[index])
        codes = {
            "OK": pynvml.NVML_P2P_STATUS_OK,
            "CNS": pynvml.NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED,
            "GNS": pynvml.NVML_P2P_STATUS_GPU_NOT_SUPPORTED,
            "TNS": pynvml.NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED,
            "DIS": pynvml.NVML_P2P_STATUS_DISABLED_BY_REGKEY,
            "NS": pynvml.NVML_P2P_STATUS_NOT_SUPPORTED,
            "U": pynvml.NVML_P2P_STATUS_UNKNOWN,
        }
        return codes[name]
