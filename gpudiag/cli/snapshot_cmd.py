"""``gpudiag snapshot``: capture this machine as a JSON document."""

from __future__ import annotations

import click

from gpudiag.cli.exitcodes import OK
from gpudiag.errors import GpudiagInputError


@click.command(
    epilog="""\b
Examples:
  gpudiag snapshot -o node17.json           # capture the GPU node
  gpudiag list --snapshot node17.json       # replay it anywhere, no GPU needed
  gpudiag check --snapshot node17.json --visible 1,2 --device-ids 0,1

\b
The document's "schema" field names its format (gpudiag-snapshot/1.1, described
in snapshot.md of gpudiag's documentation). The capture records
CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, and the CUDA driver's own
enumeration order (cuda_order) when a driver is present. Unlike list and
check, it always asks torch (in a child process), as --deep does.""",
)
@click.option(
    "-o",
    "--output",
    "output",
    metavar="FILE",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write to FILE instead of stdout.",
)
@click.option(
    "--no-torch",
    is_flag=True,
    default=False,
    help="Do not ask torch (saves its import time; the snapshot's torch is null).",
)
def snapshot(output: str | None, no_torch: bool) -> None:
    """Capture this machine's GPUs, driver and torch view as JSON."""
    from gpudiag.collect import collect_snapshot
    from gpudiag.snapshot import dump_snapshot

    text = dump_snapshot(collect_snapshot(with_torch=not no_torch))
    if output is None:
        click.echo(text, nl=False)
        raise SystemExit(OK)
    try:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise GpudiagInputError(f"cannot write {output}: {exc.strerror or exc}") from None
    click.echo(f"wrote {output}", err=True)
