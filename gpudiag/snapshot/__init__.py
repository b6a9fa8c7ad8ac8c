"""Read and write machine snapshots (schema ``gpudiag-snapshot/1``, minor version 1.2).

The schema is documented in ``docs/snapshot.md``. Reading is strict about the
required fields and their types, lenient about unknown extra fields (the schema
may grow), so that an older gpudiag can read a newer snapshot.

Layout: :mod:`.read` (JSON → model, with :mod:`.fields`' validation helpers), :mod:`.write`
(model → JSON), :mod:`.load` (bounded file reading and parsing), :mod:`.redact`.
"""

from __future__ import annotations

# The names other modules import from gpudiag.snapshot.
from gpudiag.snapshot.fields import SnapshotError
from gpudiag.snapshot.load import (
    MAX_NESTING,
    MAX_SNAPSHOT_BYTES,
    load_snapshot,
    parse_snapshot_text,
)
from gpudiag.snapshot.read import (
    gpu_from_json,
    gputil_from_json,
    host_from_json,
    schema_is_readable,
    snapshot_from_json,
    torch_from_json,
)
from gpudiag.snapshot.redact import redact_snapshot
from gpudiag.snapshot.write import (
    dump_snapshot,
    gpu_to_json,
    gputil_to_json,
    host_to_json,
    snapshot_to_json,
    torch_to_json,
)

__all__ = [
    "MAX_NESTING",
    "MAX_SNAPSHOT_BYTES",
    "SnapshotError",
    "dump_snapshot",
    "gpu_from_json",
    "gpu_to_json",
    "gputil_from_json",
    "gputil_to_json",
    "host_from_json",
    "host_to_json",
    "load_snapshot",
    "parse_snapshot_text",
    "redact_snapshot",
    "schema_is_readable",
    "snapshot_from_json",
    "snapshot_to_json",
    "torch_from_json",
    "torch_to_json",
]
