"""Packaging glue that pyproject.toml cannot express: ship the documentation.

``gpudiag explain CODE`` prints a section of ``docs/findings.md`` and ``gpudiag docs
TOPIC`` a whole page; the wheel carries the user pages as ``gpudiag/_docs/*.md`` (one
source: the docs folder; development.md stays in the checkout).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DOCS_DIR = Path(__file__).parent / "docs"
#: Checkout-only pages (gpudiag/findings_doc.py DEVELOPER_PAGES says the same).
DEVELOPER_PAGES = ("development.md",)


class BuildPyWithDocs(build_py):  # type: ignore[misc]
    """build_py, plus the docs copied into the built package."""

    def run(self) -> None:
        super().run()
        if getattr(
            self, "editable_mode", False
        ):  # an editable install reads docs/ from the checkout
            return
        target = Path(self.build_lib, "gpudiag", "_docs")
        target.mkdir(parents=True, exist_ok=True)
        for page in sorted(DOCS_DIR.glob("*.md")):
            if page.name not in DEVELOPER_PAGES:
                shutil.copyfile(page, target / page.name)


setup(cmdclass={"build_py": BuildPyWithDocs})
