"""Redaction: a snapshot without what identifies a machine or its users."""

from __future__ import annotations

import dataclasses

from gpudiag.model import LibraryFile, RdmaStack, Route, Snapshot


def _redact_routes(routes: tuple[Route, ...] | None) -> tuple[Route, ...] | None:
    if routes is None:
        return None
    networks: dict[str, str] = {}
    out = []
    for r in routes:
        net, _, prefix = r.destination.partition("/")
        if r.destination != "0.0.0.0/0":
            net = networks.setdefault(net, f"redacted-{len(networks) + 1}")
        gateway = None if r.gateway is None else "redacted"
        out.append(dataclasses.replace(r, destination=f"{net}/{prefix}", gateway=gateway))
    return tuple(out)


def _redact_paths(libs: tuple[LibraryFile, ...] | None) -> tuple[LibraryFile, ...] | None:
    if libs is None:
        return None
    return tuple(dataclasses.replace(f, path=f.path.rsplit("/", 1)[-1]) for f in libs)


def _redact_rdma(rdma: RdmaStack | None) -> RdmaStack | None:
    if rdma is None or rdma.hpcx is None:
        return rdma
    name = rdma.hpcx.path.rstrip("/").rsplit("/", 1)[-1]
    return dataclasses.replace(rdma, hpcx=dataclasses.replace(rdma.hpcx, path=name))


def redact_snapshot(snap: Snapshot) -> Snapshot:
    """The snapshot without what identifies a machine or its users, for a public
    bug report: the host name, and every process's PID, name and (since 1.4) Slurm job
    id (null). Process memory and whose it is (``this_job``) stay: the findings need
    them. Since 1.3 also the boot id, the interfaces' IPv4 addresses, ``MASTER_ADDR``
    and what it resolves to (interface names, their state and the NCCL variables other
    than ``MASTER_ADDR`` stay: the network findings need them). Since 1.4 the routes
    keep their interfaces, metrics and prefix lengths, but each destination other than
    the default route becomes ``redacted-N`` (one N per network, so duplicates still
    show) and each gateway ``redacted``; RoCE GIDs (IP and MAC addresses) become
    ``redacted``, and library paths their file names, as does the HPC-X folder
    (``node.rdma.hpcx.path``: its name says the version and the OFED it was built for)."""
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
            routes=_redact_routes(node.routes),
            ib_ports=None
            if node.ib_ports is None
            else tuple(
                dataclasses.replace(
                    p,
                    gids=None
                    if p.gids is None
                    else tuple(dataclasses.replace(g, gid="redacted") for g in p.gids),
                )
                for p in node.ib_ports
            ),
            nccl_libs=_redact_paths(node.nccl_libs),
            nccl_net_plugins=_redact_paths(node.nccl_net_plugins),
            rdma=_redact_rdma(node.rdma),
        )
    return dataclasses.replace(snap, hostname=None, gpus=gpus, node=node)
