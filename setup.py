"""Packaging glue that pyproject.toml cannot express: ship the finding docs.

``gpudiag explain CODE`` prints a section of ``docs/findings.md``; the wheel
carries a copy as ``gpudiag/_docs/findings.md`` (one source: the docs folder).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DOCS = ("findings.md",)


class BuildPyWithDocs(build_py):  # type: ignore[misc]
    """build_py, plus the docs copied into the built package."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads docs/ from the checkout
            return
        target = Path(self.build_lib, "gpudiag", "_docs")
        target.mkdir(parents=True, exist_ok=True)
        for name in DOCS:
            shutil.copyfile(Path(__file__).parent / "docs" / name, target / name)


setup(cmdclass={"build_py": BuildPyWithDocs})
