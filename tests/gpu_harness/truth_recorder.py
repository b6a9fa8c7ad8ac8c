"""Record a truth table on a machine with NVIDIA GPUs: what the driver and torch really do.

Usage (on the GPU machine, in the environment whose torch jobs use)::

    python -m tests.gpu_harness.truth_recorder -o tests/truth/<gpu>-driver-<version>.json

For every (``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER``) pair of a grid built
from this machine's own UUIDs and GPU count, two FRESH child processes answer:

* the CUDA driver (``gpudiag.backends._cuda_child``: cuInit, cuDeviceGetCount,
  cuDeviceGetUuid_v2), giving the UUIDs it enumerated or cuInit's error;
* torch: ``torch.cuda.device_count()`` and each device's UUID from
  ``get_device_properties``, or the exception raised (its class as a traceback
  names it, first line, at most 120 characters).

The table also holds the machine's ``gpudiag snapshot``, so
``tests/test_truth_replay.py`` replays every row anywhere. Tables from multi-GPU
and MIG machines are the ones the project lacks: please contribute yours.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from gpudiag.model import Snapshot

TORCH_CHILD = r"""
import json
out = {"count": None, "uuids": [], "error": None}
try:
    import torch
    n = torch.cuda.device_count()
    uuids = [str(torch.cuda.get_device_properties(i).uuid) for i in range(n)]
    out.update(count=n, uuids=uuids)
except Exception as exc:
    cls = type(exc)
    name = cls.__qualname__ if cls.__module__ == "builtins" else (
        f"{cls.__module__}.{cls.__qualname__}")
    first = (str(exc).strip().splitlines() or [""])[0]
    out["error"] = f"{name}: {first}"[:120]
print(json.dumps(out))
"""

ORDERS: tuple[str | None, ...] = (None, "PCI_BUS_ID", "FASTEST_FIRST", "pci_bus_id", "garbage", "")

#: Asks one (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER) pair; returns (driver, torch) answers.
Asker = Callable[[str | None, str | None], tuple[dict[str, Any], dict[str, Any]]]


def grid(snapshot: Snapshot) -> list[tuple[str | None, str | None]]:
    """The values to record, built from this machine's UUIDs and GPU count."""
    uuids = [str(g.uuid) for g in snapshot.gpus if g.uuid is not None and not g.lost]
    if not uuids:
        raise SystemExit("no GPU with a UUID on this machine: nothing to record")
    full = uuids[0]
    body = full[len("GPU-") :]
    short = full[:12]
    count = len(uuids)
    wrong = "7" if body[0] != "7" else "8"
    values: list[str] = [
        "GPU-", "GPU", "G", f"GPU-{wrong}", f"GPU-{wrong * 2}", full[:6], short,
        full.replace("GPU-", "gpu-"), short.replace("GPU-", "gpu-"), short.upper(),
        "GPU-" + body.upper(), f"  {short}", f"{short} ", f"{short},", f",{short}",
        f"{full}X", f"{full}0", "GPU-" + body.replace("-", "")[:12], "GPU-x", "GPU-ffffffff",
        f"{short},{short}", f"{short},0", f"0,{short}", f"{count},{short}", f"{short},{count}",
        "MIG-", f"MIG-{full}", f"MIG-{body}", f"MIG-{body[:8]}", body[:8], str(count + 76),
        f"{short};0", "0;1", "0 1", "0\t", "\t0", "0\n", "\n0", "0,1,2", "1,0", "0,,", ",,0",
        "0,a", "a,0", "0,-", "0,+", "0,1x", "0,0x", "0,00", "0,+0", "0,-0",
        "9" * 25, str(2**32), str(2**32 - 1), str(2**32 + 1), str(2**33), str(2**31),
        str(2**64), str(2**64 - 1), f"-{2**64 - 1}", f"-{2**64}", f"-{2**32 - 1}", f"-{2**32}",
        "0 ,1", "0, 1", " 0,1", "0 , 1", "1 ,0", "0.0", "0.5", "1e0", "٠", "０",
        "all", "none", "void", "NoDevFiles", "nodevfiles", "NoDevFiles,0", "0,NoDevFiles",
        "", " ", ",", "-", "+", "0-0", "GPU-" + body[:4] + "--" + body[4:8],
        "GPU-" + body[:8] + "-", f"MIG-GPU-{full}/0/0",
    ]  # fmt: skip
    if count > 1:
        second = uuids[1][:12]
        values += [
            ",".join(str(i) for i in range(count)),
            ",".join(str(i) for i in reversed(range(count))),
            f"{second},{short}", f"{second}, {short}", "1,0,-1,0", f"0,{count},1",
        ]  # fmt: skip
    migs = [m.uuid for g in snapshot.gpus for m in g.mig_devices]
    if migs:
        values += [migs[0], migs[0][:12], ",".join(migs[:2]), f"{migs[-1]},{migs[0]}", "0"]
    pairs: list[tuple[str | None, str | None]] = [(None, None)]
    pairs += [(v, None) for v in dict.fromkeys(values)]
    for order in ORDERS[1:]:
        pairs += [(v, order) for v in ("0", short, "0,1", "")]
    return pairs


def _child_env(spec: str | None, order: str | None) -> dict[str, str]:
    env = dict(os.environ)
    for name, value in (("CUDA_VISIBLE_DEVICES", spec), ("CUDA_DEVICE_ORDER", order)):
        env.pop(name, None)
        if value is not None:
            env[name] = value
    return env


def ask_real(spec: str | None, order: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The driver's and torch's answers, each from a fresh child process."""
    from gpudiag.backends.cudadrv import driver_enumeration

    found = driver_enumeration(spec, order)
    driver: dict[str, Any] = {"uuids": list(found.uuids), "error": None}
    if not found.ok:
        error = found.error or "unknown"
        # "cuInit failed: CUDA_ERROR_NO_DEVICE (100)" -> "NO_DEVICE"
        driver["error"] = error.split("CUDA_ERROR_", 1)[-1].split(" ", 1)[0]
    proc = subprocess.run(
        [sys.executable, "-c", TORCH_CHILD],
        env=_child_env(spec, order),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    torch_answer: dict[str, Any] = (
        json.loads(lines[-1])
        if lines
        else {"count": None, "uuids": [], "error": f"child failed: {proc.stderr[-200:]}"}
    )
    return driver, torch_answer


def record(snapshot: Snapshot, ask: Asker = ask_real) -> list[dict[str, Any]]:
    """One row per grid value, in the format of ``tests/truth/*.json``."""
    rows = []
    for spec, order in grid(snapshot):
        driver, torch_answer = ask(spec, order)
        rows.append(
            {
                "cvd": spec,
                "order": order,
                "driver_uuids": driver["uuids"],
                "driver_error": driver["error"],
                "torch_device_count": torch_answer["count"],
                "torch_uuids": torch_answer["uuids"],
                "torch_error": torch_answer["error"],
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Record this machine's table into ``-o FILE``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", required=True, help="where to write the table")
    args = parser.parse_args(argv)

    from gpudiag.collect import collect_snapshot
    from gpudiag.snapshot import snapshot_to_json

    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    os.environ.pop("CUDA_DEVICE_ORDER", None)
    snapshot = collect_snapshot()
    started = time.time()
    rows = record(snapshot)
    doc = {
        "what": "CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER values, each evaluated in a fresh "
        "process on a real machine: the UUIDs the CUDA driver enumerated (cuInit, "
        "cuDeviceGetCount, cuDeviceGetUuid_v2) or cuInit's error, and "
        "torch.cuda.device_count() with the UUIDs of torch.cuda.get_device_properties "
        "(or the exception raised).",
        "machine": {
            "gpu": ", ".join(sorted({str(g.name) for g in snapshot.gpus})),
            "driver_version": snapshot.driver_version,
            "cuda_driver_version": snapshot.cuda_driver_version,
            "torch": snapshot.torch.version if snapshot.torch is not None else None,
            "recorded": time.strftime("%Y-%m-%d", time.gmtime(started)),
        },
        "snapshot": snapshot_to_json(snapshot),
        "rows": rows,
    }
    with open(args.output, "w", encoding="utf-8") as handle:
        json.dump(doc, handle, indent=1, ensure_ascii=False)
        handle.write("\n")
    print(f"{len(rows)} rows in {time.time() - started:.0f} s -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
