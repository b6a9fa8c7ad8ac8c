"""Findings: the catalogue of codes (:mod:`.catalog`) and the exact upstream error texts
(:mod:`.texts`).

Kept empty on purpose: each submodule is imported where it is needed, so that
``gpudiag --help`` imports none of them.
"""
