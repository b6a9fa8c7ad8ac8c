"""The project a linted file belongs to: its modules found, read once per run, and joined.

Linting a file also reads the modules of the same project it imports (issue 17 item 1):
relative imports, and top-level packages or modules found beside the script, in the
folders above it up to the folder given to lint, in that folder itself, or above the
package the script is part of. Each module is read and summarised
(:mod:`gpudiag.lint.summary`) at most once per run, whichever files import it, and only
when a call reaches it: the cost stays linear in the project's size. A module nobody
calls into is never read. Nothing is imported or run.

A dotted path the linted file calls resolves to one of:

* a function, class or method of a project module: :meth:`Project.caps` says what it
  does, following its calls within the project (bounded, cycle-safe);
* :data:`UNRESOLVED`: a package that is not in the project (a third-party package, or a
  project module outside the folder given to lint), or a name lint cannot find in a
  module it read. Rules that depend on what it does are info at most (issue 17 item 2);
* None: torch, the standard library, or a package known to set up nothing on a GPU.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable
from dataclasses import dataclass

from gpudiag.lint import gated as G
from gpudiag.lint import summary as S
from gpudiag.lint.compiles import parse
from gpudiag.lint.launch_scripts import ShellLaunches
from gpudiag.lint.modules import KNOWN as _KNOWN
from gpudiag.lint.modules import ModuleFinder
from gpudiag.lint.project_text import ProjectText
from gpudiag.lint.summary import ClassInfo, Def, ModuleSummary

#: How many modules a name may be re-exported through (``from .core import f`` in an
#: ``__init__.py``), and how deep calls are followed from one function: far more than
#: helpers nest in practice, and a bound on the work done for one call.
MAX_HOPS = 8
MAX_CALL_DEPTH = 10
#: The largest module read for its summary (lint's own per-file limit).
MAX_MODULE_BYTES = 4 * 1024 * 1024
#: The most source kept parsed for the run's own lint of it (:meth:`Project.take_tree`):
#: a tree takes about ten times its source's memory.
MAX_KEPT_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class Sym:
    """A function (``f``), class (``C``) or method (``C.m``) of a project module."""

    path: str
    kind: str  # "func", "class" or "method"
    name: str

    @property
    def shown(self) -> str:
        return f"{self.name}() in {os.path.basename(self.path)}"


class _Unresolved:
    def __repr__(self) -> str:
        return "UNRESOLVED"


UNRESOLVED = _Unresolved()
Resolution = Sym | _Unresolved | None


class Project(ModuleFinder):
    """One lint run's view of the project(s): module lookup and summaries, each cached."""

    def __init__(self, roots: Iterable[str] = ()) -> None:
        super().__init__(roots)
        self._summaries: dict[str, ModuleSummary | None] = {}
        self._resolved: dict[tuple[str, str], Resolution] = {}
        self._caps: dict[Sym, frozenset[str]] = {}
        self._class_caps: dict[Sym, frozenset[str]] = {}
        #: by function, and by (function, the gates a call left off)
        self._backends: dict[Sym | tuple[Sym, frozenset[str]], frozenset[str | None]] = {}
        self._active: set[Sym] = set()
        self.launches = ShellLaunches(self.roots)  # how its scripts and docs launch a file
        #: the run's memo of the callers of functions (gpudiag.lint.callers) and of the
        #: importers of modules (gpudiag.lint.reach), and the text they search
        self.callers: dict[object, object] = {}
        self.text = ProjectText()
        #: how many modules were read for their summary (docs/lint.md: the cost)
        self.modules_read = 0
        #: the files the run lints, by real path -> their place in its order: a module
        #: read for its summary that is one of them keeps its tree (``kept``, by place)
        #: for its own lint, which the run does next: each file is parsed once, not twice
        #: (issue 17: reading the modules a file imports was a tenth of lint's time)
        self.pending: dict[str, int] = {}
        self.kept: dict[int, tuple[bytes, ast.Module]] = {}
        self._kept_bytes = 0

    # ------------------------------------------------------------------ finding modules

    def resolve(self, file: str, dotted: str, hops: int = 0) -> Resolution:
        """What ``dotted`` (as the code of ``file`` imports it) names in the project."""
        key = (file, dotted)
        if key in self._resolved:
            return self._resolved[key]
        self._resolved[key] = UNRESOLVED  # a cycle of re-exports ends here
        result = self._resolve(file, dotted, hops)
        self._resolved[key] = result
        return result

    def _resolve(self, file: str, dotted: str, hops: int) -> Resolution:
        if hops > MAX_HOPS or not dotted.strip("."):
            return UNRESOLVED
        level = len(dotted) - len(dotted.lstrip("."))
        parts = dotted[level:].split(".") if dotted[level:] else []
        if level:
            found = self._relative(file, level, parts)
        else:
            top = parts[0]
            if top in _KNOWN or top in S.INERT_PACKAGES:
                return None
            found = self._locate(self.search_dirs(file), parts)
        if found is None:
            return UNRESOLVED
        module, used = found
        return self._member(module, parts[used:], hops)

    def _member(self, module: str, rest: list[str], hops: int) -> Resolution:
        summary = self.summary(module)
        if summary is None or not rest:
            return UNRESOLVED
        name = rest[0]
        if name in summary.funcs and len(rest) == 1:
            return Sym(module, "func", name)
        if name in summary.classes:
            if len(rest) == 1:
                return Sym(module, "class", name)
            if len(rest) == 2:
                return self.method(Sym(module, "class", name), rest[1]) or UNRESOLVED
            return UNRESOLVED
        target = summary.aliases.get(name)
        if target is not None:
            return self.resolve(module, ".".join([target, *rest[1:]]), hops + 1)
        for star in summary.stars:
            sep = "" if star.endswith(".") else "."
            found = self.resolve(module, f"{star}{sep}{'.'.join(rest)}", hops + 1)
            if isinstance(found, Sym):
                return found
        return UNRESOLVED

    def module_top(self, file: str, dotted: str) -> frozenset[str]:
        """What importing the project module ``dotted`` does at module level (its own
        code, not the functions it defines); empty when it is no project module."""
        level = len(dotted) - len(dotted.lstrip("."))
        parts = dotted[level:].split(".") if dotted[level:] else []
        if level:
            found = self._relative(file, level, parts)
        elif parts and parts[0] not in _KNOWN and parts[0] not in S.INERT_PACKAGES:
            found = self._locate(self.search_dirs(file), parts)
        else:
            found = None
        if found is None or found[1] != len(parts):
            return frozenset()
        summary = self.summary(found[0])
        return frozenset(summary.top.caps) if summary is not None else frozenset()

    def summary(self, module: str) -> ModuleSummary | None:
        """The module's summary, read once per run (None: unreadable, not Python)."""
        if module in self._summaries:
            return self._summaries[module]
        self._summaries[module] = None
        try:
            if os.path.getsize(module) > MAX_MODULE_BYTES:
                return None
            with open(module, "rb") as handle:
                data = handle.read(MAX_MODULE_BYTES + 1)
            if len(data) > MAX_MODULE_BYTES:
                return None  # grown since its size was read
            tree = parse(data, module)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        self.modules_read += 1
        place = self.pending.get(module)
        kept = False
        if place is not None and self._kept_bytes + len(data) <= MAX_KEPT_BYTES:
            self.kept[place] = (data, tree)
            self._kept_bytes += len(data)
            kept = True
        result = S.summarise(tree, module, data, kept=kept)
        self._summaries[module] = result
        return result

    def real(self, file: str) -> str:
        """``file`` in its real folder, as the module paths found from imports are."""
        return os.path.join(self.folder(file), os.path.basename(file))

    def take_tree(self, file: str, data: bytes) -> ast.Module | None:
        """The tree kept for ``file`` when its summary parsed these very bytes; the file
        is no longer pending (its lint has begun)."""
        real = self.real(file)
        place = self.pending.pop(real, None)
        kept = self.kept.pop(place, None) if place is not None else None
        if kept is None:
            return None
        self._kept_bytes -= len(kept[0])
        summary = self._summaries.get(real)
        if summary is not None:
            summary.release()  # its functions not read yet: from their lines
        return kept[1] if kept[0] == data else None

    # ------------------------------------------------------------------ what code does

    def _class(self, sym: Sym) -> ClassInfo | None:
        summary = self.summary(sym.path)
        if summary is None:
            return None
        return summary.classes.get(sym.name.split(".")[0])

    def _def(self, sym: Sym) -> Def | None:
        summary = self.summary(sym.path)
        if summary is None:
            return None
        if sym.kind == "func":
            return summary.funcs.get(sym.name)
        if sym.kind == "method":
            cls, _, meth = sym.name.partition(".")
            info = summary.classes.get(cls)
            return info.methods.get(meth) if info is not None else None
        return None

    def bases(self, cls: Sym) -> list[Resolution]:
        """A project class's bases, each resolved (a local class, an import, or not)."""
        info = self._class(cls)
        if info is None:
            return []
        return [self.name_in(cls.path, text) for text in info.bases]

    def method(self, cls: Sym, name: str, depth: int = 0) -> Sym | None:
        """``cls.name`` looked up through the class and its project bases, in order."""
        info = self._class(cls)
        if info is None or depth > MAX_HOPS:
            return None
        if name in info.methods:
            return Sym(cls.path, "method", f"{cls.name}.{name}")
        for base in self.bases(cls):
            if isinstance(base, Sym) and base.kind == "class":
                found = self.method(base, name, depth + 1)
                if found is not None:
                    return found
        return None

    def opaque_bases(self, cls: Sym, depth: int = 0) -> bool:
        """Whether a class derives, here or further up, from a class lint cannot read."""
        if depth > MAX_HOPS:
            return False
        for base in self.bases(cls):
            if base is UNRESOLVED:
                return True
            if isinstance(base, Sym) and self.opaque_bases(base, depth + 1):
                return True
        return False

    def name_in(self, module: str, text: str) -> Resolution:
        """What a name written in ``module`` (``f``, ``C``, ``mod.f``) refers to."""
        summary = self.summary(module)
        if summary is None:
            return UNRESOLVED
        first, _, rest = text.partition(".")
        if first in summary.funcs and not rest:
            return Sym(module, "func", first)
        if first in summary.classes:
            if not rest:
                return Sym(module, "class", first)
            if "." not in rest:
                return self.method(Sym(module, "class", first), rest)
            return None
        target = summary.aliases.get(first)
        if target is None:
            if summary.stars:
                for star in summary.stars:
                    sep = "" if star.endswith(".") else "."
                    found = self.resolve(module, f"{star}{sep}{text}")
                    if isinstance(found, Sym):
                        return found
            return None  # a builtin, a parameter, a local variable: nothing to follow
        return self.resolve(module, f"{target}.{rest}" if rest else target)

    def caps(
        self, sym: Sym, depth: int = 0, unpassed: frozenset[str] = frozenset()
    ) -> frozenset[str]:
        """What calling ``sym`` does (constructing a class runs its ``__init__``), through
        the calls it makes within the project. A call into a package lint cannot read,
        whose name says it sets the job up, adds :data:`~gpudiag.lint.summary.OPAQUE_SETUP`.
        ``unpassed``: the parameters the call leaves at a default that turns an arm off
        (:mod:`gpudiag.lint.gated`); the process group that arm starts does not count."""
        if sym.kind == "class":
            init = self.method(sym, "__init__")
            found = self.caps(init, depth, unpassed) if init is not None else frozenset()
            if self.opaque_bases(sym):
                found |= {S.OPAQUE_SETUP}
            return found
        cached = self._caps.get(sym)
        if cached is not None and not (unpassed and S.INIT_PG in cached):
            return cached
        if sym in self._active or depth > MAX_CALL_DEPTH:
            return frozenset()  # a cycle, or too deep: what is known so far
        fn = self._def(sym)
        if fn is None:
            return frozenset()
        self._active.add(sym)
        off = set(fn.gates) & unpassed
        try:
            cls = Sym(sym.path, "class", sym.name.split(".")[0]) if sym.kind == "method" else None
            caps, backends = self._reach(sym, cls, fn, depth)
            for param, (_, arm) in fn.gates.items():
                more, more_backends = self._reach(sym, cls, arm, depth)
                if param in off:
                    more = more - {S.INIT_PG}
                else:
                    backends |= more_backends
                caps |= more
        finally:
            self._active.discard(sym)
        result = frozenset(caps)
        if off:
            self._backends[(sym, frozenset(off))] = frozenset(backends)  # this call's own
        elif depth == 0 or sym not in self._active:
            self._caps[sym] = result
            self._backends[sym] = frozenset(backends)
        return result

    def gates(self, sym: Sym) -> G.Gates:
        """``sym``'s gates (a class: its ``__init__``'s; :mod:`gpudiag.lint.gated`)."""
        if sym.kind == "class":
            init = self.method(sym, "__init__")
            return self.gates(init) if init is not None else {}
        fn = self._def(sym)
        return {p: at for p, (at, _) in fn.gates.items()} if fn is not None else {}

    def _reach(
        self, sym: Sym, cls: Sym | None, fn: S.Def, depth: int
    ) -> tuple[set[str], set[str | None]]:
        caps = set(fn.caps)
        backends = set(fn.backends)
        for text in dict.fromkeys(fn.calls):
            target = self._callee(sym.path, cls, text, fn.local_aliases)
            if isinstance(target, Sym):
                caps |= self.caps(target, depth + 1)
                backends |= self.backends(target)
            elif target is UNRESOLVED and S.SETUP_NAME.search(text.rsplit(".", 1)[-1]):
                caps.add(S.OPAQUE_SETUP)
        return caps, backends

    def class_caps(self, cls: Sym, depth: int = 0) -> frozenset[str]:
        """What any method of a project class or of its project bases does: a test class
        deriving from it may run any of them before its tests (a base's ``setUp``, or the
        ``_run`` of torch's MultiProcessTestCase that starts each test's process)."""
        cached = self._class_caps.get(cls)
        if cached is not None:
            return cached
        info = self._class(cls)
        if info is None or depth > MAX_HOPS:
            return frozenset()
        self._class_caps[cls] = frozenset()  # a class that derives from itself ends here
        found: set[str] = set()
        for name in info.methods:
            found |= self.caps(Sym(cls.path, "method", f"{cls.name}.{name}"))
        for base in self.bases(cls):
            if isinstance(base, Sym) and base.kind == "class":
                found |= self.class_caps(base, depth + 1)
            elif base is UNRESOLVED:
                found.add(S.OPAQUE_SETUP)
        self._class_caps[cls] = frozenset(found)
        return self._class_caps[cls]

    def backends(self, sym: Sym, unpassed: frozenset[str] = frozenset()) -> frozenset[str | None]:
        """The backends ``sym``'s process groups name (after :meth:`caps`, same ``unpassed``)."""
        if sym.kind == "class":
            init = self.method(sym, "__init__")
            return self.backends(init, unpassed) if init is not None else frozenset()
        fn = self._def(sym) if unpassed else None
        off = frozenset(set(fn.gates) & unpassed) if fn is not None else frozenset()
        return self._backends.get((sym, off) if off else sym, frozenset())

    def _callee(self, module: str, cls: Sym | None, text: str, local: S.Names) -> Resolution:
        head, dot, meth = text.partition(".")
        if head in ("self", "cls") and cls is not None:
            return self.method(cls, meth) if meth and "." not in meth else None
        if head == "super" and cls is not None:
            for base in self.bases(cls):
                if isinstance(base, Sym) and base.kind == "class":
                    method = self.method(base, meth)
                    if method is not None:
                        return method
                elif base is UNRESOLVED:
                    return UNRESOLVED
            return None
        found = self.name_in(module, text)
        if found is None and head in local:  # imported in the function: `from .d import f`
            return self.resolve(module, local[head] + dot + meth)
        return found
