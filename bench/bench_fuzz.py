"""Fuzz the command line with many examples (the CI test runs a few dozen).

    .venv/bin/python bench/bench_fuzz.py            # 10,000 examples per property
    .venv/bin/python bench/bench_fuzz.py 50000      # more

Runs tests/test_gate_fuzz.py (options and launcher/Slurm variables; mutated
snapshots) with FUZZ_EXAMPLES set and random, not fixed, examples; prints the
examples run, the wall time and pytest's verdict. Exit status is pytest's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    env = {**os.environ, "FUZZ_EXAMPLES": str(examples)}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "--hypothesis-show-statistics", str(ROOT / "tests" / "test_gate_fuzz.py")],
        env=env, cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - start
    # hypothesis's statistics: each property's name and how many examples passed.
    for line in proc.stdout.splitlines():
        if "::" in line or "passing" in line or "failing" in line.lower() or "passed" in line:
            print(line)
    if proc.returncode != 0:
        print(proc.stdout[-6000:])
    print(proc.stderr[-2000:], file=sys.stderr)
    print(
        f"{examples} examples per property, 3 properties: {elapsed:.0f} s, exit {proc.returncode}"
    )
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
