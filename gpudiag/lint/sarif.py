"""``gpudiag lint --output-format sarif``: one SARIF 2.1.0 log for code-scanning tools.

One run; ``tool.driver`` is gpudiag with its version and a rule per lint code of the
catalogue (and per ``--check`` code found), each with its title, its default level and
``gpudiag explain CODE`` as help (no web page to point to). Each finding is a result
with its rule, level (``note`` for info), message and place: the path relative to the
working folder under ``uriBaseId`` ``%SRCROOT%`` (an absolute ``file://`` URI for a
file outside it), and 1-based line and column. A file that does not parse is a
``LINT-PARSE-ERROR`` result like any other.

OASIS, "Static Analysis Results Interchange Format (SARIF) Version 2.1.0" (sections
3.13 sarifLog, 3.14 run, 3.19 toolComponent, 3.49 reportingDescriptor, 3.27 result,
3.28 location, 3.30 region); GitHub's "SARIF support for code scanning".
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_from_bytes

from gpudiag.lint import shown
from gpudiag.lint.codes import LintFinding
from gpudiag.lint.report import LintReport, shown_text, valid_text

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
#: lint's severities as SARIF levels (3.27.10: none, note, warning, error).
LEVELS = {"error": "error", "warning": "warning", "info": "note"}
SRCROOT = "%SRCROOT%"


def _uri_path(path: str) -> str:
    """A path as a URI path: ``/`` separators, everything else percent-encoded (the
    bytes of an undecodable file name as they are on disk)."""
    try:
        raw = os.fsencode(path)
    except UnicodeEncodeError:
        return quote(shown_text(path).replace(os.sep, "/"), safe="/")
    return quote_from_bytes(raw.replace(os.sep.encode(), b"/"), safe="/")


def artifact_location(path: str, cwd: str) -> dict[str, str]:
    """``{"uri": …, "uriBaseId": "%SRCROOT%"}`` relative to ``cwd``; outside it, an
    absolute ``file://`` URI."""
    full = os.path.abspath(os.path.join(cwd, path))
    rel = os.path.relpath(full, cwd)
    if rel == ".." or rel.startswith(".." + os.sep):
        return {"uri": "file://" + _uri_path(full)}
    return {"uri": _uri_path(rel), "uriBaseId": SRCROOT}


def _help(code: str) -> str:
    """No web page to point to (``helpUri``): the command that prints the rule's text."""
    if code.startswith("LINT-"):
        return (
            f"`gpudiag explain {code}` prints what it means, a wrong and a right script, "
            "and the fix."
        )
    return f"`gpudiag explain {code}` prints what it means and the fix."


def _rules(report: LintReport) -> list[dict[str, Any]]:
    from gpudiag.findings.catalog import CATALOG, codes_in

    codes = [info.code for info in codes_in("lint")]
    extra = {f.finding.code for f in report.findings} - set(codes)
    codes += [c for c in CATALOG if c in extra]
    codes += sorted(extra - set(CATALOG))  # none today: every code is catalogued
    out = []
    for code in codes:
        info = CATALOG.get(code)
        title = info.title if info is not None else code
        severity = info.severity if info is not None else "warning"
        out.append(
            {
                "id": code,
                "shortDescription": {"text": title},
                "help": {"text": _help(code)},
                "defaultConfiguration": {"level": LEVELS.get(severity, "warning")},
            }
        )
    return out


def _result(f: LintFinding, index: int, cwd: str) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": f.finding.code,
        "ruleIndex": index,
        "level": LEVELS.get(f.finding.severity, "warning"),
        "message": {"text": shown.message(f.finding.message)},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": artifact_location(f.path, cwd),
                    "region": {"startLine": max(f.line, 1), "startColumn": max(f.col, 1)},
                }
            }
        ],
    }
    extra = {"predicts": f.finding.predicts, "fix": f.finding.fix}
    properties = {k: shown.message(v) for k, v in extra.items() if v}
    if properties:
        result["properties"] = properties
    return result


def sarif_log(report: LintReport, cwd: str | None = None) -> dict[str, Any]:
    """The SARIF log of ``report``; paths relative to ``cwd`` (the working folder)."""
    from gpudiag import __version__

    here = os.path.abspath(cwd if cwd is not None else os.getcwd())
    rules = _rules(report)
    index = {rule["id"]: n for n, rule in enumerate(rules)}
    run = {
        "tool": {
            "driver": {
                "name": "gpudiag",
                "version": __version__,
                "rules": rules,
            }
        },
        "originalUriBaseIds": {SRCROOT: {"uri": Path(here).as_uri().rstrip("/") + "/"}},
        "results": [_result(f, index[f.finding.code], here) for f in report.findings],
    }
    doc: dict[str, Any] = valid_text(
        {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}
    )
    return doc


def render_sarif(report: LintReport, cwd: str | None = None) -> str:
    return json.dumps(sarif_log(report, cwd), indent=2)
