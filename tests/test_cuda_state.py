"""guard() sees every CUDA initialisation: the in-process libcuda check, on fake libcudas.

Two fakes: a Python object standing in for the ctypes library (the seam
``cuda_state.attach``), and a real shared library compiled from C that exports
``cuInit``/``cuDeviceGetCount``/… with the driver's contract
(CUDA_ERROR_NOT_INITIALIZED before cuInit), loaded in a child process so the
real /proc/self/maps and dlopen(RTLD_NOLOAD) path runs.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

from gpudiag import api
from gpudiag.api import GpuConfigError, guard
from gpudiag.backends import cuda_state
from gpudiag.backends.cuda_state import DriverState, driver_state, loaded_libcuda

from .conftest import fixture_path, load_fixture

# What torch/CUDA report for nvidia-smi GPUs 0 and 1 of the a100x8 fixture.
A100_0 = "9942190a-aa31-4ff1-4aa9-c388d80f85f1"
A100_1 = "3ceaaf30-8142-c8ea-91d9-3080f9b439fc"
LIBCUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
MAPS = (
    "7f0000000000-7f0000001000 r-xp 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
    f"7f0000002000-7f0000003000 r-xp 00000000 08:01 456 {LIBCUDA}\n"
)


def _ref_obj(ref: Any) -> Any:
    return ref._obj  # ctypes.byref(x)._obj is x


class FakeLibcuda:
    """The four driver calls the check uses, with the driver's contract."""

    def __init__(self, uuids: list[str], initialised: bool) -> None:
        self.uuids = uuids
        self.initialised = initialised

    def cuDeviceGetCount(self, ref: Any) -> int:
        if not self.initialised:
            return cuda_state.CUDA_ERROR_NOT_INITIALIZED
        _ref_obj(ref).value = len(self.uuids)
        return 0

    def cuDeviceGet(self, ref: Any, ordinal: int) -> int:
        _ref_obj(ref).value = ordinal
        return 0

    def cuDeviceGetUuid_v2(self, ref: Any, dev: ctypes.c_int) -> int:
        raw = bytes.fromhex(self.uuids[dev.value].replace("-", ""))
        ctypes.memmove(_ref_obj(ref), raw, 16)
        return 0


def _fake_driver(monkeypatch: pytest.MonkeyPatch, lib: FakeLibcuda | None, maps: str) -> None:
    monkeypatch.setattr(cuda_state, "read_maps", lambda: maps)
    monkeypatch.setattr(cuda_state, "attach", lambda path: lib)


def _torch_after_is_available() -> types.ModuleType:
    # torch.cuda.is_available() ran cuInit, but torch's own flag stays False.
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_initialized=lambda: False)  # type: ignore[attr-defined]
    return torch


@pytest.mark.parametrize(
    ("maps", "expected"),
    [
        (MAPS, LIBCUDA),
        ("7f-7f r-xp 0 0:0 0 /opt/cuda/lib64/libcudart.so.12\n", None),
        ("7f-7f r-xp 0 0:0 0 /usr/lib64/libcuda.so.580.65.06\n", "/usr/lib64/libcuda.so.580.65.06"),
        ("7f-7f rw-p 0 0:0 0\n", None),
        ("", None),
    ],
)
def test_loaded_libcuda(maps: str, expected: str | None) -> None:
    assert loaded_libcuda(maps) == expected


def test_no_libcuda_mapped_means_not_initialised(monkeypatch: pytest.MonkeyPatch) -> None:
    lib = FakeLibcuda([A100_0], initialised=True)
    _fake_driver(monkeypatch, lib, "7f-7f r-xp 0 0:0 0 /usr/lib/libc.so.6\n")
    assert driver_state() == DriverState(False)


def test_before_cuinit(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_driver(monkeypatch, FakeLibcuda([A100_0], initialised=False), MAPS)
    assert driver_state() == DriverState(False, library=LIBCUDA)


def test_after_cuinit_reads_uuids(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_driver(monkeypatch, FakeLibcuda([A100_0, A100_1], initialised=True), MAPS)
    state = driver_state()
    assert state.initialised
    assert state.uuids == ("GPU-" + A100_0, "GPU-" + A100_1)


def test_unreadable_maps(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> str:
        raise OSError("no /proc")

    monkeypatch.setattr(cuda_state, "read_maps", boom)
    state = driver_state()
    assert not state.initialised and state.error is not None


def test_guard_reports_a_change_after_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    # torch.cuda.is_available() ran cuInit with CUDA_VISIBLE_DEVICES=0,1; the script then
    # set it to "1". torch.cuda.is_initialized() is still False: only the driver knows.
    monkeypatch.setitem(sys.modules, "torch", _torch_after_is_available())
    _fake_driver(monkeypatch, FakeLibcuda([A100_0, A100_1], initialised=True), MAPS)
    monkeypatch.setattr(api, "CVD_AT_IMPORT", "0,1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    with pytest.raises(GpuConfigError) as info:
        guard(snapshot=load_fixture("a100x8"), visible="1", env={})
    findings = {f.code: f for f in info.value.report.findings}
    assert "API-CUDA-ALREADY-INITIALISED" in findings
    changed = findings["VIS-CVD-CHANGED"]
    # the value CUDA read, and the value set since
    assert '"0,1"' in changed.message and '"1"' in changed.message


def test_guard_quiet_when_the_driver_is_not_initialised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", _torch_after_is_available())
    _fake_driver(monkeypatch, FakeLibcuda([A100_0, A100_1], initialised=False), MAPS)
    monkeypatch.setattr(api, "CVD_AT_IMPORT", "0,1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    report = guard(snapshot=load_fixture("a100x8"), visible="1", env={})
    assert not [
        f for f in report.findings if f.code in ("VIS-CVD-CHANGED", "API-CUDA-ALREADY-INITIALISED")
    ]


def test_guard_without_torch_imported_still_asks_the_driver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a library initialised CUDA through the driver API directly (no torch at all)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    _fake_driver(monkeypatch, FakeLibcuda([A100_0, A100_1], initialised=True), MAPS)
    report = guard(snapshot=load_fixture("a100x8"), visible="0,1", env={})
    assert "API-CUDA-ALREADY-INITIALISED" in [f.code for f in report.findings]
    assert "torch" not in sys.modules


_FAKE_C = r"""
#include <string.h>
static int initialised = 0;
static const unsigned char uuids[2][16] = {
  {0x99,0x42,0x19,0x0a,0xaa,0x31,0x4f,0xf1,0x4a,0xa9,0xc3,0x88,0xd8,0x0f,0x85,0xf1},
  {0x3c,0xea,0xaf,0x30,0x81,0x42,0xc8,0xea,0x91,0xd9,0x30,0x80,0xf9,0xb4,0x39,0xfc}};
int cuInit(unsigned int flags) { (void)flags; initialised = 1; return 0; }
int cuDeviceGetCount(int *n) { if (!initialised) return 3; *n = 2; return 0; }
int cuDeviceGet(int *d, int i) { if (!initialised) return 3; *d = i; return 0; }
int cuDeviceGetUuid_v2(unsigned char *out, int d) {
  if (!initialised) return 3; memcpy(out, uuids[d], 16); return 0; }
"""

_CHILD = """
import ctypes, json, sys
from gpudiag.backends.cuda_state import driver_state
before = driver_state()                      # not loaded yet: not initialised
lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
loaded = driver_state()                      # loaded, cuInit not called
lib.cuInit(0)
after = driver_state()
print(json.dumps([before.initialised, loaded.initialised, loaded.library is not None,
                  after.initialised, list(after.uuids or ())]))
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_real_dlopen_noload_path_on_a_compiled_fake_libcuda(tmp_path: Path) -> None:
    src = tmp_path / "fake.c"
    src.write_text(_FAKE_C)
    lib = tmp_path / "libcuda.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, timeout=60)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD), str(lib)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    before, loaded, has_path, after, uuids = json.loads(out.stdout)
    assert (before, loaded, has_path, after) == (False, False, True, True)
    assert uuids == ["GPU-" + A100_0, "GPU-" + A100_1]


_GUARD_CHILD = """
import ctypes, os, sys
import gpudiag                                # CUDA_VISIBLE_DEVICES=0,1 at import
from gpudiag.api import GpuConfigError, guard
lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
lib.cuInit(0)                                 # what torch.cuda.is_available() does
os.environ["CUDA_VISIBLE_DEVICES"] = "1"      # too late: CUDA already read "0,1"
try:
    guard(snapshot=sys.argv[2], visible="1", env={})
except GpuConfigError as exc:
    print("CODES=" + ",".join(f.code for f in exc.report.findings))
else:
    print("CODES=")
print("TORCH=" + str("torch" in sys.modules))
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_guard_end_to_end_on_a_compiled_fake_libcuda(tmp_path: Path) -> None:
    src = tmp_path / "fake.c"
    src.write_text(_FAKE_C)
    lib = tmp_path / "libcuda.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, timeout=60)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["CUDA_VISIBLE_DEVICES"] = "0,1"
    out = subprocess.run(
        [sys.executable, "-c", _GUARD_CHILD, str(lib), str(fixture_path("a100x8"))],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env,
    )
    lines = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    codes = lines["CODES"].split(",")
    assert "VIS-CVD-CHANGED" in codes and "API-CUDA-ALREADY-INITIALISED" in codes
    assert lines["TORCH"] == "False"
