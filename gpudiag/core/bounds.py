"""The bounds of every count, list and number a ``check`` (or ``list``) input may hold.

Issue 21: inputs had no upper bound, so 400,000 ``--device-ids`` kept ``check``
busy for 90 s and ``--expect-gpus 999999999999999999`` was taken at its word.
No machine has more than a few dozen GPUs per node; these bounds are far above
any real job and far below what could cost time or memory. Beyond them the
input is refused with one line (exit 2), worded as the caller gave it
(:class:`gpudiag.core.request.CheckRequest` raises; docs/check.md lists them).

Pure: constants and functions of plain values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sized

#: The most GPUs (cuda devices) per node gpudiag reasons about, and so the most
#: entries in any list of devices, ranks or names (``--device-ids``,
#: ``--set-device K0,K1,…``, ``--ddp-devices``, ``--script-reads``) and the
#: largest ``--nproc-per-node`` and ``--expect-gpus``.
MAX_DEVICES = 4096

#: The largest cuda ordinal or local rank, in absolute value (ordinals may be
#: negative on purpose: ``output_device=-1`` is the CPU, a negative
#: ``set_device`` is a no-op, a negative ``device_ids[0]`` is a predicted error).
MAX_ORDINAL = MAX_DEVICES - 1

#: The largest ``--batch-size``: a C ``int`` (2**31 - 1), far above any batch.
MAX_BATCH_SIZE = 2**31 - 1

#: The longest text field (``--visible``, ``--deepspeed-include``, …), in
#: characters: 1 MiB, eight times Linux's limit on one argument or variable
#: (MAX_ARG_STRLEN, 128 KiB), so only the Python API (or CliRunner) reaches
#: it. ``--visible`` has no count of its own: resolving it is linear, and
#: 65,000 entries (380 KB) are a tested case (tests/test_gate_inputs.py).
MAX_TEXT_CHARS = 1024 * 1024

#: (lowest, highest) allowed value of each integer field of the request.
INT_RANGES: dict[str, tuple[int, int]] = {
    "output_device": (-MAX_ORDINAL, MAX_ORDINAL),
    "set_device": (-MAX_ORDINAL, MAX_ORDINAL),
    "local_rank": (0, MAX_ORDINAL),
    "batch_size": (1, MAX_BATCH_SIZE),
    "nproc_per_node": (1, MAX_DEVICES),
    "expect_gpus": (0, MAX_DEVICES),
    # DataLoader workers per rank: far above the cores any node has.
    "num_workers": (0, MAX_DEVICES),
}

#: (lowest, highest) allowed entry of each list-of-ordinals field.
LIST_RANGES: dict[str, tuple[int, int]] = {
    "device_ids": (-MAX_ORDINAL, MAX_ORDINAL),
    "set_device_per_rank": (-MAX_ORDINAL, MAX_ORDINAL),
    "ddp_devices": (0, MAX_ORDINAL),
}


def too_long(values: Sized, what: str = "values") -> str | None:
    """Why a list is too long (``lists 5000 values: at most 4096``), or None."""
    if len(values) <= MAX_DEVICES:
        return None
    return f"lists {len(values)} {what}: at most {MAX_DEVICES} are accepted"


def text_problem(text: str) -> str | None:
    """Why a text value (a ``CUDA_VISIBLE_DEVICES`` spec, a DeepSpeed host list…)
    is too big, or None: over :data:`MAX_TEXT_CHARS` characters."""
    if len(text) > MAX_TEXT_CHARS:
        return f"is {len(text)} characters long: at most {MAX_TEXT_CHARS} are accepted"
    return None


def visible_problem(spec: str) -> str | None:
    """Why a ``--visible`` spec is too big (over :data:`MAX_TEXT_CHARS`
    characters), or None."""
    return text_problem(spec)


def out_of_range(value: int, low: int, high: int) -> str | None:
    """``must be at most 4096, got 5000`` (or ``at least``), or None when within."""
    if value > high:
        return f"must be at most {high}, got {value}"
    if value < low:
        return f"must be at least {low}, got {value}"
    return None


def out_of_bounds(fields: Mapping[str, object]) -> tuple[str, str] | None:
    """The first (field, problem) of a request's values (types already checked,
    lists as tuples) that is beyond its bound, or None. ``problem`` follows the
    field's name: ``--device-ids lists 5000 values: at most 4096 are accepted``."""
    for name, (low, high) in INT_RANGES.items():
        value = fields.get(name)
        problem = out_of_range(value, low, high) if isinstance(value, int) else None
        if problem is not None:
            return name, problem
    for name, (low, high) in LIST_RANGES.items():
        values = fields.get(name)
        if not isinstance(values, tuple):
            continue
        problem = too_long(values)
        for value in values if problem is None else ():
            problem = out_of_range(value, low, high)
            if problem is not None:
                problem = f"entry {problem}"
                break
        if problem is not None:
            return name, problem
    reads = fields.get("script_reads")
    if isinstance(reads, tuple) and too_long(reads, "names") is not None:
        return "script_reads", str(too_long(reads, "names"))
    visible = fields.get("visible")
    if isinstance(visible, str) and visible_problem(visible) is not None:
        return "visible", str(visible_problem(visible))
    for name in ("launcher", "deepspeed_include", "deepspeed_exclude", "module_device"):
        value = fields.get(name)
        if isinstance(value, str) and text_problem(value) is not None:
            return name, str(text_problem(value))
    return _module_ordinal(fields.get("module_device"))


def _module_ordinal(text: object) -> tuple[str, str] | None:
    # cuda:K or K, already checked to be one of the accepted spellings
    if not isinstance(text, str):
        return None
    value = text.strip().lower()
    number = value[5:] if value.startswith("cuda:") else value
    if number.isascii() and number.isdigit() and int(number) > MAX_ORDINAL:
        return "module_device", f"ordinal must be at most {MAX_ORDINAL}, got {int(number)}"
    return None
