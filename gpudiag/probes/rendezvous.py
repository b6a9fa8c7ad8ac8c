"""The per-job rendezvous secret every ddp arrival is signed with (docs/probes.md)."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping

from gpudiag.launch.process import LaunchEnv

#: The per-job rendezvous secret (docs/probes.md); read by gpudiag.probes.ddp.
RDZV_TOKEN_ENV = "GPUDIAG_RDZV_TOKEN"


def rendezvous_token(launch: LaunchEnv | None, environ: Mapping[str, str]) -> str:
    """The secret every ddp arrival is signed with; the same on every rank.

    ``GPUDIAG_RDZV_TOKEN`` when the user exported one (the strong choice on a
    shared host: every rank inherits it, no other user can read it). Under a
    launcher without it, derived from what all ranks of this job step share:
    the launcher's run id (TORCHELASTIC_RUN_ID / SLURM_JOB_ID and step) and
    MASTER_ADDR/MASTER_PORT; it separates jobs and stops casual forgery but
    is guessable. Self-launched: a fresh random secret, passed to the local
    children in their environment.
    """
    explicit = environ.get(RDZV_TOKEN_ENV, "")
    if explicit:
        return explicit
    if launch is None:
        return secrets.token_hex(32)
    shared = "\n".join(
        (launch.run_id, environ.get("MASTER_ADDR", ""), environ.get("MASTER_PORT", ""))
    )
    return hashlib.sha256(f"gpudiag-rdzv-token/1\n{shared}".encode()).hexdigest()
