"""The finding catalogue (gpudiag/findings/catalog.py) is the one list of codes.

Walks the catalogue through ``check --ignore``, and holds it together with the
code base (every code a module mentions or emits is catalogued, at a severity
the catalogue names) and with the per-module ``CODES`` dicts that remain until
the modules have moved (issue 16: the integrator deletes them after the merge).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.cli.gate import known_codes, parse_ignore
from gpudiag.errors import GpudiagInputError
from gpudiag.findings.catalog import AREAS, CATALOG, codes_in, lookup, titles
from gpudiag.model import SEVERITIES

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gpudiag"
CATALOG_FILE = PACKAGE / "findings" / "catalog.py"
MIXED4 = str(ROOT / "tests" / "fixtures" / "mixed4.json")
PREFIXES = sorted({code.split("-", 1)[0] for code in CATALOG})
CODE_RE = re.compile(rf"(?:{'|'.join(PREFIXES)})(?:-[A-Z0-9]+)+")
#: Callables whose argument at this position is a finding code, the next one its severity.
#: (health's PerGpu takes the GPU first: its code is the second argument; fleet's
#: _skew and _per_node take the nodes and a getter first, then code= and severity=.)
EMITTERS = {"Finding": 0, "hit": 2, "PerGpu": 1, "_skew": 2, "_per_node": 2}

#: The codes `check --ignore` refused before the catalogue (it read 7 modules' CODES).
REFUSED_BEFORE = (
    "DDP-LAUNCHER", "DDP-LAUNCHER-MISMATCH", "DDP-DEEPSPEED-DEVICES", "DDP-DEEPSPEED-REFUSED",
    "DDP-SET-DEVICE-INVALID", "DDP-CUDA0-CONTEXT", "DDP-PORT-IN-USE",
    "DDP-LAUNCHED-ENV-MISSING", "DDP-NCCL-NOT-BUILT", "HOST-CONTAINER-NO-GPU",
    "HOST-NO-NVIDIA-GPU", "HOST-DRIVER-MISSING", "ENV-KINETO-DAEMON",
    "HEALTH-TF32-UNSUPPORTED", "HEALTH-AMP-FP16-OVERFLOW",
)  # fmt: skip


# ---------------------------------------------------------------- the table


def test_catalogue_shape() -> None:
    assert len(CATALOG) >= 119
    for code, info in CATALOG.items():
        assert info.code == code and CODE_RE.fullmatch(code), code
        assert info.area in AREAS, code
        assert info.severity == info.severities[0], code
        assert set(info.severities) <= set(SEVERITIES), code
        assert info.title and "\n" not in info.title and len(info.title) <= 80, code
    assert [a for a in AREAS if not codes_in(a)] == []
    assert sum(len(codes_in(a)) for a in AREAS) == len(CATALOG)
    assert lookup("DDP-LAUNCHER-MISMATCH") is CATALOG["DDP-LAUNCHER-MISMATCH"]
    assert lookup("ddp-launcher-mismatch") is None
    assert titles("lint") == {i.code: i.title for i in CATALOG.values() if i.area == "lint"}
    with pytest.raises(KeyError):
        codes_in("nowhere")


# ---------------------------------------------------------------- --ignore


def test_ignore_knows_exactly_the_catalogue() -> None:
    assert known_codes() == frozenset(CATALOG)
    for code in CATALOG:
        assert parse_ignore([code.lower()]) == {code}


@pytest.mark.parametrize("area", list(AREAS))
def test_check_ignore_accepts_every_code_of_an_area(area: str) -> None:
    codes = ",".join(info.code for info in codes_in(area))
    result = CliRunner().invoke(main, ["check", "--snapshot", MIXED4, "--ignore", codes])
    assert result.exit_code in (0, 1), result.output


def test_check_ignore_accepts_the_codes_it_refused_before() -> None:
    assert set(REFUSED_BEFORE) <= set(CATALOG)
    for code in ("DDP-LAUNCHER-MISMATCH", "HOST-DRIVER-MISSING"):
        result = CliRunner().invoke(main, ["check", "--snapshot", MIXED4, "--ignore", code])
        assert result.exit_code in (0, 1), result.output


@pytest.mark.parametrize("code", ["HEALTH-ECC-VOLATILE", "DDP-LAUNCHER-MISMATCHX", "LINT"])
def test_check_ignore_refuses_an_unknown_code_in_one_line(code: str) -> None:
    result = CliRunner().invoke(
        main, ["check", "--snapshot", MIXED4, "--ignore", f"VIS-ORDER-MIXED,{code}"]
    )
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"gpudiag: error: --ignore {code}: no such finding code (`gpudiag explain` lists them)"
    ]
    with pytest.raises(GpudiagInputError):
        parse_ignore([code])


@pytest.mark.parametrize("command", ["check", "list"])
def test_ignore_help_example_is_a_catalogued_code(command: str) -> None:
    cmd = main.get_command(click.Context(main), command)
    assert cmd is not None
    text = next(p.help for p in cmd.params if isinstance(p, click.Option) and p.name == "ignore")
    assert text is not None
    examples = re.findall(r"e\.g\. ([A-Z0-9]+(?:-[A-Z0-9]+)+)", text)
    assert examples and all(code in CATALOG for code in examples), examples


def test_help_does_not_import_the_catalogue() -> None:
    code = (
        "import sys\nfrom gpudiag.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('gpudiag.findings.catalog' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.splitlines()[-1] == "False"


# ---------------------------------------------------------------- the code base


def _sources() -> list[tuple[Path, ast.Module]]:
    return [
        (path, ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != CATALOG_FILE
    ]


def _code_at(call: ast.Call, pos: int) -> tuple[str | None, ast.expr | None]:
    """The code constant at ``pos`` (or ``code=``), and the severity expression after it."""
    kw = {k.arg: k.value for k in call.keywords}
    code = call.args[pos] if len(call.args) > pos else kw.get("code")
    severity = call.args[pos + 1] if len(call.args) > pos + 1 else kw.get("severity")
    if isinstance(code, ast.Constant) and isinstance(code.value, str):
        return code.value, severity
    return None, severity


def _emitted() -> dict[str, set[str]]:
    """``{code: the literal severities it is emitted at}`` from every emitting call.

    An emitting call: ``Finding(...)``/``model.Finding(...)``, lint's ``hit(...)``,
    or any helper called with a code first and a literal severity second
    (dataparallel's ``_find``). A severity that is not a literal (a variable,
    ``"error" if x else "warning"``) contributes the literals inside it.
    """
    out: dict[str, set[str]] = defaultdict(set)
    for _, tree in _sources():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            code, severity = _code_at(node, EMITTERS.get(name, 0))
            if code is None or not CODE_RE.fullmatch(code):
                continue
            literals = {
                n.value
                for n in ast.walk(severity) if severity is not None
                if isinstance(n, ast.Constant) and n.value in SEVERITIES
            }  # fmt: skip
            if name in EMITTERS or (
                isinstance(severity, ast.Constant) and severity.value in SEVERITIES
            ):
                out[code].update(literals)
    return out


def test_every_code_the_code_base_mentions_is_catalogued() -> None:
    unknown: dict[str, list[str]] = defaultdict(list)
    for path, tree in _sources():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and CODE_RE.fullmatch(node.value)
                and node.value not in CATALOG
            ):
                unknown[node.value].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not unknown, f"codes used but not in gpudiag/findings/catalog.py: {dict(unknown)}"


def test_every_catalogued_code_is_emitted_at_a_catalogued_severity() -> None:
    emitted = _emitted()
    assert sorted(set(emitted) - set(CATALOG)) == [], "emitted but not catalogued"
    assert sorted(set(CATALOG) - set(emitted)) == [], "catalogued but never emitted"
    for code, severities in emitted.items():
        extra = severities - set(CATALOG[code].severities)
        assert not extra, f"{code} is emitted as {sorted(extra)}: add it to the catalogue"


# ---------------------------------------------------------------- the per-module dicts


def _literal_codes(tree: ast.Module) -> dict[str, str] | None:
    """A module's top-level literal ``*CODES`` dict, or None."""
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        name = target.id if isinstance(target, ast.Name) else ""
        if name == "CODES" or (name.endswith("_CODES") and not name.startswith("_")):
            value = node.value  # type: ignore[union-attr]
            if isinstance(value, ast.Dict):
                return dict(ast.literal_eval(value))
    return None


def _codes_dicts() -> dict[str, dict[str, str]]:
    """``{module path: its literal CODES dict}``, read from the source (nothing imported)."""
    out: dict[str, dict[str, str]] = {}
    for path, tree in _sources():
        codes = _literal_codes(tree)  # type: ignore[arg-type]
        if codes is not None:
            out[str(path.relative_to(ROOT))] = codes
    return out


def test_no_module_declares_its_own_codes() -> None:
    """The catalogue is the only declaration: no module keeps a literal CODES dict."""
    assert _codes_dicts() == {}
    # lint's CODES is the catalogue's own (gpudiag/lint/codes.py reads it).
    from gpudiag.lint.codes import CODES as LINT_CODES

    assert titles("lint") == LINT_CODES


def test_the_codes_dict_finder_finds_one(tmp_path: Path) -> None:
    """_codes_dicts must be able to fail: it reads a module that declares CODES."""
    tree = ast.parse('CODES: dict[str, str] = {"DP-DEVICES": "x"}\n')
    assert _literal_codes(tree) == {"DP-DEVICES": "x"}
