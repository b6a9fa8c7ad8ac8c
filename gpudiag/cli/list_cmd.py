"""``gpudiag list``: placeholder."""

from __future__ import annotations

import click


@click.command("list")
def list_cmd() -> None:
    """Not implemented yet."""
    raise click.ClickException("not implemented yet")
