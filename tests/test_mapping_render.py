"""Golden text of the logical → physical mapping (gpudiag.render.mapping)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpudiag.core.visibility import apply_driver_mapping, resolve_visible
from gpudiag.render.mapping import render_mapping, resolution_to_json, short_pci_bus_id
from gpudiag.render.text import Style

from .conftest import load_fixture

A100X8 = load_fixture("a100x8")
MIXED4 = load_fixture("mixed4")
MIG = load_fixture("a100_mig")

RULES = "Method: rules (CUDA's documented rules; not confirmed by the driver)"

GOLDEN: list[tuple[str, str | None, str | None, str]] = [
    (
        "a100x8",
        "3,GPU-9dfb,-1,1",
        None,
        """\
cuda:0 → GPU 3 (GPU-6301bbfc…, 0000:4E:00.0, NVIDIA A100-SXM4-80GB)

How CUDA_VISIBLE_DEVICES="3,GPU-9dfb,-1,1" was read (CUDA_DEVICE_ORDER=FASTEST_FIRST):
  1. "3" → integer 3 → GPU 3 → cuda:0
  2. "GPU-9dfb" → a UUID after integer entries (CUDA does not mix indices and UUIDs): \
the list ends here; later entries are ignored
  3. "-1" → ignored: the list ended at entry 2
  4. "1" → ignored: the list ended at entry 2
"""
        + RULES,
    ),
    (
        "mixed4",
        "1,0",
        None,
        """\
cuda:0 → GPU 3 (GPU-9ad9b9a2…, 0000:4B:00.0, NVIDIA GeForce RTX 3090)
cuda:1 → GPU 1 (GPU-2330fcf1…, 0000:21:00.0, NVIDIA GeForce RTX 3090)

How CUDA_VISIBLE_DEVICES="1,0" was read (CUDA_DEVICE_ORDER=FASTEST_FIRST):
  1. "1" → integer 1 → FASTEST_FIRST position 1 → GPU 3 → cuda:0
  2. "0" → integer 0 → FASTEST_FIRST position 0 → GPU 1 → cuda:1
"""
        + RULES,
    ),
    (
        "a100_mig",
        None,
        None,
        """\
cuda:0 → MIG device MIG-8df08078…, GPU instance 1, compute instance 0, 19968 MiB on GPU 0 \
(GPU-99356597…, 0000:17:00.0, NVIDIA A100-SXM4-40GB)

CUDA_VISIBLE_DEVICES is unset: CUDA enumerates every GPU it can (CUDA_DEVICE_ORDER=FASTEST_FIRST).
"""
        + RULES
        + """
Warning: this mapping is uncertain: it rests on an order or a MIG choice that gpudiag \
could not confirm (see the findings).""",
    ),
    (
        "a100x8",
        "",
        None,
        """\
No CUDA device is visible.

How CUDA_VISIBLE_DEVICES="" was read (CUDA_DEVICE_ORDER=FASTEST_FIRST):
  1. "" → empty value: no device
"""
        + RULES,
    ),
    (
        "a100x8",
        "00,0",
        "PCI_BUS_ID",
        """\
No CUDA device is visible.

How CUDA_VISIBLE_DEVICES="00,0" was read (CUDA_DEVICE_ORDER=PCI_BUS_ID):
  1. "00" → integer 0 (read like strtoul: sign and leading digits only) → GPU 0 \
→ dropped: entry 2 duplicates an entry
  2. "0" → integer 0 → GPU 0 → duplicate of entry 1: CUDA then \
exposes no device at all
"""
        + RULES,
    ),
]


@pytest.mark.parametrize(("name", "spec", "order", "expected"), GOLDEN)
def test_golden(name: str, spec: str | None, order: str | None, expected: str) -> None:
    snapshot = load_fixture(name)
    # Wide enough not to wrap: this is about content; test_screen.py tests the layout.
    wide = Style(width=300)
    assert render_mapping(resolve_visible(spec, order, snapshot), snapshot, wide) == expected


def test_driver_method_line() -> None:
    rules = resolve_visible("0", None, replace(MIXED4, cuda_order=None))
    assert "Warning: this mapping is uncertain" in render_mapping(rules, MIXED4)
    driver = apply_driver_mapping(rules, ["GPU-2330fcf1-562a-e4b8-4866-8d77e827062c"], MIXED4)
    text = render_mapping(driver, MIXED4)
    assert text.splitlines()[0] == (
        "cuda:0 → GPU 1 (GPU-2330fcf1…, 0000:21:00.0, NVIDIA GeForce RTX 3090)"
    )
    assert "Method: driver (the CUDA driver enumerated these devices in a fresh process)" in text
    assert "uncertain" not in text


def test_resolution_to_json() -> None:
    resolution = resolve_visible("0,2,-1,1", None, A100X8)
    assert resolution_to_json(resolution) == {
        "spec": "0,2,-1,1",
        "order": "FASTEST_FIRST",
        "method": "rules",
        "certain": True,
        "cuinit_error": None,
        "explanations": [
            {
                "position": 1,
                "entry": "0",
                "outcome": "visible",
                "text": '"0" → integer 0 → GPU 0 → cuda:0',
            },
            {
                "position": 2,
                "entry": "2",
                "outcome": "visible",
                "text": '"2" → integer 2 → GPU 2 → cuda:1',
            },
            {
                "position": 3,
                "entry": "-1",
                "outcome": "stop",
                "text": '"-1" → negative (CUDA reads it as 4294967295: no such device): '
                "the list ends here; later entries are ignored",
            },
            {
                "position": 4,
                "entry": "1",
                "outcome": "ignored",
                "text": '"1" → ignored: the list ended at entry 3',
            },
        ],
    }


def test_resolution_to_json_unset_mig() -> None:
    assert resolution_to_json(resolve_visible(None, None, MIG)) == {
        "spec": None,
        "order": "FASTEST_FIRST",
        "method": "rules",
        "certain": False,
        "cuinit_error": None,
        "explanations": [],
    }


@pytest.mark.parametrize(
    ("nvml", "short"),
    [
        ("00000000:41:00.0", "0000:41:00.0"),
        ("0000:41:00.0", "0000:41:00.0"),
        ("00000001:41:00.0", "0001:41:00.0"),
        ("00010000:41:00.0", "00010000:41:00.0"),  # a domain over 16 bits stays whole
        ("weird", "weird"),
    ],
)
def test_short_pci_bus_id(nvml: str, short: str) -> None:
    assert short_pci_bus_id(nvml) == short


def test_header_quotes_control_characters_on_one_line() -> None:
    from gpudiag.core.visibility import resolve_visible
    from gpudiag.render.mapping import render_mapping

    from .conftest import load_fixture

    snap = load_fixture("a100x8")
    text = render_mapping(resolve_visible("0\n1,2", None, snap), snap)
    assert 'How CUDA_VISIBLE_DEVICES="0\\n1,2" was read' in text
