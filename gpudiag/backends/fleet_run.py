"""Collect one snapshot per node of the allocation, and with ``--probe`` each node's probe
report (``gpudiag fleet``, issue 19).

Through the engine the cluster already has, never ``ssh``
(:mod:`gpudiag.backends.fleet_launch`): one task per node,
:mod:`gpudiag.probes.fleet_node`, whose results come back as framed lines on the
launcher's standard output (:mod:`gpudiag.core.fleet_frames`): per-task output files
would be written on each task's own node. The launcher's output goes to a private
temporary directory (mode 0700) removed afterwards. The run is bounded: past
``timeout_s`` its process group is terminated and every node without a complete
snapshot is named, never waited for.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpudiag.backends.fleet_launch import Launch, mpi_launch, slurm_launch
from gpudiag.core.fleet import FleetNode
from gpudiag.core.fleet_frames import Frames, decode
from gpudiag.core.fleet_probe import NodeProbe, ProbePlan, make_plan, read_report
from gpudiag.errors import GpudiagInputError

#: Seconds between SIGTERM and SIGKILL when the launcher outlives the timeout.
KILL_GRACE_S = 5.0
#: The most nodes one run collects (a node list beyond it is bad input).
MAX_NODES = 100_000

Which = Callable[[str], str | None]


def expand_nodelist(text: str) -> list[str]:
    """Slurm's compressed host list (``gpu[01-03,07],login1``) expanded, in order.

    The syntax of ``scontrol show hostnames``: comma-separated names, each with any number
    of bracketed ranges (``a[1-2]-b[3,4]``); zero padding is kept (``01-03``).
    """
    names: list[str] = []
    for item in re.findall(r"(?:[^,\[]|\[[^\]]*\])+", text):
        names.extend(_expand_one(item.strip()))
        if len(names) > MAX_NODES:
            raise GpudiagInputError(f"fleet: more than {MAX_NODES} nodes in the node list")
    return [n for n in names if n]


def _expand_one(item: str) -> list[str]:
    match = re.search(r"\[([^\]]*)\]", item)
    if match is None:
        return [item]
    head, tail = item[: match.start()], item[match.end() :]
    out = []
    for part in match.group(1).split(","):
        lo, dash, hi = part.strip().partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise GpudiagInputError(f"fleet: cannot read the node list range [{match.group(1)}]")
        stop = int(hi) if dash else int(lo)
        if stop - int(lo) > MAX_NODES:
            raise GpudiagInputError(f"fleet: more than {MAX_NODES} nodes in the node list")
        out += [f"{head}{i:0{len(lo)}d}{rest}" for i in range(int(lo), stop + 1)
                for rest in _expand_one(tail)]  # fmt: skip
    return out


def slurm_nodes(env: Mapping[str, str], which: Which = shutil.which) -> list[str]:
    """The allocation's node names: ``scontrol show hostnames`` where it runs, else our own
    reading of ``SLURM_JOB_NODELIST``."""
    text = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
    scontrol = which("scontrol")
    if text and scontrol:
        try:
            proc = subprocess.run(
                [scontrol, "show", "hostnames", text],
                capture_output=True, text=True, timeout=30, check=False,
            )  # fmt: skip
            if proc.returncode == 0 and proc.stdout.split():
                return proc.stdout.split()
        except (OSError, subprocess.SubprocessError):
            pass
    return expand_nodelist(text)


def _run_bounded(
    argv: Sequence[str], env: Mapping[str, str], timeout_s: float, out: Path, err: Path
) -> int | None:
    """Run ``argv`` in its own process group; its exit status, or None after a timeout."""
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
            start_new_session=True, env=dict(env),
        )  # fmt: skip
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop(proc)
            return None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


_LABEL = re.compile(r"^\s*(\d{1,7}): ?(.*)$")


def _last_lines(path: Path, nodes: int) -> tuple[str, dict[int, str], list[str]]:
    """The launcher's last stderr line with words in it, each task's (srun --label
    prefixes a task's lines with its number; Open MPI frames its messages with dashes),
    and the launcher's own lines (the last 200)."""
    last, per_task, own = "", dict[int, str](), list[str]()
    try:
        with path.open(errors="replace") as fh:
            for raw in fh:
                line = raw.strip()
                if not line or set(line) <= set("-=* "):
                    continue
                match = _LABEL.match(line)
                if match and int(match[1]) < nodes and match[2].strip():
                    per_task[int(match[1])] = _clean(match[2])
                else:
                    own = [*own[-199:], _clean(line)]
                last = _clean(line)
    except OSError:
        pass
    return last, per_task, own


def _mentioning(lines: Sequence[str], name: str) -> str | None:
    """The launcher's last line that names the node (``… failed on node node2: …``)."""
    pattern = re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w-])")
    return next((line for line in reversed(lines) if pattern.search(line)), None)


def _clean(line: str) -> str:
    # NULs and other controls some launchers write, and a final full stop (ours follows).
    return re.sub(r"[\x00-\x1f\x7f]", "", line)[:200].rstrip(". ")


@dataclass
class FleetRun:
    """One live run: a node per task; with ``--probe`` the plan and each node's report
    (None: none came, ``probe_missing`` says why)."""

    nodes: list[FleetNode]
    source: str
    plan: ProbePlan | None = None
    reports: dict[int, NodeProbe] = field(default_factory=dict)
    probe_missing: dict[int, str] = field(default_factory=dict)
    #: The launcher exited before the plan's end (srun ends a step whose task failed).
    cut_short: bool = False


def _node(
    index: int, name: str, frames: Frames, status: int | None, timeout_s: float, why: str
) -> FleetNode:
    from gpudiag.snapshot.fields import SnapshotError
    from gpudiag.snapshot.load import parse_snapshot_text
    from gpudiag.snapshot.read import snapshot_from_json

    text = frames.texts.get((index, "snapshot"))
    if text is None:
        started = (index, "hello") in frames.texts
        if status is None:
            reason = f"no answer within {timeout_s:g} s"
            reason += " (its task started, then gave no snapshot)" if started else ""
        else:
            reason = f"no snapshot (the launcher exited {status})"
        problem = frames.problems.get((index, "snapshot"))
        detail = f"its output was cut short ({problem})" if problem else why
        error = f"{reason}: {detail}" if detail else reason
        return FleetNode(source=name, snapshot=None, error=error)
    try:
        doc = parse_snapshot_text(text, f"the snapshot of {name}")
        return FleetNode(source=name, snapshot=snapshot_from_json(doc))
    except SnapshotError as exc:
        return FleetNode(source=name, snapshot=None, error=f"snapshot invalid: {exc}"[:300])


def _name(launch: Launch, index: int, frames: Frames) -> str:
    """The node's name: Slurm's from the task itself (SLURMD_NODENAME), else the node list's."""
    try:
        hello = json.loads(frames.texts.get((index, "hello"), "{}"))
    except ValueError:
        hello = {}
    given = hello.get("node_name") if isinstance(hello, dict) else None
    ok = isinstance(given, str) and 0 < len(given) <= 100 and given.isprintable()
    return given if ok and launch.kind == "slurm" else launch.names[index]  # type: ignore[return-value]


def run_launch(
    launch: Launch, env: Mapping[str, str], timeout_s: float, plan: ProbePlan | None
) -> FleetRun:
    """Run the launch, bounded, and read every task's results."""
    task_args = ["--probe", *plan.argv()] if plan is not None else []
    work = Path(tempfile.mkdtemp(prefix="gpudiag-fleet-"))
    try:
        out, err = work / "stdout", work / "stderr"
        status = _run_bounded(launch.command(*task_args), env, timeout_s, out, err)
        with out.open(errors="replace") as fh:
            frames = decode(fh, launch.nodes - 1)
        last, per_task, launcher_lines = _last_lines(err, launch.nodes)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cut = plan is not None and status is not None and time.time() < plan.end
    run = FleetRun(nodes=[], source=launch.source, plan=plan, cut_short=cut)
    for i in range(launch.nodes):
        name = _name(launch, i, frames)
        why = per_task.get(i) or _mentioning(launcher_lines, name) or last
        run.nodes.append(_node(i, name, frames, status, timeout_s, why))
        if plan is None:
            continue
        text = frames.texts.get((i, "probe"))
        report = None
        with contextlib.suppress(ValueError):
            report = read_report(json.loads(text), launch.nodes) if text else None
        if report is not None and report.node == i:
            run.reports[i] = report
        elif text is not None:
            run.probe_missing[i] = "its probe report is unreadable"
        elif (i, "probe") in frames.problems:
            lines = frames.problems[(i, "probe")]
            run.probe_missing[i] = f"its probe report was cut short ({lines})"
        else:
            run.probe_missing[i] = (
                f"no probe report within {timeout_s:g} s" if status is None else
                f"no probe report (the launcher exited {status})"
            )  # fmt: skip
    return run


@dataclass(frozen=True)
class ProbeRequest:
    """``--probe``: the rendezvous address to test (``--master-addr``/``--master-port``,
    else MASTER_ADDR/MASTER_PORT)."""

    master_addr: str
    master_port: int


def collect_fleet(
    env: Mapping[str, str], *, timeout_s: float, mpi_ranks: int | None = None,
    probe: ProbeRequest | None = None, which: Which = shutil.which,
) -> FleetRun:  # fmt: skip
    """One task per node: Slurm inside an allocation, else ``--mpi N``; with ``probe``
    each task also runs the probe, under a token only the run's tasks get."""
    if mpi_ranks is not None:
        launch = mpi_launch(env, mpi_ranks, probe is not None, which)
    elif env.get("SLURM_JOB_ID"):
        launch = slurm_launch(env, slurm_nodes(env, which), probe is not None, which)
    else:
        raise GpudiagInputError(
            "fleet: not inside a Slurm allocation (SLURM_JOB_ID unset); run it in salloc/"
            "sbatch, use --mpi N under Open MPI or MPICH, or give snapshots with --snapshots "
            "FILE..."
        )
    child = dict(env)
    plan = None
    if probe is not None and not probe.master_addr:
        if launch.kind != "slurm" or not launch.names or launch.names[0].startswith("node #"):
            raise GpudiagInputError(
                "fleet --probe: no rendezvous address: set MASTER_ADDR or give --master-addr"
            )
        # torchrun's usual MASTER_ADDR in a batch script: the allocation's first node.
        probe = ProbeRequest(launch.names[0], probe.master_port)
    if probe is not None:
        # The token reaches the tasks only through the launcher's own environment
        # forwarding (never argv): a fresh one unless the user exported one (docs/probes.md).
        child.setdefault("GPUDIAG_RDZV_TOKEN", secrets.token_hex(32))
        if not child["GPUDIAG_RDZV_TOKEN"]:
            child["GPUDIAG_RDZV_TOKEN"] = secrets.token_hex(32)
        plan = make_plan(probe.master_addr, probe.master_port, secrets.token_hex(8),
                         launch.nodes, timeout_s, time.time())  # fmt: skip
    return run_launch(launch, child, timeout_s, plan)
