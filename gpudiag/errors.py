"""Exceptions that the command line turns into a one-line message and exit 2."""

from __future__ import annotations


class GpudiagInputError(ValueError):
    """Bad input from the user (an option value, an environment value, a file)."""
