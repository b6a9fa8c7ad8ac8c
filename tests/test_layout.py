"""The package's layout rules (docs/development.md): no import cycles, modules of about
400 lines at most unless one concept, and the layers (backends, pure core, render, cli).

Read from the source with :mod:`ast`; nothing under test is imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gpudiag"

MAX_LINES = 400

#: Modules allowed over MAX_LINES: each is one concept, named in its reason.
ALLOWED_LONG: dict[str, str] = {
    "gpudiag.findings.catalog": "one table: every finding code, declared once (issue 16)",
}

#: Only these packages may import the GPU libraries: the backends (whose children ask
#: torch/NVML/GPUtil) and the probes, whose torch code runs in worker subprocesses.
GPU_LIBRARIES = frozenset({"torch", "pynvml", "GPUtil"})
GPU_IMPORTERS = ("gpudiag.backends", "gpudiag.probes")

#: package -> packages it must not import (by any import statement, at any depth).
FORBIDDEN = {
    "gpudiag.core": ("gpudiag.cli", "gpudiag.render", "gpudiag.backends"),
    "gpudiag.render": ("gpudiag.cli",),
    # Below the core: the catalogue, the upstream texts and the launcher table are
    # read by core, lint, probes and CLI alike, so they import none of them.
    "gpudiag.findings": (
        "gpudiag.core", "gpudiag.launch", "gpudiag.lint", "gpudiag.probes",
        "gpudiag.render", "gpudiag.cli", "gpudiag.backends",
    ),
    "gpudiag.launch": (
        "gpudiag.core", "gpudiag.lint", "gpudiag.probes", "gpudiag.render", "gpudiag.cli",
        "gpudiag.backends",
    ),
    "gpudiag.model": ("gpudiag.core", "gpudiag.launch", "gpudiag.render", "gpudiag.cli"),
    # The links between GPUs (schema 1.2): part of the model, which re-exports them.
    "gpudiag.links": (
        "gpudiag.model", "gpudiag.core", "gpudiag.launch", "gpudiag.render", "gpudiag.cli",
        "gpudiag.findings", "gpudiag.backends",
    ),
    # A node's identity and network (schema 1.3): part of the model, which re-exports it.
    "gpudiag.network": (
        "gpudiag.model", "gpudiag.core", "gpudiag.launch", "gpudiag.render", "gpudiag.cli",
        "gpudiag.findings", "gpudiag.backends",
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Import:
    """One import statement's target, resolved to an absolute dotted name."""

    target: str
    line: int
    in_function: bool
    type_checking: bool


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def imports_of(path: Path, name: str, known: dict[str, Path]) -> Iterator[Import]:
    """Every import statement in the file, at any depth, with where it sits."""
    is_package = path.name == "__init__.py"

    def absolute(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def visit(nodes: list[ast.AST], in_function: bool, type_checking: bool) -> Iterator[Import]:
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(alias.name, node.lineno, in_function, type_checking)
            elif isinstance(node, ast.ImportFrom):
                base = absolute(node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    yield Import(
                        sub if sub in known else base, node.lineno, in_function, type_checking
                    )
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                yield from visit(list(node.body), in_function, True)
                yield from visit(list(node.orelse), in_function, type_checking)
            else:
                inner = in_function or isinstance(
                    node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
                )
                yield from visit(list(ast.iter_child_nodes(node)), inner, type_checking)

    tree = ast.parse(path.read_text(encoding="utf-8"))
    yield from visit(list(tree.body), False, False)


def _owner(target: str, known: dict[str, Path]) -> str | None:
    """The gpudiag module an import target lands in (``a.b.name`` -> ``a.b``)."""
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the gpudiag modules it imports, function-level imports included and
    ``if TYPE_CHECKING:`` blocks left out (they never run)."""
    known = modules(package)
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        deps = set()
        for imp in imports_of(path, name, known):
            owner = _owner(imp.target, known)
            if not imp.type_checking and owner is not None and owner != name:
                deps.add(owner)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(found)


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


# ---------------------------------------------------------------- the checks


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_module_over_the_limit_unless_one_concept() -> None:
    long = {}
    for name, path in modules().items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and name not in ALLOWED_LONG:
            long[name] = lines
    assert not long, f"modules over {MAX_LINES} lines (split by concept): {long}"


def test_allow_list_names_real_long_modules() -> None:
    # a stale entry would let a new long module of that name in unseen
    known = modules()
    for name, reason in ALLOWED_LONG.items():
        assert name in known, f"{name} is allow-listed but does not exist"
        lines = len(known[name].read_text(encoding="utf-8").splitlines())
        assert lines > MAX_LINES, f"{name} has {lines} lines: drop it from ALLOWED_LONG"
        assert reason.strip(), name


def test_only_backends_and_probes_import_gpu_libraries() -> None:
    known = modules()
    bad = []
    for name, path in known.items():
        for imp in imports_of(path, name, known):
            top = imp.target.partition(".")[0]
            if top not in GPU_LIBRARIES:
                continue
            if not any(_in(name, p) for p in GPU_IMPORTERS):
                bad.append(f"{name}:{imp.line} imports {imp.target}")
            elif not imp.in_function and not imp.type_checking:
                # importing a backend or probe module must stay cheap
                bad.append(f"{name}:{imp.line} imports {imp.target} at module level")
    assert not bad, bad


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layers_import_downwards(layer: str) -> None:
    known = modules()
    bad = []
    for name, path in known.items():
        if not _in(name, layer):
            continue
        for imp in imports_of(path, name, known):
            owner = _owner(imp.target, known) or imp.target
            for forbidden in FORBIDDEN[layer]:
                if _in(owner, forbidden):
                    bad.append(f"{name}:{imp.line} imports {owner}")
    assert not bad, bad


# ---------------------------------------------------------------- the checker itself


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "gpudiag" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "gpudiag"


def test_checker_sees_function_level_and_relative_cycles(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "def f():\n    from gpudiag import b\n",
            "b.py": "from . import c\n",
            "c.py": "from .a import f\n",
            "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpudiag import a\n",
        },
    )
    graph = import_graph(pkg)
    assert graph["gpudiag.d"] == set()  # TYPE_CHECKING blocks never run
    assert cycles(graph) == [["gpudiag.a", "gpudiag.b", "gpudiag.c"]]


def test_checker_ignores_type_checking_cycles(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "import gpudiag.b\n",
            "b.py": "import typing\nif typing.TYPE_CHECKING:\n    import gpudiag.a\n",
        },
    )
    assert cycles(import_graph(pkg)) == []
