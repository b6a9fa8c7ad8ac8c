"""The explicit logical → physical table: which GPU ``cuda:N`` really is, and why.

Plain text, no colours, so it can be pasted into an issue or a log.
"""

from __future__ import annotations

from gpudiag.core.describe import gpu_by_nvml_index
from gpudiag.core.visibility import quote_value
from gpudiag.model import Gpu, MigDevice, Resolution, Snapshot, VisibleDevice, short_uuid
from gpudiag.render.text import PLAIN, Style, esc, safe, wrap


def short_pci_bus_id(pci_bus_id: str) -> str:
    """NVML's ``00000000:41:00.0`` in the usual ``0000:41:00.0`` (lspci, CUDA) form."""
    domain, sep, rest = pci_bus_id.partition(":")
    if sep and len(domain) == 8 and domain.startswith("0000"):
        return f"{domain[4:]}:{rest}"
    return pci_bus_id


def _gpu(snapshot: Snapshot, nvml_index: int) -> Gpu | None:
    # Indexed once per snapshot (core.dataparallel): a scan per device line made
    # `check` quadratic in GPUs.
    return gpu_by_nvml_index(snapshot, nvml_index)


def _mig(gpu: Gpu | None, mig_uuid: str) -> MigDevice | None:
    if gpu is None:
        return None
    for mig in gpu.mig_devices:
        if mig.uuid == mig_uuid:
            return mig
    return None


def _physical(device: VisibleDevice, gpu: Gpu | None) -> str:
    # "GPU N" is nvidia-smi's index already: the GPU is named once.
    facts = [esc(short_uuid(device.uuid))]
    if gpu is not None and gpu.pci_bus_id:
        facts.append(esc(short_pci_bus_id(gpu.pci_bus_id)))
    if gpu is not None and gpu.name:
        facts.append(esc(gpu.name))
    return f"GPU {device.nvml_index} ({', '.join(facts)})"


def device_line(device: VisibleDevice, snapshot: Snapshot) -> str:
    """One line: ``cuda:0 → GPU 3 (GPU-9e8d…, 0000:41:00.0, NAME)``; GPU 3 is
    nvidia-smi's index."""
    gpu = _gpu(snapshot, device.nvml_index)
    if device.mig_uuid is None:
        return f"cuda:{device.cuda_ordinal} → {_physical(device, gpu)}"
    mig = _mig(gpu, device.mig_uuid)
    ids = ""
    if mig is not None and mig.gpu_instance_id is not None:
        ids = f", GPU instance {mig.gpu_instance_id}"
        if mig.compute_instance_id is not None:
            ids += f", compute instance {mig.compute_instance_id}"
    memory = ""
    if mig is not None and mig.memory_total_mib is not None:
        memory = f", {mig.memory_total_mib} MiB"
    return (
        f"cuda:{device.cuda_ordinal} → MIG device {esc(short_uuid(device.mig_uuid))}"
        f"{ids}{memory} on {_physical(device, gpu)}"
    )


def _spec_text(spec: str | None) -> str:
    return "unset" if spec is None else safe(quote_value(spec))


def render_mapping(resolution: Resolution, snapshot: Snapshot, style: Style = PLAIN) -> str:
    """The mapping table, how each entry was read, the method and any uncertainty,
    wrapped to ``style.width``."""
    width = style.width
    lines: list[str] = []
    if resolution.devices:
        for d in resolution.devices:
            lines += wrap(device_line(d, snapshot), width)
    else:
        lines.append("No CUDA device is visible.")
    lines.append("")
    spec = _spec_text(resolution.spec)
    if resolution.spec is None:
        lines += wrap(
            f"CUDA_VISIBLE_DEVICES is unset: CUDA enumerates every GPU it can "
            f"(CUDA_DEVICE_ORDER={esc(resolution.order)}).",
            width,
        )
    else:
        lines += wrap(
            f"How CUDA_VISIBLE_DEVICES={spec} was read "
            f"(CUDA_DEVICE_ORDER={esc(resolution.order)}):",
            width,
        )
        for e in resolution.explanations:
            text = safe(e.text)
            lines += wrap(f"{e.position}. {text}", width, indent="  ")
    if resolution.method == "driver":
        lines += wrap(
            "Method: driver (the CUDA driver enumerated these devices in a fresh process)", width
        )
    else:
        lines += wrap("Method: rules (CUDA's documented rules; not confirmed by the driver)", width)
    if not resolution.certain:
        lines += wrap(
            "Warning: this mapping is uncertain: it rests on an order or a MIG choice "
            "that gpudiag could not confirm (see the findings).",
            width,
        )
    return "\n".join(lines)


def resolution_to_json(resolution: Resolution) -> dict[str, object]:
    """The ``resolution`` object of ``gpudiag list/check --json``.

    The device list is serialised separately as ``visible``.
    """
    return {
        "spec": resolution.spec,
        "order": resolution.order,
        "method": resolution.method,
        "certain": resolution.certain,
        "cuinit_error": resolution.cuinit_error,
        "explanations": [
            {"position": e.position, "entry": e.entry, "outcome": e.outcome, "text": e.text}
            for e in resolution.explanations
        ],
    }
