"""torch backend: what ``torch.cuda`` reports, queried in a child process.

Never imports torch here: the query runs in ``gpudiag.backends._torch_child`` so
the caller's process never initialises CUDA (CUDA reads
``CUDA_VISIBLE_DEVICES`` once, at initialisation, and ignores later changes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpudiag.backends.subproc import Runner, child_env, query_child, run_child
from gpudiag.model import SourceStatus, TorchInfo
from gpudiag.snapshot import SnapshotError, torch_from_json

#: Importing torch and initialising CUDA can take tens of seconds on a cold node.
DEFAULT_TIMEOUT_S = 120.0


def collect_torch(
    env_overrides: Mapping[str, str | None] | None = None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    runner: Runner = run_child,
) -> tuple[TorchInfo | None, SourceStatus]:
    """torch's view of the GPUs, under this environment plus ``env_overrides``.

    Returns:
        (info, status): info is None when torch could not be asked at all.
    """
    payload, error = query_child(
        "gpudiag.backends._torch_child", child_env(env_overrides), timeout_s, runner, "torch query"
    )
    if payload is None:
        return None, SourceStatus("error", error)
    return parse_torch_json(payload)


def parse_torch_json(data: Mapping[str, Any]) -> tuple[TorchInfo | None, SourceStatus]:
    """Turn the child's JSON into (TorchInfo, status)."""
    if "import_error" in data:
        return None, SourceStatus("unavailable", f"torch is not installed ({data['import_error']})")
    try:
        info = torch_from_json(data)
    except SnapshotError as exc:
        return None, SourceStatus("error", f"torch query printed unexpected data: {exc}")
    assert info is not None
    if info.error and not info.cpu_only:
        return info, SourceStatus("error", f"torch could not initialise CUDA: {info.error}")
    return info, SourceStatus("ok")
