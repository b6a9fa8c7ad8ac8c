"""ruff's conventions in ``gpudiag lint`` (issue 17, build item 4): a suppression acts on
its own line only, and a code it names that is no lint code is reported."""

from __future__ import annotations

import pytest

from gpudiag.lint import lint_source


def _found(text: str) -> list[tuple[int, str]]:
    return [(f.line, f.finding.code) for f in lint_source(text)]


def test_a_suppression_on_another_line_does_not_silence_a_finding() -> None:
    text = (
        "import torch\n"
        "x = 1\n"
        "scaler = torch.cuda.amp.GradScaler()\n"
        "y = 2\n"
        "z = 3  # gpudiag: ignore[LINT-AMP-DEPRECATED]\n"
    )
    assert _found(text) == [(3, "LINT-AMP-DEPRECATED")]


def test_a_suppression_silences_only_its_own_line_of_two_alike() -> None:
    text = (
        "import torch\n"
        "a = torch.cuda.amp.GradScaler()  # gpudiag: ignore[LINT-AMP-DEPRECATED]\n"
        "b = torch.cuda.amp.GradScaler()\n"
    )
    assert _found(text) == [(3, "LINT-AMP-DEPRECATED")]


def test_a_misspelled_code_is_reported_and_suppresses_nothing() -> None:
    text = "import torch\nscaler = torch.cuda.amp.GradScaler()  # gpudiag: ignore[LINT-AMP-DEPRECATD]\n"
    findings = lint_source(text)
    assert [(f.line, f.finding.code, f.finding.severity) for f in findings] == [
        (2, "LINT-AMP-DEPRECATED", "warning"),
        (2, "LINT-IGNORE-UNKNOWN-CODE", "warning"),
    ]
    unknown = findings[1]
    assert unknown.col == text.splitlines()[1].index("#") + 1
    assert "LINT-AMP-DEPRECATD" in unknown.finding.message


def test_each_unknown_code_is_reported_and_the_known_one_still_suppresses() -> None:
    text = (
        "import torch\n"
        "s = torch.cuda.amp.GradScaler()  # gpudiag: ignore[lint-amp-deprecated, NOPE, DP-X]\n"
    )
    findings = lint_source(text)
    assert [f.finding.code for f in findings] == ["LINT-IGNORE-UNKNOWN-CODE"] * 2
    assert ["DP-X" in findings[0].finding.message, "NOPE" in findings[1].finding.message] == [
        True,
        True,
    ]


@pytest.mark.parametrize(
    "comment",
    [
        "# gpudiag: ignore",
        "# gpudiag: ignore[LINT-AMP-DEPRECATED]",
        "# gpudiag: ignore[",
        "# gpudiag: ignore[NOPE",
        "# gpudiag: ignore[NOPE LINT-X]",
        "# gpudiag: ignored",
    ],
)
def test_no_unknown_code_warning_for_a_bare_known_or_malformed_comment(comment: str) -> None:
    text = f"import torch\nx = 1  {comment}\n"
    assert _found(text) == []


def test_the_unknown_code_warning_can_itself_be_suppressed() -> None:
    text = "x = 1  # gpudiag: ignore[NOPE, LINT-IGNORE-UNKNOWN-CODE]\n"
    assert _found(text) == []
