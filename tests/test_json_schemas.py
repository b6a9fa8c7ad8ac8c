"""Every JSON document gpudiag prints matches the schema its documentation gives (issue 16,
item 5): a key removed from the output fails, an undocumented key added fails, and so does
a value of another type.

The schemas are tests/schemas/*.json, plain data read by the small validator below (no
dependency):

- ``"str"``, ``"int"``, ``"number"``, ``"bool"``, ``"null"``, joined by ``|``: a scalar;
  ``"=word"``: the string ``word`` (a documented closed set: ``"=error|=warning|=info"``);
- ``[SPEC]``: a list whose items are SPEC;
- ``{"key": SPEC, ...}``: an object with exactly these keys;
- ``{"*": SPEC}``: an object with any keys (``"$keys"``: the only keys allowed;
  ``"$examples"``: key names the docs show as examples, not a closed list);
- ``{"$or": [SPEC, ...]}``: one of them;
- ``{"$ref": "NAME"}`` or ``{"$ref": "NAME#key"}``: the object of schema NAME (or of its
  key, a list's item), merged with the keys written beside ``$ref`` (which win).

``test_schema_is_the_documentation`` ties each schema to its section of docs/: every key
the schema names is mentioned there, and every key the docs' tables and JSON examples name
is in the schema. The documents themselves come from the CLI on the fixture snapshots
(in process, controlled environment: tests/pinned.py); see each test for how.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpudiag.probes.pairs import PairRow
from gpudiag.probes.results import (
    BandwidthRow,
    Check,
    HangInfo,
    MemoryRow,
    ProbeReport,
    ProbeResult,
    RankRow,
)
from gpudiag.render.probe import render_probe_json
from gpudiag.snapshot import dump_snapshot, load_snapshot

from .conftest import FIXTURES
from .pinned import CHECK_CASES, run_cli, write_duplicate_mask_case

SCHEMAS = Path(__file__).parent / "schemas"
DOCS = Path(__file__).parent.parent / "docs"
ALL_FIXTURES = sorted(p.stem for p in FIXTURES.glob("*.json"))


def _schema(name: str) -> Any:
    return json.loads((SCHEMAS / f"{name}.json").read_text())


def _resolve(spec: dict[str, Any]) -> dict[str, Any]:
    """An object spec with its ``$ref`` merged in."""
    if "$ref" not in spec:
        return spec
    name, _, key = spec["$ref"].partition("#")
    target: Any = _schema(name)
    if key:
        target = target[key]
        if isinstance(target, list):
            target = target[0]
    own = {k: v for k, v in spec.items() if k != "$ref"}
    return {**_resolve(target), **own}


_SCALARS = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def validate(value: Any, spec: Any, path: str, errors: list[str], seen: set[str]) -> None:
    """Append to ``errors`` where ``value`` breaks ``spec``; add the paths visited to ``seen``."""
    seen.add(path)
    where = path or "(top level)"
    if isinstance(spec, str):
        if not any(
            value == t[1:] if t.startswith("=") else _SCALARS[t](value) for t in spec.split("|")
        ):
            errors.append(f"{where}: {value!r} is not {spec}")
    elif isinstance(spec, list):
        if not isinstance(value, list):
            errors.append(f"{where}: {type(value).__name__} is not a list")
            return
        for item in value:
            validate(item, spec[0], f"{path}[]", errors, seen)
    elif "$or" in spec:
        tried = []
        for alternative in spec["$or"]:
            alt_errors: list[str] = []
            alt_seen: set[str] = set()
            validate(value, alternative, path, alt_errors, alt_seen)
            if not alt_errors:
                seen |= alt_seen
                return
            tried.append("; ".join(alt_errors))
        errors.append(f"{where}: matches no alternative ({' | '.join(tried)})")
    else:
        spec = _resolve(spec)
        if not isinstance(value, dict):
            errors.append(f"{where}: {type(value).__name__} is not an object")
            return
        if "*" in spec:
            allowed = spec.get("$keys")
            for key, item in value.items():
                if allowed is not None and key not in allowed:
                    errors.append(f"{where}: undocumented key {key!r}")
                validate(item, spec["*"], f"{path}.*", errors, seen)
            return
        keys = {k for k in spec if not k.startswith("$")}
        for key in sorted(keys - set(value)):
            errors.append(f"{where}: documented key {key!r} missing")
        for key in sorted(set(value) - keys):
            errors.append(f"{where}: undocumented key {key!r}")
        for key in sorted(keys & set(value)):
            validate(value[key], spec[key], f"{path}.{key}" if path else key, errors, seen)


def schema_paths(spec: Any, path: str = "") -> Iterator[str]:
    """Every path the validator visits when each part of ``spec`` has a value."""
    yield path
    if isinstance(spec, list):
        yield from schema_paths(spec[0], f"{path}[]")
    elif isinstance(spec, dict) and "$or" in spec:
        for alternative in spec["$or"]:
            yield from schema_paths(alternative, path)
    elif isinstance(spec, dict):
        spec = _resolve(spec)
        if "*" in spec:
            yield from schema_paths(spec["*"], f"{path}.*")
            return
        for key, sub in spec.items():
            if not key.startswith("$"):
                yield from schema_paths(sub, f"{path}.{key}" if path else key)


def assert_documents_match(
    kind: str, documents: Iterable[tuple[str, Any]], always_empty: frozenset[str] = frozenset()
) -> None:
    """Each (label, document) matches schema ``kind``; together they visit all of it, so
    no part of the schema is checked only on empty lists or nulls. ``always_empty``: list
    items the document never has (and the schema of the shared part still names)."""
    spec = _schema(kind)
    errors: list[str] = []
    seen: set[str] = set()
    count = 0
    for label, doc in documents:
        doc_errors: list[str] = []
        validate(doc, spec, "", doc_errors, seen)
        errors += [f"{label}: {e}" for e in doc_errors]
        count += 1
    assert count and not errors, "\n".join(errors[:40])
    unvisited = set(schema_paths(spec)) - seen - always_empty
    assert not unvisited, f"no {kind} document exercised {sorted(unvisited)}"


# ---- the validator can fail --------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": 1, "b": [{"c": None}]}, None),
        ({"a": 1}, "documented key 'b' missing"),
        ({"a": 1, "b": [], "z": 0}, "undocumented key 'z'"),
        ({"a": True, "b": []}, "a: True is not int"),
        ({"a": 1, "b": [{"c": 1}]}, "b[].c: 1 is not str|null"),
        ({"a": 1, "b": [{"c": None, "d": 2}]}, "b[]: undocumented key 'd'"),
    ],
)
def test_validator_finds_each_kind_of_drift(value: Any, message: str | None) -> None:
    errors: list[str] = []
    validate(value, {"a": "int", "b": [{"c": "str|null"}]}, "", errors, set())
    if message is None:
        assert errors == []
    else:
        assert any(message in e for e in errors), errors


def test_ref_merges_and_overrides() -> None:
    lint_finding = _resolve(_schema("lint")["findings"][0])
    assert set(lint_finding) == set(_schema("finding")) | {"path", "line", "col"}
    assert _resolve(_schema("lint"))["cuda_device_order"] == "str|null"


# ---- the schemas are the documentation ---------------------------------------------

# Where each document is described: (file, heading) sections of docs/ (_section). lint's document is check's plus the
# keys lint.md adds.
DOC_SECTIONS: dict[str, list[tuple[str, str]]] = {
    "finding": [("findings.md", "# Finding codes")],
    "check": [("check.md", "## JSON (`gpudiag check --json`)")],
    "lint": [("lint.md", "## JSON (`--json`, `--output-format json`)")],
    "list": [("cli.md", "### `gpudiag list --json`")],
    "snapshot": [
        ("snapshot.md", "## Top level"),
        ("snapshot.md", "## `gpus[]`: NVML's facts, one physical GPU each"),
        ("snapshot.md", "## `torch`"),
        ("snapshot.md", "## `host` (since 1.1)"),
        ("snapshot.md", "## `gpu_pairs[]` (since 1.2)"),
        ("snapshot.md", "## `node` (since 1.3)"),
        ("snapshot.md", "## `gputil[]`"),
        ("snapshot.md", "## Example"),
    ],
    "probe": [("probes.md", "## `--json` schema (`gpudiag-probe/1`)")],
    "topo": [("cli.md", "### `gpudiag topo --json`")],
    "fleet": [("cli.md", "### `gpudiag fleet --json`")],
}
# The "schema" value each document carries, as its docs spell it.
SCHEMA_VALUES = {
    "check": "gpudiag-check/1",
    "lint": "gpudiag-lint/1",
    "list": "gpudiag-list/1",
    "snapshot": "gpudiag-snapshot/1.4",
    "probe": "gpudiag-probe/1",
    "topo": "gpudiag-topo/1",
    "fleet": "gpudiag-fleet/1",
}
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def _section(filename: str, heading: str) -> str:
    """The heading's text up to the next heading of the same or a higher level (a
    document's title: up to its first subsection)."""
    lines = (DOCS / filename).read_text().splitlines()
    start = lines.index(heading)
    level = max(2, len(heading) - len(heading.lstrip("#")))
    end = next(
        (
            i
            for i in range(start + 1, len(lines))
            if re.match(rf"#{{1,{level}}} ", lines[i]) and not _in_fence(lines, i)
        ),
        len(lines),
    )
    return "\n".join(lines[start:end])


def _in_fence(lines: list[str], index: int) -> bool:
    return sum(1 for line in lines[:index] if line.startswith("```")) % 2 == 1


def _docs_text(kind: str) -> str:
    return "\n".join(_section(f, h) for f, h in DOC_SECTIONS[kind])


def documented_keys(text: str) -> set[str]:
    """Keys the docs state: first cells of key/field tables, keys of JSON examples."""
    keys: set[str] = set()
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = cells
        elif header[0].lower() in ("key", "field") and not set(cells[0]) <= set("-: "):
            keys |= set(re.findall(rf"`({_IDENT})`", cells[0]))
    for block in re.findall(r"```\w*\n(.*?)```", text, re.S):
        keys |= set(re.findall(rf'"({_IDENT})"\s*:', block))
    return keys


def mentioned_names(text: str) -> set[str]:
    """Every name the docs spell as code or as a JSON string."""
    return (
        set(re.findall(rf"`({_IDENT})`", text))
        | set(re.findall(rf'"({_IDENT})"', text))
        | documented_keys(text)
    )


def schema_names(spec: Any, *, own: bool) -> set[str]:
    """Key names of a schema; ``own``: only those this file adds, not its ``$ref``s'."""
    names: set[str] = set()
    if isinstance(spec, list):
        return schema_names(spec[0], own=own)
    if not isinstance(spec, dict):
        return names
    if "$or" in spec:
        for alternative in spec["$or"]:
            names |= schema_names(alternative, own=own)
        return names
    inherited = set(_resolve({"$ref": spec["$ref"]})) if "$ref" in spec else set()
    if not own:
        spec = _resolve(spec)
        inherited = set()
    names |= set(spec.get("$keys", ())) | set(spec.get("$examples", ()))
    for key, sub in spec.items():
        if key.startswith("$"):
            continue
        if key != "*" and key not in inherited:
            names.add(key)
        names |= schema_names(sub, own=own)
    return names


@pytest.mark.parametrize("kind", list(DOC_SECTIONS))
def test_schema_is_the_documentation(kind: str) -> None:
    text = _docs_text(kind)
    spec = _schema(kind)
    undocumented = schema_names(spec, own=True) - mentioned_names(text)
    assert not undocumented, f"schema {kind} has keys its docs never name: {undocumented}"
    missing = documented_keys(text) - schema_names(spec, own=False)
    assert not missing, f"docs of {kind} document keys its schema lacks: {missing}"
    if kind in SCHEMA_VALUES:
        assert SCHEMA_VALUES[kind] in text


# ---- the documents -----------------------------------------------------------------


@pytest.fixture(autouse=True)
def _in_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(FIXTURES)


def _json_run(args: list[str], env: dict[str, str] | None = None) -> Any:
    code, out, err = run_cli([*args, "--json"], env)
    assert code in (0, 1), err
    return json.loads(out)


def _schema_value(kind: str, docs: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    for label, doc in docs:
        if label.startswith("fixture "):
            # Read and written back, a snapshot keeps the 1.x it was written as
            # (docs/snapshot.md "Reading rules"); gpudiag itself writes 1.4.
            assert re.fullmatch(r"gpudiag-snapshot/1(\.[0-9]+)?", doc["schema"]), label
        else:
            assert doc["schema"] == SCHEMA_VALUES[kind], label
        yield label, doc


def _enriched_fixture(directory: Path) -> str:
    """a100x8 with the facts no fixture records (a throttle reason, a field error),
    written to ``directory``: the schema's lists are then checked on items too."""
    doc = json.loads((FIXTURES / "a100x8.json").read_text())
    doc["gpus"][0]["throttle_reasons"] = ["SW Power Cap", "HW Slowdown"]
    doc["gpus"][0]["errors"] = {"ecc": "Not Supported"}
    # Schema 1.2's links, each list with items (the fixtures of reported machines have
    # them too; this keeps the check independent of which fixture does).
    doc["gpus"][0].update(
        nvlinks=[
            {"link": 0, "active": True, "remote_pci_bus_id": "00000000:C4:00.0",
             "remote_device_type": "NVSwitch"},
            {"link": 1, "active": False, "remote_pci_bus_id": None, "remote_device_type": None},
        ],
        numa_affinity=[3], cpu_affinity="48-63,176-191", pcie_link_gen_current=4,
        fabric_state="Completed", fabric_status="Success",
    )  # fmt: skip
    doc["gpus"][3]["processes"][0]["in_pid_namespace"] = False
    doc["gpu_pairs"] = [
        {"nvml_index_a": 0, "nvml_index_b": 1, "topology": None, "p2p_read": "OK",
         "p2p_write": "OK", "p2p_nvlink": "OK", "errors": {"topology": "Unknown Error"}}
    ]  # fmt: skip
    doc["host"] = {
        "platform": "Linux", "kernel_iommu_args": ["iommu=pt"], "iommu_devices": ["dmar0"],
        "dev_shm_total_mib": 64, "nvidia_uvm_loaded": True,
        "pci_gpus": [{"pci_bus_id": "0000:07:00.0", "driver": "nvidia", "numa_node": 3,
                      "iommu_group_type": "identity",
                      "bridges": [{"bdf": "0000:00:01.1", "acs_ctl": 0}]}],
    }  # fmt: skip
    # Schema 1.3's node facts, with an RDMA port and a resolved MASTER_ADDR; 1.4's routes,
    # GID table, library files and RDMA driver stack.
    doc["node"] = {
        "boot_id": "6c63b633-4d22-4ca7-9a49-87893966b649", "os_name": "Ubuntu 22.04.4 LTS",
        "interfaces": [{"name": "ib0", "operstate": "up", "loopback": False,
                        "ipv4": ["10.1.0.5/16"]}],
        "ib_ports": [{"device": "mlx5_0", "port": 1, "state": "ACTIVE",
                      "link_layer": "Ethernet",
                      "gids": [{"index": 3, "gid": "0000:0000:0000:0000:0000:ffff:0a01:0005",
                                "type": "RoCE v2"}]}],
        "routes": [{"interface": "ib0", "destination": "0.0.0.0/0", "gateway": "10.1.0.254",
                    "metric": 0}],
        "nccl_libs": [{"name": "libnccl.so.2", "path": "/usr/lib/libnccl.so.2",
                       "via": "default path"}],
        "nccl_net_plugins": [{"name": "libnccl-net.so", "path": "/opt/p/libnccl-net.so",
                              "via": "LD_LIBRARY_PATH"}],
        "nccl_env": {"NCCL_SOCKET_IFNAME": "ib0", "MASTER_ADDR": "n1"},
        "master_addr_ips": ["10.1.0.1"], "master_addr_error": None,
        "nccl_version": "2.21.5", "nccl_source": "nvidia-nccl-cu12 (installed)",
        "rdma": {"kernel_release": "5.15.0-105-generic", "mlx5_core_loaded": True,
                 "mlx5_core_version": "23.10-1.1.9", "mlx5_core_srcversion": "0D5D1C2A",
                 "ofed": "MLNX_OFED_LINUX-23.10-1.1.9.0", "libibverbs": "libibverbs.so.1.14.50.0",
                 "devices": [{"device": "mlx5_0", "fw_ver": "28.39.1002", "hca_type": "MT4129",
                              "board_id": "MT_0000000838"}],
                 "hpcx": {"path": "/opt/hpcx", "via": "/opt/hpcx", "version": "2.18",
                          "ofed": "mlnx_ofed"}},
    }  # fmt: skip
    # A GPU only GPUtil saw: list's other shape of gpus[] (docs/cli.md).
    doc["gputil"].append({**doc["gputil"][0], "gputil_id": 8, "uuid": "GPU-" + "0" * 8 + "-ff"})
    path = directory / "enriched.json"
    path.write_text(json.dumps(doc))
    return str(path)


LIST_OPTIONS = [[], ["--visible", "1,0"], ["--visible", "MIG-0,GPU-1"], ["--visible", ""]]


def test_list_json_matches_schema(tmp_path: Path) -> None:
    snapshots = [f"{name}.json" for name in ALL_FIXTURES] + [_enriched_fixture(tmp_path)]
    docs = (
        (f"list {name} {opts}", _json_run(["list", "--snapshot", name, *opts]))
        for name in snapshots
        for opts in LIST_OPTIONS
    )
    docs = list(_schema_value("list", docs))
    assert_documents_match("list", docs)
    assert any(g["nvml_index"] is None for _, d in docs for g in d["gpus"])


def test_topo_json_matches_schema(tmp_path: Path) -> None:
    snapshots = [f"{name}.json" for name in ALL_FIXTURES] + [_enriched_fixture(tmp_path)]
    docs = (
        (f"topo {name} {opts}", _json_run(["topo", "--snapshot", name, *opts]))
        for name in snapshots
        for opts in ([], ["--visible", "1,2"])
    )
    assert_documents_match("topo", list(_schema_value("topo", docs)))


def test_fleet_json_matches_schema() -> None:
    fleet = FIXTURES / "fleet"
    files = sorted(str(p) for p in fleet.glob("*.json"))
    docs = [(f"fleet {Path(f).name}", _json_run(["fleet", "--snapshots", f])) for f in files]
    docs.append(("fleet all", _json_run(["fleet", "--snapshots", *files])))
    docs.append(("fleet old", _json_run(["fleet", "--snapshots", "a100x8.json", "no_driver.json"])))
    docs.append(("fleet --probe", _probe_document()))
    # FLEET- findings quote no torch or NCCL error text: predicts_also is always [].
    empty = frozenset({"findings[].predicts_also[]"})
    assert_documents_match("fleet", list(_schema_value("fleet", docs)), empty)
    assert all(f["predicts_also"] == [] for _, d in docs for f in d["findings"])


def _probe_document() -> Any:
    """``fleet --json`` of a probe over three nodes (a live one runs in
    tests/test_fleet_probe_live.py): one cannot connect, one pair is timed, one failed."""
    from gpudiag.core.fleet import FleetNode, compare_fleet, label_nodes
    from gpudiag.core.fleet_probe import NodeProbe, PairRun, Reach, make_plan
    from gpudiag.core.fleet_probe_rules import probe_findings
    from gpudiag.render.fleet import ProbeView, fleet_to_json

    snap = load_snapshot(FIXTURES / "fleet" / "node01.json")
    nodes = label_nodes([FleetNode(f"n{i}", dataclasses.replace(snap, hostname=f"n{i}"))
                         for i in range(3)])  # fmt: skip
    plan = make_plan("n0", 29500, "run", 3, 90, now=0.0)
    reports = {
        0: NodeProbe(0, "gloo", None, Reach("listen", True, None, None, (1,)),
                     (PairRun(1, 0, True, 0.004, None), PairRun(2, 2, False, None, "timed out"))),
        1: NodeProbe(1, "gloo", None, Reach("dial", True, 0.2),
                     (PairRun(0, 0, True, 0.005, None),)),
        2: NodeProbe(2, None, None, Reach("dial", False, None, "connection refused")),
    }  # fmt: skip
    view = ProbeView(plan, reports, {})
    findings = compare_fleet(nodes) + probe_findings(nodes, plan, reports, {})
    return json.loads(json.dumps(fleet_to_json(nodes, findings, view)))


def _check_docs() -> Iterator[tuple[str, Any]]:
    for name in ALL_FIXTURES:
        for args, env in CHECK_CASES:
            argv = ["check", "--snapshot", f"{name}.json", *args]
            yield f"check {name} {args} {env or ''}", _json_run(argv, env)


def test_check_json_matches_schema() -> None:
    docs = list(_check_docs())
    assert_documents_match("check", _schema_value("check", docs))
    # The documented values of cuinit_error both occur (docs/check.md).
    assert {d["cuinit_error"] for _, d in docs} >= {
        None,
        "CUDA_ERROR_NO_DEVICE",
        "CUDA_ERROR_INVALID_DEVICE",
    }


def test_lint_json_matches_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_duplicate_mask_case(tmp_path)
    monkeypatch.chdir(tmp_path)
    cuinit = _json_run(["lint", "dup_mask.py", "--check", "--snapshot", "a100x8.json"])
    assert cuinit["cuinit_error"] == "CUDA_ERROR_INVALID_DEVICE"
    monkeypatch.chdir(FIXTURES / "lint")
    scripts = sorted(Path().glob("*.py.txt"))
    with_other_texts = [
        "pos_set_device_under_mask.py.txt",
        "--check",
        "--snapshot",
        "../a100x8.json",
    ]
    docs = [(f"lint {p}", _json_run(["lint", str(p)])) for p in scripts]
    # With --check the check's keys come in (visible devices with their names).
    docs += [
        (f"lint --check {p} {snap}", _json_run(["lint", str(p), "--check", "--snapshot", snap]))
        for p in scripts[:: max(1, len(scripts) // 12)]
        for snap in ("../a100x8.json", "../a100_mig.json", "../no_driver.json")
    ]
    # A validator's finding with texts of other torch versions (predicts_also).
    docs.append(("lint set_device", _json_run(["lint", *with_other_texts])))
    docs.append(("lint all", _json_run(["lint", *map(str, scripts[:5])])))
    docs.append(("lint dup_mask.py --check", cuinit))
    assert_documents_match("lint", _schema_value("lint", docs))


def test_finding_objects_match_schema() -> None:
    # Every finding any fixture gives under check, including the ones only options give.
    findings = [
        (f"{label} finding {i}", finding)
        for label, doc in _check_docs()
        for i, finding in enumerate(doc["findings"])
    ]
    assert_documents_match("finding", findings)


def test_snapshot_document_matches_schema(tmp_path: Path) -> None:
    # `gpudiag snapshot` captures the live machine: here one without a driver (no torch,
    # whose import would take seconds). The fixtures, read and written back by the same
    # writer the command uses (dump_snapshot), give GPUs, MIG, torch, GPUtil and host facts.
    docs = []
    for extra in ([], ["--redact"]):
        code, out, err = run_cli(["snapshot", "--no-torch", *extra])
        assert code == 0 and err == ""
        docs.append((f"live snapshot {extra}", json.loads(out)))
    for name in [f"{n}.json" for n in ALL_FIXTURES] + [_enriched_fixture(tmp_path)]:
        docs.append((f"fixture {name}", json.loads(dump_snapshot(load_snapshot(name)))))
    assert_documents_match("snapshot", _schema_value("snapshot", docs))


def test_probe_document_matches_schema() -> None:
    # A real `gpudiag probe --json` imports torch in child processes (seconds per probe on
    # this shared machine) and never fills every part (a hang's ranks and stages); the
    # document is the one the command prints (render_probe_json) of a report built here
    # with every part filled, and of one with the optional parts empty.
    full = ProbeResult(
        probe="ddp",
        status="timeout",
        device="cuda",
        message="rank 1 never arrived",
        checks=(Check(name="grads_equal", passed=True, value=1e-7, tolerance=1e-4, detail="d"),),
        figures={"loss_first": 0.43, "algo": "ring", "ok": True, "nan": None},
        wall_s=None,
        ranks=(
            RankRow(
                rank=0,
                local_rank=0,
                node_rank=0,
                host="n1",
                pid=123,
                device="cuda:0",
                cuda_ordinal=0,
                gpu_uuid="GPU-1",
                pci_bus_id="00000000:17:00.0",
                gpu_name="A100",
                arrived=True,
                last_stage="done",
            ),
        ),
        bandwidth=(
            BandwidthRow(size_bytes=1 << 20, time_s=0.0009, algbw_gbps=1.2, busbw_gbps=1.2),
        ),
        memory=(MemoryRow(device="cuda:0", cuda_ordinal=0, peak_allocated_mib=12.5),),
        notes=("note",),
        hang=HangInfo(limit_s=3.0, arrived_ranks=(0,), missing_ranks=(1,), stages={0: "wait"}),
    )
    empty = ProbeResult(probe="single", status="pass", device="cpu", message="ok", wall_s=0.04)
    # The p2p probe's pairs (issue 18): one filled row, its retry and cause set.
    pair = PairRow(
        device_a="cuda:0",
        device_b="cuda:1",
        cuda_ordinal_a=0,
        cuda_ordinal_b=1,
        status="timeout",
        message="hung",
        link="pcie",
        expected_gbps=31.5,
        link_basis="PCIe Gen4 x16 (max) = 31.5",
        copy_bytes=1 << 26,
        copy_ab_exact=True,
        copy_ba_exact=True,
        copy_mismatched_elements=0,
        copy_ab_elapsed_s=0.003,
        copy_ba_elapsed_s=0.003,
        copy_ab_gbps=22.4,
        copy_ba_gbps=22.1,
        speed="ok",
        allreduce="hang",
        allreduce_elapsed_s=0.01,
        allreduce_retry_p2p_disabled="pass",
        allreduce_cause="all-reduce hung with P2P and passed with NCCL_P2P_DISABLE=1",
    )
    p2p = ProbeResult(probe="p2p", status="timeout", device="cuda", message="m", pairs=(pair,))
    docs = [
        (
            f"probe {len(probes)}",
            render_probe_json(
                ProbeReport(
                    device="cuda",
                    launcher="torchrun",
                    rank=0,
                    world_size=2,
                    timeout_s=60.0,
                    wall_s=5.2,
                    startup_s=startup,
                    probes=probes,
                )
            ),
        )
        for probes, startup in (((full, empty, p2p), 1.5), ((empty,), None))
    ]
    assert_documents_match("probe", _schema_value("probe", docs))
