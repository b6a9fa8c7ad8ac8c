"""bench/lint_corpus.py on a two-repository corpus built here (issue 17, item 5).

The script re-runs ``gpudiag lint`` on each repository folder and joins its
findings with the verdict CSVs: these tests check the arithmetic it prints
(precision = right / (right + wrong)), the true positives it reports lost, the
unjudged findings, the missing repository, and the exit status of --enforce.
"""

from __future__ import annotations

import csv
import functools
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIELDS = ["repo", "commit", "file", "line", "code", "severity", "verdict", "reason"]
C1, C2, C3 = "1" * 40, "2" * 40, "3" * 40

# A mask then physical ids (an error, line 5) and four deprecated AMP uses (warnings).
ONE = """import os
import torch
os.environ["CUDA_VISIBLE_DEVICES"] = "1,2"
model = torch.nn.Linear(2, 2).cuda(1)
net = torch.nn.DataParallel(model, device_ids=[1, 2])
scaler = torch.cuda.amp.GradScaler()
scaler2 = torch.cuda.amp.GradScaler()
with torch.cuda.amp.autocast():
    scaler3 = torch.cuda.amp.GradScaler()
"""
TWO = """import torch
scaler = torch.cuda.amp.GradScaler()
with torch.cuda.amp.autocast():
    pass
"""
AMP, IDS = "LINT-AMP-DEPRECATED", "LINT-IDS-UNDER-MASK"


@functools.cache
def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lint_corpus", ROOT / "bench" / "lint_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def _write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)


def _v(repo: str, commit: str, file: str, line: int, code: str, sev: str, verdict: str):
    return [repo, commit, file, line, code, sev, verdict, "reason"]


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    (corpus / "acme+one").mkdir(parents=True)
    (corpus / "acme+one" / "train.py").write_text(ONE)
    (corpus / "acme+two" / "pkg").mkdir(parents=True)
    (corpus / "acme+two" / "pkg" / "amp.py").write_text(TWO)
    _write_csv(
        tmp_path / "repos.csv",
        ["repo", "url", "commit"],
        [
            ["acme+one", "https://github.com/acme/one", C1],
            ["acme+two", "https://github.com/acme/two", C2],
            ["acme+gone", "https://github.com/acme/gone", C3],  # no folder in the corpus
        ],
    )
    verdicts = tmp_path / "verdicts"
    verdicts.mkdir()
    one = [
        _v("acme+one", C1, "train.py", 5, IDS, "error", "right"),
        _v("acme+one", C1, "train.py", 6, AMP, "warning", "right"),
        _v("acme+one", C1, "train.py", 7, AMP, "warning", "wrong"),
        _v("acme+one", C1, "train.py", 8, AMP, "warning", "debatable"),
        # line 9 is left unjudged; line 20 was a true positive lint no longer reports
        _v("acme+one", C1, "train.py", 20, AMP, "warning", "right"),
    ]
    _write_csv(verdicts / "acme+one.csv", FIELDS, one)
    two = [
        _v("acme+two", C2, "pkg/amp.py", 2, AMP, "warning", "right"),
        _v("acme+two", C2, "pkg/amp.py", 3, AMP, "warning", "right"),
    ]
    _write_csv(verdicts / "acme+two.csv", FIELDS, two)
    return tmp_path


def _run(bench: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    argv = ["--corpus", str(bench / "corpus"), "--repos", str(bench / "repos.csv")]
    argv += ["--verdicts", str(bench / "verdicts"), *extra]
    rc = _script().main(argv)
    out, err = capsys.readouterr()
    return rc, out + err


def _row(out: str, label: str) -> list[str]:
    (line,) = [ln for ln in out.splitlines() if ln.startswith(label + " ")]
    return line.split()[len(label.split()) :]


def test_table_lost_unjudged_missing_and_enforce(bench, capsys):
    rc, out = _run(bench, capsys, "--enforce")
    assert rc == 1
    # right, wrong, debatable, unjudged, precision
    assert _row(out, AMP) == ["3", "1", "1", "1", "75.0%"]
    assert _row(out, IDS) == ["1", "0", "0", "0", "100.0%"]
    assert _row(out, "warnings+errors") == ["4", "1", "1", "1", "80.0%"]
    assert _row(out, "errors") == ["1", "0", "0", "0", "100.0%"]
    assert "true positives kept: 4 of 5" in out
    assert "lost: acme+one train.py:20 LINT-AMP-DEPRECATED (not reported)" in out
    assert "unjudged findings: 1" in out
    assert re.search(r"^  acme\+one train\.py:9 LINT-AMP-DEPRECATED \[warning\]", out, re.M)
    assert "2 of 3 repositories linted" in out and "1 missing" in out
    assert "missing (skipped): acme+gone" in out
    assert "Traceback" not in out
    enforce = out.splitlines()[-1]
    assert enforce.startswith("enforce: FAILED")
    for why in ("precision 80.0% < 95.0%", "1 true positive(s) lost", "1 unjudged", "1 repos"):
        assert why in enforce
    assert "errors" not in enforce  # 1 right of 1: errors meet their 99%


def test_enforce_passes_on_a_fully_judged_right_repo(bench, capsys):
    rc, out = _run(bench, capsys, "--repo", "acme+two", "--enforce")
    assert _row(out, "warnings+errors") == ["2", "0", "0", "0", "100.0%"]
    assert "true positives kept: 2 of 2" in out
    assert out.splitlines()[-1] == "enforce: ok"
    assert rc == 0
    # without --enforce the exit status is 0 whatever the precision
    assert _run(bench, capsys)[0] == 0


def test_enforce_fails_on_precision_alone(bench, capsys):
    path = bench / "verdicts" / "acme+two.csv"
    path.write_text(
        path.read_text().replace(
            "3,LINT-AMP-DEPRECATED,warning,right", "3,LINT-AMP-DEPRECATED,warning,wrong"
        )
    )
    rc, out = _run(bench, capsys, "--repo", "acme+two", "--enforce")
    assert _row(out, "warnings+errors") == ["1", "1", "0", "0", "50.0%"]
    assert out.splitlines()[-1] == "enforce: FAILED: precision 50.0% < 95.0%"
    assert rc == 1


def test_errors_precision_is_enforced_at_99(bench, capsys):
    path = bench / "verdicts" / "acme+one.csv"
    text = path.read_text().replace("error,right", "error,wrong")
    path.write_text(
        text.replace("7,LINT-AMP-DEPRECATED,warning,wrong", "7,LINT-AMP-DEPRECATED,warning,right")
    )
    rc, out = _run(bench, capsys, "--repo", "acme+one", "--enforce")
    assert _row(out, "errors") == ["0", "1", "0", "0", "0.0%"]
    assert "errors 0.0% < 99.0%" in out.splitlines()[-1]
    assert rc == 1


def test_unjudged_csv_is_verdict_rows_to_fill(bench, capsys, tmp_path):
    out_csv = tmp_path / "new.csv"
    _run(bench, capsys, "--unjudged-csv", str(out_csv))
    rows = list(csv.DictReader(out_csv.open(encoding="utf-8")))
    assert [list(r) for r in rows] == [FIELDS]  # one row, the verdict columns
    assert [list(r.values()) for r in rows] == [
        ["acme+one", C1, "train.py", "9", AMP, "warning", "", ""]
    ]
    # once judged and appended, nothing is unjudged any more
    with (bench / "verdicts" / "acme+one.csv").open("a", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerow(["acme+one", C1, "train.py", "9", AMP, "warning", "right", "x"])
    assert "unjudged findings: 0" in _run(bench, capsys)[1]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (["acme+one", C1, "train.py", "x", AMP, "warning", "right", ""], "is not a number"),
        (["acme+one", C1, "train.py", "6", AMP, "warning", "maybe", ""], "is not one of"),
        (["acme+one", C2, "train.py", "6", AMP, "warning", "right", ""], "differ from repos.csv"),
        (["acme+one", C1, "train.py", "6", AMP, "warning", "wrong", ""], "a second verdict"),
    ],
)
def test_bad_verdict_file_is_one_line_and_exit_2(bench, capsys, row, message):
    with (bench / "verdicts" / "acme+one.csv").open("a", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerow(row)
    rc, out = _run(bench, capsys, "--enforce")
    assert rc == 2
    assert message in out and len(out.strip().splitlines()) == 1


def test_unknown_repo_is_bad_input(bench, capsys):
    rc, out = _run(bench, capsys, "--repo", "acme+none")
    assert rc == 2 and "acme+none" in out


@pytest.mark.parametrize(
    "listing",
    ["repos.csv", *(f"heldout-{n}.csv" for n in range(1, 23))],
)
def test_the_committed_corpora_and_their_verdicts_read(listing: str) -> None:
    """Every committed list of repositories (the tuning corpus and the held-out ones)
    reads, each repository's verdicts read against its commit, every verdict is given,
    and no repository is in two lists (a held-out one would no longer be held out)."""
    script = _script()
    here = ROOT / "bench" / "lint_corpus"
    repos = script.read_repos(here / listing)
    assert repos
    judged = 0
    for repo in repos:
        verdicts = script.read_verdicts(here / "verdicts", repo)
        assert all(v.verdict for v in verdicts.values()), repo.name
        judged += len(verdicts)
    assert judged > 0
    others = {
        r.name
        for name in ("repos.csv", *(f"heldout-{n}.csv" for n in range(1, 23)))
        if name != listing
        for r in script.read_repos(here / name)
    }
    assert not others & {r.name for r in repos}
