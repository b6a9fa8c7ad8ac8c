"""``gpudiag list`` and ``gpudiag snapshot`` through click: golden output, exit codes, JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main

from .conftest import fixture_path
from .pinned import controlled_env

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("GPUDIAG_UPDATE_GOLDEN") == "1"

FIXTURE_NAMES = ["a100x8", "mixed4", "a100_mig", "gpu_lost", "no_driver"]


def _run(*args: str, columns: int = 100) -> tuple[int, str, str]:
    # Golden output is laid out for a 100-column terminal, whatever runs the tests, and
    # no GPUDIAG_LIST_* setting or CUDA variable of the caller's shell reaches it.
    result = CliRunner().invoke(main, list(args), env=controlled_env({"COLUMNS": str(columns)}))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"golden output {path.name} changed (GPUDIAG_UPDATE_GOLDEN=1)"


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_list_table_is_golden(name: str) -> None:
    code, out, err = _run("list", "--snapshot", str(fixture_path(name)))
    assert code == 0
    assert err == ""
    _golden(f"list-{name}", out)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("mixed4", ["--visible", "2,0"]),
        ("mixed4", ["--visible", "2,0", "--order", "PCI_BUS_ID"]),
        ("a100x8", ["--visible", "1,2"]),
    ],
)
def test_list_with_visible_is_golden(name: str, args: list[str]) -> None:
    code, out, err = _run("list", "--snapshot", str(fixture_path(name)), *args)
    assert code == 0 and err == ""
    _golden(f"list-{name}-" + "-".join(a.strip("-").replace(",", "_") for a in args), out)


def test_list_json_document() -> None:
    code, out, err = _run("list", "--snapshot", str(fixture_path("mixed4")), "--json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc["schema"] == "gpudiag-list/1"
    assert set(doc) >= {"gpus", "sources", "findings", "visible", "resolution", "torch", "env"}
    # GPU entries use the snapshot's field names, plus the mapping.
    first = doc["gpus"][0]
    assert first["nvml_index"] == 0
    assert first["name"] == "NVIDIA GeForce GTX 1080 Ti"
    assert first["cuda_ordinals"] == [2]
    assert first["seen_by"] == ["nvml", "torch", "gputil"]
    assert [v["nvml_index"] for v in doc["visible"]] == [1, 3, 0, 2]
    assert doc["sources"]["nvml"] == {"status": "ok", "reason": None}
    codes = {f["code"] for f in doc["findings"]}
    assert "VIS-ORDER-MIXED" in codes
    assert all(
        set(f) == {"code", "severity", "message", "fix", "predicts", "predicts_also", "subject"}
        for f in doc["findings"]
    )


def test_list_json_without_driver_is_valid_and_says_why() -> None:
    code, out, _ = _run("list", "--snapshot", str(fixture_path("no_driver")), "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["gpus"] == [] and doc["visible"] == []
    assert doc["sources"]["nvml"]["status"] == "unavailable"
    assert doc["findings"][0]["code"] == "SRC-NVML-UNAVAILABLE"


def test_real_no_driver_path_here() -> None:
    """No fake: this machine has no NVIDIA driver; list must say so and exit 0."""
    try:
        import ctypes

        ctypes.CDLL("libnvidia-ml.so.1")
        pytest.skip("this machine has an NVIDIA driver")
    except OSError:
        pass
    proc = subprocess.run(
        [sys.executable, "-m", "gpudiag", "list"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("No GPUs listed: NVML library not found (libnvidia-ml.so.1")
    # The advice: the HOST- finding's where the host facts tell why, else generic.
    assert "What to do:" in proc.stdout or "Why, and what to do: HOST-" in proc.stdout
    assert "Traceback" not in proc.stderr
    doc_proc = subprocess.run(
        [sys.executable, "-m", "gpudiag", "list", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert doc_proc.returncode == 0
    assert json.loads(doc_proc.stdout)["sources"]["nvml"]["status"] == "unavailable"


def test_snapshot_then_list_round_trips(tmp_path: Path) -> None:
    out_file = tmp_path / "here.json"
    code, out, err = _run("snapshot", "--no-torch", "-o", str(out_file))
    assert code == 0
    assert out == ""
    assert err == f"wrote {out_file}\n"
    doc = json.loads(out_file.read_text())
    assert doc["schema"] == "gpudiag-snapshot/1.4"
    code, out, err = _run("list", "--snapshot", str(out_file), "--json")
    assert code == 0 and err == ""
    listed = json.loads(out)
    assert listed["sources"] == doc["sources"]
    assert listed["env"] == doc["env"]
    assert [g["uuid"] for g in listed["gpus"]] == [g["uuid"] for g in doc["gpus"]]


def test_snapshot_to_stdout_is_the_document() -> None:
    code, out, err = _run("snapshot", "--no-torch")
    assert code == 0 and err == ""
    assert json.loads(out)["sources"]["torch"] == {"status": "skipped", "reason": "not asked"}


def test_snapshot_unwritable_output_is_bad_input(tmp_path: Path) -> None:
    code, out, err = _run(
        "snapshot", "--no-torch", "-o", str(tmp_path / "no" / "such" / "dir.json")
    )
    assert code == 2
    assert out == ""
    assert err.startswith("gpudiag: error: cannot write ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{broken", "is not valid JSON"),
        (
            '{"schema": "other"}',
            "is invalid: schema is 'other', expected 'gpudiag-snapshot/1' or 'gpudiag-snapshot/1.N'",
        ),
    ],
)
def test_malformed_snapshot_is_one_line_and_exit_2(
    tmp_path: Path, content: str, message: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, out, err = _run("list", "--snapshot", str(bad))
    assert code == 2
    assert out == ""
    assert err.startswith("gpudiag: error: snapshot ")
    assert message in err
    assert err.count("\n") == 1


def test_missing_snapshot_file_is_exit_2() -> None:
    code, out, err = _run("list", "--snapshot", "/nonexistent/snap.json")
    assert code == 2 and out == ""
    assert (
        err
        == "gpudiag: error: cannot read snapshot /nonexistent/snap.json: No such file or directory\n"
    )


def test_bad_order_is_a_usage_error() -> None:
    code, out, err = _run("list", "--snapshot", str(fixture_path("a100x8")), "--order", "fastest")
    assert code == 2 and out == ""
    assert "Invalid value for '--order'" in err


_NO_HEAVY_IMPORTS = """
import sys
from gpudiag.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = sorted(m for m in ("torch", "pynvml", "GPUtil", "numpy") if m in sys.modules)
print("HEAVY=" + ",".join(heavy))
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["list", "--help"],
        ["list", "--snapshot", "{F}"],
        ["list", "--snapshot", "{F}", "--visible", "1,2", "--json"],
        ["check", "--snapshot", "{F}", "--visible", "1,2", "--device-ids", "0,1"],
        ["check", "--snapshot", "{F}", "--device-ids", "all", "--amp", "bf16", "--json"],
    ],
)
def test_help_and_snapshot_commands_import_no_torch(args: list[str]) -> None:
    argv = [a.replace("{F}", str(fixture_path("a100x8"))) for a in args]
    proc = subprocess.run(
        [sys.executable, "-c", _NO_HEAVY_IMPORTS, *argv], capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.strip().splitlines()[-1] == "HEAVY=", proc.stdout + proc.stderr


def test_python_dash_m_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpudiag", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("gpudiag, version ")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux /dev/full")
@pytest.mark.parametrize(
    "args",
    [["list", "--json"], ["check"], ["list"]],
)
def test_unwritable_stdout_is_one_line_not_a_traceback(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "gpudiag", *args, "--snapshot", str(fixture_path("a100x8"))],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 2
    assert proc.stderr == "gpudiag: error: cannot write output: No space left on device\n"


@pytest.mark.parametrize(
    ("fixture", "code", "says"),
    [
        ("container_no_gpu", "HOST-CONTAINER-NO-GPU", "docker run --gpus all"),
        ("no_nvidia_gpu", "HOST-NO-NVIDIA-GPU", "Run the job on a GPU node"),
        ("driver_missing", "HOST-DRIVER-MISSING", "modprobe nvidia"),
    ],
)
def test_list_says_why_no_gpu_is_reachable(fixture: str, code: str, says: str) -> None:
    # A container without GPU access or a machine without an NVIDIA GPU is not
    # helped by "install the NVIDIA driver" (issue 13).
    result = CliRunner().invoke(
        main, ["list", "--snapshot", str(fixture_path(fixture))], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0
    assert code in result.stdout
    assert f"Why, and what to do: {code} below." in result.stdout and says in result.stdout
    if code != "HOST-DRIVER-MISSING":
        assert "install the NVIDIA driver" not in result.stdout
    doc = json.loads(
        CliRunner()
        .invoke(main, ["list", "--snapshot", str(fixture_path(fixture)), "--json"])
        .stdout
    )
    codes = [f["code"] for f in doc["findings"]]
    assert code in codes and "SRC-NVML-UNAVAILABLE" not in codes
