"""How the project's own shell scripts launch a training script.

Whether ``--local_rank`` arrives depends on the launcher (torch/distributed/launch.py
at torch 2.x passes ``--local-rank``, torchrun passes nothing, deepspeed/launcher/
launch.py passes ``--local_rank``), which the Python file does not say. Repositories
often do, in a ``run.sh`` beside the script (DeepSpeedExamples' compression/cifar:
``python -m torch.distributed.launch … train.py --deepspeed``). Issue 17: a script that
uses deepspeed but is launched by torch's launcher in its own shell script is certain.

Read: the ``*.sh`` files in the script's folder, the folder above it and the folders
one or two levels below it (``bash_script/ZeroQuant/``; at most :data:`MAX_SCRIPTS`
folders and scripts per folder, each at most :data:`MAX_BYTES`), once per folder per
run. A command (continuation lines joined) that names a launcher and the script's file
name counts. So does one in the project's documents (``*.md``, ``*.rst`` under the
folder given to lint, at most :data:`MAX_DOCS`) that names the script by its path from
that folder. Nothing is run.
"""

from __future__ import annotations

import os
import re

MAX_SCRIPTS = 50
MAX_BYTES = 256 * 1024
#: The documents read under a root, and how deep below it (docs/en/common_usage/ is 3).
MAX_DOCS = 400
MAX_DOC_DEPTH = 4
MAX_DOC_FOLDERS = 2000

_LAUNCHERS = (
    ("torchrun", re.compile(r"(?:^|[\s;&|/])torchrun\b|torch\.distributed\.run\b")),
    ("torch.distributed.launch", re.compile(r"torch\.distributed\.launch\b")),
    ("deepspeed", re.compile(r"(?:^|[\s;&|/])deepspeed(?=\s)")),
)
_PY = re.compile(r"([\w.\-/]+\.py)\b")
#: an interpreter no torch 2.x supports (torch 2.0 needs Python >= 3.8): its launcher is
#: torch 1.x's, which passes --local_rank (DeepSpeedExamples' bing_bert: python3.6 -m
#: torch.distributed.launch)
_OLD_PYTHON = re.compile(r"\bpython(?:2(?:\.\d+)?|3\.[0-7])\b")
OLD_TORCH = "torch 1.x (an interpreter torch 2 does not support)"
#: torch.distributed.launch --use-env (or --use_env): "the script will not pass
#: --local-rank as argument, and will instead set LOCAL_RANK" (torch 2.13
#: torch/distributed/launch.py, parse_args); dino's README starts its retrieval evals so
_USE_ENV = re.compile(r"--use[-_]env\b")
#: ``$(dirname "$0")/``, ``$(dirname $0)/``, ``${0%/*}/`` right before a script's path
_OWN_FOLDER = re.compile(r"""(\$\(\s*dirname\s+["']?\$\{?0\}?["']?\s*\)|\$\{0%/\*\})["']?$""")
#: the key of a script named from the shell script's own folder
HERE = "$HERE"


def _commands(text: str) -> list[str]:
    joined = re.sub(r"\\\r?\n", " ", text)
    return [line.split("#", 1)[0] for line in joined.splitlines()]


def _launches(path: str) -> list[tuple[set[str], list[str]]]:
    """Each command of a file that names a launcher: (the launchers, the ``.py`` files
    it names); empty when unreadable."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return []
    out: list[tuple[set[str], list[str]]] = []
    for command in _commands(text):
        launchers = {what for what, pattern in _LAUNCHERS if pattern.search(command)}
        if launchers:
            if _OLD_PYTHON.search(command):
                launchers.add(OLD_TORCH)
            if "torch.distributed.launch" in launchers and _USE_ENV.search(command):
                # sets LOCAL_RANK and passes no --local-rank, as torchrun
                launchers = (launchers - {"torch.distributed.launch"}) | {"torchrun"}
            out.append((launchers, [_named(command, m) for m in _PY.finditer(command)]))
    return out


def _named(command: str, found: re.Match[str]) -> str:
    """The script a command names: ``HERE/x.py`` for ``$(dirname "$0")/x.py``, the
    shell script's own folder (MapTR's tools/dist_test.sh starts tools/test.py, not
    tools/maptr/test.py: a fifteenth held-out corpus of issue 17), else as written."""
    if _OWN_FOLDER.search(command[: found.start()]):
        return HERE + "/" + found.group(1).lstrip("/")
    return found.group(1)


def _read_folder(folder: str) -> dict[str, frozenset[str]]:
    """``{script file name: the launchers that start it}`` from the folder's shell scripts."""
    found: dict[str, set[str]] = {}
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".sh"))[:MAX_SCRIPTS]
    except OSError:
        return {}
    for name in names:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        for launchers, scripts in _launches(path):
            for script in scripts:
                key = script if script.startswith(HERE + "/") else os.path.basename(script)
                found.setdefault(key, set()).update(launchers)
    return {k: frozenset(v) for k, v in found.items()}


def _read_docs(root: str) -> dict[str, frozenset[str]]:
    """``{script path relative to root: launchers}`` from the commands in the project's
    Markdown and reStructuredText files that name a script by its path from the root
    (``python -m torch.distributed.launch … examples/distributed_training.py``, as
    mmengine's docs/en/common_usage/distributed_training.md). A bare file name is the
    file beside the document (swav's README.md: ``python -m torch.distributed.launch
    --nproc_per_node=8 main_swav.py``, run from the folder the README is in; the held-out
    corpus of issue 17), not any ``train.py`` elsewhere."""
    found: dict[str, set[str]] = {}
    docs: list[str] = []
    for seen, (folder, subs, files) in enumerate(os.walk(root)):
        subs[:] = sorted(d for d in subs if not d.startswith(".") and d != "node_modules")
        if folder[len(root) :].count(os.sep) >= MAX_DOC_DEPTH:
            subs[:] = []
        docs.extend(os.path.join(folder, f) for f in sorted(files) if f.endswith((".md", ".rst")))
        if len(docs) >= MAX_DOCS or seen >= MAX_DOC_FOLDERS:
            break  # a root that is no project (`gpudiag lint /`) costs a bounded walk
    for path in docs[:MAX_DOCS]:
        beside = os.path.relpath(os.path.dirname(path), root)
        for launchers, scripts in _launches(path):
            for script in (s.removeprefix("./") for s in scripts):
                if script.startswith(("/", HERE)):  # absolute, or the shell's own folder
                    continue
                if "/" not in script:
                    script = os.path.join(beside, script)
                found.setdefault(os.path.normpath(script), set()).update(launchers)
    return {k: frozenset(v) for k, v in found.items()}


class ShellLaunches:
    """One lint run's reading of shell scripts, cached per folder, and of the documents
    under each root (``roots``: the folders given to lint)."""

    def __init__(self, roots: tuple[str, ...] = ()) -> None:
        self._folders: dict[str, dict[str, frozenset[str]]] = {}
        self._subs: dict[str, list[str]] = {}
        self.roots = roots
        self._docs: dict[str, dict[str, frozenset[str]]] = {}

    def _below(self, here: str) -> list[str]:
        """The folders right below ``here``, at most :data:`MAX_SCRIPTS`."""
        found = self._subs.get(here)
        if found is None:
            try:
                with os.scandir(here) as entries:
                    found = sorted(
                        e.path
                        for e in entries
                        if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
                    )[:MAX_SCRIPTS]
            except OSError:
                found = []
            self._subs[here] = found
        return found

    def _subfolders(self, here: str) -> list[str]:
        """The folders one and two levels below ``here`` (``bash_script/``,
        ``bash_script/ZeroQuant/``), at most :data:`MAX_SCRIPTS` in all."""
        first = self._below(here)
        second = [sub for folder in first for sub in self._below(folder)]
        return [*first, *second][:MAX_SCRIPTS]

    def launchers_of(self, file: str) -> frozenset[str]:
        """The launchers the project's shell scripts start ``file`` with (empty: none seen)."""
        real = os.path.realpath(file)
        here = os.path.dirname(real)
        name = os.path.basename(file)
        out: set[str] = set()
        for folder in dict.fromkeys((here, os.path.dirname(here), *self._subfolders(here))):
            table = self._folders.get(folder)
            if table is None:
                table = self._folders[folder] = _read_folder(folder)
            out |= table.get(name, frozenset())
            if folder == here:
                out |= table.get(f"{HERE}/{name}", frozenset())
        for root in self.roots:
            if not real.startswith(root.rstrip(os.sep) + os.sep):
                continue
            docs = self._docs.get(root)
            if docs is None:
                docs = self._docs[root] = _read_docs(root)
            out |= docs.get(os.path.relpath(real, root), frozenset())
        return frozenset(out)
