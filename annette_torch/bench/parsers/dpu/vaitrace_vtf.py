"""The ``vaitrace-vtf`` layout: ``vart_trace.csv`` (VTF event trace), a start and an end event per subgraph
run, so per-run durations and real medians / std; `merge_vtf_with_summary` adds the summary's columns."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ...records import NodeRecord
from .report import DPU, DpuReport, _fail, _record, _stats

log = logging.getLogger(__name__)


def sniff(text: str, stripped: list[str], source: str) -> bool:
    """An ``EVENTS`` section with a ``MAPPING`` section or a VTF version line."""
    return "EVENTS" in stripped and ("MAPPING" in stripped or any(s.startswith("VTF File Version") for s in stripped))


def parse_vaitrace_vtf(text: str, source: str = "<text>", skip_runs: int = 0,
                       granularity: str = "subgraph") -> DpuReport:
    """Parse ``vart_trace.csv``: pair start / end events per subgraph run into per-run durations."""
    section = None
    mapping: dict[int, str] = {}
    rows_of: dict[int, str] = {}
    scale = 1.0  # to ms
    starts: dict[int, tuple[float, int, int, int]] = {}
    runs: list[tuple[float, str, int, float]] = []  # (start_ms, name, bucket, duration_ms)
    meta: dict[str, Any] = {"granularity": granularity}
    lines = text.splitlines()
    for i, raw in enumerate(lines, 1):
        s = raw.strip()
        if not s:
            continue
        if s in ("HEADER", "STRUCTURE", "MAPPING", "EVENTS"):
            section = s
            continue
        cells = [c.strip() for c in s.split(",")]
        if section == "HEADER":
            if len(cells) >= 2:
                meta[cells[0].lower().replace(" ", "_")] = cells[1]
                if cells[0] == "Resolution":
                    scale = {"ms": 1.0, "us": 1e-3, "s": 1e3, "ns": 1e-6}.get(cells[1])
                    if scale is None:
                        raise _fail(source, i, f"unknown time resolution {cells[1]!r}")
        elif section == "STRUCTURE":
            if cells[0] == "Dynamic_Row" and len(cells) >= 3:
                rows_of[int(cells[1])] = cells[2]
        elif section == "MAPPING":
            idx, _, name = s.partition(",")
            try:
                mapping[int(idx)] = name.strip()
            except ValueError:
                raise _fail(source, i, f"malformed MAPPING line {s!r}") from None
        elif section == "EVENTS":
            if len(cells) < 8:
                raise _fail(source, i, f"truncated event line {s!r}")
            if cells[4] not in ("VART_RUNNER", "DPU_RUN"):
                continue  # other event kinds
            try:
                eid, sid, ts, bid, kn = int(cells[0]), int(cells[1]), float(cells[2]), int(cells[3]), int(cells[5])
            except ValueError:
                raise _fail(source, i, f"non-numeric field in event line {s!r}") from None
            if sid == 0:
                starts[eid] = (ts, kn, bid, i)
            else:
                if sid not in starts:
                    raise _fail(source, i, f"end event {eid} without its start event {sid}")
                t0, kn0, b0, _ = starts.pop(sid)
                if kn0 not in mapping:
                    raise _fail(source, i, f"subgraph index {kn0} missing from MAPPING")
                runs.append((t0 * scale, mapping[kn0], b0, round((ts - t0) * scale, 6)))
        else:
            raise _fail(source, i, f"line outside any VTF section: {s!r}")
    if section is None:
        raise _fail(source, None, "no VTF sections")
    if starts:
        log.warning("%s: %d run(s) without an end event ignored (trace cut by the vaitrace timeout?)",
                    source, len(starts))
    if not runs:
        raise _fail(source, len(lines), "no complete DPU run in the EVENTS section (truncated?)")
    runs.sort()
    order: list[str] = []
    per: dict[str, list[float]] = {}
    cores: dict[str, set[str]] = {}
    for _t0, name, bid, d in runs:
        if d < 0:
            raise _fail(source, None, f"negative duration for {name!r}")
        if name not in per:
            order.append(name)
            per[name] = []
            cores[name] = set()
        per[name].append(d)
        cores[name].add(rows_of.get(bid, f"DPU_{bid - 1}"))
    records: list[NodeRecord] = []
    times: dict[str, np.ndarray] = {}
    for name in order:
        t = np.array(per[name][skip_runs:], dtype=np.float64)
        if t.size == 0:
            raise _fail(source, None, f"subgraph {name!r} has {len(per[name])} runs, cannot skip {skip_runs}")
        med, mn, sd = _stats(t)
        node = name
        extra = {"runs": int(t.size), "cores": sorted(cores[name]), "max_ms": float(t.max()),
                 "granularity": granularity, "time_source": "vaitrace VTF events (start to end)"}
        records.append(_record(node, "dpu-layer" if granularity == "layer" else "dpu-subgraph", DPU, med, mn,
                               sd, extra))
        times[node] = t
    counts = {n: t.size for n, t in times.items()}
    e2e = np.sum(np.stack(list(times.values())), axis=0) if len(set(counts.values())) == 1 else np.zeros(0)
    return DpuReport("vaitrace-vtf", source, records, times, e2e, meta)


def merge_vtf_with_summary(vtf: DpuReport, summary: DpuReport) -> DpuReport:
    """Per-run times from the VTF trace, workload / memory columns from the summary of the same run."""
    by_name = {r.node: r for r in summary.records}
    for r in vtf.records:
        s = by_name.get(r.node)
        if s is None:
            continue
        for k, v in s.extra.items():
            if k not in r.extra and k not in ("stats", "time_source", "mean_ms"):
                r.extra[k] = v
    vtf.meta.setdefault("summary", summary.source)
    return vtf
