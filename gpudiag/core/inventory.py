"""Reconcile NVML, torch and GPUtil into one record per physical GPU.

Pure: a function of a :class:`~gpudiag.model.Snapshot`. The join key is the
UUID's hex part, lower-cased: NVML and nvidia-smi print ``GPU-…``, torch prints
the bare UUID, and a MIG instance's UUID (``MIG-…``) joins to its parent GPU.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpudiag.core.sources import source_findings, source_status
from gpudiag.findings.texts import DRIVER_TOO_OLD, NOT_COMPILED
from gpudiag.model import (
    Finding,
    Gpu,
    GputilGpu,
    Resolution,
    Snapshot,
    TorchDevice,
    TorchInfo,
    uuid_key,
)


@dataclass(frozen=True)
class InventoryRow:
    """One physical GPU as the three sources and the CUDA mapping see it.

    Attributes:
        gpu: NVML's record (None when only torch or GPUtil saw this GPU).
        torch_devices: torch's devices on this GPU (several for MIG instances).
        gputil: GPUtil's record, or None.
        cuda_ordinals: the ``cuda:N`` ordinals this GPU gets under the resolution.
    """

    gpu: Gpu | None
    torch_devices: tuple[TorchDevice, ...] = ()
    gputil: GputilGpu | None = None
    cuda_ordinals: tuple[int, ...] = ()

    @property
    def uuid(self) -> str | None:
        """The best-known UUID, NVML's spelling first."""
        if self.gpu is not None and self.gpu.uuid:
            return self.gpu.uuid
        if self.gputil is not None and self.gputil.uuid:
            return self.gputil.uuid
        if self.torch_devices and self.torch_devices[0].uuid:
            return "GPU-" + self.torch_devices[0].uuid.lower().removeprefix("gpu-")
        return None

    @property
    def seen_by(self) -> tuple[str, ...]:
        """Which sources reported this GPU, in the order nvml, torch, gputil."""
        seen = []
        if self.gpu is not None:
            seen.append("nvml")
        if self.torch_devices:
            seen.append("torch")
        if self.gputil is not None:
            seen.append("gputil")
        return tuple(seen)


@dataclass(frozen=True)
class Inventory:
    """The reconciled view: rows in nvidia-smi order, and the findings."""

    rows: tuple[InventoryRow, ...]
    findings: tuple[Finding, ...]


def _keys_of(gpu: Gpu) -> set[str]:
    keys = {k for k in [uuid_key(gpu.uuid)] if k}
    keys.update(k for k in (uuid_key(m.uuid) for m in gpu.mig_devices) if k)
    return keys


def _positions(keys: Iterable[str | None]) -> dict[str, list[int]]:
    """Each non-empty key's positions in ``keys``, in order."""
    out: dict[str, list[int]] = {}
    for position, key in enumerate(keys):
        if key:
            out.setdefault(key, []).append(position)
    return out


def build_inventory(snapshot: Snapshot, resolution: Resolution | None = None) -> Inventory:
    """Join the sources by UUID; ``resolution`` (e.g. a --visible what-if) supplies
    the CUDA ordinals shown per row."""
    torch_devices = snapshot.torch.devices if snapshot.torch else ()
    gputil_gpus = snapshot.gputil or ()
    used_torch: set[int] = set()
    used_gputil: set[int] = set()
    rows: list[InventoryRow] = []
    # Indexed once by UUID key, so the join is linear in GPUs (a scan per GPU
    # made 8,000 GPUs take 85 s). Positions keep each source's own order.
    torch_at = _positions(uuid_key(d.uuid) for d in torch_devices)
    gputil_at = _positions(uuid_key(g.uuid) for g in gputil_gpus)
    ordinals_at = _positions(
        uuid_key(d.uuid) for d in (resolution.devices if resolution is not None else ())
    )
    for gpu in snapshot.gpus:
        keys = _keys_of(gpu)
        mine = tuple(
            torch_devices[i] for i in sorted({i for k in keys for i in torch_at.get(k, ())})
        )
        used_torch.update(d.cuda_ordinal for d in mine)
        first_util = min((gputil_at[k][0] for k in keys if k in gputil_at), default=None)
        util = None if first_util is None else gputil_gpus[first_util]
        if util is not None:
            used_gputil.add(util.gputil_id)
        ordinals: tuple[int, ...] = ()
        if resolution is not None and gpu.uuid is not None:
            ordinals = tuple(
                resolution.devices[i].cuda_ordinal
                for i in ordinals_at.get(uuid_key(gpu.uuid) or "", ())
            )
        rows.append(InventoryRow(gpu=gpu, torch_devices=mine, gputil=util, cuda_ordinals=ordinals))
    # GPUs only torch or GPUtil saw (NVML unavailable, or a disagreement).
    extra_util = {uuid_key(g.uuid): g for g in gputil_gpus if g.gputil_id not in used_gputil}
    for dev in torch_devices:
        if dev.cuda_ordinal in used_torch:
            continue
        util = extra_util.pop(uuid_key(dev.uuid), None)
        rows.append(InventoryRow(gpu=None, torch_devices=(dev,), gputil=util))
    rows.extend(InventoryRow(gpu=None, gputil=g) for g in extra_util.values())
    # The findings compare torch with the mapping under the snapshot's own
    # environment (torch was queried under it), not under a --visible what-if.
    return Inventory(rows=tuple(rows), findings=tuple(inventory_findings(snapshot)))


def inventory_findings(snapshot: Snapshot, resolution: Resolution | None = None) -> list[Finding]:
    """Source failures and disagreements between NVML, torch and GPUtil.

    Args:
        snapshot: the machine.
        resolution: the CUDA mapping under the snapshot's own environment (the
            one torch was queried under); computed when None.
    """
    if resolution is None:
        from gpudiag.core.visibility import resolve_visible

        resolution = resolve_visible(
            snapshot.cuda_visible_devices, snapshot.cuda_device_order, snapshot
        )
    findings: list[Finding] = []
    findings += source_findings(snapshot)
    findings += _torch_findings(snapshot, resolution)
    findings += _gputil_findings(snapshot)
    return findings


def _version_tuple(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        return tuple(int(p) for p in text.split(".")[:2])
    except ValueError:
        return None


#: PyTorch's CUDA wheel indices (download.pytorch.org/whl/cuXYZ, listed on
#: pytorch.org/get-started/previous-versions for torch 2.0-2.9).
_WHEEL_CUDA = ((11, 8), (12, 1), (12, 4), (12, 6), (12, 8), (12, 9), (13, 0))


def _cuda_build_fix(driver: tuple[int, ...] | None) -> str:
    """Which CUDA build of torch to install on a driver supporting CUDA ``driver``.

    The newest wheel index not newer than the driver; else, from CUDA 11 on, the oldest
    of the same major (minor-version compatibility runs it: NVIDIA's "CUDA
    Compatibility" guide). A cu124 suggestion on a CUDA 11.4 driver would not run
    (issue 20).
    """
    head = "Install a CUDA build of torch that the driver supports (pytorch.org 'Get started')"
    if driver is None:
        return head + "."
    fits = [v for v in _WHEEL_CUDA if v <= driver[:2]]
    same_major = [v for v in _WHEEL_CUDA if v[0] == driver[0]]
    pick = fits[-1] if fits else (same_major[0] if same_major and driver[0] >= 11 else None)
    if pick is None:
        return (
            f"{head}: the driver supports only CUDA {'.'.join(map(str, driver[:2]))}, older "
            "than any current torch build; upgrade the NVIDIA driver first."
        )
    index = f"cu{pick[0]}{pick[1]}"
    return (
        f"{head}: for this driver (CUDA {'.'.join(map(str, driver[:2]))}), "
        f"`pip install torch --index-url https://download.pytorch.org/whl/{index}`."
    )


def _why_torch_sees_none(snapshot: Snapshot, info: TorchInfo) -> tuple[str, str, str | None, str]:
    """(severity, reason, predicts, fix) for "NVML sees GPUs, torch sees none"."""
    cvd = snapshot.cuda_visible_devices
    if info.cpu_only:
        return (
            "error",
            f"torch {info.version} is a CPU-only build",
            NOT_COMPILED,
            _cuda_build_fix(_version_tuple(snapshot.cuda_driver_version)),
        )
    if cvd is not None and (not cvd.strip() or cvd.strip() == "NoDevFiles"):
        return (
            "info",
            f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU",
            None,
            "Unset CUDA_VISIBLE_DEVICES, or set it to the GPUs the job should use.",
        )
    drv, rt = _version_tuple(snapshot.cuda_driver_version), _version_tuple(info.cuda_version)
    if drv and rt and drv < rt:
        return (
            "error",
            f"the driver supports CUDA {snapshot.cuda_driver_version} but torch "
            f"{info.version} needs the CUDA {info.cuda_version} runtime",
            DRIVER_TOO_OLD,
            f"Upgrade the NVIDIA driver to one supporting CUDA {info.cuda_version}, or "
            f"install a torch build for CUDA {snapshot.cuda_driver_version} or older.",
        )
    if info.error:
        return (
            "error",
            f"CUDA initialisation failed in torch: {info.error}",
            None,
            "Run `python -c 'import torch; torch.cuda.init()'` for the full error; "
            "check the device files' permissions and the container's GPU runtime.",
        )
    if cvd is not None:
        return (
            "warning",
            f"CUDA_VISIBLE_DEVICES={cvd!r} selects no usable device",
            None,
            "Fix CUDA_VISIBLE_DEVICES (see `gpudiag list --visible SPEC`).",
        )
    return (
        "error",
        "the reason could not be determined",
        None,
        "Run `nvidia-smi` and `torch.cuda.init()`.",
    )


def _torch_findings(snapshot: Snapshot, resolution: Resolution) -> list[Finding]:
    info = snapshot.torch
    if info is None or info.device_count is None:
        return []
    out: list[Finding] = []
    nvml_ok = source_status(snapshot, "nvml")[0] == "ok"
    healthy = [g for g in snapshot.gpus if not g.lost]
    if nvml_ok and healthy and info.device_count == 0:
        severity, reason, predicts, fix = _why_torch_sees_none(snapshot, info)
        out.append(
            Finding(
                code="INV-TORCH-SEES-NONE",
                severity=severity,  # type: ignore[arg-type]
                message=f"NVML sees {len(healthy)} GPU(s) but torch sees 0: {reason}.",
                fix=fix,
                predicts=predicts,
                subject="torch",
            )
        )
        return out
    if not nvml_ok:
        return out
    expected = len(resolution.devices)
    if info.device_count != expected and resolution.certain:
        out.append(
            Finding(
                code="INV-TORCH-COUNT-MISMATCH",
                severity="warning",
                message=f"torch sees {info.device_count} device(s), but under "
                f"CUDA_VISIBLE_DEVICES={_show(snapshot.cuda_visible_devices)} the CUDA rules "
                f"expose {expected}.",
                fix="Compare `gpudiag list` with `nvidia-smi -L`; a GPU may be in use "
                "exclusively, hidden by the container runtime, or unhealthy.",
                subject="torch",
            )
        )
    known = set()
    for gpu in snapshot.gpus:
        known |= _keys_of(gpu)
    predicted = {d.cuda_ordinal: d for d in resolution.devices}
    for dev in info.devices:
        key = uuid_key(dev.uuid)
        if key is None:
            continue
        if key not in known:
            out.append(
                Finding(
                    code="INV-TORCH-UUID-UNKNOWN",
                    severity="warning",
                    message=f"torch's cuda:{dev.cuda_ordinal} ({dev.name}, {dev.uuid}) is not a "
                    "GPU "
                    "NVML lists.",
                    fix="The container may see a different device set than NVML; "
                    "check the runtime's NVIDIA_VISIBLE_DEVICES.",
                    subject=dev.uuid,
                )
            )
            continue
        want = predicted.get(dev.cuda_ordinal)
        if want is None or not resolution.certain:
            continue
        want_keys = {uuid_key(want.uuid), uuid_key(want.mig_uuid)}
        if key not in want_keys:
            out.append(
                Finding(
                    code="INV-TORCH-ORDER-MISMATCH",
                    severity="warning",
                    message=f"torch's cuda:{dev.cuda_ordinal} is {dev.uuid}, but the CUDA rules "
                    f"predict nvidia-smi index {want.nvml_index} ({want.mig_uuid or want.uuid}).",
                    fix="Set CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA and nvidia-smi number "
                    "GPUs the same way; capture the driver's order with `gpudiag snapshot`.",
                    subject=f"cuda:{dev.cuda_ordinal}",
                )
            )
    return out


def _gputil_findings(snapshot: Snapshot) -> list[Finding]:
    if snapshot.gputil is None or source_status(snapshot, "nvml")[0] != "ok":
        return []
    nvml_keys = {uuid_key(g.uuid) for g in snapshot.gpus if g.uuid}
    util_keys = {uuid_key(g.uuid) for g in snapshot.gputil if g.uuid}
    if nvml_keys == util_keys and len(snapshot.gputil) == len(nvml_keys):
        return []
    missing = sorted(g.nvml_index for g in snapshot.gpus if uuid_key(g.uuid) not in util_keys)
    detail = f"GPUtil (nvidia-smi) lists {len(snapshot.gputil)} GPU(s), NVML {len(snapshot.gpus)}"
    if missing:
        detail += f"; not in GPUtil's list: nvidia-smi index {', '.join(map(str, missing))}"
    return [
        Finding(
            code="INV-GPUTIL-MISMATCH",
            severity="warning",
            message=detail + ".",
            fix="Run `nvidia-smi`: a lost or unhealthy GPU usually makes it fail or skip one.",
            subject="gputil",
        )
    ]


def _show(value: str | None) -> str:
    return "<unset>" if value is None else repr(value)
