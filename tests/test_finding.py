"""Finding: frozen and keyword-only, at home in gpudiag/findings/ (issue 16)."""

from __future__ import annotations

import dataclasses

import pytest

from gpudiag import model
from gpudiag.findings.finding import Finding


def test_fields_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        Finding("DP-DEVICES", "info", "m")  # type: ignore[misc]
    f = Finding(code="DP-DEVICES", severity="info", message="m", predicts="p")
    assert (f.fix, f.predicts, f.subject, f.predicts_also) == (None, "p", None, ())


def test_frozen_and_one_class() -> None:
    f = Finding(code="DP-DEVICES", severity="info", message="m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.code = "X"  # type: ignore[misc]
    assert model.Finding is Finding  # every layer's import names the same class
