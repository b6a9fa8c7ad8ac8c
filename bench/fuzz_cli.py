"""Fuzz every gpudiag command with generated hostile invocations (issue 21).

    .venv/bin/python bench/fuzz_cli.py                      # 10,000 in process, 300 as processes
    .venv/bin/python bench/fuzz_cli.py -n 2000 --seed 7 --subprocess 50
    .venv/bin/python bench/fuzz_cli.py --json fuzz.json     # also a machine-readable report

Each invocation is one command (``list``, ``check``, ``snapshot``, ``explain``,
``lint``, ``probe``, or the bare group with ``--help``/``--version``) with random
option names and values: huge, negative and Unicode-digit numbers, control
characters and ANSI escapes, empty and long strings, non-UTF-8 text, bad paths,
``/dev/null``, directories, FIFOs, the snapshot fixtures, and random
``GPUDIAG_*`` and launcher variables. ``probe`` always carries one invalid value
(``--timeout 0``, ``--nproc 0``…) so no probe ever trains.

Runs go in process through click's CliRunner (fast; a 60 s alarm stops a hang),
and a sample as real processes (``python -m gpudiag``, 60 s timeout). Reported:

- ``traceback``: an exception escaped, or ``Traceback`` in the output;
- ``exit``: an exit status outside {0, 1, 2, 3, 130} (docs/cli.md);
- ``slow``: a run over 10 s; ``hang``: the alarm or the timeout fired;
- ``message``: exit 2 without a ``gpudiag: error:`` first line on stderr;
- ``raw-control``: a raw control character (ESC, BEL, CSI, bidi override) in the output.

Every file the runs may write lies in a temporary "world" directory (also the
working directory); options that write (``-o``, ``--json-out``) only ever get
paths from there or special files (which gpudiag must refuse; the harness stops
if ``/dev/null`` ever stops being a character device). The world is kept, and its
path printed, when problems were found, so each reported command line reproduces.
Exit status: 1 when any problem was found, else 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
FIXTURES_LIST = sorted(str(p) for p in FIXTURES.glob("*.json"))
DOCUMENTED_EXITS = frozenset({0, 1, 2, 3, 130})
SLOW_S = 10.0
HANG_S = 60.0
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e", "\x00")

#: Variables the harness clears first, so the machine's own never leak in.
_CLEARED_PREFIXES = (
    "GPUDIAG_", "SLURM_", "OMPI_", "PMI_", "PMIX_", "MPI_", "HOROVOD_", "PET_", "TORCHELASTIC_",
    "ACCELERATE_", "CROSS_", "MV2_", "I_MPI_", "DEEPSPEED_",
)  # fmt: skip
_CLEARED = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
    "MASTER_PORT", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NO_COLOR", "COLUMNS",
    "LOCAL_SIZE", "NODE_RANK",
)  # fmt: skip


@dataclass(frozen=True)
class Case:
    """One invocation: ``gpudiag ARGS`` with ENV added to a clean environment;
    ``command`` names the command generated (``(group)`` for the bare group)."""

    command: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    #: A world file fed to standard input (``lint -``), or None for an empty stdin.
    stdin: str | None = None

    def shell(self) -> str:
        """The command line, for a shell (non-UTF-8 bytes as $'\\xff')."""
        env = " ".join(f"{k}={_quote(v)}" for k, v in self.env)
        line = " ".join(_quote(a) for a in self.args)
        feed = f" < {_quote(self.stdin)}" if self.stdin is not None else ""
        return (f"env {env} " if env else "") + f"gpudiag {line}{feed}"

    def input(self) -> bytes:
        return Path(self.stdin).read_bytes() if self.stdin is not None else b""


def _quote(text: str) -> str:
    if len(text) > 200:
        return f'"$(python3 -c \'print({text[:20]!r}, end="")\')"…[{len(text)} chars]'
    if text.isprintable() and text.isascii():
        return shlex.quote(text)
    data = text.encode("utf-8", "surrogateescape")
    return (
        "$'"
        + "".join(chr(b) if 32 <= b < 127 and chr(b) not in "'\\" else f"\\x{b:02x}" for b in data)
        + "'"
    )


@dataclass
class Outcome:
    case: Case
    code: int | None
    seconds: float
    problems: list[str]
    tail: str = ""
    where: str = "in-process"


@dataclass
class World:
    """The files the runs read and write, in one temporary directory."""

    root: Path
    snapshots: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    lint_paths: list[str] = field(default_factory=list)
    pathological: list[str] = field(default_factory=list)
    #: --config values ([tool.gpudiag.lint] tables, good and hostile) and stdin inputs.
    configs: list[str] = field(default_factory=list)
    stdin_inputs: list[str] = field(default_factory=list)


def make_world(root: Path, *, pathological: bool = True) -> World:
    """Create the world's files under ``root`` (which must exist and be empty)."""
    w = World(root)
    fixtures = FIXTURES_LIST
    base = json.loads((FIXTURES / "a100x8.json").read_text())

    def put(name: str, data: str | bytes) -> str:
        path = root / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        return str(path)

    (root / "dir").mkdir()
    (root / "dir" / "a.py").write_text("import torch\nmodel = torch.nn.DataParallel(m)\n")
    os.mkfifo(root / "fifo")
    os.mkfifo(root / "fifo.py")
    os.symlink("/dev/null", root / "link-null")
    os.symlink("/dev/zero", root / "link-zero.py")
    os.symlink(root / "gone", root / "link-dangling")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "sock"))
    readonly = put("ro.json", "{}\n")
    os.chmod(readonly, 0o444)
    copy = put("snap-copy.json", json.dumps(base))
    big = dict(base)
    big["gpus"] = [
        {**base["gpus"][i % len(base["gpus"])], "nvml_index": i,
         "uuid": f"GPU-{i:08x}-0000-0000-0000-000000000000", "pci_bus_id": f"{i:08X}:00:00.0"}
        for i in range(1500)
    ]  # fmt: skip
    hostile = json.loads(json.dumps(base))
    hostile["gpus"][0]["name"] = "A100\x1b]0;pwn\x07\u202e\n| forged |"
    hostile["hostname"] = "\x1b[2J" + "h" * 500
    w.snapshots = [
        *fixtures, copy, put("hostile.json", json.dumps(hostile)), put("big.json", json.dumps(big)),
        put("broken.json", '{"schema": "gpudiag-snapshot/1.1", "gpus": ['),
        put("empty.json", ""), put("nul.json", b"\x00" * 64), put("latin1.json", b'{"\xff": 1}'),
        put("deep.json", "[" * 5000 + "]" * 5000),
        put("hugenum.json", '{"gpus": [' + "9" * 6000 + "]}"),
        put("not-a-snapshot.json", '{"schema": "other/1"}'), readonly,
        str(root / "dir"), str(root / "fifo"), str(root / "link-null"), str(root / "link-dangling"),
        str(root / "sock"), "/dev/null", "/dev/zero", str(root / "missing.json"), "", "-",
        "x" * 300, "bad\x1b[2J\udcff.json",
    ]  # fmt: skip
    # Output targets: only paths in the world, or special files gpudiag must refuse.
    put("existing.json", "{}\n")
    w.outputs = [
        str(root / "out.json"), str(root / "existing.json"), readonly, copy,
        str(root / "dir"), str(root / "fifo"), str(root / "link-null"), str(root / "link-dangling"),
        str(root / "sock"), str(root / "missing-dir" / "x.json"), str(root / ("n" * 300)),
        "/dev/null", "/dev/full", "/dev/stdout", "/proc/self/fd/1", "", "-", "rel-out.json",
        "esc\x1b]0;t\x07.json", "bad\udcff.json",
    ]  # fmt: skip
    lint_dir = root / "lintdir"
    lint_dir.mkdir()
    for src in sorted((FIXTURES / "lint").glob("*.py.txt"))[:10]:
        shutil.copy(src, lint_dir / src.name.removesuffix(".txt"))
    w.lint_paths = [
        str(lint_dir), *sorted(str(p) for p in lint_dir.glob("*.py"))[:4],
        put("ok.py", "import torch\nx = torch.zeros(1).cuda(1)\n"),
        put("empty.py", ""), put("syntax.py", "def (:\n"), put("nul.py", b"x = 1\x00\n"),
        put("latin1.py", b"# \xff\xfe\nx = '\xe9'\n"),
        put("coding.py", "# -*- coding: undefined -*-\n"),
        put("bom.py", b"\xef\xbb\xbfimport torch\n"), put("esc\x1b[2J.py", "import os\n"),
        put("ignore.py", "import torch  # gpudiag: ignore[\n"),
        str(root / "dir"), str(root / "fifo.py"), str(root / "link-zero.py"), str(root / "sock"),
        "/dev/null", str(root / "missing.py"), "-", "", "x" * 5000,
    ]  # fmt: skip
    # issue 17: a table the runs in lintdir find, and --config files, good and hostile
    (lint_dir / "pyproject.toml").write_text(
        '[tool.gpudiag.lint]\nexclude = ["neg_b*"]\n'
        'per-file-ignores = { "neg_c*" = ["LINT-AMP"], "!neg_*" = ["LINT-CVD"] }\n'
    )
    cfg = root / "cfg"
    cfg.mkdir()
    os.mkfifo(cfg / "fifo.toml")
    w.configs = [
        str(lint_dir / "pyproject.toml"),
        put("cfg/ok.toml", '[tool.gpudiag.lint]\nselect = ["LINT"]\noutput-format = "sarif"\n'
            'strict = true\nforce-exclude = true\nexclude = ["*.py"]\n'),
        put("cfg/unknown-key.toml", '[tool.gpudiag.lint]\nselec = ["LINT"]\n'),
        put("cfg/bad-code.toml", '[tool.gpudiag.lint]\nignore = ["LINT-NOPE\\u001b[2J"]\n'),
        put("cfg/bad-type.toml", '[tool.gpudiag.lint]\nper-file-ignores = 3\n'),
        put("cfg/not-toml.toml", "[tool.gpudiag.lint]\nselect = [\n"),
        put("cfg/no-table.toml", "[tool.ruff]\nline-length = 1\n"),
        put("cfg/latin1.toml", b'[tool.gpudiag.lint]\nselect = ["\xff"]\n'),
        put("cfg/deep.toml", "[tool.gpudiag.lint]\nx = " + "[" * 3000 + "]" * 3000 + "\n"),
        put("cfg/huge.toml", "[tool.gpudiag.lint]\n" + "#" * (1024 * 1024 + 1)),
        str(cfg / "fifo.toml"), str(cfg), "/dev/null", "/dev/zero", str(root / "missing.toml"),
        "", "-",
    ]  # fmt: skip
    w.stdin_inputs = [
        put("stdin-ok.py", "import torch\nscaler = torch.cuda.amp.GradScaler()\n"),
        put("stdin-syntax.py", "def (:\n"), put("stdin-empty.py", ""),
        put("stdin-latin1.py", b"# -*- coding: latin-1 -*-\nx = '\xe9'\n"),
        put("stdin-nul.py", b"x = 1\x00\n"), put("stdin-bad.py", b"x = '\xff\x1b[2J'\n"),
        put("stdin-big.py", b"#" * (4 * 1024 * 1024 + 1)),
    ]  # fmt: skip
    if pathological:
        w.pathological = _pathological_lint(root)
    return w


def _pathological_lint(root: Path) -> list[str]:
    """Valid Python that broke lint in issue 21 (recursion, quadratic time)."""
    out = []
    cases = {
        "plus400.py": "x = " + "+".join(["a"] * 400) + "\n",
        "elif490.py": "if x == 0:\n    pass\n"
        + "".join(f"elif x == {i}:\n    pass\n" for i in range(1, 490)),
        "attr400.py": "y = a" + ".b" * 400 + "\n",
        "mask_uses.py": "import os, torch\n"
        + "".join(f'os.environ["CUDA_VISIBLE_DEVICES"] = "{i % 4}"\n' for i in range(4000))
        + "".join(f't{i} = torch.zeros(1, device="cuda:{i % 4}")\n' for i in range(4000)),
        "rebind.py": "import torch\n"
        + "".join(
            f"m{i} = torch.nn.Linear(1, 1)\nm{i}.weight.data = m{i}.bias\nm = m{i}.cuda()\n"
            for i in range(16000)
        ),
    }
    for name, text in cases.items():
        (root / name).write_text(text)
        out.append(str(root / name))
    # 1,200 nested folders (lint's walk recursed): made level by level, since
    # pathlib's and os's makedirs recurse themselves.
    deep = root / "deep"
    deep.mkdir()
    fd = os.open(deep, os.O_RDONLY)
    try:
        for _ in range(DEEP_LEVELS):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(os.open("x.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    out.append(str(deep))
    return out


DEEP_LEVELS = 1200


def remove_world(root: Path) -> None:
    """Remove the world (shutil.rmtree recurses: the deep folder is taken apart first)."""
    deep = str(root / "deep")
    if os.path.isdir(deep):
        with contextlib.suppress(OSError):
            os.unlink(deep + "/d" * DEEP_LEVELS + "/x.py")
        for level in range(DEEP_LEVELS, -1, -1):
            with contextlib.suppress(OSError):
                os.rmdir(deep + "/d" * level)
    shutil.rmtree(root, ignore_errors=True)


# --- values ------------------------------------------------------------------

_NUMBERS = [
    "0", "1", "-1", "2", "7", "8", "9", "-2", "4095", "4096", "4097", "65536", "2147483647",
    "2147483648", "999999999999999999", "9" * 19, "9" * 25, "-" + "9" * 18, "9" * 5000, "1e3",
    "1e999", "0x10", "0b1", "1_000", " 1 ", "+1", "-0", "00", "01", "1.5", ".5", "²", "٣", "１",
    "一", "nan", "inf", "-inf", "NaN", "Infinity", "3600", "3601", "0.001",
]  # fmt: skip


def _ids(n: int, mod: int = 8) -> str:
    return ",".join(str(i % mod) for i in range(n))


_LISTS = [
    "0,1", "1,0", "0,0", "0,1,2,3,4,5,6,7", "7,6,5", "0,,1", ",", ",,", "0,", "-1,0", "0,-1",
    "1,2,3", "all", "ALL", " all ", "", _ids(4096), _ids(4097), _ids(5000),
    ",".join(str(i) for i in range(4097)), "0," * 30000, "0,1,x", "0;1", "0 1", "[0,1]",
    "1,²", "0,9" * 10,
]  # fmt: skip
_TEXT = [
    "", " ", "\t", "\n", "x", "abc", "GPU-", "MIG-", "GPU-9942190a",
    "GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1", "MIG-GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1/1/0",
    "cuda", "cuda:0", "cuda:-1", "cuda:4096", "cuda:01", "cpu", "nccl", "gloo", "mpi", "bf16",
    "fp16", "fp32", "torchrun", "slurm", "deepspeed", "openmpi", "localhost:1,2",
    "localhost:0@host2:1", "localhost:", "LOCAL_RANK", "LOCAL_RANK,RANK", "1abc",
    "\x1b]0;pwn\x07", "\x1b[2J\x1b[H", "\x9b31m", "a\u202eb", "\u2028", "\udcff\udcfe", "é",
    "\U0001f600" * 10, "a" * 100, "a" * 5000, "a" * 100_000, "-", "--", "--help", "-h", "--json",
    "%s%n", "{}", "$(id)", "`id`", "../" * 50, "PCI_BUS_ID", "FASTEST_FIRST", "pci_bus_id",
    "DP-INVALID-DEVICE-ID", "dp-devices", "VIS-", "single", "all",
]  # fmt: skip
_PLAUSIBLE = {
    "--stdin-filename": ["train.py", "lintdir/pos_x.py", "neg_c.py", " ", "-", "a/../b.py",
                         "esc\x1b[2J.py", "x" * 5000],
    "--visible": ["0,1", "1,2", "2,0", "3", "", "GPU-9942190a", "0,1,2,3,4,5,6,7", "1,1", "-1"],
    "--order": ["PCI_BUS_ID", "FASTEST_FIRST"],
    "--set-device": ["0", "1", "3", "0,1", "1,0", "0,0", "9"],
    "--module-device": ["cpu", "cuda", "cuda:1", "0", "2"],
    "--backend": ["nccl", "gloo"],
    "--launcher": ["torchrun", "slurm", "deepspeed", "openmpi", "mpich", "accelerate"],
    "--deepspeed-include": ["localhost:1,2", "localhost:0"],
    "--deepspeed-exclude": ["localhost:0"],
    "--script-reads": ["LOCAL_RANK", "RANK,WORLD_SIZE"],
    "--amp": ["bf16", "fp16"], "--autocast-dtype": ["bf16", "fp16"],
    "--model-dtype": ["bf16", "fp16", "fp32"],
    "--device-ids": ["0,1", "1,2", "0", "all", "", "1,2,3", "0,0", "-1"],
    "--batch-size": ["1", "3", "5", "64"],
    "--timeout": ["0", "-1", "nan"],
}  # fmt: skip
_FLAG_VALUES = ["1", "0", "true", "false", "yes", "no", "", "maybe", "2", "\x1b"]

_NUMERIC = {
    "--device-ids", "--output-device", "--set-device", "--local-rank", "--batch-size",
    "--nproc-per-node", "--expect-gpus", "--nproc", "--timeout", "--local_rank", "--ddp-devices",
}  # fmt: skip
_OUTPUT_OPTIONS = {"--json-out", "-o", "--output"}
_INVALID_OPTIONS = ["--no-such-option", "-x", "--jso", "--device_ids", "--", "---", "-", "--=x"]
#: One of these ends every probe invocation: each is refused before a child starts.
_PROBE_GUARDS = [
    ("--timeout", "0"), ("--timeout", "-1"), ("--timeout", "nan"), ("--timeout", "inf"),
    ("--timeout", "3601"), ("--timeout", "1e999"), ("--timeout", "abc"), ("--timeout", ""),
    ("--nproc", "0"), ("--nproc", "-3"), ("--nproc", "abc"), ("--nproc", "99999999999999999999"),
    ("--device", "tpu"), ("--device-ids", "0,0"), ("--device-ids", "-1"), ("--device-ids", "x"),
    ("--no-such-option", ""), ("", "extra-argument"),
]  # fmt: skip
_LAUNCHER_VARS = [
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS",
    "SLURM_GPUS_ON_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_JOB_ID", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE",
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "COLUMNS", "NO_COLOR", "KINETO_USE_DAEMON",
    "GPUDIAG_RDZV_TOKEN", "GPUDIAG_PROBE_FAULT",
]  # fmt: skip


def _command_options(command: str) -> list[tuple[str, str]]:
    """(option name, kind) for every option of ``command``: kind is flag, choice:…,
    numeric, output, snapshot or text."""
    import click

    from gpudiag.cli import main

    cmd = main if command == "(group)" else main.commands[command]
    out: list[tuple[str, str]] = []
    for param in cmd.params:
        if not isinstance(param, click.Option) or param.name == "help":
            continue
        for name in [*param.opts, *param.secondary_opts]:
            if param.is_flag:
                kind = "flag"
            elif isinstance(param.type, click.Choice):
                kind = "choice:" + "|".join(map(str, param.type.choices))
            elif name in _OUTPUT_OPTIONS:
                kind = "output"
            elif name == "--snapshot":
                kind = "snapshot"
            elif name in _NUMERIC:
                kind = "numeric"
            else:
                kind = "text"
            out.append((name, kind))
    return out


def _envvars(command: str) -> list[tuple[str, str]]:
    """(GPUDIAG_<COMMAND>_<OPTION>, kind) for ``command``'s options."""
    import click

    from gpudiag.cli import main

    if command not in main.commands:
        return []
    out = []
    for param in main.commands[command].params:
        envvar = getattr(param, "envvar", None)
        if isinstance(param, click.Option) and isinstance(envvar, str):
            longs = [o for o in param.opts if o.startswith("--")]
            kind = dict(_command_options(command)).get(longs[0] if longs else "", "text")
            out.append((envvar, kind))
    return out


class Generator:
    """Random invocations over one world; the same seed gives the same cases."""

    WEIGHTS: ClassVar[dict[str, int]] = {
        "list": 17, "check": 30, "snapshot": 7, "explain": 9, "lint": 17, "probe": 10,
        "topo": 6, "docs": 3, "fleet": 5, "(group)": 10,
    }  # fmt: skip

    def __init__(self, world: World, seed: int, *, pathological: bool = True) -> None:
        from gpudiag.findings.catalog import CATALOG

        self.world = world
        self.rng = random.Random(seed)
        self.pathological = pathological and bool(world.pathological)
        self.codes = sorted(CATALOG)
        self.options = {c: _command_options(c) for c in self.WEIGHTS}
        self.envvars = {c: _envvars(c) for c in self.WEIGHTS}

    def value(self, kind: str, name: str = "") -> str:
        rng = self.rng
        if kind == "output":  # never anything outside the world
            return rng.choice(self.world.outputs + [t for t in _TEXT if not t.startswith("/")])
        if rng.random() < 0.6:  # a plausible value, so runs get past parsing too
            if name == "--ignore":
                return rng.choice(self.codes)
            if name == "--config":
                return rng.choice(self.world.configs)
            if name in _PLAUSIBLE:
                return rng.choice(_PLAUSIBLE[name])
            if kind == "numeric":
                return rng.choice(["0", "1", "2", "3", "4", "7", "8", "-1", "0,1", "1,2", "2,3"])
            if kind == "snapshot":
                return rng.choice(self.world.snapshots[: len(FIXTURES_LIST) + 2])
        if rng.random() < 0.15:  # any value for any option
            kind = rng.choice(["numeric", "text", "list", "snapshot"])
        if kind.startswith("choice:"):
            choices = kind[7:].split("|")
            return rng.choice([*choices, *(c.lower() for c in choices), rng.choice(_TEXT)])
        if kind == "numeric":
            return rng.choice(_NUMBERS + _LISTS if rng.random() < 0.5 else _NUMBERS)
        if kind == "list":
            return rng.choice(_LISTS)
        if kind == "snapshot":
            return rng.choice(self.world.snapshots)
        if kind == "flag":
            return rng.choice(_FLAG_VALUES)
        return rng.choice(_TEXT)

    def options_for(self, command: str, *, avoid: str = "") -> list[str]:
        rng = self.rng
        args: list[str] = []
        for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 3, 4, 6])):
            if not self.options[command]:  # explain: its only option is --help
                if rng.random() < 0.15:
                    args.append(rng.choice(_INVALID_OPTIONS))
                continue
            if rng.random() < 0.03:
                args.append(rng.choice(_INVALID_OPTIONS))
                continue
            name, kind = rng.choice(self.options[command])
            if name == avoid or (command == "snapshot" and name == "--no-torch"):
                continue
            if kind == "flag":
                args.append(name)
            elif rng.random() < 0.15 and name.startswith("--"):
                args.append(f"{name}={self.value(kind, name)}")
            else:
                args += [name, self.value(kind, name)]
        return args

    def env(self, command: str) -> tuple[tuple[str, str], ...]:
        rng = self.rng
        if rng.random() < 0.55 or command == "fleet":  # GPUDIAG_FLEET_MPI would run mpiexec
            return ()
        pool = self.envvars.get(command, []) + [(v, "text") for v in _LAUNCHER_VARS]
        out: dict[str, str] = {}
        for _ in range(rng.randint(1, 3)):
            name, kind = rng.choice(pool)
            if command == "probe" and name.startswith("GPUDIAG_PROBE_"):
                kind = "text"  # the guard on the command line wins anyway
            if name.endswith(("_JSON_OUT", "_OUTPUT")):
                kind = "output"
            value = self.value("numeric" if kind == "text" and rng.random() < 0.4 else kind)
            out[name] = value.replace("\x00", "")
        return tuple(sorted(out.items()))

    def case(self) -> Case:
        rng = self.rng
        command = rng.choices(list(self.WEIGHTS), weights=list(self.WEIGHTS.values()))[0]
        env = self.env(command)
        if command == "(group)":
            args = rng.choice([["--help"], ["-h"], ["--version"], [], ["help"], ["--version", "x"],
                               [rng.choice(list(self.WEIGHTS)[:-1]), "--help"],
                               [rng.choice(list(self.WEIGHTS)[:-1]), "-h", rng.choice(_TEXT)],
                               [rng.choice(_TEXT)], [rng.choice(_INVALID_OPTIONS)]])  # fmt: skip
            return Case(command, tuple(a.replace("\x00", "") for a in args), env)
        args = [command, *self.options_for(command)]
        if command == "fleet":
            # Never live: `--mpi N` would start mpiexec and a live fleet srun; compare
            # snapshot files (the world's fixtures and hostile ones) instead.
            flags = [a for a in args[1:] if a.startswith("-") and not a.startswith("--mpi")]
            args = ["fleet", "--snapshots", *flags]
            args += [rng.choice(self.world.snapshots) for _ in range(rng.choice([0, 1, 2, 3]))]
        if command == "docs":
            args += rng.choice([[], ["cli"], ["visible-devices"], [rng.choice(_TEXT)], ["CLI.md"]])
        if (
            command in ("list", "check", "topo")
            and rng.random() < 0.85
            and "--snapshot" not in args
        ):
            args += ["--snapshot", rng.choice(self.world.snapshots)]
        if command in ("list", "check") and "--snapshot" not in args and "--deep" in args:
            args.remove("--deep")  # live --deep imports torch in a child: kept rare below
            if rng.random() < 0.05:
                args.append("--deep")
        if command == "snapshot" and rng.random() < 0.97:
            args.append("--no-torch")  # the torch child takes seconds: a few runs keep it
        if command == "explain":
            args += rng.choice(
                [
                    [],
                    [rng.choice(self.codes)],
                    [rng.choice(self.codes).lower()],
                    [rng.choice(_TEXT)],
                    [rng.choice(self.codes), rng.choice(_TEXT)],
                ]
            )
        if command == "lint":
            pool = self.world.lint_paths
            if self.pathological and rng.random() < 0.01:
                pool = self.world.pathological
            args += [rng.choice(pool) for _ in range(rng.choice([0, 1, 1, 1, 2, 3]))]
            if rng.random() < 0.1:
                args.append("-")  # issue 17: the script from stdin
            if "--check" in args and "--snapshot" not in args:
                args += ["--snapshot", rng.choice(self.world.snapshots)]
            if "-" in args or "--stdin-filename" in args:
                stdin = rng.choice(self.world.stdin_inputs)
                return Case(command, tuple(a.replace("\x00", "") for a in args), env, stdin)
        if command == "probe":
            guard, value = rng.choice(_PROBE_GUARDS)
            args = [command, *self.options_for(command, avoid=guard)]
            if rng.random() < 0.5:
                args.insert(1, rng.choice(["single", "dp", "ddp", "amp", "all", "bogus", ""]))
            args += [a for a in (guard, value) if a or guard == "--timeout"]
        return Case(command, tuple(a.replace("\x00", "") for a in args), env)

    def cases(self, n: int) -> list[Case]:
        return [self.case() for _ in range(n)]


# --- running -----------------------------------------------------------------


class _Hang(BaseException):
    """The in-process alarm: a BaseException, so no ``except Exception`` eats it."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Hang()


def problems_of(code: int | None, stdout: str, stderr: str, seconds: float) -> list[str]:
    out = []
    if "Traceback (most recent call last)" in stdout + stderr:
        out.append("traceback")
    if code is not None and code not in DOCUMENTED_EXITS:
        out.append("exit")
    if seconds > SLOW_S:
        out.append("slow")
    first = stderr.lstrip("\n").split("\n", 1)[0]
    if code == 2 and not first.startswith("gpudiag: error: ") and "Commands:" not in stderr:
        out.append("message")
    if any(c in stdout or c in stderr for c in RAW_CONTROLS):
        out.append("raw-control")
    return out


def run_in_process(case: Case, timeout_s: float = HANG_S) -> Outcome:
    """``case`` through CliRunner in this process."""
    from click.testing import CliRunner

    from gpudiag.cli import main

    runner = CliRunner()
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    start = time.perf_counter()
    try:
        result = runner.invoke(
            main, list(case.args), input=case.input(), env=dict(case.env), prog_name="gpudiag"
        )
    except _Hang:
        return Outcome(case, None, time.perf_counter() - start, ["hang"])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    seconds = time.perf_counter() - start
    stdout, stderr = result.stdout, result.stderr
    problems = problems_of(result.exit_code, stdout, stderr, seconds)
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        import traceback

        problems.insert(0, "traceback")
        stderr += "".join(traceback.format_exception(exc))
    tail = (stderr or stdout)[-600:]
    return Outcome(case, result.exit_code, seconds, sorted(set(problems)), tail)


def run_subprocess(case: Case, cwd: Path, timeout_s: float = HANG_S) -> Outcome:
    """``case`` as a real process (``python -m gpudiag`` without the cwd on sys.path)."""
    from gpudiag.backends.subproc import python_module_argv

    env = clean_environ()
    env.update(case.env)
    start = time.perf_counter()
    try:
        with open(case.stdin or os.devnull, "rb") as feed:
            proc = subprocess.run(
                python_module_argv("gpudiag", *case.args),
                env=env, cwd=cwd, stdin=feed, capture_output=True,
                timeout=timeout_s, check=False,
            )  # fmt: skip
    except subprocess.TimeoutExpired:
        return Outcome(case, None, time.perf_counter() - start, ["hang"], where="subprocess")
    seconds = time.perf_counter() - start
    stdout = proc.stdout.decode("utf-8", "replace")
    stderr = proc.stderr.decode("utf-8", "replace")
    problems = problems_of(proc.returncode, stdout, stderr, seconds)
    tail = (stderr or stdout)[-600:]
    return Outcome(case, proc.returncode, seconds, problems, tail, where="subprocess")


def clean_environ() -> dict[str, str]:
    """os.environ without GPUDIAG_* and launcher variables."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in _CLEARED and not k.startswith(_CLEARED_PREFIXES)
    }


def _devnull_intact() -> bool:
    return stat.S_ISCHR(os.stat("/dev/null").st_mode)


def fuzz(
    world: World, seed: int, n: int, n_subprocess: int, *, pathological: bool = True,
    progress: bool = False,
) -> tuple[list[Outcome], dict[str, float]]:  # fmt: skip
    """Run ``n`` cases in process and ``n_subprocess`` of them again as processes."""
    gen = Generator(world, seed, pathological=pathological)
    cases = gen.cases(n)
    outcomes: list[Outcome] = []
    copy = world.root / "snap-copy.json"  # both an input and an output target
    original = copy.read_bytes()
    start = time.perf_counter()
    for i, case in enumerate(cases):
        outcomes.append(run_in_process(case))
        if not _devnull_intact():
            raise SystemExit(f"/dev/null is no longer a device after: {case.shell()}")
        if "snap-copy.json" in "".join(case.args + tuple(v for _, v in case.env)):
            copy.write_bytes(original)  # every run sees the same world
        if progress and (i + 1) % 500 == 0:
            bad = sum(1 for o in outcomes if o.problems)
            print(f"  {i + 1}/{n} in process, {bad} with problems", file=sys.stderr, flush=True)
    timings = {"in_process_s": time.perf_counter() - start}
    start = time.perf_counter()
    sample = random.Random(seed + 1).sample(cases, min(n_subprocess, len(cases)))
    for case in sample:
        outcomes.append(run_subprocess(case, world.root))
        if not _devnull_intact():
            raise SystemExit(f"/dev/null is no longer a device after: {case.shell()}")
    timings["subprocess_s"] = time.perf_counter() - start
    return outcomes, timings


def summary(outcomes: list[Outcome], timings: dict[str, float]) -> str:
    lines = []
    for where in ("in-process", "subprocess"):
        runs = [o for o in outcomes if o.where == where]
        if not runs:
            continue
        key = "in_process_s" if where == "in-process" else "subprocess_s"
        total = timings.get(key, 0.0)
        lines.append(f"{where}: {len(runs)} runs in {total:.0f} s "
                     f"({1000 * total / len(runs):.0f} ms each)")  # fmt: skip
    kinds = Counter(p for o in outcomes for p in o.problems)
    names = ("traceback", "exit", "slow", "hang", "message", "raw-control")
    lines.append("problems: " + ", ".join(f"{k} {kinds.get(k, 0)}" for k in names))
    codes = Counter(o.code for o in outcomes)
    lines.append("exit codes: " + ", ".join(f"{c}: {k}" for c, k in sorted(codes.items(), key=str)))
    per = Counter(o.case.command for o in outcomes)
    bad = Counter(o.case.command for o in outcomes if o.problems)
    lines.append("by command: " + ", ".join(f"{c} {k} ({bad.get(c, 0)} bad)" for c, k in
                                            sorted(per.items())))  # fmt: skip
    slowest = sorted(outcomes, key=lambda o: -o.seconds)[:5]
    lines.append("slowest: " + "; ".join(f"{o.seconds:.1f} s {o.case.command}" for o in slowest))
    return "\n".join(lines)


def details(outcomes: list[Outcome], limit: int = 40) -> str:
    bad = [o for o in outcomes if o.problems]
    seen: set[tuple[str, str, str]] = set()
    lines = []
    for o in bad:
        key = (o.case.command, ",".join(o.problems), o.tail.strip().splitlines()[-1][:60]
               if o.tail.strip() else "")  # fmt: skip
        if key in seen:
            continue
        seen.add(key)
        lines.append(f"[{','.join(o.problems)}] exit {o.code}, {o.seconds:.1f} s ({o.where}): "
                     f"{o.case.shell()[:400]}")  # fmt: skip
        lines += ["    " + line for line in o.tail.strip().splitlines()[-4:]]
        if len(seen) >= limit:
            lines.append(f"… {len(bad)} runs with problems in all")
            break
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=10_000, help="in-process runs (10,000)")
    parser.add_argument("--subprocess", type=int, default=300, help="of them, run as processes")
    parser.add_argument("--seed", type=int, default=None, help="default: random, printed")
    parser.add_argument("--no-pathological", action="store_true",
                        help="leave out issue 21's pathological lint inputs")  # fmt: skip
    parser.add_argument("--json", metavar="FILE", help="also write every problem as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the world directory")
    opts = parser.parse_args(argv)
    seed = opts.seed if opts.seed is not None else random.randrange(2**32)
    for key in list(os.environ):
        if key in _CLEARED or key.startswith(_CLEARED_PREFIXES):
            del os.environ[key]
    root = Path(tempfile.mkdtemp(prefix="gpudiag-fuzz-"))
    here = os.getcwd()
    os.chdir(root)  # relative names the runs write land in the world
    try:
        world = make_world(root, pathological=not opts.no_pathological)
        print(f"seed {seed}, world {root}", file=sys.stderr)
        outcomes, timings = fuzz(
            world, seed, opts.n, opts.subprocess, pathological=not opts.no_pathological,
            progress=True,
        )  # fmt: skip
    finally:
        os.chdir(here)
    bad = [o for o in outcomes if o.problems]
    print(summary(outcomes, timings))
    if bad:
        print(details(bad))
    if opts.json:
        doc = {
            "seed": seed, "world": str(root), "timings": timings, "runs": len(outcomes),
            "problems": [{"problems": o.problems, "exit": o.code, "seconds": round(o.seconds, 3),
                          "where": o.where, "args": list(o.case.args), "env": dict(o.case.env),
                          "shell": o.case.shell(), "tail": o.tail} for o in bad],
        }  # fmt: skip
        Path(opts.json).write_text(json.dumps(doc, indent=2, ensure_ascii=True))
    if bad or opts.keep:
        print(f"world kept for reproduction: {root} (cd there first)")
    else:
        remove_world(root)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
