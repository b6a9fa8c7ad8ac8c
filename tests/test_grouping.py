"""Merging per-GPU findings on structured data (gpudiag.core.grouping, issue 16).

Findings merge by code, severity, wording and parameters; the wording is rendered
once for the group. No rendered label is searched for in a message, so nothing a
GPU or process is called can make two different findings look alike.
"""

from __future__ import annotations

from dataclasses import replace

from gpudiag.core.grouping import GpuGroup, PerGpu, gpu_label, merge_per_gpu
from gpudiag.core.health import health_findings
from gpudiag.core.visibility import resolve_visible
from gpudiag.model import Finding, Gpu, GpuProcess, Snapshot

from .conftest import load_fixture

A100X8 = load_fixture("a100x8")


def _wording(g: GpuGroup, count: int) -> tuple[str, str]:
    return (f"{g.label} {g.have} {count} thing(s).", f"nvidia-smi -r -i {g.ids}")


def _other_wording(g: GpuGroup, count: int) -> tuple[str, str]:
    return (f"{g.label} {g.be} odd ({count}).", "none")


def _gpu(index: int, name: str = "NVIDIA A100-SXM4-80GB") -> Gpu:
    return Gpu(nvml_index=index, uuid=f"GPU-{index:08x}-0000-0000-0000-000000000000", name=name)


def _health(snapshot: Snapshot, code: str) -> list[Finding]:
    found = health_findings(snapshot, resolve_visible(None, None, snapshot), amp=None)
    return [f for f in found if f.code == code]


def test_one_gpu_is_worded_in_the_singular() -> None:
    gpu = _gpu(3)
    [f] = merge_per_gpu([PerGpu(gpu, "HEALTH-X", "warning", _wording, (2,), "Boom")])
    assert f == Finding(
        code="HEALTH-X",
        severity="warning",
        message=f"{gpu_label(gpu)} has 2 thing(s).",
        fix="nvidia-smi -r -i 3",
        predicts="Boom",
        subject=gpu.uuid,
    )


def test_the_same_finding_on_two_gpus_is_one_naming_both() -> None:
    a, b = _gpu(0), _gpu(5)
    [f] = merge_per_gpu([PerGpu(g, "HEALTH-X", "error", _wording, (2,)) for g in (a, b)])
    assert f.message == (
        "physical GPUs 0, 5 (2x NVIDIA A100-SXM4-80GB: GPU-00000000…, GPU-00000005…) "
        "have 2 thing(s)."
    )
    assert f.fix == "nvidia-smi -r -i 0,5"
    assert f.subject == f"{a.uuid},{b.uuid}"


def test_different_parameters_wording_or_severity_stay_apart() -> None:
    a, b, c, d = (_gpu(i) for i in range(4))
    found = merge_per_gpu(
        [
            PerGpu(a, "HEALTH-X", "error", _wording, (1,)),
            PerGpu(b, "HEALTH-X", "error", _wording, (2,)),
            PerGpu(c, "HEALTH-X", "error", _other_wording, (1,)),
            PerGpu(d, "HEALTH-X", "warning", _wording, (1,)),
        ]
    )
    assert [f.subject for f in found] == [a.uuid, b.uuid, c.uuid, d.uuid]


def test_groups_keep_the_order_of_their_first_member() -> None:
    a, b, c = _gpu(0), _gpu(1), _gpu(2)
    found = merge_per_gpu(
        [
            PerGpu(a, "HEALTH-X", "error", _wording, (1,)),
            PerGpu(b, "HEALTH-X", "error", _wording, (2,)),
            PerGpu(c, "HEALTH-X", "error", _wording, (1,)),
        ]
    )
    assert [f.subject for f in found] == [f"{a.uuid},{c.uuid}", b.uuid]


def test_a_gpu_named_like_another_gpus_label_merges_as_itself() -> None:
    a = _gpu(0)
    b = _gpu(1, name=gpu_label(a))
    [f] = merge_per_gpu([PerGpu(g, "HEALTH-X", "error", _wording, (2,)) for g in (a, b)])
    assert f.message.startswith("physical GPUs 0, 1 (")
    assert f.fix == "nvidia-smi -r -i 0,1"
    assert f.subject == f"{a.uuid},{b.uuid}"


def test_health_merges_the_same_compute_mode_on_many_gpus() -> None:
    gpus = [replace(g, compute_mode="Prohibited") for g in A100X8.gpus[:3]] + list(A100X8.gpus[3:])
    [f] = _health(replace(A100X8, gpus=gpus), "HEALTH-COMPUTE-MODE")
    assert f.message.startswith("physical GPUs 0, 1, 2 (3x ")
    assert ") are in compute mode Prohibited: no process may create a CUDA context." in f.message
    assert f.fix == "sudo nvidia-smi -i 0,1,2 -c DEFAULT, or use another GPU."


def test_health_keeps_different_counts_apart() -> None:
    gpus = [
        replace(g, ecc_uncorrectable_volatile=1 if g.nvml_index == 0 else 2)
        for g in A100X8.gpus[:3]
    ]
    found = _health(replace(A100X8, gpus=gpus), "HEALTH-ECC-UNCORRECTABLE")
    assert [f.message.split(" uncorrectable")[0][-1] for f in found] == ["1", "2"]
    assert found[1].message.startswith("physical GPUs 1, 2 (")
    assert "nvidia-smi -r -i 1,2)" in (found[1].fix or "")


def test_a_process_named_like_its_gpu_does_not_merge_two_gpus() -> None:
    """The text merge replaced every occurrence of a GPU's label by a placeholder, so
    two GPUs each used by a process named after that GPU looked like one finding
    (and were rendered with the group's label in the process list)."""
    gpus = [
        replace(g, processes=(GpuProcess(pid=7, used_memory_mib=100, name=gpu_label(g)),))
        for g in A100X8.gpus[:2]
    ]
    found = _health(replace(A100X8, gpus=gpus), "HEALTH-FOREIGN-PROCESSES")
    assert [f.subject for f in found] == [g.uuid for g in gpus]
    for f, g in zip(found, gpus, strict=True):
        assert f.message.count(gpu_label(g)) == 2
