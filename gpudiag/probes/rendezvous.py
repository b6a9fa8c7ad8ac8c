"""Where the ``ddp`` probe's ranks meet: each rank's row, the store, signed arrivals.

Every rank publishes its row (host, pid, the physical GPU behind ``cuda:<local_rank>``)
in a key-value store (a FileStore, or a TCPStore bound to MASTER_ADDR only), signed with
an HMAC under the job's token, and waits for every other rank's; a forged arrival is
refused and reported. Rank 0 hosts the TCPStore and leaves it last. The job's token
is chosen by the parent before it starts ranks (:mod:`gpudiag.probes.jobtoken`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import socket
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from gpudiag.launch.process import LaunchEnv
from gpudiag.parsing import int_or_none
from gpudiag.probes.common import WorkerContext
from gpudiag.probes.results import RankRow

if TYPE_CHECKING:
    import torch
    import torch.distributed

#: Collectives may wait this long past the parent's hard limit, so that a hang
#: is always reported by the parent (exit 3), never as a gloo/NCCL error.
COLLECTIVE_GRACE_S = 30.0
_POLL_S = 0.05
#: The per-job secret every arrival is signed with (docs/probes.md). The parent
#: sets it for its children, as :mod:`gpudiag.probes.jobtoken` chooses it.
RDZV_TOKEN_ENV = "GPUDIAG_RDZV_TOKEN"


def rendezvous_token(launch: LaunchEnv | None, environ: Mapping[str, str]) -> str:
    """A token without a private channel between the ranks; the same on every rank.

    ``GPUDIAG_RDZV_TOKEN`` when the user exported one. Self-launched: a fresh
    random secret. Under a launcher: derived from what all ranks of this job
    step share, the run id (the launcher's, the Slurm job id, the MPI job id)
    and MASTER_ADDR/MASTER_PORT. That separates jobs but is public: another
    user who knows the job could derive it too, so
    :func:`gpudiag.probes.jobtoken.start_token` uses it only for ranks on
    several nodes without an exported token, and says so (issue 21).
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


def own_row(ctx: WorkerContext) -> tuple[RankRow, str | None]:
    """This rank's row; on CUDA the physical GPU behind ``cuda:<local_rank>``."""
    import torch

    host = socket.gethostname()
    if ctx.device_type != "cuda":
        return RankRow(ctx.rank, ctx.local_rank, ctx.node_rank, host, os.getpid(), "cpu"), None
    count = torch.cuda.device_count()
    if ctx.local_rank >= count:
        error = (
            f"rank {ctx.rank}: local rank {ctx.local_rank} needs cuda:{ctx.local_rank} but only "
            f"{count} GPU(s) are visible (CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
        )
        row = RankRow(ctx.rank, ctx.local_rank, ctx.node_rank, host, os.getpid(), None)
        return row, error
    torch.cuda.set_device(ctx.local_rank)
    props = torch.cuda.get_device_properties(ctx.local_rank)
    uuid = str(props.uuid)
    uuid = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    bus_id = getattr(props, "pci_bus_id", None)
    if not isinstance(bus_id, str):
        bus_id = _bus_id_from_nvml(uuid)
    row = RankRow(
        rank=ctx.rank,
        local_rank=ctx.local_rank,
        node_rank=ctx.node_rank,
        host=host,
        pid=os.getpid(),
        device=f"cuda:{ctx.local_rank}",
        cuda_ordinal=ctx.local_rank,
        gpu_uuid=uuid,
        pci_bus_id=bus_id,
        gpu_name=str(props.name),
    )
    return row, None


def _bus_id_from_nvml(uuid: str) -> str | None:
    """The PCI bus id of the GPU with this UUID, from NVML (None if unavailable)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
            bus = pynvml.nvmlDeviceGetPciInfo(handle).busId
            return bus.decode() if isinstance(bus, bytes) else str(bus)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # NVML missing or the UUID unknown: the report says None
        return None


def make_store(ctx: WorkerContext) -> torch.distributed.Store:
    """The key-value store the ranks meet in, under a per-run prefix.

    ``file:PATH``: a FileStore in the parent's private temp dir (no port at all,
    so two probes on one host cannot collide). ``env``: MASTER_ADDR and
    MASTER_PORT, created the way torch/distributed/rendezvous.py's
    ``_create_c10d_store`` does: under torchrun with
    TORCHELASTIC_USE_AGENT_STORE=True every rank is a client of the agent's
    store, otherwise rank 0 hosts it.
    """
    import torch.distributed as dist

    timeout = timedelta(seconds=ctx.timeout_s + COLLECTIVE_GRACE_S)
    if ctx.store.startswith("file:"):
        base: dist.Store = dist.FileStore(ctx.store[len("file:") :], ctx.world_size)
    else:
        addr = os.environ["MASTER_ADDR"]
        port = int_or_none(os.environ["MASTER_PORT"], minimum=1) or 0
        agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        is_master = ctx.rank == 0 and not agent
        # torch's TCPStore server listens on every interface whatever host it
        # is given; rank 0 binds the socket itself, to MASTER_ADDR's address
        # only (loopback stays loopback), and hands it over (master_listen_fd).
        listen_fd = listen_on(addr, port) if is_master else None
        # wait_for_workers=False: rank 0 must not block inside the constructor,
        # so that it can report which ranks have arrived while it waits.
        base = dist.TCPStore(
            addr,
            port,
            None if not is_master else ctx.world_size,
            is_master,
            timeout,
            wait_for_workers=False,
            multi_tenant=listen_fd is None,
            master_listen_fd=listen_fd,
        )
    base.set_timeout(timeout)
    return dist.PrefixStore(f"gpudiag/{ctx.run_id}/", base)


def listen_on(addr: str, port: int) -> int | None:
    """A listening socket on ``addr:port`` only, as a file descriptor for TCPStore.

    None when ``addr`` does not resolve to an address of this host (torch's own
    listener, on every interface, is then used, as before).
    """
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)[
            0
        ]
    except (OSError, IndexError, UnicodeError):
        return None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(128)
    except OSError:
        sock.close()
        return None
    return sock.detach()  # the store owns it now


def rendezvous_mac(run_id: str, rank: int, body: str) -> str:
    """HMAC-SHA256 of one arrival under the job's token (``GPUDIAG_RDZV_TOKEN``).

    The token travels in the environment (readable only by the job's own user
    under /proc), never in argv or in the store, so a peer that can reach the
    store can read arrivals but cannot forge one.
    """
    token = os.environ.get(RDZV_TOKEN_ENV, "").encode()
    message = f"gpudiag-rdzv/1\n{run_id}\n{rank}\n{body}".encode()
    return hmac.new(token, message, hashlib.sha256).hexdigest()


def _verified_arrival(ctx: WorkerContext, rank: int, raw: bytes) -> dict[str, Any] | None:
    """The arrival's payload when its MAC is right and it is for ``rank``; else None."""
    try:
        outer = json.loads(raw.decode("utf-8"))
        body = outer["body"]
        mac = outer["mac"]
        if not (isinstance(body, str) and isinstance(mac, str)):
            return None
        if not hmac.compare_digest(mac, rendezvous_mac(ctx.run_id, rank, body)):
            return None
        data = json.loads(body)
        if not isinstance(data, dict) or data["row"]["rank"] != rank:
            return None
        return data
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError):
        return None


def rendezvous(
    ctx: WorkerContext, store: torch.distributed.Store, row: RankRow, row_error: str | None
) -> tuple[tuple[RankRow, ...], tuple[int, ...]]:
    """Publishes this rank's row and waits for every rank's (reporting arrivals).

    Every arrival carries an HMAC under the job's token; one without a valid
    MAC (a peer that is not a rank of this job) is refused, not counted as
    arrived, and reported. A real rank's later arrival overwrites it.

    Returns:
        (every rank's row, the ranks for which a forged arrival was refused).
    """
    payload = {"row": RankRow(**{**row.to_json(), "arrived": True}).to_json(), "error": row_error}
    body = json.dumps(payload)
    signed = json.dumps({"body": body, "mac": rendezvous_mac(ctx.run_id, ctx.rank, body)})
    store.set(f"arrived/{ctx.rank}", signed)
    keys = [f"arrived/{rank}" for rank in range(ctx.world_size)]
    verified: dict[int, dict[str, Any]] = {}
    refused: set[int] = set()
    last_raw: dict[int, bytes] = {}
    seen: tuple[list[int], list[int]] = ([], [])
    while True:
        for rank, key in enumerate(keys):
            if rank in verified or not store.check([key]):
                continue
            raw = store.get(key)
            if last_raw.get(rank) == raw:
                continue
            last_raw[rank] = raw
            data = _verified_arrival(ctx, rank, raw)
            if data is None:
                refused.add(rank)
            else:
                verified[rank] = data
        state = (sorted(verified), sorted(refused))
        if state != seen:
            seen = state
            waiting = [r for r in range(ctx.world_size) if r not in verified]
            text = (
                f"rendezvous: waiting for ranks {waiting}" if waiting else "rendezvous: all arrived"
            )
            if refused:
                text += f"; refused forged arrivals for ranks {sorted(refused)}"
            ctx.stage("ddp", text, arrived=state[0], forged=state[1])
        if len(verified) == ctx.world_size:
            break
        time.sleep(_POLL_S)
    rows: list[RankRow] = []
    errors: list[str] = []
    for rank in range(ctx.world_size):
        data = verified[rank]
        rows.append(RankRow.from_json(data["row"]))
        if data.get("error"):
            errors.append(str(data["error"]))
    if errors:
        raise _RankSetupError("; ".join(errors))
    return tuple(rows), tuple(sorted(refused))


def refused_notes(refused: tuple[int, ...]) -> tuple[str, ...]:
    if not refused:
        return ()
    return (
        f"refused forged rendezvous arrivals for ranks {list(refused)}: a peer that is not "
        "a rank of this job (no valid token) wrote to the store",
    )


class _RankSetupError(RuntimeError):
    """A rank could not take part (e.g. no GPU for its local rank)."""


def finish_store(ctx: WorkerContext, store: torch.distributed.Store) -> None:
    """Rank 0 hosts the TCPStore: it leaves only after every rank is done with it."""
    store.add("finished", 1)
    if ctx.rank != 0:
        return
    while store.add("finished", 0) < ctx.world_size:
        time.sleep(_POLL_S)
