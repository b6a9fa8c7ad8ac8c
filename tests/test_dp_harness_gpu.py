"""Real ``nn.DataParallel`` on real GPUs versus gpudiag (auto-skipped without a GPU)."""

from __future__ import annotations

import pytest

from .gpu_harness.dp_harness import run_grid


@pytest.mark.gpu
def test_dataparallel_on_real_gpus_matches_prediction() -> None:
    rows = run_grid()
    assert len(rows) > 0
    mismatches = [(r.visible, r.case, r.predicted, r.actual) for r in rows if not r.match]
    assert mismatches == []
