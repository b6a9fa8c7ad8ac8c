"""GPUtil backend: nvidia-smi's CSV view, through GPUtil, in a child process.

GPUtil is a thin ``nvidia-smi`` parser. Two of its failure modes must not pass
for facts: its import breaks on Python >= 3.12 without setuptools (it imports
``distutils``), and a missing ``nvidia-smi`` makes ``getGPUs()`` return ``[]``,
which reads like "zero GPUs". Both are reported as the source being unavailable.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpudiag.model import GputilGpu, SourceStatus

if TYPE_CHECKING:
    from gpudiag.backends.subproc import Runner

DEFAULT_TIMEOUT_S = 30.0


def collect_gputil(
    *, timeout_s: float = DEFAULT_TIMEOUT_S, runner: Runner | None = None
) -> tuple[tuple[GputilGpu, ...] | None, SourceStatus]:
    """GPUtil's GPUs, or None with the reason it could not be asked.

    ``runner`` defaults to :func:`gpudiag.backends.subproc.run_child`; the child
    machinery is imported only here, so the no-nvidia-smi answer costs nothing.
    """
    from gpudiag.backends.subproc import child_env, query_child, run_child

    runner = run_child if runner is None else runner
    payload, error = query_child(
        "gpudiag.backends._gputil_child", _env(child_env()), timeout_s, runner, "GPUtil query"
    )
    if payload is None:
        return None, SourceStatus("error", error)
    return parse_gputil_json(payload)


def _env(env: dict[str, str]) -> dict[str, str]:
    """The child's environment. GPUtil 1.4 imports ``distutils`` for one function;
    under setuptools' distutils shim that import took 0.16-0.5 s here (stdlib's:
    0.02-0.04 s), the largest part of a live ``gpudiag list``. Before Python 3.12,
    which still has stdlib distutils, the child asks for it
    (``SETUPTOOLS_USE_DISTUTILS=stdlib``) unless the user chose otherwise."""
    if sys.version_info < (3, 12):
        env.setdefault("SETUPTOOLS_USE_DISTUTILS", "stdlib")
    return env


def parse_gputil_json(
    data: Mapping[str, Any],
) -> tuple[tuple[GputilGpu, ...] | None, SourceStatus]:
    """Turn the child's JSON into (GPUs, status)."""
    if data.get("no_smi"):
        return None, SourceStatus(
            "unavailable",
            "nvidia-smi not found on PATH (GPUtil would have reported zero GPUs)",
        )
    if "import_error" in data:
        return None, SourceStatus(
            "unavailable",
            f"GPUtil failed to import ({data['import_error']}); on Python >= 3.12 "
            "it needs setuptools for distutils",
        )
    if "error" in data:
        return None, SourceStatus("error", f"GPUtil could not parse nvidia-smi: {data['error']}")
    from gpudiag.snapshot import SnapshotError, gputil_from_json

    try:
        gpus = gputil_from_json(data.get("gpus", []))
    except SnapshotError as exc:
        return None, SourceStatus("error", f"GPUtil query printed unexpected data: {exc}")
    return gpus, SourceStatus("ok")
