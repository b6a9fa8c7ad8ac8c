"""``gpudiag check``: placeholder until its issue lands."""

from __future__ import annotations

import click


@click.command()
def check() -> None:
    """Not implemented yet."""
    raise click.ClickException("gpudiag check is not implemented yet")
