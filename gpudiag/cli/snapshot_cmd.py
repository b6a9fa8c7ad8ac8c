"""``gpudiag list``: placeholder."""

from __future__ import annotations

import click


@click.command()
def snapshot() -> None:
    """Not implemented yet."""
    raise click.ClickException("not implemented yet")
