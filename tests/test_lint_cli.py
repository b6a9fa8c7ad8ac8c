"""``gpudiag lint``: output formats, exit codes, suppressions, bad input, --check, speed."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.lint import lint_paths, lint_source
from gpudiag.model import Snapshot, TorchDevice

from .conftest import fixture_path, load_fixture

CASES = Path(__file__).resolve().parent / "fixtures" / "lint"

SEED = """\
import os
os.environ["CUDA_VISIBLE_DEVICES"] = "1,2"
import torch
import torch.nn as nn

model = nn.Linear(10, 10).cuda()
model = nn.DataParallel(model, device_ids=[1, 2])
"""


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _script(tmp_path: Path, text: str, name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_compiler_style_lines_fit_100_columns(tmp_path: Path) -> None:
    path = _script(tmp_path, SEED)
    code, out, err = _run("lint", str(path))
    assert code == 1 and err == ""
    assert out.splitlines()[0].startswith(f"{path}:7:9: LINT-IDS-UNDER-MASK [error] ")
    assert "    predicts: AssertionError: Invalid device id" in out
    assert "device_ids=[0,1]" in out
    assert all(len(line) <= 100 for line in out.splitlines() if not line.startswith(str(path)))
    assert out.rstrip().splitlines()[-1] == "FAILED: 1 error, 0 warnings, 0 info (1 file checked)"


def test_json_has_checks_document_shape(tmp_path: Path) -> None:
    path = _script(tmp_path, SEED)
    code, out, _ = _run("lint", str(path), "--json")
    doc = json.loads(out)
    # Every key of `check --json`, taken from check itself so the shapes cannot drift.
    from gpudiag.core.check import run_check

    from .conftest import load_fixture

    check_keys = set(run_check(load_fixture("a100x8")).to_json())
    assert check_keys <= set(doc), check_keys - set(doc)
    assert doc["schema"] == "gpudiag-lint/1" and doc["ok"] is False and code == 1
    assert doc["counts"] == {"error": 1, "warning": 0, "info": 0}
    (finding,) = doc["findings"]
    assert {"code", "severity", "message", "fix", "predicts", "subject"} <= set(finding)
    assert (finding["path"], finding["line"], finding["col"]) == (str(path), 7, 9)


def test_clean_script_exits_0(tmp_path: Path) -> None:
    path = _script(tmp_path, "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n")
    code, out, _ = _run("lint", str(path))
    assert code == 0
    assert out.strip() == "OK: 0 errors, 0 warnings, 0 info (1 file checked)"


def test_strict_counts_warnings(tmp_path: Path) -> None:
    path = _script(tmp_path, "import torch\nscaler = torch.cuda.amp.GradScaler()\n")
    assert _run("lint", str(path))[0] == 0
    code, out, _ = _run("lint", str(path), "--strict")
    assert code == 1 and "FAILED (--strict, warnings count)" in out


@pytest.mark.parametrize(
    ("comment", "suppressed"),
    [
        ("# gpudiag: ignore[LINT-AMP-DEPRECATED]", True),
        ("# gpudiag: ignore[LINT-SCALER-BF16, LINT-AMP-DEPRECATED]", True),
        ("# gpudiag: ignore", True),
        ("# gpudiag: ignore[LINT-SCALER-BF16]", False),
        ("# noqa", False),
    ],
)
def test_per_line_suppression(comment: str, suppressed: bool) -> None:
    text = f"import torch\nscaler = torch.cuda.amp.GradScaler()  {comment}\n"
    codes = [f.finding.code for f in lint_source(text)]
    assert codes == ([] if suppressed else ["LINT-AMP-DEPRECATED"])


def test_missing_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    code, out, err = _run("lint", str(tmp_path / "nope.py"))
    assert code == 2 and out == ""
    assert err == f"gpudiag: error: no such file or folder: '{tmp_path / 'nope.py'}'\n"


def test_no_path_is_exit_2() -> None:
    code, out, err = _run("lint")
    assert code == 2 and out == "" and err.startswith("gpudiag: error:")


def test_syntax_error_is_a_finding_and_the_folder_goes_on(tmp_path: Path) -> None:
    _script(tmp_path, "def broken(:\n    pass\n", "a_broken.py")
    _script(tmp_path, SEED, "b_seed.py")
    code, out, _ = _run("lint", str(tmp_path), "--json")
    doc = json.loads(out)
    assert code == 1
    got = [(Path(f["path"]).name, f["line"], f["code"]) for f in doc["findings"]]
    assert got == [("a_broken.py", 1, "LINT-PARSE-ERROR"), ("b_seed.py", 7, "LINT-IDS-UNDER-MASK")]


def test_non_utf8_is_a_parse_error_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "latin.py"
    path.write_bytes(b"x = '\xe9'\n")
    code, out, err = _run("lint", str(path))
    assert code == 1 and err == ""
    assert "LINT-PARSE-ERROR" in out and "utf-8" in out.lower()


def test_a_declared_encoding_is_honoured(tmp_path: Path) -> None:
    path = tmp_path / "latin.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\nx = '\xe9'\n")
    assert _run("lint", str(path))[0] == 0


def test_folders_skip_hidden_and_venvs(tmp_path: Path) -> None:
    (tmp_path / ".venv" / "lib").mkdir(parents=True)
    _script(tmp_path / ".venv" / "lib", SEED, "bad.py")
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "pyvenv.cfg").write_text("")
    _script(tmp_path / "env", SEED, "bad.py")
    _script(tmp_path, "x = 1\n", "ok.py")
    report = lint_paths([str(tmp_path)])
    assert [Path(f).name for f in report.files] == ["ok.py"]


def test_terminal_escapes_in_paths_and_values(tmp_path: Path) -> None:
    name = "evil\x1b[31m.py"
    path = _script(tmp_path, SEED.replace('"1,2"', '"1,2\\x1b[2J"'), name)
    _, out, _ = _run("lint", str(path), "--check", "--snapshot", str(fixture_path("a100x8")))
    assert "\x1b" not in out
    assert "evil\\x1b[31m.py" in out


def test_explain() -> None:
    code, out, _ = _run("lint", "--explain", "lint-set-epoch-constant")
    assert code == 0 and out.startswith("LINT-SET-EPOCH-CONSTANT: ")
    assert _run("lint", "--explain", "NOPE")[0] == 2


# ------------------------------------------------------------------ --check


def test_check_feeds_the_issue_example_to_the_dataparallel_validator(tmp_path: Path) -> None:
    path = _script(tmp_path, SEED)
    code, out, _ = _run(
        "lint", str(path), "--check", "--snapshot", str(fixture_path("a100x8")), "--json"
    )
    doc = json.loads(out)
    assert code == 1
    assert doc["cuda_visible_devices"] == "1,2"
    assert [v["nvml_index"] for v in doc["visible"]] == [1, 2]
    assert doc["checks"][:3] == ["lint", "environment", "dataparallel"]
    at_dp = [f for f in doc["findings"] if f["line"] == 7]
    codes = [f["code"] for f in at_dp]
    # the validator's finding replaces the lint rule's, which predicts the same error
    assert "DP-INVALID-DEVICE-ID" in codes and "LINT-IDS-UNDER-MASK" not in codes
    invalid = next(f for f in at_dp if f["code"] == "DP-INVALID-DEVICE-ID")
    assert invalid["predicts"] == "AssertionError: Invalid device id"
    assert "device_ids=[0,1]" in invalid["fix"]


def test_snapshot_without_check_is_bad_input(tmp_path: Path) -> None:
    path = _script(tmp_path, SEED)
    assert _run("lint", str(path), "--snapshot", str(fixture_path("a100x8")))[0] == 2


def _v100_machine() -> Snapshot:
    base = load_fixture("a100x8")
    gpus = tuple(
        replace(g, name="Tesla V100-SXM2-16GB", compute_capability="7.0") for g in base.gpus
    )
    torch_info = base.torch
    assert torch_info is not None
    devices = tuple(
        TorchDevice(d.cuda_ordinal, "Tesla V100-SXM2-16GB", d.uuid, 16160, 80, "7.0")
        for d in torch_info.devices
    )
    return replace(base, gpus=gpus, torch=replace(torch_info, devices=devices))


BF16 = """\
import torch

model = torch.nn.Linear(8, 8).cuda()
with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
    y = model(torch.randn(2, 8, device="cuda"))
"""


@pytest.mark.parametrize(("machine", "flagged"), [("v100", True), ("a100", False)])
def test_check_bf16_autocast_on_a_v100(tmp_path: Path, machine: str, flagged: bool) -> None:
    snap = _v100_machine() if machine == "v100" else load_fixture("a100x8")
    path = _script(tmp_path, BF16)
    report = lint_paths([str(path)], snapshot=snap, env={})
    at_autocast = [f.finding.code for f in report.findings if f.line == 4]
    assert ("HEALTH-AMP-BF16" in at_autocast) is flagged


def test_check_set_device_and_backend_reach_their_lines(tmp_path: Path) -> None:
    text = (
        "import torch\nimport torch.distributed as dist\n"
        "torch.cuda.set_device(9)\n"
        "dist.init_process_group('nccl')\n"
    )
    path = _script(tmp_path, text)
    report = lint_paths([str(path)], snapshot=load_fixture("no_driver"), env={})
    lines = {f.finding.code: f.line for f in report.findings}
    assert lines.get("DP-SET-DEVICE-INVALID") == 3 or lines.get("DP-NO-VISIBLE-GPU") == 3
    assert any(code.startswith("DDP-") and line == 4 for code, line in lines.items())
    assert "ddp" in report.to_json()["checks"]  # type: ignore[operator]


# ------------------------------------------------------------------ weight


_NO_HEAVY = """
import sys
from gpudiag.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("HEAVY=" + ",".join(sorted(m for m in ("torch", "pynvml", "GPUtil", "numpy")
                                 if m in sys.modules)))
"""


@pytest.mark.parametrize(
    "args",
    [
        ["lint", "--help"],
        ["lint", str(CASES)],
        ["lint", str(CASES), "--json"],
        ["lint", str(CASES / "pos_scaler_bf16.py.txt"), "--check", "--snapshot", "{F}"],
    ],
)
def test_lint_imports_neither_torch_nor_pynvml(args: list[str]) -> None:
    argv = [a.replace("{F}", str(fixture_path("a100x8"))) for a in args]
    proc = subprocess.run(
        [sys.executable, "-c", _NO_HEAVY, *argv], capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.strip().splitlines()[-1] == "HEAVY=", proc.stdout + proc.stderr


def test_a_2000_line_script_is_linted_without_blowing_up() -> None:
    # Guards against quadratic walks; the real figure is bench/bench_lint.py's.
    import time

    blocks = [
        p.read_text() for p in sorted(CASES.glob("pos_*.py.txt")) if "broken(" not in p.read_text()
    ]
    lines: list[str] = ["import torch"]
    i = 0
    while len(lines) < 2000:
        lines.append(f"def block_{i}():")
        lines += ["    " + line for line in blocks[i % len(blocks)].splitlines()]
        i += 1
    lines += ["def main():", *[f"    block_{k}()" for k in range(i)]]
    text = "\n".join(lines) + "\n"
    start = time.perf_counter()
    findings = lint_source(text)
    assert time.perf_counter() - start < 2.0
    assert findings
