"""Collect a live :class:`~gpudiag.model.Snapshot` from NVML, torch and GPUtil.

Each source is asked on its own and fails on its own (torch's
``collect_env.py`` style): a missing driver, a CPU-only torch or a broken GPUtil
each leave their part None and say why in ``Snapshot.sources``.

Speed (issue "live answers as fast as nvitop"): NVML is asked in this process
while the children (the CUDA-driver child, GPUtil's nvidia-smi child and, with
``deep``, the torch child) run side by side. Without ``deep`` torch is not
imported at all: its version and CUDA build are read from its installed files
(:mod:`gpudiag.backends.torchdist`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from gpudiag.backends.holders import with_memory_holders
from gpudiag.backends.host import collect_host
from gpudiag.backends.net import collect_node
from gpudiag.backends.nvml import collect_nvml
from gpudiag.model import GputilGpu, Snapshot, SourceStatus, TorchInfo

if TYPE_CHECKING:
    from gpudiag.backends.cudadrv import DriverEnumeration

#: Environment variables a snapshot records (machine facts, not launcher ones).
RECORDED_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")

#: (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER) → what the driver enumerated under them.
DriverAnswers = dict[tuple[str | None, str | None], "DriverEnumeration"]


def driver_present() -> bool:
    """A cheap guess that an NVIDIA driver is installed, so its children are worth
    starting before NVML has answered. A wrong "no" only costs time: the
    driver is then asked after NVML, as before."""
    return os.path.exists("/proc/driver/nvidia/version") or shutil.which("nvidia-smi") is not None


def _gputil() -> tuple[tuple[GputilGpu, ...] | None, SourceStatus]:
    from gpudiag.backends.gputil import collect_gputil

    return collect_gputil()


def _no_smi() -> tuple[tuple[GputilGpu, ...] | None, SourceStatus]:
    # GPUtil's own child would only find out that nvidia-smi is missing; a PATH
    # lookup here spares a Python start (the same answer, the same wording).
    from gpudiag.backends.gputil import parse_gputil_json

    return parse_gputil_json({"no_smi": True})


def _enumerate(spec: str | None, order: str | None) -> DriverEnumeration:
    from gpudiag.backends.cudadrv import driver_enumeration

    return driver_enumeration(spec, order)


def _torch_child() -> tuple[TorchInfo | None, SourceStatus]:
    from gpudiag.backends.torch import collect_torch

    return collect_torch()


class _Now:
    """A finished value, for work that needed no thread (the no-driver path
    starts no child, so it needs no thread pool either)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def result(self) -> Any:
        return self.value


class _Pool:
    """Runs children side by side, starting the thread pool only when needed."""

    def __init__(self) -> None:
        self.pool: Any = None

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(max_workers=5)
        return self.pool.submit(fn, *args)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)


def collect_snapshot(
    *,
    with_torch: bool = True,
    with_gputil: bool = True,
    deep: bool = True,
    driver_answers: DriverAnswers | None = None,
) -> Snapshot:
    """Query the live machine.

    Args:
        with_torch: also ask torch at all (False: ``sources.torch`` is skipped, no facts).
        with_gputil: also ask GPUtil (a child process running nvidia-smi).
        deep: import torch in a child (device count, arch list, CUDA init error);
            False reads only its version and CUDA build from its files.
        driver_answers: filled with the CUDA driver's enumerations made on the
            way, so the caller need not start the same child again.
    """
    env = {key: os.environ.get(key) for key in RECORDED_ENV}
    # The child for the live environment, and the unset one for cuda_order.
    questions = {(None, None), (env["CUDA_VISIBLE_DEVICES"], env["CUDA_DEVICE_ORDER"])}
    early = driver_present()
    pool = _Pool()
    try:
        torch_future = pool.submit(_torch_child) if with_torch and deep else None
        gputil_future: Any = None
        if with_gputil:
            has_smi = shutil.which("nvidia-smi") is not None
            gputil_future = pool.submit(_gputil) if has_smi else _Now(_no_smi())
        driver_futures = {q: pool.submit(_enumerate, *q) for q in questions if early}
        nvml = collect_nvml()
        ask_driver = nvml.status.status == "ok" and bool(nvml.gpus)
        if ask_driver and not driver_futures:
            driver_futures = {q: pool.submit(_enumerate, *q) for q in questions}
        torch_info, torch_status = _torch(with_torch, torch_future)
        sources: dict[str, SourceStatus] = {"nvml": nvml.status, "torch": torch_status}
        gputil_gpus: tuple[GputilGpu, ...] | None = None
        if gputil_future is not None:
            gputil_gpus, sources["gputil"] = gputil_future.result()
        else:
            sources["gputil"] = SourceStatus("unavailable", "not asked")
        answers = {q: f.result() for q, f in driver_futures.items()}
    finally:
        pool.close()
    if driver_answers is not None and ask_driver:
        driver_answers.update(answers)
    unset = answers.get((None, None))
    cuda_order = unset.uuids if ask_driver and unset is not None and unset.ok else None
    return Snapshot(
        driver_version=nvml.driver_version,
        cuda_driver_version=nvml.cuda_driver_version,
        env=env,
        cuda_order=cuda_order,
        # NVML's PIDs: in this PID namespace (1.2), this job's or not (1.4).
        gpus=with_memory_holders(nvml.gpus),
        sources=sources,
        torch=torch_info,
        gputil=gputil_gpus,
        # os.uname().nodename is gethostname() on POSIX, without importing socket.
        hostname=_hostname(),
        created_utc=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        host=collect_host(),
        gpu_pairs=nvml.gpu_pairs,
        node=collect_node(),
    )


def _hostname() -> str:
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket  # pragma: no cover - Windows

    return socket.gethostname()


def _torch(with_torch: bool, future: Any) -> tuple[TorchInfo | None, SourceStatus]:
    if not with_torch:
        return None, SourceStatus("skipped", "not asked")
    if future is not None:
        result: tuple[TorchInfo | None, SourceStatus] = future.result()
        return result
    from gpudiag.backends.torchdist import read_torch_facts

    return read_torch_facts()


def deepen_torch(
    snapshot: Snapshot, env_overrides: Mapping[str, str | None] | None = None
) -> Snapshot:
    """``snapshot`` with torch asked in a child (what ``--deep`` records)."""
    from dataclasses import replace

    from gpudiag.backends.torch import collect_torch

    info, status = collect_torch(env_overrides)
    sources = dict(snapshot.sources)
    sources["torch"] = status
    return replace(snapshot, torch=info, sources=sources)
