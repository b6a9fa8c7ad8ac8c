"""The resolver: which physical devices ``cuda:0``, ``cuda:1``, … are (pure, no I/O)."""

from __future__ import annotations

from gpudiag.core.visibility.entries import hides_every_gpu_on_purpose
from gpudiag.core.visibility.findings import (
    explain,
    list_findings,
    mismatch_findings,
    no_devices,
    order_findings,
    order_invalid_explanations,
)
from gpudiag.core.visibility.order import gpu_label, order_is_valid, resolve_order, uuid_of
from gpudiag.core.visibility.targets import Entry, Target, gpu_target, read_entries, split
from gpudiag.core.visibility.torch_vs_cuda import torch_findings
from gpudiag.model import Finding, Resolution, Snapshot, VisibleDevice, short_uuid


def resolve_visible(spec: str | None, order: str | None, snapshot: Snapshot) -> Resolution:
    """Which physical devices ``cuda:0``, ``cuda:1``, … are under ``spec`` and ``order``.

    Args:
        spec: the ``CUDA_VISIBLE_DEVICES`` value; None when unset.
        order: the ``CUDA_DEVICE_ORDER`` value; None when unset (FASTEST_FIRST).
        snapshot: the machine's inventory.

    Returns:
        The devices in ``cuda_ordinal`` order, one explanation per entry, and findings.
    """
    resolved_order = resolve_order(order, snapshot)
    findings: list[Finding] = list(resolved_order.findings)
    certain = resolved_order.certain
    pool = resolved_order.pool

    entries: list[Entry] = []
    stop_at: int | None = None
    dup_at: int | None = None
    deliberate_none = False
    targets: list[tuple[Entry | None, Target]]
    if spec is None:
        targets = [(None, gpu_target(g, f"gpu:{g.uuid}", gpu_label(g))) for g in pool]
    else:
        entries = split(spec)
        deliberate_none = hides_every_gpu_on_purpose(spec)
        stop_at, dup_at = read_entries(entries, resolved_order)
        targets = []
        if dup_at is None:
            for item in entries:
                if isinstance(item.result, Target):
                    targets.append((item, item.result))

    # MIG rules (MIG User Guide, "CUDA Device Enumeration"): a CUDA process
    # enumerates a single MIG device, and once it does, non-MIG GPUs are hidden.
    chosen_mig: Target | None = None
    extra_migs: list[Target] = []
    for _, target in targets:
        if target.mig is not None:
            if chosen_mig is None:
                chosen_mig = target
            else:
                extra_migs.append(target)
    devices: list[VisibleDevice] = []
    ordinal_of: dict[int, int] = {}
    fate: dict[int, str] = {}
    hidden: list[Target] = []
    empty_mig: list[Target] = []
    for source, target in targets:
        pos = source.position if source is not None else -1
        if target.mig_missing:
            empty_mig.append(target)
            fate[pos] = " → in MIG mode with no MIG device: nothing to enumerate"
            continue
        if chosen_mig is not None and target is not chosen_mig:
            if target.mig is not None:
                fate[pos] = " → not enumerated: CUDA enumerates only one MIG device per process"
            else:
                hidden.append(target)
                fate[pos] = " → hidden: a MIG device is enumerated, so CUDA hides non-MIG GPUs"
            continue
        ordinal = len(devices)
        devices.append(
            VisibleDevice(
                cuda_ordinal=ordinal,
                nvml_index=target.gpu.nvml_index,
                uuid=uuid_of(target.gpu),
                mig_uuid=target.mig.uuid if target.mig is not None else None,
                entry=source.raw if source is not None else None,
            )
        )
        if source is not None:
            ordinal_of[source.position] = ordinal

    explanations = explain(spec, entries, stop_at, dup_at, ordinal_of, fate)

    # ---- findings about the list itself
    if spec is not None:
        findings.extend(list_findings(spec, entries, stop_at, dup_at, snapshot))
    if chosen_mig is not None and chosen_mig.mig is not None and extra_migs:
        findings.append(
            Finding(
                code="VIS-MIG-MULTIPLE",
                severity="warning",
                message=f"{1 + len(extra_migs)} MIG devices are selected, but a CUDA process "
                f"enumerates only one: cuda:0 is {short_uuid(chosen_mig.mig.uuid)} and the "
                "others are ignored.",
                fix="Run one process per MIG device, each with CUDA_VISIBLE_DEVICES=MIG-<uuid> "
                "(torchrun/DDP across MIG devices of one process is not possible).",
                subject="CUDA_VISIBLE_DEVICES",
            )
        )
    if chosen_mig is not None and chosen_mig.mig_guess:
        certain = False
        findings.append(
            Finding(
                code="VIS-MIG-UNCERTAIN",
                severity="warning",
                message=f"{gpu_label(chosen_mig.gpu)} is in MIG mode with "
                f"{len(chosen_mig.gpu.mig_devices)} MIG devices; NVIDIA does not document "
                "which one CUDA picks, gpudiag assumed the first nvidia-smi lists.",
                fix="Name the MIG device: CUDA_VISIBLE_DEVICES=MIG-<uuid> (see nvidia-smi -L).",
                subject=chosen_mig.gpu.uuid,
            )
        )
    if hidden:
        names = ", ".join(gpu_label(t.gpu) for t in hidden)
        findings.append(
            Finding(
                code="VIS-MIG-HIDES-GPU",
                severity="warning",
                message=f"A MIG device is enumerated, so CUDA hides the non-MIG GPU(s) {names}.",
                fix="Run MIG work and full-GPU work in separate processes, each with its own "
                "CUDA_VISIBLE_DEVICES.",
                subject="CUDA_VISIBLE_DEVICES",
            )
        )
    for target in empty_mig:
        findings.append(
            Finding(
                code="VIS-MIG-NO-INSTANCE",
                severity="warning",
                message=f"{gpu_label(target.gpu)} is in MIG mode but has no MIG device, "
                "so CUDA can run nothing on it.",
                fix="Create MIG instances (nvidia-smi mig -cgi … -C) or disable MIG mode "
                "(nvidia-smi -i N -mig 0).",
                subject=target.gpu.uuid,
            )
        )
    cuinit_error: str | None = None
    if dup_at is not None or not order_is_valid(order):
        cuinit_error = "CUDA_ERROR_INVALID_DEVICE"
        if devices:
            explanations = order_invalid_explanations(explanations)
            devices = []
    elif not devices and (snapshot.gpus or snapshot.driver_version is not None):
        cuinit_error = "CUDA_ERROR_NO_DEVICE"
    if not devices and spec is not None and cuinit_error != "CUDA_ERROR_INVALID_DEVICE":
        findings.append(no_devices(spec, deliberate_none, snapshot))
    if order_is_valid(order):
        findings.extend(order_findings(spec, entries, resolved_order, snapshot))
    findings.extend(mismatch_findings(devices))
    findings.extend(torch_findings(spec, devices, snapshot, cuinit_error))
    return Resolution(
        spec=spec,
        order=resolved_order.name,
        devices=tuple(devices),
        explanations=explanations,
        findings=tuple(findings),
        method="rules",
        certain=certain,
        cuinit_error=cuinit_error,
    )
