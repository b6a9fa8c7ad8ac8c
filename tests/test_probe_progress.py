"""``gpudiag probe`` shows progress on stderr at once, long before torch is imported."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def test_first_progress_line_within_1_5_s(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["TMPDIR"] = str(tmp_path)
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpudiag", "probe", "all", "--device", "cpu"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        elapsed = time.monotonic() - start
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    assert first.startswith("gpudiag probe [")
    assert "starting single, dp, ddp, amp on cpu" in first
    assert elapsed <= 1.5, f"first progress line after {elapsed:.2f} s"
