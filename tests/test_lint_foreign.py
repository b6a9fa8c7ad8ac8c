"""A file that does not parse, inside another language's project vendored into this one,
is info (gpudiag/lint/foreign.py; issue 17, the tenth held-out corpus: CodeBLEU's vendored
tree-sitter Python grammar, whose example files are its test input)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudiag.lint import lint_paths

_PY2 = "print 'hello'\n"


def _parse_errors(root: Path, target: Path | None = None) -> dict[str, str]:
    report = lint_paths([str(target if target is not None else root)])
    return {
        Path(f.path).relative_to(root).as_posix(): f.finding.severity
        for f in report.findings
        if f.finding.code == "LINT-PARSE-ERROR"
    }


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("manifest", ["package.json", "Cargo.toml", "binding.gyp", "grammar.js"])
def test_a_grammar_s_examples_are_info(tmp_path: Path, manifest: str) -> None:
    _write(
        tmp_path,
        {
            "eval/parser/__init__.py": "",
            f"eval/parser/tree-sitter-python/{manifest}": "{}\n",
            "eval/parser/tree-sitter-python/examples/python2-grammar.py": _PY2,
            "eval/broken.py": _PY2,
        },
    )
    found = _parse_errors(tmp_path)
    assert found == {
        "eval/parser/tree-sitter-python/examples/python2-grammar.py": "info",
        "eval/broken.py": "error",
    }
    report = lint_paths([str(tmp_path)])
    message = next(f.finding.message for f in report.findings if f.finding.severity == "info")
    assert f"eval/parser/tree-sitter-python ({manifest})" in message


@pytest.mark.parametrize(
    "files",
    [
        # the repository's own package.json (its tooling): its Python is its own
        {"package.json": "{}\n", "scripts/broken.py": _PY2},
        # a Python package inside the other project: its files are Python
        {
            "vendor/thing/package.json": "{}\n",
            "vendor/thing/py/__init__.py": "",
            "vendor/thing/py/broken.py": _PY2,
        },
        {
            "vendor/thing/package.json": "{}\n",
            "vendor/thing/setup.py": "",
            "vendor/thing/broken.py": _PY2,
        },
    ],
)
def test_python_of_the_project_stays_an_error(tmp_path: Path, files: dict[str, str]) -> None:
    _write(tmp_path, files)
    assert set(_parse_errors(tmp_path).values()) == {"error"}


def test_a_file_given_alone_has_no_root_and_stays_an_error(tmp_path: Path) -> None:
    _write(tmp_path, {"g/package.json": "{}\n", "g/examples/python2.py": _PY2})
    assert _parse_errors(tmp_path, tmp_path / "g/examples/python2.py") == {
        "g/examples/python2.py": "error"
    }
