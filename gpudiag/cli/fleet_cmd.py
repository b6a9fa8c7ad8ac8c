"""``gpudiag fleet``: compare the nodes of one allocation (issue 19)."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import click

from gpudiag.cli.exitcodes import FAILED, OK
from gpudiag.cli.options import json_option

if TYPE_CHECKING:
    from gpudiag.backends.fleet_run import ProbeRequest


@click.command(
    "fleet",
    epilog="""\b
Examples:
  gpudiag fleet                        # in salloc/sbatch: a snapshot per node
  gpudiag fleet --timeout 60 --json    # the same, as JSON
  gpudiag fleet --probe                # and test MASTER_ADDR:MASTER_PORT
  gpudiag fleet --mpi 4 --probe --master-addr n01 --master-port 29500
  gpudiag fleet --snapshots n1.json n2.json   # snapshots taken another way
  gpudiag fleet --strict               # pre-job: exit 1 on any skew

\b
Inside a Slurm allocation (SLURM_JOB_ID set) gpudiag runs one task per node
with `srun --ntasks-per-node=1` (never ssh); with --mpi N, `mpiexec -n N`, one
rank per node (Open MPI: --map-by ppr:1:node; MPICH: -ppn 1). Each task sends
its snapshot back on the launcher's output. A node that does not answer
within --timeout is named (FLEET-NODE-NO-ANSWER). --probe adds: the first
node listens on MASTER_ADDR:MASTER_PORT and every other node must connect to
it; then neighbouring nodes run a short all-reduce (gloo, or NCCL on a GPU),
naming a node that cannot connect, fails or is slow (FLEET-PROBE-). One row
per node, then FLEET- findings naming the odd node(s) and the fact that
differs (`gpudiag explain FLEET-GPU-COUNT`). Exit status, as for check: 0 no
errors, 1 errors found (or warnings, with --strict), 2 bad input (an
unreadable snapshot, no allocation to run in).""",
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
    help="Collect through mpiexec (Open MPI or MPICH) instead of Slurm, one rank per node.",
)
@click.option(
    "--probe",
    is_flag=True,
    default=False,
    help="Also test the network: TCP to MASTER_ADDR:MASTER_PORT from every node, and an "
    "all-reduce between neighbouring nodes (needs --timeout 20 or more).",
)
@click.option(
    "--master-addr",
    metavar="HOST",
    default=None,
    help="The rendezvous address --probe tests [default: MASTER_ADDR, else the first "
    "node of the Slurm allocation].",
)
@click.option(
    "--master-port",
    metavar="PORT",
    type=click.IntRange(min=1, max=65535),
    default=None,
    help="The rendezvous port --probe tests [default: MASTER_PORT, else 29500].",
)
@click.option("--strict", is_flag=True, default=False, help="Exit 1 on warnings too.")
@json_option
def fleet(
    from_files: bool,
    files: tuple[str, ...],
    timeout_s: float,
    mpi_ranks: int | None,
    probe: bool,
    master_addr: str | None,
    master_port: int | None,
    strict: bool,
    as_json: bool,
) -> None:
    """Compare the nodes of an allocation: versions, GPUs, health and network."""
    from gpudiag.core.fleet import compare_fleet, label_nodes
    from gpudiag.errors import GpudiagInputError
    from gpudiag.render.fleet import ProbeView, fleet_to_json, render_fleet

    if files and not from_files:
        raise GpudiagInputError(
            "fleet: snapshot files need --snapshots (gpudiag fleet --snapshots FILE...)"
        )
    given = (("--probe", probe), ("--master-addr", master_addr),
             ("--master-port", master_port), ("--mpi", mpi_ranks))  # fmt: skip
    live_only = [option for option, value in given if value]
    if from_files and live_only:
        raise GpudiagInputError(f"fleet: {live_only[0]} runs on the live nodes, not --snapshots")
    if (master_addr or master_port) and not probe:
        raise GpudiagInputError("fleet: --master-addr/--master-port are for --probe")
    view = None
    if from_files:
        if not files:
            raise GpudiagInputError("fleet --snapshots needs at least one snapshot FILE")
        nodes = _from_files(files)
        source = "snapshot files"
    else:
        from gpudiag.backends.fleet_run import collect_fleet

        request = _probe_request(master_addr, master_port, timeout_s) if probe else None
        run = collect_fleet(os.environ, timeout_s=timeout_s, mpi_ranks=mpi_ranks, probe=request)
        nodes, source = run.nodes, run.source
        if run.plan is not None:
            view = ProbeView(run.plan, run.reports, run.probe_missing, run.cut_short)
    nodes = label_nodes(nodes)
    findings = compare_fleet(nodes)
    if view is not None:
        from gpudiag.core.fleet_probe_rules import probe_findings

        findings += probe_findings(
            nodes, view.plan, view.reports, view.missing, cut_short=view.cut_short
        )
    # as check: a skew that is only a warning (another HCA firmware) fails a pre-job
    # gate that asks for a clean fleet (issue 19: exit codes as for check)
    from gpudiag.cli.gate import failing, say_why_failed

    failed = bool(failing(findings, strict=strict))
    if as_json:
        click.echo(json.dumps(fleet_to_json(nodes, findings, view), indent=2))
        say_why_failed(findings, strict=strict, command="fleet")
    else:
        from gpudiag.cli.options import human_style

        style = human_style(False, False)
        click.echo(render_fleet(nodes, findings, source=source, style=style, probe=view), nl=False)
    raise SystemExit(FAILED if failed else OK)


def _probe_request(addr: str | None, port: int | None, timeout_s: float) -> ProbeRequest:
    """``--probe``'s address and port: the options, else MASTER_ADDR/MASTER_PORT (an empty
    address: the first node of the Slurm allocation, filled in by the backend)."""
    from gpudiag.backends.fleet_run import ProbeRequest
    from gpudiag.core.fleet_probe import MIN_TIMEOUT_S
    from gpudiag.errors import GpudiagInputError
    from gpudiag.parsing import int_or_none

    if timeout_s < MIN_TIMEOUT_S:
        raise GpudiagInputError(f"fleet --probe needs --timeout {MIN_TIMEOUT_S:g} or more")
    if port is None:
        text = os.environ.get("MASTER_PORT", "").strip()
        port = int_or_none(text, minimum=1) if text else 29500
        if port is None or port > 65535:
            raise GpudiagInputError(f"fleet --probe: MASTER_PORT={text!r} is not a port")
    addr = addr if addr is not None else os.environ.get("MASTER_ADDR", "").strip()
    if addr and (len(addr) > 255 or not addr.isprintable() or " " in addr):
        raise GpudiagInputError("fleet --probe: the master address is not a host name")
    return ProbeRequest(master_addr=addr, master_port=port)


def _from_files(files: tuple[str, ...]) -> list:  # type: ignore[type-arg]
    from gpudiag.core.fleet import FleetNode
    from gpudiag.snapshot import load_snapshot

    return [FleetNode(source=_source(f), snapshot=load_snapshot(f)) for f in files]


def _source(path: str) -> str:
    """``snaps/node07.json`` -> ``node07``: how a node without a host name is named."""
    name = os.path.basename(path) or path
    return name[: -len(".json")] if name.endswith(".json") and len(name) > 5 else name
