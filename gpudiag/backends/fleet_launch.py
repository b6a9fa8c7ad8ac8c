"""How ``gpudiag fleet`` starts one task per node: srun inside a Slurm allocation, or
``mpiexec`` of Open MPI or MPICH (Hydra) with ``--mpi N`` (issue 19). Never ssh.

* Slurm: ``srun --ntasks-per-node=1 --nodes=N --ntasks=N --kill-on-bad-exit=0
  --label``; ``--label`` prefixes each line of a task's stdout and stderr with its
  task number (srun(1)), so a task's last stderr line names why it failed. With
  ``--probe`` also ``--export=ALL``, so the run's token reaches the tasks even where a
  batch script set ``SLURM_EXPORT_ENV=NONE``.
* Open MPI: ``mpiexec -n N --map-by ppr:1:node`` (one process per node, mpirun(1));
  mpiexec passes only the variables ``-x`` names to other nodes, so ``-x
  GPUDIAG_RDZV_TOKEN`` with ``--probe``.
* MPICH and Intel MPI (both Hydra): ``mpiexec -n N -ppn 1`` (processes per node;
  Hydra passes the whole environment by default, ``-genvall``).

Which MPI ``mpiexec`` is comes from ``mpiexec --version``: ``mpiexec (Open MPI) 5.0.x``
for Open MPI, ``HYDRA build details`` for MPICH, ``Intel(R) MPI Library`` for Intel's.
The task is :mod:`gpudiag.probes.fleet_node`, with the variable that gives its index.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gpudiag.backends.subproc import python_module_argv
from gpudiag.errors import GpudiagInputError

Which = Callable[[str], str | None]
#: Variables forwarded with Open MPI's ``-x`` under ``--probe``: the token (always: the
#: parent sets it in mpiexec's environment), and the tests' fault where it is set.
TOKEN = "GPUDIAG_RDZV_TOKEN"
FAULT = "GPUDIAG_FLEET_PROBE_FAULT"
TASK_MODULE = "gpudiag.probes.fleet_node"


@dataclass(frozen=True)
class Launch:
    """A launcher command without the task: its kind (``--index-from``), argv, the
    number of tasks, a name per task, and how the report names the run."""

    kind: str
    argv: tuple[str, ...]
    nodes: int
    names: tuple[str, ...]
    source: str

    def command(self, *task_args: str) -> list[str]:
        """The full argv: the launcher, then the node task."""
        task = python_module_argv(TASK_MODULE, "--index-from", self.kind,
                                  "--nodes", str(self.nodes), *task_args)  # fmt: skip
        return [*self.argv, *task]


def mpi_flavor(mpiexec: str) -> str | None:
    """``openmpi``, ``hydra`` (MPICH, Intel MPI), or None, from ``mpiexec --version``."""
    try:
        proc = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                              timeout=30, check=False, stdin=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    text = f"{proc.stdout}\n{proc.stderr}"
    if re.search(r"Open MPI|OpenRTE|PRRTE", text):
        return "openmpi"
    if re.search(r"HYDRA|MPICH|Intel\(R\) MPI", text):
        return "hydra"
    return None


def mpi_launch(
    env: Mapping[str, str], ranks: int, probe: bool, which: Which = shutil.which
) -> Launch:
    """``mpiexec`` with one rank per node, for the MPI it is."""
    mpiexec = which("mpiexec") or which("mpirun")
    if mpiexec is None:
        raise GpudiagInputError("fleet --mpi: mpiexec is not on PATH")
    flavor = mpi_flavor(mpiexec)
    names = tuple(f"rank {r}" for r in range(ranks))
    if flavor == "openmpi":
        forward = (["-x", TOKEN] + (["-x", FAULT] if FAULT in env else [])) if probe else []
        argv = (mpiexec, "-n", str(ranks), "--map-by", "ppr:1:node", *forward)
        return Launch("openmpi", argv, ranks, names, f"Open MPI mpiexec, {ranks} node(s)")
    if flavor == "hydra":
        argv = (mpiexec, "-n", str(ranks), "-ppn", "1")
        return Launch("hydra", argv, ranks, names, f"MPICH mpiexec, {ranks} node(s)")
    raise GpudiagInputError(
        f"fleet --mpi: {mpiexec} is neither Open MPI's nor MPICH's (Hydra) mpiexec, "
        "going by its --version"
    )


def slurm_launch(
    env: Mapping[str, str], names: Sequence[str], probe: bool, which: Which = shutil.which
) -> Launch:
    """srun with one task on each node of the allocation."""
    srun = which("srun")
    if srun is None:
        raise GpudiagInputError("fleet: SLURM_JOB_ID is set but srun is not on PATH")
    count = len(names) or int(env.get("SLURM_JOB_NUM_NODES", "0") or 0)
    if count < 1:
        raise GpudiagInputError("fleet: the Slurm allocation lists no node (SLURM_JOB_NODELIST)")
    argv = [
        srun, "--ntasks-per-node=1", f"--nodes={count}", f"--ntasks={count}",
        "--kill-on-bad-exit=0", "--job-name=gpudiag-fleet", "--label",
    ]  # fmt: skip
    if probe:
        argv.append("--export=ALL")
    full = tuple(names) + tuple(f"node #{i}" for i in range(len(names), count))
    return Launch("slurm", tuple(argv), count, full[:count],
                  f"srun in Slurm job {env.get('SLURM_JOB_ID', '?')}")  # fmt: skip
