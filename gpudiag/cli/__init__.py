"""The ``gpudiag`` command line: a thin click layer over the library.

This layer alone decides exit codes (:mod:`gpudiag.cli.exitcodes`). Importing it
must stay cheap: no torch, no pynvml, no GPUtil at module level.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from typing import Any, NoReturn

import click

from gpudiag.cli.exitcodes import BAD_INPUT, INTERRUPTED
from gpudiag.cli.options import launcher_local_rank_option
from gpudiag.cli.version import print_version
from gpudiag.errors import GpudiagInputError


class _Group(click.Group):
    """Turns bad input anywhere below into one line on stderr and exit 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except GpudiagInputError as exc:
            from gpudiag.render.text import safe  # escaped: the message may echo input

            click.echo(f"gpudiag: error: {safe(str(exc))}", err=True)
            ctx.exit(BAD_INPUT)
        except UnicodeEncodeError:
            # A value that is not text: Python decodes undecodable bytes in argv
            # and the environment to lone surrogates (PEP 383), which no output
            # can print. The arguments are checked in main(); this is for the
            # environment (e.g. SLURM_JOB_GPUS=$'\xff').
            _say("gpudiag: error: an input value is not valid UTF-8 text")
            ctx.exit(BAD_INPUT)
        except KeyboardInterrupt:
            # Ctrl-C: 128 + SIGINT, as shells report it (click would say 1, "errors found").
            _say("gpudiag: interrupted")
            ctx.exit(INTERRUPTED)
        except OSError as exc:
            # One rule (docs/cli.md): standard output that cannot be written
            # (a reader that closed the pipe, a closed stdout, a full disk) is
            # exit 2 with one line on stderr; what is still buffered is dropped
            # so that the exit itself does not fail again. An OSError that names
            # a file is about that file, not the output (issue 21): its own text.
            if exc.filename is not None:
                shown = os.fsdecode(exc.filename)
                _say(f"gpudiag: error: {shown}: {exc.strerror or exc}")
                ctx.exit(BAD_INPUT)
            _output_failed(exc)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """click's main, with the same output rule for --help and --version."""
        if sys.stdout is None:  # started with stdout closed (`gpudiag list >&-`)
            sys.stdout = _ClosedOutput()
        argv = kwargs.get("args", args[0] if args else None)
        for arg in sys.argv[1:] if argv is None else argv:
            if isinstance(arg, str) and not _is_text(arg):
                shown = arg.encode("utf-8", "backslashreplace").decode("ascii", "replace")
                _say(f"gpudiag: error: argument {shown[:60]!r} is not valid UTF-8 text")
                sys.exit(BAD_INPUT)
        try:
            result = super().main(*args, **kwargs)
        except OSError as exc:  # --help/--version into /dev/full: click re-raises
            _output_failed(exc)
        except SystemExit as exc:
            # click answers a broken pipe outside a command (--help | true)
            # with exit 1 and a silenced stdout; the rule says 2.
            if exc.code == 1 and "PacifyFlushWrapper" in type(sys.stdout).__name__:
                _output_failed(OSError(errno.EPIPE, os.strerror(errno.EPIPE)))
            raise
        return result


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _ClosedOutput(io.TextIOBase):
    """Stands in for a closed stdout: every write fails, as writing to fd 1 would."""

    encoding = "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


def _output_failed(exc: OSError) -> NoReturn:
    _say(f"gpudiag: error: cannot write output: {exc.strerror or exc}")
    _discard_stdout()
    sys.exit(BAD_INPUT)


def _say(text: str) -> None:
    """One line on stderr, never raising (stderr may be closed too)."""
    with contextlib.suppress(OSError, ValueError):
        click.echo(text, err=True)


def _discard_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # CliRunner
        pass
    if isinstance(sys.stdout, _ClosedOutput):
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115


@click.group(
    cls=_Group,
    # GPUDIAG_<COMMAND>_<OPTION> sets any option (docs/cli.md, "Settings from
    # the environment"), so a site module file can set defaults for everyone.
    context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "GPUDIAG"},
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
failed; 2 bad input or unwritable output; 3 a probe timed out; 130 Ctrl-C.
Any option can also come from GPUDIAG_<COMMAND>_<OPTION>, e.g.
GPUDIAG_CHECK_STRICT=1. `gpudiag explain CODE` documents a finding,
`gpudiag docs [TOPIC]` prints the manual's pages; `gpudiag --version` names
the torch, driver and Python in use.""",
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=print_version,
    help="Show gpudiag's version and the Python, torch and NVIDIA driver it runs with.",
)
@launcher_local_rank_option
def main() -> None:
    """Which physical GPUs will a PyTorch job really get, and will it work?"""


def _register() -> None:
    # Imported here, not at the top, only to keep the registration in one place;
    # none of these modules imports torch or pynvml at import time.
    from gpudiag.cli.check_cmd import check
    from gpudiag.cli.docs_cmd import docs
    from gpudiag.cli.explain_cmd import explain
    from gpudiag.cli.lint_cmd import lint
    from gpudiag.cli.list_cmd import list_cmd
    from gpudiag.cli.probe_cmd import probe
    from gpudiag.cli.snapshot_cmd import snapshot
    from gpudiag.cli.topo_cmd import topo

    main.add_command(list_cmd)
    main.add_command(snapshot)
    main.add_command(check)
    main.add_command(probe)
    main.add_command(explain)
    main.add_command(lint)
    main.add_command(docs)
    main.add_command(topo)
    for command in main.commands.values():
        _name_envvars(command)


def _name_envvars(command: click.Command) -> None:
    """GPUDIAG_<COMMAND>_<OPTION>, spelled like the option (``--device-ids`` ->
    GPUDIAG_CHECK_DEVICE_IDS), not like its Python parameter (``as_json``),
    which is what click's auto_envvar_prefix alone would use."""
    for param in command.params:
        if not isinstance(param, click.Option) or param.envvar is not None:
            continue
        longs = [o for o in param.opts if o.startswith("--")]
        if not longs or param.name in ("help",):
            continue
        option = longs[0][2:].upper().replace("-", "_")
        param.envvar = f"GPUDIAG_{(command.name or '').upper()}_{option}"


_register()
