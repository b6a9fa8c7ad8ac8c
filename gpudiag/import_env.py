"""The environment as it was when gpudiag was first imported.

``gpudiag/__init__.py`` imports this module, so its values are captured at the
package's first import; :mod:`gpudiag.api` (loaded only on first use) reads
them from here rather than from the package, which would be an import cycle.
"""

from __future__ import annotations

import os

#: ``CUDA_VISIBLE_DEVICES`` when gpudiag was first imported: the guard's best
#: guess at the value CUDA was initialised with, should a script change it later.
#: Captured here, not in ``gpudiag.api``, which loads only on first use.
CVD_AT_IMPORT: str | None = os.environ.get("CUDA_VISIBLE_DEVICES")
