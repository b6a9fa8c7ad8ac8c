"""Findings: the catalogue of codes (:mod:`.catalog`) and what belongs with them.

Kept empty on purpose: each submodule is imported where it is needed, so that
``gpudiag --help`` imports none of them.
"""
