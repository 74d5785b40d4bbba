"""The ``vart-timing`` layout: ``vart_timing.json`` written by the job folder's ``run_dpu.py`` (wall-clock time
of VART ``execute_async`` + ``wait`` per DPU subgraph and run); used when vaitrace is not available."""

from __future__ import annotations

import json

import numpy as np

from ...records import NodeRecord
from .report import DPU, DpuReport, UnknownLayoutError, _fail, _record, _stats


def sniff(text: str, stripped: list[str], source: str) -> bool:
    """A vart_timing.json; any other JSON document (or a broken one) raises `ReportError`."""
    if not text.lstrip().startswith("{"):
        return False
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        if '"annette-vart-timing"' in text[:4096]:
            raise _fail(source, e.lineno, f"invalid JSON ({e.msg}; truncated?)") from None
        raise _fail(source, e.lineno, "unknown report layout (JSON that is not a vart_timing.json)",
                    UnknownLayoutError) from None
    if isinstance(doc, dict) and doc.get("format") == "annette-vart-timing":
        return True
    raise _fail(source, None, "unknown report layout (JSON that is not a vart_timing.json)", UnknownLayoutError)


def parse_vart_timing(text: str, source: str = "<text>", skip_runs: int = 0,
                      granularity: str = "subgraph") -> DpuReport:
    """Parse the ``vart_timing.json`` that the job folder's ``run_dpu.py`` writes."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise _fail(source, e.lineno, f"invalid JSON ({e.msg}; truncated?)") from None
    if not isinstance(doc, dict) or doc.get("format") != "annette-vart-timing":
        raise _fail(source, None, "not an annette-vart-timing file")
    sub = doc.get("subgraphs")
    if not isinstance(sub, dict) or not sub:
        raise _fail(source, None, "'subgraphs' missing or empty")
    records: list[NodeRecord] = []
    times: dict[str, np.ndarray] = {}
    for name, vals in sub.items():
        try:
            t = np.asarray(vals, dtype=np.float64)[skip_runs:]
        except (TypeError, ValueError):
            raise _fail(source, None, f"times of subgraph {name!r} are not numbers") from None
        if t.ndim != 1 or t.size == 0 or not np.all(np.isfinite(t)) or np.any(t < 0):
            raise _fail(source, None, f"times of subgraph {name!r} empty or invalid")
        med, mn, sd = _stats(t)
        records.append(_record(name, "dpu-layer" if granularity == "layer" else "dpu-subgraph", DPU, med, mn, sd,
                               {"runs": int(t.size), "max_ms": float(t.max()), "granularity": granularity,
                                "time_source": "wall clock of VART execute_async + wait"}))
        times[name] = t
    e2e = np.asarray(doc.get("e2e_ms", []), dtype=np.float64)[skip_runs:]
    meta = {k: v for k, v in doc.items() if k not in ("subgraphs", "e2e_ms")}
    meta["granularity"] = granularity
    return DpuReport("vart-timing", source, records, times, e2e, meta)
