"""Child program: print GPUtil's view as one JSON line.

GPUtil runs ``nvidia-smi`` without a timeout and swallows its failures, so it
runs here, in a child the parent can time out and kill.
"""

from __future__ import annotations

import json
import shutil
import sys
from typing import Any


def _query() -> dict[str, Any]:
    if shutil.which("nvidia-smi") is None:
        # GPUtil would catch the failed Popen and return [] — indistinguishable
        # from "zero GPUs" — so say it first.
        return {"no_smi": True}
    try:
        import GPUtil
    except Exception as exc:  # ModuleNotFoundError: distutils on Python >= 3.12, etc.
        return {"import_error": f"{type(exc).__name__}: {exc}"}
    try:
        gpus = GPUtil.getGPUs()
    except Exception as exc:  # nvidia-smi printed an error GPUtil cannot parse
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "gpus": [
            {
                "gputil_id": int(g.id),
                "uuid": g.uuid,
                "name": g.name,
                "memory_total_mib": _int(g.memoryTotal),
                "memory_used_mib": _int(g.memoryUsed),
                "load_percent": None if _nan(g.load) else round(float(g.load) * 100.0, 1),
                "temperature_c": None if _nan(g.temperature) else float(g.temperature),
            }
            for g in gpus
        ]
    }


def _nan(value: Any) -> bool:
    try:
        return bool(value != value)
    except Exception:
        return True


def _int(value: Any) -> int | None:
    return None if _nan(value) else int(value)


def main() -> int:
    """Print the JSON line."""
    sys.stdout.write(json.dumps(_query()) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
