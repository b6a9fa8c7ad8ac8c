"""torch and GPUtil backends: real child processes here, and their parsers."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from gpudiag.backends.gputil import collect_gputil, parse_gputil_json
from gpudiag.backends.subproc import ChildResult, Runner, child_env, last_json_line, run_child
from gpudiag.backends.torch import collect_torch, parse_torch_json


def _shadow(tmp_path: Path, package: str, error: str) -> dict[str, str | None]:
    """A PYTHONPATH entry where ``import <package>`` fails the way it does in the wild."""
    pkg = tmp_path / package
    pkg.mkdir()
    (pkg / "__init__.py").write_text(f"raise ModuleNotFoundError({error!r})\n")
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}


def _env_runner(overrides: dict[str, str | None]) -> Runner:
    def run(argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> ChildResult:
        return run_child(argv, child_env(overrides), timeout_s)

    return run


def test_real_torch_child_with_no_visible_gpu() -> None:
    # CUDA_VISIBLE_DEVICES="" hides any GPU, so this holds on a CPU build and on a
    # CUDA build with GPUs alike: the state comes from the test, not the machine.
    info, status = collect_torch(runner=_env_runner({"CUDA_VISIBLE_DEVICES": ""}))
    assert status.status == "ok", status
    assert info is not None
    import torch  # the test process may import torch; it never initialises CUDA

    assert info.version == torch.__version__
    assert info.cpu_only is (torch.version.cuda is None)
    assert info.cuda_available is False
    assert info.device_count == 0
    assert info.devices == ()


def test_torch_missing_is_unavailable_not_a_crash(tmp_path: Path) -> None:
    info, status = collect_torch(_shadow(tmp_path, "torch", "No module named 'torch'"))
    assert info is None
    assert status.status == "unavailable"
    assert status.reason == "torch is not installed (ModuleNotFoundError: No module named 'torch')"


def test_torch_child_timeout_is_reported() -> None:
    def slow(argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> ChildResult:
        return run_child([sys.executable, "-c", "import time; time.sleep(5)"], env, timeout_s)

    info, status = collect_torch(timeout_s=0.5, runner=slow)
    assert info is None
    assert status == status.__class__("error", "torch query timed out after 0.5 s")


def test_torch_child_crash_is_reported_with_its_last_line() -> None:
    def crash(argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> ChildResult:
        return ChildResult(134, "", "Fatal Python error: Aborted\nSegmentation fault\n")

    info, status = collect_torch(runner=crash)
    assert info is None
    assert status.reason == "torch query failed (exit 134): Segmentation fault"


def test_torch_cuda_init_failure_is_an_error_source() -> None:
    info, status = parse_torch_json(
        {
            "version": "2.4.1+cu124",
            "cuda_version": "12.4",
            "cpu_only": False,
            "cuda_available": False,
            "device_count": 0,
            "arch_list": ["sm_80", "sm_90"],
            "devices": [],
            "error": "CUDA initialization: The NVIDIA driver on your system is too old",
        }
    )
    assert info is not None and info.arch_list == ("sm_80", "sm_90")
    assert status.status == "error"
    assert status.reason == (
        "torch could not initialise CUDA: CUDA initialization: The NVIDIA driver on your "
        "system is too old"
    )


def test_torch_parse_devices() -> None:
    info, status = parse_torch_json(
        {
            "version": "2.4.1+cu124",
            "cuda_version": "12.4",
            "cpu_only": False,
            "cuda_available": True,
            "device_count": 1,
            "arch_list": ["sm_80"],
            "devices": [
                {
                    "cuda_ordinal": 0,
                    "name": "NVIDIA H100 80GB HBM3",
                    "uuid": "a1b2c3d4-0000-1111-2222-333344445555",
                    "memory_total_mib": 81008,
                    "multiprocessor_count": 132,
                    "compute_capability": "9.0",
                }
            ],
            "error": None,
        }
    )
    assert status.status == "ok"
    assert info is not None
    assert info.devices[0].multiprocessor_count == 132
    assert info.devices[0].uuid == "a1b2c3d4-0000-1111-2222-333344445555"


def test_real_gputil_child_without_nvidia_smi_is_unavailable_not_zero_gpus(
    tmp_path: Path,
) -> None:
    # A PATH without nvidia-smi (an empty folder), whatever this machine has:
    # GPUtil alone would return [] ("zero GPUs").
    gpus, status = collect_gputil(runner=_env_runner({"PATH": str(tmp_path)}))
    assert gpus is None
    assert status.status == "unavailable"
    assert status.reason == "nvidia-smi not found on PATH (GPUtil would have reported zero GPUs)"


def test_gputil_import_failure_is_unavailable(tmp_path: Path) -> None:
    # What Python >= 3.12 without setuptools does to GPUtil's `from distutils import spawn`.
    fake_smi = tmp_path / "bin"
    fake_smi.mkdir()
    smi = fake_smi / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 0\n")
    smi.chmod(0o755)
    overrides = _shadow(tmp_path, "distutils", "No module named 'distutils'")
    overrides["PATH"] = f"{fake_smi}{os.pathsep}{os.environ['PATH']}"
    # Keep setuptools' distutils shim (distutils-precedence.pth) out of the way,
    # as it is on a Python without setuptools.
    overrides["SETUPTOOLS_USE_DISTUTILS"] = "stdlib"

    def with_env(argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> ChildResult:
        return run_child(argv, child_env(overrides), timeout_s)

    gpus, status = collect_gputil(runner=with_env)
    assert gpus is None
    assert status.status == "unavailable"
    assert status.reason is not None
    assert status.reason.startswith(
        "GPUtil failed to import (ModuleNotFoundError: No module named 'distutils')"
    )


def test_gputil_parse_gpus_and_errors() -> None:
    gpus, status = parse_gputil_json(
        {
            "gpus": [
                {
                    "gputil_id": 0,
                    "uuid": "GPU-1",
                    "name": "Tesla T4",
                    "memory_total_mib": 15360,
                    "memory_used_mib": 3,
                    "load_percent": 12.0,
                    "temperature_c": 41.0,
                }
            ]
        }
    )
    assert status.status == "ok"
    assert gpus is not None and gpus[0].name == "Tesla T4"
    gpus, status = parse_gputil_json({"error": "ValueError: invalid literal for int()"})
    assert gpus is None and status.status == "error"


@pytest.mark.parametrize(
    ("stdout", "line"),
    [
        ('noise\n{"a": 1}\n', '{"a": 1}'),
        ('{"a": 1}\nwarning: later text\n', '{"a": 1}'),
        ("no json here\n", None),
        ("", None),
    ],
)
def test_last_json_line(stdout: str, line: str | None) -> None:
    assert last_json_line(stdout) == line


def test_child_env_removes_unset_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    env = child_env({"CUDA_VISIBLE_DEVICES": None, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert "CUDA_VISIBLE_DEVICES" not in env
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_run_child_reports_a_missing_program() -> None:
    result = run_child(["/nonexistent/gpudiag-test-binary"], {}, 5)
    assert result.returncode is None
    assert result.start_error is not None
    assert "No such file" in result.start_error


def test_malformed_child_data_is_an_error_source_not_a_crash() -> None:
    info, status = parse_torch_json({"version": 2, "devices": []})
    assert info is None
    assert status.status == "error"
    assert (
        status.reason == "torch query printed unexpected data: torch.version must be str, not int"
    )
    gpus, status = parse_gputil_json({"gpus": [{"name": "T4"}]})
    assert gpus is None
    assert status.reason == "GPUtil query printed unexpected data: gputil[0].gputil_id is required"
