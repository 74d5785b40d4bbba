"""Stored grid sizes: each grid suite's number of feasible configurations, kept in ``counts.json`` so that
``annette bench --list`` need not enumerate grids of millions of configurations (seconds) to show them.

Each entry carries a fingerprint of what the count depends on besides the cost formulas (the parameter
space and the size caps): a suite whose space or caps changed is counted by enumeration until the file is
regenerated (``python scripts/suite_counts.py``); a test keeps every stored count equal to the enumeration.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = ["COUNTS_FILE", "fingerprint", "stored_count"]

#: the stored counts: suite name -> {"fingerprint": ..., "count": ...}
COUNTS_FILE = Path(__file__).with_name("counts.json")


def fingerprint(space: Mapping[str, Sequence[Any]], caps: Sequence[float]) -> str:
    """SHA-1 over a suite's parameter space (names, values, order) and its size caps."""
    plain = {k: [v.item() if hasattr(v, "item") else v for v in vals] for k, vals in space.items()}
    text = json.dumps({"space": plain, "caps": [float(c) for c in caps]}, separators=(",", ":"))
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


@lru_cache(maxsize=1)
def _stored() -> dict[str, dict[str, Any]]:
    try:
        return json.loads(COUNTS_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def stored_count(name: str, fp: str) -> int | None:
    """The stored count of suite ``name`` if it was computed for the same fingerprint, else None."""
    entry = _stored().get(name)
    if isinstance(entry, dict) and entry.get("fingerprint") == fp and isinstance(entry.get("count"), int):
        return int(entry["count"])
    return None
