"""``gpudiag probe``: short real training runs that verify numbers, in child processes."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from gpudiag.cli.exitcodes import FAILED, OK, TIMEOUT
from gpudiag.cli.gate import json_out_option, write_json_out
from gpudiag.cli.options import child_visible_options, human_style, json_option, output_options
from gpudiag.core.bounds import text_problem, too_long, visible_problem
from gpudiag.errors import GpudiagInputError
from gpudiag.parsing import parse_int_list, show_value

if TYPE_CHECKING:
    from gpudiag.probes.plan import ProbePlan
    from gpudiag.render.progress import Progress
    from gpudiag.render.text import Style

_EPILOG = """\b
Probes (each trains a small model and checks numbers, not "did not crash"):
  single  one device: loss falls; parameters match a float64 CPU run
  dp      nn.DataParallel over --device-ids: outputs/gradients match one
          device; peak memory per GPU (device_ids[0] holds the most)
  ddp     DistributedDataParallel, one process per rank, DistributedSampler:
          parameters bit-identical across ranks and equal to one process on
          the combined batch; per-rank host/GPU UUID/bus id; all-reduce
          algbw and busbw (nccl-tests: busbw = algbw * 2(n-1)/n)
  amp     autocast (fp16 + GradScaler, bf16 where supported; bf16 on CPU):
          loss close to float32; speed-up over float32
  p2p     every pair of GPUs (--device-ids, else all visible): a peer copy
          both ways, bit-exact, timed against the link (NVLink/PCIe); a
          2-rank NCCL all-reduce, retried with NCCL_P2P_DISABLE=1 if it hangs
          to name the cause. With fewer than 2 GPUs: no pair, passes
  all     single, dp, ddp, amp; and p2p when 2+ GPUs are selected (default)

\b
Examples:
  gpudiag probe all --device cpu           # runs anywhere, gloo + bf16
  gpudiag probe ddp --nproc 4 --visible 0,1,2,3
  gpudiag probe dp --visible 2,3 --device-ids 0,1 --json
  gpudiag probe p2p --visible 0,1,2,3 --timeout 300   # 6 pairs
  torchrun --nproc-per-node=8 -m gpudiag probe ddp          # inside torchrun
  srun --ntasks=16 gpudiag probe ddp   # with MASTER_ADDR/MASTER_PORT exported
  mpiexec -n 2 gpudiag probe ddp --device cpu   # Open MPI, MPICH, Intel MPI
  deepspeed --num_gpus 2 --module gpudiag probe ddp

\b
--device defaults to cuda when an NVIDIA driver is installed (libcuda and
/dev/nvidiactl; decided without importing torch), else cpu. Under a launcher
(torchrun, srun, mpiexec, deepspeed, accelerate, horovodrun)
every rank runs ddp, rank 0 also the other probes, and rank 0 prints
the table for all ranks. Every probe runs in child processes that are
killed at --timeout; a hang says which ranks arrived.

\b
Progress goes to stderr (one line rewritten in place on a terminal, one line
per stage otherwise); the report is one row per probe, details with -v.

\b
Exit codes: 0 all passed; 1 a probe failed; 2 bad input; 3 a probe timed
out or hung. A failed check names the rule it broke (-v shows every check)."""


def max_nproc() -> int:
    """The most self-launched ranks that make sense here (issue 21: ``--nproc 1000``
    started 1000 torch workers on 2 CPUs; a 20-digit value grew memory until the OOM
    killer): the CPUs this process may run on (its affinity, as Slurm's binding sets
    it) or the NVIDIA GPUs, whichever is more, and never fewer than 2 (a DDP pair).
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    gpus = Path("/proc/driver/nvidia/gpus")
    try:
        gpu_count = sum(1 for _ in gpus.iterdir())
    except OSError:
        gpu_count = 0
    return max(2, cpus, gpu_count)


@click.command(
    "probe", epilog=_EPILOG, short_help="Run short training probes that verify the numbers."
)
@click.argument(
    "which",
    type=click.Choice(["single", "dp", "ddp", "amp", "p2p", "all"]),
    default="all",
    metavar="[single|dp|ddp|amp|p2p|all]",
)
@child_visible_options
@click.option(
    "--device-ids",
    "device_ids_text",
    metavar="IDS",
    default=None,
    help="cuda ordinals for the dp and p2p probes, e.g. '0,1' (ordinals under "
    "--visible). Default: every visible GPU.",
)
@click.option(
    "--nproc",
    type=int,
    default=None,
    metavar="N",
    help="ddp ranks to start (default: 2 on cpu, one per visible GPU on cuda; at most "
    "the CPUs this process may use or the GPUs, whichever is more). "
    "Not used under a launcher (torchrun, srun, mpiexec...), whose world size decides.",
)
@click.option(
    "--device",
    type=click.Choice(["cuda", "cpu"]),
    default=None,
    help="Where to run (default: cuda when an NVIDIA driver is present, else cpu).",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=60.0,
    show_default=True,
    metavar="S",
    help="Hard wall-clock limit per probe, in seconds (at most 3600); past it every "
    "child is killed and the probe reported as hung (exit 3).",
)
@output_options
@json_option
@json_out_option
def probe(
    which: str,
    visible: str | None,
    order: str | None,
    device_ids_text: str | None,
    nproc: int | None,
    device: str | None,
    timeout_s: float,
    quiet: bool,
    verbose: bool,
    as_json: bool,
    json_out: str | None = None,
) -> None:
    """Run short training probes (single, dp, ddp, amp, p2p) and verify the numbers."""
    # Deferred: the runner is only needed when probing, and keeps --help cheap.
    from gpudiag.backends.torchdist import probe_torch_problem
    from gpudiag.launch.process import detect_launch
    from gpudiag.probes.plan import ProbePlan
    from gpudiag.probes.runner import (
        MAX_TIMEOUT_S,
        default_device,
        default_nproc,
        gpu_driver_present,
        parse_probe_names,
        run_probes,
        visible_gpu_count,
    )
    from gpudiag.render.probe import render_probe_json, render_probe_table

    style = human_style(quiet, verbose)

    if not math.isfinite(timeout_s) or not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise GpudiagInputError(
            f"--timeout must be more than 0 and at most {MAX_TIMEOUT_S:g} seconds "
            f"(got {timeout_s:g})"
        )
    if nproc is not None and nproc < 1:
        raise GpudiagInputError(f"--nproc must be >= 1 (got {nproc})")
    if visible is not None and (problem := visible_problem(visible)) is not None:
        raise GpudiagInputError(f"--visible {problem}")
    device_ids = _parse_device_ids(device_ids_text)
    chosen = device is not None
    if device is None:
        device = default_device()
    elif device == "cuda" and not gpu_driver_present():
        raise GpudiagInputError(
            "--device cuda: no NVIDIA driver here (no libcuda or /dev/nvidiactl); use --device cpu"
        )
    if device == "cpu" and (visible not in (None, "") or order is not None):
        # --device cpu hides every GPU from the workers: a mask would be silently
        # ignored (issue 20: `--visible garbage --device cpu` passed).
        given = "--visible" if visible not in (None, "") else "--order"
        why = "" if chosen else ", the default here: no NVIDIA driver"
        raise GpudiagInputError(
            f"{given} has no effect with --device cpu{why} (the cpu probes hide every "
            "GPU); leave it out, or use --device cuda"
        )
    launch = detect_launch(os.environ)
    if launch is not None and nproc is not None and nproc != launch.world_size:
        raise GpudiagInputError(
            f"--nproc {nproc} conflicts with the launcher's world size {launch.world_size}; "
            "under a launcher leave --nproc out"
        )
    if nproc is not None and nproc > (limit := max_nproc()):
        shown = str(nproc) if nproc < 10**30 else "a larger number"
        raise GpudiagInputError(
            f"--nproc must be at most {limit} here, the CPUs this process may use or the "
            f"GPUs, whichever is more: each rank is a process with its own torch (got {shown})"
        )
    # torch is an extra (gpudiag[probe]): without a usable one, one line, not a
    # failure per worker (issue 20).
    if (torch_problem := probe_torch_problem()) is not None:
        raise GpudiagInputError(torch_problem)
    if launch is not None and which in ("ddp", "all"):
        from gpudiag.probes.jobtoken import refuse_unshared

        # Before any output: the ranks span nodes and share no secret (issue 21).
        refuse_unshared(launch, os.environ)
    resolved_device: Literal["cpu", "cuda"] = "cuda" if device == "cuda" else "cpu"
    # `all` adds p2p only for 2+ selected GPUs (docs/probes.md); cpu selects none.
    gpus = 0
    if resolved_device == "cuda":
        gpus = len(device_ids) if device_ids is not None else visible_gpu_count(visible)
    plan = ProbePlan(
        probes=parse_probe_names(which, gpus),
        device=resolved_device,
        timeout_s=timeout_s,
        nproc=nproc if nproc is not None else default_nproc(resolved_device, visible),
        device_ids=device_ids,
        visible=visible,
        order=order,
        launch=launch,
    )
    progress = (
        _progress(plan, style) if (launch is None or launch.rank == 0) and not quiet else None
    )
    try:
        report = run_probes(plan, on_event=None if progress is None else progress.event)
    finally:
        if progress is not None:
            progress.end()
    # Across ranks only rank 0 prints: it holds every rank's row.
    if report.rank == 0:
        if json_out is not None:
            write_json_out(json_out, json.dumps(render_probe_json(report), indent=2))
        if as_json:
            click.echo(json.dumps(render_probe_json(report), indent=2))
        else:
            click.echo(render_probe_table(report, style))
    elif report.overall != "pass":
        failed = ", ".join(f"{p.probe}: {p.status}" for p in report.probes if p.status != "pass")
        click.echo(f"gpudiag probe: rank {report.rank}: {failed}", err=True)
    code = {"pass": OK, "fail": FAILED, "timeout": TIMEOUT}[report.overall]
    click.get_current_context().exit(code)


def _progress(plan: ProbePlan, style: Style) -> Progress:
    """Progress on stderr, its first line written now (before any child starts)."""
    import sys

    from gpudiag.render.progress import Progress

    try:
        live = sys.stderr.isatty()
    except (AttributeError, ValueError):
        live = False
    progress = Progress(sys.stderr, live=live, width=style.width)
    ddp_here = "ddp" in plan.probes and plan.launch is None
    progress.begin(plan.probes, plan.device, plan.nproc if ddp_here else 1)
    return progress


def _parse_device_ids(text: str | None) -> tuple[int, ...] | None:
    """``'0,1'`` -> (0, 1); None stays None.

    Raises:
        GpudiagInputError: not a comma-separated list of distinct ordinals >= 0.
    """
    if text is None:
        return None
    if (problem := text_problem(text)) is not None:
        raise GpudiagInputError(f"--device-ids {problem}")
    ids = parse_int_list("--device-ids", text, minimum=0)
    if (problem := too_long(ids)) is not None:  # issue 21: every count has a bound
        raise GpudiagInputError(f"--device-ids {problem}")
    seen: set[int] = set()  # a set: 65,000 ids took 3 s with a scan per id
    for ordinal in ids:
        if ordinal in seen:
            raise GpudiagInputError(
                f"--device-ids {show_value(text)}: ordinal {ordinal} appears twice"
            )
        seen.add(ordinal)
    return tuple(ids)
