"""``gpudiag fleet``: compare the nodes of one allocation (issue 19)."""

from __future__ import annotations

import json
import os

import click

from gpudiag.cli.exitcodes import FAILED, OK
from gpudiag.cli.options import json_option


@click.command(
    "fleet",
    epilog="""\b
Examples:
  gpudiag fleet                        # in salloc/sbatch: a snapshot per node
  gpudiag fleet --timeout 60 --json    # the same, as JSON
  gpudiag fleet --snapshots n1.json n2.json   # snapshots taken another way
  srun --ntasks-per-node=1 --output=snap-%N.json gpudiag snapshot  # then:
  gpudiag fleet --snapshots snap-*.json

\b
Inside a Slurm allocation (SLURM_JOB_ID set) gpudiag runs `srun
--ntasks-per-node=1 --nodes=$SLURM_JOB_NUM_NODES python -m gpudiag snapshot`
(never ssh); with --mpi N, `mpiexec -n N --map-by ppr:1:node` (Open MPI) with
one rank per node. A node that does not answer within --timeout is named
(FLEET-NODE-NO-ANSWER). One row per node, then FLEET- findings naming the odd
node(s) and the fact that differs (`gpudiag explain FLEET-GPU-COUNT`). Exit
status: 0 no errors, 1 errors found, 2 bad input (an unreadable snapshot, no
allocation to run in).""",
)
@click.option(
    "--snapshots",
    "from_files",
    is_flag=True,
    default=False,
    help="Compare the snapshot FILEs given as arguments instead of collecting them.",
)
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=1, max=3600),
    default=120.0,
    show_default=True,
    help="Seconds to wait for every node's snapshot (live only).",
)
@click.option(
    "--mpi",
    "mpi_ranks",
    metavar="N",
    type=click.IntRange(min=1, max=100_000),
    default=None,
    help="Collect through Open MPI instead of Slurm: mpiexec -n N --map-by ppr:1:node.",
)
@json_option
def fleet(
    from_files: bool,
    files: tuple[str, ...],
    timeout_s: float,
    mpi_ranks: int | None,
    as_json: bool,
) -> None:
    """Compare the nodes of an allocation: versions, GPUs, health and network."""
    from gpudiag.core.fleet import compare_fleet, label_nodes
    from gpudiag.errors import GpudiagInputError
    from gpudiag.render.fleet import fleet_to_json, render_fleet

    if files and not from_files:
        raise GpudiagInputError(
            "fleet: snapshot files need --snapshots (gpudiag fleet --snapshots FILE...)"
        )
    if from_files:
        if not files:
            raise GpudiagInputError("fleet --snapshots needs at least one snapshot FILE")
        nodes = _from_files(files)
        source = "snapshot files"
    else:
        from gpudiag.backends.fleet_run import collect_fleet

        nodes, source = collect_fleet(os.environ, timeout_s=timeout_s, mpi_ranks=mpi_ranks)
    nodes = label_nodes(nodes)
    findings = compare_fleet(nodes)
    failed = any(f.severity == "error" for f in findings)
    if as_json:
        click.echo(json.dumps(fleet_to_json(nodes, findings), indent=2))
    else:
        from gpudiag.cli.options import human_style

        click.echo(
            render_fleet(nodes, findings, source=source, style=human_style(False, False)), nl=False
        )
    raise SystemExit(FAILED if failed else OK)


def _from_files(files: tuple[str, ...]) -> list:  # type: ignore[type-arg]
    from gpudiag.core.fleet import FleetNode
    from gpudiag.snapshot import load_snapshot

    return [FleetNode(source=_source(f), snapshot=load_snapshot(f)) for f in files]


def _source(path: str) -> str:
    """``snaps/node07.json`` -> ``node07``: how a node without a host name is named."""
    name = os.path.basename(path) or path
    return name[: -len(".json")] if name.endswith(".json") and len(name) > 5 else name
