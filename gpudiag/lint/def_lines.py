"""Where a project function's code is: its lines in its module, parsed again when a rule
first asks what it does (:class:`gpudiag.lint.summary.Def`; issue 17: lint's time and
memory: a module is read for the one name a linted file calls, and keeping every module's
syntax tree would keep every module read in memory)."""

from __future__ import annotations

import ast

from gpudiag.lint.compiles import parse


class Where:
    """A function's lines in its module (``first`` 0: the module's own code)."""

    __slots__ = ("col", "def_line", "first", "kept", "last", "lines")

    def __init__(self, lines: list[bytes], node: ast.AST | None = None, kept: bool = False) -> None:
        self.lines = lines
        #: the node itself while its module's tree is kept (ModuleSummary.release)
        self.kept = node if kept else None
        self.first = self.last = self.def_line = self.col = 0
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.def_line = node.lineno
            self.first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            self.last = node.end_lineno or node.lineno
            self.col = node.col_offset

    def roots(self) -> list[ast.AST]:
        if isinstance(self.kept, ast.Module):
            return list(self.kept.body)
        if self.kept is not None:
            return list(ast.iter_child_nodes(self.kept))
        if self.first == 0:
            return list(_parse(self.lines).body)
        segment = b"\n".join(self.lines[self.first - 1 : self.last])
        try:
            # an indented method parses inside a block of any deeper indentation
            tree = parse(b"if 1:\n" + segment if self.col else segment)
            node: ast.AST = tree.body[0]
            if isinstance(node, ast.If):
                node = node.body[0]
        except (SyntaxError, ValueError, RecursionError, MemoryError, IndexError):
            # its bytes alone are not Python (a `# coding:` line above it): the module's
            tree = _parse(self.lines)
            node = next(
                (
                    n
                    for n in ast.walk(tree)
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and n.lineno == self.def_line
                ),
                tree,
            )
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return []
        return list(ast.iter_child_nodes(node))


def _parse(lines: list[bytes]) -> ast.Module:
    try:
        return parse(b"\n".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ast.Module(body=[], type_ignores=[])
