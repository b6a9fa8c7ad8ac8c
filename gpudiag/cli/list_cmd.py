"""``gpudiag list``: every GPU as NVML, torch and GPUtil see it, and its cuda:N."""

from __future__ import annotations

import json

import click

from gpudiag.cli.exitcodes import OK
from gpudiag.cli.options import (
    deep_option,
    human_style,
    json_option,
    output_options,
    snapshot_option,
    visible_options,
)


@click.command(
    "list",
    epilog="""\b
Examples:
  gpudiag list                          # the live machine
  gpudiag list --json | jq '.gpus[] | {nvml_index, uuid, cuda_ordinals}'
  gpudiag list --visible 2,0            # cuda:0 is nvidia-smi GPU 2, cuda:1 is GPU 0
  gpudiag list --visible GPU-9e8d       # a UUID prefix, as Slurm may hand out
  gpudiag list --snapshot node.json     # a machine captured by `gpudiag snapshot`
  gpudiag list -v --deep                # full UUIDs, processes, and torch's own view

\b
The GPU column is nvidia-smi's index; the CUDA column is the cuda:N ordinal the
GPU gets under CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER (blank: hidden). "Seen
by" appears only where NVML, torch and GPUtil disagree. Without --deep, torch is
not imported (one line says so). `gpudiag explain CODE` documents a finding.
Exit status is 0 whenever a report could be made, zero GPUs and no driver
included; 2 for bad input (e.g. a malformed --snapshot file).""",
)
@snapshot_option
@visible_options
@deep_option
@output_options
@json_option
def list_cmd(
    snapshot_path: str | None,
    visible: str | None,
    order: str | None,
    deep: bool,
    quiet: bool,
    verbose: bool,
    as_json: bool,
) -> None:
    """List the GPUs, which sources see them, and their CUDA ordinals."""
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
    findings = [*inventory.findings, *resolution.findings]
    from gpudiag.core.host import host_findings

    host = host_findings(snapshot)
    if host:
        # Which of "container without GPU access", "no NVIDIA GPU", "driver missing" it
        # is: the generic "NVML unavailable" would only repeat it less precisely.
        findings = [f for f in findings if f.code != "SRC-NVML-UNAVAILABLE"] + host
    if as_json:
        doc = list_to_json(
            snapshot, inventory, resolution, resolution_to_json(resolution), findings
        )
        click.echo(json.dumps(doc, indent=2))
        raise SystemExit(OK)
    # The explicit cuda:N → GPU table when a mapping was asked for or is in force.
    explicit = spec is not None or effective_order is not None
    mapping = None
    if explicit and snapshot.gpus and style.verbosity:
        mapping = render_mapping(resolution, snapshot, style)
    text = render_list(snapshot, inventory, resolution, findings, mapping_text=mapping, style=style)
    click.echo(text, nl=False)
