"""No foreign code: gpudiag's children never import from the working directory.

A user runs gpudiag wherever their job lives; that directory may hold a
``json.py``, a ``torch.py`` or a ``gpudiag/`` (a checkout, or a neighbour's
trap). ``python -m`` would put it first on ``sys.path`` in every child. Each
hostile module here writes a marker file when imported; no command may leave one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpudiag.backends.cudadrv import absolute_library_path
from gpudiag.backends.subproc import python_module_argv, run_child

_HOSTILE = """\
import os, pathlib
pathlib.Path({marker!r}, {name!r} + "." + str(os.getpid())).write_text("imported")
raise SystemExit(99)
"""


def _plant(cwd: Path, markers: Path) -> None:
    for rel in (
        "json.py",
        "torch.py",
        "runpy.py",
        "ctypes.py",
        "gpudiag/__init__.py",
        "gpudiag/probes/__init__.py",
        "gpudiag/probes/worker.py",
        "gpudiag/backends/__init__.py",
        "gpudiag/backends/_torch_child.py",
    ):
        path = cwd / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_HOSTILE.format(marker=str(markers), name=rel.replace("/", "_")))


def _gpudiag_argv() -> list[str]:
    # The installed console script: its sys.path[0] is its own bin directory,
    # as for a user typing `gpudiag`. (`python -m gpudiag` would import the
    # hostile package itself, which is the user's own choice to make.)
    script = Path(sys.executable).parent / "gpudiag"
    return [str(script)] if script.exists() else python_module_argv("gpudiag")


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    cwd = tmp_path / "work"
    markers = tmp_path / "markers"
    cwd.mkdir()
    markers.mkdir()
    _plant(cwd, markers)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RANK", "WORLD_SIZE", "SLURM_", "MASTER_", "TORCHELASTIC"))
    }
    env["TMPDIR"] = str(tmp_path)
    env.pop("PYTHONSAFEPATH", None)
    return cwd, markers, env


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["list", "--json"],
        ["check"],
        ["snapshot"],
        ["probe", "single", "--device", "cpu", "--timeout", "60"],
    ],
    ids=["list", "list-json", "check", "snapshot", "probe"],
)
def test_no_command_imports_from_the_working_directory(
    hostile: tuple[Path, Path, dict[str, str]], args: list[str]
) -> None:
    cwd, markers, env = hostile
    proc = subprocess.run(
        [*_gpudiag_argv(), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    planted = sorted(p.name for p in markers.iterdir())
    assert planted == [], f"{args}: hostile modules ran: {planted}\n{proc.stderr[-2000:]}"
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    if args[0] == "probe":
        assert "pass" in proc.stdout


def test_the_child_argv_drops_the_working_directory(
    hostile: tuple[Path, Path, dict[str, str]],
) -> None:
    cwd, markers, env = hostile
    code = "import json, sys; print(json.dumps(sys.path))"
    probe = cwd / "showpath.py"
    probe.write_text(code)
    argv = python_module_argv("showpath")
    # The module itself is found through PYTHONPATH here, as a user's would be.
    env = {**env, "PYTHONPATH": str(cwd.parent / "pp")}
    (cwd.parent / "pp").mkdir()
    (cwd.parent / "pp" / "showpath.py").write_text(code)
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "" not in proc.stdout.splitlines()[-1].strip("[]").split(", ")
    assert str(cwd) not in proc.stdout
    # PYTHONPATH still counts (unlike -I): users rely on it for torch.
    assert str(cwd.parent / "pp") in proc.stdout
    assert sorted(markers.iterdir()) == []


def test_run_child_keeps_argv_arguments() -> None:
    result = run_child(python_module_argv("platform", "--terse"), dict(os.environ), timeout_s=60.0)
    assert result.returncode == 0 and result.stdout.strip(), result.stderr


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        (":", None),
        ("/usr/lib/nvidia", "/usr/lib/nvidia"),
        ("/opt/cuda/lib64::/usr/lib", "/opt/cuda/lib64:/usr/lib"),
        ("lib:/usr/lib:.:", "/usr/lib"),
        ("./lib", None),
    ],
)
def test_libcuda_is_never_searched_for_in_the_working_directory(
    value: str | None, expected: str | None
) -> None:
    # ld.so(8): an empty or relative LD_LIBRARY_PATH entry is resolved against
    # the current directory; the CUDA child gets only the absolute ones.
    assert absolute_library_path(value) == expected
