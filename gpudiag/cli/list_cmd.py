"""``gpudiag list``: every GPU as NVML, torch and GPUtil see it, and its cuda:N."""

from __future__ import annotations

import json

import click

from gpudiag.cli.exitcodes import OK
from gpudiag.cli.gate import (
    drop_ignored,
    ignore_option,
    json_out_option,
    parse_ignore,
    say_dropped,
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
from gpudiag.errors import GpudiagInputError

#: Above this many GPUs the JSON document is printed without indentation:
#: Python's C encoder does not indent, and its pure-Python one takes 5 s of a
#: 100,000-GPU list (docs/cli.md). The content is the same.
INDENT_MAX_ITEMS = 1024


def json_text(doc: object, *, items: int) -> str:
    """The JSON document, indented unless it lists more than INDENT_MAX_ITEMS items."""
    return json.dumps(doc, indent=2 if items <= INDENT_MAX_ITEMS else None)


@click.command(
    "list",
    epilog="""\b
Examples:
  gpudiag list                       # the live machine
  gpudiag list --json | jq '.gpus[] | {nvml_index, uuid, cuda_ordinals}'
  gpudiag list --visible 2,0         # cuda:0 is nvidia-smi GPU 2, cuda:1 0
  gpudiag list --visible GPU-9e8d    # a UUID prefix, as Slurm may hand out
  gpudiag list --snapshot node.json  # a machine `gpudiag snapshot` captured
  gpudiag list -v --deep             # full UUIDs, processes, torch's own view

\b
The GPU column is nvidia-smi's index; the CUDA column is the cuda:N ordinal
the GPU gets under CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER (blank: hidden).
"Seen by" appears only where NVML, torch and GPUtil disagree. Without --deep,
torch is not imported (one line says so). `gpudiag explain CODE` documents a
finding. Exit status is 0 whenever a report could be made, zero GPUs and no
driver included; 2 for bad input (e.g. a malformed --snapshot file).""",
)
@snapshot_option
@visible_options
@deep_option
@output_options
@json_option
@json_out_option
@ignore_option
def list_cmd(
    snapshot_path: str | None,
    visible: str | None,
    order: str | None,
    deep: bool,
    quiet: bool,
    verbose: bool,
    as_json: bool,
    json_out: str | None = None,
    ignore: tuple[str, ...] = (),
) -> None:
    """List the GPUs, which sources see them, and their CUDA ordinals."""
    ignored = parse_ignore(ignore)
    if visible is not None:
        # The same bound as check's --visible (issue 21, gpudiag/core/bounds.py).
        from gpudiag.core.bounds import visible_problem

        problem = visible_problem(visible)
        if problem is not None:
            raise GpudiagInputError(f"{spelled(click.get_current_context(), 'visible')} {problem}")
    from gpudiag.core.inventory import build_inventory
    from gpudiag.core.visibility import resolve_checked
    from gpudiag.machine import live_driver_asker, load_machine
    from gpudiag.render.inventory import list_to_json, render_list
    from gpudiag.render.mapping import render_mapping, resolution_to_json

    style = human_style(quiet, verbose)
    snapshot = load_machine(snapshot_path, torch="deep" if deep else "fast")
    spec = visible if visible is not None else snapshot.cuda_visible_devices
    effective_order = order if order is not None else snapshot.cuda_device_order
    # Live: the CUDA driver confirms the rules' mapping; a snapshot has only the rules.
    driver = None if snapshot_path is not None else live_driver_asker(snapshot)
    resolution = resolve_checked(spec, effective_order, snapshot, driver)
    inventory = build_inventory(snapshot, resolution)
    from gpudiag.core.host import with_host_findings

    findings = with_host_findings([*inventory.findings, *resolution.findings], snapshot)
    findings, dropped = drop_ignored(findings, ignored)
    if as_json or json_out is not None:
        doc = list_to_json(
            snapshot, inventory, resolution, resolution_to_json(resolution), findings
        )
        doc_text = json_text(doc, items=len(snapshot.gpus))
        write_json_out(json_out, doc_text)
        say_dropped(dropped)
        if as_json:
            click.echo(doc_text)
            raise SystemExit(OK)
    else:
        say_dropped(dropped)
    # The explicit cuda:N → GPU table when a mapping was asked for or is in force.
    explicit = spec is not None or effective_order is not None
    mapping = None
    if explicit and snapshot.gpus and style.verbosity:
        mapping = render_mapping(resolution, snapshot, style)
    text = render_list(snapshot, inventory, resolution, findings, mapping_text=mapping, style=style)
    click.echo(text, nl=False)
