"""Helpers for the pinned-interface tests (golden transcripts, JSON schemas): one
controlled environment for every in-process CLI run, so output never depends on the
machine, its GPUs, or launcher variables of the shell that runs pytest."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from click.testing import CliRunner

from gpudiag.cli import main

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("GPUDIAG_UPDATE_GOLDEN") == "1"

# Kept from the caller's environment: nothing gpudiag reads as a fact. Everything else
# (CUDA_*, RANK, WORLD_SIZE, LOCAL_*, MASTER_*, SLURM_*, OMPI_*, PMI_*, HOROVOD_*,
# GPUDIAG_* settings, NO_COLOR, COLUMNS, KINETO_USE_DAEMON, NVIDIA_*...) is removed for
# the run: a blacklist would miss the next launcher's variables.
_KEPT = frozenset({"PATH", "HOME", "TMPDIR", "TEMP", "TMP", "LANG", "LC_ALL", "SYSTEMROOT"})

# Human output is laid out for a 100-column terminal (docs/cli.md "The terminal"); colour
# off (CliRunner's stdout is not a terminal anyway, NO_COLOR makes it explicit).
_FIXED = {"COLUMNS": "100", "NO_COLOR": "1"}


def controlled_env(extra: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """CliRunner's ``env``: None removes a variable for the run, a string sets it."""
    env: dict[str, str | None] = {k: None for k in os.environ if k not in _KEPT}
    env.update(_FIXED)
    env.update(extra or {})
    return env


def run_cli(
    args: Sequence[str], extra_env: Mapping[str, str] | None = None
) -> tuple[int, str, str]:
    """Run ``gpudiag ARGS`` in process under the controlled environment."""
    result = CliRunner().invoke(main, list(args), env=controlled_env(extra_env))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def transcript_entry(args: Sequence[str], extra_env: Mapping[str, str] | None = None) -> str:
    """One invocation as it reads in a golden transcript: command, exit status, output."""
    prefix = "".join(f"{k}={shlex.quote(v)} " for k, v in (extra_env or {}).items())
    code, out, err = run_cli(args, extra_env)
    text = f"$ {prefix}gpudiag {shlex.join(args)}\n[exit {code}]\n{out}"
    if err:
        text += f"[stderr]\n{err}"
    return text


def assert_golden(name: str, text: str) -> None:
    """Compare with ``tests/golden/NAME.txt``; GPUDIAG_UPDATE_GOLDEN=1 rewrites it."""
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file {path.name} (GPUDIAG_UPDATE_GOLDEN=1 writes it)"
    assert text == path.read_text(), f"golden output {path.name} changed (GPUDIAG_UPDATE_GOLDEN=1)"
