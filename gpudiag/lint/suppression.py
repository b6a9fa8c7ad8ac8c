"""Per-line suppressions (``# gpudiag: ignore[CODE]``, as ruff's ``# noqa``), and the
placing of a file's hits: suppressed and repeated ones dropped, the rest in order."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable

from gpudiag.findings.finding import SEVERITIES
from gpudiag.lint import shown
from gpudiag.lint.codes import CODES, Hit, LintFinding, hit

_IGNORE_RE = re.compile(r"#\s*gpudiag:\s*ignore")
# The forms a suppression may take (docs/lint.md): `ignore` alone, or `ignore[CODE, …]`
# with at least one code, each followed by the end of the comment or a blank. Anything
# else (`ignore[`, `ignore[LINT-X`, `ignore]`, `ignore[,]`, `ignored`) is malformed and
# suppresses nothing (issue 21: it used to suppress every code on the line).
_IGNORE_FORM = re.compile(r"ignore(?:\[([^\[\]]*)\])?(?=\s|$)")
_CODE = re.compile(r"[A-Za-z0-9_-]+")


def place(path: str, hits: Iterable[Hit], text: str) -> list[LintFinding]:
    """Give hits their file, drop suppressed and repeated ones, sort by position."""
    comments = _suppression_comments(text)
    extra = [
        found
        for line, (codes, col) in comments.items()
        if codes is not None
        for found in _unknown_codes(line, col, codes)
    ]
    seen: dict[tuple[int, str, str], int] = {}
    out: list[LintFinding] = []
    for h in [*hits, *extra]:
        # only the finding's own line, as ruff's per-line suppression (docs/lint.md)
        codes, _ = comments.get(h.line, (frozenset(), 0))
        if h.line in comments and (codes is None or h.finding.code in codes):
            continue
        key = (h.line, h.finding.code, h.finding.message)
        at = seen.get(key)
        if at is None:
            seen[key] = len(out)
            out.append(LintFinding(path, h.line, h.col, h.finding))
        elif _more_certain(h.finding.severity, out[at].finding.severity):
            # the same finding from two walks of one line (a function read on its own,
            # then in the rank that spawn starts): the walk that proves it decides
            out[at] = LintFinding(path, h.line, h.col, h.finding)
    out.sort(key=lambda f: (f.line, f.col, f.finding.code))
    return out


def _more_certain(severity: str, than: str) -> bool:
    return _CERTAINTY.get(severity, 0) > _CERTAINTY.get(than, 0)


#: error highest, info lowest
_CERTAINTY: dict[str, int] = {severity: -at for at, severity in enumerate(SEVERITIES)}


def _suppression_comments(text: str) -> dict[int, tuple[frozenset[str] | None, int]]:
    """Line → (the codes ignored there, None for every code; the comment's 1-based column),
    from ``# gpudiag: ignore[…]``; a malformed suppression (:data:`_IGNORE_FORM`) ignores
    nothing."""
    out: dict[int, tuple[frozenset[str] | None, int]] = {}
    if not _IGNORE_RE.search(text):
        return out  # the common case: no suppression anywhere, no need to tokenize
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return out
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        m = _IGNORE_RE.search(tok.string)
        if m is None:
            continue
        form = _IGNORE_FORM.match(tok.string, m.end() - len("ignore"))
        if form is None:
            continue  # malformed: suppresses nothing
        if form.group(1) is None:
            out[tok.start[0]] = (None, tok.start[1] + 1)
            continue
        codes = [c.strip() for c in form.group(1).split(",")]
        if all(_CODE.fullmatch(c) for c in codes):
            out[tok.start[0]] = (frozenset(c.upper() for c in codes), tok.start[1] + 1)
    return out


def _unknown_codes(line: int, col: int, codes: frozenset[str]) -> list[Hit]:
    """A warning per code in a suppression that names no lint rule: as ruff warns of an
    unknown code in ``# noqa`` (issue 17: a misspelled code was silently accepted and
    the finding it meant stayed, with nothing saying why)."""
    return [
        hit(
            line,
            col,
            "LINT-IGNORE-UNKNOWN-CODE",
            "warning",
            f"# gpudiag: ignore[…] names {shown.text(code)}, which is not a gpudiag lint code: "
            "it suppresses nothing.",
            "Correct the code (gpudiag lint --explain CODE lists the lint codes), or remove it.",
            None,
            code,
        )
        for code in sorted(codes - CODES.keys())
    ]
