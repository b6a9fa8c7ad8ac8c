"""This process's place in a launched job, for ``gpudiag probe``.

``probe`` needs one rank and one world size to run as, so where ``check`` reports
a variable it cannot use, probe refuses to start (:class:`GpudiagInputError`: one
line, exit 2). Both read each variable with the same reader
(:func:`gpudiag.launch.ints.read_int`) over the same table
(:mod:`gpudiag.launch.table`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from gpudiag.errors import GpudiagInputError
from gpudiag.launch.ints import read_int
from gpudiag.launch.table import (
    DEFAULT_MASTER_PORT,
    MPI_FAMILY,
    SPECS,
    TORCH_VARS,
    Launcher,
    present_launchers,
)
from gpudiag.parsing import show_value


@dataclass(frozen=True)
class LaunchEnv:
    """This process's place in a job started by an external launcher.

    Attributes:
        launcher: ``torchrun``, ``accelerate``, ``deepspeed``, ``horovod``,
            ``openmpi``, ``mpich``, ``intelmpi``, ``slurm``, or ``env`` (RANK and
            WORLD_SIZE exported by something else); see :mod:`gpudiag.launch.table`.
        rank: global rank (RANK, else the launcher's: OMPI_COMM_WORLD_RANK, PMI_RANK...).
        world_size: WORLD_SIZE, else the launcher's size variable.
        local_rank: LOCAL_RANK, else the launcher's local rank (0 when unset).
        node_rank: GROUP_RANK or the launcher's node variable, if set.
        run_id: a store key prefix unique to this job step: the launcher's own
            run id and the job ids of the scheduler and MPI around it
            (:func:`job_run_id`).
        local_world_size: ranks on this node, when the launcher says.
        master_addr, master_port: where the ranks meet (MASTER_ADDR/MASTER_PORT, or
            the one-node default under MPI and Horovod, docs/launchers.md).
    """

    launcher: Launcher
    rank: int
    world_size: int
    local_rank: int
    node_rank: int | None
    run_id: str
    local_world_size: int | None = None
    master_addr: str | None = None
    master_port: int | None = None


#: The field each of torch's variables holds.
_TORCH_FIELDS = dict(zip(("rank", "world_size", "local_rank", "local_world_size", "node_rank"),
                         TORCH_VARS, strict=True))  # fmt: skip


def detect_launch(environ: Mapping[str, str]) -> LaunchEnv | None:
    """Reads the launcher's variables (:mod:`gpudiag.launch.table`); None when self-launching.

    torch's own RANK and WORLD_SIZE win when set (torchrun, accelerate and DeepSpeed
    set them; a job script may export them). Otherwise the innermost launcher's
    rank and size variables are used: Horovod's, Open MPI's OMPI_COMM_WORLD_*,
    MPICH's and Intel MPI's PMI_RANK/PMI_SIZE/MPI_LOCALRANKID, or Slurm's
    SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID/SLURM_NODEID. The ranks meet at
    MASTER_ADDR:MASTER_PORT; under MPI or Horovod with every rank on this node
    (local size = world size) they default to 127.0.0.1 and 29500.

    Raises:
        GpudiagInputError: a variable is not a plain integer (read as ``check``
            reads it: ``RANK=1_0`` is refused, not rank 10), or is out of range, or
            the rendezvous address is missing for a job on several nodes.
    """
    names = present_launchers(environ)
    if "RANK" in environ and "WORLD_SIZE" in environ:
        name = names[0] if names and names[0] not in ("slurm",) else "env"
        spec = SPECS[name]
        # torch's variables first; the launcher's own where torch's are absent.
        variables = {
            f: var if var in environ else (spec.var(f) or var) for f, var in _TORCH_FIELDS.items()
        }
    else:
        usable = [
            n
            for n in names
            if n != "env"
            and SPECS[n].rank in environ
            and SPECS[n].world_size in environ
            and n != "deepspeed"
        ]
        if not usable:
            return None
        name = usable[0]
        spec = SPECS[name]
        variables = {f: spec.var(f) or "" for f in _TORCH_FIELDS}
    launcher = cast("Launcher", name)
    rank = _env_int(environ, variables["rank"])
    world_size = _env_int(environ, variables["world_size"])
    local_rank = _env_int(environ, variables["local_rank"], 0) if variables["local_rank"] else 0
    local_size_var = variables["local_world_size"]
    local_world_size = read_int(environ.get(local_size_var, "")).value if local_size_var else None
    if local_world_size is not None and local_world_size < 0:
        local_world_size = None  # a count, as before: only digits were taken
    node_var = variables["node_rank"]
    node_text = environ.get(node_var) if node_var else None
    node_rank = (
        _env_int(environ, node_var) if (node_text is not None and node_text.strip()) else None
    )
    if world_size < 1:
        raise GpudiagInputError(f"world size must be >= 1 (got {world_size})")
    if not 0 <= rank < world_size:
        raise GpudiagInputError(f"rank {rank} is outside 0..{world_size - 1}")
    if local_rank < 0:
        raise GpudiagInputError(f"local rank must be >= 0 (got {local_rank})")
    addr = environ.get("MASTER_ADDR", "").strip()
    port_text = environ.get("MASTER_PORT", "")
    port_text = port_text if port_text.strip() else ""  # blank = unset, as before
    one_node = local_world_size is not None and local_world_size == world_size
    if (name in MPI_FAMILY or name == "horovod") and one_node:
        # Every rank is on this host: meet on the loopback at torchrun's default
        # port unless the user exported MASTER_ADDR/MASTER_PORT.
        addr = addr or "127.0.0.1"
        port_text = port_text or str(DEFAULT_MASTER_PORT)
    for var, value in (("MASTER_ADDR", addr), ("MASTER_PORT", port_text)):
        if not value:
            raise GpudiagInputError(
                f"{launcher} launch (rank {rank} of {world_size}) needs {var} in the "
                "environment for the ranks to meet (export MASTER_ADDR=<rank 0 host> "
                f"MASTER_PORT=<free port>{SPECS[name].export_hint})"
            )
    port = _env_int({"MASTER_PORT": port_text}, "MASTER_PORT")
    if not 1 <= port <= 65535:
        raise GpudiagInputError(f"MASTER_PORT must be 1..65535 (got {port})")
    return LaunchEnv(
        launcher,
        rank,
        world_size,
        local_rank,
        node_rank,
        job_run_id(name, environ),
        local_world_size,
        addr,
        port,
    )


#: Job ids every rank of one job shares, whichever launcher started the ranks
#: (issue 21: the Slurm job id was ignored under torchrun or mpirun, and MPICH's
#: run id was the constant ``mpich``). Slurm: ``SLURM_JOB_ID`` (the allocation;
#: ``SLURM_STEP_ID`` only where srun started every rank, the ``slurm`` row: under
#: mpirun in a batch job the ranks on the first node are in the batch step and
#: the others in the step of the daemons srun started, and would never meet).
#: Open MPI: ``PMIX_NAMESPACE`` (5.x, PMIx; recorded from 5.0.11:
#: ``prterun-<host>-<pid>@1``), ``OMPI_MCA_ess_base_jobid`` (1.7 to 4.x,
#: ``orte/mca/odls/base/odls_base_default_fns.c`` sets it for every rank),
#: ``OMPI_MCA_orte_ess_jobid`` (up to 1.6). Intel MPI: ``I_MPI_HYDRA_UUID``.
#: MPICH's Hydra sets no job id (``src/pm/hydra/proxy/pmip_cb.c`` sets only
#: ``PMI_RANK``/``PMI_SIZE``/``PMI_FD`` or ``PMI_PORT``/``PMI_ID``,
#: ``MPI_LOCALRANKID``, ``MPI_LOCALNRANKS`` and ``PMI_HOSTNAME``).
JOB_ID_VARS = (
    "SLURM_JOB_ID",
    "PMIX_NAMESPACE",
    "OMPI_MCA_ess_base_jobid",
    "OMPI_MCA_orte_ess_jobid",
    "I_MPI_HYDRA_UUID",
)
#: A run id is a store key prefix and part of every arrival's MAC: kept short and
#: printable; anything else is replaced by its hash.
_RUN_ID_MAX = 160
_RUN_ID_TEXT = re.compile(r"[A-Za-z0-9._:@=+-]*")


def job_run_id(name: str, environ: Mapping[str, str]) -> str:
    """The run id of launcher ``name``'s job step: its table row's variables
    (``torchrun-<TORCHELASTIC_RUN_ID>-<restart>``, ``slurm-<job>-<step>``...) then
    each :data:`JOB_ID_VARS` that is set and not already among them, as
    ``VAR=value``. Every rank of one job computes the same one."""
    spec = SPECS[name]
    parts = [spec.run_id_for(environ)]
    parts += [
        f"{var}={environ[var].strip()}"
        for var in JOB_ID_VARS
        if var not in spec.run_id and environ.get(var, "").strip()
    ]
    run_id = "-".join(parts)
    if len(run_id) > _RUN_ID_MAX or not _RUN_ID_TEXT.fullmatch(run_id):
        digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return f"{spec.run_id_prefix or spec.name}-h{digest}"
    return run_id


def _env_int(environ: Mapping[str, str], name: str, default: int | None = None) -> int:
    """``name``'s value through the one reader; a one-line refusal when it is not usable."""
    text = environ.get(name)
    if text is None or not text.strip():
        if default is None:
            raise GpudiagInputError(f"{name} is empty")
        return default
    value = read_int(text).value
    if value is None:
        raise GpudiagInputError(
            f"{name}={show_value(text)} is not an integer (plain ASCII digits, as "
            "gpudiag check reads it)"
        )
    return value
