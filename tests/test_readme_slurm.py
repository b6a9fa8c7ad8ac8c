"""The README's Slurm line, run as written: a failing check says why in the job log (issue 20)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _slurm_line() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = [
        line for line in readme.splitlines() if "|| exit 1" in line and "gpudiag check" in line
    ]
    assert len(lines) == 1, lines
    return lines[0]


def test_readme_slurm_line_prints_the_reason_to_the_job_log(tmp_path: Path) -> None:
    line = _slurm_line()
    assert re.search(r"--json > gpudiag\.json \|\| exit 1$", line), line
    # The job's machine: 8 GPUs where Slurm gave 4 (GPUDIAG_CHECK_SNAPSHOT stands in for the
    # live node, so the test does not depend on this machine's GPUs).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUDIAG_", "SLURM_"))}
    env |= {
        "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
        "GPUDIAG_CHECK_SNAPSHOT": str(ROOT / "tests" / "fixtures" / "a100x8.json"),
        "SLURM_GPUS_ON_NODE": "4",
    }
    script = f"{line}\necho reached\n"
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 1 and "reached" not in done.stdout
    log = done.stderr.splitlines()
    wanted = "gpudiag: error CHECK-EXPECT-GPUS: Expected 4 GPU(s) but 8"
    assert any(entry.startswith(wanted) for entry in log), log
    assert log[-1].startswith("gpudiag: check failed: ")
    assert (tmp_path / "gpudiag.json").read_text().startswith("{")
