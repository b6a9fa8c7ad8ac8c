"""Collect one snapshot per node of the allocation (``gpudiag fleet``, issue 19).

Through the engine the cluster already has, never ``ssh``: inside a Slurm allocation
``srun --ntasks-per-node=1 --nodes=N`` runs ``gpudiag snapshot`` once per node, each
task's stdout going to its own file through srun's ``--output`` pattern ``%n`` (the
node's index in the job: srun(1), "filename pattern"); under Open MPI ``mpiexec --map-by
ppr:1:node`` does the same with ``--output-filename`` (one ``rank.N/stdout`` per rank,
mpirun(1)). The files live in a private temporary directory (mode 0700) removed
afterwards. The run is bounded: past ``timeout_s`` its process group is terminated and
every node without a complete snapshot is named, never waited for.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from gpudiag.backends.subproc import python_module_argv
from gpudiag.core.fleet import FleetNode
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


def _run_bounded(argv: Sequence[str], timeout_s: float, stderr_path: Path) -> int | None:
    """Run ``argv`` in its own process group; its exit status, or None after a timeout."""
    with stderr_path.open("wb") as err:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True,
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


def _last_line(path: Path) -> str:
    """The last line with words in it (Open MPI frames its messages with dashes)."""
    try:
        lines = [
            ln.strip()
            for ln in path.read_text(errors="replace").splitlines()
            if ln.strip() and not set(ln.strip()) <= set("-=* ")
        ]
    except OSError:
        return ""
    # NULs and other controls some launchers write, and a final full stop (ours follows).
    return re.sub(r"[\x00-\x1f\x7f]", "", lines[-1])[:200].rstrip(". ") if lines else ""


def _read_node(name: str, path: Path, err: Path, status: int | None, timeout_s: float) -> FleetNode:
    from gpudiag.snapshot import load_snapshot
    from gpudiag.snapshot.fields import SnapshotError

    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    if size == 0:
        if status is None:
            why = f"no answer within {timeout_s:g} s"
        else:
            why = f"no snapshot (the launcher exited {status})"
        detail = _last_line(err)
        return FleetNode(source=name, snapshot=None, error=f"{why}: {detail}" if detail else why)
    try:
        return FleetNode(source=name, snapshot=load_snapshot(path))
    except SnapshotError as exc:
        late = f"unfinished after {timeout_s:g} s" if status is None else "invalid"
        return FleetNode(source=name, snapshot=None, error=f"snapshot {late}: {exc}"[:300])


def collect_slurm(
    env: Mapping[str, str], *, timeout_s: float, which: Which = shutil.which
) -> list[FleetNode]:
    """One snapshot per node of the Slurm allocation, through srun."""
    srun = which("srun")
    if srun is None:
        raise GpudiagInputError("fleet: SLURM_JOB_ID is set but srun is not on PATH")
    names = slurm_nodes(env, which)
    count = len(names) or int(env.get("SLURM_JOB_NUM_NODES", "0") or 0)
    if count < 1:
        raise GpudiagInputError("fleet: the Slurm allocation lists no node (SLURM_JOB_NODELIST)")
    work = Path(tempfile.mkdtemp(prefix="gpudiag-fleet-"))
    try:
        # %n, the node's index in the job (0 = the first of SLURM_JOB_NODELIST), not %N:
        # %N is the short host name, which differs from the node name where NodeHostname
        # does (and is one name for every slurmd of an emulated cluster). srun(1).
        argv = [
            srun, "--ntasks-per-node=1", f"--nodes={count}", f"--ntasks={count}",
            "--kill-on-bad-exit=0", "--job-name=gpudiag-fleet",
            f"--output={work}/%n.json", f"--error={work}/%n.err",
            *python_module_argv("gpudiag", "snapshot"),
        ]  # fmt: skip
        status = _run_bounded(argv, timeout_s, work / "launcher.err")
        found = sorted(int(p.stem) for p in work.glob("*.json") if p.stem.isdigit())
        total = max([len(names), *(i + 1 for i in found)])
        names += [f"node #{i}" for i in range(len(names), total)]
        launcher_err = work / "launcher.err"
        return [
            _read_node(
                names[i], work / f"{i}.json",
                work / f"{i}.err" if (work / f"{i}.err").exists() else launcher_err,
                status, timeout_s,
            )
            for i in range(total)
        ]  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _mpi_output_args(mpiexec: str, folder: Path) -> list[str]:
    """Open MPI 5's ``--output dir=DIR`` (DIR/<job>/rank.N/stdout); before 5,
    ``--output-filename DIR`` (DIR/1/rank.N/stdout). mpirun(1) of each version."""
    try:
        proc = subprocess.run(
            [mpiexec, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
        version = re.search(r"Open MPI\)?\s+(\d+)\.", proc.stdout)
    except (OSError, subprocess.SubprocessError):
        version = None
    if version is not None and int(version.group(1)) >= 5:
        return ["--output", f"dir={folder}"]
    return ["--output-filename", str(folder)]


def collect_mpi(
    env: Mapping[str, str], *, timeout_s: float, ranks: int, which: Which = shutil.which
) -> list[FleetNode]:
    """One snapshot per node through Open MPI's ``mpiexec --map-by ppr:1:node``."""
    mpiexec = which("mpiexec") or which("mpirun")
    if mpiexec is None:
        raise GpudiagInputError("fleet --mpi: mpiexec is not on PATH")
    work = Path(tempfile.mkdtemp(prefix="gpudiag-fleet-"))
    try:
        argv = [
            mpiexec, "-n", str(ranks), "--map-by", "ppr:1:node",
            *_mpi_output_args(mpiexec, work / "out"),
            *python_module_argv("gpudiag", "snapshot"),
        ]  # fmt: skip
        status = _run_bounded(argv, timeout_s, work / "launcher.err")
        nodes = []
        for rank in range(ranks):
            folder = next(iter(sorted((work / "out").glob(f"*/rank.{rank}"))), None)
            path = folder / "stdout" if folder else work / "missing"
            err = folder / "stderr" if folder else work / "launcher.err"
            nodes.append(_read_node(f"rank {rank}", path, err, status, timeout_s))
        return nodes
    finally:
        shutil.rmtree(work, ignore_errors=True)


def collect_fleet(
    env: Mapping[str, str], *, timeout_s: float, mpi_ranks: int | None = None
) -> tuple[list[FleetNode], str]:
    """(nodes, how they were collected): Slurm inside an allocation, else ``--mpi N``."""
    if mpi_ranks is not None:
        nodes = collect_mpi(env, timeout_s=timeout_s, ranks=mpi_ranks)
        return nodes, f"mpiexec, {mpi_ranks} node(s)"
    if env.get("SLURM_JOB_ID"):
        nodes = collect_slurm(env, timeout_s=timeout_s)
        return nodes, f"srun in Slurm job {env['SLURM_JOB_ID']}"
    raise GpudiagInputError(
        "fleet: not inside a Slurm allocation (SLURM_JOB_ID unset); run it in salloc/sbatch, "
        "use --mpi N under Open MPI, or give snapshots with --snapshots FILE..."
    )
