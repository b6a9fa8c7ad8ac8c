"""Pure queries on a script's syntax tree, below the walker, the call semantics and the facts.

Call arguments (:func:`keyword`, :func:`argument`), dotted names, what a file or a loop
assigns (the walker's name table; :class:`~gpudiag.lint.facts.Facts` asks whether a name is
assigned once, e.g. an epoch counter), a class's members, whether a function uses CUDA.
"""

from __future__ import annotations

import ast
import functools

#: The most parts a dotted name the walker tracks may have (``self.model.encoder`` has
#: 3). A longer chain is not a name any rule needs, and the bound keeps every dotted-name
#: operation linear in the name's length (issue 21: a 400-attribute chain recursed).
MAX_DOTTED_PARTS = 32


def assign_counts(tree: ast.AST) -> dict[str, int]:
    """How many times each dotted name is assigned anywhere (loops count as many)."""
    counts: dict[str, int] = {}

    def add(target: ast.AST, weight: int) -> None:
        for elt in flat_targets(target):
            key = dotted_key(elt)
            if key is not None:
                counts[key] = counts.get(key, 0) + weight

    # statements only: a walrus or a comprehension variable is rarely an epoch counter
    for node in statements(tree.body if isinstance(tree, ast.Module) else []):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                add(t, 1)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            add(node.target, 2 if isinstance(node, ast.AugAssign) else 1)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            add(node.target, 2)
    return counts


def flat_targets(target: ast.AST) -> list[ast.AST]:
    """The targets inside ``a, (b, c) = …``, in order, without recursion (issue 21)."""
    out: list[ast.AST] = []
    stack = [target]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Tuple, ast.List)):
            stack.extend(reversed(node.elts))
        else:
            out.append(node)
    return out


def inner_blocks(node: ast.AST) -> list[list[ast.stmt]]:
    """The statement lists directly inside a statement: ``body``, ``orelse``,
    ``finalbody``, then each ``except`` handler's and each ``case``'s body."""
    if not holds_blocks(type(node)):  # an assignment, a call, a return: most statements
        return []
    blocks: list[list[ast.stmt]] = []
    for name in ("body", "orelse", "finalbody"):
        inner = getattr(node, name, None)
        if isinstance(inner, list):
            blocks.append(inner)
    blocks.extend(handler.body for handler in getattr(node, "handlers", ()))
    blocks.extend(case.body for case in getattr(node, "cases", ()))
    return blocks


def holds_blocks(kind: type) -> bool:
    """Whether a node type has statement lists inside (``_fields``: the grammar's, ast(3))."""
    found = _HAS_BLOCKS.get(kind)
    if found is None:
        found = _HAS_BLOCKS[kind] = any(
            name in getattr(kind, "_fields", ())
            for name in ("body", "orelse", "finalbody", "handlers", "cases")
        )
    return found


_HAS_BLOCKS: dict[type, bool] = {}


def statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Every statement of ``body`` and of the blocks inside it (:func:`inner_blocks`),
    in pre-order, without recursion: an ``elif`` ladder nests one ``If`` per arm, and
    Python's parser takes thousands of arms (issue 21: a ~490-arm ladder recursed)."""
    out: list[ast.stmt] = []
    stack: list[ast.stmt] = list(reversed(body))
    while stack:
        node = stack.pop()
        out.append(node)
        for block in reversed(inner_blocks(node)):
            stack.extend(reversed(block))
    return out


def imported(body: list[ast.stmt]) -> list[str]:
    """The names the import statements of a block bind (``import a.b`` binds ``a``)."""
    out: list[str] = []
    for stmt in body:
        if isinstance(stmt, ast.Import):
            out.extend(a.asname or a.name.split(".")[0] for a in stmt.names)
        elif isinstance(stmt, ast.ImportFrom):
            out.extend(a.asname or a.name for a in stmt.names if a.name != "*")
    return out


def dotted_key(node: ast.AST | None) -> str | None:
    """``model``, ``self.model``, ``args.local_rank``; None for anything else, and for a
    chain of more than :data:`MAX_DOTTED_PARTS` parts. Iterative (issue 21). Memoised
    per node until :func:`clear_caches` (the walk asks again for the same node)."""
    if isinstance(node, ast.Name):
        return node.id
    if not isinstance(node, ast.Attribute):
        return None
    found = _DOTTED.get(node, _MISSING)
    if found is _MISSING:
        found = _DOTTED[node] = _dotted(node)
    return found  # type: ignore[return-value]


_DOTTED: dict[ast.AST, str | None] = {}
_MISSING = object()


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        if len(parts) >= MAX_DOTTED_PARTS - 1:
            return None
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


#: The same function, by the name the call semantics use.
dotted_name = dotted_key


def ident(node: ast.AST) -> str | None:
    """The last name of ``x`` or ``a.b.x`` (None for anything else)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def dotted_prefixes(key: str) -> list[str]:
    """``a.b.c`` -> ``a``, ``a.b``: the names a dotted name lies below."""
    out: list[str] = []
    at = key.find(".")
    while at != -1:
        out.append(key[:at])
        at = key.find(".", at + 1)
    return out


def clear_caches() -> None:
    """Forget the per-node memos: their keys hold a file's syntax tree alive, and a
    folder of 4 MiB scripts would keep 256 trees each (issue 21: bound memory)."""
    _DOTTED.clear()
    uses_cuda.cache_clear()
    assigned_in.cache_clear()
    class_members.cache_clear()


#: ast.unparse recurses, several Python frames per level of the tree: a node nested
#: deeper than this is shown as "…" (issue 21: a 400-term sum is valid Python).
UNPARSE_DEPTH = 40


def unparse(node: ast.AST) -> str:
    """``ast.unparse(node)``, or "…" for a node nested deeper than :data:`UNPARSE_DEPTH`."""
    stack = [(node, 1)]
    while stack:
        sub, depth = stack.pop()
        if depth > UNPARSE_DEPTH:
            return "…"
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(sub))
    return ast.unparse(node)


def keyword(node: ast.Call, name: str) -> ast.expr | None:
    for kw in node.keywords:
        if kw.arg == name:
            return kw.value
    return None


def argument(node: ast.Call, index: int, name: str) -> ast.expr | None:
    found = keyword(node, name)
    if found is not None:
        return found
    positional = [a for a in node.args if not isinstance(a, ast.Starred)]
    return positional[index] if index < len(positional) else None


@functools.lru_cache(maxsize=256)
def uses_cuda(fn: ast.AST) -> bool:
    """Whether a function body visibly uses CUDA (``.cuda()``, ``cuda`` strings, torch.cuda)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and node.attr in ("cuda", "set_device"):
            return True
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and (node.value.startswith("cuda") or node.value == "nccl")
        ):
            return True
    return False


_TARGETED = (ast.AugAssign, ast.AnnAssign, ast.NamedExpr, ast.For, ast.AsyncFor, ast.comprehension)


@functools.lru_cache(maxsize=256)
def assigned_in(loop: ast.AST) -> frozenset[str]:
    """The dotted names a loop's body assigns (``epoch``, ``self.epoch``, ``e`` of ``e += 1``)."""
    out: set[str] = set()
    for node in ast.walk(loop):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, _TARGETED):
            targets = [node.target]
        for target in targets:
            for sub in ast.walk(target):
                key = dotted_name(sub)
                if key is not None:
                    out.add(key)
    return frozenset(out)


@functools.lru_cache(maxsize=256)
def class_members(cls: ast.ClassDef) -> frozenset[str]:
    """Methods and ``self.X`` attributes a class defines."""
    out: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in cls.body:
            out.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            out.add(node.attr)
    return frozenset(out)


def is_static(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A ``@staticmethod``: called through ``self``/``cls``, it gets no instance."""
    return any(dotted_name(d) == "staticmethod" for d in fn.decorator_list)


#: decorators that leave a function to its callers: torch's grad modes, functools.wraps,
#: staticmethod/classmethod (any other may register it, or call it with its own arguments)
PLAIN_DECORATORS = frozenset(
    {"no_grad", "inference_mode", "enable_grad", "staticmethod", "classmethod", "wraps"}
)


def plainly_decorated(defn: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    """Whether every decorator of ``defn`` is one of :data:`PLAIN_DECORATORS`: neither a
    registry, a CLI, a fixture nor a framework calls it by itself."""
    for deco in defn.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        last = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if last not in PLAIN_DECORATORS:
            return False
    return True
