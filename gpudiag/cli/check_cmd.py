"""``gpudiag check``: will this job's GPU configuration work? (docs/check.md)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import click

from gpudiag.cli.exitcodes import FAILED, OK
from gpudiag.cli.gate import (
    ignore_option,
    json_out_option,
    parse_ignore,
    report_without,
    say_dropped,
    say_why_failed,
    write_json_out,
)
from gpudiag.cli.options import (
    deep_option,
    human_style,
    json_option,
    output_options,
    snapshot_option,
    spelled,
    visible_options,
)
from gpudiag.core.request import FROM_SNAPSHOT, CheckRequest, RequestError
from gpudiag.errors import GpudiagInputError
from gpudiag.parsing import parse_int, parse_int_list

if TYPE_CHECKING:
    from gpudiag.model import PortProbe

_EPILOG = """\b
Examples:
  gpudiag check                          # this machine, this environment
  gpudiag check --visible 1,2 --device-ids 0,1   # DataParallel on GPUs 1, 2
  gpudiag check --device-ids 1,2,3       # model .cuda()'d on cuda:0: predicts
                                         # 'module must have its parameters…'
  gpudiag check --set-device 1 --device-ids 1,2 --batch-size 64
  gpudiag check --device-ids all --amp bf16   # DataParallel on every GPU
  gpudiag check --nproc-per-node 8 --backend nccl        # before torchrun
  gpudiag check --launcher openmpi --nproc-per-node 4    # before mpirun -n 4
  gpudiag check --deepspeed-include localhost:1,2  # DeepSpeed workers' GPUs
  mpirun -n 4 gpudiag check              # inside any launcher: detected
  gpudiag check --expect-gpus 4 --strict # pre-job: exit 1 if not clean
  gpudiag check --snapshot node.json --json   # replay a saved machine
  gpudiag check -q                       # the verdict line and errors only
  gpudiag explain HEALTH-DRIVER-TOO-OLD  # what a finding means, its fix
  gpudiag check --launched --script-reads LOCAL_RANK   # in a DDP job's rank
  gpudiag check --ddp-devices 1,2        # Lightning devices=[1,2]
  gpudiag check --set-device 0,1,2,3     # one value per local rank
  gpudiag check --amp fp16 --model-dtype bf16 --tf32
  gpudiag check --nproc-per-node 4 --num-workers 8   # /dev/shm big enough?

\b
Device ids are cuda ordinals under CUDA_VISIBLE_DEVICES (cuda:0 is the first
visible GPU), exactly as torch.nn.DataParallel reads them.

\b
torch is not imported unless --deep is given or its installed build points at
a problem (a CPU-only build beside GPUs, a CUDA build newer than the driver).

\b
Exit codes: 0 no errors (warnings allowed); 1 errors, or warnings with
--strict; 2 bad input."""


def parse_device_ids(text: str | None, name: str = "--device-ids") -> tuple[bool, list[int] | None]:
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
    ids = parse_int_list(name, value)
    return True, ids


def parse_set_device(
    text: str | None, name: str = "--set-device"
) -> tuple[int | None, list[int] | None]:
    """``--set-device K`` → (K, None); ``--set-device K0,K1`` → (None, [K0, K1]).

    Raises:
        GpudiagInputError: an entry that is not an integer.
    """
    if text is None:
        return None, None
    if "," in text:
        return None, parse_int_list(name, text)
    return parse_int(name, text), None


def _probe_port(address: str, port: int) -> PortProbe:
    from gpudiag.backends.port import probe_port

    return probe_port(address, port)


#: CheckRequest fields given by an option of another name.
_OPTION_OF = {"set_device_per_rank": "set_device", "dataparallel": "device_ids"}


def _spell(ctx: click.Context, field: str) -> str:
    return spelled(ctx, _OPTION_OF.get(field, field))


def _request(ctx: click.Context, texts: dict[str, Any]) -> CheckRequest:
    """The :class:`CheckRequest` from the options' texts; every error names the option,
    or the ``GPUDIAG_CHECK_*`` variable the value came from.

    Raises:
        GpudiagInputError: a bad value, in one line.
    """

    def spell(field: str) -> str:
        return _spell(ctx, field)

    def num(field: str) -> int | None:
        text = texts[field]
        return None if text is None else parse_int(spell(field), text)

    dataparallel, ids = parse_device_ids(texts["device_ids"], spell("device_ids"))
    one_device, per_rank = parse_set_device(texts["set_device"], spell("set_device"))
    ddp_devices = texts["ddp_devices"]
    reads = texts["script_reads"]
    visible = texts["visible"]
    order = texts["order"]
    try:
        return CheckRequest(
            visible=FROM_SNAPSHOT if visible is None else visible,
            order=FROM_SNAPSHOT if order is None else order,
            device_ids=ids,
            dataparallel=dataparallel,
            output_device=num("output_device"),
            set_device=one_device,
            set_device_per_rank=per_rank,
            local_rank=num("local_rank"),
            module_device=texts["module_device"],
            batch_size=num("batch_size"),
            nproc_per_node=num("nproc_per_node"),
            backend=texts["backend"],
            launcher=texts["launcher"],
            deepspeed_include=texts["deepspeed_include"],
            deepspeed_exclude=texts["deepspeed_exclude"],
            ddp_devices=None
            if ddp_devices is None
            else parse_int_list(spell("ddp_devices"), ddp_devices),
            launched=texts["launched"],
            # --script-reads LOCAL_RANK,RANK; an empty value reads nothing.
            script_reads=[] if reads is None or not reads.strip() else reads.split(","),
            init_rank_args=texts["init_rank_args"],
            amp=texts["amp"],
            model_dtype=texts["model_dtype"],
            tf32=texts["tf32"],
            expect_gpus=num("expect_gpus"),
            num_workers=num("num_workers"),
        )
    except RequestError as exc:
        raise GpudiagInputError(exc.worded(spell)) from None


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
    metavar="K|K0,K1,...",
    default=None,
    help="The script calls torch.cuda.set_device(K) first, so cuda:K is the current device. "
    "One value applies to every DDP rank unless --local-rank says which rank it describes "
    "(or it equals LOCAL_RANK); K0,K1,... gives one value per local rank.",
)
@click.option(
    "--local-rank",
    metavar="R",
    default=None,
    help="The local rank that a single --set-device value describes (default: LOCAL_RANK "
    "when it equals that value).",
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
    "--launcher",
    metavar="NAME",
    default=None,
    help="Evaluate a launch by this launcher before starting it: torchrun, accelerate, "
    "deepspeed, horovod, openmpi, mpich, intelmpi or slurm (`gpudiag explain DDP-LAUNCHER`). "
    "Inside a launch it is detected from its variables.",
)
@click.option(
    "--deepspeed-include",
    metavar="SPEC",
    default=None,
    help="DeepSpeed's --include (localhost:1,2): predicts the workers' CUDA_VISIBLE_DEVICES.",
)
@click.option(
    "--deepspeed-exclude",
    metavar="SPEC",
    default=None,
    help="DeepSpeed's --exclude (localhost:0). --nproc-per-node stands for --num_gpus.",
)
@click.option(
    "--ddp-devices",
    metavar="IDS",
    default=None,
    help="The cuda ordinals the DDP ranks use, local rank r on the r-th: Lightning "
    "devices=[1,2], accelerate gpu_ids=1,2.",
)
@click.option(
    "--launched",
    is_flag=True,
    default=False,
    help="Assert that this runs inside a launcher (torchrun, srun): missing launcher "
    "variables are errors. For a DDP script's first line.",
)
@click.option(
    "--script-reads",
    metavar="VARS",
    default=None,
    help="Variables the script reads itself before init_process_group, in order "
    "(e.g. LOCAL_RANK): the first one missing is the predicted error.",
)
@click.option(
    "--init-rank-args",
    is_flag=True,
    default=False,
    help="init_process_group gets rank= and world_size=, so env:// reads only "
    "MASTER_ADDR and MASTER_PORT.",
)
@click.option(
    "--amp",
    "--autocast-dtype",
    "amp",
    metavar="bf16|fp16",
    default=None,
    help="The job uses autocast in this dtype.",
)
@click.option(
    "--model-dtype",
    metavar="bf16|fp16|fp32",
    default=None,
    help="The dtype the model was trained in (a bf16-trained model overflows under fp16).",
)
@click.option(
    "--tf32",
    is_flag=True,
    default=False,
    help="The job switches TF32 on (allow_tf32, set_float32_matmul_precision('high')).",
)
@click.option(
    "--expect-gpus", metavar="N", default=None, help="Error unless exactly N GPUs are visible."
)
@click.option(
    "--num-workers",
    metavar="N",
    default=None,
    help="DataLoader num_workers of each rank: /dev/shm must hold the batches of local "
    "ranks x N workers, and NCCL's segments.",
)
@click.option("--strict", is_flag=True, default=False, help="Exit 1 on warnings too.")
@deep_option
@output_options
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
    local_rank: str | None,
    module_device: str | None,
    batch_size: str | None,
    nproc_per_node: str | None,
    backend: str | None,
    launcher: str | None,
    deepspeed_include: str | None,
    deepspeed_exclude: str | None,
    ddp_devices: str | None,
    launched: bool,
    script_reads: str | None,
    init_rank_args: bool,
    amp: str | None,
    model_dtype: str | None,
    tf32: bool,
    expect_gpus: str | None,
    num_workers: str | None,
    strict: bool,
    deep: bool,
    quiet: bool,
    verbose: bool,
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
    ctx = click.get_current_context()
    ignored = parse_ignore(ignore)
    request = _request(ctx, locals())
    from gpudiag.core.check import run_check
    from gpudiag.machine import live_driver_asker, load_machine
    from gpudiag.render.report import render_report, report_json

    style = human_style(quiet, verbose)
    machine = load_machine(snapshot_path, torch="deep" if deep else "auto")
    try:
        report = run_check(
            machine,
            request,
            env=dict(os.environ),
            # Live: the CUDA driver confirms the rules' mapping; a snapshot has only the rules.
            driver=None if snapshot_path is not None else live_driver_asker(machine),
            # Live only: a snapshot cannot know which ports are taken on the machine now.
            port_prober=None if snapshot_path is not None else _probe_port,
        )
    except RequestError as exc:  # --set-device K0,K1 with no value for this LOCAL_RANK
        raise GpudiagInputError(exc.worded(lambda field: _spell(ctx, field))) from None
    report, dropped = report_without(report, ignored)
    if json_out is not None:
        write_json_out(json_out, report_json(report))
    say_dropped(dropped)
    if as_json:
        click.echo(report_json(report))
        say_why_failed(report.findings, strict=strict, command="check")
    else:
        click.echo(render_report(report, strict=strict, style=style))
    code = report.exit_code(strict=strict)
    click.get_current_context().exit(FAILED if code else OK)
