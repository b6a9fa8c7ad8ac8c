#!/usr/bin/env python3
"""Time whole gpudiag processes, paired against ``python -c pass``.

A benchmark, not a test: it prints figures and the ratio to the target, and
exits 0 whatever they are (``--enforce`` makes it exit 1 above the target).
Runs are interleaved A B A B … so a machine whose speed drifts affects both
sides of each pair alike; the median of the per-pair ratios is quoted.

    python bench/bench_cli.py            # 15 pairs per command
    python bench/bench_cli.py -n 30 --enforce
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "a100x8.json"

#: Target from the issues: at most 5x the interpreter's own start-up.
TARGET_RATIO = 5.0


def _gpudiag() -> list[str]:
    script = Path(sys.executable).with_name("gpudiag")
    if script.exists():
        return [str(script)]
    found = shutil.which("gpudiag")
    return [found] if found else [sys.executable, "-m", "gpudiag"]


def _commands() -> dict[str, list[str]]:
    g = _gpudiag()
    snap = str(FIXTURE)
    return {
        "gpudiag --help": [*g, "--help"],
        "gpudiag list --snapshot F": [*g, "list", "--snapshot", snap],
        "gpudiag list --snapshot F --visible 1,2": [
            *g,
            "list",
            "--snapshot",
            snap,
            "--visible",
            "1,2",
        ],
        "gpudiag check --snapshot F --visible 1,2 --device-ids 0,1": [
            *g,
            "check",
            "--snapshot",
            snap,
            "--visible",
            "1,2",
            "--device-ids",
            "0,1",
        ],
    }


def _wall_s(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, check=False
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=15, help="pairs per command (default 15)")
    parser.add_argument("--enforce", action="store_true", help="exit 1 if a median ratio > target")
    args = parser.parse_args()
    baseline = [sys.executable, "-c", "pass"]
    # `pip install` byte-compiles a package; an editable checkout under
    # PYTHONDONTWRITEBYTECODE=1 (set on these machines) would otherwise recompile
    # every gpudiag module at each start and measure the compiler, not gpudiag.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "gpudiag")], check=True, timeout=120
    )
    env_note = f"python {sys.version.split()[0]} on {os.cpu_count()} CPUs, gpudiag byte-compiled"
    print(f"# whole-process wall time, {args.n} interleaved pairs each, {env_note}")
    print(
        f"{'command':58} {'median ms':>9} {'base ms':>8} {'ratio':>6} {'min':>5} {'max':>5}  target"
    )
    worst = 0.0
    for label, argv in _commands().items():
        _wall_s(argv)  # warm the page cache and .pyc files
        _wall_s(baseline)
        pairs = [(_wall_s(argv), _wall_s(baseline)) for _ in range(args.n)]
        ratios = [a / b for a, b in pairs]
        med = statistics.median(ratios)
        worst = max(worst, med)
        print(
            f"{label:58} {statistics.median(a for a, _ in pairs) * 1000:9.1f} "
            f"{statistics.median(b for _, b in pairs) * 1000:8.1f} {med:6.2f} "
            f"{min(ratios):5.2f} {max(ratios):5.2f}  <= {TARGET_RATIO:g}x "
            f"{'ok' if med <= TARGET_RATIO else 'OVER'}"
        )
    return 1 if args.enforce and worst > TARGET_RATIO else 0


if __name__ == "__main__":
    raise SystemExit(main())
