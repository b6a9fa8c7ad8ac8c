"""The InfiniBand/RoCE driver stack across nodes (``gpudiag fleet``, issue 19: "an
InfiniBand driver that does not match HPC-X"): pure functions of snapshot 1.4's
``node.rdma``, the facts :mod:`gpudiag.backends.rdma` reads.

* :func:`driver_stack`: MLNX_OFED / DOCA-OFED user space (what ``ofed_info -s`` prints)
  and the kernel's ``mlx5_core`` (its version, or the inbox driver), compared by
  ``FLEET-IB-DRIVER-SKEW``;
* :func:`hca_firmware`: each HCA's type and firmware (``FLEET-HCA-FW-SKEW``);
* :func:`hpcx_mismatch`: the OFED an HPC-X was built for against the node's
  (``FLEET-HPCX-OFED``). UCX, HPC-X's transport, "has to be run with same MLNX_OFED /
  libibverbs version it was built with" (its maintainer, openucx/ucx#5469), and NVIDIA's
  hpc-container-maker picks the HPC-X build by "the version of Mellanox OFED that should
  be matched" (``hpccm/building_blocks/hpcx.py``). An HPC-X named for MLNX_OFED 4.x uses
  the legacy ``ibv_exp_*`` verbs that MLNX_OFED 5.0's upstream (rdma-core) libraries and
  the inbox drivers lack (openucx/ucx#4883: "UCX was compiled with MLNX_OFED legacy libs,
  but ran on a machine with MLNX_OFED upstream libs or Inbox drivers"; #4770). A
  warning only when the node's MLNX_OFED user space (``ofed_info``, the libraries HPC-X
  links) proves the difference; info when only the kernel driver tells, or when the
  build's flavour (MLNX_OFED, DOCA-OFED, inbox) differs from the node's without a
  version to compare.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gpudiag.model import Snapshot
from gpudiag.network import RdmaStack

_SERIES = re.compile(r"(\d+)(?:\.(\d+))?")


def _rdma(s: Snapshot) -> RdmaStack | None:
    return s.node.rdma if s.node is not None else None


def kernel_driver(rdma: RdmaStack) -> str | None:
    """``mlx5_core 23.10-1.1.9`` (MLNX_OFED/DOCA-OFED's module) or ``inbox mlx5_core``;
    None when the driver is not loaded (or not known to be)."""
    if not rdma.mlx5_core_loaded:
        return None
    version = rdma.mlx5_core_version
    if not version or version == rdma.kernel_release:
        return "inbox mlx5_core"
    return f"mlx5_core {version}"


def driver_stack(s: Snapshot) -> str | None:
    """The node's RDMA driver stack in words, where the ConnectX driver is loaded:
    ``MLNX_OFED_LINUX-23.10-1.1.9.0 (mlx5_core 23.10-1.1.9)``."""
    rdma = _rdma(s)
    kernel = kernel_driver(rdma) if rdma is not None else None
    if rdma is None or kernel is None:
        return None
    return f"{rdma.ofed or 'no ofed_info'} ({kernel})"


def hca_firmware(s: Snapshot) -> tuple[str, ...] | None:
    """Each distinct ``hca_type firmware`` of the node's RDMA devices, sorted."""
    rdma = _rdma(s)
    if rdma is None or not rdma.devices:
        return None
    seen = {f"{d.hca_type} {d.fw_ver}" if d.hca_type else d.fw_ver
            for d in rdma.devices if d.fw_ver}  # fmt: skip
    return tuple(sorted(seen)) or None


def ofed_series(text: str) -> tuple[str, str] | None:
    """``("MLNX_OFED", "23.10")`` of ``MLNX_OFED_LINUX-23.10-1.1.9.0``; ``("DOCA-OFED",
    "24.10")`` of ``OFED-internal-24.10-1.1.4.0`` (``ofed_info -s``'s two spellings)."""
    match = re.match(r"(MLNX_OFED_LINUX|OFED-internal)-(\d+\.\d+)", text.strip())
    if not match:
        return None
    return ("MLNX_OFED" if match.group(1) == "MLNX_OFED_LINUX" else "DOCA-OFED"), match.group(2)


def hpcx_target(ofed: str) -> tuple[str, str | None] | None:
    """What an HPC-X was built for, from its ``OFED:`` line or folder name:
    ``MLNX_OFED_LINUX-4.7-1.0.0.1`` → ``("MLNX_OFED", "4.7")``, ``MLNX_OFED_LINUX-5`` →
    ``("MLNX_OFED", "5")``, ``mlnx_ofed`` → ``("MLNX_OFED", None)``, ``doca_ofed`` →
    ``("DOCA-OFED", None)``, ``inbox`` → ``("inbox", None)``; None for another word."""
    text = ofed.strip()
    match = re.match(r"MLNX_OFED_LINUX-(\d+(?:\.\d+)?)", text, re.I)
    if match:
        return "MLNX_OFED", match.group(1)
    low = text.lower()
    if low.startswith("mlnx_ofed"):
        return "MLNX_OFED", None
    if low.startswith("doca"):
        return "DOCA-OFED", None
    return ("inbox", None) if low == "inbox" else None


def _node_series(rdma: RdmaStack) -> tuple[str, str | None, str, bool] | None:
    """(flavour, series, in words, told by the user space) of the node's RDMA stack."""
    if rdma.ofed:
        parsed = ofed_series(rdma.ofed)
        return (*parsed, rdma.ofed, True) if parsed else None
    kernel = kernel_driver(rdma)
    if kernel is None:
        return None
    if kernel.startswith("inbox"):
        return "inbox", None, "the inbox driver (no MLNX_OFED or DOCA-OFED)", False
    match = _SERIES.match(rdma.mlx5_core_version or "")
    series = f"{match.group(1)}.{match.group(2)}" if match and match.group(2) else None
    return "MLNX_OFED", series, kernel, False


def _differ(built: str, series: str) -> bool:
    """Whether a build for ``built`` (``4.7`` or a major, ``5``) differs from ``series``:
    a major names an era, before 5 (legacy verbs) or from 5 (rdma-core: 5.x, 23.x…)."""
    if "." in built:
        return built != series
    return (int(built) < 5) != (int(series.split(".")[0]) < 5)


def hpcx_mismatch(s: Snapshot) -> tuple[str, str] | None:
    """(severity, reason) where the node's HPC-X was built for another RDMA stack."""
    rdma = _rdma(s)
    if rdma is None or rdma.hpcx is None or not rdma.hpcx.ofed:
        return None
    target = hpcx_target(rdma.hpcx.ofed)
    node = _node_series(rdma)
    if target is None or node is None:
        return None
    (want, built), (have, series, words, user_space) = target, node
    what = f"HPC-X {rdma.hpcx.version or ''} built for {rdma.hpcx.ofed}".replace("  ", " ")
    if built and series:
        if _differ(built, series):
            return ("warning" if user_space else "info"), f"{what} on {words}"
        return None
    if (want == "inbox") != (have == "inbox"):
        return "info", f"{what} on {words}"
    return None


def hpcx_reason(severity: str) -> Callable[[Snapshot], str | None]:
    """The per-node test of ``FLEET-HPCX-OFED`` at one severity."""

    def test(s: Snapshot) -> str | None:
        hit = hpcx_mismatch(s)
        return hit[1] if hit is not None and hit[0] == severity else None

    return test
