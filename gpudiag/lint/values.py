"""Abstract values for the lint's simple intra-module data flow.

A :class:`Val` is what the walker knows about an expression: a constant when it
is one, *tags* saying where a number came from (``RANK`` for the global rank,
``LOCAL`` for the node-local rank, ``RANDOM`` for a random port…), the kind of
object (a module, a DataParallel wrapper, a sampler…) and, for devices and
modules, where they live. Nothing here imports torch: names are matched as the
dotted paths the script's imports resolve to.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

from gpudiag.launch.table import variables_of
from gpudiag.parsing import MAX_INT_DIGITS

#: Environment variables holding the global rank: every launcher's, from the one
#: launcher table (torchrun, Slurm, Open MPI, MPICH/Intel MPI, Horovod...).
GLOBAL_RANK_VARS = variables_of("rank")
#: Environment variables holding the rank within the node.
LOCAL_RANK_VARS = variables_of("local_rank")
RANK_TAGS = frozenset({"RANK", "LOCAL", "SPAWN"})
#: Tags that survive an unknown function or method call, attribute or subscript: a
#: random port stays random and a float16 model stays float16, but ``f(rank)`` or
#: ``table[rank]`` is no longer the rank.
WEAK_TAGS = frozenset({"RANDOM", "HALF"})

#: A device: (type, index). index None = "the current device" (``"cuda"``),
#: an int = a literal ordinal, "?" = computed at run time.
Dev = tuple[str, "int | str | None"]

_NO_TAGS: frozenset[str] = frozenset()


#: the tag of a DataParallel/DDP wrapper that some arms of an ``if`` build and others do
#: not (:mod:`gpudiag.lint.arms`)
ONE_PATH_WRAPPER = "arm:one-path-wrapper"


@dataclass(frozen=True, init=False)
class Val:
    """What is known about one value.

    Frozen; its ``__init__`` is written out because the walker makes one for nearly
    every expression it reads, and the generated one of a frozen dataclass sets each
    field through ``object.__setattr__``: 1.9 us a value, 0.5 us this way (issue 17:
    lint's time)."""

    tags: frozenset[str] = _NO_TAGS
    const: object = None
    has_const: bool = False
    kind: str | None = None
    device: Dev | None = None
    #: the cuda ordinal a bare ``"cuda"`` placement resolved to (set_device), if known
    ordinal: int | None = None
    #: where the object was created or last placed (for messages)
    node: ast.AST | None = field(default=None, compare=False)
    #: extra facts (e.g. a DataLoader's sampler), compared by identity only
    extra: tuple[object, ...] = field(default=(), compare=False)

    def __init__(
        self,
        tags: frozenset[str] = _NO_TAGS,
        const: object = None,
        has_const: bool = False,
        kind: str | None = None,
        device: Dev | None = None,
        ordinal: int | None = None,
        node: ast.AST | None = None,
        extra: tuple[object, ...] = (),
    ) -> None:
        fields = self.__dict__  # past the frozen __setattr__, as the generated one is
        fields["tags"] = tags
        fields["const"] = const
        fields["has_const"] = has_const
        fields["kind"] = kind
        fields["device"] = device
        fields["ordinal"] = ordinal
        fields["node"] = node
        fields["extra"] = extra

    def with_tags(self, *more: frozenset[str]) -> Val:
        tags = self.tags.union(*more)
        return replace(self, tags=tags)


UNKNOWN = Val()


def const(value: object, node: ast.AST | None = None) -> Val:
    """A known constant."""
    return Val(const=value, has_const=True, node=node)


def union(vals: list[Val]) -> Val:
    """Tags of several values, joined (a computed value: no constant, no kind)."""
    tags: frozenset[str] = frozenset().union(*(v.tags for v in vals)) if vals else _NO_TAGS
    found = [device_of(v) if v.device is None else v.device for v in vals]
    devs = [d for d in found if d is not None]
    cuda = [d for d in devs if d[0] == "cuda"]
    device = cuda[0] if cuda else (devs[0] if devs else None)
    return Val(tags=tags, device=device)


def weak(vals: list[Val]) -> Val:
    """The result of an unknown call on these values: only their weak tags."""
    tags = _NO_TAGS
    for val in vals:
        if val.tags:
            tags = tags | (val.tags & WEAK_TAGS)
    return Val(tags=tags) if tags else UNKNOWN


def int_list(val: Val) -> list[int] | None:
    """A constant list/tuple of ints, or None."""
    if not val.has_const or not isinstance(val.const, (list, tuple)):
        return None
    items = list(val.const)
    if all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        return items
    return None


def as_int(val: Val) -> int | None:
    if val.has_const and isinstance(val.const, int) and not isinstance(val.const, bool):
        return val.const
    return None


def parse_device_text(text: str) -> Dev | None:
    """``"cuda"``, ``"cuda:1"``, ``"cpu"`` → a :data:`Dev`; None if not a device string."""
    head, sep, tail = text.strip().partition(":")
    if head not in ("cuda", "cpu", "mps", "xpu", "meta"):
        return None
    if not sep:
        return (head, None)
    if tail.isascii() and tail.isdigit() and len(tail) <= MAX_INT_DIGITS:
        # at most 18 digits, as gpudiag reads every integer: int() of over 4,300 digits
        # raises (issue 21), and no GPU index comes near it
        return (head, int(tail))
    return (head, "?")


def device_of(val: Val) -> Dev | None:
    """The device a value designates when passed where a device is expected."""
    if val.device is not None and val.kind in (None, "device"):
        return val.device
    if val.has_const:
        if isinstance(val.const, str):
            return parse_device_text(val.const)
        if isinstance(val.const, int) and not isinstance(val.const, bool):
            return ("cuda", val.const)
    if val.tags & RANK_TAGS:
        return ("cuda", "?")
    return None


def dev_text(dev: Dev | None) -> str:
    if dev is None:
        return "the CPU"
    kind, index = dev
    if index is None:
        return kind
    return f"{kind}:{index}"


#: the index ``torch.multiprocessing.spawn`` passes its function first: the process's
#: place among the ones it starts on this host (torch 2.13 torch/multiprocessing/spawn.py,
#: ``fn(i, *args)``). Told apart by identity: anything computed from it is a new value.
SPAWN_INDEX = Val(tags=frozenset({"SPAWN", "LOCAL"}))


def rank_kind(val: Val) -> str | None:
    """``global`` when the value came from the global rank (and was not reduced
    modulo the GPU count), ``local`` for a node-local rank, else None."""
    if "RANK" in val.tags and "LOCAL" not in val.tags and "SPAWN" not in val.tags:
        return "global"
    if val.tags & RANK_TAGS:
        return "local"
    return None
