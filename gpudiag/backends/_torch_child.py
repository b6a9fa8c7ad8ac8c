"""Child program: print what torch reports as one JSON line.

Run as ``python -m gpudiag.backends._torch_child`` by :mod:`gpudiag.backends.torch`.
It runs in its own process so that initialising CUDA here never freezes the
caller's ``CUDA_VISIBLE_DEVICES`` (CUDA reads it once, at init).
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any


def _query() -> dict[str, Any]:
    try:
        import torch
    except ImportError as exc:
        return {"import_error": f"{type(exc).__name__}: {exc}"}
    out: dict[str, Any] = {
        "version": str(torch.__version__),
        "cuda_version": torch.version.cuda,
        # A ROCm build also has torch.version.cuda None but is not CPU-only.
        "cpu_only": torch.version.cuda is None and getattr(torch.version, "hip", None) is None,
        "cuda_available": None,
        "device_count": None,
        "arch_list": [],
        "devices": [],
        "error": None,
        "distributed_available": None,
        "nccl_available": None,
    }
    # init_process_group('nccl') raises "Distributed package doesn't have NCCL built in"
    # when is_nccl_available() is False (torch 2.13 distributed_c10d.py); neither call
    # initialises CUDA.
    try:
        import torch.distributed as dist

        out["distributed_available"] = bool(dist.is_available())
        out["nccl_available"] = bool(dist.is_available() and dist.is_nccl_available())
    except Exception:  # a broken build: leave both unknown
        pass
    init_warnings: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out["cuda_available"] = bool(torch.cuda.is_available())
            out["device_count"] = int(torch.cuda.device_count())
        # torch turns a failed cuInit into a warning ("CUDA initialization: …")
        # and is_available() == False; keep its text as the reason.
        init_warnings = [str(w.message) for w in caught if "CUDA" in str(w.message)]
        if init_warnings:
            out["error"] = init_warnings[0].splitlines()[0]
        out["arch_list"] = list(torch.cuda.get_arch_list())
        for ordinal in range(out["device_count"] if out["cuda_available"] else 0):
            props = torch.cuda.get_device_properties(ordinal)
            out["devices"].append(
                {
                    "cuda_ordinal": ordinal,
                    "name": props.name,
                    "uuid": str(getattr(props, "uuid", "")) or None,
                    "memory_total_mib": int(props.total_memory) // (1024 * 1024),
                    "multiprocessor_count": int(props.multi_processor_count),
                    "compute_capability": f"{props.major}.{props.minor}",
                }
            )
    except Exception as exc:  # torch raises RuntimeError/AssertionError variously
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return out


def main() -> int:
    """Print the JSON line; exit 0 even when torch is missing (that is data)."""
    sys.stdout.write(json.dumps(_query()) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
