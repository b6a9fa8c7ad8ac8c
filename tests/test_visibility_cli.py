"""The issue's CUDA_VISIBLE_DEVICES examples through the command line (``--snapshot``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main

from .conftest import fixture_path

# (fixture, --visible, --order, visible [(nvml_index, mig_uuid prefix)], codes that must appear)
CASES: list[tuple[str, str, str | None, list[tuple[int, str | None]], set[str]]] = [
    ("a100x8", "0,2,-1,1", None, [(0, None), (2, None)], {"VIS-TRUNCATED"}),
    ("a100x8", "0,,1", None, [(0, None)], {"VIS-TRUNCATED"}),
    ("a100x8", ",0", None, [], {"VIS-TRUNCATED", "VIS-NO-DEVICES"}),
    ("a100x8", "00,0", None, [], {"VIS-DUPLICATE"}),
    ("a100x8", "0,1,0", None, [], {"VIS-DUPLICATE"}),
    ("a100x8", "1gpu2", None, [(1, None)], {"VIS-ENTRY-TRAILING"}),
    ("a100x8", "0x1", None, [(0, None)], {"VIS-ENTRY-TRAILING"}),
    ("a100x8", "+3", None, [(3, None)], set()),
    ("a100x8", "-0", None, [(0, None)], set()),
    ("a100x8", "007", None, [(7, None)], set()),
    ("a100x8", "0-2", None, [(0, None)], {"VIS-ENTRY-TRAILING"}),
    ("a100x8", "", None, [], {"VIS-NO-DEVICES"}),
    ("a100x8", " ", None, [], {"VIS-NO-DEVICES"}),
    ("a100x8", "NoDevFiles", None, [], {"VIS-NO-DEVICES"}),
    ("a100x8", "8", None, [], {"VIS-TRUNCATED", "VIS-NO-DEVICES"}),
    ("a100x8", "abc", None, [], {"VIS-NO-DEVICES"}),
    ("a100x8", "0,GPU-9942190a", None, [(0, None)], {"VIS-TRUNCATED"}),
    ("a100x8", "GPU-9dfb", None, [(2, None)], set()),
    ("a100x8", "GPU-9dfb,GPU-9dfb369b", None, [], {"VIS-DUPLICATE"}),
    ("a100x8", "GPU-", None, [], {"VIS-TRUNCATED"}),
    ("a100x8", "GPU-9942190A", None, [(0, None)], {"VIS-TORCH-COUNT"}),
    ("a100x8", "gpu-9942190a", None, [], {"VIS-UUID-CASE"}),
    ("a100x8", "GPU-9942190a, GPU-3ceaaf30", None, [(0, None)], {"VIS-UUID-SPACE"}),
    ("a100x8", "-", None, [], {"VIS-TORCH-RAISES"}),
    ("a100x8", "0,+", None, [(0, None)], {"VIS-TORCH-RAISES"}),
    ("mixed4", "0", None, [(1, None)], {"VIS-ORDER-MIXED", "VIS-TORCH-NVML-ORDER"}),
    ("mixed4", "0", "FASTEST_FIRST", [(1, None)], {"VIS-ORDER-MIXED"}),
    ("mixed4", "0", "PCI_BUS_ID", [(0, None)], set()),
    ("mixed4", "2,0", "PCI_BUS_ID", [(2, None), (0, None)], {"VIS-INDEX-MISMATCH"}),
    ("a100_mig", "MIG-8df08078", None, [(0, "MIG-8df08078")], set()),
    ("a100_mig", "MIG-8df08078,MIG-f3194a3b", None, [(0, "MIG-8df08078")], {"VIS-MIG-MULTIPLE"}),
    ("a100_mig", "MIG-GPU-99356597/7/0", None, [(0, "MIG-f3194a3b")], set()),
    ("a100_mig", "0,1", None, [(0, "MIG-8df08078")], {"VIS-MIG-HIDES-GPU"}),
    ("a100_mig", "1", None, [(1, None)], set()),
    ("gpu_lost", "2", "PCI_BUS_ID", [(3, None)], {"VIS-INDEX-MISMATCH"}),
    ("gpu_lost", "3", "PCI_BUS_ID", [], {"VIS-TRUNCATED", "VIS-TORCH-COUNT"}),
]


def _invoke(*args: str) -> tuple[int, str, str]:
    # Wide: these tests are about content, not wrapping (tests/test_screen.py).
    result = CliRunner().invoke(main, list(args), env={"COLUMNS": "300"})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _args(name: str, spec: str, order: str | None) -> list[str]:
    args = ["list", "--snapshot", str(fixture_path(name)), "--visible", spec]
    if order is not None:
        args += ["--order", order]
    return args


@pytest.mark.parametrize(
    ("name", "spec", "order", "visible", "codes"),
    CASES,
    ids=[f"{c[0]}:{c[1]!r}:{c[2]}" for c in CASES],
)
def test_list_json(
    name: str,
    spec: str,
    order: str | None,
    visible: list[tuple[int, str | None]],
    codes: set[str],
) -> None:
    code, out, err = _invoke(*_args(name, spec, order), "--json")
    assert code == 0
    assert err == ""
    doc = json.loads(out)
    got = [(d["nvml_index"], d["mig_uuid"]) for d in doc["visible"]]
    assert [n for n, _ in got] == [n for n, _ in visible]
    for (_, mig), (_, prefix) in zip(got, visible, strict=True):
        assert (mig is None) == (prefix is None)
        if prefix is not None:
            assert mig.startswith(prefix)
    assert [d["cuda_ordinal"] for d in doc["visible"]] == list(range(len(visible)))
    resolution = doc["resolution"]
    assert resolution["spec"] == spec
    assert resolution["order"] == ("PCI_BUS_ID" if order == "PCI_BUS_ID" else "FASTEST_FIRST")
    assert resolution["method"] == "rules"
    assert len(resolution["explanations"]) == len(spec.split(","))
    assert codes <= {f["code"] for f in doc["findings"]}


@pytest.mark.parametrize(
    ("name", "spec", "order", "lines"),
    [
        (
            "a100x8",
            "3,1",
            None,
            [
                "cuda:0 → GPU 3 (GPU-6301bbfc…, 0000:4E:00.0, NVIDIA A100-SXM4-80GB)",
                "cuda:1 → GPU 1 (GPU-3ceaaf30…, 0000:0F:00.0, NVIDIA A100-SXM4-80GB)",
                'How CUDA_VISIBLE_DEVICES="3,1" was read (CUDA_DEVICE_ORDER=FASTEST_FIRST):',
                '  1. "3" → integer 3 → GPU 3 → cuda:0',
                '  2. "1" → integer 1 → GPU 1 → cuda:1',
                "Method: rules (CUDA's documented rules; not confirmed by the driver)",
            ],
        ),
        (
            "a100x8",
            "0,2,-1,1",
            None,
            [
                '  3. "-1" → negative (CUDA reads it as 4294967295: no such device): the list ends here; later entries are ignored'
            ],
        ),
        (
            "a100_mig",
            "MIG-c498",
            None,
            [
                "cuda:0 → MIG device MIG-c498b6e7…, GPU instance 8, compute instance 0, "
                "4864 MiB on GPU 0 (GPU-99356597…, 0000:17:00.0, "
                "NVIDIA A100-SXM4-40GB)"
            ],
        ),
        (
            "mixed4",
            "0",
            "PCI_BUS_ID",
            [
                "cuda:0 → GPU 0 (GPU-78b7d0ac…, 0000:01:00.0, NVIDIA GeForce GTX 1080 Ti)",
                'How CUDA_VISIBLE_DEVICES="0" was read (CUDA_DEVICE_ORDER=PCI_BUS_ID):',
            ],
        ),
        ("a100x8", "", None, ["No CUDA device is visible."]),
    ],
)
def test_list_human_shows_mapping(
    name: str, spec: str, order: str | None, lines: list[str]
) -> None:
    code, out, err = _invoke(*_args(name, spec, order))
    assert code == 0
    assert err == ""
    out_lines = out.splitlines()
    for line in lines:
        assert line in out_lines


def test_uncertain_mapping_warns_in_human_output(tmp_path: Path) -> None:
    doc = json.loads(fixture_path("mixed4").read_text())
    doc["cuda_order"] = None
    path = tmp_path / "mixed4-no-order.json"
    path.write_text(json.dumps(doc))
    code, out, err = _invoke("list", "--snapshot", str(path), "--visible", "0")
    assert code == 0 and err == ""
    assert "Warning: this mapping is uncertain" in out
    assert "VIS-ORDER-UNCERTAIN" in out
    code, out, _ = _invoke("list", "--snapshot", str(path), "--visible", "0", "--json")
    assert json.loads(out)["resolution"]["certain"] is False


def test_bad_order_is_bad_input() -> None:
    code, out, err = _invoke(
        "list", "--snapshot", str(fixture_path("a100x8")), "--visible", "0", "--order", "SLOWEST"
    )
    assert code == 2
    assert out == ""
    assert "SLOWEST" in err
    assert "Traceback" not in err
