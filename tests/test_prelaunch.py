"""Issue 13's rules through run_check: table-driven, over fixtures of the reported machines.

Each row: the machine, the options and environment, and the findings among WATCHED it
must give (code, severity, a piece of ``predicts``). Healthy machines and correct
launches are rows too, and must give none of the new findings.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpudiag.core import host, port, prelaunch
from gpudiag.core.check import run_check
from gpudiag.errors import GpudiagInputError
from gpudiag.findings.catalog import codes_in
from gpudiag.model import Finding, PortHolder, PortProbe

from .conftest import fixture_path, load_fixture

NEW = {
    info.code
    for area in ("prelaunch", "host", "precision", "port", "ranks")
    for info in codes_in(area)
}
WATCHED = NEW | {
    "DDP-DUPLICATE-GPU",
    "DDP-NOT-LAUNCHED",
    "DDP-LAUNCHER-ENV-MISSING",
    "DDP-NCCL-NO-GPU",
    "SRC-NVML-UNAVAILABLE",
    "HEALTH-AMP-BF16",
    "DP-MODULE-DEVICE-MISMATCH",
    "DP-SET-DEVICE-INVALID",
}
TORCHRUN = {
    "RANK": "1",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "4",
    "LOCAL_WORLD_SIZE": "4",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
    "TORCHELASTIC_RUN_ID": "none",
}
NO_DRIVER = "Found no NVIDIA driver on your system"
KEYERROR = "KeyError: 'LOCAL_RANK'"
Row = tuple[str, str, dict[str, Any], list[tuple[str, str, str | None]]]

CASES: list[Row] = [
    # --launched: a plain `python train.py` of a DDP script.
    (
        "launched-plain-python-reads-local-rank",
        "a100x8",
        {"launched": True, "script_reads": ("LOCAL_RANK",)},
        [("DDP-LAUNCHED-ENV-MISSING", "error", KEYERROR)],
    ),
    (
        "launched-plain-python-env-rendezvous",
        "a100x8",
        {"launched": True},
        [("DDP-LAUNCHED-ENV-MISSING", "error", "variable RANK expected, but not set")],
    ),
    (
        "launched-rank-args-asks-master-addr",
        "a100x8",
        {"launched": True, "init_rank_args": True},
        [("DDP-LAUNCHED-ENV-MISSING", "error", "variable MASTER_ADDR expected, but not set")],
    ),
    (
        "launched-rank-set-world-size-missing",
        "a100x8",
        {"launched": True, "env": {"RANK": "0", "LOCAL_RANK": "0"}},
        [("DDP-LAUNCHED-ENV-MISSING", "error", "variable WORLD_SIZE expected, but not set")],
    ),
    (
        "launched-under-torchrun-is-clean",
        "a100x8",
        {"launched": True, "script_reads": ("LOCAL_RANK",), "env": TORCHRUN, "visible": "0,1,2,3"},
        [],
    ),
    (
        "not-launched-predicts-script-read",
        "a100x8",
        {"nproc_per_node": 8, "script_reads": ("LOCAL_RANK",)},
        [("DDP-NOT-LAUNCHED", "info", KEYERROR)],
    ),
    # No GPU reachable: which of the three it is.
    (
        "container-without-gpus",
        "container_no_gpu",
        {},
        [("HOST-CONTAINER-NO-GPU", "error", NO_DRIVER)],
    ),
    ("no-nvidia-gpu", "no_nvidia_gpu", {}, [("HOST-NO-NVIDIA-GPU", "warning", NO_DRIVER)]),
    ("driver-missing", "driver_missing", {}, [("HOST-DRIVER-MISSING", "error", NO_DRIVER)]),
    # An old snapshot without host facts keeps the inventory's finding.
    ("old-no-driver-snapshot", "no_driver", {}, [("SRC-NVML-UNAVAILABLE", "warning", None)]),
    # nccl without NCCL.
    (
        "windows-nccl-default",
        "windows_rtx4090x2",
        {"nproc_per_node": 2},
        [
            ("DDP-NCCL-NOT-BUILT", "error", "doesn't have NCCL built in"),
            ("DDP-NOT-LAUNCHED", "info", None),
        ],
    ),
    (
        "windows-gloo-is-fine",
        "windows_rtx4090x2",
        {"nproc_per_node": 2, "backend": "gloo"},
        [("DDP-NOT-LAUNCHED", "info", None)],
    ),
    (
        "linux-nccl-is-fine",
        "v100x8",
        {"nproc_per_node": 8, "backend": "nccl"},
        [("DDP-NOT-LAUNCHED", "info", None)],
    ),
    (
        "cpu-build-no-gpu-says-it-once",
        "no_driver",
        {"backend": "nccl"},
        [
            ("SRC-NVML-UNAVAILABLE", "warning", None),
            ("DDP-NCCL-NO-GPU", "error", "doesn't have NCCL built in"),
            ("DDP-NOT-LAUNCHED", "info", None),
        ],
    ),
    # TF32 and fp16 autocast.
    (
        "tf32-on-v100",
        "v100x8",
        {"tf32": True},
        [("HEALTH-TF32-UNSUPPORTED", "warning", "no speed-up")],
    ),
    ("tf32-on-a100", "a100x8", {"tf32": True}, []),
    (
        "tf32-mixed-lists-only-old",
        "mixed4",
        {"tf32": True},
        [("HEALTH-TF32-UNSUPPORTED", "warning", None)],
    ),
    (
        "fp16-on-bf16-trained-a100",
        "a100x8",
        {"amp": "fp16", "model_dtype": "bf16", "visible": "0"},
        [("HEALTH-AMP-FP16-OVERFLOW", "warning", "inf/NaN")],
    ),
    ("fp16-on-a100-plain", "a100x8", {"amp": "fp16", "visible": "0"}, []),
    ("bf16-model-bf16-amp", "a100x8", {"amp": "bf16", "model_dtype": "bf16"}, []),
    # DDP over a device subset.
    (
        "lightning-devices-1-2",
        "a100x8",
        {"ddp_devices": (1, 2)},
        [("DDP-NOT-LAUNCHED", "info", None), ("DDP-CUDA0-CONTEXT", "warning", "GPU 0")],
    ),
    ("subset-with-0", "a100x8", {"ddp_devices": (0, 1)}, [("DDP-NOT-LAUNCHED", "info", None)]),
    (
        "subset-out-of-range",
        "a100x8",
        {"ddp_devices": (1, 8), "visible": "0,1,2"},
        [
            ("DDP-NOT-LAUNCHED", "info", None),
            ("DDP-SET-DEVICE-INVALID", "error", "invalid device ordinal"),
        ],
    ),
    (
        "subset-duplicate",
        "a100x8",
        {"ddp_devices": (1, 1)},
        [("DDP-NOT-LAUNCHED", "info", None), ("DDP-DUPLICATE-GPU", "error", "Duplicate GPU")],
    ),
    # KINETO_USE_DAEMON.
    (
        "kineto-daemon",
        "a100x8",
        {"env": {"KINETO_USE_DAEMON": "1"}},
        [("ENV-KINETO-DAEMON", "warning", "Duplicate GPU detected")],
    ),
    (
        "kineto-empty-counts",
        "a100x8",
        {"env": {"KINETO_USE_DAEMON": ""}},
        [("ENV-KINETO-DAEMON", "warning", None)],
    ),
    (
        "kineto-cpu-build",
        "no_driver",
        {"env": {"KINETO_USE_DAEMON": "1"}},
        [("SRC-NVML-UNAVAILABLE", "warning", None)],
    ),
    # Per-rank --set-device.
    (
        "set-device-is-this-ranks",
        "a100x8",
        {"set_device": 1, "env": TORCHRUN, "visible": "0,1,2,3"},
        [],
    ),
    (
        "set-device-with-local-rank",
        "a100x8",
        {"set_device": 2, "local_rank": 2, "nproc_per_node": 4},
        [("DDP-NOT-LAUNCHED", "info", None)],
    ),
    (
        "set-device-hardcoded-for-all",
        "a100x8",
        {"set_device": 0, "env": TORCHRUN, "visible": "0,1,2,3"},
        [("DDP-DUPLICATE-GPU", "error", "Duplicate GPU detected")],
    ),
    (
        "set-device-per-rank-ok",
        "a100x8",
        {"set_device_per_rank": (0, 1, 2, 3), "env": TORCHRUN, "visible": "0,1,2,3"},
        [],
    ),
    (
        "set-device-per-rank-duplicate",
        "a100x8",
        {"set_device_per_rank": (0, 1, 1, 3), "env": TORCHRUN, "visible": "0,1,2,3"},
        [("DDP-DUPLICATE-GPU", "error", "rank 2 and rank 1")],
    ),
    (
        "set-device-per-rank-invalid",
        "a100x8",
        {"set_device_per_rank": (0, 1, 2, 4), "env": TORCHRUN, "visible": "0,1,2,3"},
        [("DDP-SET-DEVICE-INVALID", "error", "invalid device ordinal")],
    ),
    (
        "set-device-beyond-in-a-rank",
        "a100x8",
        {"set_device": 9, "local_rank": 1, "env": TORCHRUN},
        [("DP-SET-DEVICE-INVALID", "error", "invalid device ordinal")],
    ),
    # The bf16 warning on an 8-GPU V100 node: once, listing the GPUs.
    ("bf16-v100x8-once", "v100x8", {"amp": "bf16"}, [("HEALTH-AMP-BF16", "warning", "bfloat16")]),
    # Healthy machines, no options: nothing new.
    ("healthy-a100x8", "a100x8", {}, []),
    ("healthy-v100x8", "v100x8", {}, []),
    ("healthy-windows", "windows_rtx4090x2", {}, []),
    ("healthy-torchrun", "a100x8", {"env": TORCHRUN, "visible": "0,1,2,3"}, []),
]


def check(fixture: str, kw: dict[str, Any]) -> list[Finding]:
    args = dict(kw)
    if "env" not in args:
        args["env"] = {}
    return list(run_check(load_fixture(fixture), **args).findings)


@pytest.mark.parametrize(("name", "fixture", "kw", "expected"), CASES, ids=[c[0] for c in CASES])
def test_rules(
    name: str, fixture: str, kw: dict[str, Any], expected: list[tuple[str, str, str | None]]
) -> None:
    found = [f for f in check(fixture, kw) if f.code in WATCHED]
    assert sorted((f.code, f.severity) for f in found) == sorted((c, s) for c, s, _ in expected)
    for code, _, text in expected:
        if text is None:
            continue
        finding = next(f for f in found if f.code == code)
        assert text in (finding.predicts or "") + finding.message, (code, finding)
    for f in found:
        if f.code in NEW:
            assert f.fix, f"{f.code} has no fix"


def test_launched_names_every_missing_variable_in_torch_order() -> None:
    [f] = prelaunch.launched_findings({"WORLD_SIZE": "2"}, script_reads=("LOCAL_RANK",))
    assert f.subject == "LOCAL_RANK"
    assert "LOCAL_RANK, RANK, MASTER_ADDR, MASTER_PORT are not set" in f.message
    [g] = prelaunch.launched_findings({"LOCAL_RANK": ""}, script_reads=("LOCAL_RANK",))
    assert g.predicts == "ValueError: invalid literal for int() with base 10: ''"
    [h] = prelaunch.launched_findings({"SLURM_PROCID": "0"})
    assert "srun" in h.message and "SLURM_PROCID" in (h.fix or "")
    assert prelaunch.launched_findings(dict(TORCHRUN)) == []


def test_launched_supersedes_the_softer_findings() -> None:
    found = check("a100x8", {"launched": True, "env": {"RANK": "0"}})
    codes = [f.code for f in found]
    assert "DDP-LAUNCHED-ENV-MISSING" in codes
    assert "DDP-LAUNCHER-ENV-MISSING" not in codes and "DDP-NOT-LAUNCHED" not in codes


def test_grouped_finding_lists_every_gpu() -> None:
    [f] = [x for x in check("v100x8", {"amp": "bf16"}) if x.code == "HEALTH-AMP-BF16"]
    snap = load_fixture("v100x8")
    assert f.message.startswith("physical GPUs 0, 1, 2, 3, 4, 5, 6, 7 (8x Tesla V100-SXM2-32GB:")
    assert f.subject == ",".join(g.uuid or "" for g in snap.gpus)
    assert "on these GPUs" in (f.fix or "")


def test_subset_fix_names_the_visible_devices_value() -> None:
    [f] = [
        x
        for x in check("a100x8", {"ddp_devices": (1, 2), "visible": "0,3,5"})
        if x.code == "DDP-CUDA0-CONTEXT"
    ]
    assert "CUDA_VISIBLE_DEVICES=3,5" in (f.fix or "")
    [g] = [x for x in check("a100x8", {"ddp_devices": (1, 2)}) if x.code == "DDP-CUDA0-CONTEXT"]
    assert "CUDA_VISIBLE_DEVICES=1,2 with Lightning devices=2" in (g.fix or "")


PORT = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"}


@pytest.mark.parametrize(
    ("env", "target"),
    [
        ({}, port.PortTarget("127.0.0.1", 29500, False)),
        (PORT, port.PortTarget("127.0.0.1", 29511, True)),
        (
            {"PET_MASTER_PORT": "29600", "MASTER_ADDR": "node1"},
            port.PortTarget("node1", 29600, True),
        ),
        ({**PORT, "RANK": "0"}, port.PortTarget("127.0.0.1", 29511, True)),
        ({**PORT, "RANK": "1"}, None),  # rank 0 binds, not this one
        ({**PORT, "TORCHELASTIC_RUN_ID": "x", "RANK": "0"}, None),  # torchrun's agent holds it
        ({"MASTER_PORT": "0"}, None),
        ({"MASTER_PORT": "http"}, None),
        ({"MASTER_PORT": "70000"}, None),
    ],
)
def test_port_target(env: dict[str, str], target: port.PortTarget | None) -> None:
    assert port.port_target(env) == target


@pytest.mark.parametrize(
    ("probe", "severity"),
    [
        (
            PortProbe(
                "127.0.0.1",
                29511,
                "in_use",
                "Address already in use",
                (PortHolder(4242, "python", "python old.py"),),
            ),
            "error",
        ),
        (PortProbe("127.0.0.1", 29511, "in_use", "Address already in use"), "error"),
        (PortProbe("127.0.0.1", 29511, "free"), None),
        (PortProbe("10.1.2.3", 29511, "not_local"), None),
        (PortProbe("nowhere", 29511, "error", "does not resolve"), None),
    ],
)
def test_port_findings(probe: PortProbe, severity: str | None) -> None:
    target = port.PortTarget(probe.address, probe.port, True)
    found = port.port_findings(probe, target)
    assert [f.severity for f in found] == ([severity] if severity else [])
    if found:
        assert "port: 29511" in (found[0].predicts or "") and "EADDRINUSE" in (
            found[0].predicts or ""
        )
        assert "MASTER_PORT" in (found[0].fix or "")
        if probe.holders:
            assert "pid 4242 (python): python old.py" in found[0].message
            assert "stop pid 4242" in (found[0].fix or "")
    default = port.port_findings(probe, port.PortTarget(probe.address, probe.port, False))
    assert [f.severity for f in default] == (["warning"] if severity else [])


def test_run_check_probes_only_when_ddp_runs() -> None:
    asked: list[tuple[str, int]] = []

    def prober(address: str, port: int) -> PortProbe:
        asked.append((address, port))
        return PortProbe(address, port, "in_use", "Address already in use")

    snap = load_fixture("a100x8")
    plain = run_check(snap, env=PORT, port_prober=prober, visible="0")
    assert asked == [("127.0.0.1", 29511)]
    assert "DDP-PORT-IN-USE" in [f.code for f in plain.findings] and not plain.ok
    asked.clear()
    run_check(snap, env={}, port_prober=prober)
    assert asked == []  # no DDP option, no launcher variable: no DDP check


@pytest.mark.parametrize(
    "kw",
    [
        {"set_device": 1, "set_device_per_rank": (0, 1)},
        {"set_device_per_rank": ()},
        {"set_device_per_rank": (0, 1), "nproc_per_node": 4},
        {"set_device_per_rank": (0, 1), "local_rank": 3},
        {"set_device": 1, "local_rank": -1},
        {"model_dtype": "int8"},
    ],
)
def test_bad_options_are_input_errors(kw: dict[str, Any]) -> None:
    with pytest.raises(GpudiagInputError):
        check("a100x8", kw)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("", ()),
        ("LOCAL_RANK", ("LOCAL_RANK",)),
        (" LOCAL_RANK , RANK,LOCAL_RANK", ("LOCAL_RANK", "RANK")),
    ],
)
def test_script_reads_option(text: str, names: tuple[str, ...]) -> None:
    # --script-reads is read by the CLI into CheckRequest.script_reads (core/request.py).
    from gpudiag.core.request import CheckRequest

    assert (
        CheckRequest(script_reads=[p for p in text.split(",") if text.strip()]).script_reads
        == names
    )


@pytest.mark.parametrize("text", ["LOCAL RANK", "1RANK", "RANK,", "os.environ['X']"])
def test_script_reads_option_rejects(text: str) -> None:
    from click.testing import CliRunner

    from gpudiag.cli import main

    snap = str(fixture_path("a100x8"))
    result = CliRunner().invoke(main, ["check", "--snapshot", snap, "--script-reads", text])
    assert result.exit_code == 2
    assert "--script-reads must list environment variable names" in result.output


def test_same_health_finding_on_many_gpus_is_one() -> None:
    import dataclasses

    snap = load_fixture("v100x8")
    gpus = tuple(
        dataclasses.replace(
            g,
            compute_mode="Prohibited",
            throttle_reasons=("SW Power Cap",),
            retired_pages_pending=g.nvml_index < 3,
        )
        for g in snap.gpus
    )
    found = run_check(dataclasses.replace(snap, gpus=gpus)).findings
    by_code = {f.code: f for f in found}
    assert [f.code for f in found].count("HEALTH-COMPUTE-MODE") == 1
    assert [f.code for f in found].count("HEALTH-THROTTLE") == 1
    pending = by_code["HEALTH-RETIRED-PAGES-PENDING"]
    assert pending.message.startswith("physical GPUs 0, 1, 2 (3x Tesla V100-SXM2-32GB:")
    assert " have memory pages pending" in pending.message
    assert "nvidia-smi -r -i 0,1,2" in (pending.fix or "")
    mode = by_code["HEALTH-COMPUTE-MODE"]
    assert " are in compute mode Prohibited" in mode.message
    assert "nvidia-smi -i 0,1,2,3,4,5,6,7 -c DEFAULT" in (mode.fix or "")
    assert mode.subject is not None and mode.subject.count(",") == 7


@pytest.mark.parametrize(
    ("host_change", "code", "severity", "text"),
    [
        ({}, "HOST-CONTAINER-NO-GPU", "error", "started without GPU access"),
        (
            {"nvidia_env": {"NVIDIA_VISIBLE_DEVICES": "void"}},
            "HOST-CONTAINER-NO-GPU",
            "error",
            "exposes no GPU",
        ),
        (
            {"nvidia_env": {}, "nvidia_pci_gpus": 0},
            "HOST-NO-NVIDIA-GPU",
            "warning",
            "no NVIDIA GPU",
        ),
        (
            {"nvidia_env": {}, "nvidia_pci_gpus": None},
            "HOST-CONTAINER-NO-GPU",
            "warning",
            "without GPU access",
        ),
        (
            {"dev_nvidia": ("nvidia0", "nvidiactl")},
            "HOST-CONTAINER-NO-GPU",
            "error",
            "passed by hand",
        ),
        # --privileged: the host's devices and driver show through, its libraries do not
        # (NVML's library is missing): not "install the driver" (issue 20).
        (
            {"dev_nvidia": ("nvidia0",), "proc_driver_nvidia": True},
            "HOST-CONTAINER-NO-GPU",
            "error",
            "--privileged",
        ),
        ({"dev_dxg": True, "container_marks": ()}, None, None, None),  # WSL 2
        ({"dev_nvidia": None}, None, None, None),  # /dev unreadable: say nothing
        ({"platform": "Darwin", "container_marks": ()}, "HOST-NO-NVIDIA-GPU", "warning", "macOS"),
        (
            {"container_marks": (), "nvidia_pci_gpus": 3},
            "HOST-DRIVER-MISSING",
            "error",
            "3 NVIDIA GPU(s)",
        ),
        (
            {"container_marks": (), "nvidia_pci_gpus": 3, "proc_driver_nvidia": True},
            None,
            None,
            None,
        ),
    ],
)
def test_no_gpu_split(
    host_change: dict[str, Any], code: str | None, severity: str | None, text: str | None
) -> None:
    import dataclasses

    snap = load_fixture("container_no_gpu")
    assert snap.host is not None
    snap = dataclasses.replace(snap, host=dataclasses.replace(snap.host, **host_change))
    found = host.host_findings(snap)
    assert [(f.code, f.severity) for f in found] == ([(code, severity)] if code else [])
    if found:
        assert text is not None and text in found[0].message
        assert "Found no NVIDIA driver" in (found[0].predicts or "") or "macOS" in found[0].message
    # A reachable GPU silences every one of them.
    assert host.host_findings(dataclasses.replace(load_fixture("v100x8"), host=snap.host)) == []


def test_privileged_container_rule_needs_the_missing_library() -> None:
    import dataclasses

    from gpudiag.model import SourceStatus

    snap = load_fixture("container_no_gpu")
    assert snap.host is not None
    priv = dataclasses.replace(snap.host, dev_nvidia=("nvidia0",), proc_driver_nvidia=True)
    # NVML present but failing otherwise (the runtime mounted it): no HOST- finding.
    sources = {**snap.sources, "nvml": SourceStatus("error", "Driver/library version mismatch")}
    assert host.host_findings(dataclasses.replace(snap, host=priv, sources=sources)) == []


def test_unknown_script_predicts_both_first_failures() -> None:
    [f] = prelaunch.launched_findings({})
    assert f.predicts is not None
    assert f.predicts.startswith(
        "ValueError: Error initializing torch.distributed using env:// rendezvous: "
        "environment variable RANK expected, but not set"
    )
    assert f.predicts.endswith("KeyError: 'LOCAL_RANK'")
    [g] = prelaunch.launched_findings({}, script_reads=("RANK",))
    assert g.predicts == "KeyError: 'RANK'"
    [h] = prelaunch.launched_findings({"LOCAL_RANK": "0"})
    assert "KeyError" not in (h.predicts or "")


def test_cpu_build_of_torch_and_nccl() -> None:
    import dataclasses

    snap = load_fixture("a100x8")  # schema 1.0: nccl_available unknown
    assert snap.torch is not None
    cpu = dataclasses.replace(
        snap,
        torch=dataclasses.replace(snap.torch, version="2.13.0+cpu", cpu_only=True, devices=()),
    )
    res = run_check(cpu, env={}).resolution
    # init_process_group() with no backend: a CPU build picks gloo (no NCCL asked for).
    assert prelaunch.nccl_findings(cpu, res, None) == []
    [f] = prelaunch.nccl_findings(cpu, res, "nccl")
    assert f.predicts == "RuntimeError: Distributed package doesn't have NCCL built in"
    assert "CPU-only build" in f.message
    assert prelaunch.nccl_findings(snap, res, "nccl") == []  # a CUDA build on Linux


@pytest.mark.parametrize(
    ("env", "title"),
    [
        (
            {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2",
             "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
            "Open MPI",
        ),
        ({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1"}, "MPICH"),
    ],
)  # fmt: skip
def test_launched_under_mpi_is_not_called_a_plain_python(env: dict[str, str], title: str) -> None:
    # Found in review: --launched under mpirun said "this looks like a plain python".
    (finding,) = prelaunch.launched_findings(env)
    assert finding.code == "DDP-LAUNCHED-ENV-MISSING"
    assert "plain" not in finding.message
    assert f"{title}" in finding.message and "started this rank" in finding.message
    assert finding.fix is not None and "MASTER_ADDR and MASTER_PORT" in finding.fix


def test_tf32_fix_does_not_say_the_flag_can_stay() -> None:
    # issue 20: Hugging Face's --tf32 True raises on a V100; "can stay" was wrong.
    report = run_check(load_fixture("v100x8"), tf32=True)
    (f,) = [f for f in report.findings if f.code == "HEALTH-TF32-UNSUPPORTED"]
    assert "can stay" not in (f.fix or "") and "Switch TF32 off" in (f.fix or "")
    assert any(
        a.endswith(
            "ValueError: --tf32 requires Ampere or a newer GPU arch, cuda>=11 and torch>=1.7"
        )
        for a in f.predicts_also
    )
