"""Live list/check/guard without importing torch: torch's files, concurrency, --deep.

The import test poisons ``torch`` and ``numpy``: a fake package on PYTHONPATH
whose import leaves a marker file. Its ``torch/version.py`` is real text, so
the fast path must read it (and show its version) without importing it. A
fake ``nvidia-smi`` on PATH makes gpudiag start its GPUtil and CUDA-driver
children too, so they are covered as well.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import gpudiag.collect as collect
import gpudiag.machine as machine
from gpudiag.backends.cudadrv import DriverEnumeration
from gpudiag.backends.nvml import NvmlResult
from gpudiag.backends.torchdist import NOT_ASKED, parse_version_py, read_torch_facts
from gpudiag.core.cudacompat import driver_supports
from gpudiag.core.inventory import inventory_findings
from gpudiag.model import Snapshot, SourceStatus, TorchInfo

from .conftest import load_fixture

_POISON = """\
import os, sys
with open(os.environ["POISON_MARKER"], "a") as fh:
    fh.write(__name__ + " imported by " + " ".join(sys.argv) + "\\n")
raise ImportError("poisoned for the test: " + __name__)
"""


def _poisoned_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    site = tmp_path / "site"
    for name in ("torch", "numpy"):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(_POISON)
    (site / "torch" / "version.py").write_text(
        "from typing import Optional\n__version__ = '9.8.7+cu124'\n"
        "cuda: Optional[str] = '12.4'\nhip: Optional[str] = None\n"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed (fake for the test)' >&2\nexit 9\n")
    smi.chmod(0o755)
    marker = tmp_path / "imported.txt"
    env = dict(os.environ)
    for key in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(key, None)
    env["PYTHONPATH"] = str(site)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["POISON_MARKER"] = str(marker)
    return env, marker


_COMMANDS = {
    "list": ["-m", "gpudiag", "list"],
    "check": ["-m", "gpudiag", "check"],
    "list --json": ["-m", "gpudiag", "list", "--json"],
    "guard": [
        "-c",
        # guard() raises where the machine has no GPU (CHECK-NO-GPU): the report is in
        # the error then; either way torch must not have been imported.
        "import gpudiag\ntry:\n    r = gpudiag.guard()\nexcept gpudiag.GpuConfigError as e:\n"
        "    r = e.report\nprint('torch', r.snapshot.torch.version)",
    ],
}


def _run_poisoned(tmp_path: Path, args: list[str]) -> tuple[subprocess.CompletedProcess[str], Path]:
    env, marker = _poisoned_env(tmp_path)
    proc = subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return proc, marker


@pytest.mark.parametrize("name", list(_COMMANDS))
def test_live_paths_never_import_torch_or_numpy(tmp_path: Path, name: str) -> None:
    proc, marker = _run_poisoned(tmp_path, _COMMANDS[name])
    assert proc.returncode in (0, 1), proc.stderr
    assert not marker.exists(), marker.read_text()
    # The version came from torch/version.py, read as text.
    assert "9.8.7+cu124" in proc.stdout


def test_deep_does_import_torch(tmp_path: Path) -> None:
    # The poison works: --deep asks torch in a child, which trips it.
    proc, marker = _run_poisoned(tmp_path, ["-m", "gpudiag", "list", "--deep", "--json"])
    assert proc.returncode == 0, proc.stderr
    assert "torch imported by" in marker.read_text()
    doc = json.loads(proc.stdout)
    assert doc["sources"]["torch"]["status"] in ("unavailable", "error")


# --- torch/version.py as text -------------------------------------------------


def test_parse_version_py_reads_only_literals() -> None:
    text = (
        "from typing import Optional\n__all__ = ['x']\n__version__ = '2.4.1+cu124'\n"
        'cuda: Optional[str] = "12.4"\nhip: Optional[str] = None\ngit_version = f(x)\n'
    )
    assert parse_version_py(text) == {"__version__": "2.4.1+cu124", "cuda": "12.4", "hip": None}


def _spec(folder: Path) -> Any:
    return SimpleNamespace(submodule_search_locations=[str(folder)])


@pytest.mark.parametrize(
    ("body", "version", "cuda", "cpu_only"),
    [
        ("__version__ = '2.13.0+cpu'\ncuda = None\nhip = None\n", "2.13.0+cpu", None, True),
        ("__version__ = '2.4.1+cu124'\ncuda = '12.4'\nhip = None\n", "2.4.1+cu124", "12.4", False),
        # ROCm: no CUDA version, but not a CPU build (the torch child's rule).
        (
            "__version__ = '2.4.1+rocm6.1'\ncuda = None\nhip = '6.1.4'\n",
            "2.4.1+rocm6.1",
            None,
            False,
        ),
    ],
)
def test_read_torch_facts(
    tmp_path: Path, body: str, version: str, cuda: str | None, cpu_only: bool
) -> None:
    (tmp_path / "version.py").write_text(body)
    info, status = read_torch_facts(lambda name: _spec(tmp_path))
    assert info == TorchInfo(version=version, cuda_version=cuda, cpu_only=cpu_only)
    assert status == SourceStatus("skipped", NOT_ASKED)
    assert info.device_count is None and info.devices == ()


def test_read_torch_facts_not_installed() -> None:
    info, status = read_torch_facts(lambda name: None)
    assert info is None
    assert status.status == "unavailable" and "not installed" in (status.reason or "")


def test_read_torch_facts_matches_the_installed_torch() -> None:
    # The real torch of this environment: its files agree with its metadata.
    from importlib.metadata import version

    info, _ = read_torch_facts()
    assert info is not None and info.version == version("torch")


# --- the driver's support of torch's CUDA (NVIDIA's compatibility table) --------


@pytest.mark.parametrize(
    ("torch_cuda", "cuda_driver", "driver", "support"),
    [
        ("12.4", "12.4", "550.54.15", "yes"),
        ("12.1", "12.2", "535.154.05", "yes"),
        ("12.4", "12.2", "535.154.05", "minor-compat"),  # same major, >= 525
        ("12.8", None, "530.30.02", "minor-compat"),  # driver version alone: >= 525
        ("12.8", None, "520.61.05", "no"),  # below 12.x's minimum
        ("12.4", "11.8", "520.61.05", "no"),  # newer major
        ("13.0", "12.9", "575.51.03", "no"),
        ("13.0", "13.0", "580.65.06", "yes"),
        ("11.8", None, "450.80.02", "minor-compat"),
        ("11.8", None, "450.51.05", "no"),
        (None, "12.4", "550.54.15", "unknown"),
        ("12.4", None, None, "unknown"),
    ],
)
def test_driver_supports(
    torch_cuda: str | None, cuda_driver: str | None, driver: str | None, support: str
) -> None:
    assert driver_supports(torch_cuda, cuda_driver, driver).support == support


# --- when the fast facts call for torch itself ---------------------------------


def _fast(snapshot: Snapshot, info: TorchInfo) -> Snapshot:
    from dataclasses import replace

    sources = {**snapshot.sources, "torch": SourceStatus("skipped", NOT_ASKED)}
    return replace(snapshot, torch=info, sources=sources)


@pytest.mark.parametrize(
    ("info", "deep"),
    [
        (TorchInfo(version="2.4.1+cu124", cuda_version="12.4", cpu_only=False), False),
        (TorchInfo(version="2.6.0+cu126", cuda_version="12.6", cpu_only=False), True),
        (TorchInfo(version="2.4.1+cu130", cuda_version="13.0", cpu_only=False), True),
        (TorchInfo(version="2.13.0+cpu", cuda_version=None, cpu_only=True), True),
    ],
)
def test_torch_needs_deep(info: TorchInfo, deep: bool) -> None:
    snapshot = _fast(load_fixture("a100x8"), info)  # driver 550, CUDA 12.4
    assert bool(machine.torch_needs_deep(snapshot)) is deep


def test_no_torch_finding_fires_when_torch_was_not_asked() -> None:
    # a100x8 with torch's device count unknown: INV-TORCH-* must stay silent.
    snapshot = _fast(
        load_fixture("a100x8"), TorchInfo(version="2.4.1", cuda_version="12.4", cpu_only=False)
    )
    codes = {f.code for f in inventory_findings(snapshot)}
    assert not {c for c in codes if c.startswith(("INV-TORCH", "SRC-TORCH"))}


# --- concurrency: the children run while NVML is asked -------------------------


def test_driver_and_gputil_children_run_beside_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    a100 = load_fixture("a100x8")
    started = {"driver": threading.Event(), "gputil": threading.Event()}

    def fake_enumerate(spec: str | None, order: str | None) -> DriverEnumeration:
        started["driver"].set()
        return DriverEnumeration(ok=True, uuids=tuple(str(g.uuid) for g in a100.gpus))

    def fake_gputil() -> tuple[None, SourceStatus]:
        started["gputil"].set()
        return None, SourceStatus("error", "fake")

    def fake_nvml() -> NvmlResult:
        # NVML answers only once both children have started: run in turn, this waits 5 s.
        for event in started.values():
            assert event.wait(5), "a child did not start while NVML was being asked"
        return NvmlResult(
            SourceStatus("ok"), a100.driver_version, a100.cuda_driver_version, a100.gpus
        )

    monkeypatch.setattr(collect, "driver_present", lambda: True)
    monkeypatch.setattr(collect, "_enumerate", fake_enumerate)
    monkeypatch.setattr(collect, "_gputil", fake_gputil)
    monkeypatch.setattr(collect, "collect_nvml", fake_nvml)
    monkeypatch.setattr(collect.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    answers: collect.DriverAnswers = {}
    snap = collect.collect_snapshot(deep=False, driver_answers=answers)
    assert snap.cuda_order == tuple(str(g.uuid) for g in a100.gpus)
    assert set(answers) == {(None, None)}
    assert snap.sources["torch"].status in ("skipped", "unavailable")
    assert snap.torch is None or snap.torch.device_count is None


def test_no_driver_starts_no_child(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object) -> None:
        raise AssertionError("no child may start without a driver")

    monkeypatch.setattr(collect, "driver_present", lambda: False)
    monkeypatch.setattr(collect, "_enumerate", forbidden)
    monkeypatch.setattr(collect, "_gputil", forbidden)
    monkeypatch.setattr(collect, "_torch_child", forbidden)
    monkeypatch.setattr(collect.shutil, "which", lambda name: None)
    monkeypatch.setattr(
        collect, "collect_nvml", lambda: NvmlResult(SourceStatus("unavailable", "no driver"))
    )
    snap = collect.collect_snapshot(deep=False)
    assert snap.sources["gputil"].status == "unavailable"
    assert "nvidia-smi not found" in (snap.sources["gputil"].reason or "")


def test_check_auto_goes_deep_for_a_cpu_build_beside_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    a100 = load_fixture("a100x8")
    fast = _fast(a100, TorchInfo(version="2.13.0+cpu", cuda_version=None, cpu_only=True))
    asked: list[bool] = []

    def fake_collect(**kwargs: Any) -> Snapshot:
        asked.append(kwargs["deep"])
        return fast

    deep_info = TorchInfo(version="2.13.0+cpu", cpu_only=True, cuda_available=False, device_count=0)
    monkeypatch.setattr(collect, "collect_snapshot", fake_collect)
    monkeypatch.setattr(
        "gpudiag.backends.torch.collect_torch", lambda env=None: (deep_info, SourceStatus("ok"))
    )
    snap = machine.load_machine(None, torch="auto")
    assert asked == [False]
    assert snap.torch == deep_info and snap.sources["torch"].status == "ok"
    codes = {f.code for f in inventory_findings(snap)}
    assert "INV-TORCH-SEES-NONE" in codes
    # Fast mode never deepens.
    assert machine.load_machine(None, torch="fast") is fast


def test_gputil_child_uses_stdlib_distutils_before_3_12(monkeypatch: pytest.MonkeyPatch) -> None:
    # setuptools' distutils shim made `import GPUtil` cost 0.16-0.5 s here.
    from gpudiag.backends.gputil import collect_gputil
    from gpudiag.backends.subproc import ChildResult

    monkeypatch.delenv("SETUPTOOLS_USE_DISTUTILS", raising=False)
    seen: dict[str, str] = {}

    def runner(argv: Any, env: Any, timeout_s: float) -> ChildResult:
        seen.update(env)
        return ChildResult(0, json.dumps({"gpus": []}) + "\n", "")

    collect_gputil(runner=runner)
    expected = "stdlib" if sys.version_info < (3, 12) else None
    assert seen.get("SETUPTOOLS_USE_DISTUTILS") == expected
    monkeypatch.setenv("SETUPTOOLS_USE_DISTUTILS", "local")  # the user's choice wins
    collect_gputil(runner=runner)
    assert seen["SETUPTOOLS_USE_DISTUTILS"] == "local"
