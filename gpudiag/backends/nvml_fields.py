"""Per-field failure isolation for the NVML backends (:mod:`.nvml`, :mod:`.nvml_links`).

One field that NVML cannot answer records its reason and stays None; a GPU that
falls off the bus (``NVMLError_GpuIsLost``) stops its own queries, nobody else's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


class GpuLostError(Exception):
    """Internal: stop querying a GPU that fell off the bus."""


@dataclass
class Fields:
    """Accumulates one GPU's (or one pair's) fields and per-field errors."""

    nvml: Any
    errors: dict[str, str] = field(default_factory=dict)

    def get(self, name: str, fn: Callable[[], T]) -> T | None:
        try:
            return fn()
        except self.nvml.NVMLError_GpuIsLost:
            self.errors[name] = "GPU is lost"
            raise GpuLostError() from None
        except self.nvml.NVMLError as exc:
            self.errors[name] = error_text(exc)
            return None


def error_text(exc: BaseException) -> str:
    """NVML's text for an error (``Not Supported``), or the class name when it has none."""
    text = str(exc).strip()
    return text or type(exc).__name__


def as_text(value: object) -> str:
    """A value NVML returns as bytes or str, as str."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)
