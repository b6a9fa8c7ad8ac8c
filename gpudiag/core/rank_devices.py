"""Which GPU each DDP rank uses: per-rank ``set_device`` values and device subsets.

Pure. Sources: ``torch.cuda.set_device(k)`` (``invalid device ordinal`` for k >= the
visible count, a no-op for a negative k); NCCL's ``init.cc`` refuses two ranks on
one GPU ("Duplicate GPU detected"); the CUDA C Programming Guide, "Initialization"
(a rank that touches CUDA before ``set_device`` creates the primary context of
device 0); Lightning's ``devices=[1,2]`` and accelerate's ``gpu_ids`` pick a device
per rank but leave cuda:0 visible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpudiag.core.dataparallel import (
    INVALID_ORDINAL,
    cvd_phrase,
    describe_device,
    describe_devices,
    gpu_by_nvml_index,
)
from gpudiag.errors import GpudiagInputError
from gpudiag.findings.texts import OUT_OF_MEMORY, duplicate_gpu_text
from gpudiag.launch.ints import parse_env_int
from gpudiag.model import Finding, Resolution, Snapshot


def set_device_roles(
    set_device: int | None,
    per_rank: Sequence[int] | None,
    local_rank: int | None,
    nproc_per_node: int | None,
    env: Mapping[str, str],
) -> tuple[int | None, int | None]:
    """(what this rank passes to set_device, what every DDP rank passes, if the same).

    A single value applies to every rank (a hard-coded ``set_device(0)``) unless it
    describes one rank: ``local_rank`` is given, or it equals the environment's
    ``LOCAL_RANK`` (``gpudiag check --set-device $LOCAL_RANK`` inside a rank).
    """
    env_rank = parse_env_int(env.get("LOCAL_RANK") or "")
    if per_rank is not None:
        if set_device is not None:
            raise GpudiagInputError("give set_device or set_device_per_rank, not both")
        if not per_rank:
            raise GpudiagInputError("set_device_per_rank needs at least one value")
        if nproc_per_node is not None and len(per_rank) != nproc_per_node:
            raise GpudiagInputError(
                f"set_device_per_rank lists {len(per_rank)} values (one per local rank) "
                f"but nproc_per_node is {nproc_per_node}"
            )
        rank = local_rank if local_rank is not None else env_rank
        if rank is not None and not 0 <= rank < len(per_rank):
            raise GpudiagInputError(
                f"local rank {rank} has no set_device_per_rank value ({len(per_rank)} given)"
            )
        return per_rank[rank or 0], None
    if local_rank is not None and local_rank < 0:
        raise GpudiagInputError(f"local_rank must be 0 or more, got {local_rank}")
    if set_device is None:
        return None, None
    describes_one = local_rank is not None or env_rank == set_device
    return set_device, None if describes_one else set_device


def _duplicates(
    chosen: Sequence[int], resolution: Resolution, snapshot: Snapshot, what: str
) -> list[Finding]:
    ranks_of: dict[int, list[int]] = {}
    for rank, ordinal in enumerate(chosen):
        ranks_of.setdefault(max(ordinal, 0), []).append(rank)
    out: list[Finding] = []
    for ordinal, ranks in ranks_of.items():
        if len(ranks) < 2:
            continue
        dev = resolution.devices[ordinal]
        gpu = gpu_by_nvml_index(snapshot, dev.nvml_index)
        out.append(
            Finding(
                code="DDP-DUPLICATE-GPU",
                severity="error",
                message=f"Local ranks {', '.join(map(str, ranks))} all use "
                f"{describe_device(dev, snapshot)}"
                f" ({what}); NCCL refuses two ranks on one GPU.",
                fix="Give each local rank its own GPU: torch.cuda.set_device(local_rank), or list "
                f"{len(chosen)} distinct cuda ordinals.",
                predicts=duplicate_gpu_text(gpu.pci_bus_id if gpu else None, ranks[1], ranks[0]),
                subject=dev.uuid,
            )
        )
    return out


def _invalid(
    chosen: Sequence[int], resolution: Resolution, snapshot: Snapshot, option: str
) -> list[Finding]:
    n = len(resolution.devices)
    bad = [(rank, k) for rank, k in enumerate(chosen) if k >= n]
    if not bad or n == 0:
        return []
    ranks = ", ".join(f"local rank {r} -> cuda:{k}" for r, k in bad)
    return [
        Finding(
            code="DDP-SET-DEVICE-INVALID",
            severity="error",
            message=f"{option}: {ranks}, but only {n} GPU(s) are visible {cvd_phrase(resolution)}: "
            f"{describe_devices(resolution.devices, snapshot)}; torch.cuda.set_device fails "
            "in those ranks.",
            fix=f"Use cuda ordinals 0..{n - 1} (they count the visible GPUs, not nvidia-smi's), "
            "or make more GPUs visible.",
            predicts=INVALID_ORDINAL,
            subject=f"cuda:{bad[0][1]}",
        )
    ]


def per_rank_set_device_findings(
    resolution: Resolution, snapshot: Snapshot, values: Sequence[int], backend: str | None
) -> list[Finding]:
    """``--set-device K0,K1,…``: local rank r calls ``torch.cuda.set_device(K_r)``."""
    out = _invalid(values, resolution, snapshot, f"--set-device {','.join(map(str, values))}")
    n = len(resolution.devices)
    if out or n == 0:
        return out
    if (backend or "nccl") == "nccl":
        out += _duplicates(values, resolution, snapshot, "--set-device; negative is a no-op")
    return out


def device_subset_findings(
    resolution: Resolution,
    snapshot: Snapshot,
    subset: Sequence[int],
    backend: str | None,
) -> list[Finding]:
    """DDP over chosen cuda ordinals (Lightning ``devices=[1,2]``, accelerate ``gpu_ids``)."""
    devices = resolution.devices
    n = len(devices)
    out = _invalid(subset, resolution, snapshot, f"--ddp-devices {','.join(map(str, subset))}")
    if out or n == 0:
        return out
    if (backend or "nccl") == "nccl":
        out += _duplicates(subset, resolution, snapshot, "--ddp-devices")
    if out:
        return out
    chosen = [devices[k] for k in subset]
    plan = "; ".join(
        f"local rank {r} -> {describe_device(d, snapshot)}" for r, d in enumerate(chosen)
    )
    out.append(
        Finding(
            code="DDP-PLAN",
            severity="info",
            message=f"{len(subset)} rank(s) on the chosen devices (--ddp-devices) "
            f"{cvd_phrase(resolution)}: {plan}.",
            fix=None,
        )
    )
    if 0 in subset or any(d.mig_uuid is not None for d in chosen):
        return out
    if resolution.spec is None:
        entries = [str(d.cuda_ordinal) for d in chosen]
    else:
        entries = [d.entry or str(d.nvml_index) for d in chosen]
    cvd = ",".join(e.strip() for e in entries)
    k = len(subset)
    out.append(
        Finding(
            code="DDP-CUDA0-CONTEXT",
            severity="warning",
            message=f"The ranks use {', '.join(f'cuda:{i}' for i in subset)}, but every rank still "
            f"sees {describe_device(devices[0], snapshot)}: whatever touches CUDA before "
            "torch.cuda.set_device (torch.load without map_location, "
            "torch.cuda.current_device(), device='cuda', dist.barrier() without device_ids) "
            "creates a CUDA context (some hundred MiB) on it in every rank.",
            fix=f"Hide the other GPUs instead of picking a subset: CUDA_VISIBLE_DEVICES={cvd} "
            f"with Lightning devices={k} (or accelerate --gpu_ids all --num_processes {k}); "
            f"the chosen GPUs then are cuda:0..cuda:{k - 1} and nothing lands on physical GPU "
            f"{devices[0].nvml_index}.",
            predicts=f"no error: nvidia-smi lists every rank's process on physical GPU "
            f"{devices[0].nvml_index} too (a few hundred MiB each); when that GPU is busy: "
            + OUT_OF_MEMORY,
            subject=devices[0].uuid,
        )
    )
    return out
