"""Shared test helpers: fixture paths and the ``gpu`` marker's skip rule."""

from __future__ import annotations

import ctypes.util
import shutil
from pathlib import Path

import pytest

from gpudiag.model import Snapshot
from gpudiag.snapshot import load_snapshot

FIXTURES = Path(__file__).parent / "fixtures"


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
