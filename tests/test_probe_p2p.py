"""The p2p probe (issue 18, item 4) without a GPU.

The judging (pairs, the link's expected rate, the speed and hang verdicts) is pure
and table-driven here; the copies run on CPU tensors and the all-reduce on gloo in
real child processes, with ``GPUDIAG_PROBE_FAULT=hang:p2p`` planting a hang that
only ``NCCL_P2P_DISABLE=1`` clears. The NCCL path on real GPUs is not exercised here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from gpudiag.backends.nvml import NvmlResult
from gpudiag.cli import main
from gpudiag.cli.exitcodes import OK, TIMEOUT
from gpudiag.model import Gpu, NvLink, SourceStatus
from gpudiag.probes import p2p, p2p_allreduce
from gpudiag.probes.common import WorkerContext, parse_fault
from gpudiag.probes.pairs import (
    PairRow,
    allreduce_verdict,
    device_pairs,
    gpu_by_uuid,
    link_between,
    needs_retry,
    pair_status,
    speed_verdict,
)
from gpudiag.probes.plan import ProbePlan
from gpudiag.probes.results import (
    ALL_PROBE_NAMES,
    PROBE_NAMES,
    ProbeReport,
    ProbeResult,
)
from gpudiag.probes.runner import parse_probe_names, visible_gpu_count
from gpudiag.render.probe import render_probe_table
from gpudiag.render.text import PLAIN

CPU_PAIR = [("cpu", "cpu")]


def _gpu(index: int, bus: str, **kw: Any) -> Gpu:
    return Gpu(nvml_index=index, uuid=f"GPU-{index}", name="GPU", pci_bus_id=bus, **kw)


# --- pure: pairs, links, verdicts ----------------------------------------------------


@pytest.mark.parametrize(
    ("ordinals", "expected"),
    [
        ([], []),
        ([0], []),
        ([0, 1], [(0, 1)]),
        ([2, 0, 1], [(0, 1), (0, 2), (1, 2)]),
        ([0, 1, 2, 3], [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]),
    ],
)
def test_device_pairs(ordinals: list[int], expected: list[tuple[int, int]]) -> None:
    assert device_pairs(ordinals) == expected


def test_device_pairs_refuses_a_gpu_paired_with_itself() -> None:
    with pytest.raises(ValueError, match="appears twice"):
        device_pairs([0, 1, 1])


A_BUS, B_BUS = "00000000:17:00.0", "00000000:65:00.0"


def _nvl(link: int, remote: str | None, kind: str = "GPU", active: bool = True) -> NvLink:
    return NvLink(link=link, active=active, remote_pci_bus_id=remote, remote_device_type=kind)


@pytest.mark.parametrize(
    ("a_kw", "b_kw", "kind", "expected_gbps"),
    [
        # Two direct links from a to b, one down: 2 x 25 GB/s.
        (
            {"nvlinks": (_nvl(0, B_BUS), _nvl(1, "0000:65:00.0"), _nvl(2, B_BUS, active=False))},
            {},
            "nvlink",
            50.0,
        ),
        # NVSwitch: the fewer of the two GPUs' active switch links (18 vs 17).
        (
            {"nvlinks": tuple(_nvl(i, "0000:c0:00.0", "NVSwitch") for i in range(18))},
            {"nvlinks": tuple(_nvl(i, "0000:c1:00.0", "NVSwitch") for i in range(17))},
            "nvswitch",
            425.0,
        ),
        # Links all down: PCIe. The lower maximum wins; the current (idle Gen1) is ignored.
        (
            {
                "nvlinks": (_nvl(0, B_BUS, active=False),),
                "pcie_link_gen_max": 4,
                "pcie_link_width_max": 16,
                "pcie_link_gen_current": 1,
                "pcie_link_width_current": 16,
            },
            {"pcie_link_gen_max": 3, "pcie_link_width_max": 8},
            "pcie",
            7.9,
        ),
        (
            {"pcie_link_gen_max": 4, "pcie_link_width_max": 16},
            {"pcie_link_gen_max": 4, "pcie_link_width_max": 16},
            "pcie",
            31.5,
        ),
        (
            {"pcie_link_gen_max": 5, "pcie_link_width_max": 16},
            {"pcie_link_gen_max": 5, "pcie_link_width_max": 16},
            "pcie",
            63.0,
        ),
        # A fact missing: PCIe, no expected rate (no verdict on speed).
        (
            {"pcie_link_gen_max": 4},
            {"pcie_link_gen_max": 4, "pcie_link_width_max": 16},
            "pcie",
            None,
        ),
        (
            {"pcie_link_gen_max": 9, "pcie_link_width_max": 16},
            {"pcie_link_gen_max": 9, "pcie_link_width_max": 16},
            "pcie",
            None,
        ),
    ],
)
def test_link_between(
    a_kw: dict[str, Any], b_kw: dict[str, Any], kind: str, expected_gbps: float | None
) -> None:
    link = link_between(_gpu(0, A_BUS, **a_kw), _gpu(1, B_BUS, **b_kw))
    assert link is not None
    assert (link.kind, link.expected_gbps) == (kind, expected_gbps)
    assert link.basis


def test_link_between_unknown_gpu() -> None:
    assert link_between(None, _gpu(1, B_BUS)) is None
    assert link_between(_gpu(0, A_BUS), None) is None


def test_gpu_by_uuid_joins_torch_and_nvml_spellings() -> None:
    gpus = (_gpu(0, A_BUS), _gpu(1, B_BUS))
    # torch's get_device_properties(i).uuid has no "GPU-" prefix; NVML's has.
    assert gpu_by_uuid(gpus, "1") is gpus[1]
    assert gpu_by_uuid(gpus, "GPU-0") is gpus[0]
    hexed = replace(gpus[0], uuid="GPU-9e8d7c6b-aaaa")
    assert gpu_by_uuid((hexed,), "9E8D7C6B-AAAA") is hexed
    assert gpu_by_uuid(gpus, "9") is None
    assert gpu_by_uuid(gpus, None) is None


@pytest.mark.parametrize(
    ("measured", "expected", "verdict"),
    [
        (25.0, 31.5, "ok"),
        (7.875, 31.5, "ok"),  # exactly a quarter
        (7.8, 31.5, "slow"),  # a x16 Gen4 card running at x4
        (1.0, 450.0, "slow"),
        (5.0, None, "unknown"),  # no expected rate: no verdict
        (None, 31.5, "unknown"),
        (5.0, 0.0, "unknown"),
    ],
)
def test_speed_verdict(measured: float | None, expected: float | None, verdict: str) -> None:
    assert speed_verdict(measured, expected) == verdict


@pytest.mark.parametrize(("first", "retry"), [("hang", True), ("pass", False), ("fail", False), ("not_run", False)])  # fmt: skip
def test_only_a_hang_is_retried(first: Any, retry: bool) -> None:
    assert needs_retry(first) is retry


@pytest.mark.parametrize(
    ("first", "retry", "status", "words"),
    [
        ("pass", None, "pass", "all-reduce correct"),
        ("fail", None, "fail", "all-reduce failed: boom"),
        ("not_run", None, "not_run", "--timeout budget"),
        ("hang", "pass", "timeout", "passed with NCCL_P2P_DISABLE=1: the P2P path"),
        ("hang", "hang", "timeout", "hung again with NCCL_P2P_DISABLE=1: not the P2P"),
        ("hang", "fail", "timeout", "with NCCL_P2P_DISABLE=1 it failed: later"),
        ("hang", "not_run", "timeout", "no time left to retry"),
        ("hang", None, "timeout", "no time left to retry"),
    ],
)
def test_allreduce_verdict(first: Any, retry: Any, status: str, words: str) -> None:
    got_status, cause = allreduce_verdict(first, retry, "boom", "later")
    assert got_status == status
    assert words in cause


@pytest.mark.parametrize(
    ("copy_ok", "speed", "allreduce", "status"),
    [
        (True, "ok", "pass", "pass"),
        (True, "unknown", "pass", "pass"),
        (False, "ok", "pass", "fail"),
        (True, "slow", "pass", "fail"),
        (True, "ok", "fail", "fail"),
        (False, "slow", "timeout", "timeout"),
        (True, "ok", "not_run", "not_run"),
    ],
)
def test_pair_status(copy_ok: bool, speed: Any, allreduce: Any, status: str) -> None:
    assert pair_status(copy_ok, speed, allreduce) == status


def test_pair_row_round_trips_through_the_probe_json() -> None:
    row = PairRow("cuda:0", "cuda:1", 0, 1, "timeout", "m", link="pcie", expected_gbps=31.5,
                  copy_ab_gbps=20.0, allreduce="hang", allreduce_retry_p2p_disabled="pass")  # fmt: skip
    result = ProbeResult(probe="p2p", status="timeout", device="cuda", message="m", pairs=(row,))
    data = json.loads(json.dumps(result.to_json()))
    assert data["pairs"][0]["copy_ab_gbps"] == 20.0
    assert data["pairs"][0]["allreduce_retry_p2p_disabled"] == "pass"
    assert ProbeResult.from_json(data) == result
    assert ProbeResult.from_json(data).pairs == (row,)


# --- which probes run ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("which", "gpus", "expected"),
    [
        ("all", 0, PROBE_NAMES),
        ("all", 1, PROBE_NAMES),
        ("all", 2, ALL_PROBE_NAMES),
        ("all", 8, ALL_PROBE_NAMES),
        ("p2p", 0, ("p2p",)),
        ("p2p", 1, ("p2p",)),
    ],
)
def test_all_includes_p2p_only_with_a_pair(which: str, gpus: int, expected: Any) -> None:
    assert parse_probe_names(which, gpus) == expected
    assert "p2p" not in PROBE_NAMES and ALL_PROBE_NAMES[-1] == "p2p"


def test_visible_gpu_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_gpu_count("0,1,2") == 3
    assert visible_gpu_count("") == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b")
    assert visible_gpu_count(None) == 2


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["all", "--visible", "0,1"], ALL_PROBE_NAMES),
        (["all", "--visible", "0"], PROBE_NAMES),
        (["all", "--visible", "0,1,2", "--device-ids", "1"], PROBE_NAMES),
        (["all", "--visible", "0,1,2", "--device-ids", "1,2"], ALL_PROBE_NAMES),
        (["p2p", "--visible", "0"], ("p2p",)),
    ],
)
def test_cli_adds_p2p_to_all_for_two_cuda_gpus(
    monkeypatch: pytest.MonkeyPatch, args: list[str], expected: Any
) -> None:
    # No GPU here: the driver check and the run are stood in for; the plan is the CLI's.
    plans: list[ProbePlan] = []

    def fake_run(plan: ProbePlan, on_event: Any = None) -> ProbeReport:
        plans.append(plan)
        return ProbeReport("cuda", "self", 0, 1, plan.timeout_s, 0.1, None, ())

    monkeypatch.setattr("gpudiag.probes.runner.gpu_driver_present", lambda: True)
    monkeypatch.setattr("gpudiag.probes.runner.run_probes", fake_run)
    monkeypatch.setattr("gpudiag.backends.torchdist.probe_torch_problem", lambda: None)
    result = CliRunner().invoke(main, ["probe", *args, "--device", "cuda", "-q"])
    assert result.exit_code == OK, result.output
    assert plans[0].probes == expected


# --- the copies, on CPU tensors --------------------------------------------------------


def test_copy_both_ways_is_bit_exact_on_cpu() -> None:
    copies = p2p.copy_both_ways("cpu", "cpu", 1 << 16, repeats=2)
    assert copies.ab_exact and copies.ba_exact
    assert copies.mismatched_elements == 0
    assert copies.copy_bytes == 1 << 16
    assert copies.ab_gbps is not None and copies.ab_gbps > 0


def test_copy_both_ways_finds_one_flipped_bit() -> None:
    copies = p2p.copy_both_ways("cpu", "cpu", 1 << 16, repeats=1, corrupt=True)
    assert not copies.ab_exact
    assert copies.ba_exact  # b -> a carried what b held, faithfully
    assert copies.mismatched_elements == 1


# --- the all-reduce, on gloo in child processes ----------------------------------------


def test_pair_passes_on_gloo() -> None:
    rows = p2p.check_pairs(CPU_PAIR, {}, "gloo", time.monotonic() + 120, 1 << 16)
    (row,) = rows
    assert row.status == "pass", row.message
    assert (row.allreduce, row.allreduce_retry_p2p_disabled) == ("pass", None)
    assert row.allreduce_elapsed_s is not None and row.allreduce_elapsed_s > 0
    assert row.speed == "unknown" and row.expected_gbps is None  # no link facts: no verdict
    assert "no expected rate known" in row.message


def test_hang_is_retried_with_p2p_disabled_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # Rank 1 sleeps before the all-reduce unless NCCL_P2P_DISABLE=1 is in its
    # environment: only the retry can pass, so a pass proves the retry carried it.
    monkeypatch.setenv("GPUDIAG_PROBE_FAULT", "hang:p2p")
    stages: list[str] = []
    began = time.monotonic()
    rows = p2p.check_pairs(
        CPU_PAIR, {}, "gloo", began + 120, 1 << 16, stage=stages.append, attempt_cap_s=4
    )
    (row,) = rows
    assert (row.allreduce, row.allreduce_retry_p2p_disabled) == ("hang", "pass")
    assert row.status == "timeout"
    assert "the P2P path between these GPUs is broken" in (row.allreduce_cause or "")
    assert any(s.endswith("with NCCL_P2P_DISABLE=1") for s in stages)
    assert time.monotonic() - began < 100
    result = p2p.summarise(rows, "cpu", 1.0)
    assert result.status == "timeout"
    assert "NCCL_P2P_DISABLE=1" in result.message
    # The report shows the retry and its cause, within 100 columns.
    report = ProbeReport("cpu", "self", 0, 1, 60.0, 2.0, 1.0, (result,))
    text = render_probe_table(report, replace(PLAIN, width=100))
    assert "hang, P2P off: pass" in text
    assert "P2P path between these GPUs is broken" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_no_time_left_means_no_all_reduce() -> None:
    rows = p2p.check_pairs(CPU_PAIR, {}, "gloo", time.monotonic() + 0.5, 1 << 16)
    (row,) = rows
    assert (row.allreduce, row.status) == ("not_run", "not_run")
    assert row.copy_ab_exact  # the copies still ran


def test_a_failing_rank_is_a_failure_not_a_hang() -> None:
    # An unknown device makes both ranks raise: reported as fail, with the reason.
    outcome, elapsed, error = p2p_allreduce.allreduce_attempt(
        ("cpu", "nosuchdevice:0"), "gloo", 20, 60
    )
    assert (outcome, elapsed) == ("fail", None)
    assert "rank 1" in error


def test_summarise_takes_the_worst_pair() -> None:
    good = PairRow("cuda:0", "cuda:1", 0, 1, "pass", "fine")
    bad = PairRow("cuda:0", "cuda:2", 0, 2, "fail", "copy NOT bit-exact")
    result = p2p.summarise([good, bad], "cuda", 1.0, "NVML not read")
    assert result.status == "fail"
    assert result.message.startswith("1 of 2 pair(s) not passed; cuda:0-cuda:2: copy NOT")
    assert result.figures == {"pairs": 2, "gpus": 3}
    assert result.notes == ("NVML not read",)
    assert p2p.summarise([good], "cuda", 1.0).status == "pass"


def test_fault_hook_accepts_p2p() -> None:
    fault = parse_fault("hang:p2p")
    assert fault is not None and fault.applies_to("p2p") and not fault.applies_to("ddp")


# --- the command, on this machine (no GPU: no pair) ------------------------------------


def test_probe_p2p_on_cpu_passes_with_no_pair(tmp_path: Path) -> None:
    env = {"TMPDIR": str(tmp_path), "GPUDIAG_PROBE_FAULT": None}
    result = CliRunner().invoke(main, ["probe", "p2p", "--device", "cpu", "--json"], env=env)
    assert result.exit_code == OK, result.output
    doc = json.loads(result.stdout)
    (probe,) = doc["probes"]
    assert (probe["probe"], probe["status"]) == ("p2p", "pass")
    assert probe["pairs"] == [] and probe["figures"]["pairs"] == 0
    assert probe["message"].startswith("no GPU pair")


# --- the CUDA path's wiring, with torch.cuda and NVML stood in for ----------------------


def _nvml(*gpus: Gpu) -> NvmlResult:
    return NvmlResult(SourceStatus("ok"), gpus=gpus)


def test_links_join_nvml_to_torch_by_uuid(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    pcie = {"pcie_link_gen_max": 4, "pcie_link_width_max": 16}
    # NVML's order differs from CUDA's: the join is by UUID, never by index.
    nvml = _nvml(
        replace(_gpu(0, A_BUS, **pcie), uuid="GPU-bbb"),
        replace(_gpu(1, B_BUS, pcie_link_gen_max=3, pcie_link_width_max=16), uuid="GPU-aaa"),
        replace(_gpu(2, "00000000:99:00.0", **pcie), uuid="GPU-ccc"),
    )
    uuids = {0: "aaa", 1: "bbb", 2: "ccc"}
    monkeypatch.setattr("gpudiag.backends.nvml.collect_nvml", lambda: nvml)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda i: SimpleNamespace(uuid=uuids[i])
    )
    links, note = p2p._links([0, 1, 2])
    assert note is None
    got = {pair: (link.kind, link.expected_gbps) for pair, link in links.items() if link}
    assert got == {
        ("cuda:0", "cuda:1"): ("pcie", 15.8),  # GPU-aaa is Gen3
        ("cuda:0", "cuda:2"): ("pcie", 15.8),
        ("cuda:1", "cuda:2"): ("pcie", 31.5),
    }
    uuids[2] = "zzz"  # a GPU NVML does not list: that pair has no expected rate
    links, note = p2p._links([0, 1, 2])
    assert links[("cuda:1", "cuda:2")] is None and links[("cuda:0", "cuda:1")] is not None
    assert note == "not in NVML's list (no expected rate): cuda:2"
    monkeypatch.setattr(
        "gpudiag.backends.nvml.collect_nvml",
        lambda: NvmlResult(SourceStatus("unavailable", "no driver")),
    )
    assert p2p._links([0, 1]) == ({}, "NVML not read (no driver): no expected rates")


@pytest.mark.parametrize(
    ("device_ids", "pairs"),
    [
        (None, [("cuda:0", "cuda:1"), ("cuda:0", "cuda:2"), ("cuda:1", "cuda:2")]),
        ((0, 2), [("cuda:0", "cuda:2")]),
        ((1,), []),
    ],
)
def test_run_pairs_the_selected_gpus(
    monkeypatch: pytest.MonkeyPatch, device_ids: tuple[int, ...] | None, pairs: list[Any]
) -> None:
    import torch

    seen: list[Any] = []
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    monkeypatch.setattr(p2p, "_links", lambda ordinals: ({}, None))
    monkeypatch.setattr(p2p, "check_pairs", lambda got, *a, **k: seen.append(got) or [])
    ctx = WorkerContext(0, 1, 0, None, "cuda", "env", "r", 60.0, device_ids=device_ids)
    result = p2p.run(ctx)
    assert result.status == "pass"
    if pairs:
        assert seen == [pairs]
    else:
        assert seen == [] and result.message.startswith("no GPU pair (1 GPU selected)")


def test_run_refuses_device_ids_not_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    ctx = WorkerContext(0, 1, 0, None, "cuda", "env", "r", 60.0, device_ids=(0, 5))
    with pytest.raises(ValueError, match=r"--device-ids \[5\] not visible: 2 GPU"):
        p2p.run(ctx)


# --- real hardware (auto-skipped without a driver; not run where this was written) ------


def _gpu_probe(tmp_path: Path, *args: str, **env: str) -> tuple[int, dict[str, Any]]:
    full = {k: v for k, v in os.environ.items() if k != "GPUDIAG_PROBE_FAULT"}
    full |= {"TMPDIR": str(tmp_path), **env}
    argv = [sys.executable, "-m", "gpudiag", "probe", "p2p", "--device", "cuda", "--json"]
    proc = subprocess.run(
        [*argv, *args], env=full, capture_output=True, text=True, timeout=900, check=False
    )
    return proc.returncode, json.loads(proc.stdout)["probes"][0]


@pytest.mark.gpu
def test_gpu_p2p_every_pair(tmp_path: Path) -> None:
    code, probe = _gpu_probe(tmp_path, "--timeout", "600")
    gpus = probe["figures"]["gpus"]
    assert len(probe["pairs"]) == gpus * (gpus - 1) // 2
    for pair in probe["pairs"]:
        assert pair["copy_ab_exact"] and pair["copy_ba_exact"], pair
        assert pair["allreduce"] in ("pass", "hang"), pair  # a hang is a finding, named
    assert code == OK or any(p["allreduce"] == "hang" for p in probe["pairs"])


@pytest.mark.gpu
def test_gpu_p2p_planted_hang_is_named(tmp_path: Path) -> None:
    if visible_gpu_count(None) < 2:
        pytest.skip("fewer than 2 GPUs: no pair")
    code, probe = _gpu_probe(
        tmp_path, "--device-ids", "0,1", "--timeout", "300", GPUDIAG_PROBE_FAULT="hang:p2p"
    )
    (pair,) = probe["pairs"]
    assert (pair["allreduce"], pair["allreduce_retry_p2p_disabled"]) == ("hang", "pass")
    assert code == TIMEOUT
