#!/usr/bin/env python3
"""Re-run ``gpudiag lint`` over a corpus of real repositories and score it against verdicts.

Issue 17, item 5: every warning and error that lint reports on the public training
repositories of ``bench/lint_corpus/repos.csv`` was judged by reading the code
(right / wrong / debatable); the verdicts live in ``bench/lint_corpus/verdicts/``,
one CSV per repository (columns repo,commit,file,line,code,severity,verdict,reason).
This script lints each repository again and joins today's findings (warnings and
errors; info is not judged) with the verdicts on (repo, file, line, code). It prints
a per-code table (right / wrong / debatable / unjudged, precision), the precision of
warnings+errors and of errors (precision = right / (right + wrong), as issue 17
computes it: 124 right, 103 wrong -> 54.6%), "true positives kept: K of N" (a
finding judged right that lint no longer reports as a warning or an error is lost,
and listed), and the findings nobody has judged yet.

Build the corpus (it is not in this repository; about 1 GB), one folder per
repository named owner+name, at the pinned commit:

    mkdir -p /work/corpus && cd /work/corpus
    # for each row of bench/lint_corpus/repos.csv:
    git clone URL owner+name && git -C owner+name checkout COMMIT

Run (the corpus folder is --corpus, else $GPUDIAG_CORPUS, else /work/corpus):

    python bench/lint_corpus.py                         # the table
    python bench/lint_corpus.py --repo karpathy+nanoGPT # some repositories only
    python bench/lint_corpus.py --unjudged-csv new.csv  # findings to judge, as verdict rows
    python bench/lint_corpus.py --time                  # + lint's time against py_compile
    python bench/lint_corpus.py --enforce               # exit 1 below the targets

A repository folder that is missing is reported and skipped (and counted). With
--enforce the exit status is 1 when the precision of warnings+errors is under 95%,
that of errors under 99%, a judged true positive is lost, a finding is unjudged, or
the run is incomplete (a repository missing, or its lint failed); 2 on bad input
(an unreadable repos.csv or verdict file, an unknown --repo); else 0.

Lint runs as ``python -m gpudiag lint --json REPO_DIR`` in a subprocess per
repository (argv list, timeout, cwd = the repository): that is what a user runs,
so option handling, configuration lookup and the project read (issue 17 item 1,
which takes the given folder as the root) are the CLI's own; a crash or a hang
is one repository's failure, reported, not this script's. This checkout's
``gpudiag`` is put first on PYTHONPATH, so a worktree is scored on its own code.

--time times, in one subprocess each and interpreter start-up included in both,
``gpudiag lint`` over every corpus folder at once and ``py_compile.compile`` of
each .py file that lint checked (``.pyc`` written to a temporary folder), plus a
bare ``compile()`` of each file for reference; it prints the times and the ratios
(issue 17: lint must stay within 4x py_compile). The machine's other load counts
in both: use -n to take the median of several runs; the CPU time (user + system)
of each process is printed beside the wall time, and is the steadier figure on a
shared machine.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "bench" / "lint_corpus"
DEFAULT_CORPUS = "/work/corpus"
FIELDS = ["repo", "commit", "file", "line", "code", "severity", "verdict", "reason"]
VERDICTS = ("right", "wrong", "debatable")
JUDGED = ("warning", "error")
TARGET_ALL = 95.0
TARGET_ERRORS = 99.0
WIDTH = 100

Key = tuple[str, str, int, str]  # repo, file, line, code


class InputError(Exception):
    """Bad input: one line on stderr, exit 2."""


@dataclass(frozen=True)
class Repo:
    name: str
    url: str
    commit: str


@dataclass(frozen=True)
class Verdict:
    repo: str
    commit: str
    file: str
    line: int
    code: str
    severity: str
    verdict: str  # "" = not judged yet
    reason: str

    @property
    def key(self) -> Key:
        return (self.repo, self.file, self.line, self.code)


@dataclass(frozen=True)
class Finding:
    repo: str
    file: str
    line: int
    code: str
    severity: str
    message: str

    @property
    def key(self) -> Key:
        return (self.repo, self.file, self.line, self.code)


@dataclass
class Linted:
    repo: Repo
    findings: list[Finding]
    files: list[str]  # absolute paths lint checked
    seconds: float
    failure: str = ""


def read_repos(path: Path) -> list[Repo]:
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc
    repos = []
    for n, row in enumerate(rows, start=2):
        name, url, commit = (row.get(k) or "" for k in ("repo", "url", "commit"))
        if not (name and url and commit) or "/" in name:
            raise InputError(f"{path}:{n}: expected repo,url,commit with repo = owner+name")
        repos.append(Repo(name, url, commit))
    return repos


def read_verdicts(folder: Path, repo: Repo) -> dict[Key, Verdict]:
    """The verdicts of one repository ({} when it has no file yet)."""
    path = folder / f"{repo.name}.csv"
    if not path.exists():
        return {}
    out: dict[Key, Verdict] = {}
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames != FIELDS:
            raise InputError(f"{path}: header must be {','.join(FIELDS)}")
        for n, row in enumerate(reader, start=2):
            where = f"{path}:{n}"
            if None in row or None in row.values():
                raise InputError(f"{where}: expected {len(FIELDS)} columns")
            if not row["line"].isdigit():
                raise InputError(f"{where}: line {row['line']!r} is not a number")
            v = Verdict(
                row["repo"],
                row["commit"],
                row["file"],
                int(row["line"]),
                row["code"],
                row["severity"],
                row["verdict"],
                row["reason"],
            )
            if v.repo != repo.name or v.commit != repo.commit:
                raise InputError(f"{where}: repo/commit differ from repos.csv ({repo.commit})")
            if v.verdict not in (*VERDICTS, ""):
                raise InputError(f"{where}: verdict {v.verdict!r} is not one of {VERDICTS}")
            if v.key in out:
                raise InputError(f"{where}: a second verdict for {v.file}:{v.line} {v.code}")
            out[v.key] = v
    return out


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def lint_repo(repo: Repo, folder: Path, timeout: float) -> Linted:
    argv = [sys.executable, "-m", "gpudiag", "lint", "--json", str(folder)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            argv, cwd=folder, env=_env(), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return Linted(repo, [], [], time.perf_counter() - start, f"timed out after {timeout} s")
    seconds = time.perf_counter() - start
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Linted(repo, [], [], seconds, f"exit {proc.returncode}: {tail}")
    findings = []
    for f in doc["findings"]:
        rel = os.path.relpath(f["path"], folder) if os.path.isabs(f["path"]) else f["path"]
        rel = Path(rel).as_posix()
        findings.append(Finding(repo.name, rel, f["line"], f["code"], f["severity"], f["message"]))
    return Linted(repo, findings, list(doc["files"]), seconds)


@dataclass
class Score:
    rows: dict[str, dict[str, int]]  # code -> right/wrong/debatable/unjudged
    errors: dict[str, int]
    unjudged: list[Finding]
    tp_total: int
    lost: list[tuple[Verdict, str]]  # verdict judged right, and what lint says now
    gone: dict[str, int]  # wrong/debatable verdicts lint no longer reports


def score(linted: Sequence[Linted], verdicts: dict[Key, Verdict]) -> Score:
    rows: dict[str, dict[str, int]] = {}
    errors = dict.fromkeys((*VERDICTS, "unjudged"), 0)
    reported: dict[Key, Finding] = {}
    below: dict[Key, Finding] = {}  # reported, but as info
    for lt in linted:
        for f in lt.findings:
            # a finding counts once per (repo, file, line, code): the verdict's key
            (reported if f.severity in JUDGED else below).setdefault(f.key, f)
    unjudged = []
    for key, f in sorted(reported.items()):
        v = verdicts.get(key)
        kind = v.verdict if v is not None and v.verdict else "unjudged"
        rows.setdefault(f.code, dict.fromkeys((*VERDICTS, "unjudged"), 0))[kind] += 1
        if f.severity == "error":
            errors[kind] += 1
        if kind == "unjudged":
            unjudged.append(f)
    ran = {lt.repo.name for lt in linted if not lt.failure}
    lost, tp_total = [], 0
    gone = {"wrong": 0, "debatable": 0}
    for key, v in sorted(verdicts.items()):
        if v.repo not in ran or not v.verdict:
            continue
        tp_total += v.verdict == "right"
        if key in reported:
            continue
        if v.verdict == "right":
            lost.append((v, "now info" if key in below else "not reported"))
        else:
            gone[v.verdict] += 1
    return Score(rows, errors, unjudged, tp_total, lost, gone)


def precision(counts: dict[str, int]) -> float | None:
    judged = counts["right"] + counts["wrong"]
    return 100.0 * counts["right"] / judged if judged else None


def _below(p: float | None, target: float) -> bool:
    return p is not None and p < target


def _pct(p: float | None) -> str:
    return "-" if p is None else f"{p:.1f}%"


def _cut(text: str, width: int) -> str:
    text = " ".join(text.splitlines())
    return text if len(text) <= width else text[: width - 1] + "…"


def render(sc: Score) -> list[str]:
    head = f"{'code':<36}{'right':>7}{'wrong':>7}{'debatable':>11}{'unjudged':>10}{'precision':>11}"
    out = [head, "-" * len(head)]

    def line(label: str, c: dict[str, int]) -> str:
        nums = f"{c['right']:>7}{c['wrong']:>7}{c['debatable']:>11}{c['unjudged']:>10}"
        return f"{_cut(label, 36):<36}{nums}{_pct(precision(c)):>11}"

    total = dict.fromkeys((*VERDICTS, "unjudged"), 0)
    for code in sorted(sc.rows):
        out.append(line(code, sc.rows[code]))
        for k, n in sc.rows[code].items():
            total[k] += n
    out += ["-" * len(head), line("warnings+errors", total), line("errors", sc.errors), ""]
    out.append(f"true positives kept: {sc.tp_total - len(sc.lost)} of {sc.tp_total}")
    for v, now in sc.lost:
        out.append(_cut(f"  lost: {v.repo} {v.file}:{v.line} {v.code} ({now})", WIDTH))
    out.append(
        f"judged wrong, no longer reported: {sc.gone['wrong']}; "
        f"judged debatable, no longer reported: {sc.gone['debatable']}"
    )
    out.append(f"unjudged findings: {len(sc.unjudged)}")
    for f in sc.unjudged:
        out.append(_cut(f"  {f.repo} {f.file}:{f.line} {f.code} [{f.severity}] {f.message}", WIDTH))
    return out


def write_unjudged(path: Path, findings: Iterable[Finding], repos: dict[str, Repo]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(FIELDS)
        for f in sorted(findings, key=lambda f: f.key):
            writer.writerow(
                [f.repo, repos[f.repo].commit, f.file, f.line, f.code, f.severity, "", ""]
            )


_COMPILE = r"""
import py_compile, sys, time
files = open(sys.argv[1], encoding="utf-8").read().splitlines()
bad = 0
for i, name in enumerate(files):
    try:
        if sys.argv[2] == "-":
            with open(name, "rb") as fh:
                compile(fh.read(), name, "exec", dont_inherit=True)
        else:
            py_compile.compile(name, cfile=f"{sys.argv[2]}/{i}.pyc", doraise=True)
    except (SyntaxError, ValueError, py_compile.PyCompileError):
        bad += 1
print(bad)
"""


def _timed(argv: list[str], timeout: float) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        argv, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def time_corpus(linted: Sequence[Linted], folders: list[Path], runs: int) -> list[str]:
    files = sorted({f for lt in linted for f in lt.files})
    timeout = 3600.0
    times: dict[str, list[tuple[float, float]]] = {"lint": [], "pyc": [], "bare": []}
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "files.txt"
        listing.write_text("\n".join(files) + "\n", encoding="utf-8")
        compile_argv = [sys.executable, "-c", _COMPILE, str(listing)]
        lint_argv = [sys.executable, "-m", "gpudiag", "lint", "--json", *map(str, folders)]
        pycs = Path(tmp) / "pyc"
        pycs.mkdir()
        for _ in range(runs):
            times["lint"].append(_timed(lint_argv, timeout))
            times["pyc"].append(_timed([*compile_argv, str(pycs)], timeout))
            times["bare"].append(_timed([*compile_argv, "-"], timeout))
    wall = {k: statistics.median(w for w, _ in v) for k, v in times.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in times.items()}

    def row(label: str, key: str) -> str:
        line = f"  {label:<22}{wall[key]:8.2f} s wall {cpu[key]:8.2f} s cpu"
        if key != "lint":
            line += f"   lint is {wall['lint'] / wall[key]:.2f}x wall, "
            line += f"{cpu['lint'] / cpu[key]:.2f}x cpu"
        return line

    return [
        f"time over {len(files)} files in {len(folders)} repositories, median of {runs}",
        "(one process each, start-up included; cpu = user + system, steadier under load):",
        row("gpudiag lint --json", "lint"),
        row("py_compile.compile", "pyc"),
        row("compile() only", "bare"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Building the corpus: git clone URL owner+name; git -C owner+name checkout "
        "COMMIT, for each row of repos.csv (see the top of this file).",
    )
    parser.add_argument("--corpus", type=Path, help="one folder per repository (owner+name)")
    parser.add_argument("--repos", type=Path, default=HERE / "repos.csv", help="repos.csv")
    parser.add_argument("--verdicts", type=Path, default=HERE / "verdicts", help="verdict CSVs")
    parser.add_argument("--repo", action="append", default=[], help="only this one (repeatable)")
    parser.add_argument("--unjudged-csv", type=Path, help="write unjudged findings as verdict rows")
    parser.add_argument("--time", action="store_true", help="time lint against py_compile")
    parser.add_argument("-n", type=int, default=1, help="--time: runs, median (default 1)")
    parser.add_argument("--timeout", type=float, default=600.0, help="per repository (s)")
    parser.add_argument("--enforce", action="store_true", help="exit 1 below the targets")
    args = parser.parse_args(argv)
    corpus = args.corpus or Path(os.environ.get("GPUDIAG_CORPUS") or DEFAULT_CORPUS)
    try:
        repos = read_repos(args.repos)
        unknown = sorted(set(args.repo) - {r.name for r in repos})
        if unknown:
            raise InputError(f"--repo {unknown[0]}: not in {args.repos}")
        chosen = [r for r in repos if not args.repo or r.name in args.repo]
        verdicts: dict[Key, Verdict] = {}
        for r in chosen:
            verdicts.update(read_verdicts(args.verdicts, r))
    except (InputError, OSError, UnicodeDecodeError, csv.Error) as exc:
        print(f"lint_corpus: {exc}", file=sys.stderr)
        return 2

    missing = [r for r in chosen if not (corpus / r.name).is_dir()]
    linted: list[Linted] = []
    for r in chosen:
        if r not in missing:
            lt = lint_repo(r, corpus / r.name, args.timeout)
            linted.append(lt)
            n = sum(f.severity in JUDGED for f in lt.findings)
            state = f"LINT FAILED: {lt.failure}" if lt.failure else f"{n} warnings+errors"
            print(
                _cut(f"{r.name:<34} {len(lt.files):>5} files  {lt.seconds:6.1f} s  {state}", WIDTH)
            )
    print(f"{len(linted)} of {len(chosen)} repositories linted in {corpus}; {len(missing)} missing")
    for r in missing:
        print(_cut(f"  missing (skipped): {r.name}  ({r.url})", WIDTH))
    failed = [lt for lt in linted if lt.failure]
    print()
    sc = score(linted, verdicts)
    print("\n".join(render(sc)))
    if args.unjudged_csv:
        write_unjudged(args.unjudged_csv, sc.unjudged, {r.name: r for r in repos})
        print(f"wrote {len(sc.unjudged)} unjudged rows to {args.unjudged_csv}")
    ran = [corpus / lt.repo.name for lt in linted if not lt.failure]
    if args.time and ran:
        print()
        print("\n".join(time_corpus(linted, ran, max(1, args.n))))
    if not args.enforce:
        return 0
    total = {k: sum(c[k] for c in sc.rows.values()) for k in ("right", "wrong")}
    p_all, p_err = precision(total), precision(sc.errors)
    why = [
        *([f"precision {p_all:.1f}% < {TARGET_ALL}%"] if _below(p_all, TARGET_ALL) else []),
        *([f"errors {p_err:.1f}% < {TARGET_ERRORS}%"] if _below(p_err, TARGET_ERRORS) else []),
        *([f"{len(sc.lost)} true positive(s) lost"] if sc.lost else []),
        *([f"{len(sc.unjudged)} unjudged"] if sc.unjudged else []),
        *([f"{len(missing)} repositories missing"] if missing else []),
        *([f"lint failed on {len(failed)}"] if failed else []),
    ]
    print(f"enforce: {'FAILED: ' + '; '.join(why) if why else 'ok'}")
    return 1 if why else 0


if __name__ == "__main__":
    sys.exit(main())
