"""``gpudiag probe``: real training probes on the CPU (gloo, bf16 autocast).

Every probe really runs in child processes; faults are planted through the
worker's documented hook (GPUDIAG_PROBE_FAULT), never through mocks. Each run
gets a private TMPDIR so the tests can assert that no temp file, process or
port is left behind.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.cli.exitcodes import BAD_INPUT, FAILED, OK, TIMEOUT
from gpudiag.errors import GpudiagInputError
from gpudiag.launch.process import detect_launch
from gpudiag.probes.results import (
    PROBE_NAMES,
    BandwidthRow,
    Check,
    HangInfo,
    ProbeResult,
    RankRow,
)

PY = sys.executable
# Launcher variables that would make a test's gpudiag think it runs under one.
_LAUNCH_VARS = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
    "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE", "SLURM_PROCID",
    "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "GPUDIAG_PROBE_FAULT",
)  # fmt: skip


def _env(tmpdir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCH_VARS}
    env["TMPDIR"] = str(tmpdir)
    env.update(extra)
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_has_no_listener(port: int) -> bool:
    # SO_REUSEADDR, as TCPStore itself uses: TIME_WAIT remnants do not block
    # the bind, a live listener does.
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _workers_mentioning(text: str) -> list[int]:
    """PIDs of live gpudiag workers whose command line contains ``text``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # Other processes' arguments need not be UTF-8: never decode strictly.
            cmdline = (
                (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            )
        except OSError:
            continue
        if "gpudiag.probes.worker" in cmdline and text in cmdline:
            pids.append(int(entry.name))
    return pids


def _assert_nothing_left(tmpdir: Path, pids: list[int]) -> None:
    # Nothing at all: no gpudiag-probe-* dir, no rendezvous secret, no torch cache
    # (issue 21: an empty torchinductor_<user> was left after every probe). torchrun's
    # own log dir is torchrun's (torch/distributed/elastic/multiprocessing/api.py:
    # tempfile.mkdtemp(prefix="torchelastic_"), never removed), not the probe's.
    left = [p for p in tmpdir.iterdir() if not p.name.startswith("torchelastic_")]
    assert left == []
    assert _workers_mentioning(str(tmpdir)) == []
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _run(
    args: list[str], env: dict[str, str], timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "gpudiag", "probe", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def _probe(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in doc["probes"] if p["probe"] == name)


def _check(probe: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in probe["checks"] if c["name"] == name)


# --- the whole suite on the CPU ---------------------------------------------


@pytest.fixture(scope="module")
def all_cpu(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[subprocess.CompletedProcess[str], Path]]:
    tmpdir = tmp_path_factory.mktemp("all")
    yield _run(["all", "--device", "cpu", "--json", "--timeout", "60"], _env(tmpdir)), tmpdir


def test_all_cpu_json_passes(all_cpu: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, tmpdir = all_cpu
    assert proc.returncode == OK, proc.stdout + proc.stderr
    # stderr carries only progress lines (stdout stays clean for --json).
    assert all(line.startswith("gpudiag probe [") for line in proc.stderr.splitlines())
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "gpudiag-probe/1"
    assert doc["overall"] == "pass"
    assert (doc["device"], doc["launcher"], doc["world_size"]) == ("cpu", "self", 2)
    assert [p["probe"] for p in doc["probes"]] == list(PROBE_NAMES)
    assert [p["status"] for p in doc["probes"]] == ["pass"] * 4
    pids = [r["pid"] for r in _probe(doc, "ddp")["ranks"]]
    _assert_nothing_left(tmpdir, pids)


def test_single_verifies_against_fp64(
    all_cpu: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    single = _probe(json.loads(all_cpu[0].stdout), "single")
    ref = _check(single, "matches_fp64_reference")
    assert ref["passed"] is True and ref["tolerance"] == 1e-4
    assert 0 <= ref["value"] < 1e-5
    assert single["figures"]["loss_last"] < 0.9 * single["figures"]["loss_first"]


def test_dp_reports_cpu_code_path(all_cpu: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    dp = _probe(json.loads(all_cpu[0].stdout), "dp")
    assert dp["figures"]["dp_path"] == "module-direct"
    # The same torch code path runs, so the numbers are bit-equal.
    assert [_check(dp, n)["value"] for n in ("outputs_match", "gradients_match")] == [0.0, 0.0]
    assert dp["memory"] == [{"device": "cpu", "cuda_ordinal": None, "peak_allocated_mib": None}]
    assert any("called the module directly" in n for n in dp["notes"])


def test_ddp_ranks_identical_and_busbw_formula(
    all_cpu: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    ddp = _probe(json.loads(all_cpu[0].stdout), "ddp")
    assert _check(ddp, "bit_identical_across_ranks")["value"] == 0.0
    assert _check(ddp, "matches_combined_batch_reference")["passed"] is True
    assert _check(ddp, "allreduce_correct")["passed"] is True
    assert ddp["figures"]["backend"] == "gloo" and ddp["figures"]["steps"] == 8
    rows = ddp["ranks"]
    assert [
        (r["rank"], r["local_rank"], r["device"], r["gpu_uuid"], r["arrived"]) for r in rows
    ] == [
        (0, 0, "cpu", None, True),
        (1, 1, "cpu", None, True),
    ]
    assert rows[0]["host"] == socket.gethostname()
    assert [b["size_bytes"] for b in ddp["bandwidth"]] == [65536, 1048576, 4194304]
    for b in ddp["bandwidth"]:
        assert b["algbw_gbps"] == pytest.approx(b["size_bytes"] / b["time_s"] / 1e9)
        assert b["busbw_gbps"] == pytest.approx(b["algbw_gbps"] * 2 * (2 - 1) / 2)


def test_amp_bf16_close_to_fp32(all_cpu: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    amp = _probe(json.loads(all_cpu[0].stdout), "amp")
    close = _check(amp, "loss_close_to_fp32_bf16")
    assert close["passed"] is True and close["value"] <= close["tolerance"]
    assert amp["figures"]["speedup_bf16"] > 0
    assert set(amp["figures"]) == {"steps", "loss_fp32", "loss_bf16", "speedup_bf16"}


def test_human_table_single(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # tempfile caches TMPDIR
    result = CliRunner().invoke(
        main, ["probe", "single", "--device", "cpu", "-v"], env=_env(tmp_path)
    )
    assert result.exit_code == OK, result.output
    # Progress goes to stderr, one line per stage off a terminal; stdout has the report.
    progress = result.stderr.splitlines()
    assert progress and all(line.startswith("gpudiag probe [") for line in progress)
    assert progress[-1].endswith("single: pass")
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["PROBE", "STATUS", "TIME", "RESULT"]
    assert lines[1].split()[:2] == ["single", "PASS"]
    assert "ok  matches_fp64_reference" in result.stdout  # -v: the checks
    assert lines[-1].startswith("PASS: 1 pass (self launch, 1 rank(s), device cpu)")
    _assert_nothing_left(tmp_path, [])


def test_help_teaches_and_never_imports_torch() -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from gpudiag.cli import main\n"
        "r = CliRunner().invoke(main, ['probe', '--help'])\n"
        "print(r.exit_code, 'torch' in sys.modules)\n"
        "p = CliRunner().invoke(main, ['probe', 'dp', '--device', 'cpu', '--json'])\n"
        "print(p.exit_code, 'torch' in sys.modules)\n"
        "print(r.stdout)\n"
    )
    proc = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    first, second, text = proc.stdout.split("\n", 2)
    assert first == "0 False"  # --help imported no torch
    assert second == "0 False"  # a real probe run: torch only in the children
    assert "torchrun --nproc-per-node=8 -m gpudiag probe ddp" in text
    assert "busbw = algbw * 2(n-1)/n" in text
    assert "Exit codes: 0 all passed; 1 a probe failed; 2 bad input; 3 a probe timed" in text


# --- bad input: exit 2, one line, no children --------------------------------


def test_device_cuda_without_a_driver_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "No driver" comes from a fake, never from the machine.
    monkeypatch.setattr("gpudiag.probes.runner.gpu_driver_present", lambda: False)
    full_env: dict[str, str | None] = {name: None for name in _LAUNCH_VARS}
    full_env.update(_env(tmp_path))
    result = CliRunner().invoke(main, ["probe", "--device", "cuda"], env=full_env)
    assert result.exit_code == BAD_INPUT
    assert result.stderr.count("\n") == 1
    assert "--device cuda: no NVIDIA driver" in result.stderr
    assert not list(tmp_path.glob("gpudiag-probe-*"))


#: A sitecustomize for the probe's workers: torch.cuda reports one GPU unless
#: CUDA_VISIBLE_DEVICES is "" (as the driver does), and any real CUDA use, which
#: goes through torch.cuda._lazy_init, raises.
FAKE_GPU_SITECUSTOMIZE = """
import importlib.abc, importlib.util, os, sys

def _fake(cuda):
    count = 0 if os.environ.get("CUDA_VISIBLE_DEVICES") == "" else 1
    cuda.is_available = lambda: count > 0
    cuda.device_count = lambda: count
    def touched(*args, **kwargs):
        raise RuntimeError("the fake GPU was touched by a --device cpu probe")
    cuda._lazy_init = touched
    cuda.current_device = touched

class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torch.cuda":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        real_exec = spec.loader.exec_module
        def exec_module(module):
            real_exec(module)
            _fake(module)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _Finder())
"""


def test_device_cpu_never_touches_a_present_gpu(tmp_path: Path) -> None:
    site = tmp_path / "fakegpu"
    site.mkdir()
    tmpdir = tmp_path / "tmp"  # TMPDIR holds nothing but what the probe might leave
    tmpdir.mkdir()
    (site / "sitecustomize.py").write_text(FAKE_GPU_SITECUSTOMIZE)
    # The fake is live: a child that does not hide the GPU sees one.
    probe = subprocess.run(
        [PY, "-c", "import torch; print(torch.cuda.device_count())"],
        env={**_env(tmpdir), "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert probe.stdout.strip() == "1", probe.stderr
    proc = _run(["all", "--device", "cpu", "--json"], _env(tmpdir, PYTHONPATH=str(site)))
    assert proc.returncode == OK, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert [p["status"] for p in doc["probes"]] == ["pass"] * 4
    assert _probe(doc, "dp")["figures"]["dp_path"] == "module-direct"
    _assert_nothing_left(tmpdir, [])


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        (["--timeout", "0"], {}, "--timeout must be more than 0 and at most 3600"),
        (["--timeout", "nan"], {}, "--timeout must be more than 0 and at most 3600"),
        (["--device-ids", "0,x"], {}, "'x' is not an integer"),
        (["--device-ids", "1,1"], {}, "ordinal 1 appears twice"),
        (["--device-ids", "²"], {}, "'²' is not an integer"),
        (["--device-ids", "-1"], {}, "-1 is below 0"),
        (["--nproc", "0"], {}, "--nproc must be >= 1"),
        (["ddp"], {"SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, "needs MASTER_ADDR"),
        (["ddp"], {"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
         "rank 2 is outside 0..1"),
        (["ddp"], {"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x' is not an integer"),
        (["ddp", "--nproc", "3"],
         {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "5"},
         "--nproc 3 conflicts with the launcher's world size 2"),
    ],
)  # fmt: skip
def test_bad_input_exits_2(
    tmp_path: Path, args: list[str], env: dict[str, str], needle: str
) -> None:
    # CliRunner's env only adds to os.environ; a None value removes a variable.
    full_env: dict[str, str | None] = {name: None for name in _LAUNCH_VARS}
    full_env.update(_env(tmp_path, **env))
    device = [] if "--device" in args else ["--device", "cpu"]
    result = CliRunner().invoke(main, ["probe", *args, *device], env=full_env)
    assert result.exit_code == BAD_INPUT
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and needle in result.stderr
    assert result.stderr.startswith("gpudiag: error: ")
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.glob("gpudiag-probe-*"))


def test_unknown_probe_is_usage_error() -> None:
    result = CliRunner().invoke(main, ["probe", "bogus"])
    assert result.exit_code == BAD_INPUT
    assert result.stdout == ""
    assert "Invalid value for '[single|dp|ddp|amp|p2p|all]'" in result.stderr


# --- planted faults ----------------------------------------------------------


def test_fault_skip_sync_fails_ddp(tmp_path: Path) -> None:
    proc = _run(
        ["ddp", "--device", "cpu", "--json"], _env(tmp_path, GPUDIAG_PROBE_FAULT="skip-sync")
    )
    assert proc.returncode == FAILED, proc.stdout + proc.stderr
    ddp = _probe(json.loads(proc.stdout), "ddp")
    assert ddp["status"] == "fail"
    identical = _check(ddp, "bit_identical_across_ranks")
    assert identical["passed"] is False and identical["value"] > 1e-4
    assert _check(ddp, "matches_combined_batch_reference")["passed"] is False
    assert _check(ddp, "allreduce_correct")["passed"] is True
    _assert_nothing_left(tmp_path, [r["pid"] for r in ddp["ranks"]])


def test_fault_nan_fails_every_probe(tmp_path: Path) -> None:
    proc = _run(["all", "--device", "cpu", "--json"], _env(tmp_path, GPUDIAG_PROBE_FAULT="nan"))
    assert proc.returncode == FAILED, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["overall"] == "fail"
    assert [p["status"] for p in doc["probes"]] == ["fail"] * 4
    for name, check in [("single", "losses_finite"), ("dp", "losses_finite"),
                        ("ddp", "losses_finite"), ("amp", "losses_finite_bf16")]:  # fmt: skip
        assert _check(_probe(doc, name), check)["passed"] is False, name
    assert (
        "non-finite loss at step(s) [2" in _check(_probe(doc, "single"), "losses_finite")["detail"]
    )
    _assert_nothing_left(tmp_path, [])


def test_fault_hang_in_ddp_reported_and_killed(tmp_path: Path) -> None:
    began = time.monotonic()
    proc = _run(["all", "--device", "cpu", "--json", "--timeout", "3"],
                _env(tmp_path, GPUDIAG_PROBE_FAULT="hang:ddp"))  # fmt: skip
    elapsed = time.monotonic() - began
    assert proc.returncode == TIMEOUT, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert [p["status"] for p in doc["probes"]] == ["not_run", "not_run", "timeout", "not_run"]
    hang = _probe(doc, "ddp")["hang"]
    assert hang["limit_s"] == 3 and hang["arrived_ranks"] == [0, 1] and hang["missing_ranks"] == []
    assert hang["stages"]["1"] == "hang (planted fault)"
    assert hang["stages"]["0"].startswith("DistributedDataParallel()")
    assert elapsed < 3 + 30  # start-up on a loaded 2-core machine, plus the 3 s limit
    _assert_nothing_left(tmp_path, [])


def test_fault_hang_in_single_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # tempfile caches TMPDIR
    result = CliRunner().invoke(
        main,
        ["probe", "single", "--device", "cpu", "--timeout", "2"],
        env=_env(tmp_path, GPUDIAG_PROBE_FAULT="hang:single"),
    )
    assert result.exit_code == TIMEOUT
    assert "single: started" in result.stderr
    # A probe that did not pass shows its details without -v.
    assert result.stdout.splitlines()[1].split()[:3] == ["single", "HUNG", "-"]
    assert "rank 0 was at: hang (planted fault)" in result.stdout
    _assert_nothing_left(tmp_path, [])


def test_bad_fault_value_fails_probe(tmp_path: Path) -> None:
    proc = _run(["single", "--device", "cpu", "--json"], _env(tmp_path, GPUDIAG_PROBE_FAULT="melt"))
    assert proc.returncode == FAILED
    single = _probe(json.loads(proc.stdout), "single")
    assert (
        "GPUDIAG_PROBE_FAULT='melt': kind must be one of skip-sync, nan, hang" in single["message"]
    )


# --- launchers ----------------------------------------------------------------


def test_two_probes_on_one_host_do_not_collide(tmp_path: Path) -> None:
    env = _env(tmp_path)
    cmd = [PY, "-m", "gpudiag", "probe", "ddp", "--device", "cpu", "--json"]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]  # fmt: skip
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [OK, OK], outs
    docs = [json.loads(out) for out, _ in outs]
    pid_sets = [{r["pid"] for r in _probe(d, "ddp")["ranks"]} for d in docs]
    assert not pid_sets[0] & pid_sets[1]
    _assert_nothing_left(tmp_path, [pid for s in pid_sets for pid in s])


def test_torchrun_single_node(tmp_path: Path) -> None:
    port = _free_port()
    proc = subprocess.run(
        [PY, "-m", "torch.distributed.run", "--nproc-per-node=2", "--master-addr", "127.0.0.1",
         "--master-port", str(port), "-m", "gpudiag", "probe", "ddp", "--device", "cpu", "--json"],
        env=_env(tmp_path), capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert proc.returncode == OK, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)  # only rank 0 prints: exactly one document
    assert (doc["launcher"], doc["rank"], doc["world_size"], doc["overall"]) == (
        "torchrun",
        0,
        2,
        "pass",
    )
    rows = _probe(doc, "ddp")["ranks"]
    assert [(r["rank"], r["local_rank"], r["node_rank"]) for r in rows] == [(0, 0, 0), (1, 1, 0)]
    assert _port_has_no_listener(port)
    _assert_nothing_left(tmp_path, [r["pid"] for r in rows])


def test_torchrun_two_nodes_on_loopback(tmp_path: Path) -> None:
    port = _free_port()
    procs = [
        subprocess.Popen(
            [PY, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node),
             "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", str(port),
             "-m", "gpudiag", "probe", "ddp", "--device", "cpu", "--json"],
            # Two nodes share no secret: the job exports one (issue 21).
            env=_env(tmp_path, GPUDIAG_RDZV_TOKEN="cd" * 32),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for node in (0, 1)
    ]  # fmt: skip
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [OK, OK], outs
    assert outs[1][0] == ""  # rank 1 prints nothing: rank 0 holds every row
    doc = json.loads(outs[0][0])
    rows = _probe(doc, "ddp")["ranks"]
    assert [(r["rank"], r["node_rank"], r["local_rank"], r["arrived"]) for r in rows] == [
        (0, 0, 0, True),
        (1, 1, 0, True),
    ]
    assert _check(_probe(doc, "ddp"), "bit_identical_across_ranks")["passed"] is True
    assert _port_has_no_listener(port)
    _assert_nothing_left(tmp_path, [r["pid"] for r in rows])


def test_slurm_missing_peer_is_reported_hang(tmp_path: Path) -> None:
    port = _free_port()
    env = _env(tmp_path, GPUDIAG_RDZV_TOKEN="cd" * 32, SLURM_PROCID="0", SLURM_NTASKS="2",
               SLURM_LOCALID="0",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))  # fmt: skip
    began = time.monotonic()
    proc = _run(["ddp", "--device", "cpu", "--json", "--timeout", "3"], env)
    elapsed = time.monotonic() - began
    assert proc.returncode == TIMEOUT, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["launcher"], doc["rank"], doc["world_size"]) == ("slurm", 0, 2)
    ddp = _probe(doc, "ddp")
    assert ddp["status"] == "timeout"
    assert ddp["hang"]["arrived_ranks"] == [0] and ddp["hang"]["missing_ranks"] == [1]
    assert ddp["hang"]["stages"] == {"0": "rendezvous: waiting for ranks [1]"}
    assert "arrived ranks [0], missing ranks [1]" in ddp["message"]
    assert elapsed < 3 + 30
    assert _port_has_no_listener(port)  # rank 0's TCPStore server died with it
    _assert_nothing_left(tmp_path, [])


# --- pure units (no children) ------------------------------------------------


def test_detect_launch_precedence_and_values() -> None:
    assert detect_launch({}) is None
    torchrun = detect_launch({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "GROUP_RANK": "1",
                              "TORCHELASTIC_RUN_ID": "abc", "MASTER_ADDR": "n0",
                              "MASTER_PORT": "29500", "SLURM_PROCID": "0", "SLURM_NTASKS": "9"})  # fmt: skip
    assert torchrun is not None
    assert (torchrun.launcher, torchrun.rank, torchrun.world_size, torchrun.local_rank,
            torchrun.node_rank) == ("torchrun", 3, 4, 1, 1)  # fmt: skip
    slurm = detect_launch({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
                           "SLURM_NODEID": "2", "MASTER_ADDR": "n0", "MASTER_PORT": "1234"})  # fmt: skip
    assert slurm is not None
    assert (slurm.launcher, slurm.rank, slurm.world_size, slurm.local_rank, slurm.node_rank) == (
        "slurm", 5, 8, 1, 2)  # fmt: skip
    with pytest.raises(GpudiagInputError, match=r"MASTER_PORT must be 1\.\.65535"):
        detect_launch({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "a", "MASTER_PORT": "70000"})


def test_result_json_round_trip() -> None:
    result = ProbeResult(
        probe="ddp",
        status="timeout",
        device="cpu",
        message="hung",
        checks=(Check("c", False, 1.5, 0.0, "rule"),),
        figures={"backend": "gloo", "steps": 8},
        ranks=(RankRow(rank=1, local_rank=0, host="h", arrived=True),),
        bandwidth=(BandwidthRow(1024, 0.5, 2e-6, 2e-6),),
        hang=HangInfo(3.0, (0,), (1,), {0: "rendezvous"}),
    )
    data = json.loads(json.dumps(result.to_json()))
    assert ProbeResult.from_json(data) == result
    assert data["hang"]["stages"] == {"0": "rendezvous"}


def test_two_ranks_on_one_gpu_is_an_error() -> None:
    from gpudiag.probes.ddp import _rank_problem

    rows = (
        RankRow(rank=0, gpu_uuid="GPU-aaaa"),
        RankRow(rank=1, gpu_uuid="GPU-bbbb"),
        RankRow(rank=2, gpu_uuid="GPU-aaaa"),
    )
    problem = _rank_problem(rows)
    assert problem is not None and problem.startswith(
        "ranks [0, 2] are on the same physical GPU GPU-aaaa"
    )
    assert _rank_problem(rows[:2]) is None


# --- real hardware (auto-skipped without a driver) ---------------------------


@pytest.mark.gpu
def test_gpu_all_probes_pass(tmp_path: Path) -> None:
    proc = _run(["all", "--device", "cuda", "--json"], _env(tmp_path))
    assert proc.returncode == OK, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    ddp = _probe(doc, "ddp")
    assert ddp["figures"]["backend"] == "nccl"
    uuids = [r["gpu_uuid"] for r in ddp["ranks"]]
    assert all(u and u.startswith(("GPU-", "MIG-")) for u in uuids)
    assert len(set(uuids)) == len(uuids)
    assert all(m["peak_allocated_mib"] is not None for m in _probe(doc, "dp")["memory"])
    assert "loss_fp16" in _probe(doc, "amp")["figures"]


@pytest.mark.gpu
def test_gpu_more_ranks_than_visible_gpus_fails(tmp_path: Path) -> None:
    proc = _run(
        ["ddp", "--device", "cuda", "--visible", "0", "--nproc", "2", "--json"], _env(tmp_path)
    )
    assert proc.returncode == FAILED, proc.stdout + proc.stderr
    ddp = _probe(json.loads(proc.stdout), "ddp")
    assert "needs cuda:1 but only 1 GPU(s) are visible" in ddp["message"]


def test_process_scan_survives_non_utf8_command_lines() -> None:
    # Another process's arguments need not be UTF-8 (seen on a shared GPU host).
    proc = subprocess.Popen(
        [PY, "-c", "import time; time.sleep(30)", os.fsdecode(b"gpudiag-\xff\xfe")],
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if Path(f"/proc/{proc.pid}/cmdline").read_bytes().endswith(b"\xff\xfe\0"):
                break
            time.sleep(0.05)
        # A text no process has: the scan must read every command line, the
        # non-UTF-8 one included, without raising.
        assert _workers_mentioning(f"absent-{os.getpid()}-{time.time_ns()}") == []
    finally:
        proc.kill()
        proc.wait(timeout=10)
