"""One rank of the p2p probe's 2-rank all-reduce: ``python -m gpudiag.probes.p2p_pair``.

The p2p worker starts two of these per pair and kills them at its own limit
(NCCL's communicator set-up ignores process-group timeouts, so a hung P2P path
can only be ended from outside). Each rank touches ``RESULT.ready`` once torch is
imported (the limit counts from there: start-up is not a hang), then writes one
JSON object to ``RESULT``: ``{"ok": bool, "error": str, "elapsed_s": float}``.

``GPUDIAG_PROBE_FAULT=hang:p2p`` (tests only, docs/probes.md) makes rank 1 sleep
before the all-reduce *unless* ``NCCL_P2P_DISABLE=1`` is set: a broken P2P path
as users hit it (issue 18), so the worker's retry can be seen to name the cause.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from gpudiag.probes.common import FAULT_ENV, parse_fault

#: all_reduce(SUM) of ``rank + 1`` over 2 ranks: 3 everywhere. 1 Mi float32 (4 MiB):
#: large enough that NCCL uses its P2P or SHM transport, not just a few bytes.
ELEMENTS = 1 << 20
EXPECTED_SUM = 3.0


def _planted_hang(rank: int) -> bool:
    try:
        fault = parse_fault(os.environ.get(FAULT_ENV))
    except ValueError:
        return False
    return (
        fault is not None
        and fault.kind == "hang"
        and fault.applies_to("p2p")
        and rank == 1
        and os.environ.get("NCCL_P2P_DISABLE") != "1"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Joins the pair's group, all-reduces once, writes the result file."""
    parser = argparse.ArgumentParser(prog="gpudiag.probes.p2p_pair")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--device", required=True, help="cpu or cuda:N")
    parser.add_argument("--backend", choices=("gloo", "nccl"), required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--result", required=True)
    parser.add_argument("--timeout", type=float, required=True)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    result = Path(args.result)

    import torch
    import torch.distributed as dist

    Path(f"{result}.ready").touch()
    began = time.perf_counter()
    out: dict[str, object] = {"ok": False, "error": "", "elapsed_s": None}
    try:
        device = torch.device(args.device)
        if device.type == "cuda":
            torch.cuda.set_device(device)
        store = dist.FileStore(args.store, 2)
        dist.init_process_group(
            args.backend,
            store=store,
            rank=args.rank,
            world_size=2,
            timeout=timedelta(seconds=max(1.0, args.timeout)),
        )
        if _planted_hang(args.rank):
            while True:
                time.sleep(3600)
        tensor = torch.full((ELEMENTS,), float(args.rank + 1), device=device)
        dist.all_reduce(tensor)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        wrong = int((tensor != EXPECTED_SUM).sum())
        out["ok"] = wrong == 0
        if wrong:
            out["error"] = f"{wrong} of {ELEMENTS} elements != {EXPECTED_SUM:g} on rank {args.rank}"
        out["elapsed_s"] = time.perf_counter() - began
        dist.destroy_process_group()
    except Exception as exc:
        lines = traceback.format_exception_only(type(exc), exc)
        out["error"] = " ".join(line.strip() for line in lines)[:300]
    result.write_text(json.dumps(out), encoding="utf-8")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # Skip torch's teardown (as the worker does): nothing is left to flush.
    os._exit(code)
