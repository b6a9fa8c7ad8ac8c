"""The finding codes of ``CUDA_VISIBLE_DEVICES`` resolution, and the per-entry
explanations and findings about the list, the order and the device numbers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from gpudiag.core.visibility.entries import C_SPACE, DIGITS, NO_DEV_FILES, cuda_index, entry_kind
from gpudiag.core.visibility.entries import quote_value as _q
from gpudiag.core.visibility.order import PCI_BUS_ID, Order, enumerable, models_differ
from gpudiag.core.visibility.targets import Entry, Stop, Target
from gpudiag.findings.texts import NO_CUDA_GPUS, unexpected_device_count
from gpudiag.model import EntryExplanation, Finding, Snapshot, VisibleDevice

_END = "the list ends here; later entries are ignored"


def order_invalid_explanations(
    explanations: tuple[EntryExplanation, ...],
) -> tuple[EntryExplanation, ...]:
    tail = " → but cuInit fails (CUDA_DEVICE_ORDER is invalid): no device"
    return tuple(
        replace(e, outcome="ignored", text=e.text + tail) if e.outcome == "visible" else e
        for e in explanations
    )


def explain(
    spec: str | None,
    entries: list[Entry],
    stop_at: int | None,
    dup_at: int | None,
    ordinal_of: Mapping[int, int],
    fate: Mapping[int, str],
) -> tuple[EntryExplanation, ...]:
    if spec is None:
        return ()
    out: list[EntryExplanation] = []
    if spec.strip(C_SPACE) == NO_DEV_FILES and len(entries) == 1:
        return (
            EntryExplanation(
                1, spec, "stop", f"{_q(spec)} → HTCondor's 'no GPU assigned' value: no device"
            ),
        )
    if not spec.strip(C_SPACE) and len(entries) == 1:
        return (EntryExplanation(1, spec, "stop", f"{_q(spec)} → empty value: no device"),)
    for entry in entries:
        shown = _q(entry.raw)
        result = entry.result
        if result is None:
            end = stop_at if stop_at is not None else dup_at
            out.append(
                EntryExplanation(
                    entry.position,
                    entry.raw,
                    "ignored",
                    f"{shown} → ignored: the list ended at entry {end}",
                )
            )
        elif isinstance(result, Stop):
            out.append(
                EntryExplanation(
                    entry.position, entry.raw, "stop", f"{shown} → {result.reason}: {_END}"
                )
            )
        elif dup_at is not None:
            if entry.position == dup_at:
                text = (
                    f"{shown} → {result.how} → duplicate of entry {entry.duplicate_of}: "
                    "CUDA then exposes no device at all"
                )
                out.append(EntryExplanation(entry.position, entry.raw, "stop", text))
            else:
                text = f"{shown} → {result.how} → dropped: entry {dup_at} duplicates an entry"
                out.append(EntryExplanation(entry.position, entry.raw, "ignored", text))
        elif entry.position in ordinal_of:
            text = f"{shown} → {result.how} → cuda:{ordinal_of[entry.position]}"
            out.append(EntryExplanation(entry.position, entry.raw, "visible", text))
        else:
            text = f"{shown} → {result.how}{fate.get(entry.position, '')}"
            out.append(EntryExplanation(entry.position, entry.raw, "ignored", text))
    return tuple(out)


def list_findings(
    spec: str,
    entries: list[Entry],
    stop_at: int | None,
    dup_at: int | None,
    snapshot: Snapshot,
) -> list[Finding]:
    findings: list[Finding] = []
    if stop_at is not None:
        stop = entries[stop_at - 1]
        assert isinstance(stop.result, Stop)
        dropped = len(entries) - stop_at
        if dropped > 0 or stop.result.looks_like_device:
            later = f"; the {dropped} later entr{'y is' if dropped == 1 else 'ies are'} ignored"
            findings.append(
                Finding(
                    code="VIS-TRUNCATED",
                    severity="warning",
                    message=f"CUDA_VISIBLE_DEVICES={_q(spec)}: entry {stop_at} "
                    f"({_q(stop.raw)}) is invalid ({stop.result.reason}), so the list "
                    f"ends before it{later if dropped else ''}.",
                    fix="Remove or correct that entry; list only valid, distinct indices "
                    "or UUIDs (see nvidia-smi -L).",
                    subject="CUDA_VISIBLE_DEVICES",
                )
            )
    if dup_at is not None:
        dup = entries[dup_at - 1]
        findings.append(
            Finding(
                code="VIS-DUPLICATE",
                severity="error",
                message=f"CUDA_VISIBLE_DEVICES={_q(spec)}: entry {dup_at} ({_q(dup.raw)}) "
                f"selects the same device as entry {dup.duplicate_of}: cuInit fails with "
                "CUDA_ERROR_INVALID_DEVICE, so no GPU is usable in this process. torch counts "
                "0 devices and torch.cuda.is_available() is False.",
                fix="List each GPU once.",
                predicts=unexpected_device_count(),
                subject="CUDA_VISIBLE_DEVICES",
            )
        )
    reached = entries if stop_at is None and dup_at is None else entries[: (stop_at or dup_at)]
    spaced = [
        e
        for e in reached
        if isinstance(e.result, Stop)
        and e.raw != e.trimmed
        and e.trimmed.startswith(("GPU-", "MIG-"))
    ]
    if spaced:
        first = spaced[0]
        findings.append(
            Finding(
                code="VIS-UUID-SPACE",
                severity="warning",
                message=f"Entry {first.position} ({_q(first.raw)}) has white space around a "
                "UUID: CUDA reads no UUID there, so the entry selects nothing and the list "
                "ends before it.",
                fix="Remove the spaces: CUDA_VISIBLE_DEVICES="
                + ",".join(e.trimmed for e in entries),
                subject="CUDA_VISIBLE_DEVICES",
            )
        )
    findings.extend(_case_findings(entries))
    trailing = [
        e
        for e in reached
        if isinstance(e.result, Target)
        and entry_kind(e.raw) == "integer"
        and e.trimmed.lstrip("+-").lstrip(DIGITS) != ""
    ]
    if trailing:
        read = ", ".join(f"{_q(e.raw)} as {cuda_index(e.raw)}" for e in trailing)
        findings.append(
            Finding(
                code="VIS-ENTRY-TRAILING",
                severity="warning",
                message=f"CUDA reads an index like C's strtoul, keeping only the leading "
                f"digits: it reads {read}. Ranges (0-3) and hex (0x1) are not supported.",
                fix="Write each index in decimal, separated by commas: e.g. 0,1,2,3.",
                subject="CUDA_VISIBLE_DEVICES",
            )
        )
    return findings


def _case_findings(entries: list[Entry]) -> list[Finding]:
    # The prefix is case-sensitive (recorded on driver 580: "gpu-300c76ef" selects
    # nothing), while the hex after it is not (that difference is torch's, and
    # VIS-TORCH-COUNT reports it).
    for entry in entries:
        head = entry.trimmed[:4]
        if head.upper() not in ("GPU-", "MIG-") or head == head.upper():
            continue
        fixed = head.upper() + entry.trimmed[4:].lower()
        return [
            Finding(
                code="VIS-UUID-CASE",
                severity="warning",
                message=f"Entry {entry.position} ({_q(entry.raw)}) starts with {_q(head)}: "
                "CUDA recognises only the upper-case prefixes 'GPU-' and 'MIG-', so it reads "
                "the entry as an index, finds no digit, and the entry selects nothing.",
                fix=f"Write it as nvidia-smi -L prints it: {_q(fixed)}.",
                subject="CUDA_VISIBLE_DEVICES",
            )
        ]
    return []


def no_devices(spec: str, deliberate: bool, snapshot: Snapshot) -> Finding:
    # With no device cuInit fails (CUDA_ERROR_NO_DEVICE, recorded on driver 580 for
    # "", " " and "NoDevFiles" too): an error for a job that is checked for GPUs,
    # even when hiding them was deliberate.
    if deliberate:
        return Finding(
            code="VIS-NO-DEVICES",
            severity="error",
            message=f"CUDA_VISIBLE_DEVICES={_q(spec)} hides every GPU: cuInit fails with "
            "CUDA_ERROR_NO_DEVICE, torch.cuda.is_available() is False and the job runs "
            "without CUDA.",
            fix="If the job needs a GPU, unset CUDA_VISIBLE_DEVICES or list the GPUs to use "
            "(check the job's GPU request); if it is meant to run on the CPU, skip this check.",
            predicts=NO_CUDA_GPUS,
            subject="CUDA_VISIBLE_DEVICES",
        )
    where = "this machine has no GPU CUDA can use" if not enumerable(snapshot) else ""
    return Finding(
        code="VIS-NO-DEVICES",
        severity="error",
        message=f"CUDA_VISIBLE_DEVICES={_q(spec)} exposes no GPU: cuInit fails with "
        "CUDA_ERROR_NO_DEVICE" + (f" ({where})." if where else "."),
        fix="Use indices from 0 to the GPU count - 1, or UUIDs from `nvidia-smi -L`.",
        predicts=NO_CUDA_GPUS,
        subject="CUDA_VISIBLE_DEVICES",
    )


def order_findings(
    spec: str | None, entries: list[Entry], order: Order, snapshot: Snapshot
) -> list[Finding]:
    if order.name == PCI_BUS_ID or not models_differ(order.pool):
        return []
    uses_indices = spec is None or (
        bool(entries) and entries[0].trimmed != "" and entry_kind(entries[0].trimmed) == "integer"
    )
    if not uses_indices or not order.certain:
        # UUID lists do not depend on the order; an unknown order has VIS-ORDER-UNCERTAIN.
        return []
    pci = sorted(order.pool, key=lambda g: g.nvml_index)
    differs = list(order.pool) != pci
    detail = (
        "here FASTEST_FIRST numbers the GPUs differently from nvidia-smi: "
        + ", ".join(f"CUDA {i} = nvidia-smi {g.nvml_index}" for i, g in enumerate(order.pool))
        if differs
        else "FASTEST_FIRST happens to match nvidia-smi order today, but that is not guaranteed"
    )
    return [
        Finding(
            code="VIS-ORDER-MIXED",
            severity="warning",
            message=f"This node mixes GPU models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: "
            f"CUDA numbers GPUs fastest first, not like nvidia-smi ({detail}).",
            fix="export CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA indices match nvidia-smi.",
            subject="CUDA_DEVICE_ORDER",
        )
    ]


def mismatch_findings(devices: Sequence[VisibleDevice]) -> list[Finding]:
    pairs = [d for d in devices if d.mig_uuid is None and d.cuda_ordinal != d.nvml_index]
    if not pairs:
        return []
    text = ", ".join(f"cuda:{d.cuda_ordinal} is nvidia-smi GPU {d.nvml_index}" for d in pairs)
    return [
        Finding(
            code="VIS-INDEX-MISMATCH",
            severity="info",
            message=f"Inside this process device numbers differ from nvidia-smi's: {text}.",
            fix="Use cuda:<cuda_ordinal> in code and the nvidia-smi index (or UUID) with "
            "nvidia-smi; gpudiag list shows both.",
            subject="CUDA_VISIBLE_DEVICES",
        )
    ]
