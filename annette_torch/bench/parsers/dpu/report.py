"""What every DPU report parser shares: the `DpuReport` result, the errors, and the number and record helpers."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ....errors import AnnetteError
from ...records import NodeRecord
from .names import candidate_layers

DPU = "dpu"
CPU = "cpu"


class ReportError(AnnetteError):
    """A profiler report is corrupt, truncated or of an unknown layout (the message names file and line)."""


class UnknownLayoutError(ReportError):
    """A file is empty, binary, or none of the known report layouts."""


@dataclass
class DpuReport:
    """One parsed report: records (one per executed node / subgraph) plus what the format also offers.

    ``times`` maps a node to its per-run times in ms where the format has them (DNNDK, VTF, vart-timing);
    ``e2e_ms`` holds the whole-model DPU time per run when known (DNNDK ``All`` rows, vart-timing).
    """

    format: str
    source: str
    records: list[NodeRecord]
    times: dict[str, np.ndarray] = field(default_factory=dict)
    e2e_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    meta: dict[str, Any] = field(default_factory=dict)


def _fail(source: str, lineno: int | None, msg: str, cls: type[ReportError] = ReportError) -> ReportError:
    where = f"{source}:{lineno}" if lineno else source
    return cls(f"{where}: {msg}")


def _num(tok: str) -> float:
    """A report number: ``16.2%`` -> 16.2, ``~0`` (vaitrace: below 0.001) -> 0.0, ``1,234.5`` -> 1234.5."""
    t = tok.strip().rstrip("%").replace(",", "")
    if t in ("~0", "~0.0"):
        return 0.0
    v = float(t)
    if not math.isfinite(v):
        raise ValueError(tok)
    return v


def _opt_num(tok: str) -> float | None:
    t = tok.strip()
    if t in ("", "-", "N/A", "n/a"):
        return None
    return _num(t)


def _stats(t: np.ndarray) -> tuple[float, float, float]:
    return float(np.median(t)), float(t.min()), float(t.std())


def _record(node: str, node_type: str, exec_kind: str, med: float, mn: float, sd: float,
            extra: dict[str, Any]) -> NodeRecord:
    return NodeRecord(node=node, node_type=node_type, exec_kind=exec_kind, median_ms=med, min_ms=mn,
                      std_ms=sd, layers=candidate_layers(node) if exec_kind == DPU else (), extra=extra)


def _is_rule(line: str, ch: str) -> bool:
    s = line.strip()
    return len(s) >= 3 and set(s) == {ch}
