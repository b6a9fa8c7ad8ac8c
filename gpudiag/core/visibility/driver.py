"""The CUDA driver's own mapping, reconciled with the rules' answer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from gpudiag.core.visibility.entries import quote_value as _q
from gpudiag.core.visibility.order import uuid_of
from gpudiag.core.visibility.resolve import resolve_visible
from gpudiag.model import (
    Finding,
    Gpu,
    MigDevice,
    Resolution,
    Snapshot,
    VisibleDevice,
    short_uuid,
    uuid_key,
)


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
            key = (uuid_of(gpu), mig.uuid)
        elif body in gpu_by_body:
            gpu = gpu_by_body[body]
            key = (uuid_of(gpu), None)
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
