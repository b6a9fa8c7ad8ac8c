"""Issue 17, the held-out corpus: values bound in the arms of an ``if``.

The walker runs both arms of an ``if`` one after the other, so the values a later call
sees may come from arms no run takes together. Each script is a minimal reproduction
of a pattern met in public training repositories nobody here wrote (NVIDIA's Tacotron2
``train.py`` chose its sampler and ``shuffle`` per arm and was a false error)."""

from __future__ import annotations

import textwrap

import pytest

from gpudiag.lint import lint_source

_HEAD = """\
from torch.utils.data import DataLoader, DistributedSampler

def make(ds, distributed):
"""


def _shuffle(body: str) -> list[str]:
    text = _HEAD + textwrap.indent(textwrap.dedent(body), "    ")
    return [
        f.finding.severity for f in lint_source(text) if f.finding.code == "LINT-SAMPLER-SHUFFLE"
    ]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # the sampler and shuffle chosen together, per arm (Tacotron2): no run has both
        (
            """
            if distributed:
                sampler = DistributedSampler(ds)
                shuffle = False
            else:
                sampler = None
                shuffle = True
            return DataLoader(ds, shuffle=shuffle, sampler=sampler)
            """,
            [],
        ),
        # the same, arms the other way round
        (
            """
            if not distributed:
                sampler = None
                shuffle = True
            else:
                sampler = DistributedSampler(ds)
                shuffle = False
            return DataLoader(ds, shuffle=shuffle, sampler=sampler)
            """,
            [],
        ),
        # shuffle=True only in the arm that makes no sampler
        (
            """
            shuffle = False
            sampler = None
            if distributed:
                sampler = DistributedSampler(ds)
            else:
                shuffle = True
            return DataLoader(ds, shuffle=shuffle, sampler=sampler)
            """,
            [],
        ),
        # sampler=None is no sampler: DataLoader accepts it with shuffle=True
        (
            """
            sampler = None
            return DataLoader(ds, shuffle=True, sampler=sampler)
            """,
            [],
        ),
        # shuffle=True whatever the arm: the distributed arm's sampler meets it
        (
            """
            if distributed:
                sampler = DistributedSampler(ds)
            else:
                sampler = None
            return DataLoader(ds, shuffle=True, sampler=sampler)
            """,
            ["warning"],
        ),
        (
            """
            sampler = DistributedSampler(ds) if distributed else None
            return DataLoader(ds, shuffle=True, sampler=sampler)
            """,
            ["error"],
        ),
        (
            """
            sampler = DistributedSampler(ds)
            return DataLoader(ds, shuffle=True, sampler=sampler)
            """,
            ["error"],
        ),
        (
            """
            return DataLoader(ds, shuffle=True, sampler=DistributedSampler(ds))
            """,
            ["error"],
        ),
    ],
)
def test_sampler_shuffle_only_where_one_run_has_both(body: str, expected: list[str]) -> None:
    assert _shuffle(body) == expected
