"""The P2P probe's pure parts: pairs, expected link bandwidth, verdicts (issue 18, item 4).

No torch here: the worker (``gpudiag.probes.p2p``) measures, these functions judge,
and the suite tests them without a GPU. ``PairRow`` is one pair's JSON row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal, cast

from gpudiag.links import pci_bus_key
from gpudiag.model import Gpu

#: PCIe usable data rate per lane and direction, GB/s, after line encoding
#: (Gen1-2: 8b/10b; Gen3-5: 128b/130b; Gen6: FLIT, 242/256). PCI-SIG's published
#: raw rates (2.5, 5, 8, 16, 32, 64 GT/s) times the encoding's efficiency.
PCIE_LANE_GBPS: Mapping[int, float] = {
    1: 0.25,
    2: 0.5,
    3: 0.985,
    4: 1.969,
    5: 3.938,
    6: 7.563,
}

#: One NVLink link's data rate per direction, GB/s: 25 for NVLink 2, 3 and 4
#: (V100: 6 links, 300 GB/s; A100: 12 links, 600 GB/s; H100: 18 links, 900 GB/s,
#: each total counting both directions; NVIDIA's product pages). The snapshot has no
#: NVLink version, so NVLink 1 (P100, 20 GB/s) is held to 25 and may read as slow.
NVLINK_LINK_GBPS = 25.0

#: A copy below this fraction of the link's rate is ``slow``. A quarter, not a
#: half: a healthy link reaches 70-90 % of it, but a copy torch stages through host
#: memory may reach 40 %; a x16 card at x4 or at Gen1 (issue 18) lands below 25 %.
SLOW_FRACTION = 0.25

LinkKind = Literal["nvlink", "nvswitch", "pcie"]
Attempt = Literal["pass", "fail", "hang", "not_run"]
PairStatus = Literal["pass", "fail", "timeout", "not_run"]
Speed = Literal["ok", "slow", "unknown"]


@dataclass(frozen=True)
class Link:
    """What the snapshot says joins two GPUs, and the rate it should move per direction.

    Attributes:
        kind: ``nvlink`` (direct links), ``nvswitch`` (through NVSwitch) or ``pcie``.
        expected_gbps: per-direction data rate; None when a fact is missing.
        basis: the rate's reason in words, e.g. ``PCIe Gen4 x16 (max): 31.5 GB/s``.
    """

    kind: LinkKind
    expected_gbps: float | None
    basis: str


def device_pairs(ordinals: Sequence[int]) -> list[tuple[int, int]]:
    """Every unordered pair of distinct selected ordinals, in order (a < b).

    Raises:
        ValueError: an ordinal appears twice (a pair of one GPU with itself).
    """
    if len(set(ordinals)) != len(ordinals):
        raise ValueError(f"an ordinal appears twice in {list(ordinals)}")
    return list(combinations(sorted(ordinals), 2))


def _active(gpu: Gpu) -> list[Any]:
    return [link for link in (gpu.nvlinks or ()) if link.active]


def link_between(a: Gpu | None, b: Gpu | None) -> Link | None:
    """The link from the snapshot's facts; None when neither GPU is known.

    NVLink wins when the links are up: links of ``a`` whose far end is ``b``'s bus id
    (direct), else, when both have active links to an NVSwitch, the fewer of the
    two counts (the switch carries each GPU's links). Otherwise PCIe at the lower of
    the two GPUs' *maximum* generation and width: an idle GPU drops its current link
    to Gen1 to save power (NVIDIA's nvidia-smi documentation: "the current link
    generation may be reduced when the GPU is not in use"), so the maximum is what a
    copy should get.
    """
    if a is None or b is None:
        return None
    b_key = pci_bus_key(b.pci_bus_id)
    direct = [
        link
        for link in _active(a)
        if b_key is not None and pci_bus_key(link.remote_pci_bus_id) == b_key
    ]
    if direct:
        rate = len(direct) * NVLINK_LINK_GBPS
        return Link(
            "nvlink", rate, f"{len(direct)} NVLink link(s) x {NVLINK_LINK_GBPS:g} GB/s = {rate:g}"
        )
    switched = min(
        sum(1 for link in _active(g) if link.remote_device_type == "NVSwitch") for g in (a, b)
    )
    if switched > 0:
        rate = switched * NVLINK_LINK_GBPS
        return Link(
            "nvswitch",
            rate,
            f"{switched} NVLink link(s) to NVSwitch x {NVLINK_LINK_GBPS:g} GB/s = {rate:g}",
        )
    gens = [g.pcie_link_gen_max for g in (a, b)]
    widths = [g.pcie_link_width_max for g in (a, b)]
    if None in gens or None in widths:
        return Link("pcie", None, "PCIe (maximum generation or width unknown)")
    gen = min(cast(list[int], gens))
    width = min(cast(list[int], widths))
    lane = PCIE_LANE_GBPS.get(gen)
    if lane is None:
        return Link("pcie", None, f"PCIe Gen{gen} x{width} (rate of Gen{gen} unknown)")
    rate = round(lane * width, 1)
    return Link("pcie", rate, f"PCIe Gen{gen} x{width} (max) = {rate:g}")


def gpu_by_uuid(gpus: Sequence[Gpu], uuid: str | None) -> Gpu | None:
    """The snapshot's GPU with torch's ``get_device_properties(i).uuid``.

    torch prints the UUID without NVML's ``GPU-`` prefix; its ``pci_bus_id`` is
    the bus number alone (an int), so the UUID is the join key.
    """
    if not uuid:
        return None
    text = str(uuid)
    full = text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"
    return next((g for g in gpus if (g.uuid or "").lower() == full.lower()), None)


def speed_verdict(measured_gbps: float | None, expected_gbps: float | None) -> Speed:
    """``slow`` below :data:`SLOW_FRACTION` of the expected rate; no rate: ``unknown``."""
    if measured_gbps is None or expected_gbps is None or expected_gbps <= 0:
        return "unknown"
    return "ok" if measured_gbps >= SLOW_FRACTION * expected_gbps else "slow"


def needs_retry(first: Attempt) -> bool:
    """Only a hang is retried with ``NCCL_P2P_DISABLE=1``: it names the P2P path.

    A wrong sum or an error is a failure of its own; retrying would hide it.
    """
    return first == "hang"


def allreduce_verdict(
    first: Attempt, retry: Attempt | None, first_error: str = "", retry_error: str = ""
) -> tuple[PairStatus, str]:
    """The pair's all-reduce status and its cause in one line.

    A hang stays a hang (``timeout``, exit 3) whatever the retry shows; the retry
    names the cause. ``NCCL_P2P_DISABLE=1`` makes NCCL move data through host
    memory instead of GPU-to-GPU (NCCL's environment variable documentation), so
    a hang that disappears with it is the P2P path.
    """
    if first == "pass":
        return "pass", "all-reduce correct"
    if first == "not_run":
        return "not_run", "all-reduce not run: the --timeout budget was spent"
    if first == "fail":
        return "fail", f"all-reduce failed: {first_error or 'wrong sum'}"
    if retry is None or retry == "not_run":
        return "timeout", (
            "all-reduce hung; no time left to retry with NCCL_P2P_DISABLE=1 (raise --timeout)"
        )
    if retry == "pass":
        return "timeout", (
            "all-reduce hung with P2P and passed with NCCL_P2P_DISABLE=1: the P2P path "
            "between these GPUs is broken (driver, IOMMU or PCIe ACS); run with "
            "NCCL_P2P_DISABLE=1 or fix the P2P path"
        )
    if retry == "hang":
        return "timeout", (
            "all-reduce hung, and hung again with NCCL_P2P_DISABLE=1: not the P2P "
            "path alone (check NCCL_DEBUG=INFO output, the network and shared memory)"
        )
    return "timeout", (
        f"all-reduce hung; with NCCL_P2P_DISABLE=1 it failed: {retry_error or 'wrong sum'}"
    )


def pair_status(copy_ok: bool, speed: Speed, allreduce: PairStatus) -> PairStatus:
    """One pair: a hang wins, then any failure (bad copy, slow copy, bad all-reduce)."""
    if allreduce == "timeout":
        return "timeout"
    if not copy_ok or speed == "slow" or allreduce == "fail":
        return "fail"
    if allreduce == "not_run":
        return "not_run"
    return "pass"


@dataclass(frozen=True)
class PairRow:
    """One pair of the p2p probe, as ``--json`` writes it (``docs/probes.md``).

    Copies run ``a -> b`` then ``b -> a`` (the data just received goes back), each
    compared bit for bit with what was sent; ``*_gbps`` is ``copy_bytes /
    elapsed_s / 1e9`` for one copy (the mean of the timed repeats).
    """

    device_a: str
    device_b: str
    cuda_ordinal_a: int | None
    cuda_ordinal_b: int | None
    status: PairStatus
    message: str
    link: str | None = None
    expected_gbps: float | None = None
    link_basis: str | None = None
    copy_bytes: int = 0
    copy_ab_exact: bool = False
    copy_ba_exact: bool = False
    copy_mismatched_elements: int = 0
    copy_ab_elapsed_s: float | None = None
    copy_ba_elapsed_s: float | None = None
    copy_ab_gbps: float | None = None
    copy_ba_gbps: float | None = None
    speed: Speed = "unknown"
    allreduce: Attempt = "not_run"
    allreduce_elapsed_s: float | None = None
    allreduce_retry_p2p_disabled: Attempt | None = None
    allreduce_cause: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON object (every field, by name)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PairRow:
        """Inverse of :meth:`to_json` (unknown keys are ignored)."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})
