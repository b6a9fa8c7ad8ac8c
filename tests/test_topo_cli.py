"""``gpudiag topo``: golden output on every fixture, 100 columns for 8 GPUs, bad input,
and no torch in the process.

Golden transcripts live in tests/golden/topo-<fixture>.txt (``GPUDIAG_UPDATE_GOLDEN=1``
rewrites them; read the diff). Runs are in process under tests/pinned.py's controlled
environment, from inside tests/fixtures/ with relative paths.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpudiag.core.visibility import resolve_checked
from gpudiag.model import NvLink, PciBridge, PciGpu
from gpudiag.render.text import Style
from gpudiag.render.topo import render_topo

from .conftest import FIXTURES, load_fixture
from .pinned import assert_golden, run_cli, transcript_entry

ALL_FIXTURES = sorted(p.stem for p in FIXTURES.glob("*.json"))
CASES = [[], ["--visible", "1,2"], ["--json"]]


@pytest.fixture(autouse=True)
def _in_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(FIXTURES)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_topo_is_golden(name: str) -> None:
    text = "\n".join(
        transcript_entry(["topo", "--snapshot", f"{name}.json", *args]) for args in CASES
    )
    assert_golden(f"topo-{name}", text)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_topo_fits_100_columns(name: str) -> None:
    for args in ([], ["--visible", "0"]):
        code, out, err = run_cli(["topo", "--snapshot", f"{name}.json", *args])
        assert code == 0 and err == ""
        too_long = [line for line in out.splitlines() if len(line) > 100]
        assert not too_long, too_long


def test_eight_gpus_at_their_widest_fit_100_columns() -> None:
    # Every cell at its longest: a 26-character name, a long CPU list, 18 NVLinks,
    # a fabric in progress, an IOMMU group handed to VFIO, ACS unreadable.
    snap = load_fixture("a100x8")
    links = tuple(NvLink(i, True, "00000000:C4:00.0", "NVSwitch") for i in range(18))
    gpus = tuple(
        dataclasses.replace(
            g,
            name="NVIDIA GeForce GTX 1080 Ti",
            cpu_affinity="0-7,16-23,32-39,48-55,64-71,80-87,96-103,112-119",
            nvlinks=links,
            fabric_state="In Progress",
            pcie_link_width_current=None,
        )
        for g in snap.gpus
    )
    pci = tuple(
        PciGpu(
            pci_bus_id=str(g.pci_bus_id)[4:],
            driver="nvidia",
            iommu_group_type="unmanaged",
            bridges=(PciBridge("0000:00:01.1", None),),
        )
        for g in gpus
    )
    snap = dataclasses.replace(
        snap, gpus=gpus, host=dataclasses.replace(load_fixture("v100x8").host, pci_gpus=pci)
    )
    resolution = resolve_checked(None, None, snap, None)
    text = render_topo(snap, resolution, [], source="snapshot node.json", style=Style(width=100))
    assert "unmanaged" in text and "18 of 18 up" in text and "unread" in text
    widths = sorted(len(line) for line in text.splitlines())
    assert widths[-1] <= 100, [line for line in text.splitlines() if len(line) > 100]


def test_selected_gpus_are_marked_with_their_ordinals() -> None:
    # mixed4: CUDA's FASTEST_FIRST order is 1, 3, 0, 2 in nvidia-smi's numbering, so
    # CUDA_VISIBLE_DEVICES=2,0 selects GPU 0 (cuda:0) and GPU 1 (cuda:1).
    code, out, _ = run_cli(["topo", "--snapshot", "mixed4.json", "--visible", "2,0"])
    assert code == 0
    rows: dict[str, list[str]] = {}
    for line in out.splitlines():
        if line.startswith("GPU") and not line.startswith("GPU topology"):
            rows.setdefault(line.split()[0], line.split())  # the matrix comes first
    assert rows["GPU0*"][-1] == "0" and rows["GPU1*"][-1] == "1"
    assert rows["GPU2"][-1] == "n/a" and rows["GPU3"][-1] == "n/a"
    assert (
        "* selected (CUDA_VISIBLE_DEVICES='2,0', FASTEST_FIRST): cuda:0 = GPU 0, cuda:1 = GPU 1."
        in out
    )


def test_json_uses_the_snapshot_field_names() -> None:
    code, out, err = run_cli(["topo", "--snapshot", "v100x8.json", "--visible", "0,5", "--json"])
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc["schema"] == "gpudiag-topo/1"
    pair = next(p for p in doc["gpu_pairs"] if (p["nvml_index_a"], p["nvml_index_b"]) == (0, 3))
    assert (pair["link"], pair["topology"], pair["p2p_read"]) == ("NV2", "NODE", "OK")
    gpu0 = doc["gpus"][0]
    assert gpu0["selected"] and gpu0["cuda_ordinals"] == [0]
    assert gpu0["pcie_link_gen_current"] == 1 and gpu0["numa_affinity"] == [0]
    assert gpu0["pci"]["bridges"][0] == {"bdf": "0000:04:08.0", "acs_ctl": None}
    assert [f["code"] for f in doc["findings"]] == ["TOPO-P2P-UNSUPPORTED", "TOPO-NUMA-SPAN"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "gpudiag: error: snapshot bad.json is not valid JSON: "),
        ('{"schema": "gpudiag-snapshot/2"}', "gpudiag: error: snapshot bad.json is invalid: "),
    ],
)
def test_bad_snapshot_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("bad.json").write_text(content)
    for extra in ([], ["--json"]):
        code, out, err = run_cli(["topo", "--snapshot", "bad.json", *extra])
        assert code == 2 and out == ""
        assert len(err.splitlines()) == 1 and err.startswith(message), err


def test_help_has_examples() -> None:
    code, out, _ = run_cli(["topo", "--help"])
    assert code == 0
    assert "Examples:" in out and "gpudiag topo --visible 0,1" in out
    assert all(len(line) <= 100 for line in out.splitlines())


_HEAVY = """
import sys
from gpudiag.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("HEAVY=" + ",".join(sorted(m for m in ("torch", "pynvml", "GPUtil") if m in sys.modules)))
"""


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        (["topo", "--snapshot", str(FIXTURES / "a100x8.json")], ""),
        (["topo", "--help"], ""),
        (["topo", "--json"], "pynvml"),  # live: NVML in process, never torch
    ],
)
def test_topo_imports_no_torch(args: list[str], allowed: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _HEAVY, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    heavy = proc.stdout.strip().splitlines()[-1]
    assert heavy in ("HEAVY=", f"HEAVY={allowed}"), proc.stdout + proc.stderr


def _many_gpus(n: int, with_pairs: bool) -> object:
    from gpudiag.model import GpuPair

    a100 = load_fixture("a100x8")
    gpus = tuple(
        dataclasses.replace(a100.gpus[i % 8], nvml_index=i, uuid=f"GPU-{i:08x}-0000-0000-0000-000000000000",
                            pci_bus_id=f"00000000:{i // 256:02X}:{i % 256:02X}.0")
        for i in range(n)
    )  # fmt: skip
    pairs = tuple(
        GpuPair(nvml_index_a=x, nvml_index_b=y, topology="SYS", p2p_read="OK", p2p_write="OK")
        for x in range(n) for y in range(x + 1, n)
    ) if with_pairs else None  # fmt: skip
    return dataclasses.replace(a100, gpus=gpus, gpu_pairs=pairs, env={})


@pytest.mark.parametrize(("n", "with_pairs"), [(1500, False), (64, True)])
def test_topo_stays_fast_on_huge_snapshots(n: int, with_pairs: bool) -> None:
    # Issue 21's fuzz: a 1,500-GPU snapshot took 43 s (GPUs² cells, each scanning every
    # pair). The matrices stop at 64 GPUs; a pair is looked up, not scanned for.
    import time

    snap = _many_gpus(n, with_pairs)
    began = time.monotonic()
    text = render_topo(snap, resolve_checked(None, None, snap), [], source="test")  # type: ignore[arg-type]
    assert time.monotonic() - began < 5
    assert ("matrices are drawn for at most 64" in text) is (n > 64)
