"""One node's task of ``gpudiag fleet``: ``python -m gpudiag.probes.fleet_node`` (issue 19).

The launcher (srun, Open MPI's or MPICH's mpiexec) starts it once per node. It writes,
as framed lines on stdout (:mod:`gpudiag.core.fleet_frames`): a ``hello`` as it starts
(so a node that started but never finished is told from one that never started), the
node's ``snapshot`` (what ``gpudiag snapshot`` prints, ``GPUDIAG_SNAPSHOT_OVERRIDE``
applied), and with ``--probe`` the ``probe`` report: the reach phase
(:mod:`gpudiag.probes.fleet_reach`) and the all-reduce rounds
(:mod:`gpudiag.probes.fleet_pairs`) of the plan (:mod:`gpudiag.core.fleet_probe`). A
watchdog sends the report as it stands when the plan's time is up and exits, so a
stuck collective never keeps the node from answering.

The node's index comes from its launcher, as ``--index-from`` says: Slurm's
``SLURM_NODEID``, Open MPI's ``OMPI_COMM_WORLD_RANK``, MPICH/Hydra's ``PMI_RANK``.
``GPUDIAG_FLEET_PROBE_FAULT`` (read here only) plants a fault for the tests:
``hang`` (the node stops answering after its snapshot), ``unreachable`` (it connects
to a port nothing listens on: a real refused connection, as a rejecting firewall
gives), ``slow`` (each of its timed all-reduces waits 1 s first).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gpudiag.core.fleet_frames import encode
from gpudiag.core.fleet_probe import ProbePlan

INDEX_ENV = {
    "slurm": ("SLURM_NODEID", "SLURM_PROCID"),
    "openmpi": ("OMPI_COMM_WORLD_RANK",),
    "hydra": ("PMI_RANK",),
}
FAULT_ENV = "GPUDIAG_FLEET_PROBE_FAULT"
FAULTS = ("hang", "unreachable", "slow")
#: Seconds past the plan's end before the watchdog sends what it has.
WATCHDOG_GRACE_S = 2.0


def task_index(launcher: str, env: Mapping[str, str]) -> int | None:
    for key in INDEX_ENV[launcher]:
        text = env.get(key, "").strip()
        if text.isascii() and text.isdigit() and len(text) <= 7:
            return int(text)
    return None


#: Held while a payload is written: the watchdog's exit waits for a snapshot being sent.
_OUT = threading.Lock()


def emit(task: int, kind: str, text: str) -> None:
    """Write one payload's lines, each in one ``write`` (atomic on a pipe)."""
    lines = encode(task, kind, text)
    with _OUT:
        for line in lines:
            data = (line + "\n").encode("ascii")
            while data:
                data = data[os.write(1, data) :]


class _Report:
    """The probe report, sent once: by the main thread, or by the watchdog."""

    def __init__(self, task: int) -> None:
        self.task = task
        self.doc: dict[str, Any] = {"node": task, "backend": None, "error": None,
                                    "reach": None, "pairs": []}  # fmt: skip
        self._lock = threading.Lock()
        self._sent = False

    def send(self, *, late: bool = False) -> None:
        with self._lock:
            if self._sent:
                return
            self._sent = True
            doc = dict(self.doc)
            if late and not doc.get("error"):
                doc["error"] = "the probe ran out of time (the watchdog sent this report)"
            emit(self.task, "probe", json.dumps(doc))


def _snapshot() -> str:
    from gpudiag.collect import collect_snapshot
    from gpudiag.snapshot import dump_snapshot
    from gpudiag.snapshot.override import ENV, apply_override

    captured = collect_snapshot(with_torch=True)
    if os.environ.get(ENV):
        captured = apply_override(captured, os.environ[ENV])
    return dump_snapshot(captured)


def _lead(plan: ProbePlan, report: _Report, slow: bool) -> None:
    """Node 0: listen on MASTER_ADDR:MASTER_PORT, host the store, run its pairs."""
    from gpudiag.probes.fleet_pairs import pick_backend, run_pairs, store_server
    from gpudiag.probes.fleet_reach import bind, serve

    sock, error = bind(plan.master_addr, plan.master_port)
    reach: dict[str, Any] = {"role": "listen", "ok": sock is not None, "error": error, "heard": []}
    report.doc["reach"] = reach
    if sock is None:
        return
    store_sock, error = bind(plan.master_addr, 0)
    if store_sock is None:
        report.doc["error"] = f"no port for the key-value store: {error}"
        return
    store_port = int(store_sock.getsockname()[1])
    heard: set[int] = set()
    listener = threading.Thread(
        target=serve, args=(sock, plan.run_id, plan.nodes, plan.reach_end, store_port, heard),
        daemon=True, name="gpudiag-reach",
    )  # fmt: skip
    listener.start()
    report.doc["backend"] = backend = pick_backend()
    server = store_server(store_sock.detach(), plan.master_addr, store_port, plan.end + 5)
    report.doc["pairs"] = run_pairs(plan, 0, plan.master_addr, store_port, backend, slow)
    listener.join(max(0.0, plan.reach_end - time.time()) + 1.0)
    reach["heard"] = sorted(heard)
    server.add("finished", 1)
    # The store lives here: keep it until every node that reached it is done.
    while server.add("finished", 0) < len(heard) + 1 and time.time() < plan.end + 1:
        time.sleep(0.05)
    sock.close()


def _follow(plan: ProbePlan, node: int, report: _Report, fault: str | None) -> None:
    """Any other node: reach node 0, then run its pairs through node 0's store."""
    from gpudiag.probes.fleet_reach import dial, refused_port

    port = refused_port() if fault == "unreachable" else plan.master_port
    reach = dial(plan.master_addr, port, plan.run_id, node, plan.reach_end, plan.master_port)
    store_port = reach.pop("store_port", None)
    report.doc["reach"] = reach
    if store_port is None:
        return
    from gpudiag.probes.fleet_pairs import pick_backend, run_pairs, store_client

    report.doc["backend"] = backend = pick_backend()
    report.doc["pairs"] = run_pairs(plan, node, plan.master_addr, store_port, backend,
                                    fault == "slow")  # fmt: skip
    with contextlib.suppress(Exception):  # node 0 gone already: nothing left to tell it
        store_client(plan.master_addr, store_port, time.time() + 5).add("finished", 1)


def _import_torch() -> None:
    with contextlib.suppress(Exception):  # the probe reports the import's failure itself
        import torch.distributed  # noqa: F401


def probe(plan: ProbePlan, node: int, fault: str | None, report: _Report) -> None:
    """Run this node's part of the plan; the report is sent by the caller."""
    from gpudiag.probes.rendezvous import RDZV_TOKEN_ENV

    if not os.environ.get(RDZV_TOKEN_ENV):
        report.doc["error"] = (
            f"no {RDZV_TOKEN_ENV} in this node's environment: the launcher did not pass "
            "gpudiag's environment on (srun --export, mpiexec -x)"
        )
        return
    # torch's import takes seconds (more with a cold file system): start it now, beside
    # the reach phase, so the first round does not spend its time on it.
    threading.Thread(target=_import_torch, daemon=True, name="gpudiag-import-torch").start()
    try:
        if node == 0:
            _lead(plan, report, fault == "slow")
        else:
            _follow(plan, node, report, fault)
    except Exception as exc:  # torch missing or broken on this node, …
        report.doc["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def start_probe(plan: ProbePlan, node: int, fault: str | None) -> tuple[threading.Thread, _Report]:
    """The probe, started beside the snapshot (the plan's phases start at launch, not
    after a snapshot of unknown length), with a watchdog that sends the report as it
    stands, and exits, once the plan's time is up."""
    report = _Report(node)

    def late() -> None:
        report.send(late=True)
        os._exit(0)

    watchdog = threading.Timer(max(0.0, plan.end + WATCHDOG_GRACE_S - time.time()), late)
    watchdog.daemon = True
    watchdog.start()
    thread = threading.Thread(target=probe, args=(plan, node, fault, report), daemon=True,
                              name="gpudiag-fleet-probe")  # fmt: skip
    thread.start()
    return thread, report


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpudiag.probes.fleet_node")
    parser.add_argument("--index-from", choices=sorted(INDEX_ENV), required=True)
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--master-addr", default="")
    parser.add_argument("--master-port", type=int, default=0)
    parser.add_argument("--run-id", default="")
    parser.add_argument("--reach-end", type=float, default=0.0)
    parser.add_argument("--slot", type=float, default=0.0)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    index = task_index(args.index_from, os.environ)
    if index is None or not 0 <= index < args.nodes:
        names = " or ".join(INDEX_ENV[args.index_from])
        print(f"gpudiag fleet: no node index in {names} (below {args.nodes})", file=sys.stderr)
        return 2
    fault = os.environ.get(FAULT_ENV) or None
    if fault not in (None, *FAULTS):
        print(f"gpudiag fleet: {FAULT_ENV}={fault!r} is none of {', '.join(FAULTS)}",
              file=sys.stderr)  # fmt: skip
        return 2
    hello = {"node": index, "node_name": os.environ.get("SLURMD_NODENAME"),
             "host": socket.gethostname(), "pid": os.getpid()}  # fmt: skip
    emit(index, "hello", json.dumps(hello))
    plan = None
    if args.probe:
        plan = ProbePlan(args.master_addr, args.master_port, args.run_id, args.nodes,
                         args.reach_end, args.slot)  # fmt: skip
    running = start_probe(plan, index, fault) if plan and fault != "hang" else None
    code = 0
    try:
        emit(index, "snapshot", _snapshot())
    except Exception as exc:  # a bad GPUDIAG_SNAPSHOT_OVERRIDE, …: the parent names the node
        print(f"gpudiag fleet: no snapshot: {' '.join(str(exc).split())[:300]}", file=sys.stderr)
        code = 1
    if plan is not None and fault == "hang":
        while True:  # a node that stops answering after its snapshot: no report at all
            time.sleep(3600)
    if running is not None:
        thread, report = running
        thread.join()  # bounded: the watchdog sends the report and exits past the plan
        report.send()
        os._exit(code)  # threads left in a stuck collective must not hold the exit
    return code


if __name__ == "__main__":
    sys.exit(main())
