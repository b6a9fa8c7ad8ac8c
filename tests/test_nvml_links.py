"""Schema 1.2's NVML facts (gpudiag/backends/nvml_links.py) against the fake NVML.

The fake answers from the fixtures and raises the real pynvml error classes, so the
backend's isolation of each field, each link and each pair is exercised as against the
C library.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pynvml
import pytest

from gpudiag.backends.nvml import collect_nvml
from gpudiag.backends.nvml_links import MAX_PAIR_GPUS, collect_pairs, cpu_list, mask_bits
from gpudiag.model import Gpu
from gpudiag.snapshot import snapshot_from_json

from .conftest import fixture_path
from .fake_nvml import FakeNvml

LINK_FIXTURES = ["a100x8", "v100x8", "a100x8_nvlink_down", "rtx4090x4_iommu", "container_shm64"]


def _raw(name: str) -> dict[str, Any]:
    return json.loads(fixture_path(name).read_text())


def _nvml_view(gpu: Gpu) -> Gpu:
    # in_pid_namespace is /proc's answer, added by collect.py, not NVML's.
    procs = tuple(dataclasses.replace(p, in_pid_namespace=None) for p in gpu.processes)
    return dataclasses.replace(gpu, processes=procs)


@pytest.mark.parametrize("name", LINK_FIXTURES)
def test_backend_reproduces_the_links_of_the_fixtures(name: str) -> None:
    raw = _raw(name)
    fake = FakeNvml(raw)
    result = collect_nvml(fake)
    expected = snapshot_from_json(raw)
    assert result.gpus == tuple(_nvml_view(g) for g in expected.gpus)
    assert result.gpu_pairs == expected.gpu_pairs
    for got, want in zip(result.gpus, expected.gpus, strict=True):
        assert got.errors == want.errors, got.nvml_index
    # pynvml's NVML_P2P_CAPS_INDEX_READ is the tuple (0,): the backend passes 0.
    pairs = len(expected.gpu_pairs or ())
    assert fake.p2p_indices == [0, 1, 2] * pairs


def test_a_failing_call_leaves_only_its_field_empty() -> None:
    fake = FakeNvml(
        _raw("a100x8"),
        unsupported=["nvmlDeviceGetP2PStatus", "nvmlDeviceGetCpuAffinityWithinScope"],
    )
    result = collect_nvml(fake)
    gpu = result.gpus[0]
    assert gpu.cpu_affinity is None and gpu.errors["cpu_affinity"] == "Not Supported"
    assert gpu.numa_affinity == (3,) and len(gpu.nvlinks or ()) == 12
    assert result.gpu_pairs is not None and len(result.gpu_pairs) == 28
    pair = result.gpu_pairs[0]
    assert (pair.topology, pair.p2p_read, pair.p2p_write, pair.p2p_nvlink) == (
        "PXB",
        None,
        None,
        None,
    )
    assert pair.errors == dict.fromkeys(("p2p_read", "p2p_write", "p2p_nvlink"), "Not Supported")


def test_lost_gpus_are_left_out_of_the_pairs() -> None:
    result = collect_nvml(FakeNvml(_raw("v100x8"), lost=[2]))
    assert result.gpus[2].lost
    assert result.gpu_pairs is not None
    asked = {(p.nvml_index_a, p.nvml_index_b) for p in result.gpu_pairs}
    assert len(asked) == 21 and not any(2 in pair for pair in asked)


def test_a_gpu_lost_while_its_links_are_read_is_lost_alone() -> None:
    # 25 calls answer (19 from uuid to throttle reasons, four PCIe, two affinity):
    # the first NVLink query finds the GPU gone.
    result = collect_nvml(FakeNvml(_raw("a100x8"), lost=[4], lost_after=25))
    lost = result.gpus[4]
    assert lost.lost and lost.errors.get("nvlinks") == "GPU is lost"
    assert lost.pcie_link_width_current == 16 and lost.nvlinks is None
    assert all(not g.lost and len(g.nvlinks or ()) == 12 for g in result.gpus if g is not lost)


def test_a_handle_that_fails_marks_its_pairs() -> None:
    fake = FakeNvml(_raw("a100x8"), lost=[1])
    fake.nvmlInit()
    pairs = collect_pairs(fake, [0, 1, 2])
    assert pairs is not None
    assert [(p.nvml_index_a, p.nvml_index_b, dict(p.errors)) for p in pairs[:2]] == [
        (0, 1, {"handle": "GPU is lost"}),
        (0, 2, {}),
    ]
    assert pairs[1].p2p_read == "OK" and pairs[0].p2p_read is None


def test_too_many_gpus_for_pairs_are_not_asked() -> None:
    assert collect_pairs(object(), list(range(MAX_PAIR_GPUS + 1))) is None


@pytest.mark.parametrize(
    ("nvlinks", "expected", "error"),
    [
        (None, None, "link 0: Unknown Error"),  # not collected: a failure, not "no NVLink"
        ([], (), None),  # every link NotSupported: the GPU has none
    ],
)
def test_nvlink_absent_or_unreadable(
    nvlinks: list[object] | None, expected: tuple[()] | None, error: str | None
) -> None:
    raw = _raw("a100x8")
    raw["gpus"][0]["nvlinks"] = nvlinks
    gpu = collect_nvml(FakeNvml(raw)).gpus[0]
    assert gpu.nvlinks == expected
    assert gpu.errors.get("nvlinks") == error


@pytest.mark.parametrize(
    ("state", "status", "missing", "expected"),
    [
        ("Completed", "Success", [], ("Completed", "Success")),
        ("Completed", "Timeout", [], ("Completed", "Timeout")),
        # Before it completes the status means nothing (nvidia-smi: N/A).
        ("In Progress", None, [], ("In Progress", None)),
        # A driver before r550 lacks the V call: the first version answers.
        ("Not Started", None, ["nvmlDeviceGetGpuFabricInfoV"], ("Not Started", None)),
    ],
)
def test_fabric_state(
    state: str, status: str | None, missing: list[str], expected: tuple[str, str | None]
) -> None:
    raw = _raw("a100x8")
    for g in raw["gpus"]:
        g["fabric_state"], g["fabric_status"] = state, status
    gpu = collect_nvml(FakeNvml(raw, missing=missing)).gpus[0]
    assert (gpu.fabric_state, gpu.fabric_status) == expected
    assert "fabric" not in gpu.errors


def test_masks_and_cpu_lists() -> None:
    assert mask_bits([0b110, 1 << 63, 0]) == [1, 2, 127]
    assert cpu_list([5, 0, 1, 2, 7, 8, 64]) == "0-2,5,7-8,64"
    assert cpu_list([]) == ""


def test_the_p2p_index_constant_is_still_a_tuple_in_pynvml() -> None:
    # Why the backend unwraps it (gpudiag/backends/nvml_links.py _const). If a later
    # nvidia-ml-py fixes the trailing comma, the unwrapping stays harmless.
    assert pynvml.NVML_P2P_CAPS_INDEX_READ in ((0,), 0)
