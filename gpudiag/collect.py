"""Collect a live :class:`~gpudiag.model.Snapshot` from NVML, torch and GPUtil.

Each source is asked on its own and fails on its own (torch's
``collect_env.py`` style): a missing driver, a CPU-only torch or a broken GPUtil
each leave their part None and say why in ``Snapshot.sources``.
"""

from __future__ import annotations

import os
import socket
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

from gpudiag.backends.gputil import collect_gputil
from gpudiag.backends.host import collect_host
from gpudiag.backends.nvml import collect_nvml
from gpudiag.backends.torch import collect_torch
from gpudiag.model import Snapshot, SourceStatus

#: Environment variables a snapshot records (machine facts, not launcher ones).
RECORDED_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


def _cuda_order() -> tuple[str, ...] | None:
    """The CUDA driver's own enumeration order, or None when it can't be asked."""
    try:
        from gpudiag.backends.cudadrv import cuda_order_for_snapshot
    except ImportError:  # pragma: no cover - the driver backend ships with gpudiag
        return None
    return cuda_order_for_snapshot()


def collect_snapshot(*, with_torch: bool = True, with_gputil: bool = True) -> Snapshot:
    """Query the live machine.

    Args:
        with_torch: also ask torch (a child process; costs its import time).
        with_gputil: also ask GPUtil (a child process running nvidia-smi).
    """
    nvml = collect_nvml()
    sources: dict[str, SourceStatus] = {"nvml": nvml.status}
    ask_driver = nvml.status.status == "ok" and bool(nvml.gpus)
    # The children are independent; run them side by side to save wall time.
    with ThreadPoolExecutor(max_workers=3) as pool:
        torch_future = pool.submit(collect_torch) if with_torch else None
        gputil_future = pool.submit(collect_gputil) if with_gputil else None
        order_future = pool.submit(_cuda_order) if ask_driver else None
        torch_info, gputil_gpus = None, None
        if torch_future is not None:
            torch_info, sources["torch"] = torch_future.result()
        else:
            sources["torch"] = SourceStatus("unavailable", "not asked")
        if gputil_future is not None:
            gputil_gpus, sources["gputil"] = gputil_future.result()
        else:
            sources["gputil"] = SourceStatus("unavailable", "not asked")
        cuda_order = order_future.result() if order_future is not None else None
    return Snapshot(
        driver_version=nvml.driver_version,
        cuda_driver_version=nvml.cuda_driver_version,
        env={key: os.environ.get(key) for key in RECORDED_ENV},
        cuda_order=cuda_order,
        gpus=nvml.gpus,
        sources=sources,
        torch=torch_info,
        gputil=gputil_gpus,
        hostname=socket.gethostname(),
        created_utc=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        host=collect_host(),
    )
