#!/usr/bin/env python3
"""Time ``gpudiag lint`` on a 2,000-line training script (target: < 0.3 s wall).

A benchmark, not a test: it prints the median wall time of whole ``gpudiag lint``
processes (start-up included) and of the lint itself in this process, and exits
0 whatever they are (``--enforce`` makes it exit 1 above the target).

The script is made of the fixture scripts in tests/fixtures/lint/, each wrapped
in its own function (so the file stays valid Python and every rule has work to
do), repeated until it has 2,000 lines, plus a ``main()`` that calls them all.

    python bench/bench_lint.py           # 9 runs
    python bench/bench_lint.py -n 21 --enforce
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "fixtures" / "lint"
TARGET_S = 0.3
LINES = 2000


def big_script(lines: int = LINES) -> str:
    """A valid Python training script of exactly ``lines`` lines."""
    bodies = []
    for path in sorted(CASES.glob("*.py.txt")):
        text = path.read_text()
        try:
            compile(text, str(path), "exec")
        except SyntaxError:
            continue
        bodies.append(text)
    out: list[str] = ["import os", "import torch", ""]
    calls: list[str] = []
    i = 0
    while len(out) < lines - len(calls) - 8:
        body = bodies[i % len(bodies)]
        name = f"block_{i}"
        out.append(f"def {name}():")
        out.extend(textwrap.indent(body, "    ").splitlines() or ["    pass"])
        out.append("")
        calls.append(f"    {name}()")
        i += 1
    out += ["def main():", *calls, "", 'if __name__ == "__main__":', "    main()"]
    while len(out) < lines:
        out.append("# padding")
    return "\n".join(out[:lines]) + "\n"


def _gpudiag() -> list[str]:
    script = Path(sys.executable).with_name("gpudiag")
    if script.exists():
        return [str(script)]
    found = shutil.which("gpudiag")
    return [found] if found else [sys.executable, "-m", "gpudiag"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=9, help="runs (default 9)")
    parser.add_argument("--enforce", action="store_true", help="exit 1 above the target")
    args = parser.parse_args()

    from gpudiag.lint import lint_paths

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train_2000.py"
        path.write_text(big_script())
        n_lines = len(path.read_text().splitlines())
        cmd = [*_gpudiag(), "lint", str(path)]
        # As installed by pip: modules load from cached bytecode. With
        # PYTHONDONTWRITEBYTECODE=1 (set on some dev machines) every run would
        # recompile every module, which measures the environment, not gpudiag.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        run_env = env
        subprocess.run(cmd, capture_output=True, timeout=60, check=False, env=env)  # warm-up
        # interleaved with two baselines, so a machine whose load drifts affects all alike
        baselines = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "gpudiag --help": [*_gpudiag(), "--help"],
        }
        base_walls: dict[str, list[float]] = {name: [] for name in baselines}
        walls: list[float] = []
        for _ in range(args.n):
            for name, base in baselines.items():
                start = time.perf_counter()
                subprocess.run(base, capture_output=True, timeout=60, check=False, env=run_env)
                base_walls[name].append(time.perf_counter() - start)
            start = time.perf_counter()
            subprocess.run(cmd, capture_output=True, timeout=60, check=False, env=run_env)
            walls.append(time.perf_counter() - start)
        inproc: list[float] = []
        findings = 0
        for _ in range(args.n):
            start = time.perf_counter()
            findings = len(lint_paths([str(path)]).findings)
            inproc.append(time.perf_counter() - start)
    wall = statistics.median(walls)
    lint_only = statistics.median(inproc)
    print(f"script: {n_lines} lines, {findings} findings")
    print("bytecode: cached (as installed; the warm-up run writes it)")
    for name, times in base_walls.items():
        print(f"{name} (baseline): median {statistics.median(times):.3f} s")
    print(f"gpudiag lint (whole process): median {wall:.3f} s over {args.n} runs")
    print(f"lint in process (no start-up): median {lint_only:.3f} s")
    verdict = "OK" if wall < TARGET_S else "OVER"
    print(f"target < {TARGET_S} s wall: {verdict}")
    return 1 if args.enforce and wall >= TARGET_S else 0


if __name__ == "__main__":
    sys.exit(main())
