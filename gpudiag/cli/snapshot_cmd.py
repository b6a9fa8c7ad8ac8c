"""``gpudiag snapshot``: capture this machine as a JSON document."""

from __future__ import annotations

import click

from gpudiag.cli.exitcodes import OK
from gpudiag.cli.files import write_file_atomically


@click.command(
    epilog="""\b
Examples:
  gpudiag snapshot -o node17.json        # capture the GPU node
  gpudiag list --snapshot node17.json    # replay it anywhere, no GPU needed
  gpudiag check --snapshot node17.json --visible 1,2 --device-ids 0,1

\b
The document's "schema" field names its format (gpudiag-snapshot/1.4,
described by `gpudiag docs snapshot`). The capture records
CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, and the CUDA driver's own
enumeration order (cuda_order) when a driver is present. Unlike list and
check, it always asks torch (in a child process), as --deep does.""",
)
@click.option(
    "-o",
    "--output",
    "output",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write to FILE instead of stdout: atomically (a temporary file in FILE's "
    "directory, renamed into place), so a failed write leaves the old FILE intact. "
    "A symbolic link at FILE is replaced, never followed.",
)
@click.option(
    "--no-torch",
    is_flag=True,
    default=False,
    help="Do not ask torch (saves its import time; the snapshot's torch is null).",
)
@click.option(
    "--redact",
    is_flag=True,
    default=False,
    help="Leave out the host name and every GPU process's PID and name (null), so "
    "the snapshot can go into a public bug report.",
)
def snapshot(output: str | None, no_torch: bool, redact: bool = False) -> None:
    """Capture this machine's GPUs, driver and torch view as JSON."""
    from gpudiag.collect import collect_snapshot
    from gpudiag.snapshot import dump_snapshot, redact_snapshot

    captured = collect_snapshot(with_torch=not no_torch)
    import os

    from gpudiag.snapshot.override import ENV, apply_override

    if os.environ.get(ENV):
        # Emulated nodes and tests (docs/snapshot.md): recorded in sources.override.
        captured = apply_override(captured, os.environ[ENV])
    text = dump_snapshot(redact_snapshot(captured) if redact else captured)
    if output is None:
        click.echo(text, nl=False)
        raise SystemExit(OK)
    write_file_atomically(output, text)
    from gpudiag.render.text import esc

    # Escaped, not shortened (issue 21: a name holding U+202E reached the terminal raw).
    click.echo(f"wrote {esc(output, limit=4096)}", err=True)
