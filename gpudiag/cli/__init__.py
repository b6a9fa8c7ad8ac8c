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

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        # `gpudiag --bogus`: the group's own options are parsed here, before invoke.
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.ClickException as exc:
            _usage_failed(exc)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:  # a subcommand's usage error
            _usage_failed(exc)
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
        except OutputError as exc:
            # One rule (docs/cli.md): standard output that cannot be written
            # (a reader that closed the pipe, a closed stdout, a full disk) is
            # exit 2 with one line on stderr; what is still buffered is dropped
            # so that the exit itself does not fail again.
            _output_failed(exc)
        except OSError as exc:
            # Any other OSError is not about the output (issue 21: every OSError
            # was "cannot write output"): its own text, and the file it names.
            from gpudiag.render.text import safe

            shown = "" if exc.filename is None else f"{os.fsdecode(exc.filename)}: "
            _say(f"gpudiag: error: {safe(shown + (exc.strerror or str(exc)))}")
            ctx.exit(BAD_INPUT)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """click's main, with the same output rule for --help and --version."""
        if sys.stdout is None:  # started with stdout closed (`gpudiag list >&-`)
            sys.stdout = _ClosedOutput()
        _install_stdout()
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


class OutputError(OSError):
    """Standard output could not be written: the only OSError that is reported
    as ``cannot write output`` (issue 21)."""


class _ClosedOutput(io.TextIOBase):
    """Stands in for a closed stdout: every write fails, as writing to fd 1 would."""

    encoding = "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OutputError(errno.EBADF, "standard output is closed")


class _OutputBuffer(io.BufferedWriter):
    """fd 1 for the command: a failed write or flush raises :class:`OutputError`.

    Also the fix for a pipe closed under ``PYTHONUNBUFFERED=1`` (issue 21):
    unbuffered, sys.stdout writes straight to the raw file, and when the reader
    goes away in the middle of a large write the kernel returns the bytes it
    took, the text layer ignores the short count, and the command exited 0
    having delivered part of its report. A BufferedWriter writes the rest, which
    then fails with EPIPE.
    """

    def write(self, data: Any) -> int:
        try:
            return super().write(data)
        except OSError as exc:
            raise OutputError(exc.errno, exc.strerror or str(exc)) from None

    def flush(self) -> None:
        try:
            super().flush()
        except OSError as exc:
            raise OutputError(exc.errno, exc.strerror or str(exc)) from None

    def close(self) -> None:
        # Never close fd 1's file object: sys.__stdout__ shares it.
        with contextlib.suppress(OSError, ValueError):
            self.flush()


class _Stdout(io.TextIOWrapper):
    """sys.stdout over :class:`_OutputBuffer`; flushed after every write when
    Python was asked to be unbuffered, as sys.stdout itself would be."""

    def __init__(self, buffer: _OutputBuffer, like: io.TextIOWrapper, unbuffered: bool) -> None:
        super().__init__(
            buffer,
            encoding=like.encoding,
            errors=like.errors,
            line_buffering=like.line_buffering,
            write_through=True,
        )
        self._unbuffered = unbuffered

    def write(self, text: str) -> int:
        count = super().write(text)
        if self._unbuffered:
            self.flush()
        return count

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.flush()


#: The installed sys.stdout, kept alive for the life of the process.
_STDOUT: list[_Stdout] = []


def _install_stdout() -> None:
    """Route the process's real stdout through :class:`_OutputBuffer`.

    Only the real one (``sys.__stdout__``): CliRunner, pytest's capture and
    callers that replaced sys.stdout keep theirs.
    """
    stdout = sys.stdout
    if stdout is not sys.__stdout__ or not isinstance(stdout, io.TextIOWrapper):
        return
    try:
        stdout.flush()
        binary = stdout.buffer
        raw = binary if isinstance(binary, io.RawIOBase) else getattr(binary, "raw", None)
        if not isinstance(raw, io.RawIOBase):
            return
        wrapped = _Stdout(_OutputBuffer(raw), stdout, unbuffered=binary is raw)
    except OSError as exc:
        if exc.errno == errno.EBADF:  # fd 1 closed after start-up (`os.close(1)`)
            sys.stdout = _ClosedOutput()
        return
    except (ValueError, AttributeError):  # closed or detached: leave it
        return
    _STDOUT.append(wrapped)
    sys.stdout = wrapped


def _usage_failed(exc: click.ClickException) -> NoReturn:
    """A click usage error (an unknown option, an extra argument, a bad choice) as
    one escaped line and exit 2, like every other bad input (docs/cli.md).

    click's own report is three lines and echoes the user's text raw: an extra
    argument holding ``ESC ] 0 ; … BEL`` set the terminal's title (issue 21).
    A bare ``gpudiag`` still gets click's help (NoArgsIsHelpError).
    """
    if type(exc).__name__ == "NoArgsIsHelpError":
        raise exc
    from gpudiag.render.text import safe

    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if isinstance(ctx, click.Context) else ""
    _say(f"gpudiag: error: {safe(exc.format_message())}{hint}")
    sys.exit(BAD_INPUT)


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
        fd = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        if devnull != fd:  # fd 1 was closed: /dev/null took its number already
            os.dup2(devnull, fd)
            os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # CliRunner
        pass
    if isinstance(sys.stdout, (_ClosedOutput, _Stdout)):
        # What our stdout still buffers is dropped (its close() never raises), so
        # that Python's own flush at exit has nothing left to fail on.
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115


@click.group(
    cls=_Group,
    # GPUDIAG_<COMMAND>_<OPTION> sets any option (docs/cli.md, "Settings from
    # the environment"), so a site module file can set defaults for everyone.
    context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "GPUDIAG"},
    epilog="""\b
Examples:
  gpudiag list                         # every GPU as NVML/torch/GPUtil see it
  gpudiag list --visible 1,2           # the physical GPUs cuda:0, cuda:1 are
  gpudiag check --visible 1,2 --device-ids 0,1   # will DataParallel work?
  gpudiag snapshot -o node.json        # capture this machine
  gpudiag check --snapshot node.json   # replay it anywhere, no GPU needed
  gpudiag probe all --device cpu       # short real training runs

\b
Exit codes: 0 ok; 1 errors found (or warnings with --strict) or a probe
failed; 2 bad input or unwritable output; 3 a probe timed out; 130 Ctrl-C. Any
option can also come from GPUDIAG_<COMMAND>_<OPTION>, e.g.
GPUDIAG_CHECK_STRICT=1. `gpudiag explain CODE` documents a finding, `gpudiag
docs [TOPIC]` prints the manual's pages; `gpudiag --version` names the torch,
driver and Python in use.""",
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
    from gpudiag.cli.fleet_cmd import fleet
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
    main.add_command(fleet)
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
