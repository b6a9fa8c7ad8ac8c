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

from .conftest import FIXTURES

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

# A torchrun worker's variables, given explicitly (the controlled environment has none).
TORCHRUN_RANK1 = {
    "RANK": "1",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "2",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
    "TORCHELASTIC_RUN_ID": "none",
}

# (args, launcher variables) per check case; the same set on every fixture, so each
# fixture's transcript shows how that machine answers the main areas.
CHECK_CASES: list[tuple[list[str], dict[str, str]]] = [
    ([], {}),
    (["-v"], {}),
    (["-q"], {}),
    # DataParallel: the seed case, ids that are cuda ordinals, and physical ids.
    (["--visible", "1,2", "--device-ids", "0,1"], {}),
    (["--visible", "1,2", "--device-ids", "1,2"], {}),
    (["--device-ids", "all", "--batch-size", "3", "--amp", "bf16"], {}),
    (["--visible", "", "--device-ids", "0"], {}),
    # DDP before a launch, and inside one.
    (["--nproc-per-node", "2", "--backend", "nccl"], {}),
    (["--nproc-per-node", "4", "--backend", "gloo", "--order", "PCI_BUS_ID"], {}),
    (["--set-device", "0,0"], {}),
    ([], TORCHRUN_RANK1),
    # The gates.
    (["--expect-gpus", "2"], {}),
    (["--expect-gpus", "8", "--strict"], {}),
    (["--visible", "0,0", "--strict"], {}),
]

# Scripts from tests/fixtures/lint/: positive ones of each area and negative ones modelled
# on tutorials; the second item feeds the script to check on a fixture (--check).
LINT_SCRIPTS: list[tuple[str, str | None]] = [
    ("pos_dp_physical_ids_under_mask", "a100x8"),
    ("pos_ddp_no_set_device", "mixed4"),
    ("pos_scaler_bf16", "v100x8"),
    ("pos_amp_deprecated", None),
    ("pos_cvd_after_is_available", None),
    ("pos_master_port_per_rank", None),
    ("pos_syntax_error", None),
    ("neg_dp_tutorial", "a100x8"),
    ("neg_ddp_local_rank", None),
    ("neg_nanogpt_amp", None),
]


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


# A script whose mask leaves cuInit failing: lint --check then carries check's
# cuinit_error (lint/report.py reads it from check's document with .get(), so only a
# case where it is set shows that it arrives). Written here, not in tests/fixtures/lint/,
# whose scripts tests/test_lint_cases.py reads against their `# expect[...]` comments.
DUPLICATE_MASK_SCRIPT = """import os

os.environ["CUDA_VISIBLE_DEVICES"] = "0,0"

import torch  # noqa: E402

model = torch.nn.DataParallel(torch.nn.Linear(2, 2).cuda())
"""


def write_duplicate_mask_case(directory: Path) -> None:
    """``dup_mask.py`` and ``a100x8.json`` in ``directory`` (run from there)."""
    (directory / "dup_mask.py").write_text(DUPLICATE_MASK_SCRIPT)
    (directory / "a100x8.json").write_text((FIXTURES / "a100x8.json").read_text())
