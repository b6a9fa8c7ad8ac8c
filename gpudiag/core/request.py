"""The check request: what the user asks ``check`` to evaluate, typed and validated once.

The command line (``gpudiag check``), the Python API (``gpudiag.check``/``guard``) and
``gpudiag lint --check`` each build one :class:`CheckRequest`; its validation is the
only one. An invalid value raises :class:`RequestError` carrying the *field* name, and
each builder words it the way its caller gave the input: ``--device-ids``,
``GPUDIAG_CHECK_DEVICE_IDS`` or the ``device_ids=`` keyword (issue 16, item 2).

Machine facts (the snapshot, the environment's launcher variables, the driver) are
not part of the request: :func:`gpudiag.core.check.run_check` takes them beside it.

Pure: imports model-level code only (the launcher table is read on demand).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Final

from gpudiag.core.bounds import out_of_bounds
from gpudiag.errors import GpudiagInputError
from gpudiag.parsing import is_int_text, show_value


class _FromSnapshot(enum.Enum):
    TOKEN = "from-snapshot"


#: Default of ``visible``/``order``: take the value recorded in the snapshot's env.
FROM_SNAPSHOT: Final = _FromSnapshot.TOKEN

ORDERS = ("PCI_BUS_ID", "FASTEST_FIRST")
BACKENDS = ("nccl", "gloo")
AMP_DTYPES = ("bf16", "fp16")
MODEL_DTYPES = ("bf16", "fp16", "fp32")

# A shell/POSIX environment variable name (what os.environ[...] can be asked for).
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class RequestError(GpudiagInputError):
    """An invalid request field. ``str()`` names it in Python's terms; builders use
    :meth:`worded` to name it the way their caller gave it.

    Attributes:
        field: the :class:`CheckRequest` field at fault.
        problem: what is wrong, after the name (``must be at least 1, got 0``).
        python: the same for a Python caller, when it differs (``not int 0``).
        refs: other fields ``problem`` names as ``{field}``, spelled by the builder too.
    """

    def __init__(
        self,
        field: str,
        problem: str,
        *,
        python: str | None = None,
        refs: tuple[str, ...] = (),
    ) -> None:
        self.field = field
        self.problem = problem
        self.python = python
        self.refs = refs
        super().__init__(self.worded(str, python=True))

    def worded(self, spell: Callable[[str], str], *, python: bool = False) -> str:
        """The one-line message, each field named by ``spell(field)``."""
        text = self.python if python and self.python is not None else self.problem
        for ref in self.refs:
            text = text.replace("{" + ref + "}", spell(ref))
        return f"{spell(self.field)} {text}"


class RequestTypeError(RequestError, TypeError):
    """A field of the wrong Python type (only the Python API can give one)."""


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _not(value: object) -> str:
    return f"not {type(value).__name__} {_shown(value)}"


def _type_error(field: str, value: object, wanted: str) -> RequestTypeError:
    return RequestTypeError(field, f"must be {wanted}, {_not(value)}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(field: str, value: object) -> tuple[int, ...] | None:
    if value is None:
        return None
    if (
        isinstance(value, (str, bytes))
        or not isinstance(value, Sequence)
        or not all(_is_int(i) for i in value)
    ):
        raise _type_error(field, value, "a sequence of int (e.g. [0, 1]) or None")
    return tuple(value)


def _choice(field: str, value: object, choices: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _type_error(field, value, "a str or None")
    key = value.strip().lower()
    if key not in choices:
        raise RequestError(
            field,
            f"must be one of {', '.join(choices)}, not {value!r}",
            python=f"must be {' or '.join(map(repr, choices))} or None, {_not(value)}",
        )
    return key


def _at_least(field: str, value: int | None, minimum: int) -> None:
    if value is not None and value < minimum:
        worded = "0 or more" if minimum == 0 else f"at least {minimum}"
        raise RequestError(
            field,
            f"must be {worded}, got {value}",
            python=f"must be {minimum} or more, {_not(value)}",
        )


def module_device_key(text: str) -> tuple[str, int | None] | None:
    """``cpu``, ``cuda``, ``cuda:K`` or ``K`` -> (type, ordinal or None); None otherwise."""
    value = text.strip().lower()
    if value in ("cpu", "cuda"):
        return (value, None)
    number = value[5:] if value.startswith("cuda:") else value
    # torch.device accepts plain ASCII ordinals only ("cuda:01", "cuda:²" raise).
    if is_int_text(number) and number[0] not in "+-" and (number == "0" or number[0] != "0"):
        return ("cuda", int(number))
    return None


def _launcher(value: str) -> str:
    # The launcher table is imported here only: most requests name no launcher.
    from gpudiag.launch.table import CHOOSABLE, canonical_launcher

    name = canonical_launcher(value)
    if name is None:
        raise RequestError(
            "launcher",
            f"must be one of {', '.join(CHOOSABLE)}, not {value.strip()!r}",
            python=f"must be one of {', '.join(map(repr, CHOOSABLE))} or None, {_not(value)}",
        )
    return name


@dataclass(frozen=True)
class CheckRequest:
    """Everything the user asks ``check`` to evaluate (``docs/check.md``).

    Built by the CLI, the Python API and ``lint --check``; constructing one validates
    it (raises :class:`RequestError`) and normalises it: sequences become tuples,
    choices lower case, ``launcher`` its canonical name (``deepspeed`` when only
    DeepSpeed's include/exclude is given), ``script_reads`` without repeats.

    Attributes:
        visible: ``CUDA_VISIBLE_DEVICES`` to evaluate (None = unset); default: the
            snapshot's recorded value.
        order: ``CUDA_DEVICE_ORDER`` to evaluate; default: the snapshot's.
        device_ids, output_device, set_device, module_device, batch_size:
            DataParallel inputs (:func:`~gpudiag.core.dataparallel.validate_dataparallel`).
        dataparallel: validate DataParallel even when none of its options is given.
        set_device_per_rank: one ``torch.cuda.set_device`` ordinal per local rank.
        local_rank: the local rank a single ``set_device`` describes.
        nproc_per_node, backend: DDP inputs (:func:`~gpudiag.core.ddp.validate_ddp`).
        launcher: evaluate a launch by this launcher before it starts.
        deepspeed_include, deepspeed_exclude: DeepSpeed's ``--include``/``--exclude``.
        ddp_devices: the cuda ordinals the DDP ranks use (local rank r on the r-th).
        launched: the job asserts it runs inside a launcher.
        script_reads: variables the script reads itself before ``init_process_group``.
        init_rank_args: ``init_process_group`` gets ``rank=``/``world_size=``.
        amp: ``bf16`` or ``fp16`` when the job uses autocast.
        model_dtype: the dtype the model was trained in.
        tf32: the job switches TF32 on.
        expect_gpus: the number of GPUs the job must see, or None.
        num_workers: the DataLoader ``num_workers`` of each rank (the ``/dev/shm`` rule
            counts local ranks x (1 + workers)), or None when not said.
    """

    visible: str | _FromSnapshot | None = FROM_SNAPSHOT
    order: str | _FromSnapshot | None = FROM_SNAPSHOT
    device_ids: Sequence[int] | None = None
    dataparallel: bool = False
    output_device: int | None = None
    set_device: int | None = None
    set_device_per_rank: Sequence[int] | None = None
    local_rank: int | None = None
    module_device: str | None = None
    batch_size: int | None = None
    nproc_per_node: int | None = None
    backend: str | None = None
    launcher: str | None = None
    deepspeed_include: str | None = None
    deepspeed_exclude: str | None = None
    ddp_devices: Sequence[int] | None = None
    launched: bool = False
    script_reads: Sequence[str] = ()
    init_rank_args: bool = False
    amp: str | None = None
    model_dtype: str | None = None
    tf32: bool = False
    expect_gpus: int | None = None
    num_workers: int | None = None

    def __post_init__(self) -> None:
        for name, value in _validated(self).items():
            object.__setattr__(self, name, value)

    def rank_set_device(self, env: Mapping[str, str]) -> None:
        """Check ``set_device_per_rank`` against the environment's ``LOCAL_RANK``
        (a machine fact, so not part of construction).

        Raises:
            RequestError: this rank has no value in ``set_device_per_rank``.
        """
        per_rank = self.set_device_per_rank
        if per_rank is None or self.local_rank is not None:
            return
        text = (env.get("LOCAL_RANK") or "").strip()
        rank = int(text) if is_int_text(text) else None
        if rank is not None and not 0 <= rank < len(per_rank):
            raise RequestError(
                "set_device_per_rank",
                f"has {len(per_rank)} value(s), one per local rank, but LOCAL_RANK is {rank}",
            )


#: The request's field names, in declaration order.
FIELDS: tuple[str, ...] = tuple(f.name for f in fields(CheckRequest))


def _validated(r: CheckRequest) -> dict[str, object]:
    """The normalised field values.

    Raises:
        RequestTypeError: a field of the wrong type.
        RequestError: a value outside its range or choices, or fields that conflict.
    """
    out: dict[str, object] = {}
    for name in ("visible", "order"):
        value = getattr(r, name)
        if value is not None and value is not FROM_SNAPSHOT and not isinstance(value, str):
            raise _type_error(name, value, "a str or None")
    if isinstance(r.order, str) and r.order not in ORDERS:
        raise RequestError(
            "order",
            f"must be {' or '.join(ORDERS)}, not {r.order!r}",
            python=f"must be 'PCI_BUS_ID', 'FASTEST_FIRST' or None, {_not(r.order)}",
        )
    for name in ("device_ids", "set_device_per_rank", "ddp_devices"):
        out[name] = _ints(name, getattr(r, name))
    reads = r.script_reads
    if (
        isinstance(reads, (str, bytes))
        or not isinstance(reads, Sequence)
        or not all(isinstance(v, str) for v in reads)
    ):
        # A plain "LOCAL_RANK" would be read letter by letter.
        raise _type_error(
            "script_reads", reads, "a sequence of variable names (e.g. ['LOCAL_RANK'])"
        )
    for name in ("launcher", "deepspeed_include", "deepspeed_exclude", "module_device"):
        value = getattr(r, name)
        if value is not None and not isinstance(value, str):
            raise _type_error(name, value, "a str or None")
    for name in (
        "output_device",
        "set_device",
        "local_rank",
        "batch_size",
        "nproc_per_node",
        "expect_gpus",
        "num_workers",
    ):
        value = getattr(r, name)
        if value is not None and not _is_int(value):
            raise _type_error(name, value, "an int or None")
    for name in ("dataparallel", "launched", "init_rank_args", "tf32"):
        if not isinstance(getattr(r, name), bool):
            raise _type_error(name, getattr(r, name), "True or False")

    out["backend"] = _choice("backend", r.backend, BACKENDS)
    out["amp"] = _choice("amp", r.amp, AMP_DTYPES)
    out["model_dtype"] = _choice("model_dtype", r.model_dtype, MODEL_DTYPES)
    _at_least("batch_size", r.batch_size, 1)
    _at_least("nproc_per_node", r.nproc_per_node, 1)
    _at_least("expect_gpus", r.expect_gpus, 0)
    _at_least("num_workers", r.num_workers, 0)
    _at_least("local_rank", r.local_rank, 0)
    if r.module_device is not None and module_device_key(r.module_device) is None:
        raise RequestError(
            "module_device",
            f"{show_value(r.module_device)} is not cpu, cuda, cuda:K or K "
            "(K a non-negative integer)",
        )
    names = [name.strip() for name in reads]
    for name in names:
        if not _VAR_NAME.fullmatch(name):
            raise RequestError(
                "script_reads", f"must list environment variable names, not {name!r}"
            )
    out["script_reads"] = tuple(dict.fromkeys(names))
    ddp_devices = out["ddp_devices"]
    if isinstance(ddp_devices, tuple) and any(i < 0 for i in ddp_devices):
        raise RequestError(
            "ddp_devices", f"must be cuda ordinals (0 or more), got {list(ddp_devices)}"
        )
    # Issue 21: every count, list and text within its documented bound.
    bad = out_of_bounds({name: out.get(name, getattr(r, name)) for name in FIELDS})
    if bad is not None:
        raise RequestError(*bad)
    out["launcher"] = _launcher_name(r)
    _check_per_rank(r, out["set_device_per_rank"])
    return out


def _launcher_name(r: CheckRequest) -> str | None:
    name = _launcher(r.launcher) if r.launcher is not None else None
    for flag in ("deepspeed_include", "deepspeed_exclude"):
        if getattr(r, flag) is None:
            continue
        if name not in (None, "deepspeed"):
            raise RequestError(
                flag,
                "given: DeepSpeed's include/exclude need {launcher} deepspeed, "
                f"not {r.launcher!r}",
                refs=("launcher",),
            )
        name = "deepspeed"
    return name


def _check_per_rank(r: CheckRequest, per_rank: object) -> None:
    if not isinstance(per_rank, tuple):
        return
    if r.set_device is not None:
        raise RequestError(
            "set_device_per_rank",
            "and {set_device} cannot both be given: one value, or one per local rank",
            refs=("set_device",),
        )
    if not per_rank:
        raise RequestError("set_device_per_rank", "needs at least one value")
    if r.nproc_per_node is not None and len(per_rank) != r.nproc_per_node:
        raise RequestError(
            "set_device_per_rank",
            f"lists {len(per_rank)} values (one per local rank) but {{nproc_per_node}} "
            f"is {r.nproc_per_node}",
            refs=("nproc_per_node",),
        )
    if r.local_rank is not None and r.local_rank >= len(per_rank):
        raise RequestError(
            "local_rank",
            f"is {r.local_rank} but {{set_device_per_rank}} has {len(per_rank)} value(s), "
            "one per local rank",
            refs=("set_device_per_rank",),
        )
