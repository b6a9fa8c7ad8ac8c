"""gpudiag installs into any training environment and leaves its torch alone (issue 20).

A diagnostic tool must never change what it diagnoses: the package requires no torch
(only the ``probe`` extra names one, with a lower bound), and every command but
``probe`` works beside an old torch without importing it. The wheel is built from the
working tree and installed with pip into a fresh virtual environment that holds a
stand-in torch 1.13.1 (its files only: importing it raises, which proves nothing
imports it).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .wheel import build_wheel, can_build_wheels

ROOT = Path(__file__).resolve().parent.parent
OLD_TORCH = "1.13.1"


def _requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines()
            if line.startswith("Requires-Dist:")]  # fmt: skip


def _plant_old_torch(site: Path) -> None:
    """torch 1.13.1 as pip and gpudiag see it: a dist-info and torch/version.py."""
    pkg = site / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('raise ImportError("stand-in torch: not importable")\n')
    (pkg / "version.py").write_text(f'__version__ = "{OLD_TORCH}+cpu"\ncuda = None\n')
    info = site / f"torch-{OLD_TORCH}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {OLD_TORCH}\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text(
        "torch/__init__.py,,\ntorch/version.py,,\n"
        + "".join(f"torch-{OLD_TORCH}.dist-info/{n},," + "\n" for n in ("METADATA", "INSTALLER"))
        + f"torch-{OLD_TORCH}.dist-info/RECORD,,\n"
    )


def _dependencies_path(tmp_path: Path) -> Path:
    """A folder exposing this environment's click, tabulate, pynvml and GPUtil.

    The venv gets no network: its other dependencies come from here (PYTHONPATH).
    """
    deps = tmp_path / "deps"
    deps.mkdir()
    for module in ("click", "tabulate", "pynvml", "GPUtil"):
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None, module
        origin = Path(spec.origin)
        source = origin.parent if origin.name == "__init__.py" else origin
        (deps / source.name).symlink_to(source)
    return deps


@pytest.mark.skipif(
    not can_build_wheels(), reason="building a wheel needs setuptools and wheel here"
)
def test_wheel_installs_beside_an_old_torch_and_every_command_but_probe_works(
    tmp_path: Path,
) -> None:
    wheel = build_wheel(tmp_path)
    requires = _requires(wheel)
    torch_reqs = [r for r in requires if re.match(r"torch\b", r)]
    # torch only under an extra, with a lower bound only.
    assert torch_reqs and all("extra ==" in r for r in torch_reqs), requires
    assert any('extra == "probe"' in r for r in torch_reqs), requires
    assert all(re.match(r"torch>=[\d.]+;", r.replace(" ", "")) for r in torch_reqs), torch_reqs

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()
    )  # fmt: skip
    _plant_old_torch(site)
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-index", "--no-deps", str(wheel)],
                   check=True, timeout=300, capture_output=True)  # fmt: skip
    # pip's own consistency check: missing click etc. (offline here), but no torch conflict.
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=120)
    assert "torch" not in checked.stdout.lower(), checked.stdout
    version = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('torch'))"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    assert version == OLD_TORCH

    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUDIAG_", "PYTHON"))} | {
        "PYTHONPATH": str(_dependencies_path(tmp_path)),
        "COLUMNS": "100",
    }
    gpudiag = str(venv / "bin" / "gpudiag")
    fixture = str(ROOT / "tests" / "fixtures" / "a100x8.json")
    script = tmp_path / "train.py"
    script.write_text("import torch\nmodel = torch.nn.DataParallel(model, device_ids=[0, 1])\n")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([gpudiag, *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, check=False)  # fmt: skip

    listed = run("list")
    assert listed.returncode in (0, 1) and "Traceback" not in listed.stderr, listed.stderr
    assert f"torch {OLD_TORCH}+cpu" in listed.stdout  # read from its files, not imported
    checked_snapshot = run("check", "--snapshot", fixture, "--device-ids", "0,1")
    assert checked_snapshot.returncode in (0, 1), checked_snapshot.stderr
    assert "DP-DEVICES" in checked_snapshot.stdout
    linted = run("lint", str(script))
    assert linted.returncode in (0, 1) and "Traceback" not in linted.stderr, linted.stderr
    for args in (("explain", "DP-DEVICES"), ("snapshot", "-o", str(tmp_path / "s.json"))):
        done = run(*args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
    probed = run("probe", "single", "--device", "cpu")
    assert probed.returncode == 2, probed.stderr
    assert probed.stderr.strip().splitlines() == [
        f"gpudiag: error: probe needs torch >= 2.1; this Python has torch {OLD_TORCH}+cpu "
        "(list, check, lint, snapshot and explain work with it)"
    ]
    # Nothing above changed the environment's torch.
    assert (site / f"torch-{OLD_TORCH}.dist-info").is_dir()


def test_probe_without_torch_is_one_line() -> None:
    from gpudiag.backends.torchdist import probe_torch_problem

    text = probe_torch_problem(lambda name: None)
    assert text is not None and "\n" not in text
    assert text.startswith("probe needs torch >= 2.1 and torch is not installed")
    assert "pip install 'gpudiag[probe]'" in text
    assert probe_torch_problem() is None  # this environment's torch 2.13 can probe
