"""Fuzz: options, launcher and Slurm variables, and mutated snapshots never give
a traceback or an exit status outside the documented set (docs/cli.md).

CI runs a modest number of examples; ``bench/bench_fuzz.py`` runs the same
properties with ``FUZZ_EXAMPLES=10000`` (or more).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudiag.cli import main

from .conftest import FIXTURES

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "40"))
DOCUMENTED_EXITS = {0, 1, 2}
FIXTURE_TEXTS = {p.stem: p.read_text() for p in sorted(FIXTURES.glob("*.json"))}
_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=EXAMPLES <= 100,  # CI: the same examples every run
)

# Text that has broken parsers before: Unicode digits, huge numbers, control
# characters, lone surrogates, separators.
_NASTY = st.sampled_from(
    ["", " ", "²", "٣", "0x10", "-1", "+1", "1e3", "9" * 30, "9" * 5000, "\x1b]0;pwn\x07",
     "\n", "\ud800", "0,,1", ",", "all", "GPU-", "MIG-", "nan", "inf", "0" * 19, "1_000"]
)  # fmt: skip
_TEXT = st.one_of(
    _NASTY,
    st.text(alphabet="0123456789,-+ GPUMIabcdef:²", max_size=12),
    st.text(max_size=16),
    st.integers(-(2**70), 2**70).map(str),
)
_OPTIONS = ("--visible", "--device-ids", "--output-device", "--set-device", "--module-device",
            "--batch-size", "--nproc-per-node", "--backend", "--amp", "--expect-gpus",
            "--ignore", "--order")  # fmt: skip
_LIST_OPTIONS = ("--visible", "--order", "--ignore")
_ENV_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
              "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "SLURM_PROCID",
              "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_JOB_GPUS",
              "SLURM_STEP_GPUS", "SLURM_NTASKS_PER_NODE", "SLURM_GPUS_ON_NODE",
              "SLURM_JOB_ID", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
              "GPUDIAG_CHECK_STRICT", "GPUDIAG_CHECK_DEVICE_IDS", "GPUDIAG_LIST_VISIBLE")  # fmt: skip


def _environment(values: dict[str, str]) -> dict[str, str | None]:
    env: dict[str, str | None] = {name: None for name in _ENV_NAMES}
    for name, value in values.items():
        # A real environment cannot hold NUL or lone surrogates.
        env[name] = value.replace("\0", "").encode("utf-8", "replace").decode("utf-8")
    return env


def _invoke(args: list[str], env: dict[str, str | None]) -> None:
    result = CliRunner().invoke(main, args, env=env)
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), (args, env, repr(exc), result.output)
    assert result.exit_code in DOCUMENTED_EXITS, (args, env, result.exit_code, result.output)
    if result.exit_code == 2:
        err = result.stderr.strip().splitlines()
        assert err, (args, result.output)
        assert err[0].startswith(("gpudiag: error: ", "Usage: ")), err


@_SETTINGS
@given(
    command=st.sampled_from(["list", "check"]),
    fixture=st.sampled_from(sorted(FIXTURE_TEXTS)),
    options=st.lists(st.tuples(st.sampled_from(_OPTIONS), _TEXT), max_size=4),
    flags=st.lists(st.sampled_from(["--json", "--strict"]), max_size=2, unique=True),
    env=st.dictionaries(st.sampled_from(_ENV_NAMES), _TEXT, max_size=5),
)
def test_options_and_launcher_variables(
    command: str,
    fixture: str,
    options: list[tuple[str, str]],
    flags: list[str],
    env: dict[str, str],
) -> None:
    args = [command, "--snapshot", str(FIXTURES / f"{fixture}.json")]
    allowed = _OPTIONS if command == "check" else _LIST_OPTIONS
    for name, value in options:
        if name in allowed:
            args += [name, value.replace("\0", "")]
    args += [f for f in flags if command == "check" or f == "--json"]
    _invoke(args, _environment(env))


_JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-(2**64), 2**64),
        st.floats(allow_nan=False, allow_infinity=False), _TEXT,
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)  # fmt: skip


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            out += _paths(value, (*prefix, index))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    target = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return doc


@_SETTINGS
@given(
    command=st.sampled_from([["list"], ["list", "--json"], ["check"], ["check", "--json"]]),
    fixture=st.sampled_from(sorted(FIXTURE_TEXTS)),
    data=st.data(),
)
def test_mutated_snapshots(command: list[str], fixture: str, data: st.DataObject) -> None:
    text = FIXTURE_TEXTS[fixture]
    kind = data.draw(st.sampled_from(["value", "delete", "bytes", "raw"]), label="kind")
    if kind in ("value", "delete"):
        doc = json.loads(text)
        paths = _paths(doc)
        path = data.draw(st.sampled_from(paths), label="path")
        if kind == "delete" and path:
            parent = doc
            for step in path[:-1]:
                parent = parent[step]
            del parent[path[-1]]
        else:
            doc = _set(doc, path, data.draw(_JSON_VALUES, label="value"))
        raw = json.dumps(doc).encode("utf-8", "surrogatepass")
    elif kind == "bytes":
        blob = bytearray(text.encode())
        for _ in range(data.draw(st.integers(1, 4), label="edits")):
            where = data.draw(st.integers(0, len(blob)), label="where")
            insert = data.draw(st.binary(max_size=4), label="insert")
            cut = data.draw(st.integers(0, 4), label="cut")
            blob[where : where + cut] = insert
        raw = bytes(blob)
    else:
        raw = data.draw(
            st.sampled_from(
                [b"", b"[" * 5000, b'{"a": ' * 999, b"9" * 10000, b'"\\ud800"', b"\xff\xfe",
                 text.replace('"nvml_index": 0', '"nvml_index": ' + "9" * 4400).encode()]
            ),
            label="raw",
        )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snap.json"
        path.write_bytes(raw)
        _invoke([*command, "--snapshot", str(path)], _environment({}))


@_SETTINGS
@given(env=st.dictionaries(st.sampled_from(_ENV_NAMES), _TEXT, max_size=8))
def test_probe_launcher_variables(env: dict[str, str]) -> None:
    # The probe's reading of torchrun/Slurm variables: a LaunchEnv, or bad
    # input (exit 2 in the CLI), never another exception. Pure, so cheap to fuzz.
    from gpudiag.errors import GpudiagInputError
    from gpudiag.launch.process import detect_launch
    from gpudiag.probes import runner
    from gpudiag.probes.rendezvous import rendezvous_token

    clean = {k: v for k, v in _environment(env).items() if v is not None}
    try:
        launch = detect_launch(clean)
    except GpudiagInputError as exc:
        assert "\n" not in str(exc)
        launch = None
    if launch is not None:
        assert 0 <= launch.rank < launch.world_size
    token = rendezvous_token(launch, clean)
    assert token
    saved = os.environ.copy()
    try:
        os.environ.update(clean)
        assert runner._threads_per_child(2) >= 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
