"""Redaction: a snapshot without what identifies a machine or its users."""

from __future__ import annotations

import dataclasses

from gpudiag.model import Snapshot


def redact_snapshot(snap: Snapshot) -> Snapshot:
    """The snapshot without what identifies a machine or its users, for a public
    bug report: the host name, and every process's PID, name and (since 1.4) Slurm job
    id (null). Process memory and whose it is (``this_job``) stay: the findings need
    them. Since 1.3 also the boot id, the interfaces' IPv4 addresses, ``MASTER_ADDR``
    and what it resolves to (interface names, their state and the NCCL variables other
    than ``MASTER_ADDR`` stay: the network findings need them)."""
    gpus = tuple(
        dataclasses.replace(
            gpu,
            processes=tuple(
                dataclasses.replace(p, pid=None, name=None, slurm_job_id=None)
                for p in gpu.processes
            ),
        )
        for gpu in snap.gpus
    )
    node = snap.node
    if node is not None:
        node = dataclasses.replace(
            node,
            boot_id=None,
            interfaces=None
            if node.interfaces is None
            else tuple(dataclasses.replace(i, ipv4=None) for i in node.interfaces),
            nccl_env={k: v for k, v in node.nccl_env.items() if k != "MASTER_ADDR"},
            master_addr_ips=None,
            master_addr_error=None,
        )
    return dataclasses.replace(snap, hostname=None, gpus=gpus, node=node)
