"""The definitions of a module, surveyed before its walk (:class:`Survey`)."""

from __future__ import annotations

import ast

from gpudiag.lint.syntax import holds_blocks, inner_blocks


class Survey:
    """The definitions, found by walking statements only (expressions hold no ``def``).

    Iterative, in source order: an ``elif`` ladder nests one ``If`` per arm (issue 21).
    A call by name resolves to the first definition of the name (``funcs``,
    ``methods``, ``classes``); ``others`` holds every later one, each still read."""

    def __init__(self, tree: ast.Module) -> None:
        self.funcs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        #: the definitions no call by name resolves to, and whether each is a method
        self.others: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]] = []
        #: each method's class
        self.owner: dict[ast.AST, ast.ClassDef] = {}
        stack: list[tuple[ast.stmt, ast.ClassDef | None]] = [
            (node, None) for node in reversed(tree.body)
        ]
        while stack:
            node, cls = stack.pop()
            if not holds_blocks(type(node)):
                continue  # most of a file: no statement inside, so no definition
            inner: list[tuple[ast.stmt, ast.ClassDef | None]]
            if isinstance(node, ast.ClassDef):
                self.classes.setdefault(node.name, node)
                inner = [(member, node) for member in node.body]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # methods are reached through self.X / obj.X, not by their bare name
                table = self.methods if cls is not None else self.funcs
                if table.setdefault(node.name, node) is not node:
                    self.others.append((node, cls is not None))
                if cls is not None:
                    self.owner[node] = cls
                inner = [(member, None) for member in node.body]
            else:
                inner = [(sub, cls) for block in inner_blocks(node) for sub in block]
            stack.extend(reversed(inner))
