"""The child process that runs probes: ``python -m gpudiag.probes.worker ...``.

This is the only place torch is imported for the probes, so that the parent
``gpudiag probe`` never initialises CUDA or freezes CUDA_VISIBLE_DEVICES. The
worker writes one JSON object per line to ``--events``; the parent reads them
to learn progress (for hang reports) and results. Protocol (docs/probes.md):

- ``{"ev": "ready", "import_torch_s": ...}`` once torch is imported;
- ``{"ev": "start", "probe": P}`` / ``{"ev": "stage", "probe": P, "stage": S}``;
- ``{"ev": "result", "probe": P, "result": {...}}`` (a ProbeResult's JSON);
- ``{"ev": "done"}`` before a normal exit.

``GPUDIAG_PROBE_FAULT`` (read here only) plants a fault for the tests.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import IO, Any

from gpudiag.probes.common import FAULT_ENV, Fault, WorkerContext, limit_threads, parse_fault
from gpudiag.probes.results import ProbeResult

_PR_SET_PDEATHSIG = 1


class EventWriter:
    """Appends JSON lines to the events file, flushed at once, thread-safe."""

    def __init__(self, stream: IO[str], rank: int) -> None:
        self._stream = stream
        self._rank = rank
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any]) -> None:
        line = json.dumps(_finite(event | {"rank": self._rank, "t": time.time()}), allow_nan=False)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


def _finite(value: Any) -> Any:
    """JSON has no NaN/inf: they become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _die_with_parent(parent_pid: int) -> None:
    """Never outlive the parent: the kernel's PDEATHSIG plus a polling thread.

    The parent puts each worker in its own session (so it can kill the whole
    group); a launcher that SIGKILLs the parent would otherwise leave it behind.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the thread below still works
        pass
    if os.getppid() != parent_pid:
        os._exit(70)

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent_pid:
                os._exit(70)

    threading.Thread(target=watch, name="gpudiag-parent-watch", daemon=True).start()


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpudiag.probes.worker")
    parser.add_argument("--events", required=True)
    parser.add_argument("--probes", required=True, help="comma-separated, run in this order")
    parser.add_argument("--device", choices=("cpu", "cuda"), required=True)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--local-rank", type=int, default=0)
    parser.add_argument("--node-rank", type=int, default=None)
    parser.add_argument("--store", default="env", help="file:PATH or env")
    parser.add_argument("--run-id", default="run")
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("--device-ids", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--parent-pid", type=int, default=None)
    return parser.parse_args(list(argv))


def _probe_runner(name: str) -> Callable[[WorkerContext], ProbeResult]:
    if name == "single":
        from gpudiag.probes import single

        return single.run
    if name == "dp":
        from gpudiag.probes import dp

        return dp.run
    if name == "ddp":
        from gpudiag.probes import ddp

        return ddp.run
    if name == "amp":
        from gpudiag.probes import amp

        return amp.run
    if name == "p2p":
        from gpudiag.probes import p2p

        return p2p.run
    raise ValueError(f"unknown probe {name!r}")


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the requested probes in order, reporting through the events file."""
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    if args.parent_pid is not None:
        _die_with_parent(args.parent_pid)
    with open(args.events, "a", encoding="utf-8") as stream:
        emit = EventWriter(stream, args.rank)
        fault: Fault | None = None
        fault_error: str | None = None
        try:
            fault = parse_fault(os.environ.get(FAULT_ENV))
        except ValueError as exc:
            fault_error = str(exc)

        began = time.perf_counter()
        # torch warns when numpy is absent; the probes do not use numpy.
        warnings.filterwarnings("ignore", message=".*Failed to initialize NumPy.*")
        import torch

        limit_threads(args.threads)
        emit(
            {
                "ev": "ready",
                "import_torch_s": time.perf_counter() - began,
                "torch_version": str(torch.__version__),
            }
        )

        device_ids = (
            tuple(int(x) for x in args.device_ids.split(",") if x.strip())
            if args.device_ids
            else None
        )
        ctx = WorkerContext(
            rank=args.rank,
            world_size=args.world_size,
            local_rank=args.local_rank,
            node_rank=args.node_rank,
            device_type=args.device,
            store=args.store,
            run_id=args.run_id,
            timeout_s=args.timeout,
            device_ids=device_ids,
            fault=fault,
            emit=emit,
        )
        for name in args.probes.split(","):
            emit({"ev": "start", "probe": name})
            result = _run_one(ctx, name, fault_error)
            emit({"ev": "result", "probe": name, "result": result.to_json()})
        emit({"ev": "done"})
    return 0


def _run_one(ctx: WorkerContext, name: str, fault_error: str | None) -> ProbeResult:
    """One probe; an exception becomes a ``fail`` result carrying its last line."""
    import torch

    start_s = time.perf_counter()
    try:
        if fault_error is not None:
            raise ValueError(fault_error)
        if ctx.device_type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(
                "torch.cuda.is_available() is False in the child "
                f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}); "
                "use --device cpu or install a CUDA build of torch"
            )
        return _probe_runner(name)(ctx)
    except Exception as exc:
        lines = traceback.format_exception_only(type(exc), exc)
        text = " ".join(line.strip() for line in lines).replace("\n", " ")
        return ProbeResult(
            probe=name,
            status="fail",
            device=ctx.device_type,
            message=f"raised {text[:400]}",
            wall_s=time.perf_counter() - start_s,
            notes=(traceback.format_exc()[-2000:],),
        )


if __name__ == "__main__":
    exit_code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # The events file is closed and the process group destroyed; skipping
    # interpreter teardown (torch's atexit and module cleanup, ~0.5 s) keeps
    # the probes fast. Nothing is left to flush.
    os._exit(exit_code)
