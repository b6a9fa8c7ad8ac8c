"""The first screen: widths, wrapping, -q/-v, colour, and a terminal-safe output."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import main
from gpudiag.model import Finding
from gpudiag.render.findings import render_findings
from gpudiag.render.progress import Progress
from gpudiag.render.text import Style, colour_wanted, esc, safe, shorten, wrap

from .conftest import fixture_path

FIXTURES = ["a100x8", "mixed4", "a100_mig", "gpu_lost", "no_driver"]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _run(args: list[str], columns: int, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, args, env={"COLUMNS": str(columns), **(env or {})})
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, result.stdout


def _widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["list", "-v"],
        ["list", "--visible", "1,0"],
        ["check"],
        ["check", "-v", "--device-ids", "all"],
        ["check", "--device-ids", "1,2,3", "--nproc-per-node", "8"],
    ],
    ids=" ".join,
)
def test_fits_100_columns(fixture: str, args: list[str]) -> None:
    _, out = _run([*args, "--snapshot", str(fixture_path(fixture))], 100)
    assert _widest(out) <= 100, out


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("command", ["list", "check"])
def test_quiet_fits_80_columns(fixture: str, command: str) -> None:
    _, out = _run([command, "-q", "--snapshot", str(fixture_path(fixture))], 80)
    assert _widest(out) <= 80, out


def test_list_a100x8_first_screen() -> None:
    _, out = _run(["list", "--snapshot", str(fixture_path("a100x8"))], 100)
    header = out.splitlines()[0].split()
    assert header == ["GPU", "CUDA", "Name", "Bus", "Memory", "Util", "Temp", "Procs"]
    # Every source saw every GPU: no "Seen by" column; no UUIDs without -v.
    assert "Seen by" not in out and "GPU-9942190a" not in out
    row3 = next(line for line in out.splitlines() if line.startswith("3 "))
    assert row3.split()[-1] == "1"  # one process on GPU 3
    _, verbose = _run(["list", "-v", "--snapshot", str(fixture_path("a100x8"))], 100)
    assert "GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1" in verbose


def test_seen_by_only_where_sources_disagree(tmp_path: Path) -> None:
    doc = json.loads(fixture_path("a100x8").read_text())
    doc["gputil"] = doc["gputil"][:-1]  # GPUtil misses GPU 7
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    _, out = _run(["list", "--snapshot", str(path)], 100)
    assert "Seen by" in out.splitlines()[0]
    rows = [line for line in out.splitlines()[2:10]]
    assert rows[7].rstrip().endswith("nvml,torch")
    assert not rows[0].rstrip().endswith("gputil")  # agreeing rows stay blank


def test_quiet_is_verdict_and_errors() -> None:
    code, out = _run(
        ["check", "-q", "--snapshot", str(fixture_path("a100x8")), "--visible", "1,2",
         "--device-ids", "1,2"], 80)  # fmt: skip
    assert code == 1
    assert out.splitlines()[0] == "Errors (1):"
    assert out.splitlines()[-1].startswith("FAILED: 1 error")
    assert "Warnings" not in out and "Info" not in out and "cuda:0 →" not in out


def test_quiet_and_verbose_together_is_bad_input() -> None:
    result = CliRunner().invoke(main, ["list", "-q", "-v"])
    assert result.exit_code == 2
    assert "cannot be used together" in result.stderr


def test_colour_only_on_a_tty_without_no_color() -> None:
    assert colour_wanted(True, {}) is True
    assert colour_wanted(True, {"NO_COLOR": "1"}) is False
    assert colour_wanted(True, {"NO_COLOR": ""}) is True  # no-color.org: set and non-empty
    assert colour_wanted(False, {}) is False
    finding = Finding(code="VIS-DUPLICATE", severity="error", message="dup", fix="fix it")
    coloured = render_findings([finding], Style(colour=True))
    assert "\x1b[1;31mVIS-DUPLICATE\x1b[0m" in coloured
    assert ANSI.sub("", coloured) == render_findings([finding], Style(colour=False))
    # Not a terminal (CliRunner): never colour.
    _, out = _run(["check", "--snapshot", str(fixture_path("mixed4"))], 100)
    assert "\x1b[" not in out


def test_findings_wrap_with_a_hanging_indent() -> None:
    message = "word " * 60
    text = render_findings([Finding(code="VIS-ORDER-MIXED", severity="warning", message=message, fix="f " * 50)],
                           Style(width=60))  # fmt: skip
    lines = text.splitlines()
    assert lines[0] == "Warnings (1):"
    assert lines[1].startswith("  VIS-ORDER-MIXED: word")
    assert all(line.startswith("      ") for line in lines[2:] if "fix:" not in line
               and not line.startswith("        "))  # fmt: skip
    assert all(len(line) <= 60 for line in lines)
    fix = [i for i, line in enumerate(lines) if line.startswith("    fix: ")]
    assert fix and lines[fix[0] + 1].startswith("        f")


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_each_gpu_named_once(json_flag: list[str]) -> None:
    # The core words "GPU 3", not "GPU 3 (nvidia-smi index 3)" for a renderer to
    # rewrite (issue 16): human output and JSON say the same.
    for command in (["list"], ["check", "--device-ids", "0,1"]):
        args = [*command, "--snapshot", str(fixture_path("a100_mig")), "-v", *json_flag]
        _, out = _run(args, 100)
        assert "(nvidia-smi index" not in out and "GPU 0" in out, command


# --- a safe terminal (issue 11, item 5) -----------------------------------------


def test_escape_and_shorten() -> None:
    assert esc("A100\x1b]0;pwned\x07\nGPU 9") == "A100\\x1b]0;pwned\\x07\\nGPU 9"
    assert esc("a\u202eb\x85c") == "a\\u202eb\\x85c"
    long = "9" * 500
    assert shorten(long) == "9" * 68 + "…[500 chars]"
    assert len(shorten(long)) == 80
    assert safe(f"value '{long}' is bad") == f"value '{'9' * 67}…[502 chars] is bad"
    assert wrap("", 80) == [""]


def test_hostile_snapshot_strings_are_escaped(tmp_path: Path) -> None:
    doc = json.loads(fixture_path("a100x8").read_text())
    doc["gpus"][0]["name"] = "A100\x1b]0;owned\x07\n7      7       FORGED ROW"
    doc["gpus"][1]["pci_bus_id"] = "00000000:0F:00.0\x1b[2J"
    doc["gpus"][3]["processes"][0]["name"] = "evil\rproc"
    doc["env"]["CUDA_VISIBLE_DEVICES"] = "0,\x1b[31m1," + "2" * 300
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    for args in (["list", "-v"], ["check", "-v"], ["list", "-q"]):
        _, out = _run([*args, "--snapshot", str(path)], 100)
        assert "\x1b" not in out and "\x07" not in out and "\r" not in out, args
        assert "FORGED ROW" not in out or "\\nFORGED" in out or "\\n7" in out
        assert _widest(out) <= 100
    _, out = _run(["list", "-v", "--snapshot", str(path)], 100)
    assert "A100\\x1b]0;owned\\x07\\n7" in out  # in full under -v (UUIDs block: no)
    assert "chars]" in out  # the 300-digit value is shortened, its length said


def test_error_lines_are_escaped_and_short() -> None:
    result = CliRunner().invoke(main, ["check", "--expect-gpus", "\x1b[2J" + "7" * 5000])
    assert result.exit_code == 2
    assert "\x1b" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert len(result.stderr) < 300


# --- probe progress -------------------------------------------------------------


def test_progress_lines_per_stage() -> None:
    stream = io.StringIO()
    ticks = iter(range(100))
    progress = Progress(stream, live=False, clock=lambda: float(next(ticks)))
    progress.begin(["ddp", "single"], "cpu", 2)
    for rank in (0, 1):
        progress.event(rank, {"ev": "ready"})
        progress.event(rank, {"ev": "start", "probe": "ddp"})
        progress.event(rank, {"ev": "stage", "probe": "ddp", "stage": "connect store"})
        progress.event(rank, {"ev": "stage", "probe": "ddp", "stage": "train epoch 0 step 1"})
        progress.event(rank, {"ev": "stage", "probe": "ddp", "stage": "train epoch 0 step 2"})
    progress.event(0, {"ev": "result", "probe": "ddp", "result": {"status": "pass"}})
    progress.end()
    lines = [line.split("] ", 1)[1] for line in stream.getvalue().splitlines()]
    assert lines == [
        "starting ddp, single on cpu: 2 worker(s), importing torch…",
        "ready: 1/2 worker(s) imported torch",
        "ddp: started",
        "ddp: rendezvous (connect store)",
        "ddp: training (train epoch 0 step 1)",
        "ready: 2/2 worker(s) imported torch",
        "ddp: pass",
    ]


def test_progress_live_line_is_rewritten_in_place() -> None:
    stream = io.StringIO()
    progress = Progress(stream, live=True, width=40, clock=lambda: 0.0)
    progress.begin(["single"], "cpu", 1)
    progress.event(0, {"ev": "stage", "probe": "single", "stage": "train \x1b[2J" + "x" * 90})
    progress.end()
    text = stream.getvalue()
    assert "\n" not in text
    chunks = text.split("\r\x1b[K")
    assert chunks[-1] == ""  # cleared at the end
    assert all(len(c) <= 39 for c in chunks)
    assert "\x1b[2J" not in text
