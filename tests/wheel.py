"""Build gpudiag's wheel from the working tree, for tests of the installed package."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def can_build_wheels() -> bool:
    """setuptools and wheel are importable (the suite builds without isolation)."""
    probe = [sys.executable, "-c", "import setuptools, wheel, venv"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def build_wheel(tmp_path: Path) -> Path:
    """The wheel of the working tree (tracked and untracked-but-not-ignored files),
    built in a copy so that no build/ is left in the checkout."""
    src = tmp_path / "src"
    files = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
        capture_output=True, check=True, timeout=60,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, src / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(tmp_path / "dist")],
        check=True, timeout=300, capture_output=True,
    )  # fmt: skip
    return next((tmp_path / "dist").glob("gpudiag-*.whl"))
