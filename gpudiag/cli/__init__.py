"""The ``gpudiag`` command line: a thin click layer over the library.

This layer alone decides exit codes (:mod:`gpudiag.cli.exitcodes`). Importing it
must stay cheap: no torch, no pynvml, no GPUtil at module level.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from typing import Any

import click

from gpudiag import __version__
from gpudiag.cli.exitcodes import BAD_INPUT, INTERRUPTED
from gpudiag.errors import GpudiagInputError


class _Group(click.Group):
    """Turns bad input anywhere below into one line on stderr and exit 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except GpudiagInputError as exc:
            click.echo(f"gpudiag: error: {exc}", err=True)
            ctx.exit(BAD_INPUT)
        except KeyboardInterrupt:
            # Ctrl-C: 128 + SIGINT, as shells report it (click would say 1, "errors found").
            _say("gpudiag: interrupted")
            ctx.exit(INTERRUPTED)
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise  # click's own handling of `gpudiag … | head`
            # stdout is unwritable (a full disk, /dev/full): say so in one line,
            # and drop what is still buffered so exit does not fail again.
            click.echo(f"gpudiag: error: cannot write output: {exc.strerror or exc}", err=True)
            _discard_stdout()
            ctx.exit(BAD_INPUT)


def _say(text: str) -> None:
    """One line on stderr, never raising (stderr may be closed too)."""
    with contextlib.suppress(OSError, ValueError):
        click.echo(text, err=True)


def _discard_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (CliRunner)
        pass


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  gpudiag list                                 # every GPU, as NVML/torch/GPUtil see it
  gpudiag list --visible 1,2                   # which physical GPUs cuda:0, cuda:1 are
  gpudiag check --visible 1,2 --device-ids 0,1 # will nn.DataParallel work?
  gpudiag snapshot -o node.json                # capture this machine
  gpudiag check --snapshot node.json --json    # replay it anywhere, no GPU needed
  gpudiag probe all --device cpu               # short real training runs

\b
Exit codes: 0 ok; 1 errors found (or warnings with --strict) or a probe
failed; 2 bad input; 3 a probe timed out. See docs/cli.md.""",
)
@click.version_option(__version__, prog_name="gpudiag")
def main() -> None:
    """Which physical GPUs will a PyTorch job really get, and will it work?"""


def _register() -> None:
    # Imported here, not at the top, only to keep the registration in one place;
    # none of these modules imports torch or pynvml at import time.
    from gpudiag.cli.check_cmd import check
    from gpudiag.cli.list_cmd import list_cmd
    from gpudiag.cli.probe_cmd import probe
    from gpudiag.cli.snapshot_cmd import snapshot

    main.add_command(list_cmd)
    main.add_command(snapshot)
    main.add_command(check)
    main.add_command(probe)


_register()
