"""Shared test helpers: fixture paths, a launcher-free environment, and the ``gpu``
marker's skip rule."""

from __future__ import annotations

import ctypes.util
import os
import shutil
from pathlib import Path

import pytest

from gpudiag.model import Snapshot
from gpudiag.snapshot import load_snapshot

FIXTURES = Path(__file__).parent / "fixtures"

#: Prefixes of launcher variables beyond the table's own (torchrun's PET_ options,
#: whole families of Slurm, Open MPI and PMI variables).
_LAUNCH_PREFIXES = ("SLURM_", "OMPI_", "PMI_", "PET_", "TORCHELASTIC_", "MASTER_")


def clear_launch_env(monkeypatch: pytest.MonkeyPatch, *extra: str) -> None:
    """Unset every launcher variable (each row of gpudiag.launch.table, and their
    families), and every variable named or prefixed by ``extra``: the CLI and the API
    read them from the live environment, and the suite must not depend on its caller's.
    """
    from gpudiag.launch.table import ROWS

    names = {var for row in ROWS for var in row.variables().values()}
    for key in list(os.environ):
        if key in names or key in extra or key.startswith((*_LAUNCH_PREFIXES, *extra)):
            monkeypatch.delenv(key)


def fixture_path(name: str) -> Path:
    """Path of ``tests/fixtures/<name>.json``."""
    return FIXTURES / f"{name}.json"


def load_fixture(name: str) -> Snapshot:
    """The snapshot fixture ``tests/fixtures/<name>.json``."""
    return load_snapshot(fixture_path(name))


def _has_cuda_driver() -> bool:
    # Decided without importing torch or initialising CUDA in the test process.
    return ctypes.util.find_library("cuda") is not None and shutil.which("nvidia-smi") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _has_cuda_driver():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU and driver (marker: gpu)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
