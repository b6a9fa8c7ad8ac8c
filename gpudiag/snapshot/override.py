"""``GPUDIAG_SNAPSHOT_OVERRIDE``: facts given to ``gpudiag snapshot`` instead of collected.

For emulated clusters (several ``slurmd -N nodeN`` on one host, issue 19) and tests: a
JSON object whose keys replace the document's top-level keys, objects merged one level
deep (``{"hostname": "node2", "node": {"boot_id": "…"}}``). The result is validated as
any snapshot is, and ``sources.override`` records which keys were given, so an
overridden snapshot never passes for a collected one.
"""

from __future__ import annotations

import json
from typing import Any

from gpudiag.model import Snapshot
from gpudiag.snapshot.fields import SnapshotError
from gpudiag.snapshot.read import snapshot_from_json
from gpudiag.snapshot.write import snapshot_to_json

ENV = "GPUDIAG_SNAPSHOT_OVERRIDE"
#: The longest override read (a variable, so Linux allows at most 128 KiB anyway).
MAX_CHARS = 1 << 20


def apply_override(snap: Snapshot, text: str) -> Snapshot:
    """``snap`` with the override's facts; SnapshotError (exit 2) for a bad override."""
    if len(text) > MAX_CHARS:
        raise SnapshotError(f"{ENV} is longer than {MAX_CHARS} characters")
    try:
        patch = json.loads(text)
    except ValueError:
        raise SnapshotError(f"{ENV} is not valid JSON") from None
    if not isinstance(patch, dict) or not patch:
        raise SnapshotError(f"{ENV} must be a non-empty JSON object")
    doc: dict[str, Any] = snapshot_to_json(snap)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = {**doc[key], **value}
        else:
            doc[key] = value
    keys = ", ".join(sorted(str(k) for k in patch))
    doc["sources"] = {
        **(doc.get("sources") or {}),
        "override": {"status": "ok", "reason": f"{ENV} gave: {keys}"},
    }
    try:
        return snapshot_from_json(doc)
    except SnapshotError as exc:
        raise SnapshotError(f"{ENV} makes an invalid snapshot: {exc}") from None
