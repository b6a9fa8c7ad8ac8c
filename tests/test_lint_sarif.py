"""``gpudiag lint --output-format sarif``: a SARIF 2.1.0 log (issue 17, build item 4),
validated against a subset of the SARIF 2.1.0 schema (tests/schemas/, no network) by the
small JSON Schema validator below, and checked field by field."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudiag import __version__
from gpudiag.cli import main
from gpudiag.findings.catalog import CATALOG, codes_in

from .pinned import write_duplicate_mask_case

SCHEMA = json.loads(
    (Path(__file__).parent / "schemas" / "sarif-2.1.0-subset.schema.json").read_text()
)
LINT_CODES = [info.code for info in codes_in("lint")]

# LINT-SCALER-FP16-PARAMS (error), LINT-AMP-DEPRECATED (warning), LINT-SAMPLER-SHUFFLE
# (error), LINT-CVD-AFTER-IMPORT (info)
MIXED = """\
import os
import torch
from torch.utils.data import DataLoader, DistributedSampler
os.environ["CUDA_VISIBLE_DEVICES"] = "1"
ds = sampler = opt = DistributedSampler([])
model = torch.nn.Linear(1, 1).cuda().half()
scaler = torch.cuda.amp.GradScaler()
scaler.step(opt)
loader = DataLoader(ds, sampler=sampler, shuffle=True)
"""

_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
}


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """The draft-07 keywords the subset uses; an error per violation."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/definitions/")
        return validate(value, SCHEMA["definitions"][name], path)
    errors: list[str] = []
    kind = schema.get("type")
    if kind is not None:
        ok = isinstance(value, _TYPES[kind]) and not (
            kind in ("integer", "number") and isinstance(value, bool)
        )
        if not ok:
            return [f"{path}: {value!r} is not {kind}"]
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{path}: {value} < {schema['minimum']}")
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(f"{path}: too short")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if "anyOf" in schema and all(validate(value, s, path) for s in schema["anyOf"]):
        errors.append(f"{path}: matches none of anyOf")
    if isinstance(value, dict):
        errors += [f"{path}: {k!r} required" for k in schema.get("required", ()) if k not in value]
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                errors += validate(item, props[key], f"{path}.{key}")
            elif extra is False:
                errors.append(f"{path}: {key!r} is not a SARIF property here")
            elif isinstance(extra, dict):
                errors += validate(item, extra, f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for n, item in enumerate(value):
            errors += validate(item, schema["items"], f"{path}[{n}]")
    return errors


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        ({"version": "2.1.0"}, "'runs' required"),
        ({"version": "2.0.0", "runs": []}, "is not '2.1.0'"),
        ({"version": "2.1.0", "runs": [{}]}, "'tool' required"),
        ({"version": "2.1.0", "runs": [{"tool": {"driver": {}}}]}, "'name' required"),
        (
            {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{}]}]},
            "'message' required",
        ),
        (
            {
                "version": "2.1.0",
                "runs": [
                    {
                        "tool": {"driver": {"name": "x"}},
                        "results": [{"message": {"text": "m"}, "level": "info"}],
                    }
                ],
            },
            "'info' not in",
        ),
        (
            {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x", "rulez": []}}}]},
            "'rulez' is not a SARIF property here",
        ),
    ],
)
def test_the_validator_can_fail(doc: dict[str, Any], said: str) -> None:
    errors = validate(doc, SCHEMA)
    assert any(said in e for e in errors), errors


def _sarif(tmp_path: Path, *args: str, text: str = MIXED) -> tuple[int, dict[str, Any]]:
    script = tmp_path / "train.py"
    script.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["lint", *args, "--output-format", "sarif"])
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.stdout)
    assert validate(doc, SCHEMA) == []
    return result.exit_code, doc


def test_sarif_log_has_one_run_with_gpudiag_and_every_lint_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, doc = _sarif(tmp_path, "train.py")
    assert code == 1
    assert doc["version"] == "2.1.0"
    assert doc["$schema"].endswith("sarif-2.1.0.json")
    (run,) = doc["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("gpudiag", __version__)
    rules = driver["rules"]
    assert [r["id"] for r in rules] == LINT_CODES
    levels = {"error": "error", "warning": "warning", "info": "note"}
    for rule in rules:
        info = CATALOG[rule["id"]]
        assert rule["shortDescription"]["text"] == info.title
        assert rule["defaultConfiguration"]["level"] == levels[info.severity]
        assert f"gpudiag explain {rule['id']}" in rule["help"]["text"]
        assert "helpUri" not in rule
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"


def test_sarif_results_carry_rule_level_message_and_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _, doc = _sarif(tmp_path, "train.py")
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    got = []
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        (location,) = result["locations"]
        place = location["physicalLocation"]
        assert place["artifactLocation"] == {"uri": "train.py", "uriBaseId": "%SRCROOT%"}
        region = place["region"]
        got.append((result["ruleId"], result["level"], region["startLine"], region["startColumn"]))
        assert result["message"]["text"]
    assert got == [
        ("LINT-CVD-AFTER-IMPORT", "note", 4, 1),
        ("LINT-SCALER-FP16-PARAMS", "warning", 6, 9),
        ("LINT-AMP-DEPRECATED", "warning", 7, 10),
        ("LINT-SAMPLER-SHUFFLE", "error", 9, 10),
    ]
    amp = run["results"][2]
    assert amp["message"]["text"].startswith("torch.cuda.amp.GradScaler is deprecated")
    assert amp["properties"]["fix"].startswith("Use torch.amp.GradScaler")
    assert amp["properties"]["predicts"].startswith("FutureWarning")


def test_sarif_includes_parse_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.py").write_text("def train(:\n    pass\n")
    code, doc = _sarif(tmp_path, "broken.py", "train.py")
    assert code == 1
    results = doc["runs"][0]["results"]
    first = results[0]
    assert (first["ruleId"], first["level"]) == ("LINT-PARSE-ERROR", "error")
    assert first["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "broken.py"
    assert first["locations"][0]["physicalLocation"]["region"]["startLine"] == 1
    assert "Cannot parse this file" in first["message"]["text"]
    assert len(results) == 5


def test_sarif_paths_are_relative_uris_and_absolute_outside_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside = tmp_path / "here" / "sub dir"
    inside.mkdir(parents=True)
    odd = inside / "a%b#c.py"
    odd.write_text("import torch\ns = torch.cuda.amp.GradScaler()\n")
    outside = tmp_path / "elsewhere.py"
    outside.write_text("import torch\ns = torch.cuda.amp.GradScaler()\n")
    raw = os.fsdecode(b"\xff.py")
    (inside / raw).write_text("import torch\ns = torch.cuda.amp.GradScaler()\n")
    monkeypatch.chdir(tmp_path / "here")
    result = CliRunner().invoke(main, ["lint", "sub dir", str(outside), "--output-format", "sarif"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert validate(doc, SCHEMA) == []
    uris = [
        r["locations"][0]["physicalLocation"]["artifactLocation"] for r in doc["runs"][0]["results"]
    ]
    assert uris == [
        {"uri": "sub%20dir/a%25b%23c.py", "uriBaseId": "%SRCROOT%"},
        {"uri": "sub%20dir/%FF.py", "uriBaseId": "%SRCROOT%"},
        {"uri": outside.as_uri()},
    ]


def test_sarif_with_no_finding_has_empty_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, doc = _sarif(tmp_path, "train.py", text="import torch\n")
    assert code == 0
    assert doc["runs"][0]["results"] == []
    assert len(doc["runs"][0]["tool"]["driver"]["rules"]) == len(LINT_CODES)


def test_sarif_names_the_check_codes_found_as_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_duplicate_mask_case(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        main,
        ["lint", "dup_mask.py", "--check", "--snapshot", "a100x8.json", "--output-format", "sarif"],
    )
    doc = json.loads(result.stdout)
    assert validate(doc, SCHEMA) == []
    run = doc["runs"][0]
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    found = {r["ruleId"] for r in run["results"]}
    extra = found - set(LINT_CODES)
    assert extra and all(not c.startswith("LINT-") for c in extra)
    assert ids[: len(LINT_CODES)] == LINT_CODES and set(ids) == set(LINT_CODES) | extra


def test_sarif_and_json_conflict(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(MIXED)
    result = CliRunner().invoke(main, ["lint", str(script), "--json", "--output-format", "sarif"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "gpudiag: error: --json and --output-format sarif conflict: give one"
    ]
