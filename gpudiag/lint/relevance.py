"""Which files the walk can skip: those no rule could find anything in.

Issue 17 asks lint to stay near ``py_compile``'s time on real repositories; about a
quarter of a training repository's files (tests, tokenizers, data and config helpers)
never name torch, the environment or multiprocessing, and walking them cost as much as
walking the training scripts.
"""

from __future__ import annotations

import ast

from gpudiag.lint.facts import Facts

#: What every rule's first fact is spelled with: torch (and its CUDA, AMP, DDP and
#: DataLoader names, through any import of torch), the environment, multiprocessing,
#: a --local_rank option or a LOCAL_RANK read, a module known to initialise CUDA. A
#: file with none of them cannot give a finding, so it is parsed (LINT-PARSE-ERROR) and
#: not walked: about a quarter of a training repository (issue 17: lint's time).
_FIRST_FACTS = (
    "torch",  # first: most files that have any of these have it
    "cuda",  # pycuda too
    "environ",
    "getenv",
    "putenv",
    "multiprocessing",
    "concurrent",
    "local_rank",
    "local-rank",
    "deepspeed",
    "set_epoch",
    "state_dict",
    "half",
)


def might_find(text: str) -> bool:
    """Whether a rule could find anything in ``text`` (see :data:`_FIRST_FACTS`), in any
    case (``LOCAL_RANK``, ``CUDA_VISIBLE_DEVICES``). Plain substring searches: a regular
    expression of these words with IGNORECASE took 0.6 ms a file, more than the walk of
    a small one."""
    if "torch" in text:
        return True  # most training code: no lower-cased copy
    low = text.lower()
    return any(word in low for word in _FIRST_FACTS)


def quiet(tree: ast.Module, lines: list[str]) -> Facts:
    """The facts of a module with nothing for the rules (:func:`might_find`)."""
    facts = Facts(source_lines=lines)
    facts.tree = tree
    return facts
