"""torch facts read from the installed distribution, without importing torch.

Importing torch costs seconds (3.3-3.9 s measured on an H100 node), so live
``list``, ``check`` and ``guard()`` read what they need from the files pip
installed instead:

* the package torch's ``import torch`` would load is located with
  :func:`importlib.util.find_spec` (which finds, but does not run, the package);
* its ``torch/version.py`` is read as text: ``__version__``, ``cuda`` and ``hip``
  are written there by torch's build (``tools/generate_torch_version.py``) as
  plain literals (``cuda: Optional[str] = '12.4'`` or ``= None``);
* the version falls back to :func:`importlib.metadata.version` when
  ``version.py`` has no ``__version__``.

What only a torch import can tell (its device count, its arch list, a real
``cudaGetDeviceCount`` error) stays None here: that is ``--deep``
(:mod:`gpudiag.backends.torch`, a child process).
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable
from typing import Any

from gpudiag.model import SourceStatus, TorchInfo

#: The reason recorded in ``Snapshot.sources["torch"]`` when torch was not imported.
NOT_ASKED = (
    "not asked: torch was not imported (version and CUDA build read from its files; "
    "device count and arch list need --deep)"
)

_ASSIGN = re.compile(r"^(\w+)\s*(?::[^=]*)?=\s*(.+?)\s*$")
_LITERAL = re.compile(r"""^(?:'([^'\\]*)'|"([^"\\]*)")$""")

Finder = Callable[[str], Any]


def parse_version_py(text: str) -> dict[str, str | None]:
    """The string and None literals assigned at the top level of ``torch/version.py``.

    Anything else (expressions, imports) is skipped: only literals are facts.
    """
    out: dict[str, str | None] = {}
    for line in text.splitlines():
        match = _ASSIGN.match(line)
        if match is None:
            continue
        name, value = match.group(1), match.group(2)
        if value == "None":
            out[name] = None
            continue
        literal = _LITERAL.match(value)
        if literal is not None:
            out[name] = literal.group(1) if literal.group(1) is not None else literal.group(2)
    return out


def _metadata_version() -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - stdlib since 3.8
        return None
    try:
        return version("torch")
    except PackageNotFoundError:
        return None


#: The oldest torch ``gpudiag probe`` runs (pyproject.toml's ``probe`` extra says the same).
PROBE_TORCH_MIN = (2, 1)


def probe_torch_problem(find_spec: Finder = importlib.util.find_spec) -> str | None:
    """Why ``gpudiag probe`` cannot run with this Python's torch, or None when it can.

    Read from torch's files (nothing imported): the probes' workers import torch, and
    without a usable one every probe would fail the same way, one worker at a time.
    """
    info, status = read_torch_facts(find_spec)
    if info is None:
        return (
            f"probe needs torch >= {PROBE_TORCH_MIN[0]}.{PROBE_TORCH_MIN[1]} and "
            f"{status.reason or 'torch is not installed'}; install it "
            "(pip install 'gpudiag[probe]', or the torch build for your CUDA)"
        )
    match = re.match(r"\s*(\d+)\.(\d+)", info.version or "")
    if match is not None and (int(match.group(1)), int(match.group(2))) < PROBE_TORCH_MIN:
        return (
            f"probe needs torch >= {PROBE_TORCH_MIN[0]}.{PROBE_TORCH_MIN[1]}; this Python has "
            f"torch {info.version} (list, check, lint, snapshot and explain work with it)"
        )
    return None


def read_torch_facts(
    find_spec: Finder = importlib.util.find_spec,
) -> tuple[TorchInfo | None, SourceStatus]:
    """torch's version and CUDA build, read from its installed files.

    Returns:
        (info, status): info has ``device_count``/``devices`` None/empty and
        status ``skipped`` (torch was not asked); or (None, ``unavailable``)
        when no torch is installed for this Python.
    """
    try:
        spec = find_spec("torch")
    except (ImportError, ValueError) as exc:
        return None, SourceStatus("unavailable", f"torch is not installed ({exc})")
    if spec is None:
        return None, SourceStatus(
            "unavailable", "torch is not installed (no 'torch' package for this Python)"
        )
    locations = list(spec.submodule_search_locations or [])
    facts: dict[str, str | None] = {}
    for folder in locations:
        path = os.path.join(folder, "version.py")
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                facts = parse_version_py(fh.read(64 * 1024))
            break
        except OSError:
            continue
    version = facts.get("__version__") or _metadata_version()
    if version is None:
        return None, SourceStatus(
            "error", "torch is installed but its version could not be read (no torch/version.py)"
        )
    cuda = facts.get("cuda")
    hip = facts.get("hip")
    info = TorchInfo(
        version=version,
        cuda_version=cuda,
        # The same rule as the torch child: a ROCm build has cuda None but hip set.
        cpu_only=cuda is None and hip is None,
    )
    return info, SourceStatus("skipped", NOT_ASKED)
