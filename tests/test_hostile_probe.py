"""Issue 21, hostile round 3, for ``gpudiag probe``: rendezvous arrivals another local
user could forge from public values, job ids missing from the run id, and a full
TMPDIR that left an ownerless probe dir behind.

The forger here is a separate process, as another local user would be: it knows only
what such a user can learn (the Slurm job and step ids from ``squeue``, MASTER_ADDR
and MASTER_PORT, the run id in the worker's argv) and signs with the token that
gpudiag used to derive from exactly those values.
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.cli.exitcodes import BAD_INPUT, OK, TIMEOUT
from gpudiag.errors import GpudiagInputError
from gpudiag.launch.process import LaunchEnv, detect_launch
from gpudiag.probes import children, jobtoken, tempdirs
from gpudiag.probes.jobtoken import (
    MULTI_NODE_NEEDS_TOKEN,
    create_secret,
    read_secret,
    secret_dir,
    start_token,
)

from .conftest import clear_launch_env

PY = sys.executable
_CLEARED = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
    "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE", "GPUDIAG_PROBE_FAULT",
    "GPUDIAG_RDZV_TOKEN", "XDG_RUNTIME_DIR",
)  # fmt: skip
_CLEARED_PREFIXES = ("SLURM_", "OMPI_", "PMI", "MPI_LOCAL", "I_MPI_", "PMIX_")

# The neighbour: knows the job's public values (its environment below holds only
# those), derives the token the way gpudiag did before issue 21, and signs rank 1's
# arrival with it in the probe's own format (rendezvous_mac).
_FORGER = r"""
import json, os, sys, time, warnings
from datetime import timedelta
warnings.filterwarnings("ignore")
import torch.distributed as dist
from gpudiag.launch.process import detect_launch
from gpudiag.probes.rendezvous import rendezvous_mac, rendezvous_token
launch = detect_launch(os.environ)
os.environ["GPUDIAG_RDZV_TOKEN"] = rendezvous_token(launch, os.environ)
deadline = time.monotonic() + 90
while True:
    try:
        store = dist.TCPStore("127.0.0.1", launch.master_port, None, False, timedelta(seconds=5))
        break
    except Exception:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)
prefix = f"gpudiag/{launch.run_id}/"  # PrefixStore joins with "/"
while not store.check([prefix + "/arrived/0"]):
    time.sleep(0.05)
row = {"rank": 1, "local_rank": 1, "node_rank": None, "host": "forged", "pid": 1,
       "device": "cpu", "arrived": True}
body = json.dumps({"row": row, "error": None})
store.set(prefix + "/arrived/1", json.dumps({"body": body, "mac": rendezvous_mac(launch.run_id, 1, body)}))
print("forged", flush=True)
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _CLEARED and not k.startswith(_CLEARED_PREFIXES)
    }
    env["TMPDIR"] = str(tmp_path)
    env.update(extra)
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _slurm_job(port: int, rank: int) -> dict[str, str]:
    """One srun step of 2 tasks on one node (--ntasks-per-node=2), job 4242 step 0."""
    return {
        "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(rank), "SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "2",
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
    }  # fmt: skip


def _probe_cmd(*args: str) -> list[str]:
    return [PY, "-m", "gpudiag", "probe", "ddp", "--device", "cpu", *args]


# --- the rendezvous token (item 4) -------------------------------------------


def test_an_arrival_signed_from_public_values_is_refused(tmp_path: Path) -> None:
    # Before issue 21 the token was sha256(run id, MASTER_ADDR, MASTER_PORT): the
    # forger below computed it, and rank 0 counted its arrival as rank 1's.
    port = _free_port()
    forger_tmp = tmp_path.with_name(tmp_path.name + "-forger")
    forger_tmp.mkdir()
    probe = subprocess.Popen(
        _probe_cmd("--json", "--timeout", "8"),
        env=_env(tmp_path, **_slurm_job(port, 0)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        forger = subprocess.run(
            [PY, "-c", _FORGER],
            env=_env(forger_tmp, **_slurm_job(port, 1)),
            capture_output=True,
            text=True,
            timeout=150,
        )
        assert forger.stdout.strip() == "forged", forger.stderr[-2000:]
        out, err = probe.communicate(timeout=180)
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
    assert probe.returncode == TIMEOUT, out + err
    ddp = json.loads(out)["probes"][0]
    assert ddp["hang"]["arrived_ranks"] == [0], ddp
    assert "refused forged rendezvous arrivals for ranks [1]" in ddp["message"]
    assert "GPUDIAG_RDZV_TOKEN" not in err  # one node: a private secret, nothing to say
    assert [p.name for p in tmp_path.iterdir()] == []  # the secret went with the run


def test_two_local_ranks_share_a_private_secret(tmp_path: Path) -> None:
    port = _free_port()
    # Rank 1 starts first: it waits for local rank 0's secret.
    procs = [
        subprocess.Popen(
            _probe_cmd("--json", "--timeout", "60"),
            env=_env(tmp_path, **_slurm_job(port, rank)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (1, 0)
    ]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [OK, OK], outs
    doc = json.loads(outs[1][0])
    assert doc["overall"] == "pass"
    assert [r["arrived"] for r in doc["probes"][0]["ranks"]] == [True, True]
    assert not any("GPUDIAG_RDZV_TOKEN" in n for n in doc["probes"][0]["notes"])
    assert [p.name for p in tmp_path.iterdir()] == []


def test_ranks_on_several_nodes_need_an_exported_token(tmp_path: Path) -> None:
    # One rank per node and no exported token: no private channel exists, and a
    # token derived from public values could be forged: refused, one line, exit 2.
    env = _env(tmp_path, RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))  # fmt: skip
    proc = subprocess.run(
        _probe_cmd("--json", "--timeout", "1"), env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [f"gpudiag: error: {MULTI_NODE_NEEDS_TOKEN}"]
    assert "GPUDIAG_RDZV_TOKEN=$(openssl rand -hex 32)" in MULTI_NODE_NEEDS_TOKEN
    assert list(tmp_path.glob("gpudiag-*")) == []  # nothing left behind
    # An exported token: the probe runs (its lone rank then waits for rank 1: timeout).
    env["GPUDIAG_RDZV_TOKEN"] = "0" * 64
    proc = subprocess.run(
        _probe_cmd("--json", "--timeout", "1"), env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == TIMEOUT, proc.stdout + proc.stderr


def _launch(
    local_rank: int = 0, local_size: int | None = 2, run_id: str = "slurm-7-0"
) -> LaunchEnv:
    return LaunchEnv("slurm", local_rank, 2, local_rank, None, run_id, local_size,
                     "127.0.0.1", 29500)  # fmt: skip


def test_start_token_chooses_by_where_the_ranks_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempdirs.tempfile, "tempdir", str(tmp_path))
    assert start_token(_launch(), {"GPUDIAG_RDZV_TOKEN": "mine"}, True).token == "mine"
    assert start_token(None, {}, True).kind == "random"
    with pytest.raises(GpudiagInputError, match="needs GPUDIAG_RDZV_TOKEN"):
        start_token(_launch(local_size=1), {}, True)
    # srun without --ntasks-per-node: one node when the step has one.
    assert start_token(_launch(1, None), {"SLURM_STEP_NUM_NODES": "1"}, True).kind == (
        "node-secret"
    )
    with pytest.raises(GpudiagInputError, match="needs GPUDIAG_RDZV_TOKEN"):
        start_token(_launch(1, None), {"SLURM_STEP_NUM_NODES": "2"}, True)
    writer = start_token(_launch(0), {}, True)
    reader = start_token(_launch(1), {}, True)
    try:
        assert writer.kind == reader.kind == "node-secret"
        assert writer.token is not None and len(writer.token) == 64
        assert reader.token is None and reader.path == writer.path
        assert reader.value(wait_s=5) == writer.token
        assert writer.path is not None
        assert writer.path.stat().st_mode & 0o777 == 0o700
        assert (writer.path / "secret").stat().st_mode & 0o777 == 0o600
    finally:
        writer.release()
        writer.release()  # twice is harmless (the cleanup may retry)
    assert list(tmp_path.iterdir()) == []
    # Another job (another run id) on the same port gets another dir.
    assert secret_dir(_launch(), {}) != secret_dir(_launch(run_id="slurm-8-0"), {})


def test_a_killed_runs_secret_is_never_taken(tmp_path: Path) -> None:
    # A local rank 0 killed with SIGKILL leaves its secret, unlocked; the next run's
    # other local ranks must wait for the new one, not take it.
    path = tmp_path / "gpudiag-rdzv-0-abc"
    path.mkdir(mode=0o700)
    (path / "secret").write_text("a" * 64 + "\n")
    (path / "secret").chmod(0o600)
    with pytest.raises(GpudiagInputError, match="no ddp rendezvous secret from local rank 0"):
        read_secret(path, wait_s=0.3)
    token, release = create_secret(path)
    try:
        assert token != "a" * 64
        assert read_secret(path, wait_s=1) == token
    finally:
        release()
    assert not path.exists()


def test_a_secret_dir_that_is_not_private_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another user can create the name first in a shared /tmp: never use it.
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    with pytest.raises(GpudiagInputError, match="symbolic link"):
        create_secret(link)
    with pytest.raises(GpudiagInputError, match="symbolic link"):
        read_secret(link, wait_s=0)
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o755)
    open_dir.chmod(0o755)
    with pytest.raises(GpudiagInputError, match="mode 755, not private"):
        create_secret(open_dir)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    me = os.getuid()
    monkeypatch.setattr(jobtoken.os, "getuid", lambda: me + 1)  # the dir is now another's
    with pytest.raises(GpudiagInputError, match=f"owned by uid {me}, not this user"):
        create_secret(theirs)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "open", "theirs"]


def test_the_run_id_holds_the_job_ids() -> None:
    def run_id(**env: str) -> str:
        base = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
        launch = detect_launch({**base, **env})
        assert launch is not None
        return launch.run_id

    torchrun = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
                "TORCHELASTIC_RUN_ID": "none", "TORCHELASTIC_RESTART_COUNT": "0"}  # fmt: skip
    # torchrun's default run id is the constant "none": two Slurm jobs used to share it.
    assert run_id(**torchrun, SLURM_JOB_ID="7") != run_id(**torchrun, SLURM_JOB_ID="8")
    assert run_id(**torchrun, SLURM_JOB_ID="7") == "torchrun-none-0-SLURM_JOB_ID=7"
    assert run_id(SLURM_PROCID="0", SLURM_NTASKS="2", SLURM_JOB_ID="7", SLURM_STEP_ID="3") == (
        "slurm-7-3"
    )
    mpich = {"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "2"}
    assert run_id(**mpich, SLURM_JOB_ID="7") == "mpich-SLURM_JOB_ID=7"
    intel = {**mpich, "I_MPI_HYDRA_UUID": "431f0000-4741"}
    assert run_id(**intel) == "intelmpi-431f0000-4741"
    ompi = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2",
            "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}  # fmt: skip
    assert run_id(**ompi, PMIX_NAMESPACE="prterun-vm-9159@1") == "openmpi-prterun-vm-9159@1"
    assert run_id(**ompi, OMPI_MCA_ess_base_jobid="2937585665") == (
        "openmpi-0-OMPI_MCA_ess_base_jobid=2937585665"
    )
    # A hostile value is hashed: the run id stays a short printable key.
    hostile = run_id(**torchrun, SLURM_JOB_ID="7\n" + "x" * 10_000)
    assert hostile.startswith("torchrun-h") and len(hostile) < 50


# --- a full TMPDIR (item 2) --------------------------------------------------


def test_a_full_tmpdir_leaves_no_ownerless_dir_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seen on a tmpfs with one free inode: mkdtemp worked, owner.pid did not; the
    # dir stayed (no owner: kept for a day) and the error read "cannot write output".
    clear_launch_env(monkeypatch, "GPUDIAG_")
    monkeypatch.setattr(tempdirs.tempfile, "tempdir", str(tmp_path))
    original = pathlib.Path.write_text

    def write_text(self: Path, *args: Any, **kwargs: Any) -> int:
        if self.name == tempdirs.OWNER_FILE:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", write_text)
    result = CliRunner().invoke(main, ["probe", "single", "--device", "cpu"])
    assert result.exit_code == BAD_INPUT, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"gpudiag: error: cannot create the probe's private temp dir in {tmp_path}: "
        "No space left on device (set TMPDIR to a writable directory with free space)"
    )
    assert "cannot write output" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_worker_that_cannot_start_is_reported_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clear_launch_env(monkeypatch, "GPUDIAG_")
    monkeypatch.setattr(tempdirs.tempfile, "tempdir", str(tmp_path))

    def no_fork(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))

    monkeypatch.setattr(children.subprocess, "Popen", no_fork)
    result = CliRunner().invoke(main, ["probe", "single", "--device", "cpu"])
    assert result.exit_code == BAD_INPUT, result.output
    assert result.output.strip().splitlines()[-1] == (
        "gpudiag: error: cannot start a probe worker: [Errno 11] Resource temporarily unavailable"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_worker_with_no_room_for_its_log_is_not_reported_as_silent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "rank0.log"
    log.write_bytes(b"")
    child = children.Child(0, ("single",), None, tmp_path / "rank0.events", log, 0.0)
    full = os.statvfs_result((4096, 4096, 4, 0, 0, 10, 0, 0, 0, 255))
    monkeypatch.setattr(children.os, "statvfs", lambda path: full)
    assert child.log_tail() == (
        f"no log: the temp dir's file system is full ({tmp_path.parent}: No space left on device)"
    )
