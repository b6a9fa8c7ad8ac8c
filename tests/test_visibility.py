"""Table-driven tests of the CUDA_VISIBLE_DEVICES resolver (gpudiag.core.visibility).

Each row states the exact outcome: which physical devices (nvidia-smi index, and
MIG UUID prefix for MIG devices) become cuda:0, cuda:1, …; each entry's outcome
(v = visible, s = stop, i = ignored); the exact set of finding codes; certainty.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import Path

import pytest

from gpudiag.core import visibility
from gpudiag.core.visibility import (
    apply_driver_mapping,
    c_strtoul,
    cuda_index,
    cvd_changed_after_init,
    resolve_visible,
    slurm_findings,
    uuid_hex,
)
from gpudiag.findings.catalog import titles
from gpudiag.findings.texts import torch_version_tuple
from gpudiag.model import Gpu, MigDevice, Resolution, Snapshot

from .conftest import load_fixture

#: The codes this area owns (gpudiag/findings/catalog.py).
CODES = titles("visibility")

A100X8 = load_fixture("a100x8")
MIXED4 = load_fixture("mixed4")
MIG = load_fixture("a100_mig")
LOST = load_fixture("gpu_lost")
NO_DRIVER = load_fixture("no_driver")

PREFIX3 = Snapshot(
    gpus=tuple(
        Gpu(nvml_index=i, uuid=u, pci_bus_id=f"00000000:{i + 1:02X}:00.0", name="NVIDIA L4")
        for i, u in enumerate(
            (
                "GPU-aa11b2c3-0000-1111-2222-333344445555",
                "GPU-aa12b2c3-0000-1111-2222-333344445555",
                "GPU-ab000000-9999-8888-7777-666655554444",
            )
        )
    )
)
SINGLE = Snapshot(gpus=(Gpu(nvml_index=0, uuid="GPU-5f0e1d2c-0000-1111-2222-333344445555"),))
MIXED4_NO_ORDER = replace(MIXED4, cuda_order=None)
A100X8_NO_ORDER = replace(A100X8, cuda_order=None)
# GPU 0 in MIG mode without any MIG instance, GPU 1 a normal GPU.
MIG_EMPTY = Snapshot(
    gpus=(
        Gpu(nvml_index=0, uuid="GPU-11111111-0000-0000-0000-000000000000", name="A100",
            mig_enabled=True),
        Gpu(nvml_index=1, uuid="GPU-22222222-0000-0000-0000-000000000000", name="A100",
            mig_enabled=False),
    )
)  # fmt: skip
MIG_ONE = replace(
    MIG,
    gpus=(
        replace(MIG.gpus[0], mig_devices=MIG.gpus[0].mig_devices[:1]),
        MIG.gpus[1],
    ),
)

SNAPSHOTS = {
    "a100x8": A100X8,
    "mixed4": MIXED4,
    "mig": MIG,
    "lost": LOST,
    "no_driver": NO_DRIVER,
    "prefix3": PREFIX3,
    "single": SINGLE,
    "mixed4_no_order": MIXED4_NO_ORDER,
    "a100x8_no_order": A100X8_NO_ORDER,
    "mig_empty": MIG_EMPTY,
    "mig_one": MIG_ONE,
}

# device: "3" = GPU with nvidia-smi index 3; "0/MIG-8df0" = MIG device on GPU 0.
CASES: list[tuple[str, str | None, str | None, list[str], str, set[str], bool]] = [
    # --- unset, empty, NoDevFiles
    ("a100x8", None, None, ["0", "1", "2", "3", "4", "5", "6", "7"], "", set(), True),
    ("a100x8", "", None, [], "s", {"VIS-NO-DEVICES"}, True),
    ("a100x8", "  ", None, [], "s", {"VIS-NO-DEVICES"}, True),
    ("a100x8", "NoDevFiles", None, [], "s", {"VIS-NO-DEVICES"}, True),
    # --- the examples
    ("a100x8", "0,2,-1,1", None, ["0", "2"], "vvsi", {"VIS-TRUNCATED", "VIS-INDEX-MISMATCH"}, True),
    ("a100x8", "0,,1", None, ["0"], "vsi", {"VIS-TRUNCATED"}, True),
    ("a100x8", ",0", None, [], "si", {"VIS-TRUNCATED", "VIS-NO-DEVICES"}, True),
    ("a100x8", "00,0", None, [], "is", {"VIS-DUPLICATE"}, True),
    ("a100x8", "1gpu2", None, ["1"], "v", {"VIS-ENTRY-TRAILING", "VIS-INDEX-MISMATCH"}, True),
    ("a100x8", "0x1", None, ["0"], "v", {"VIS-ENTRY-TRAILING"}, True),
    ("a100x8", "+3", None, ["3"], "v", {"VIS-INDEX-MISMATCH"}, True),
    ("a100x8", "-0", None, ["0"], "v", set(), True),
    ("a100x8", "007", None, ["7"], "v", {"VIS-INDEX-MISMATCH"}, True),
    ("a100x8", "0-2", None, ["0"], "v", {"VIS-ENTRY-TRAILING"}, True),
    ("a100x8", " 2 , 3 ", None, ["2", "3"], "vv", {"VIS-INDEX-MISMATCH"}, True),
    ("a100x8", "abc", None, [], "s", {"VIS-NO-DEVICES"}, True),
    ("a100x8", "abc,1", None, [], "si", {"VIS-TRUNCATED", "VIS-NO-DEVICES"}, True),
    # --- index at or beyond the device count
    ("a100x8", "8", None, [], "s", {"VIS-TRUNCATED", "VIS-NO-DEVICES"}, True),
    ("a100x8", "1,8,2", None, ["1"], "vsi", {"VIS-TRUNCATED", "VIS-INDEX-MISMATCH"}, True),
    # --- negative ends the list; a terminator at the end is not a truncation
    ("a100x8", "0,-1", None, ["0"], "vs", set(), True),
    ("a100x8", "0,1,", None, ["0", "1"], "vvs", set(), True),
    ("a100x8", "-5,0", None, [], "si", {"VIS-TRUNCATED", "VIS-NO-DEVICES"}, True),
    # --- duplicates
    ("a100x8", "0,1,0", None, [], "iis", {"VIS-DUPLICATE"}, True),
    ("a100x8", "0,1,-1,0", None, ["0", "1"], "vvsi", {"VIS-TRUNCATED"}, True),
    # duplicate after CUDA's end of list: CUDA keeps [0]; torch sees none
    ("a100x8", "0,9,0", None, ["0"], "vsi", {"VIS-TRUNCATED", "VIS-TORCH-COUNT"}, True),
    ("a100x8", "GPU-9dfb,GPU-9dfb369b", None, [], "is", {"VIS-DUPLICATE"}, True),
    # --- UUIDs
    ("a100x8", "GPU-9dfb369b", None, ["2"], "v", {"VIS-INDEX-MISMATCH"}, True),
    ("a100x8", "GPU-9dfb369b-ab13-dfae-6276-55daa05f1119", None, ["2"], "v",
     {"VIS-INDEX-MISMATCH"}, True),
    ("a100x8", "GPU-", None, [], "s", {"VIS-TRUNCATED", "VIS-NO-DEVICES"}, True),
    # "GPU-" with no hex digit selects nothing, even on a one-GPU machine, while
    # torch counts it (recorded on driver 580 / torch 2.11).
    ("single", "GPU-", None, [], "s", {"VIS-TRUNCATED", "VIS-NO-DEVICES", "VIS-TORCH-COUNT"}, True),
    ("prefix3", "GPU-aa1", None, [], "s", {"VIS-TRUNCATED", "VIS-NO-DEVICES"}, True),
    ("prefix3", "GPU-aa12", None, ["1"], "v", {"VIS-INDEX-MISMATCH"}, True),
    ("prefix3", "GPU-ab,GPU-aa11", None, ["2", "0"], "vv", {"VIS-INDEX-MISMATCH"}, True),
    ("a100x8", "GPU-ffff", None, [], "s", {"VIS-TRUNCATED", "VIS-NO-DEVICES"}, True),
    # The hex matches case-insensitively for CUDA, not for torch (recorded).
    ("a100x8", "GPU-9942190A", None, ["0"], "v", {"VIS-TORCH-COUNT"}, True),
    ("a100x8", "GPU-9942190a-aa31", None, ["0"], "v", set(), True),
    ("a100x8", "GPU-9942190aaa31", None, ["0"], "v", {"VIS-TORCH-COUNT"}, True),
    ("a100x8", "GPU-9942190a--", None, ["0"], "v", {"VIS-TORCH-COUNT"}, True),
    ("a100x8", "GPU-9942190a:0", None, [], "s", {"VIS-TRUNCATED", "VIS-NO-DEVICES"}, True),
    ("a100x8", "4294967297", None, ["1"], "v", {"VIS-INDEX-MISMATCH", "VIS-TORCH-COUNT"}, True),
    ("a100x8", "gpu-9942190a", None, [], "s", {"VIS-UUID-CASE", "VIS-NO-DEVICES"}, True),
    # White space around a UUID: the entry selects nothing (recorded).
    ("a100x8", "GPU-9942190a, GPU-3ceaaf30", None, ["0"], "vs",
     {"VIS-UUID-SPACE", "VIS-TRUNCATED"}, True),
    ("a100x8", " GPU-3ceaaf30", None, [], "s",
     {"VIS-UUID-SPACE", "VIS-TRUNCATED", "VIS-NO-DEVICES"}, True),
    ("a100x8", "GPU-3ceaaf30 ", None, [], "s",
     {"VIS-UUID-SPACE", "VIS-TRUNCATED", "VIS-NO-DEVICES"}, True),
    # --- kind mixing ends the list
    ("a100x8", "0,GPU-9942190a", None, ["0"], "vs", {"VIS-TRUNCATED"}, True),
    ("a100x8", "GPU-3ceaaf30,0", None, ["1"], "vs", {"VIS-TRUNCATED", "VIS-INDEX-MISMATCH"}, True),
    ("a100x8", "3,GPU-9dfb,-1,1", None, ["3"], "vsii",
     {"VIS-TRUNCATED", "VIS-INDEX-MISMATCH"}, True),
    # --- values that make torch.cuda.device_count() raise
    ("a100x8", "-", None, [], "s", {"VIS-NO-DEVICES", "VIS-TORCH-RAISES"}, True),
    ("a100x8", "0,+", None, ["0"], "vs", {"VIS-TORCH-RAISES"}, True),
    ("a100x8", "0,+x,1", None, ["0"], "vsi", {"VIS-TRUNCATED", "VIS-TORCH-RAISES"}, True),
    # --- order: identical GPUs follow PCI order, known or not
    ("a100x8_no_order", "1,0", None, ["1", "0"], "vv", {"VIS-INDEX-MISMATCH"}, True),
    # --- order: mixed models
    ("mixed4", None, None, ["1", "3", "0", "2"], "",
     {"VIS-ORDER-MIXED", "VIS-INDEX-MISMATCH", "VIS-TORCH-NVML-ORDER"}, True),
    ("mixed4", None, "PCI_BUS_ID", ["0", "1", "2", "3"], "", set(), True),
    ("mixed4", "0", None, ["1"], "v",
     {"VIS-ORDER-MIXED", "VIS-INDEX-MISMATCH", "VIS-TORCH-NVML-ORDER"}, True),
    ("mixed4", "0", "FASTEST_FIRST", ["1"], "v",
     {"VIS-ORDER-MIXED", "VIS-INDEX-MISMATCH", "VIS-TORCH-NVML-ORDER"}, True),
    ("mixed4", "0", "PCI_BUS_ID", ["0"], "v", set(), True),
    ("mixed4", "2,3", None, ["0", "2"], "vv",
     {"VIS-ORDER-MIXED", "VIS-INDEX-MISMATCH", "VIS-TORCH-NVML-ORDER"}, True),
    ("mixed4", "GPU-78b7d0ac", None, ["0"], "v", set(), True),
    # Any other CUDA_DEVICE_ORDER makes cuInit fail: no device (recorded).
    ("mixed4", "0", "pci_bus_id", [], "i", {"VIS-ORDER-INVALID", "VIS-TORCH-COUNT"}, True),
    ("mixed4", "", " PCI_BUS_ID", [], "s", {"VIS-ORDER-INVALID"}, True),
    ("mixed4_no_order", "0", None, ["0"], "v", {"VIS-ORDER-UNCERTAIN"}, False),
    ("mixed4_no_order", None, None, ["0", "1", "2", "3"], "", {"VIS-ORDER-UNCERTAIN"}, False),
    ("mixed4_no_order", "0", "PCI_BUS_ID", ["0"], "v", set(), True),
    # --- MIG
    ("mig", None, None, ["0/MIG-8df08078"], "",
     {"VIS-MIG-UNCERTAIN", "VIS-MIG-HIDES-GPU", "VIS-TORCH-COUNT"}, False),
    ("mig_one", None, None, ["0/MIG-8df08078"], "", {"VIS-MIG-HIDES-GPU", "VIS-TORCH-COUNT"},
     True),
    ("mig", "MIG-8df08078-a22e-a180-c5c2-c2af3977a654", None, ["0/MIG-8df08078"], "v", set(),
     True),
    ("mig", "MIG-c498", None, ["0/MIG-c498b6e7"], "v", set(), True),
    ("mig", "MIG-8df08078,MIG-f3194a3b", None, ["0/MIG-8df08078"], "vi", {"VIS-MIG-MULTIPLE"},
     True),
    ("mig", "MIG-f3194a3b,MIG-8df08078", None, ["0/MIG-f3194a3b"], "vi", {"VIS-MIG-MULTIPLE"},
     True),
    ("mig", "MIG-8df0,MIG-8df08078", None, [], "is", {"VIS-DUPLICATE"}, True),
    ("mig", "MIG-", None, [], "s", {"VIS-TRUNCATED", "VIS-NO-DEVICES"}, True),
    ("mig", "MIG-GPU-99356597/7/0", None, ["0/MIG-f3194a3b"], "v", set(), True),
    ("mig", "MIG-GPU-99356597-6fba-f662-f6a7-30b7b12e9eed/9/0", None, ["0/MIG-ab57f985"], "v",
     set(), True),
    ("mig", "MIG-GPU-99356597/5/0", None, [], "s", {"VIS-TRUNCATED", "VIS-NO-DEVICES"}, True),
    ("mig", "MIG-GPU-c1b87f1a/1/0", None, [], "s", {"VIS-TRUNCATED", "VIS-NO-DEVICES"}, True),
    ("mig", "1", None, ["1"], "v", {"VIS-INDEX-MISMATCH"}, True),
    ("mig", "0,1", None, ["0/MIG-8df08078"], "vi",
     {"VIS-MIG-UNCERTAIN", "VIS-MIG-HIDES-GPU", "VIS-TORCH-COUNT"}, False),
    ("mig", "1,0", None, ["0/MIG-8df08078"], "iv",
     {"VIS-MIG-UNCERTAIN", "VIS-MIG-HIDES-GPU", "VIS-TORCH-COUNT"}, False),
    ("mig", "GPU-c1b8,MIG-8df0", None, ["0/MIG-8df08078"], "iv", {"VIS-MIG-HIDES-GPU"}, True),
    ("mig", "0,MIG-8df0", None, ["0/MIG-8df08078"], "vs",
     {"VIS-TRUNCATED", "VIS-MIG-UNCERTAIN"}, False),
    ("mig_empty", None, None, ["1"], "",
     {"VIS-MIG-NO-INSTANCE", "VIS-INDEX-MISMATCH", "VIS-TORCH-COUNT", "VIS-TORCH-NVML-ORDER"},
     True),
    ("mig_empty", "0", None, [], "i", {"VIS-MIG-NO-INSTANCE", "VIS-NO-DEVICES", "VIS-TORCH-COUNT"},
     True),
    # --- a lost GPU: NVML still numbers it, CUDA does not enumerate it
    ("lost", None, None, ["0", "1", "3"], "",
     {"VIS-INDEX-MISMATCH", "VIS-TORCH-COUNT", "VIS-TORCH-NVML-ORDER"}, True),
    ("lost", "2", None, ["3"], "v", {"VIS-INDEX-MISMATCH", "VIS-TORCH-NVML-ORDER"}, True),
    ("lost", "3", "PCI_BUS_ID", [], "s",
     {"VIS-TRUNCATED", "VIS-NO-DEVICES", "VIS-TORCH-COUNT"}, True),
    ("lost", "GPU-bafe9bd1", None, ["3"], "v", {"VIS-INDEX-MISMATCH"}, True),
    # --- no driver / no GPU
    ("no_driver", None, None, [], "", set(), True),
    ("no_driver", "0", None, [], "s", {"VIS-TRUNCATED", "VIS-NO-DEVICES"}, True),
]  # fmt: skip


def _device_ids(resolution: Resolution) -> list[str]:
    out = []
    for device in resolution.devices:
        if device.mig_uuid is None:
            out.append(str(device.nvml_index))
        else:
            out.append(f"{device.nvml_index}/{device.mig_uuid[:12]}")
    return out


@pytest.mark.parametrize(
    ("snap", "spec", "order", "devices", "outcomes", "codes", "certain"),
    CASES,
    ids=[f"{c[0]}:{c[1]!r}:{c[2]}" for c in CASES],
)
def test_rules(
    snap: str,
    spec: str | None,
    order: str | None,
    devices: list[str],
    outcomes: str,
    codes: set[str],
    certain: bool,
) -> None:
    snapshot = SNAPSHOTS[snap]
    resolution = resolve_visible(spec, order, snapshot)
    assert _device_ids(resolution) == devices
    assert [d.cuda_ordinal for d in resolution.devices] == list(range(len(devices)))
    assert "".join(e.outcome[0] for e in resolution.explanations) == outcomes
    assert {f.code for f in resolution.findings} == codes
    assert resolution.certain is certain
    assert resolution.method == "rules"
    assert resolution.spec == spec
    assert resolution.order == ("PCI_BUS_ID" if order == "PCI_BUS_ID" else "FASTEST_FIRST")
    # every explanation is one line, quotes its entry, and every code is declared
    for explanation in resolution.explanations:
        assert "\n" not in explanation.text
        assert explanation.position == resolution.explanations.index(explanation) + 1
    for finding in resolution.findings:
        assert finding.code in CODES
        assert "\n" not in finding.message


@pytest.mark.parametrize(
    ("snap", "spec", "order", "texts"),
    [
        ("a100x8", "2", None, ['"2" → integer 2 → GPU 2 → cuda:0']),
        (
            "a100x8",
            "0,2,-1,1",
            None,
            [
                '"0" → integer 0 → GPU 0 → cuda:0',
                '"2" → integer 2 → GPU 2 → cuda:1',
                '"-1" → negative (CUDA reads it as 4294967295: no such device): the list ends here; '
                "later entries are ignored",
                '"1" → ignored: the list ended at entry 3',
            ],
        ),
        (
            "mixed4",
            "0",
            None,
            ['"0" → integer 0 → FASTEST_FIRST position 0 → GPU 1 → cuda:0'],
        ),
        (
            "a100x8",
            "00,0",
            None,
            [
                '"00" → integer 0 (read like strtoul: sign and leading digits only) → GPU 0 '
                "→ dropped: entry 2 duplicates an entry",
                '"0" → integer 0 → GPU 0 → duplicate of entry 1: '
                "CUDA then exposes no device at all",
            ],
        ),
        (
            "a100x8",
            "9",
            None,
            [
                '"9" → integer 9 → no such device (CUDA sees 8 GPU(s): 0–7): the list ends '
                "here; later entries are ignored"
            ],
        ),
        (
            "a100x8",
            "GPU-",
            None,
            [
                '"GPU-" → not a UUID CUDA can read (after GPU-/MIG- it accepts only hex '
                "digits and dashes up to the 32nd digit, no spaces): the list ends here; "
                "later entries are ignored"
            ],
        ),
        ("a100x8", "", None, ['"" → empty value: no device']),
        (
            "a100x8",
            "NoDevFiles",
            None,
            ["\"NoDevFiles\" → HTCondor's 'no GPU assigned' value: no device"],
        ),
        (
            "mig",
            "0,1",
            None,
            [
                '"0" → integer 0 → GPU 0 is in MIG mode → its MIG device MIG-8df08078… → cuda:0',
                '"1" → integer 1 → GPU 1 → hidden: a MIG device is '
                "enumerated, so CUDA hides non-MIG GPUs",
            ],
        ),
        (
            "mig",
            "MIG-8df08078,MIG-f319",
            None,
            [
                '"MIG-8df08078" → MIG device MIG-8df08078… (GPU instance 1, compute instance 0) '
                "on GPU 0 → cuda:0",
                '"MIG-f319" → MIG device MIG-f3194a3b… (GPU instance 7, compute instance 0) '
                "on GPU 0 → not enumerated: CUDA enumerates only one MIG "
                "device per process",
            ],
        ),
        (
            "a100x8",
            "GPU-9dfb369b",
            None,
            ['"GPU-9dfb369b" → UUID prefix of GPU 2 → cuda:0'],
        ),
        (
            "a100x8",
            "0,GPU-9dfb",
            None,
            [
                '"0" → integer 0 → GPU 0 → cuda:0',
                '"GPU-9dfb" → a UUID after integer entries (CUDA does not mix indices and '
                "UUIDs): the list ends here; later entries are ignored",
            ],
        ),
    ],
)
def test_explanation_text(snap: str, spec: str, order: str | None, texts: list[str]) -> None:
    resolution = resolve_visible(spec, order, SNAPSHOTS[snap])
    assert [e.text for e in resolution.explanations] == texts


def test_truncated_names_the_entry() -> None:
    resolution = resolve_visible("0,2,-1,1", None, A100X8)
    (finding,) = [f for f in resolution.findings if f.code == "VIS-TRUNCATED"]
    assert finding.message == (
        'CUDA_VISIBLE_DEVICES="0,2,-1,1": entry 3 ("-1") is invalid (negative (CUDA reads '
        "it as 4294967295: no such device)), so the list ends before it; the 1 later entry "
        "is ignored."
    )
    assert finding.severity == "warning"


def test_duplicate_finding() -> None:
    resolution = resolve_visible("00,0", None, A100X8)
    (finding,) = resolution.findings
    assert finding.code == "VIS-DUPLICATE"
    assert finding.severity == "error"
    # cuInit fails with CUDA_ERROR_INVALID_DEVICE (recorded on driver 580), which
    # torch reports as an unexpected cudaGetDeviceCount error at initialisation.
    assert finding.predicts is not None
    assert finding.predicts.startswith("RuntimeError: Unexpected error from cudaGetDeviceCount()")
    assert finding.predicts.endswith("Error 101: invalid device ordinal")
    assert 'entry 2 ("0") selects the same device as entry 1' in finding.message
    assert resolution.cuinit_error == "CUDA_ERROR_INVALID_DEVICE"


def test_torch_raises_finding_predicts_the_error() -> None:
    (finding,) = [
        f for f in resolve_visible("-", None, A100X8).findings if f.code == "VIS-TORCH-RAISES"
    ]
    assert finding.predicts == "ValueError: invalid literal for int() with base 10: '-'"
    assert finding.severity == "error"


def test_torch_count_above_cuda_predicts_both_texts() -> None:
    # torch counts NVML's 2 devices, CUDA enumerates 1 MIG device: DataParallel's
    # get_device_properties(1) hits ATen's assert, set_device(1) a CUDA error.
    (finding,) = [
        f for f in resolve_visible(None, None, MIG).findings if f.code == "VIS-TORCH-COUNT"
    ]
    assert "returns 2 (torch reads the value itself" in finding.message
    assert "CUDA exposes 1" in finding.message
    assert finding.predicts == (
        "RuntimeError: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED"
    )
    version = MIG.torch.version if MIG.torch is not None else None
    modern = version is None or (torch_version_tuple(version) or (0, 0)) >= (2, 8)
    cls = "torch.AcceleratorError" if modern else "RuntimeError"
    assert finding.predicts_also[0] == (
        f"torch.cuda.set_device(1): {cls}: CUDA error: invalid device ordinal"
    )


def test_torch_count_zero_while_cuda_sees_the_gpu_is_an_error() -> None:
    # Recorded on torch 2.11 / driver 580: upper-case hex selects the GPU for CUDA,
    # torch.cuda.device_count() returns 0.
    resolution = resolve_visible("GPU-9942190A", None, A100X8)
    (finding,) = [f for f in resolution.findings if f.code == "VIS-TORCH-COUNT"]
    assert finding.severity == "error"
    assert "returns 0" in finding.message and "CUDA exposes 1" in finding.message
    assert [d.nvml_index for d in resolution.devices] == [0]


def test_uuid_case_prefix_is_case_sensitive() -> None:
    (finding,) = [
        f
        for f in resolve_visible("gpu-9942190a", None, A100X8).findings
        if f.code == "VIS-UUID-CASE"
    ]
    assert "'GPU-' and 'MIG-'" in finding.message
    assert finding.fix == 'Write it as nvidia-smi -L prints it: "GPU-9942190a".'


def test_uuid_space_fix_shows_the_clean_value() -> None:
    (finding,) = [
        f
        for f in resolve_visible("GPU-9942190a, GPU-3ceaaf30", None, A100X8).findings
        if f.code == "VIS-UUID-SPACE"
    ]
    assert finding.fix == "Remove the spaces: CUDA_VISIBLE_DEVICES=GPU-9942190a,GPU-3ceaaf30"


def test_torch_nvml_order_names_the_wrong_gpu() -> None:
    (finding,) = [
        f for f in resolve_visible("0", None, MIXED4).findings if f.code == "VIS-TORCH-NVML-ORDER"
    ]
    assert "cuda:0 → nvidia-smi GPU 0 (it is GPU 1)" in finding.message


def test_mixed_order_lists_the_renumbering() -> None:
    (finding,) = [
        f for f in resolve_visible(None, None, MIXED4).findings if f.code == "VIS-ORDER-MIXED"
    ]
    assert "CUDA 0 = nvidia-smi 1, CUDA 1 = nvidia-smi 3" in finding.message
    assert finding.fix == "export CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA indices match nvidia-smi."


def test_mig_visible_device_json_has_parent_uuid() -> None:
    (device,) = resolve_visible("MIG-c498", None, MIG).devices
    assert device.to_json() == {
        "cuda_ordinal": 0,
        "nvml_index": 0,
        "uuid": "GPU-99356597-6fba-f662-f6a7-30b7b12e9eed",
        "mig_uuid": "MIG-c498b6e7-3648-245e-dafa-3a387f006745",
    }
    assert device.entry == "MIG-c498"


def test_unset_has_no_explanations() -> None:
    assert resolve_visible(None, None, A100X8).explanations == ()


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1gpu2", 1),
        ("0x1", 0),
        ("+3", 3),
        ("-0", 0),
        ("007", 7),
        ("0-2", 0),
        (" 4", 4),
        ("-2", 2**64 - 2),  # unsigned arithmetic, as C
        ("-18446744073709551615", 1),
        ("18446744073709551616", 2**64 - 1),
        ("", None),
        ("abc", None),
        ("-", None),
        ("+", None),
        ("+-1", None),
        ("٣", None),  # only ASCII digits, as C in the "C" locale
        # strtoul saturates at ULONG_MAX; int() would refuse over 4300 digits.
        ("9" * 5000, 2**64 - 1),
        ("-" + "9" * 5000, 2**64 - 1),  # ERANGE: ULONG_MAX whatever the sign
    ],
)
def test_c_strtoul(text: str, value: int | None) -> None:
    assert c_strtoul(text) == value


@pytest.mark.parametrize(
    ("text", "index"),
    [
        # Recorded on driver 580 (tests/truth/h100-driver-580.json).
        ("4294967296", 0),
        ("8589934592", 0),
        ("-4294967296", 0),
        ("4294967297", 1),
        ("2147483648", 2147483648),
        ("18446744073709551616", 2**32 - 1),
        ("-1", 2**32 - 1),
        ("0.5", 0),
        ("", None),
    ],
)
def test_cuda_index_keeps_the_low_32_bits(text: str, index: int | None) -> None:
    assert cuda_index(text) == index


@pytest.mark.parametrize(
    ("body", "digits"),
    [
        ("300C76EF", "300c76ef"),
        ("300c-76ef", "300c76ef"),
        ("300c76ef--", "300c76ef"),
        ("300c76ef-ae2f-3ead-5bb1-9379b683f3fbX", "300c76efae2f3ead5bb19379b683f3fb"),
        ("300c76ef-ae2f-3ead-5bb1-9379b683f3fb0", "300c76efae2f3ead5bb19379b683f3fb"),
        ("300c76ef ", None),
        ("300c76eg", None),
        ("300c:76ef", None),
        ("", None),
        ("-", None),
    ],
)
def test_uuid_hex_reads_like_the_driver(body: str, digits: str | None) -> None:
    assert uuid_hex(body) == digits


def test_codes_are_well_formed() -> None:
    assert all(re.fullmatch(r"VIS-[A-Z]+(-[A-Z]+)*", code) for code in CODES)
    assert all(title and "\n" not in title for title in CODES.values())


def test_module_has_no_heavy_imports() -> None:
    # visibility is a package: every module of it, not only its __init__.
    paths = sorted(Path(visibility.__file__).parent.glob("*.py"))
    assert len(paths) > 1
    for path in paths:
        source = path.read_text(encoding="utf-8")
        # By the import statements: "from ... import torch_view" is no torch import.
        imported = {
            name.split(".")[0]
            for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for name in (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
        }
        assert "torch" not in imported, path.name
        assert "pynvml" not in source, path.name


# ------------------------------------------------------------------ slurm


@pytest.mark.parametrize(
    ("env", "spec", "snap", "codes", "needle"),
    [
        ({}, "0,1", "a100x8", [], None),
        ({"SLURM_JOB_GPUS": "0,1"}, "0,1", "a100x8", [], None),
        ({"SLURM_JOB_GPUS": "1,0"}, "0,1", "a100x8", [], None),
        (
            {"SLURM_JOB_GPUS": "2,3"},
            "0,1",
            "a100x8",
            ["VIS-SLURM-MISMATCH"],
            "Slurm allocated nvidia-smi GPU(s) 2, 3 but CUDA_VISIBLE_DEVICES exposes "
            "nvidia-smi 0, nvidia-smi 1",
        ),
        # the step's allocation wins over the job's
        ({"SLURM_JOB_GPUS": "0,1,2,3", "SLURM_STEP_GPUS": "2,3"}, "2,3", "a100x8", [], None),
        (
            {"SLURM_JOB_GPUS": "GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1"},
            "1",
            "a100x8",
            ["VIS-SLURM-MISMATCH"],
            "Slurm allocated nvidia-smi GPU(s) 0",
        ),
        ({"SLURM_JOB_GPUS": "GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1"}, "0", "a100x8", [], None),
        (
            {"SLURM_JOB_GPUS": "MIG-8df08078-a22e-a180-c5c2-c2af3977a654"},
            "MIG-8df08078",
            "mig",
            [],
            None,
        ),
        # cgroup-constrained job: indices beyond the visible inventory compare by count
        ({"SLURM_JOB_GPUS": "6,7"}, "0,1", "lost", [], None),
        (
            {"SLURM_JOB_GPUS": "5,6,7"},
            "0",
            "lost",
            ["VIS-SLURM-MISMATCH"],
            "Slurm allocated 3 GPU(s) but CUDA exposes 1",
        ),
        (
            {"SLURM_JOB_GPUS": "GPU-deadbeef"},
            "0",
            "a100x8",
            ["VIS-SLURM-MISMATCH"],
            'names "GPU-deadbeef", which is not a GPU of this machine',
        ),
    ],
)
def test_slurm(
    env: dict[str, str], spec: str, snap: str, codes: list[str], needle: str | None
) -> None:
    snapshot = SNAPSHOTS[snap]
    resolution = resolve_visible(spec, None, snapshot)
    findings = slurm_findings(env, resolution, snapshot)
    assert [f.code for f in findings] == codes
    if needle is not None:
        assert needle in findings[0].message
        assert findings[0].severity == "warning"


# ------------------------------------------------------------------ python API guard


@pytest.mark.parametrize(
    ("at_init", "now", "expected"),
    [
        ("0,1", "0,1", None),
        (None, None, None),
        ("0,1", "2", 'from "0,1" to "2"'),
        (None, "1", 'from unset to "1"'),
        ("0", None, 'from "0" to unset'),
        ("", "0", 'from "" to "0"'),
    ],
)
def test_cvd_changed_after_init(at_init: str | None, now: str | None, expected: str | None) -> None:
    finding = cvd_changed_after_init(at_init, now)
    if expected is None:
        assert finding is None
        return
    assert finding is not None
    assert finding.code == "VIS-CVD-CHANGED"
    assert finding.severity == "error"
    assert expected in finding.message


# ------------------------------------------------------------------ driver mapping


def test_driver_agrees_keeps_mapping_and_switches_method() -> None:
    rules = resolve_visible("2,3", None, A100X8)
    driver = apply_driver_mapping(
        rules,
        ["GPU-9dfb369b-ab13-dfae-6276-55daa05f1119", "GPU-6301bbfc-a0c5-154e-0ff9-bb510944fe0c"],
        A100X8,
    )
    assert driver.method == "driver"
    assert driver.devices == rules.devices
    assert driver.findings == rules.findings
    assert driver.explanations == rules.explanations
    assert driver.certain is True


def test_driver_disagrees_raises_finding_and_uses_driver_answer() -> None:
    rules = resolve_visible("0,1", None, MIXED4_NO_ORDER)
    assert not rules.certain
    # The driver says FASTEST_FIRST put the two 3090s first.
    driver = apply_driver_mapping(
        rules,
        ["GPU-2330fcf1-562a-e4b8-4866-8d77e827062c", "GPU-9ad9b9a2-5e78-454d-f065-a1c284cc4549"],
        MIXED4_NO_ORDER,
    )
    assert [d.nvml_index for d in driver.devices] == [1, 3]
    assert driver.certain is True
    codes = [f.code for f in driver.findings]
    assert "VIS-DRIVER-DISAGREES" in codes
    assert "VIS-ORDER-UNCERTAIN" not in codes  # the driver settled the order
    (finding,) = [f for f in driver.findings if f.code == "VIS-DRIVER-DISAGREES"]
    assert (
        "driver enumerated [GPU-2330fcf1…, GPU-9ad9b9a2…] but gpudiag's rules predicted "
        "[GPU-78b7d0ac…, GPU-2330fcf1…]" in finding.message
    )


def test_driver_mig_uuid_joins_on_hex_whatever_the_prefix() -> None:
    rules = resolve_visible(None, None, MIG)
    # A driver without the v1 UUID call reports the MIG device with a GPU- prefix.
    driver = apply_driver_mapping(rules, ["GPU-8df08078-a22e-a180-c5c2-c2af3977a654"], MIG)
    assert [(d.nvml_index, d.mig_uuid) for d in driver.devices] == [
        (0, "MIG-8df08078-a22e-a180-c5c2-c2af3977a654")
    ]
    codes = [f.code for f in driver.findings]
    assert "VIS-DRIVER-DISAGREES" not in codes
    assert "VIS-MIG-UNCERTAIN" not in codes
    assert driver.certain is True


def test_driver_unmatched_uuid() -> None:
    rules = resolve_visible("0", None, A100X8)
    driver = apply_driver_mapping(rules, ["GPU-00000000-0000-0000-0000-000000000000"], A100X8)
    assert driver.devices == ()
    assert driver.certain is False
    assert {"VIS-DRIVER-UNMATCHED", "VIS-DRIVER-DISAGREES"} <= {f.code for f in driver.findings}


def test_driver_entry_is_carried_over() -> None:
    rules = resolve_visible("GPU-6301", None, A100X8)
    driver = apply_driver_mapping(rules, ["GPU-6301bbfc-a0c5-154e-0ff9-bb510944fe0c"], A100X8)
    assert driver.devices[0].entry == "GPU-6301"


def test_mig_device_model_types() -> None:
    # Sanity on the synthetic MIG snapshot used above.
    assert isinstance(MIG_ONE.gpus[0].mig_devices[0], MigDevice)
    assert len(MIG_ONE.gpus[0].mig_devices) == 1
