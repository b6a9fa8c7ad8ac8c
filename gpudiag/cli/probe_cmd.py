"""``gpudiag probe``: placeholder until its issue lands."""

from __future__ import annotations

import click


@click.command()
def probe() -> None:
    """Not implemented yet."""
    raise click.ClickException("gpudiag probe is not implemented yet")
