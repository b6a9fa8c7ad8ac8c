"""A pair's 2-rank all-reduce for the p2p probe, run in two child processes.

The p2p worker (``gpudiag.probes.p2p``) calls :func:`allreduce_attempt`; each rank is
``gpudiag.probes.p2p_pair``. The limit is enforced here, by killing the ranks, since
NCCL's communicator set-up ignores process-group timeouts (as for ddp, runner.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import cast

from gpudiag.backends.subproc import python_module_argv
from gpudiag.probes.pairs import Attempt

#: Start-up (Python, ``import torch``) of a pair's ranks, as the runner allows its workers.
STARTUP_LIMIT_S = 120.0


def allreduce_attempt(
    devices: tuple[str, str],
    backend: str,
    limit_s: float,
    startup_limit_s: float,
    env_extra: Mapping[str, str] | None = None,
) -> tuple[Attempt, float | None, str]:
    """Runs one 2-rank all-reduce in child processes; ``hang`` when it passes ``limit_s``.

    ``limit_s`` counts from the moment both ranks have imported torch. The ranks'
    process-group timeout is well past it, so a hang is ended here, by the kill,
    and reported as one, not as the error NCCL's watchdog raises at its timeout. The children
    stay in this process's group, so the runner's ``killpg`` at ``--timeout`` ends
    them too. Returns (outcome, the slower rank's all-reduce time, error text).
    """
    work = Path(tempfile.mkdtemp(prefix="p2p-pair-"))
    env = dict(os.environ) | dict(env_extra or {})
    procs: list[subprocess.Popen[bytes]] = []
    results = [work / f"rank{r}.json" for r in (0, 1)]
    try:
        for rank in (0, 1):
            argv = python_module_argv(
                "gpudiag.probes.p2p_pair",
                "--rank", str(rank),
                "--device", devices[rank],
                "--backend", backend,
                "--store", str(work / "store"),
                "--result", str(results[rank]),
                "--timeout", repr(2 * limit_s + 30),
            )  # fmt: skip
            with open(work / f"rank{rank}.log", "wb") as log:
                procs.append(
                    subprocess.Popen(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                        close_fds=True,
                    )
                )
        started = time.monotonic()
        ready_at: float | None = None
        while True:
            now = time.monotonic()
            codes = [p.poll() for p in procs]
            if all(code is not None for code in codes):
                break
            if any(
                code is not None and (code != 0 or _failed(results[rank]))
                for rank, code in enumerate(codes)
            ):
                break  # one rank failed: the other would wait for it forever
            if ready_at is None and all(Path(f"{r}.ready").exists() for r in results):
                ready_at = now
            if ready_at is None and now - started > startup_limit_s:
                return "hang", None, f"ranks not started after {startup_limit_s:g} s"
            if ready_at is not None and now - ready_at > limit_s:
                return "hang", None, f"no result after {limit_s:g} s"
            time.sleep(0.05)
        return _read_results(procs, results, work)
    finally:
        for proc in procs:
            with suppress(OSError):
                proc.kill()
            with suppress(OSError, subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        for path in sorted(work.iterdir(), reverse=True):
            with suppress(OSError):
                path.unlink()
        with suppress(OSError):
            work.rmdir()


def _result(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _failed(path: Path) -> bool:
    """A rank that exited without an ``ok`` result (a crash, an error, a wrong sum)."""
    data = _result(path)
    return data is None or not data.get("ok")


def _read_results(
    procs: Sequence[subprocess.Popen[bytes]], results: Sequence[Path], work: Path
) -> tuple[Attempt, float | None, str]:
    """Both ranks' results; the first rank that reported an error names it, then a
    rank that exited without a result (its log's last lines)."""
    data = [_result(path) for path in results]
    for rank, got in enumerate(data):
        if got is not None and not got.get("ok"):
            return "fail", None, f"rank {rank}: {got.get('error') or 'wrong sum'}"
    for rank, (proc, got) in enumerate(zip(procs, data, strict=True)):
        if got is None and proc.poll() is not None:
            log = (work / f"rank{rank}.log").read_text(encoding="utf-8", errors="replace")
            tail = " | ".join(log.strip().splitlines()[-3:])[:300]
            return "fail", None, f"rank {rank} exited with {proc.poll()}: {tail or 'no output'}"
    if any(got is None for got in data):
        return "fail", None, "a rank left no result"
    elapsed = [float(cast(float, got.get("elapsed_s") or 0.0)) for got in data if got is not None]
    return "pass", max(elapsed), ""
