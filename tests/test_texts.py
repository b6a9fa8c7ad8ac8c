"""gpudiag.findings.texts: the upstream error texts, by version, in one place.

Issue 16: torch's texts were copied across modules and disagreed
("Found no NVIDIA driver" quoted two ways). These tests keep one copy: every
text in texts.py is used, and no other module under gpudiag/ holds a literal
copy (or a truncated one) of any of them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gpudiag.findings import texts
from gpudiag.findings.texts import ByVersion

PACKAGE = Path(texts.__file__).resolve().parents[1]
TEXTS_PY = Path(texts.__file__).resolve()

#: Modules allowed to hold a copy of a text (none: every copy was replaced, issue 16).
ALLOWED_COPIES: set[tuple[str, str]] = set()

_FIELD = re.compile(r"\{[^{}]*\}")
_CLASS = re.compile(r"^[\w.]+(Error|Exception|Warning): ")
#: A literal shorter than this is too common to call a copy ("RuntimeError: ").
_MIN_CHARS = 24


def _text_names() -> dict[str, list[str]]:
    """Each text's name in texts.py and its texts (a ByVersion has several)."""
    out: dict[str, list[str]] = {}
    for name, value in vars(texts).items():
        if name.startswith("_") or not name.isupper():
            continue
        if isinstance(value, str):
            out[name] = [value]
        elif isinstance(value, ByVersion):
            out[name] = [text for _, text in value.ranges]
    return out


def _fragments(text: str) -> list[str]:
    """The fixed parts of a template long enough to identify it."""
    parts = [p.replace("{{", "{").replace("}}", "}") for p in _FIELD.split(text)]
    return [p.strip() for p in parts if len(p.strip()) >= _MIN_CHARS]


def _literals(tree: ast.AST) -> list[str]:
    """String literals of a module: constants and f-strings' fixed parts, not docstrings."""
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def _modules() -> dict[str, ast.AST]:
    return {
        path.relative_to(PACKAGE).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.resolve() != TEXTS_PY
    }


def _is_copy(literal: str, text: str) -> bool:
    if any(fragment in literal for fragment in _fragments(text)):
        return True
    # A truncated copy: the literal (its final full stop aside) begins the text.
    head = literal.strip().rstrip(".")
    return len(_CLASS.sub("", head)) >= _MIN_CHARS and text.startswith(head)


def find_copies() -> set[tuple[str, str]]:
    """``(module, name)`` for each module outside texts.py that copies a text."""
    found = set()
    names = _text_names()
    for module, tree in _modules().items():
        for literal in _literals(tree):
            for name, values in names.items():
                if any(_is_copy(literal, text) for text in values):
                    found.add((module, name))
    return found


def test_no_module_copies_a_text() -> None:
    extra = find_copies() - ALLOWED_COPIES
    assert not extra, f"import these from gpudiag.findings.texts instead: {sorted(extra)}"


def test_allow_list_is_not_stale() -> None:
    stale = ALLOWED_COPIES - find_copies()
    assert not stale, f"copies replaced: delete them from ALLOWED_COPIES: {sorted(stale)}"


def test_the_copy_finder_finds_copies() -> None:
    """The finder must be able to fail: a whole, an embedded and a truncated copy."""
    assert _is_copy(texts.NO_DRIVER, texts.NO_DRIVER)
    assert _is_copy("a CPU build: " + texts.NOT_COMPILED + " at once", texts.NOT_COMPILED)
    assert _is_copy("RuntimeError: Found no NVIDIA driver on your system.", texts.NO_DRIVER)
    assert _is_copy(
        "raise " + texts.DDP_DEVICE_IDS_CPU.format(ids="[0]", out="None"),
        texts.DDP_DEVICE_IDS_CPU,
    )
    assert not _is_copy("RuntimeError: ", texts.NO_DRIVER)
    assert not _is_copy("Found no NVIDIA GPU at all, none", texts.NO_DRIVER)


def test_every_text_is_used() -> None:
    """A text is used where gpudiag names it, or by a function of texts.py that is."""
    sources = {module: (PACKAGE / module).read_text(encoding="utf-8") for module in _modules()}
    texts_tree = ast.parse(TEXTS_PY.read_text(encoding="utf-8"))
    in_functions = {
        node.id
        for fn in texts_tree.body
        if isinstance(fn, ast.FunctionDef)
        for node in ast.walk(fn)
        if isinstance(node, ast.Name)
    }
    public_functions = [
        fn.name
        for fn in texts_tree.body
        if isinstance(fn, ast.FunctionDef) and not fn.name.startswith("_")
    ]
    copied = {name for _, name in ALLOWED_COPIES}

    def named(name: str) -> bool:
        pattern = re.compile(rf"\b{name}\b")
        return any(pattern.search(source) for source in sources.values())

    unused = [
        name
        for name in _text_names()
        if not named(name) and name not in in_functions and name not in copied
    ]
    assert not unused, f"texts no module uses: {unused}"
    unused_functions = [name for name in public_functions if not named(name)]
    assert not unused_functions, f"functions no module uses: {unused_functions}"


def test_no_driver_is_torchs_whole_sentence() -> None:
    """torch 2.13 c10/cuda/CUDAFunctions.cpp device_count_impl, TORCH_CHECK (RuntimeError)."""
    assert texts.NO_DRIVER == (
        "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an "
        "NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx"
    )


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("1.13.1", "RuntimeError: CUDA error: invalid device ordinal"),
        ("2.7.1+cu126", "RuntimeError: CUDA error: invalid device ordinal"),
        ("2.8.0", "torch.AcceleratorError: CUDA error: invalid device ordinal"),
        ("2.11.0+cu130", "torch.AcceleratorError: CUDA error: invalid device ordinal"),
        ("2.13.0+cpu", "torch.AcceleratorError: CUDA error: invalid device ordinal"),
        # Unknown or unreadable: a current torch.
        (None, "torch.AcceleratorError: CUDA error: invalid device ordinal"),
        ("nightly", "torch.AcceleratorError: CUDA error: invalid device ordinal"),
    ],
)
def test_invalid_ordinal_by_torch_version(version: str | None, expected: str) -> None:
    assert texts.invalid_ordinal(version) == expected
    also = texts.cuda_error_also(version, texts.INVALID_ORDINAL_MESSAGE)
    other = expected.startswith("RuntimeError")
    assert also == (
        ("torch >= 2.8: torch.AcceleratorError: CUDA error: invalid device ordinal",)
        if other
        else ("torch < 2.8: RuntimeError: CUDA error: invalid device ordinal",)
    )


@pytest.mark.parametrize(
    ("version", "starts"),
    [
        ("2.3.1", "RuntimeError: The server socket has failed to listen"),
        ("2.4.0", "torch.distributed.DistNetworkError: The server socket"),
        ("2.11.0", "torch.distributed.DistNetworkError: The server socket"),
    ],
)
def test_taken_port_by_torch_version(version: str, starts: str) -> None:
    table = texts.STORE_ADDR_IN_USE.format(port=29500)
    assert table.text(version).startswith(starts)
    assert "29500" in table.text(version)
    assert len(table.others(version)) == 1
    assert starts not in table.others(version)[0]


def test_three_ranges_are_labelled() -> None:
    table = ByVersion((((0, 0), "a"), ((2, 4), "b"), ((2, 8), "c")))
    assert [table.text(v) for v in ("2.3", "2.4.1", "2.7", "2.8", None)] == list("abbcc")
    assert table.others("2.5") == ("torch < 2.4: a", "torch >= 2.8: c")
    assert table.others("2.9") == ("torch < 2.4: a", "2.4 <= torch < 2.8: b")


def test_addr_in_use_names_both_backends() -> None:
    text = texts.addr_in_use_text(1234)
    assert text.startswith("torch.distributed.DistNetworkError: ")
    assert "(before torch 2.4: RuntimeError: The server socket" in text
    assert "bind to [::]:1234 (errno: 98 - Address already in use).)" in text
