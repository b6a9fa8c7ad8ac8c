"""Differential test: our CUDA_VISIBLE_DEVICES reading versus torch's own parser.

The oracle is the installed torch: ``torch.cuda._parse_visible_devices``,
``_transform_uuid_to_ordinals`` and ``_device_count_nvml`` (its device-count
trimming), with NVML's answers (device count, UUIDs) taken from the snapshot.
torch is imported but CUDA is never initialised.

For every generated value:
1. ``torch_view`` (our model of torch) must predict the real torch exactly,
   including where torch raises;
2. where torch raises, ``resolve_visible`` must report VIS-TORCH-RAISES;
3. otherwise torch's device list must equal CUDA's (our resolver, which replays
   the driver's recorded answers), or differ in length with VIS-TORCH-COUNT
   reported: the lists share a prefix and one stops earlier (the differences
   documented in docs/visible-devices.md, "Where torch's parser differs from
   CUDA"). A same-length list of other GPUs would be a silent mismatch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudiag.core.visibility import resolve_visible, torch_view
from gpudiag.model import Gpu, Snapshot, TorchInfo

from .conftest import load_fixture

torch = pytest.importorskip("torch")
torch_cuda = torch.cuda

EXAMPLES = 10_000


def _prefix_snapshot() -> Snapshot:
    """Three identical GPUs whose UUIDs share prefixes (ambiguity cases)."""
    uuids = (
        "GPU-aa11b2c3-0000-1111-2222-333344445555",
        "GPU-aa12b2c3-0000-1111-2222-333344445555",
        "GPU-ab000000-9999-8888-7777-666655554444",
    )
    gpus = tuple(
        Gpu(nvml_index=i, uuid=u, pci_bus_id=f"00000000:{i + 1:02X}:00.0", name="NVIDIA L4")
        for i, u in enumerate(uuids)
    )
    return Snapshot(gpus=gpus, cuda_order=uuids)


def _with_installed_torch(snapshot: Snapshot) -> Snapshot:
    # torch_view models the parser of the snapshot's torch version: compare it with
    # the torch installed here.
    info = snapshot.torch if snapshot.torch is not None else TorchInfo()
    return replace(snapshot, torch=replace(info, version=torch.__version__))


SNAPSHOTS: dict[str, Snapshot] = {
    "a100x8": _with_installed_torch(load_fixture("a100x8")),
    "mixed4": _with_installed_torch(load_fixture("mixed4")),
    "prefix3": _with_installed_torch(_prefix_snapshot()),
}


@contextmanager
def _torch_sees(spec: str | None, snapshot: Snapshot) -> Iterator[None]:
    """Make torch read ``spec`` and answer NVML queries from ``snapshot``."""
    saved_env = os.environ.get("CUDA_VISIBLE_DEVICES")
    saved = (torch_cuda._raw_device_count_nvml, torch_cuda._raw_device_uuid_nvml)
    if spec is None:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = spec
    torch_cuda._raw_device_count_nvml = lambda: len(snapshot.gpus)
    torch_cuda._raw_device_uuid_nvml = lambda: [str(g.uuid) for g in snapshot.gpus]
    try:
        yield
    finally:
        torch_cuda._raw_device_count_nvml, torch_cuda._raw_device_uuid_nvml = saved
        if saved_env is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved_env


@dataclass(frozen=True)
class TorchAnswer:
    raises: str | None
    nvml_indices: tuple[int, ...]  # torch's visible list, trimmed like _device_count_nvml
    count: int | None  # real torch.cuda._device_count_nvml()


def ask_torch(spec: str | None, snapshot: Snapshot) -> TorchAnswer:
    """The real torch functions' answer for ``spec`` on ``snapshot``."""
    with _torch_sees(spec, snapshot):
        try:
            parsed = torch_cuda._parse_visible_devices()
        except ValueError as exc:
            return TorchAnswer(raises=f"ValueError: {exc}", nvml_indices=(), count=None)
        count = torch_cuda._device_count_nvml()
        if parsed and isinstance(parsed[0], str):
            uuids = [str(g.uuid) for g in snapshot.gpus]
            ordinals = torch_cuda._transform_uuid_to_ordinals(list(parsed), uuids)
        else:
            ordinals = []
            for value in parsed:
                if value >= len(snapshot.gpus):
                    break
                ordinals.append(value)
    return TorchAnswer(
        raises=None,
        nvml_indices=tuple(snapshot.gpus[o].nvml_index for o in ordinals),
        count=count if count >= 0 else None,
    )


# ------------------------------------------------------------------ generators

_SPACES = st.sampled_from(["", "", "", " ", "  ", "\t"])
_JUNK = st.sampled_from(["", "", "", "gpu", "x1", "abc", "-2", " 1", ".5", "a", "0"])


@st.composite
def integer_entry(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return ""
    if kind == 1:
        return draw(st.text(alphabet="+-0123456789 xX,", max_size=4))
    sign = draw(st.sampled_from(["", "", "", "", "+", "-"]))
    zeros = draw(st.sampled_from(["", "", "", "0", "00"]))
    value = draw(st.integers(0, 11))
    digits = "" if kind == 2 else f"{zeros}{value}"
    return f"{draw(_SPACES)}{sign}{digits}{draw(_JUNK)}{draw(_SPACES)}"


@st.composite
def uuid_entry(draw: st.DrawFn, snapshot: Snapshot) -> str:
    uuid = draw(st.sampled_from([str(g.uuid) for g in snapshot.gpus]))
    kind = draw(st.integers(0, 9))
    if kind == 0:
        text = "GPU-" + draw(st.text(alphabet="0123456789abcdef-", max_size=10))
    elif kind == 1:
        text = uuid.upper()[: draw(st.integers(4, len(uuid)))]
    elif kind == 2:
        text = "MIG-" + uuid[4 : draw(st.integers(4, len(uuid)))]
    else:
        text = uuid[: draw(st.integers(4, len(uuid)))]
    if draw(st.integers(0, 7)) == 0:
        text = draw(st.sampled_from([" ", "  ", "\t"])) + text
    if draw(st.integers(0, 7)) == 0:
        text += draw(st.sampled_from([" ", "x", "0"]))
    return text


@st.composite
def spec_for(draw: st.DrawFn, snapshot: Snapshot) -> str | None:
    mode = draw(st.integers(0, 19))
    if mode == 0:
        return None
    entry = integer_entry() if mode < 11 else uuid_entry(snapshot)
    entries = draw(st.lists(entry, min_size=1, max_size=6))
    if draw(st.integers(0, 4)) == 0 and entries:
        # Mix kinds, or repeat an entry to exercise duplicate handling.
        other = draw(uuid_entry(snapshot) if mode < 11 else integer_entry())
        pos = draw(st.integers(0, len(entries)))
        entries.insert(pos, draw(st.sampled_from([other, entries[0]])))
    return ",".join(entries)


# ------------------------------------------------------------------ differences


def differs_by_length_only(ours: tuple[int, ...], theirs: tuple[int, ...]) -> bool:
    """One list is a prefix of the other: one reader stopped earlier."""
    short, long_ = (ours, theirs) if len(ours) < len(theirs) else (theirs, ours)
    return len(ours) != len(theirs) and long_[: len(short)] == short


SLOW_OK = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]


@pytest.mark.parametrize("name", sorted(SNAPSHOTS))
def test_against_torch(name: str) -> None:
    snapshot = SNAPSHOTS[name]
    seen: dict[str, int] = {"total": 0, "raises": 0, "differs": 0}

    @settings(
        max_examples=EXAMPLES // len(SNAPSHOTS) + 1, deadline=None, suppress_health_check=SLOW_OK
    )
    @given(spec=spec_for(snapshot))
    def check(spec: str | None) -> None:
        seen["total"] += 1
        theirs = ask_torch(spec, snapshot)
        model = torch_view(spec, snapshot)
        # 1. our model of torch is exact
        assert model.raises == theirs.raises, spec
        if theirs.raises is None:
            assert model.count == theirs.count, spec
        # PCI_BUS_ID: a CUDA index is an NVML index, as torch assumes.
        resolution = resolve_visible(spec, "PCI_BUS_ID", snapshot)
        codes = {f.code for f in resolution.findings}
        ours = tuple(d.nvml_index for d in resolution.devices)
        # 2. torch raises: we say so
        if theirs.raises is not None:
            seen["raises"] += 1
            assert "VIS-TORCH-RAISES" in codes, spec
            return
        # 3. same answer, or one stopped earlier, and a count difference is reported
        if theirs.count is None:
            return  # torch asks CUDA itself (MIG values): same count by construction
        if ours != theirs.nvml_indices:
            seen["differs"] += 1
            assert differs_by_length_only(ours, theirs.nvml_indices), (spec, ours, theirs)
        if theirs.count != len(ours):
            assert "VIS-TORCH-COUNT" in codes, (spec, ours, theirs)
        elif theirs.count is not None:
            assert "VIS-TORCH-COUNT" not in codes, (spec, ours, theirs)

    check()
    print(f"{name}: {seen}")
    # The generators must reach the interesting regions, not only the easy one.
    assert seen["total"] >= EXAMPLES // len(SNAPSHOTS) + 1  # 3 x 3334 >= 10,000
    assert seen["raises"] > 20
    assert seen["differs"] > 20


# ------------------------------------------------------------------ explicit cases


@pytest.mark.parametrize(
    ("spec", "ours", "torch_nvml"),
    [
        # torch's duplicate check runs past CUDA's end of the list
        ("0,9,0", (0,), ()),
        ("GPU-9942190a,GPU-ffff,GPU-9942190a", (0,), ()),
        # CUDA reads UUID hex case-insensitively, ignores dashes and what follows the
        # 32nd digit; torch compares the text (recorded on driver 580 / torch 2.11)
        ("GPU-9942190A", (0,), ()),
        ("GPU-9942190aaa31", (0,), ()),
        ("GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1x", (0,), ()),
        ("GPU-3ceaaf30,GPU-9942190A", (1, 0), (1,)),
        # CUDA keeps the low 32 bits of an index
        ("4294967296", (0,), ()),
        # white space around a UUID: both stop there
        ("GPU-9942190a, GPU-3ceaaf30", (0,), (0,)),
        (" GPU-9942190a", (), ()),
        # the same value for both
        ("0,2,-1,1", (0, 2), (0, 2)),
        ("0,,1", (0,), (0,)),
        ("00,0", (), ()),
        ("1gpu2,3", (1, 3), (1, 3)),
        ("GPU-9942190a,0", (0,), (0,)),
        ("0,GPU-9942190a", (0,), (0,)),
    ],
)
def test_documented_examples(spec: str, ours: tuple[int, ...], torch_nvml: tuple[int, ...]) -> None:
    snapshot = SNAPSHOTS["a100x8"]
    theirs = ask_torch(spec, snapshot)
    resolution = resolve_visible(spec, "PCI_BUS_ID", snapshot)
    resolved = tuple(d.nvml_index for d in resolution.devices)
    assert resolved == ours
    assert theirs.nvml_indices == torch_nvml
    assert torch_view(spec, snapshot).count == theirs.count
    codes = {f.code for f in resolution.findings}
    assert ("VIS-TORCH-COUNT" in codes) == (ours != torch_nvml)


@pytest.mark.parametrize("spec", ["-", "+", "0,-", "+x", "-gpu", "1,+,2", "0,1,--1", "²", " - "])
def test_torch_raises_is_reported(spec: str) -> None:
    snapshot = SNAPSHOTS["a100x8"]
    assert ask_torch(spec, snapshot).raises is not None
    assert torch_view(spec, snapshot).raises == ask_torch(spec, snapshot).raises
    codes = [f.code for f in resolve_visible(spec, None, snapshot).findings]
    assert "VIS-TORCH-RAISES" in codes


@pytest.mark.parametrize(("spec", "torch_count"), [("٣", 1), ("0,١", 2)])
def test_unicode_digits_torch_reads_cuda_does_not(spec: str, torch_count: int) -> None:
    # torch uses str.isdigit()/int(), which accept Arabic-Indic digits; CUDA's
    # strtoul accepts only ASCII digits. Documented difference D3.
    snapshot = SNAPSHOTS["a100x8"]
    assert ask_torch(spec, snapshot).count == torch_count
    assert torch_view(spec, snapshot).count == torch_count
    resolution = resolve_visible(spec, "PCI_BUS_ID", snapshot)
    assert len(resolution.devices) == torch_count - 1
    assert "VIS-TORCH-COUNT" in {f.code for f in resolution.findings}


def test_mig_values_torch_defers_to_cuda() -> None:
    # torch returns -1 from _device_count_nvml for MIG lists and asks CUDA.
    snapshot = load_fixture("a100_mig")
    spec = "MIG-8df08078-a22e-a180-c5c2-c2af3977a654"
    assert ask_torch(spec, snapshot).count is None
    assert torch_view(spec, snapshot).count is None
