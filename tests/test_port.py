"""The live port check: a real loopback socket, and a fake /proc for the holder."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.backends.port import port_holders, probe_port
from gpudiag.cli import main
from gpudiag.model import Snapshot, SourceStatus


@pytest.fixture
def listening() -> Iterator[int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_held_port_is_in_use_and_names_this_process(listening: int) -> None:
    probe = probe_port("127.0.0.1", listening)
    assert probe.status == "in_use"
    if Path("/proc/net/tcp").exists():
        assert os.getpid() in [h.pid for h in probe.holders]
    assert probe_port("localhost", listening).status == "in_use"


def test_a_free_port_is_free_and_stays_free() -> None:
    port = _free_port()
    assert probe_port("127.0.0.1", port).status == "free"
    # The probe never listens: binding it again right after works.
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_another_hosts_address_is_not_checked() -> None:
    # 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never an address of this host.
    assert probe_port("192.0.2.1", 29500).status == "not_local"


def test_an_unresolvable_name_is_an_error_not_a_crash() -> None:
    probe = probe_port("no-such-host.invalid", 29500)
    assert probe.status == "error" and "does not resolve" in (probe.reason or "")


def _fake_proc(root: Path, port: int, inode: str) -> None:
    (root / "net").mkdir(parents=True)
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    row = f"   0: 0100007F:{port:04X} 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 {inode} 1 0\n"
    junk = "garbage line\n   1: 0100007F:ZZZZ 00000000:0000 0A x x x x x x\n"
    (root / "net" / "tcp").write_text(header + row + junk)
    (root / "net" / "tcp6").write_bytes(b"\xff\xfe not utf-8\n")
    holder = root / "4242"
    (holder / "fd").mkdir(parents=True)
    os.symlink(f"socket:[{inode}]", holder / "fd" / "7")
    os.symlink("/dev/null", holder / "fd" / "0")
    (holder / "comm").write_bytes(b"pyth\xffon\n")
    (holder / "cmdline").write_bytes(b"python\0train.py\0--port\0" + str(port).encode() + b"\0")
    other = root / "99"
    other.mkdir()  # no fd directory: another user's process
    (root / "self").mkdir()


def test_holder_from_a_fake_proc_survives_bad_entries(tmp_path: Path) -> None:
    _fake_proc(tmp_path, 29511, "123456")
    [holder] = port_holders(29511, tmp_path)
    assert holder.pid == 4242
    assert holder.name == "pyth\ufffdon"
    assert holder.cmdline == "python train.py --port 29511"
    assert port_holders(29512, tmp_path) == ()
    assert port_holders(29511, tmp_path / "missing") == ()


def test_cli_reports_a_taken_master_port(listening: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Live path without touching the machine's GPUs: the machine is an empty snapshot.
    machine = Snapshot(sources={"nvml": SourceStatus("unavailable", "test")})
    monkeypatch.setattr("gpudiag.machine.load_machine", lambda path, **_: machine)
    env = {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(listening),
        "RANK": None,
        "TORCHELASTIC_RUN_ID": None,
        "PET_MASTER_PORT": None,
    }
    result = CliRunner().invoke(main, ["check", "--backend", "gloo", "--json"], env=env)
    doc = json.loads(result.stdout)
    [finding] = [f for f in doc["findings"] if f["code"] == "DDP-PORT-IN-USE"]
    assert finding["severity"] == "error"
    assert f"port: {listening}" in finding["predicts"]
    assert result.exit_code == 1
    # With --snapshot the port is never probed: a snapshot cannot know it.
    free = CliRunner().invoke(
        main,
        [
            "check",
            "--snapshot",
            str(Path(__file__).parent / "fixtures" / "a100x8.json"),
            "--backend",
            "gloo",
            "--json",
        ],
        env=env,
    )
    assert "DDP-PORT-IN-USE" not in free.stdout
