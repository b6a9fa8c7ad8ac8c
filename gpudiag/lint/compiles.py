"""Python's own parser and compiler on a user's file, with its warnings silenced.

Parsing warns about the file, not about lint: ``'\\d'`` in a string is an "invalid escape
sequence" (a DeprecationWarning in Python 3.11, a SyntaxWarning printed to stderr from
3.12). Under ``PYTHONWARNINGS=error`` or ``-W error``, which test runs often set, the
warning became a SyntaxError and lint reported a false ``LINT-PARSE-ERROR``; from 3.12
it would be printed once per file. :func:`parse` is every parse of a user's file.

A second certainty check before any finding is reported: does the file compile?

``ast.parse`` accepts some files that Python cannot compile: the checks of the compiler's
symbol table and code generator come later (CPython 3.11, Python/compile.c and
Python/symtable.c: ``keyword argument repeated``, ``'return' outside function``,
``duplicate argument``, ``name 'x' is assigned to before global declaration``). Such a
file fails ``python -m py_compile`` and every import of it, so nothing in it runs, and a
finding about what it would do on a GPU is wrong (issue 17, the eighth held-out corpus:
InternVideo3's eval_grounding.py repeats ``help=`` in one ``add_argument``, and its two
global-rank warnings were judged wrong for it). The file's real problem is reported
instead, as ``LINT-PARSE-ERROR``.

The check runs only for a file that has a finding to report (one whose findings are all
info too: it must still report that it does not compile, whatever demoted its other
findings): compiling every file would cost about one more ``py_compile`` of the corpus
(docs/lint.md, "Speed").
"""

from __future__ import annotations

import ast
import warnings


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse``, its warnings about the source silenced (raises what it raises)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source, filename=filename)


def compile_error(tree: ast.Module, path: str) -> SyntaxError | None:
    """The ``SyntaxError`` Python's compiler raises for ``tree``, or None when it compiles
    (or when the compiler gives up for another reason, which proves nothing about the file)."""
    with warnings.catch_warnings():
        # SyntaxWarning ("invalid escape sequence") is printed, or raised under -W error,
        # by compile(); it is not lint's to show
        warnings.simplefilter("ignore")
        try:
            # dont_inherit: gpudiag's own `from __future__` flags are not the file's
            compile(tree, path, "exec", dont_inherit=True)
        except SyntaxError as exc:
            return exc
        except (ValueError, TypeError, RecursionError, MemoryError):
            return None
    return None
