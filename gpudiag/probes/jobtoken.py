"""The ddp probe's per-job rendezvous token, as each rank's ``gpudiag probe`` gets it.

Every arrival in the store is signed with an HMAC under this token
(:mod:`gpudiag.probes.rendezvous`), so it must be the same on every rank of the
job and unknown to anyone else. Issue 21: under a launcher without an exported
``GPUDIAG_RDZV_TOKEN`` it was derived from the run id and MASTER_ADDR/PORT,
values another local user can learn (``ps``, ``squeue``), so that user could sign
a forged arrival. Now, in order (docs/probes.md):

1. ``GPUDIAG_RDZV_TOKEN`` when exported: the user's own secret, on every node;
2. self-launched: 32 random bytes, handed to the local children in their
   environment;
3. under a launcher with every rank on this node: 32 random bytes that local
   rank 0 writes to a file only this user can read (``secret`` in a ``0700``
   directory ``gpudiag-rdzv-<uid>-<key>`` under ``$XDG_RUNTIME_DIR``, else the
   temp dir; ``<key>`` hashes the run id and MASTER_ADDR/PORT), and the other
   local ranks read. Local rank 0 holds an ``flock`` on the file while it runs,
   so that a file left by a killed run (no lock) is never taken for this run's,
   and removes it at the end;
4. under a launcher across nodes: the nodes share no private channel, and a token
   derived from public values could be forged, so the ddp probe refuses to run
   (one line, exit 2) and names the fix: export ``GPUDIAG_RDZV_TOKEN`` before
   the launch.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gpudiag.errors import GpudiagInputError
from gpudiag.launch.process import LaunchEnv
from gpudiag.probes.rendezvous import RDZV_TOKEN_ENV

#: How long a local rank other than 0 waits for local rank 0's secret. Local
#: rank 0 writes it before it starts its worker, so this only runs out when it
#: never started or the ranks of one node see different temp dirs.
SECRET_WAIT_S = 60.0
_POLL_S = 0.05
SECRET_DIR_PREFIX = "gpudiag-rdzv-"
_SECRET_FILE = "secret"
_TOKEN_TEXT = re.compile(r"[0-9a-f]{64}")
#: A secret dir no live run holds is removed by a later run after this long.
_STALE_S = 24 * 3600.0
_EXPORT_FIX = "export GPUDIAG_RDZV_TOKEN=$(openssl rand -hex 32) before the launch"
#: Ranks on several nodes share no private channel: a token derived from the job's
#: public values (run id, MASTER_ADDR/PORT) could be forged by another user on a node,
#: so the ddp probe refuses to run across nodes without an exported one (issue 21).
MULTI_NODE_NEEDS_TOKEN = (
    "probe ddp across nodes needs GPUDIAG_RDZV_TOKEN: the nodes share no secret, and a "
    "token derived from the job's public values could be forged; "
    f"{_EXPORT_FIX} (docs/probes.md)"
)
Kind = Literal["exported", "random", "node-secret"]


def _noop() -> None:
    return None


@dataclass
class JobToken:
    """This rank's token, or where to read it (a local rank other than 0).

    Attributes:
        kind: how the token is had (the module docstring's cases 1 to 4).
        token: the token; None while it is still to be read from ``path``.
        path: the node's secret dir (``node-secret`` only).
        release: removes this run's secret (local rank 0); safe to call twice.
    """

    kind: Kind
    token: str | None = None
    path: Path | None = None
    release: Callable[[], None] = field(default=_noop)

    def value(self, wait_s: float = SECRET_WAIT_S) -> str:
        """The token; a local rank other than 0 waits for local rank 0's secret.

        Raises:
            GpudiagInputError: the secret is not there in time, or its dir or
                file is not this user's alone.
        """
        if self.token is None:
            assert self.path is not None
            self.token = read_secret(self.path, wait_s)
        return self.token


def one_node(launch: LaunchEnv, environ: Mapping[str, str]) -> bool:
    """Whether every rank of the job runs on this node, as far as the launcher says."""
    if launch.world_size == 1:
        return True
    if launch.local_world_size is not None:
        return launch.local_world_size == launch.world_size
    # srun without --ntasks-per-node gives no per-node count, but the step's nodes.
    return launch.launcher == "slurm" and environ.get("SLURM_STEP_NUM_NODES", "").strip() == "1"


def refuse_unshared(launch: LaunchEnv | None, environ: Mapping[str, str]) -> None:
    """Refuses a launch whose ranks span nodes with no exported token (case 4).

    Called by the CLI before any output, and by :func:`start_token`.

    Raises:
        GpudiagInputError: the ranks span several nodes and no GPUDIAG_RDZV_TOKEN.
    """
    if launch is not None and not environ.get(RDZV_TOKEN_ENV) and not one_node(launch, environ):
        raise GpudiagInputError(MULTI_NODE_NEEDS_TOKEN)


def start_token(launch: LaunchEnv | None, environ: Mapping[str, str], ddp: bool) -> JobToken:
    """Chooses this rank's token; local rank 0 of a one-node job writes its secret.

    Call it with signals held (:func:`gpudiag.probes.tempdirs.signals_held`) and
    keep the result where the cleanup finds it: its ``release`` removes the
    secret. ``ddp`` is whether this rank runs the ddp probe (only it needs one).

    Raises:
        GpudiagInputError: local rank 0 cannot create its secret, or the ranks span
            several nodes and no GPUDIAG_RDZV_TOKEN was exported.
    """
    exported = environ.get(RDZV_TOKEN_ENV, "")
    if exported:
        return JobToken("exported", exported)
    if launch is None or not ddp:
        return JobToken("random", secrets.token_hex(32))
    refuse_unshared(launch, environ)
    path = secret_dir(launch, environ)
    if launch.local_rank != 0:
        return JobToken("node-secret", path=path)
    token, release = create_secret(path)
    return JobToken("node-secret", token, path, release=release)


def secret_base(environ: Mapping[str, str]) -> Path:
    """``$XDG_RUNTIME_DIR`` when it is this user's private dir, else the temp dir."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime):
        try:
            info = os.lstat(runtime)
        except OSError:
            info = None
        if (
            info is not None
            and stat.S_ISDIR(info.st_mode)
            and info.st_uid == os.getuid()
            and not info.st_mode & 0o077
        ):
            return Path(runtime)
    return Path(tempfile.gettempdir())


def secret_dir(launch: LaunchEnv, environ: Mapping[str, str]) -> Path:
    """The node's secret dir for this job: the same path on every local rank."""
    shared = "\n".join(
        ("gpudiag-rdzv-dir/1", str(os.getuid()), launch.run_id,
         launch.master_addr or "", str(launch.master_port))
    )  # fmt: skip
    key = hashlib.sha256(shared.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return secret_base(environ) / f"{SECRET_DIR_PREFIX}{os.getuid()}-{key}"


def create_secret(path: Path) -> tuple[str, Callable[[], None]]:
    """Local rank 0: a fresh secret in ``path/secret``, locked while this process runs.

    The file is written under a unique name (``O_EXCL``, ``0600``, no symlink
    followed), locked, then renamed into place, so a reader never sees it half
    written, and a file a killed run left is replaced.

    Returns:
        (the secret, the function that removes it and the dir).
    """
    import fcntl  # POSIX only, like the probes' process groups: not at import time

    for _attempt in range(3):  # a run with the same key removing the dir just now
        dir_fd = _open_private_dir(path, create=True)
        if dir_fd is not None:
            break
    else:
        raise _secret_error(path, "the directory keeps disappearing")
    token = secrets.token_hex(32)
    scratch = f".{_SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(scratch, flags, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        os.close(dir_fd)
        raise _secret_error(path, exc.strerror or str(exc)) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else has it
        data = f"{token}\n".encode("ascii")
        while data:
            data = data[os.write(fd, data) :]
        os.rename(scratch, _SECRET_FILE, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError as exc:
        os.close(fd)
        _unlink_quietly(scratch, dir_fd)
        os.close(dir_fd)
        raise _secret_error(path, exc.strerror or str(exc)) from exc
    own = os.fstat(fd)
    released = False

    def release() -> None:
        nonlocal released
        if released:
            return
        released = True
        try:
            now = os.stat(_SECRET_FILE, dir_fd=dir_fd, follow_symlinks=False)
            if (now.st_dev, now.st_ino) == (own.st_dev, own.st_ino):
                os.unlink(_SECRET_FILE, dir_fd=dir_fd)
        except OSError:
            pass  # already gone, or replaced by a later run's: not ours to remove
        os.close(fd)  # releases the lock
        with suppress(OSError):
            os.rmdir(path)  # only when empty: a later run's file keeps it
        os.close(dir_fd)

    return token, release


def read_secret(path: Path, wait_s: float = SECRET_WAIT_S) -> str:
    """A local rank other than 0: local rank 0's secret, waiting up to ``wait_s``.

    Only a file that a live process holds locked counts; one left by a killed
    run (unlocked) is skipped until local rank 0 replaces it.

    Raises:
        GpudiagInputError: no secret in time, or the dir or file is not private.
    """
    deadline = time.monotonic() + wait_s
    while True:
        token = _try_read(path)
        if token is not None:
            return token
        if time.monotonic() >= deadline:
            raise GpudiagInputError(
                f"no ddp rendezvous secret from local rank 0 in {path} after {wait_s:g} s: "
                "local rank 0 did not start, or the ranks of this node see different "
                f"TMPDIR or XDG_RUNTIME_DIR; {_EXPORT_FIX}"
            )
        time.sleep(_POLL_S)


def _try_read(path: Path) -> str | None:
    import fcntl

    dir_fd = _open_private_dir(path, create=False)
    if dir_fd is None:
        return None
    try:
        try:
            fd = os.open(
                _SECRET_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                dir_fd=dir_fd,
            )  # fmt: skip
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _secret_error(path / _SECRET_FILE, exc.strerror or str(exc)) from exc
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
                raise _secret_error(path / _SECRET_FILE, "not a file of this user")
            if info.st_mode & 0o077:
                raise _secret_error(path / _SECRET_FILE, f"mode {info.st_mode & 0o777:o}")
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:  # held by a live local rank 0: this run's secret
                text = os.read(fd, 256).decode("ascii", "replace").strip()
                return text if _TOKEN_TEXT.fullmatch(text) else None
            fcntl.flock(fd, fcntl.LOCK_UN)  # nobody holds it: a killed run's
            return None
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)


def _open_private_dir(path: Path, *, create: bool) -> int | None:
    """A descriptor of ``path`` once it is checked to be this user's ``0700`` dir
    (not a symlink); None when it does not exist.

    Raises:
        GpudiagInputError: it exists but is not this user's private dir (another
            user may have created the name first).
    """
    created = False
    if create:
        try:
            os.mkdir(path, 0o700)
            created = True
        except FileExistsError:
            pass
        except OSError as exc:
            raise _secret_error(path, exc.strerror or str(exc)) from exc
    try:
        dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW|O_DIRECTORY: either
            reason = "a symbolic link" if path.is_symlink() else "not a directory"
        raise _secret_error(path, reason) from exc
    info = os.fstat(dir_fd)
    if info.st_uid != os.getuid():
        os.close(dir_fd)
        raise _secret_error(path, f"owned by uid {info.st_uid}, not this user")
    if created:
        os.fchmod(dir_fd, 0o700)  # whatever the umask made of it
    elif info.st_mode & 0o077:
        os.close(dir_fd)
        raise _secret_error(path, f"mode {info.st_mode & 0o777:o}, not private")
    return dir_fd


def _secret_error(path: Path, reason: str) -> GpudiagInputError:
    return GpudiagInputError(
        f"cannot use {path} for the ddp rendezvous secret ({reason}): remove it if it is "
        f"not this job's, or {_EXPORT_FIX}"
    )


def _unlink_quietly(name: str, dir_fd: int) -> None:
    with suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)


def remove_stale_secrets(base: Path) -> list[Path]:
    """Removes this user's secret dirs that no live run holds and that are older
    than a day (a local rank 0 killed with SIGKILL cannot remove its own)."""
    removed: list[Path] = []
    try:
        entries = list(base.glob(f"{SECRET_DIR_PREFIX}{os.getuid()}-*"))
    except OSError:
        return removed
    for entry in entries:
        try:
            info = entry.lstat()
            if (
                not stat.S_ISDIR(info.st_mode)
                or info.st_uid != os.getuid()
                or time.time() - info.st_mtime < _STALE_S
                or _held(entry / _SECRET_FILE)
            ):
                continue
        except OSError:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def _held(secret: Path) -> bool:
    """Whether a live process holds the secret's lock (a missing file is not held)."""
    import fcntl

    try:
        fd = os.open(secret, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
