"""A real Slurm on one host for the tests (issue 19): munged, slurmctld and two
``slurmd -N nodeN`` on 127.0.0.1, all as root from Debian's slurm-wlm packages
(``./dev.sh test`` installs ``slurmd slurmctld slurm-client munge``).

Every "node" is this machine, so each task's ``gpudiag snapshot`` would report one host
name and one boot id; a ``TaskProlog`` exports ``GPUDIAG_SNAPSHOT_OVERRIDE`` from
``override/<node>.json`` (docs/snapshot.md) to give each node its identity, and a test
writes another fact there to make one node odd. Every daemon is started here, in the
foreground, and stopped here by its own process.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

NODES = ("node1", "node2")
BINARIES = ("munged", "slurmctld", "slurmd", "srun", "salloc", "sinfo")
INSTALL = "./dev.sh test installs them (apt-get install slurmd slurmctld slurm-client munge)"


class Unavailable(Exception):
    """Slurm cannot be started here; the message says why."""


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Cluster:
    """A running emulated cluster; ``env`` carries ``SLURM_CONF`` for its clients."""

    root: Path
    env: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def override(self, node: str, doc: str) -> None:
        (self.root / "override" / f"{node}.json").write_text(doc)

    def identities(self) -> None:
        """Each node its own host name and boot id (and nothing else odd)."""
        for i, node in enumerate(NODES):
            self.override(node, f'{{"hostname":"{node}","node":{{"boot_id":"boot-{i}"}}}}')

    def logs(self) -> str:
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            lines = path.read_text(errors="replace").splitlines()[-5:]
            parts.append(f"{path.name}: " + " | ".join(lines))
        return "\n".join(parts)

    def stop(self) -> None:
        """Stop the daemons started here, then any job step they left (a slurmstepd of a
        node that was stopped mid-run): only processes carrying this cluster's SLURM_CONF."""
        subprocess.run(["scancel", "--full", "--user=root"], env=self.env, capture_output=True,
                       timeout=30, check=False)  # fmt: skip
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
        deadline = time.monotonic() + 15
        while self.leftovers() and time.monotonic() < deadline:
            for pid in self.leftovers():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)

    def leftovers(self) -> list[int]:
        """Processes other than this one whose environment names this cluster's slurm.conf."""
        mark = f"SLURM_CONF={self.env['SLURM_CONF']}".encode() + b"\0"
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if mark in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
        return found


def _conf(root: Path, ports: dict[str, int]) -> str:
    nodes = "\n".join(
        f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={ports[n]} CPUs=1 "
        "RealMemory=500"
        for n in NODES
    )
    return f"""\
ClusterName=gpudiagtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ports["ctld"]}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
TaskProlog={root}/taskprolog.sh
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SwitchType=switch/none
{nodes}
PartitionName=debug Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP
"""


def start(root: Path) -> Cluster:
    """Start the cluster under ``root``; raises Unavailable with the reason."""
    missing = [b for b in BINARIES if shutil.which(b, path=os.defpath + ":/usr/sbin") is None]
    if missing:
        raise Unavailable(f"Slurm/munge not installed ({', '.join(missing)} missing): {INSTALL}")
    if os.geteuid() != 0:
        raise Unavailable("the emulated Slurm runs slurmd as root; these tests run as another user")
    for sub in ("munge", "state", "spool", "log", "override"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "munge").chmod(0o700)
    key = root / "munge" / "key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o600)
    prolog = root / "taskprolog.sh"
    prolog.write_text(
        "#!/bin/sh\n"
        f'f="{root}/override/$SLURMD_NODENAME.json"\n'
        '[ -f "$f" ] && echo "export GPUDIAG_SNAPSHOT_OVERRIDE=$(cat "$f")"\n'
        "exit 0\n"
    )
    prolog.chmod(0o755)
    ports = {"ctld": _port(), **{n: _port() for n in NODES}}
    conf = root / "slurm.conf"
    conf.write_text(_conf(root, ports))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    env["PATH"] = f"{env.get('PATH', os.defpath)}:/usr/sbin"
    cluster = Cluster(root=root, env=env)
    sbin = {b: shutil.which(b, path=env["PATH"]) or b for b in BINARIES}

    def spawn(name: str, argv: list[str]) -> None:
        out = (root / "log" / f"{name}.out").open("wb")
        cluster.procs[name] = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
        )

    try:
        m = root / "munge"
        spawn("munged", [sbin["munged"], "--foreground", "--force", f"--socket={m}/sock",
                         f"--key-file={key}", f"--log-file={m}/log", f"--pid-file={m}/pid",
                         f"--seed-file={m}/seed"])  # fmt: skip
        _wait(lambda: (m / "sock").exists(), 15, "munged did not create its socket", cluster)
        spawn("slurmctld", [sbin["slurmctld"], "-D", "-i"])
        time.sleep(1)
        for node in NODES:
            spawn(f"slurmd-{node}", [sbin["slurmd"], "-D", "-N", node])

        def idle() -> bool:
            proc = subprocess.run([sbin["sinfo"], "-h", "-o", "%T %D"], env=env,
                                  capture_output=True, text=True, timeout=15)  # fmt: skip
            return proc.stdout.split() == ["idle", str(len(NODES))]

        _wait(idle, 45, "the nodes never became idle", cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _wait(test: object, timeout_s: float, what: str, cluster: Cluster) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for name, proc in cluster.procs.items():
            if proc.poll() is not None:
                raise Unavailable(f"{name} exited {proc.returncode}:\n{cluster.logs()}")
        try:
            if test():  # type: ignore[operator]
                return
        except (OSError, subprocess.SubprocessError):
            pass
        time.sleep(0.5)
    raise Unavailable(f"{what} within {timeout_s:g} s:\n{cluster.logs()}")
