"""The one seam through which backends start child processes.

Modelled on torch's ``utils/collect_env.py``: every query goes through one
injectable function, so tests can replace it and so every call has an argv
list and a timeout (never ``shell=True``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ChildResult:
    """What a child process did.

    Attributes:
        returncode: exit status, or None when it was killed for the timeout or
            could not be started.
        stdout: its standard output, decoded as UTF-8.
        stderr: its standard error, decoded as UTF-8.
        timed_out: True when it ran past its timeout and was killed.
        start_error: why it could not be started, or None.
    """

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    start_error: str | None = None


Runner = Callable[[Sequence[str], Mapping[str, str], float], ChildResult]


def run_child(argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> ChildResult:
    """Run ``argv`` with ``env`` and a hard timeout; never raises for the child's failures."""
    try:
        proc = subprocess.run(
            list(argv),
            env=dict(env),
            capture_output=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        return ChildResult(None, _text(exc.stdout), _text(exc.stderr), timed_out=True)
    except OSError as exc:
        return ChildResult(None, "", "", start_error=f"{argv[0]}: {exc.strerror or exc}")
    return ChildResult(proc.returncode, _text(proc.stdout), _text(proc.stderr))


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace")
    return data


#: Run a module as ``python -m`` would, but without the current directory on
#: the import path. ``python -m`` and ``python -c`` put the working directory
#: first on ``sys.path``, so a ``json.py``, ``torch.py`` or ``gpudiag/`` in the
#: directory where a user runs gpudiag would replace ours. ``-P`` (and
#: ``PYTHONSAFEPATH``) prevent that only on Python 3.11+, and ``-I`` also drops
#: ``PYTHONPATH`` and the user site-packages, which users legitimately rely on
#: (a torch installed with ``pip install --user`` or a cluster module's
#: PYTHONPATH). So, on every Python >= 3.10: ``-c`` runs this bootstrap, which
#: removes the one entry ``-c`` added (``''``, the working directory) before
#: anything is imported from ``sys.path``, then runs the module as
#: ``__main__``. Under ``-P``/``PYTHONSAFEPATH`` nothing was added and nothing
#: is removed. ``sys`` is built in; ``runpy`` is imported only after the removal.
_SAFE_BOOTSTRAP = (
    "import sys\n"
    "if not getattr(sys.flags, 'safe_path', False) and sys.path and sys.path[0] == '':\n"
    "    del sys.path[0]\n"
    "import runpy\n"
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)\n"
)


def python_module_argv(module: str, *args: str) -> list[str]:
    """argv that runs ``python -m module args…`` with this interpreter, safely.

    Unlike ``python -m``, the child never imports from the current directory
    (see ``_SAFE_BOOTSTRAP``); ``sys.argv[1:]`` in the module is ``args``.
    """
    return [sys.executable, "-c", _SAFE_BOOTSTRAP, module, *args]


def child_env(overrides: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """A copy of this process's environment with ``overrides`` applied.

    A value of None removes the variable (so "unset" can be tested, which is
    not the same as empty: ``CUDA_VISIBLE_DEVICES=""`` hides every GPU).
    """
    env = dict(os.environ)
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def last_json_line(stdout: str) -> str | None:
    """The last line of ``stdout`` that looks like a JSON object.

    Children print one JSON line last; libraries may print noise before it.
    """
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            return line
    return None


def query_child(
    module: str,
    env: Mapping[str, str],
    timeout_s: float,
    runner: Runner,
    what: str,
) -> tuple[dict[str, Any] | None, str | None]:
    """Run ``python -m module`` and read the JSON object it prints last.

    Args:
        module: the child program.
        env: its whole environment.
        timeout_s: hard limit; the child is killed past it.
        runner: the seam (tests replace it).
        what: how to name the query in error messages, e.g. ``"torch query"``.

    Returns:
        (payload, None) on success, or (None, a one-line reason).
    """
    result = runner(python_module_argv(module), env, timeout_s)
    if result.start_error:
        return None, f"could not start the {what}: {result.start_error}"
    if result.timed_out:
        return None, f"{what} timed out after {timeout_s:g} s"
    line = last_json_line(result.stdout)
    if result.returncode != 0 or line is None:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"{what} failed (exit {result.returncode}): {tail}"
    try:
        payload = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, f"{what} printed bad JSON: {exc}"
    if not isinstance(payload, dict):
        return None, f"{what} printed {type(payload).__name__}, not a JSON object"
    return payload, None
