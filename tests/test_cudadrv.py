"""The driver-verified path (gpudiag.backends.cudadrv) without a GPU.

The no-driver path runs for real here (a real child process, no libcuda); the
child protocol and UUID formatting are tested through their pure helpers and a
fake runner.
"""

from __future__ import annotations

import ctypes.util
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from gpudiag.backends import _cuda_child
from gpudiag.backends.cudadrv import (
    CHILD_MODULE,
    DriverEnumeration,
    cuda_order_for_snapshot,
    driver_enumeration,
    format_uuid,
    parse_child_output,
)
from gpudiag.backends.subproc import ChildResult, python_module_argv

NO_LIBCUDA = ctypes.util.find_library("cuda") is None
needs_no_driver = pytest.mark.skipif(not NO_LIBCUDA, reason="this machine has libcuda")

RAW = bytes.fromhex("9942190aaa314ff14aa9c388d80f85f1")


@pytest.mark.parametrize(
    ("raw", "mig", "text"),
    [
        (RAW, False, "GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1"),
        (RAW, True, "MIG-9942190a-aa31-4ff1-4aa9-c388d80f85f1"),
        (bytes(16), False, "GPU-00000000-0000-0000-0000-000000000000"),
        (b"\xff" * 16, False, "GPU-ffffffff-ffff-ffff-ffff-ffffffffffff"),
    ],
)
def test_format_uuid(raw: bytes, mig: bool, text: str) -> None:
    assert format_uuid(raw, mig) == text


@pytest.mark.parametrize("size", [0, 15, 17])
def test_format_uuid_rejects_wrong_size(size: int) -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        format_uuid(bytes(size))


GPU_HEX = "9942190aaa314ff14aa9c388d80f85f1"
MIG_HEX = "8df08078a22ea180c5c2c2af3977a654"


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (
            {
                "ok": True,
                "error": None,
                "devices": [
                    {"uuid_hex": GPU_HEX, "uuid_v1_hex": GPU_HEX, "pci_bus_id": "0000:07:00.0"}
                ],
            },
            DriverEnumeration(
                ok=True,
                uuids=("GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1",),
                pci_bus_ids=("0000:07:00.0",),
            ),
        ),
        # v2 and v1 differ: a MIG device (v1 gives the parent GPU)
        (
            {
                "ok": True,
                "devices": [
                    {"uuid_hex": MIG_HEX, "uuid_v1_hex": GPU_HEX, "pci_bus_id": "0000:17:00.0"}
                ],
            },
            DriverEnumeration(
                ok=True,
                uuids=("MIG-8df08078-a22e-a180-c5c2-c2af3977a654",),
                pci_bus_ids=("0000:17:00.0",),
            ),
        ),
        # only one UUID call available: reported as GPU-
        (
            {"ok": True, "devices": [{"uuid_hex": MIG_HEX, "uuid_v1_hex": None}]},
            DriverEnumeration(
                ok=True, uuids=("GPU-8df08078-a22e-a180-c5c2-c2af3977a654",), pci_bus_ids=("",)
            ),
        ),
        ({"ok": True, "devices": []}, DriverEnumeration(ok=True)),
        (
            {"ok": False, "error": "cuInit failed: CUDA_ERROR_NO_DEVICE (100)", "devices": []},
            DriverEnumeration(ok=False, error="cuInit failed: CUDA_ERROR_NO_DEVICE (100)"),
        ),
        ({"ok": False}, DriverEnumeration(ok=False, error="CUDA child failed")),
        ([1, 2], DriverEnumeration(ok=False, error="CUDA child printed no JSON object")),
        (
            {"ok": True},
            DriverEnumeration(ok=False, error="CUDA child output has no device list"),
        ),
        (
            {"ok": True, "devices": [{"uuid_hex": "abcd"}]},
            DriverEnumeration(
                ok=False,
                error="malformed CUDA child output: device 0 uuid_hex must be 16 bytes",
            ),
        ),
        (
            {"ok": True, "devices": ["x"]},
            DriverEnumeration(
                ok=False, error="malformed CUDA child output: device 0 is not an object"
            ),
        ),
        (
            {"ok": True, "devices": [{"uuid_hex": "zz" * 16}]},
            DriverEnumeration(
                ok=False,
                error="malformed CUDA child output: non-hexadecimal number found in "
                "fromhex() arg at position 0",
            ),
        ),
    ],
)
def test_parse_child_output(payload: object, expected: DriverEnumeration) -> None:
    assert parse_child_output(payload) == expected


class FakeRunner:
    """Stands in for run_child: records the call, returns a canned result."""

    def __init__(self, result: ChildResult) -> None:
        self.result = result
        self.calls: list[tuple[list[str], dict[str, str], float]] = []

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float
    ) -> ChildResult:
        self.calls.append((list(argv), dict(env), timeout_s))
        return self.result


def _ok_stdout() -> str:
    return json.dumps(
        {"ok": True, "error": None, "devices": [{"uuid_hex": GPU_HEX, "uuid_v1_hex": GPU_HEX}]}
    )


@pytest.mark.parametrize(
    ("spec", "order", "env_cvd", "env_order"),
    [
        ("1,0", "PCI_BUS_ID", "1,0", "PCI_BUS_ID"),
        ("", None, "", None),
        (None, None, None, None),
    ],
)
def test_child_gets_the_candidate_environment(
    monkeypatch: pytest.MonkeyPatch,
    spec: str | None,
    order: str | None,
    env_cvd: str | None,
    env_order: str | None,
) -> None:
    # The caller's own values must not leak into the child.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    runner = FakeRunner(ChildResult(0, "noise\n" + _ok_stdout() + "\n", ""))
    found = driver_enumeration(spec, order, timeout_s=5.0, runner=runner)
    assert found.ok and found.uuids == ("GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1",)
    ((argv, env, timeout_s),) = runner.calls
    assert argv == python_module_argv(CHILD_MODULE)
    assert env.get("CUDA_VISIBLE_DEVICES") == env_cvd
    assert env.get("CUDA_DEVICE_ORDER") == env_order
    assert timeout_s == 5.0


@pytest.mark.parametrize(
    ("result", "error"),
    [
        (ChildResult(None, "", "", timed_out=True), "CUDA child timed out after 5 s"),
        (
            ChildResult(None, "", "", start_error="python: No such file"),
            "could not start the CUDA child: python: No such file",
        ),
        (
            ChildResult(-11, "", "Segmentation fault\n"),
            "CUDA child failed (exit -11): Segmentation fault",
        ),
        (ChildResult(1, "", ""), "CUDA child failed (exit 1): no output"),
        (ChildResult(0, "{not json}\n", ""), "CUDA child printed bad JSON"),
    ],
)
def test_child_failures_become_reasons(result: ChildResult, error: str) -> None:
    found = driver_enumeration("0", None, timeout_s=5.0, runner=FakeRunner(result))
    assert found.ok is False
    assert found.uuids == ()
    assert found.error is not None and found.error.startswith(error)


def test_cuda_order_for_snapshot_removes_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    runner = FakeRunner(ChildResult(0, _ok_stdout(), ""))
    assert cuda_order_for_snapshot(runner=runner) == ("GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1",)
    ((_, env, _),) = runner.calls
    assert "CUDA_VISIBLE_DEVICES" not in env
    assert "CUDA_DEVICE_ORDER" not in env


def test_cuda_order_for_snapshot_none_when_driver_fails() -> None:
    runner = FakeRunner(ChildResult(0, json.dumps({"ok": False, "error": "x"}), ""))
    assert cuda_order_for_snapshot(runner=runner) is None


# ------------------------------------------------------------------ for real, no driver


@needs_no_driver
def test_no_driver_for_real_is_quick_and_says_why() -> None:
    start = time.monotonic()
    found = driver_enumeration("0,1", "PCI_BUS_ID", timeout_s=20.0)
    elapsed_s = time.monotonic() - start
    assert found.ok is False
    assert found.uuids == () and found.pci_bus_ids == ()
    assert found.error is not None and found.error.startswith("libcuda.so.1 not found")
    assert elapsed_s < 10.0


@needs_no_driver
def test_cuda_order_for_snapshot_for_real_without_driver() -> None:
    assert cuda_order_for_snapshot() is None


@needs_no_driver
def test_child_main_prints_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cuda_child.main() == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    payload = json.loads(out)
    assert payload["ok"] is False and payload["devices"] == []
    assert payload["error"].startswith("libcuda.so.1 not found")


def test_child_never_imports_torch() -> None:
    source = Path(_cuda_child.__file__).read_text(encoding="utf-8")
    assert "torch" not in source.replace("no torch", "")
