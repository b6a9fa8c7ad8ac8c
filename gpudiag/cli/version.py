"""``gpudiag --version``: gpudiag's version and what it runs with.

A bug report needs the torch build, the NVIDIA driver and the Python beside
gpudiag's own version. None of it imports torch: torch's version and CUDA build
are read from its installed files, the driver's from NVML.
"""

from __future__ import annotations

import platform
import sys

import click

from gpudiag import __version__


def version_lines() -> list[str]:
    """``gpudiag, version X``, then the Python, torch and NVIDIA driver lines."""
    from gpudiag.backends.nvml import collect_nvml
    from gpudiag.backends.torchdist import read_torch_facts
    from gpudiag.render.text import esc

    # The first line keeps click's own format, which scripts may already parse.
    lines = [f"gpudiag, version {__version__}"]
    lines.append(f"Python {platform.python_version()} ({esc(sys.executable)})")
    info, status = read_torch_facts()
    if info is None:
        lines.append(f"torch: {esc(status.reason or status.status)}")
    else:
        build = "CPU-only build" if info.cpu_only else f"CUDA {esc(info.cuda_version)}"
        lines.append(f"torch {esc(info.version)} ({build})")
    nvml = collect_nvml()
    if nvml.status.status == "ok":
        lines.append(
            f"NVIDIA driver {esc(nvml.driver_version or '?')} "
            f"(CUDA {esc(nvml.cuda_driver_version or '?')})"
        )
    else:
        lines.append(f"NVIDIA driver: none ({esc(nvml.status.reason or nvml.status.status, 200)})")
    return lines


def print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """The ``--version`` callback: print and exit 0."""
    if not value or ctx.resilient_parsing:
        return
    click.echo("\n".join(version_lines()))
    ctx.exit(0)
