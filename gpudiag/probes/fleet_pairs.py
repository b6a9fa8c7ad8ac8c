"""``gpudiag fleet --probe``, the all-reduce rounds: each pair of ring neighbours runs a
short all-reduce through node 0's key-value store (issue 19).

Gloo over TCP where the node has no GPU, NCCL on ``cuda:0`` where it has one (what the
job's collectives will use). Each pair is its own process group, built directly
(``ProcessGroupGloo`` / ``ProcessGroupNCCL`` on a ``PrefixStore``, as torch's
``new_group`` does), so a dead partner cannot block the other pairs. Before the group
is built both sides publish an arrival signed with the run's token, as the ddp probe's
rendezvous does (:func:`gpudiag.probes.rendezvous.rendezvous_mac`); an unsigned one is
not taken for the partner. Every wait is bounded by the round's end (a wall-clock time
of the plan), and each pair runs in a thread the caller abandons past it.
"""

from __future__ import annotations

import hmac
import json
import os
import socket
import statistics
import threading
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from gpudiag.core.fleet_probe import ALLREDUCE_BYTES, ALLREDUCE_ITERS, ProbePlan, pairs_of
from gpudiag.probes.rendezvous import rendezvous_mac

if TYPE_CHECKING:
    import torch.distributed

_POLL_S = 0.05
#: The ``slow`` fault's delay before each timed all-reduce on the faulty node.
SLOW_FAULT_S = 1.0


def store_server(fd: int, addr: str, port: int, until: float) -> torch.distributed.Store:
    """Node 0's TCPStore on the socket it already bound (``master_listen_fd``)."""
    import torch.distributed as dist

    timeout = timedelta(seconds=max(1.0, until - time.time()))
    return dist.TCPStore(addr, port, None, True, timeout, wait_for_workers=False,
                         multi_tenant=False, master_listen_fd=fd)  # fmt: skip


def store_client(addr: str, port: int, until: float) -> torch.distributed.Store:
    import torch.distributed as dist

    timeout = timedelta(seconds=max(1.0, until - time.time()))
    store = dist.TCPStore(addr, port, None, False, timeout, wait_for_workers=False)
    store.set_timeout(timeout)
    return store


def pick_backend() -> str:
    """``nccl`` where torch sees a GPU and has NCCL, else ``gloo``."""
    import torch
    import torch.distributed as dist

    if torch.cuda.is_available() and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def _arrival(plan: ProbePlan, key: str, node: int) -> str:
    body = json.dumps({"node": node, "host": socket.gethostname(), "pid": os.getpid()})
    return json.dumps({"body": body, "mac": rendezvous_mac(plan.run_id, node, f"{key}\n{body}")})


def _verified(plan: ProbePlan, key: str, node: int, raw: bytes) -> bool:
    try:
        outer = json.loads(raw.decode("utf-8"))
        body, their = outer["body"], outer["mac"]
        if not isinstance(body, str) or not isinstance(their, str):
            return False
        good = rendezvous_mac(plan.run_id, node, f"{key}\n{body}")
        return hmac.compare_digest(their, good) and json.loads(body).get("node") == node
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        return False


def one_pair(
    plan: ProbePlan, store: torch.distributed.Store, round_: int, a: int, b: int, node: int,
    backend: str, slow: bool, state: dict[str, Any],
) -> None:  # fmt: skip
    """Run pair (a, b) from ``node``'s side; fills ``state`` (stage, ok, seconds, error)."""
    import torch
    import torch.distributed as dist

    end = plan.round_end(round_)
    peer = b if node == a else a
    rank = 0 if node == a else 1
    key = f"{round_}/{a}-{b}"
    prefix = dist.PrefixStore(f"gpudiag-fleet/{plan.run_id}/{key}/", store)
    state["stage"] = f"waiting for node #{peer}"
    prefix.set(f"arrived/{node}", _arrival(plan, key, node))
    forged = 0
    while True:
        if prefix.check([f"arrived/{peer}"]):
            if _verified(plan, key, peer, prefix.get(f"arrived/{peer}")):
                break
            forged += 1
        if time.time() >= end:
            extra = " (a forged arrival was refused)" if forged else ""
            state["error"] = f"node #{peer} never arrived{extra}"
            return
        time.sleep(_POLL_S)
    timeout = timedelta(seconds=max(1.0, end - time.time()))
    state["stage"] = f"{backend} init"
    pg_store = dist.PrefixStore("pg/", prefix)
    if backend == "nccl":
        torch.cuda.set_device(0)
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        pg: Any = dist.ProcessGroupNCCL(pg_store, rank, 2, options)
        device = torch.device("cuda", 0)
    else:
        pg = dist.ProcessGroupGloo(pg_store, rank, 2, timeout)
        device = torch.device("cpu")
    tensor = torch.empty(ALLREDUCE_BYTES // 4, dtype=torch.float32, device=device)
    times = []
    for i in range(ALLREDUCE_ITERS + 1):
        state["stage"] = f"all-reduce {i + 1} of {ALLREDUCE_ITERS + 1}"
        tensor.fill_(float(rank + 1))
        if slow and i:
            time.sleep(SLOW_FAULT_S)
        start = time.perf_counter()
        pg.allreduce([tensor]).wait(timeout)
        if backend == "nccl":
            torch.cuda.synchronize(device)
        if i:  # the first one warms up (connections, NCCL's channels)
            times.append(time.perf_counter() - start)
        if not bool((tensor == 3.0).all()):
            state["error"] = f"wrong result: the sum over 2 nodes of 1 and 2 is not 3 ({backend})"
            return
    state.update(ok=True, seconds=round(statistics.median(times), 6), stage="done")


def run_pairs(
    plan: ProbePlan, node: int, addr: str, store_port: int, backend: str, slow: bool
) -> list[dict[str, Any]]:
    """Every pair ``node`` is in, in round order, each bounded by its round's end."""
    out: list[dict[str, Any]] = []
    stuck = False
    for round_, a, b in pairs_of(plan.nodes, node):
        peer = b if node == a else a
        end = plan.round_end(round_)
        state: dict[str, Any] = {"ok": False, "seconds": None, "error": None, "stage": "start"}
        if stuck or time.time() >= end:
            why = "an earlier NCCL pair is stuck" if stuck else "its round ended first"
            out.append({"peer": peer, "round": round_, "ok": False, "seconds": None,
                        "error": f"not run: {why}"})  # fmt: skip
            continue

        def work(state: dict[str, Any] = state, round_: int = round_, a: int = a,
                 b: int = b, end: float = end) -> None:  # fmt: skip
            try:
                store = store_client(addr, store_port, end)
                one_pair(plan, store, round_, a, b, node, backend, slow, state)
            except Exception as exc:  # torch's errors: RuntimeError, DistBackendError, …
                text = " ".join(str(exc).split())[:200] or type(exc).__name__
                state["error"] = f"{state['stage']}: {text}"

        thread = threading.Thread(target=work, daemon=True, name=f"gpudiag-pair-{a}-{b}")
        thread.start()
        thread.join(max(0.0, end - time.time()) + 1.0)
        if thread.is_alive():
            state["error"] = f"timed out at {state['stage']}"
            stuck = backend == "nccl"  # a hung NCCL kernel holds the GPU
        out.append({"peer": peer, "round": round_, "ok": bool(state["ok"]) and not state["error"],
                    "seconds": state["seconds"], "error": state["error"]})  # fmt: skip
    return out
