"""A package people can depend on: argument checks in Python's terms, exported
types, PEP 639 license metadata and py.typed in the wheel, types seen by mypy."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

import gpudiag
from gpudiag.core.check import Report
from gpudiag.model import Finding

from .conftest import fixture_path

ROOT = Path(__file__).resolve().parent.parent
A100 = str(fixture_path("a100x8"))


def test_report_and_finding_are_exported() -> None:
    assert gpudiag.Report is Report
    assert gpudiag.Finding is Finding
    assert {"Report", "Finding", "check", "guard", "GpuConfigError"} <= set(gpudiag.__all__)
    report = gpudiag.check(snapshot=Path(A100))  # os.PathLike works too
    assert isinstance(report, gpudiag.Report)
    assert all(isinstance(f, gpudiag.Finding) for f in report.findings)


BAD: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"device_ids": "0,1"}, TypeError, "device_ids must be a sequence of int"),
    ({"device_ids": [0, "1"]}, TypeError, "device_ids must be a sequence of int"),
    ({"device_ids": [True]}, TypeError, "device_ids must be a sequence of int"),
    ({"batch_size": "64"}, TypeError, "batch_size must be an int or None, not str '64'"),
    ({"batch_size": 0}, ValueError, "batch_size must be 1 or more"),
    ({"expect_gpus": -1}, ValueError, "expect_gpus must be 0 or more"),
    ({"output_device": 1.0}, TypeError, "output_device must be an int or None"),
    ({"nproc_per_node": True}, TypeError, "nproc_per_node must be an int or None"),
    ({"backend": "mpi"}, ValueError, "backend must be 'nccl' or 'gloo' or None, not str 'mpi'"),
    ({"amp": "int8"}, ValueError, "amp must be 'bf16' or 'fp16' or None"),
    ({"amp": 16}, TypeError, "amp must be a str or None"),
    ({"order": "fastest"}, ValueError, "order must be 'PCI_BUS_ID', 'FASTEST_FIRST' or None"),
    ({"visible": 1}, TypeError, "visible must be a str or None, not int 1"),
    ({"dataparallel": "yes"}, TypeError, "dataparallel must be True or False"),
    ({"snapshot": 3}, TypeError, "snapshot must be a file path"),
    ({"env": {"RANK": 0}}, TypeError, "env must be a mapping of str to str"),
    ({"module_device": 0}, TypeError, "module_device must be a str or None"),
    # Keywords the launcher and pre-launch checks added (found in review).
    ({"launcher": 3}, TypeError, "launcher must be a str or None"),
    ({"launcher": "bogus"}, ValueError, "launcher must be one of 'torchrun'"),
    ({"script_reads": "LOCAL_RANK"}, TypeError, "script_reads must be a sequence of variable"),
    ({"ddp_devices": "1,2"}, TypeError, "ddp_devices must be a sequence of int"),
    ({"set_device_per_rank": [0, None]}, TypeError, "set_device_per_rank must be a sequence"),
    ({"model_dtype": "int8"}, ValueError, "model_dtype must be 'bf16' or 'fp16' or 'fp32'"),
    ({"local_rank": "0"}, TypeError, "local_rank must be an int or None"),
    ({"tf32": 1}, TypeError, "tf32 must be True or False"),
    ({"deepspeed_include": 1}, TypeError, "deepspeed_include must be a str or None"),
]


@pytest.mark.parametrize(("kwargs", "error", "text"), BAD)
@pytest.mark.parametrize("function", ["check", "guard"])
def test_arguments_are_checked_in_python_terms(
    function: str, kwargs: dict[str, Any], error: type[Exception], text: str
) -> None:
    with pytest.raises(error) as info:
        getattr(gpudiag, function)(**({"snapshot": A100} | kwargs))
    message = str(info.value)
    assert message.startswith(f"gpudiag.{function}(): ")
    assert text in message
    assert "--" not in message  # never a CLI option name


def test_guard_strict_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match=r"^gpudiag.guard\(\): strict must be True or False"):
        gpudiag.guard(snapshot=A100, strict="no")  # type: ignore[arg-type]


def test_good_arguments_still_work() -> None:
    report = gpudiag.check(
        snapshot=A100, device_ids=(0, 1), backend="NCCL", amp="bf16", batch_size=8,
        dataparallel=True, env={},
    )  # fmt: skip
    assert report.ok


def test_wheel_has_license_metadata_and_py_typed_and_mypy_sees_the_types(
    tmp_path: Path,
) -> None:
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-q", "-w", str(wheels), str(ROOT)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("gpudiag-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(site)
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = archive.read(metadata).decode()
    assert "gpudiag/py.typed" in names
    assert "License-Expression: Apache-2.0" in meta
    assert "License-File: LICENSE" in meta
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "Classifier: Typing :: Typed" in meta
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    # A user's script, type-checked against the installed package (PEP 561).
    user = tmp_path / "user.py"
    user.write_text(
        "import gpudiag\n"
        "report: gpudiag.Report = gpudiag.check(snapshot='node.json')\n"
        "finding: gpudiag.Finding = report.findings[0]\n"
        "wrong: int = gpudiag.guard()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(user)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "user.py:4: error: Incompatible types in assignment" in out, out
    assert out.count("error:") == 1, out
