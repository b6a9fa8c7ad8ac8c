"""Files whose ranks are single-node by construction.

A global rank used as a CUDA ordinal (``LINT-DEVICE-FROM-GLOBAL-RANK``) breaks only
where ranks span nodes. These files start every rank on the local host, so the
global rank is the local one there (issue 17: 4 of 6 wrong findings on the corpus):

* a test class built on torch's multi-process harness: ``MultiProcessTestCase`` and
  ``DistributedTestBase`` spawn ``world_size`` processes on this host
  (torch 2.13, torch/testing/_internal/common_distributed.py, ``_spawn_processes``),
  and project bases named after them (apex's ``NcclDistributedTestBase``);
* a file that launches its ranks itself with ``torchrun --nproc_per_node=…`` (or
  ``torch.distributed.run``/``launch``) and no ``--nnodes``: one node (torch 2.13,
  torch/distributed/run.py: ``--nnodes`` defaults to ``1:1``);
* a script that a module beside it launches that way (a test driver that runs
  ``["torchrun", f"--nproc_per_node={n}"] + [script]``; TransformerEngine's tests);
* a file that starts its ranks with ``torch.multiprocessing.spawn`` and gives
  ``init_process_group`` each process's own index as its rank (``rank=rank``, not
  ``node_rank * nprocs + rank``): spawn starts its processes on this host (torch 2.13,
  torch/multiprocessing/spawn.py), and ranks ``0..nprocs-1`` leave no rank for another
  node (issue 17, the held-out corpus: 17 wrong findings in fairscale's and OLMo's
  tests);
* a test file whose tests are marked ``@pytest.mark.world_size(N)`` (N <= 8), or under
  a ``conftest.py`` that selects tests by that marker: composer's convention, one world
  size per ``composer -n N -m pytest`` launch on one host (a second held-out corpus:
  llm-foundry's tests, 11 wrong);
* a pytest module (``test_*.py``, ``*_test.py``) when neither it nor the project code it
  uses as a test helper reads ``LOCAL_RANK``: distributed tests are started on one host (torch's
  ``MultiProcessTestCase``, an ``mp.spawn`` helper, ``torchrun --nproc_per_node=N pytest``),
  and a test harness that means to span nodes tells the local rank apart (Megatron-LM's
  tests/unit_tests/test_utilities.py reads both, and keeps the warning). Taken by
  convention, not proved, which info is for (a fourth held-out corpus: 53 warnings in
  ColossalAI's tests, started through ``colossalai.testing.spawn`` on localhost, and in
  flash-attention's, whose comments launch them with ``torchrun --nproc_per_node``).

Read from the syntax tree only (class bases; calls; list and tuple literals), once per file
and only when a rule has a candidate finding.
"""

from __future__ import annotations

import ast
import functools
import os

from gpudiag.lint.compiles import parse
from gpudiag.lint.facts import Facts
from gpudiag.lint.syntax import dotted_name, ident

_HARNESS = ("MultiProcessTestCase", "DistributedTestBase")
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
#: the same hosts as a tcp:// init_method names them (an IPv6 address in brackets)
_LOOPBACK_URLS = tuple(f"tcp://[{h}]" if ":" in h else f"tcp://{h}" for h in sorted(_LOOPBACK))
_LAUNCH = frozenset({"torchrun", "torch.distributed.run", "torch.distributed.launch"})
#: the most ranks a test marked for a world size is taken to run on one host (8 GPUs)
_ONE_HOST = 8
_CONFTEST_DEPTH = 4
_CONFTEST_BYTES = 256 * 1024
#: the most modules of a script's folder read for a test driver that launches it
_SIBLINGS = 200


def _text(node: ast.AST) -> str | None:
    """A string literal, or the leading literal part of an f-string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return None


def _launch_nodes(items: list[ast.expr]) -> str | None:
    """``"one"`` for a torchrun command (a list literal) with ``--nproc_per_node`` and no
    ``--nnodes`` past 1, ``"many"`` for one with, None for no such command."""
    texts = [t for t in map(_text, items) if t is not None]
    if not any(t in _LAUNCH or t.endswith("/torchrun") for t in texts):
        return None
    if not any(t.startswith(("--nproc_per_node", "--nproc-per-node")) for t in texts):
        return None
    many = any(t.startswith("--nnodes") and t.split("=", 1)[-1] not in ("1", "1:1") for t in texts)
    return "many" if many else "one"


def _launches_one_node(items: list[ast.expr]) -> bool:
    return _launch_nodes(items) == "one"


def _world_size_marker(node: ast.AST) -> int | None:
    """N of ``@pytest.mark.world_size(N)`` with N <= 8: composer's and llm-foundry's tests
    are selected by it, one world size per launch of ``composer -n N -m pytest`` on one
    host (mosaicml/llm-foundry tests/conftest.py, Makefile ``test-dist-gpu``)."""
    if not isinstance(node, ast.Call) or len(node.args) != 1 or node.keywords:
        return None
    name = dotted_name(node.func) or ""
    size = node.args[0]
    if not name.endswith("mark.world_size") or not isinstance(size, ast.Constant):
        return None
    value = size.value
    return value if isinstance(value, int) and 1 <= value <= _ONE_HOST else None


def single_node_reason(facts: Facts) -> str | None:
    """Why every rank of this file runs on one host, or None."""
    cached = facts.cache.get("single_node")
    if cached is not None:
        return str(cached) or None
    reason = ""
    spawned = [e for e in facts.of("init_pg") if e.proc.startswith("spawn:")]
    if spawned and all(e.data.get("spawn_rank") for e in spawned):
        reason = (
            f"every rank is a process torch.multiprocessing.spawn starts on this host, "
            f"with its own index as its rank (line {spawned[0].line})"
        )
    if not reason:
        reason = _loopback_rendezvous(facts)
    if facts.tree is not None and not reason:
        for node in ast.walk(facts.tree):
            if isinstance(node, ast.ClassDef) and any(
                (ident(b) or "").endswith(_HARNESS) for b in node.bases
            ):
                reason = (
                    f"{node.name} (line {node.lineno}) is a multi-process test harness: "
                    "it starts every rank on this host"
                )
                break
            size = _world_size_marker(node)
            if size is not None:
                reason = (
                    f"its tests are marked for a world size of {size} "
                    f"(line {getattr(node, 'lineno', 1)}), "
                    "which their launcher starts on one host"
                )
                break
            if isinstance(node, (ast.List, ast.Tuple)) and _launches_one_node(node.elts):
                reason = (
                    f"the file launches its ranks itself with torchrun on one node "
                    f"(line {node.lineno}, no --nnodes)"
                )
                break
    if not reason and facts.path is not None:
        reason = _by_path(facts.path, facts.harness_reads_local_rank)
    facts.cache["single_node"] = reason
    return reason or None


def _loopback_rendezvous(facts: Facts) -> str:
    """The script itself points every rank's rendezvous at this host:
    ``os.environ["MASTER_ADDR"] = "127.0.0.1"`` (every write of it a loopback constant, and
    ``MASTER_ADDR`` named nowhere else in the file, so no launcher's value is kept). The
    TCP store lives in rank 0's process at that address (torch 2.13,
    torch/distributed/rendezvous.py, ``_env_rendezvous_handler``); a rank on another host
    would look for it on its own host and never join, so every rank is on this one
    (pyg's examples/multi_gpu/distributed_sampling_xpu.py, an eighteenth held-out corpus of
    issue 17)."""
    sets = [e for e in facts.of("env_set") if e.text("var") == "MASTER_ADDR"]
    if not sets or facts.tree is None:
        return ""
    for e in sets:
        if not isinstance(e.node, ast.Subscript) or e.text("value") not in _LOOPBACK:
            return ""
    named = sum(
        1
        for node in ast.walk(facts.tree)
        if isinstance(node, ast.Constant) and node.value == "MASTER_ADDR"
    )
    # each write once (a function walked twice records it twice); and every group meets
    # through env:// (an init_method of its own may name another host)
    if named != len({id(e.node) for e in sets}) or not all(
        e.data.get("env_rendezvous") or _loopback_url(e.data.get("init_method"))
        for e in facts.of("init_pg")
    ):
        return ""
    return (
        f"the script sets MASTER_ADDR to {sets[0].text('value')} itself (line {sets[0].line}): "
        "every rank meets rank 0 on this host"
    )


def _loopback_url(val: object) -> bool:
    """``init_method="tcp://127.0.0.1:29500"`` (a value the walker knows)."""
    text = getattr(val, "const", None)
    return isinstance(text, str) and text.startswith(_LOOPBACK_URLS)


def _by_path(path: str, harness_reads_local_rank: bool) -> str:
    """Single-node reasons read from the file's place in the project: a test driver beside
    it, its conftest, or its being a test module (empty: none)."""
    driver = _sibling_driver(path)
    if driver is not None:
        return (
            f"{driver} beside it launches it with torchrun on one node "
            "(--nproc_per_node, no --nnodes)"
        )
    conftest = _world_size_conftest(path)
    if conftest is not None:
        return (
            f"the tests under {conftest} are run one world size per launch "
            "(@pytest.mark.world_size), on one host"
        )
    name = os.path.basename(path)
    if _is_test_module(name) and not harness_reads_local_rank:
        return (
            f"{name} is a test module and neither it nor a test helper it uses "
            "reads LOCAL_RANK: its ranks are taken to run on one host"
        )
    return ""


_TEST_FOLDERS = frozenset({"test", "tests", "testing", "unit_tests", "unittests"})


def is_test_path(path: str) -> bool:
    """A test module, or a module in a test folder (``tests/unit_tests/test_utilities.py``,
    ``tests.kit.helpers`` written with slashes)."""
    parts = path.replace(os.sep, "/").split("/")
    return _is_test_module(parts[-1] if parts[-1].endswith(".py") else parts[-1] + ".py") or any(
        part in _TEST_FOLDERS for part in parts[:-1]
    )


def _is_test_module(name: str) -> bool:
    """A file pytest collects by default (``python_files = test_*.py *_test.py``)."""
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _world_size_conftest(path: str) -> str | None:
    """The nearest ``conftest.py`` above a test file that selects its tests by a
    ``world_size`` marker (composer's convention: mosaicml/llm-foundry tests/conftest.py
    defaults a test to ``pytest.mark.world_size(1)`` and keeps those of $WORLD_SIZE, one
    ``composer -n N -m pytest`` launch on one host; the second held-out corpus's
    test_ffn.py). Read only for a file with a candidate finding; a few folders up."""
    if not _is_test_module(os.path.basename(path)):
        return None
    folder = os.path.dirname(os.path.abspath(path))
    for _ in range(_CONFTEST_DEPTH):
        conftest = os.path.join(folder, "conftest.py")
        try:
            with open(conftest, "rb") as handle:
                text = handle.read(_CONFTEST_BYTES).decode("utf-8", "replace")
        except OSError:
            text = ""
        if "mark.world_size(" in text and "get_closest_marker" in text:
            return conftest
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return None


def _sibling_driver(path: str) -> str | None:
    """A module in the script's folder that launches it with torchrun on one node: a
    test driver that builds ``["torchrun", f"--nproc_per_node={n}"] + [script, ...]``
    and names the script (TransformerEngine's tests/pytorch/distributed/test_numerics.py
    and run_numerics.py; a fourth held-out corpus, 3 wrong warnings). Read only for a
    file with a candidate finding; each module parsed once while it is unchanged."""
    folder, name = os.path.split(os.path.abspath(path))
    try:
        entries = sorted(e for e in os.listdir(folder) if e.endswith(".py") and e != name)
    except OSError:
        return None
    for entry in entries[:_SIBLINGS]:
        full = os.path.join(folder, entry)
        try:
            stat = os.stat(full)
        except OSError:
            continue
        if stat.st_size <= _CONFTEST_BYTES and name in _launched_one_node(
            full, stat.st_mtime_ns, stat.st_size
        ):
            return entry
    return None


@functools.lru_cache(maxsize=1024)
def _launched_one_node(path: str, mtime_ns: int, size: int) -> frozenset[str]:
    """The ``*.py`` names a module mentions when it launches with torchrun on one node,
    and never on more (mtime and size key the cache)."""
    del mtime_ns, size
    try:
        with open(path, "rb") as handle:
            data = handle.read(_CONFTEST_BYTES)
        if b"torchrun" not in data and b"torch.distributed.run" not in data:
            return frozenset()
        tree = parse(data)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    kinds: set[str] = set()
    named: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)):
            kind = _launch_nodes(node.elts)
            if kind is not None:
                kinds.add(kind)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.endswith(".py")
            and len(node.value) < 4096
        ):
            named.add(os.path.basename(node.value))
    return frozenset(named) if kinds == {"one"} else frozenset()
