"""Compare the nodes of one allocation (``gpudiag fleet``, issue 19): a pure function of
N snapshots, linear in N.

Every fact is grouped by value in one pass; the largest group is "the others" and every
node outside it is named, with its value. Facts a snapshot did not record (None) are
left out of the comparison, never counted as a difference. Finding codes are declared
in :mod:`gpudiag.findings.catalog` (area ``fleet``) and documented in docs/findings.md.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from gpudiag.core.fleet_base import (
    NAMES_SHOWN,
    FleetNode,
    _duplicates,
    _nodes,
    _per_node,
    _skew,
    label_nodes,
    names,
)
from gpudiag.core.fleet_rdma import driver_stack, hca_firmware, hpcx_reason
from gpudiag.core.nccl_net import plugin_state
from gpudiag.core.netif import is_loopback, loopback_address, parse_ifname, usable
from gpudiag.model import Finding, Snapshot

__all__ = ["NAMES_SHOWN", "FleetNode", "compare_fleet", "label_nodes", "names", "node_health"]

#: Variables whose value must be the same on every node (nccl_env keys).
SAME_EVERYWHERE_PREFIXES = ("NCCL_",)
SAME_EVERYWHERE = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE")
#: compute modes that let more than one process use a GPU (NVML's names).
_SHARED_MODES = ("Default", "DEFAULT")
_HPCX_FIX = (
    "use the HPC-X build for the node's OFED (hpcx-<version>-gcc-<ofed>-…: mlnx_ofed, "
    "doca_ofed or inbox; ofed_info -s names the node's), or install that OFED"
)


def _gpu_count(s: Snapshot) -> int | None:
    nvml = s.sources.get("nvml")
    if nvml is not None and nvml.status != "ok":
        return None
    return sum(1 for g in s.gpus if not g.lost)


def _gpu_models(s: Snapshot) -> tuple[str, ...] | None:
    models = tuple(sorted({g.name for g in s.gpus if g.name}))
    return models or None


def _lost(s: Snapshot) -> str | None:
    lost = [str(g.nvml_index) for g in s.gpus if g.lost]
    return f"GPU {', '.join(lost)} lost (fell off the bus)" if lost else None


def _mig(s: Snapshot) -> str | None:
    on = [str(g.nvml_index) for g in s.gpus if g.mig_enabled]
    return f"MIG enabled on GPU {', '.join(on)}" if on else None


def _compute_mode(s: Snapshot) -> str | None:
    odd = [f"GPU {g.nvml_index} {g.compute_mode}" for g in s.gpus
           if g.compute_mode and g.compute_mode not in _SHARED_MODES]  # fmt: skip
    return ", ".join(odd) if odd else None


def _ecc(s: Snapshot) -> str | None:
    bad = []
    for g in s.gpus:
        if (g.ecc_uncorrectable_volatile or 0) > 0 or g.remapped_rows_failure:
            bad.append(f"GPU {g.nvml_index}")
        elif g.retired_pages_pending:
            bad.append(f"GPU {g.nvml_index} (retired pages pending)")
    return f"uncorrectable ECC errors on {', '.join(bad)}" if bad else None


def _env(s: Snapshot, key: str) -> str | None:
    if s.node is None:
        return None
    return s.node.nccl_env.get(key, "unset")


def _ifname(s: Snapshot) -> str | None:
    node = s.node
    if node is None or node.interfaces is None:
        return None
    text = node.nccl_env.get("NCCL_SOCKET_IFNAME")
    if not text:
        return None
    spec = parse_ifname(text)
    picked = usable(node.interfaces, spec)
    if not picked:
        present = ", ".join(i.name for i in node.interfaces) or "none"
        return f"NCCL_SOCKET_IFNAME={text} matches no interface with IPv4 (present: {present})"
    return None


def _loopback_only(multi: bool) -> Callable[[Snapshot], str | None]:
    def test(s: Snapshot) -> str | None:
        node = s.node
        if node is None or node.interfaces is None:
            return None
        text = node.nccl_env.get("NCCL_SOCKET_IFNAME")
        if text:
            picked = usable(node.interfaces, parse_ifname(text))
            if multi and picked and all(is_loopback(i) for i in picked):
                return f"NCCL_SOCKET_IFNAME={text} leaves only loopback ({picked[0].name})"
        if not any(i.ipv4 and not is_loopback(i) for i in node.interfaces):
            return "no IPv4 address outside loopback"
        return None

    return test


def _master_addr(multi: bool) -> Callable[[Snapshot], str | None]:
    def test(s: Snapshot) -> str | None:
        node = s.node
        if node is None or not node.master_addr:
            return None
        if node.master_addr_error:
            return f"MASTER_ADDR={node.master_addr} does not resolve ({node.master_addr_error})"
        ips = node.master_addr_ips or ()
        if multi and ips and all(loopback_address(a) for a in ips):
            return f"MASTER_ADDR={node.master_addr} resolves to {ips[0]} (loopback)"
        return None

    return test


def _ib_active(s: Snapshot) -> str | None:
    if s.node is None or s.node.ib_ports is None:
        return None
    active = [p for p in s.node.ib_ports if p.state == "ACTIVE"]
    if not active:
        return "no active InfiniBand/RoCE port"
    layers = sorted({p.link_layer or "?" for p in active})
    return "active " + "+".join("RoCE" if x == "Ethernet" else x for x in layers)


def compare_fleet(nodes: Sequence[FleetNode]) -> list[Finding]:
    """The FLEET- findings of ``nodes`` (labelled by :func:`label_nodes`), in a fixed order."""
    nodes = label_nodes(nodes) if any(not n.label for n in nodes) else list(nodes)
    out: list[Finding | None] = []
    silent = [n for n in nodes if n.snapshot is None]
    if silent:
        reasons = "; ".join(f"{n.label}: {n.error or 'no snapshot'}" for n in silent[:NAMES_SHOWN])
        more = f"; and {len(silent) - NAMES_SHOWN} more" if len(silent) > NAMES_SHOWN else ""
        out.append(Finding(
            code="FLEET-NODE-NO-ANSWER", severity="error",
            message=f"{_nodes(len(silent))} of {len(nodes)} gave no snapshot: {reasons}{more}.",
            fix="check that node (sinfo -R, scontrol show node NAME); the job would hang or "
                "fail there: exclude it (sbatch --exclude=NAME) or wait for it to recover.",
            subject=",".join(n.label for n in silent[:NAMES_SHOWN]),
        ))  # fmt: skip
    multi = len(nodes) > 1
    dup = _duplicates(nodes, lambda s: s.hostname)
    if dup:
        out.append(Finding(
            code="FLEET-DUPLICATE-HOSTNAME", severity="error",
            message=f"Several snapshots share one host name: {'; '.join(dup[:NAMES_SHOWN])}.",
            fix="give every node its own host name (NCCL and torch's rendezvous tell nodes "
                "apart by it)",
            subject=dup[0].split(" ", 1)[0],
        ))  # fmt: skip
    dup = _duplicates(nodes, lambda s: s.node.boot_id if s.node else None)
    if dup:
        out.append(Finding(
            code="FLEET-DUPLICATE-BOOT-ID", severity="error",
            message=f"Several snapshots share one boot id: {'; '.join(dup[:NAMES_SHOWN])}.",
            fix="one machine was captured twice: run one task per node "
                "(srun --ntasks-per-node=1) and check the node list",
            subject=dup[0].split(" ", 1)[0],
        ))  # fmt: skip
    same = "install the same {} on every node (the same container image, or module set)"
    out += [
        _skew(nodes, lambda s: s.driver_version, code="FLEET-DRIVER-SKEW", severity="warning",
              what="NVIDIA driver", fix=same.format("NVIDIA driver")),
        _skew(nodes, lambda s: s.cuda_driver_version, code="FLEET-DRIVER-SKEW",
              severity="warning", what="CUDA driver API version",
              fix=same.format("NVIDIA driver")),
        _skew(nodes, lambda s: s.torch.version if s.torch else None, code="FLEET-TORCH-SKEW",
              severity="error", what="torch version", fix=same.format("torch")),
        _skew(nodes, lambda s: s.torch.cuda_version if s.torch else None,
              code="FLEET-TORCH-SKEW", severity="error", what="torch's CUDA build",
              fix=same.format("torch build")),
        _skew(nodes, lambda s: s.node.nccl_version if s.node else None, code="FLEET-NCCL-SKEW",
              severity="error", what="NCCL version", fix=same.format("NCCL")),
        _skew(nodes, lambda s: plugin_state(s.node) if s.node else None,
              code="FLEET-NET-PLUGIN-SKEW", severity="error", what="The NCCL network plugin",
              fix="install the plugin on every node, or put its folder on LD_LIBRARY_PATH "
                  "everywhere (the same container image or module set)"),
        _skew(nodes, driver_stack, code="FLEET-IB-DRIVER-SKEW", severity="warning",
              what="The InfiniBand/RoCE driver stack",
              fix="install one MLNX_OFED/DOCA-OFED release on every node (host driver and "
                  "image), then the HPC-X and NCCL plugin built for it"),
        _skew(nodes, hca_firmware, code="FLEET-HCA-FW-SKEW", severity="warning",
              what="HCA firmware", shown=lambda v: " + ".join(v),  # type: ignore[arg-type]
              fix="flash every HCA with the firmware the installed MLNX_OFED/DOCA-OFED "
                  "release lists (mlxfwmanager --online -u), then reboot or mlxfwreset"),
        _skew(nodes, lambda s: s.node.os_name if s.node else None, code="FLEET-IMAGE-SKEW",
              severity="warning", what="operating system / image",
              fix=same.format("operating system / image")),
        _skew(nodes, _gpu_count, code="FLEET-GPU-COUNT", severity="error",
              what="The number of GPUs", shown=lambda v: f"{v} GPU{'s' if v != 1 else ''}",
              fix="a node with fewer GPUs breaks a fixed --nproc-per-node: check it "
                  "(nvidia-smi, dmesg for Xid 79) and exclude it, or request GPUs per node "
                  "(--gpus-per-node)"),
        _skew(nodes, _gpu_models, code="FLEET-GPU-MODEL", severity="warning",
              what="The GPU model", shown=lambda v: " + ".join(v),  # type: ignore[arg-type]
              fix="request one GPU type (--constraint or --gres=gpu:TYPE:N): the slowest GPU "
                  "sets the pace of every collective"),
    ]  # fmt: skip
    keys = sorted({k for n in nodes if n.snapshot is not None and n.snapshot.node is not None
                   for k in n.snapshot.node.nccl_env
                   if k in SAME_EVERYWHERE or k.startswith(SAME_EVERYWHERE_PREFIXES)})  # fmt: skip
    for key in keys:
        out.append(_skew(
            nodes, functools.partial(_env, key=key), code="FLEET-ENV-SKEW", severity="warning",
            what=key, shown=lambda v: "it unset" if v == "unset" else f"{v!r}",
            fix=f"set {key} the same way on every node (export it before srun/mpirun, "
                "which pass the environment on)",
        ))  # fmt: skip
    out += [
        _per_node(nodes, _lost, code="FLEET-GPU-LOST", severity="error",
                  fix="reset or drain the node (nvidia-smi -r, or a reboot); exclude it "
                      "meanwhile"),
        _per_node(nodes, _ecc, code="FLEET-GPU-ECC", severity="error",
                  fix="drain the node and have the GPU checked "
                      "(nvidia-smi -q -d ECC,ROW_REMAPPER)"),
        _per_node(nodes, _mig, code="FLEET-GPU-MIG", severity="warning",
                  fix="disable MIG (nvidia-smi -i N -mig 0) or exclude the node: a process "
                      "sees one MIG instance, with no P2P or NVLink between them"),
        _per_node(nodes, _compute_mode, code="FLEET-GPU-COMPUTE-MODE", severity="warning",
                  fix="nvidia-smi -i N -c DEFAULT: EXCLUSIVE_PROCESS refuses a second process "
                      "(a DataLoader worker, a second rank) on the GPU"),
        _per_node(nodes, _ifname, code="FLEET-IFNAME-MISSING", severity="error",
                  fix="set NCCL_SOCKET_IFNAME to a prefix every node has (ip -br addr on each "
                      "node), or unset it"),
        _per_node(nodes, _loopback_only(multi), code="FLEET-NO-IPV4", severity="error",
                  fix="give NCCL a routable interface: NCCL_SOCKET_IFNAME naming one with an "
                      "IPv4 address on every node (not lo; since NCCL 2.3.5 ^docker0 does not "
                      "exclude lo)"),
        _per_node(nodes, _master_addr(multi), code="FLEET-MASTER-ADDR", severity="error",
                  fix="set MASTER_ADDR to rank 0's routable address (not a name /etc/hosts "
                      "maps to 127.0.1.1), e.g. $(scontrol show hostnames "
                      "$SLURM_JOB_NODELIST | head -n1)"),
        _per_node(nodes, hpcx_reason("warning"), code="FLEET-HPCX-OFED", severity="warning",
                  fix=_HPCX_FIX),
        _per_node(nodes, hpcx_reason("info"), code="FLEET-HPCX-OFED", severity="info",
                  fix=_HPCX_FIX),
        _skew(nodes, _ib_active, code="FLEET-IB-PARTIAL", severity="warning",
              what="InfiniBand/RoCE",
              fix="NCCL uses sockets where no RDMA port is active (NCCL_DEBUG=INFO prints "
                  "'NET/Socket'): check ibstat and the RDMA driver on those nodes"),
    ]  # fmt: skip
    old = [n.label for n in nodes if n.snapshot is not None and n.snapshot.node is None]
    if old:
        out.append(Finding(
            code="FLEET-NODE-FACTS-MISSING", severity="info",
            message=f"{_nodes(len(old))} recorded no node facts (a snapshot older than schema "
                    f"1.3): {names(old)}; the network and NCCL comparisons leave them out.",
            fix="take the snapshots with this gpudiag (gpudiag snapshot -o FILE)",
            subject=",".join(old[:NAMES_SHOWN]),
        ))  # fmt: skip
    return [f for f in out if f is not None]


def node_health(snapshot: Snapshot) -> list[str]:
    """Short words for what is wrong with a node's GPUs (empty: nothing recorded)."""
    words = []
    lost = sum(1 for g in snapshot.gpus if g.lost)
    if lost:
        words.append(f"{lost} lost")  # the row's GPU count leaves them out
    if _ecc(snapshot):
        words.append("ECC")
    if _mig(snapshot):
        words.append("MIG")
    if _compute_mode(snapshot):
        words.append("EXCL")
    return words
