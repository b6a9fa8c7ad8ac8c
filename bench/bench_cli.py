#!/usr/bin/env python3
"""Time whole gpudiag processes, paired against ``python -c pass`` (and nvitop).

A benchmark, not a test: it prints figures and the ratio to the target, and
exits 0 whatever they are (``--enforce`` makes it exit 1 above the target).
Runs are interleaved A B A B … so a machine whose speed drifts affects both
sides of each pair alike; the median of the per-pair ratios is quoted.

Groups (targets from the issues):

* light paths (--help, --snapshot): <= 5x ``python -c pass``;
* live paths (``list``, ``check``, ``import gpudiag; gpudiag.guard()`` on this
  machine, torch not imported): <= 8x ``python -c pass``;
* on a GPU machine with nvitop installed: live ``list`` and ``check`` <= 1.5x
  ``nvitop --once``.

    python bench/bench_cli.py            # 15 pairs per command, every group
    python bench/bench_cli.py --only live -n 30 --enforce
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

#: Targets from the issues, as ratios to each group's baseline.
LIGHT_TARGET = 5.0
LIVE_TARGET = 8.0
NVITOP_TARGET = 1.5


def _gpudiag() -> list[str]:
    script = Path(sys.executable).with_name("gpudiag")
    if script.exists():
        return [str(script)]
    found = shutil.which("gpudiag")
    return [found] if found else [sys.executable, "-m", "gpudiag"]


def _light(g: list[str]) -> dict[str, list[str]]:
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


def _live(g: list[str]) -> dict[str, list[str]]:
    return {
        "gpudiag list (live)": [*g, "list"],
        "gpudiag check (live)": [*g, "check"],
        "python -c 'import gpudiag; gpudiag.guard()'": [
            sys.executable,
            "-c",
            "import gpudiag; gpudiag.guard()",
        ],
    }


def _groups() -> list[tuple[str, dict[str, list[str]], list[str], float]]:
    """(name, commands, baseline argv, target ratio) per group that can run here."""
    g = _gpudiag()
    python = [sys.executable, "-c", "pass"]
    groups = [
        ("light", _light(g), python, LIGHT_TARGET),
        ("live", _live(g), python, LIVE_TARGET),
    ]
    nvitop = shutil.which("nvitop")
    if nvitop and shutil.which("nvidia-smi"):
        live = {k: v for k, v in _live(g).items() if k.startswith("gpudiag")}
        groups.append(("nvitop", live, [nvitop, "--once"], NVITOP_TARGET))
    return groups


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
    parser.add_argument(
        "--only", choices=["light", "live", "nvitop"], default=None, help="run one group"
    )
    args = parser.parse_args()
    # `pip install` byte-compiles a package; an editable checkout under
    # PYTHONDONTWRITEBYTECODE=1 (set on these machines) would otherwise recompile
    # every gpudiag module at each start and measure the compiler, not gpudiag.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "gpudiag")], check=True, timeout=120
    )
    env_note = f"python {sys.version.split()[0]} on {os.cpu_count()} CPUs, gpudiag byte-compiled"
    print(f"# whole-process wall time, {args.n} interleaved pairs each, {env_note}")
    over = False
    for name, commands, baseline, target in _groups():
        if args.only is not None and name != args.only:
            continue
        print(f"\n## {name}: ratio to `{' '.join(Path(a).name for a in baseline)}`")
        print(
            f"{'command':58} {'median ms':>9} {'base ms':>8} {'ratio':>6} {'min':>5} {'max':>5}"
            "  target"
        )
        for label, argv in commands.items():
            _wall_s(argv)  # warm the page cache and .pyc files
            _wall_s(baseline)
            pairs = [(_wall_s(argv), _wall_s(baseline)) for _ in range(args.n)]
            ratios = [a / b for a, b in pairs]
            med = statistics.median(ratios)
            over = over or med > target
            print(
                f"{label:58} {statistics.median(a for a, _ in pairs) * 1000:9.1f} "
                f"{statistics.median(b for _, b in pairs) * 1000:8.1f} {med:6.2f} "
                f"{min(ratios):5.2f} {max(ratios):5.2f}  <= {target:g}x "
                f"{'ok' if med <= target else 'OVER'}"
            )
    if _groups()[-1][0] != "nvitop" and args.only in (None, "nvitop"):
        print("\n# nvitop group skipped: needs nvitop and nvidia-smi (a GPU machine)")
    return 1 if args.enforce and over else 0


if __name__ == "__main__":
    raise SystemExit(main())
