"""Findings: the code catalogue, the exact upstream error texts, and merging."""
