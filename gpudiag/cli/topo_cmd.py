"""``gpudiag topo``: the GPU matrix as ``nvidia-smi topo -m`` shows it, for this launch."""

from __future__ import annotations

import json

import click

from gpudiag.cli.exitcodes import OK
from gpudiag.cli.options import json_option, snapshot_option, visible_options


@click.command(
    "topo",
    epilog="""\b
Examples:
  gpudiag topo                       # this machine, every GPU selected
  gpudiag topo --visible 0,1         # what a job on GPUs 0 and 1 gets
  gpudiag topo --snapshot node.json  # a machine `gpudiag snapshot` captured
  gpudiag topo --json | jq '.gpu_pairs[] | {nvml_index_a, link, p2p_read}'

\b
The matrix is nvidia-smi topo -m's: X self, NV# joined by # NVLink links,
PIX/PXB through PCIe switches, PHB through a host bridge, NODE within a NUMA
node, SYS across NUMA nodes; CPU and NUMA affinity per GPU. GPUs the launch
selects (CUDA_VISIBLE_DEVICES, or --visible) are marked * with their cuda:N.
Below: the P2P matrix (nvidia-smi topo -p2p), each GPU's PCIe link, NVLink,
fabric, IOMMU and ACS, the host's IOMMU, /dev/shm and /dev/nvidia-uvm, and the
TOPO- findings for the selected GPUs (`gpudiag explain TOPO-IOMMU`). Exit
status is 0 whenever a report could be made; 2 for bad input (e.g. a malformed
--snapshot file).""",
)
@snapshot_option
@visible_options
@json_option
def topo(snapshot_path: str | None, visible: str | None, order: str | None, as_json: bool) -> None:
    """Show how the GPUs connect (NVLink, PCIe, P2P, NUMA) and what it means for this launch."""
    from gpudiag.cli.options import human_style
    from gpudiag.core.topology import topology_findings
    from gpudiag.core.visibility import resolve_checked
    from gpudiag.machine import load_machine
    from gpudiag.render.topo import render_topo, topo_to_json

    snapshot = load_machine(snapshot_path, torch="fast")
    spec = visible if visible is not None else snapshot.cuda_visible_devices
    effective_order = order if order is not None else snapshot.cuda_device_order
    resolution = resolve_checked(spec, effective_order, snapshot, None)
    findings = topology_findings(snapshot, resolution)
    if as_json:
        click.echo(json.dumps(topo_to_json(snapshot, resolution, findings), indent=2))
        raise SystemExit(OK)
    source = "this machine" if snapshot_path is None else f"snapshot {snapshot_path}"
    style = human_style(False, False)
    click.echo(render_topo(snapshot, resolution, findings, source=source, style=style), nl=False)
