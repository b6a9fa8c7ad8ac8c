"""Option decorators shared by the commands, so each is spelled once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

ORDER_CHOICES = ("PCI_BUS_ID", "FASTEST_FIRST")


def snapshot_option(func: F) -> F:
    """``--snapshot FILE``: run against a saved machine instead of live hardware."""
    return click.option(
        "--snapshot",
        "snapshot_path",
        metavar="FILE",
        type=click.Path(dir_okay=False),
        default=None,
        help="Use the machine described by FILE (from `gpudiag snapshot`) "
        "instead of the live hardware. Its env (CUDA_VISIBLE_DEVICES, "
        "CUDA_DEVICE_ORDER) applies unless --visible/--order are given.",
    )(func)


def json_option(func: F) -> F:
    """``--json``: machine-readable output on stdout."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        default=False,
        help="Print one JSON document on stdout instead of the human table.",
    )(func)


class _SpelledOption(click.Option):
    """An option whose click-side errors (a bad ``--order`` choice) name the
    ``GPUDIAG_*`` variable when the value came from it, like :func:`spelled`."""

    def get_error_hint(self, ctx: click.Context | None) -> str:
        if ctx is not None and self.name is not None:
            return f"'{spelled(ctx, self.name)}'"
        return super().get_error_hint(ctx)


def _visible_pair(func: F, *, spec_help: str, order_help: str) -> F:
    func = click.option(
        "--order",
        cls=_SpelledOption,
        metavar="ORDER",
        type=click.Choice(ORDER_CHOICES, case_sensitive=True),
        default=None,
        help=order_help,
    )(func)
    return click.option("--visible", metavar="SPEC", default=None, help=spec_help)(func)


def visible_options(func: F) -> F:
    """``--visible SPEC`` and ``--order ORDER``: evaluate a CUDA_VISIBLE_DEVICES value."""
    return _visible_pair(
        func,
        spec_help="Evaluate as if CUDA_VISIBLE_DEVICES=SPEC, e.g. '1,2', "
        "'GPU-9e8d', 'MIG-…'. Use --visible '' for 'no GPU visible'.",
        order_help="Evaluate as if CUDA_DEVICE_ORDER=ORDER (PCI_BUS_ID = nvidia-smi "
        "order; FASTEST_FIRST = CUDA's default).",
    )


def child_visible_options(func: F) -> F:
    """``--visible``/``--order`` for commands that start children with those values."""
    return _visible_pair(
        func,
        spec_help="Run the children with CUDA_VISIBLE_DEVICES=SPEC (this process "
        "never sets it), e.g. '1,2', 'GPU-9e8d', 'MIG-…'.",
        order_help="Run the children with CUDA_DEVICE_ORDER=ORDER (PCI_BUS_ID = "
        "nvidia-smi order; FASTEST_FIRST = CUDA's default).",
    )


def output_options(func: F) -> F:
    """``-q``/``-v``: how much human output (JSON is unaffected)."""
    func = click.option(
        "-v",
        "--verbose",
        is_flag=True,
        default=False,
        help="More detail: full UUIDs, processes, every probe check.",
    )(func)
    return click.option(
        "-q",
        "--quiet",
        is_flag=True,
        default=False,
        help="Only the verdict line and the errors.",
    )(func)


def deep_option(func: F) -> F:
    """``--deep``: import torch in a child for what only torch can tell."""
    return click.option(
        "--deep",
        is_flag=True,
        default=False,
        help="Also import torch (in a child process, seconds): its own device count, arch "
        "list and CUDA start-up errors. Without it torch's version and CUDA build are read "
        "from its installed files.",
    )(func)


def human_style(quiet: bool, verbose: bool) -> Any:
    """The :class:`gpudiag.render.text.Style` for this terminal: its width
    (``COLUMNS`` first), colour on a TTY unless ``NO_COLOR`` is set, and -q/-v.

    Raises:
        GpudiagInputError: -q and -v together.
    """
    from gpudiag.errors import GpudiagInputError
    from gpudiag.render.text import Style, colour_wanted, terminal_width

    if quiet and verbose:
        raise GpudiagInputError("-q/--quiet and -v/--verbose cannot be used together")
    import sys

    try:
        isatty = sys.stdout.isatty()
    except (AttributeError, ValueError):  # a closed or stand-in stream
        isatty = False
    return Style(
        width=terminal_width(),
        colour=colour_wanted(isatty),
        verbosity=0 if quiet else 2 if verbose else 1,
    )


def launcher_local_rank_option(func: F) -> F:
    """``--local_rank=N``: DeepSpeed's launcher puts it right after the script or
    module in every worker's command (deepspeed/launcher/launch.py, unless
    ``--no_local_rank``), so ``gpudiag --local_rank=0 probe ddp``. Accepted and not
    used: the LOCAL_RANK variable DeepSpeed also sets decides (docs/launchers.md)."""
    return click.option(
        "--local_rank",
        "--local-rank",
        type=int,
        default=None,
        hidden=True,
        expose_value=False,
    )(func)


def spelled(ctx: click.Context, name: str) -> str:
    """How the user gave parameter ``name``: its ``GPUDIAG_*`` variable when the value
    came from the environment (docs/cli.md, "Settings from the environment"), else its
    first long option (``--amp`` for ``--autocast-dtype`` too)."""
    from click.core import ParameterSource

    param = next((p for p in ctx.command.params if p.name == name), None)
    if param is None:
        return name
    if ctx.get_parameter_source(name) is ParameterSource.ENVIRONMENT:
        envvar = getattr(param, "envvar", None)
        if isinstance(envvar, str):
            return envvar
        if isinstance(envvar, (list, tuple)) and envvar:
            return str(envvar[0])
    longs = [o for o in param.opts if o.startswith("--")]
    return longs[0] if longs else name
