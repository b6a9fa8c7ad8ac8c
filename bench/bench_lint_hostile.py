#!/usr/bin/env python3
"""Time ``gpudiag lint`` on the pathological scripts of issue 21 (target: a few seconds each).

A benchmark, not a test: each generator below writes a valid Python script of
about ``--size`` bytes (default: lint's 4 MiB maximum, ``MAX_LINT_BYTES``) that
once made the lint quadratic or made it recurse without bound, and the lint of
it is timed in this process (median of ``-n`` runs). It exits 0 whatever the
times are (``--enforce`` makes it exit 1 over ``--target`` seconds).

    python bench/bench_lint_hostile.py                  # every generator, 4 MiB each
    python bench/bench_lint_hostile.py --size 200000    # smaller (e.g. on old code)
    python bench/bench_lint_hostile.py --only mask_uses --only dotted_rebind
    python bench/bench_lint_hostile.py --process        # also whole `gpudiag lint` runs

issue 21 measured, before the fixes: a CUDA_VISIBLE_DEVICES mask x device uses
(16,000 pairs) 199 s, dotted-name rebinding 47 s at 1 MB; a 400-term ``a+a+...``,
a ~490-arm elif ladder and a 400-attribute chain ended in RecursionError.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

HEADER = "import os\nimport torch\nimport torch.nn as nn\nimport torch.distributed as dist\n"


def _fill(size: int, head: str, unit: Callable[[int], str], tail: str = "") -> str:
    """``head``, then ``unit(0)``, ``unit(1)``… while the text stays under ``size`` bytes."""
    parts = [head]
    used = len(head) + len(tail)
    i = 0
    while True:
        piece = unit(i)
        if used + len(piece) > size:
            break
        parts.append(piece)
        used += len(piece)
        i += 1
    parts.append(tail)
    return "".join(parts)


def mask_uses(size: int) -> str:
    """CUDA_VISIBLE_DEVICES set, then a device use, over and over (mask x uses)."""
    return _fill(
        size,
        HEADER,
        lambda i: f'os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"\ntorch.cuda.set_device({i % 2})\n',
    )


def masks_then_uses(size: int) -> str:
    """Every mask first, then every device use (each use looks back over every mask)."""
    half = size // 2
    masks = _fill(half, HEADER, lambda i: 'os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"\n')
    return masks + _fill(size - len(masks), "", lambda i: 'x = torch.zeros(1).to("cuda:1")\n')


def dotted_rebind(size: int) -> str:
    """Many distinct dotted names bound (``cfg.k123 = 1``), each bind once scanned them all."""
    return _fill(size, HEADER, lambda i: f"cfg.k{i} = {i}\n")


def dotted_rebind_self(size: int) -> str:
    """The same inside a method: ``self.a1 = …`` … then the object rebound."""
    return _fill(
        size,
        HEADER + "class Trainer:\n    def __init__(self):\n",
        lambda i: (
            f"        self.a{i} = self.a{i} if {i} else {i}\n"
            + ("        self = Trainer\n" if i % 1000 == 999 else "")
        ),
        "Trainer()\n",
    )


def env_after_init(size: int) -> str:
    """CUDA initialised, then the mask set again and again (each set looks at every init)."""
    return _fill(
        size,
        HEADER,
        lambda i: f'torch.cuda.is_available()\nos.environ["CUDA_VISIBLE_DEVICES"] = "{i % 8}"\n',
    )


def set_epoch_loop(size: int) -> str:
    """One epoch loop assigning many names and calling set_epoch many times."""
    return _fill(
        size,
        HEADER + "s = torch.utils.data.DistributedSampler(ds)\nfor epoch in range(10):\n",
        lambda i: f"    v{i} = {i}\n    s.set_epoch(w{i})\n",
    )


def dp_moves(size: int) -> str:
    """Many DataParallel wrappers and moves (each wrapper looked at every move)."""
    return _fill(
        size,
        HEADER + "m = nn.Linear(2, 2)\n",
        lambda i: "dp = nn.DataParallel(m, device_ids=[0, 1])\ndp.cuda()\ndp(x)\n",
    )


def checkpoints(size: int) -> str:
    """Many bare saves and bare loads (each load looked at every save)."""
    return _fill(
        size,
        HEADER + "m = nn.Linear(2, 2)\nm.parameters()\n",
        lambda i: "torch.save(m.state_dict(), 'p')\nm.load_state_dict(torch.load('p'))\n",
    )


def def_placements(size: int) -> str:
    """Functions nothing calls, each placing on the bare device and calling set_device."""
    return _fill(
        size,
        HEADER + 'dist.init_process_group("nccl")\n',
        lambda i: f"def f{i}():\n    torch.cuda.set_device(0)\n    x.cuda()\n    y.cuda()\n",
    )


def fork_after_init(size: int) -> str:
    """CUDA initialised, then many forked children that use CUDA."""
    return _fill(
        size,
        HEADER + "import multiprocessing as mp\ndef work():\n    torch.zeros(1).cuda()\n",
        lambda i: "torch.cuda.is_available()\nmp.Process(target=work)\n",
    )


def long_mask(size: int) -> str:
    """A CUDA_VISIBLE_DEVICES value of half the file, then many devices beyond it (each
    finding once quoted the whole value)."""
    head = HEADER + f'os.environ["CUDA_VISIBLE_DEVICES"] = "GPU-{"a" * (size // 2)}"\n'
    return _fill(size, head, lambda i: "torch.cuda.set_device(5)\n")


def many_ids(size: int) -> str:
    """A device_ids literal as long as the file, under a two-GPU mask."""
    ids = ", ".join(str(i) for i in range(max(1, size // 8)))
    return (
        HEADER + 'os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"\nm = nn.Linear(2, 2).cuda()\n'
        f"m = nn.DataParallel(m, device_ids=[{ids}])\n"
    )


def shared_ids(size: int) -> str:
    """One name bound to a 64-id list, used by many DataParallel calls under a mask."""
    ids = ", ".join(str(i) for i in range(64))
    return _fill(
        size,
        HEADER
        + f'os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"\ngpus = [{ids}]\nm = nn.Linear(2, 2)\n',
        lambda i: "dp = nn.DataParallel(m, device_ids=gpus)\n",
    )


def string_doubling(size: int) -> str:
    """``a = a + a`` on every line: a string that doubles (a memory bomb if folded)."""
    return _fill(size, HEADER + 'a = "ab"\n', lambda i: "a = a + a\n")


def deep_sum(size: int) -> str:
    """``a+a+…+a``: as deep as Python's parser goes, then many such lines."""
    line = "x = " + "+".join(["a"] * 900) + "\n"
    return _fill(size, HEADER, lambda i: line)


def deep_attr(size: int) -> str:
    """``a.b.b.b…``: a 900-attribute chain, many times."""
    line = "x = a" + ".b" * 900 + "\n"
    return _fill(size, HEADER, lambda i: line)


def deep_calls(size: int) -> str:
    """``a.b().b()…``: a 400-call method chain, many times."""
    line = "x = a" + ".b()" * 400 + "\n"
    return _fill(size, HEADER, lambda i: line)


def elif_ladder(size: int) -> str:
    """One ``if``/``elif`` ladder with as many arms as Python's parser takes."""
    arms = ["if x == 0:\n    torch.cuda.set_device(0)\n"]
    arms += [f"elif x == {i}:\n    torch.cuda.set_device(0)\n" for i in range(1, 900)]
    ladder = "".join(arms)
    return _fill(size, HEADER + "x = 1\n", lambda i: ladder)


GENERATORS: dict[str, Callable[[int], str]] = {
    fn.__name__: fn
    for fn in (
        mask_uses,
        masks_then_uses,
        dotted_rebind,
        dotted_rebind_self,
        env_after_init,
        set_epoch_loop,
        dp_moves,
        checkpoints,
        def_placements,
        fork_after_init,
        long_mask,
        many_ids,
        shared_ids,
        string_doubling,
        deep_sum,
        deep_attr,
        deep_calls,
        elif_ladder,
    )
}


def _gpudiag() -> list[str]:
    script = Path(sys.executable).with_name("gpudiag")
    if script.exists():
        return [str(script)]
    found = shutil.which("gpudiag")
    return [found] if found else [sys.executable, "-m", "gpudiag"]


def _runs(names: list[str], size: int) -> Iterator[tuple[str, str]]:
    for name in names:
        yield name, GENERATORS[name](size)


def main() -> int:
    from gpudiag.lint.source import MAX_LINT_BYTES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=MAX_LINT_BYTES, help="bytes per script")
    parser.add_argument("-n", type=int, default=1, help="runs per script (median)")
    parser.add_argument("--only", action="append", choices=sorted(GENERATORS), default=None)
    parser.add_argument("--process", action="store_true", help="also time `gpudiag lint`")
    parser.add_argument("--target", type=float, default=5.0, help="seconds (default 5)")
    parser.add_argument("--enforce", action="store_true", help="exit 1 over the target")
    args = parser.parse_args()

    from gpudiag.lint import lint_paths

    over = False
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in _runs(args.only or list(GENERATORS), args.size):
            path = Path(tmp) / f"{name}.py"
            path.write_text(text)
            times: list[float] = []
            findings = 0
            codes: set[str] = set()
            for _ in range(args.n):
                start = time.perf_counter()
                try:
                    report = lint_paths([str(path)])
                except Exception as exc:  # a benchmark reports a crash, it does not stop
                    codes = {f"CRASH {type(exc).__name__}"}
                    times.append(time.perf_counter() - start)
                    break
                times.append(time.perf_counter() - start)
                findings = len(report.findings)
                codes = {f.finding.code for f in report.findings}
            wall = statistics.median(times)
            over = over or wall > args.target
            line = (
                f"{name:20} {len(text):>9} bytes {text.count(chr(10)):>7} lines  "
                f"lint {wall:7.2f} s  {findings:>6} findings {','.join(sorted(codes))[:60]}"
            )
            if args.process:
                env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
                start = time.perf_counter()
                proc = subprocess.run(
                    [*_gpudiag(), "lint", str(path)],
                    capture_output=True,
                    timeout=600,
                    check=False,
                    env=env,
                )
                took = time.perf_counter() - start
                line += f"  process {took:6.2f} s exit {proc.returncode} out {len(proc.stdout)} B"
            print(line, flush=True)
    print(f"target <= {args.target} s per script: {'OVER' if over else 'OK'}")
    return 1 if args.enforce and over else 0


if __name__ == "__main__":
    sys.exit(main())
