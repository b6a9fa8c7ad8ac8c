"""The calls that put a CUDA context on the current device, and ``torch.load``'s placement.

What :class:`~gpudiag.lint.loopflow.FlowWalker` records for
:mod:`gpudiag.lint.rules_context` (issue 18, "memory held by others": every rank making a
context on cuda:0). A CUDA context is made on a device by the first runtime call that
needs one there (an allocation, a stream, a synchronisation); until
``torch.cuda.set_device`` the current device of every process is cuda:0. Sources (torch
2.13.0, read in the installed package):

- torch/cuda/__init__.py ``synchronize(device=None)``: ``with torch.cuda.device(device):
  torch._C._cuda_synchronize()``, "the current device ... if device is None";
- torch/cuda/memory.py ``mem_get_info(device=None)``: ``device = current_device()``, then
  ``cudart().cudaMemGetInfo(device)``;
- torch/cuda/streams.py ``Stream.__new__(cls, device=None, ...)``: with no device, the
  stream is made on the current device;
- torch/cuda/memory.py ``empty_cache()``: ``if is_initialized():
  torch._C._cuda_emptyCache()``: nothing before torch's CUDA state is initialised, and
  after it a context on the current device (pytorch/pytorch#25752, open since torch
  1.1; #144025, torch 2.4.1; Lightning-AI/pytorch-lightning#614);
- torch/serialization.py ``load(f, map_location=None, ...)``: without ``map_location``,
  ``default_restore_location`` restores each storage with ``_deserialize("cuda", obj,
  location)``, ``obj.to(device=location)``: to the device it was saved from.

Each hook costs a dictionary look-up per call the walker resolves; nothing walks the tree.
"""

from __future__ import annotations

import ast

from gpudiag.lint.syntax import argument
from gpudiag.lint.values import Val

#: ``torch.cuda`` calls that make a context on the current device when given no device,
#: each with the position of its device argument and whether it does so only once
#: torch's CUDA state is initialised (``empty_cache``).
CONTEXT_CALLS: dict[str, tuple[int, bool]] = {
    "torch.cuda.synchronize": (0, False),
    "torch.cuda.mem_get_info": (0, False),
    "torch.cuda.Stream": (0, False),
    "torch.cuda.streams.Stream": (0, False),
    "torch.cuda.empty_cache": (99, True),
    "torch.cuda.memory.empty_cache": (99, True),
}


def on_current_device(path: str, node: ast.Call) -> bool:
    """Whether a call of :data:`CONTEXT_CALLS` works on the current device: no device
    given (``None`` is none), and no ``*args``/``**kwargs`` that may hold one."""
    position, _ = CONTEXT_CALLS[path]
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        return False
    given = argument(node, position, "device")
    return given is None or (isinstance(given, ast.Constant) and given.value is None)


def map_location_given(node: ast.Call) -> bool:
    """Whether ``torch.load`` is told where to put the tensors (``None`` is not; a
    ``*args``/``**kwargs`` may be)."""
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        return True
    given = argument(node, 1, "map_location")
    return given is not None and not (isinstance(given, ast.Constant) and given.value is None)


def note_part(val: Val, base: Val, loads: dict[int, tuple[Val, ast.Call]]) -> None:
    """Note that ``val``, a part of a checkpoint (``ckpt["model"]``, ``ckpt.get("model")``),
    was read by the same ``torch.load`` call as ``base``, the checkpoint: the rules follow a
    value handed to ``load_state_dict`` back to its load (a name, or a parameter of a
    function the walker followed into, holds the same value)."""
    found = loads.get(id(base))
    if found is not None and found[0] is base:
        loads[id(val)] = (val, found[1])


def origin_of(val: Val, loads: dict[int, tuple[Val, ast.Call]]) -> ast.Call | None:
    """The ``torch.load`` call that read ``val``, if the walker saw it."""
    found = loads.get(id(val))
    return found[1] if found is not None and found[0] is val else None
