"""Which files the walk can skip: those no rule could find anything in.

Issue 17 asks lint to stay near ``py_compile``'s time on real repositories; about a
quarter of a training repository's files (tests, tokenizers, data and config helpers)
never name torch, the environment or multiprocessing, and walking them cost as much as
walking the training scripts.
"""

from __future__ import annotations

import ast
import re

from gpudiag.lint.facts import Facts

#: What every rule's first fact is spelled with: torch (and its CUDA, AMP, DDP and
#: DataLoader names, through any import of torch), the environment, multiprocessing,
#: a --local_rank option or a LOCAL_RANK read, a module known to initialise CUDA. A
#: file with none of them cannot give a finding, so it is parsed (LINT-PARSE-ERROR) and
#: not walked: about a quarter of a training repository (issue 17: lint's time).
_FIRST_FACTS = re.compile(
    r"torch|cuda|environ|getenv|putenv|multiprocessing|concurrent|local.rank|pycuda"
    r"|deepspeed|set_epoch|state_dict|half",
    re.IGNORECASE,
)


def might_find(text: str) -> bool:
    """Whether a rule could find anything in ``text`` (see :data:`_FIRST_FACTS`)."""
    return _FIRST_FACTS.search(text) is not None


def quiet(tree: ast.Module, lines: list[str]) -> Facts:
    """The facts of a module with nothing for the rules (:func:`might_find`)."""
    facts = Facts(source_lines=lines)
    facts.tree = tree
    return facts
