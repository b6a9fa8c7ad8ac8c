"""``gpudiag check``: will this job's GPU configuration work? (docs/check.md)."""

from __future__ import annotations

import os

import click

from gpudiag.cli.exitcodes import FAILED, OK
from gpudiag.cli.gate import (
    ignore_option,
    json_out_option,
    parse_ignore,
    report_without,
    say_dropped,
    write_json_out,
)
from gpudiag.cli.options import json_option, snapshot_option, visible_options
from gpudiag.errors import GpudiagInputError
from gpudiag.parsing import parse_int, parse_int_list

_EPILOG = """\b
Examples:
  gpudiag check                                   # this machine, this environment
  gpudiag check --visible 1,2 --device-ids 0,1    # nn.DataParallel on GPUs 1 and 2
  gpudiag check --device-ids 1,2,3                # model .cuda()'d on cuda:0: predicts
                                                  #   'module must have its parameters...'
  gpudiag check --set-device 1 --device-ids 1,2 --batch-size 64
  gpudiag check --device-ids all --amp bf16       # DataParallel on all visible GPUs
  gpudiag check --nproc-per-node 8 --backend nccl # before torchrun
  gpudiag check --expect-gpus 4 --strict          # pre-job script: exit 1 if not clean
  gpudiag check --snapshot node.json --json       # replay a saved machine

\b
Device ids are cuda ordinals under CUDA_VISIBLE_DEVICES (cuda:0 is the first
visible GPU), exactly as torch.nn.DataParallel reads them.

\b
Exit codes: 0 no errors (warnings allowed); 1 errors, or warnings with
--strict; 2 bad input."""


def parse_device_ids(text: str | None) -> tuple[bool, list[int] | None]:
    """``--device-ids`` → (validate DataParallel?, ids or None for torch's default).

    ``''`` is an explicit empty list; ``all`` means torch's default (every visible GPU).

    Raises:
        GpudiagInputError: an entry that is not an integer.
    """
    if text is None:
        return False, None
    value = text.strip()
    if value.lower() == "all":
        return True, None
    if value == "":
        return True, []
    ids = parse_int_list("--device-ids", value)
    return True, ids


def _int(name: str, text: str | None) -> int | None:
    return None if text is None else parse_int(name, text)


def _choice(name: str, text: str | None, choices: tuple[str, ...]) -> str | None:
    if text is None:
        return None
    value = text.strip().lower()
    if value not in choices:
        raise GpudiagInputError(f"{name} must be one of {', '.join(choices)}, not {text!r}")
    return value


@click.command(
    epilog=_EPILOG, short_help="Predict DataParallel/DDP launch failures and unhealthy GPUs."
)
@snapshot_option
@visible_options
@click.option(
    "--device-ids",
    metavar="IDS",
    default=None,
    help="DataParallel device_ids: comma-separated cuda ordinals ('0,1'); 'all' = torch's "
    "default (every visible GPU); '' = an explicit empty list.",
)
@click.option(
    "--output-device", metavar="K", default=None, help="DataParallel output_device (cuda ordinal)."
)
@click.option(
    "--set-device",
    metavar="K",
    default=None,
    help="The script calls torch.cuda.set_device(K) first, so cuda:K is the current device.",
)
@click.option(
    "--module-device",
    metavar="DEV",
    default=None,
    help="Where the model's parameters are at the first forward: cpu, cuda, cuda:K or K. "
    "Default: the current device (where .cuda() puts them).",
)
@click.option("--batch-size", metavar="N", default=None, help="Batch size of one forward.")
@click.option(
    "--nproc-per-node",
    metavar="N",
    default=None,
    help="DDP ranks per node (default: LOCAL_WORLD_SIZE, SLURM_NTASKS_PER_NODE or "
    "SLURM_GPUS_ON_NODE).",
)
@click.option("--backend", metavar="nccl|gloo", default=None, help="DDP backend.")
@click.option(
    "--amp", metavar="bf16|fp16", default=None, help="The job uses autocast in this dtype."
)
@click.option(
    "--expect-gpus", metavar="N", default=None, help="Error unless exactly N GPUs are visible."
)
@click.option("--strict", is_flag=True, default=False, help="Exit 1 on warnings too.")
@json_option
@json_out_option
@ignore_option
def check(
    snapshot_path: str | None,
    visible: str | None,
    order: str | None,
    device_ids: str | None,
    output_device: str | None,
    set_device: str | None,
    module_device: str | None,
    batch_size: str | None,
    nproc_per_node: str | None,
    backend: str | None,
    amp: str | None,
    expect_gpus: str | None,
    strict: bool,
    as_json: bool,
    json_out: str | None = None,
    ignore: tuple[str, ...] = (),
) -> None:
    """Predict DataParallel/DDP failures and unhealthy GPUs before the job runs.

    Every finding has a stable code, the PyTorch error text it predicts, and a
    fix naming the physical GPUs involved. With no options, checks the current
    environment (CUDA_VISIBLE_DEVICES, torchrun and Slurm variables) and GPU health.
    """
    # Parse every option before touching the machine: bad input exits 2 fast.
    ignored = parse_ignore(ignore)
    dataparallel, ids = parse_device_ids(device_ids)
    kwargs = {
        "device_ids": ids,
        "dataparallel": dataparallel,
        "output_device": _int("--output-device", output_device),
        "set_device": _int("--set-device", set_device),
        "module_device": module_device,
        "batch_size": _int("--batch-size", batch_size),
        "nproc_per_node": _int("--nproc-per-node", nproc_per_node),
        "backend": _choice("--backend", backend, ("nccl", "gloo")),
        "amp": _choice("--amp", amp, ("bf16", "fp16")),
        "expect_gpus": _int("--expect-gpus", expect_gpus),
    }
    from gpudiag.core.check import FROM_SNAPSHOT, run_check
    from gpudiag.core.dataparallel import parse_module_device
    from gpudiag.machine import live_driver_asker, load_machine
    from gpudiag.render.report import render_report, report_json

    parse_module_device(module_device)
    machine = load_machine(snapshot_path)
    report = run_check(
        machine,
        visible=FROM_SNAPSHOT if visible is None else visible,
        order=FROM_SNAPSHOT if order is None else order,
        env=dict(os.environ),
        # Live: the CUDA driver confirms the rules' mapping; a snapshot has only the rules.
        driver=None if snapshot_path is not None else live_driver_asker(machine),
        **kwargs,  # type: ignore[arg-type]
    )
    report, dropped = report_without(report, ignored)
    if json_out is not None:
        write_json_out(json_out, report_json(report))
    say_dropped(dropped)
    if as_json:
        click.echo(report_json(report))
    else:
        click.echo(render_report(report, strict=strict))
    code = report.exit_code(strict=strict)
    click.get_current_context().exit(FAILED if code else OK)
