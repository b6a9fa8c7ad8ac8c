"""``CUDA_DEVICE_ORDER`` and the GPUs CUDA can enumerate, in CUDA's order (pure, no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from gpudiag.core.visibility.entries import quote_value as _q
from gpudiag.findings.texts import unexpected_device_count
from gpudiag.model import Finding, Gpu, Snapshot

PCI_BUS_ID = "PCI_BUS_ID"
FASTEST_FIRST = "FASTEST_FIRST"


def gpu_label(gpu: Gpu) -> str:
    """``GPU 3``: gpudiag numbers GPUs as nvidia-smi does (``nvml_index``), everywhere.

    Once ``GPU 3 (nvidia-smi index 3)``, which the renderer shortened with a regex
    (issue 16): the core now words it as it is shown.
    """
    return f"GPU {gpu.nvml_index}"


def enumerable(snapshot: Snapshot) -> list[Gpu]:
    # CUDA cannot enumerate a GPU that fell off the bus; NVML still numbers it.
    return [g for g in snapshot.gpus if not g.lost and g.uuid is not None]


def in_mig_mode(gpu: Gpu) -> bool:
    return bool(gpu.mig_enabled)


def uuid_of(gpu: Gpu) -> str:
    assert gpu.uuid is not None  # enumerable() keeps only GPUs with a UUID
    return gpu.uuid


class Order(NamedTuple):
    name: str
    pool: tuple[Gpu, ...]
    certain: bool
    findings: tuple[Finding, ...]


def models_differ(gpus: Sequence[Gpu]) -> bool:
    if len(gpus) < 2:
        return False
    names = {g.name for g in gpus}
    return len(names) > 1 or None in names  # an unknown model may differ


def _cuda_order_pool(snapshot: Snapshot, gpus: list[Gpu]) -> list[Gpu] | None:
    """The GPUs in the driver's recorded FASTEST_FIRST order, or None if unknown.

    ``snapshot.cuda_order`` may name MIG devices (that is what the driver lists
    on a MIG node); each stands for its parent GPU. The order is only used when
    it accounts for every enumerable GPU.
    """
    if snapshot.cuda_order is None:
        return None
    by_uuid: dict[str, Gpu] = {}
    for gpu in gpus:
        by_uuid[uuid_of(gpu).lower()] = gpu
        for mig in gpu.mig_devices:
            by_uuid[mig.uuid.lower()] = gpu
    ordered: list[Gpu] = []
    placed: set[int] = set()  # by identity: `in ordered` compared dataclasses, quadratic
    for uuid in snapshot.cuda_order:
        found = by_uuid.get(uuid.lower())
        if found is not None and id(found) not in placed:
            placed.add(id(found))
            ordered.append(found)
    if len(ordered) != len(gpus):
        return None
    return ordered


def order_is_valid(order: str | None) -> bool:
    """Whether cuInit accepts this ``CUDA_DEVICE_ORDER`` (unset counts as valid)."""
    return order is None or order in (PCI_BUS_ID, FASTEST_FIRST)


def resolve_order(order: str | None, snapshot: Snapshot) -> Order:
    findings: list[Finding] = []
    if order == PCI_BUS_ID:
        name = PCI_BUS_ID
    else:
        name = FASTEST_FIRST
        if not order_is_valid(order):
            # Recorded on driver 580.159.04 (tests/truth/h100-driver-580.json): any
            # other value, lower case, surrounding spaces and "" included, makes
            # cuInit fail with CUDA_ERROR_INVALID_DEVICE, so no GPU is usable.
            findings.append(
                Finding(
                    code="VIS-ORDER-INVALID",
                    severity="error",
                    message=f"CUDA_DEVICE_ORDER={_q(str(order))} is not exactly PCI_BUS_ID or "
                    "FASTEST_FIRST: cuInit fails with CUDA_ERROR_INVALID_DEVICE, so no GPU is "
                    "usable at all in this process (the driver accepts no other spelling, not "
                    "even lower case or surrounding spaces).",
                    fix="export CUDA_DEVICE_ORDER=PCI_BUS_ID (nvidia-smi order), or unset it.",
                    predicts=unexpected_device_count(),
                    subject="CUDA_DEVICE_ORDER",
                )
            )
    gpus = enumerable(snapshot)
    # nvidia-smi (NVML) numbers GPUs by PCI bus id, so PCI order is nvml_index order.
    pci = sorted(gpus, key=lambda g: g.nvml_index)
    if name == PCI_BUS_ID:
        return Order(name, tuple(pci), True, tuple(findings))
    known = _cuda_order_pool(snapshot, gpus)
    if known is not None:
        return Order(name, tuple(known), True, tuple(findings))
    if not models_differ(gpus):
        # Identical GPUs: FASTEST_FIRST ties are broken by PCI bus id.
        return Order(name, tuple(pci), True, tuple(findings))
    findings.append(
        Finding(
            code="VIS-ORDER-UNCERTAIN",
            severity="warning",
            message="This node mixes GPU models and the driver's FASTEST_FIRST order was "
            "not recorded, so which GPU each CUDA index means is uncertain; gpudiag "
            "assumed nvidia-smi (PCI bus) order.",
            fix="Set CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA numbers GPUs like nvidia-smi, "
            "or record the order with `gpudiag snapshot` on the machine.",
            subject="CUDA_DEVICE_ORDER",
        )
    )
    return Order(name, tuple(pci), False, tuple(findings))
