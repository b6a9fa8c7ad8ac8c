"""Wall time of ``gpudiag probe all --device cpu``, with a per-probe breakdown.

Usage: ``python bench/bench_probes.py [--repeat N]``. Each run is a real
``python -m gpudiag probe all --device cpu --json`` subprocess; the figure is
the wall time seen from outside (Python start-up of the parent included).
Target on the 2-core CI machine: <= 10 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

TARGET_S = 10.0


def run_once() -> tuple[float, dict[str, object]]:
    """One ``gpudiag probe all --device cpu --json``: (outside wall time, report)."""
    began = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "gpudiag", "probe", "all", "--device", "cpu", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    wall_s = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"probe exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    report: dict[str, object] = json.loads(proc.stdout)
    return wall_s, report


def main() -> int:
    """Prints one line per run, then the median and the verdict against the target."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    walls: list[float] = []
    for index in range(args.repeat):
        wall_s, report = run_once()
        walls.append(wall_s)
        probes = report["probes"]
        assert isinstance(probes, list)
        breakdown = "  ".join(f"{p['probe']}={p['wall_s']:.2f}s" for p in probes)
        print(
            f"run {index + 1}: wall {wall_s:.2f} s (parent-measured {report['wall_s']:.2f} s, "
            f"child start-up {report['startup_s']:.2f} s)  {breakdown}"
        )
    median_s = statistics.median(walls)
    verdict = "OK" if median_s <= TARGET_S else "OVER TARGET"
    print(
        f"median wall {median_s:.2f} s over {len(walls)} run(s); "
        f"target <= {TARGET_S:g} s: {verdict}"
    )
    return 0 if median_s <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
