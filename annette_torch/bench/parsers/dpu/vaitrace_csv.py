"""The ``vaitrace-csv`` layout: ``profile_summary.csv`` written by Vitis AI's ``vaitrace`` (VART), a ``DPU
Summary`` table with one row per DPU subgraph and core (``Kernel Name,Number Of Runs,CU Full Name,Minimum Time
(ms),Average Time (ms),Maximum Time (ms),Workload(GOP),DPU Performance(GOP/s),Mem IO(MB),Mem Bandwidth(MB/s)``),
followed by CPU function rows (``name,runs,CPU,min,avg,max``). Only min / mean / max are in the file:
``median_ms`` holds the mean and ``std_ms`` is NaN (unknown).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .report import DpuReport, _fail, _num
from .vaitrace_rows import _map_columns, _Row, _row_from_cells, _rows_to_records, summary_layout


def sniff(text: str, stripped: list[str], source: str) -> bool:
    """A ``DPU Summary`` title over a CSV table, or a bare CSV table under a vaitrace header."""
    layout = summary_layout(stripped)
    if layout is not None:
        return layout == "vaitrace-csv"
    first = next((s for s in stripped if s), "")
    if "," in first:
        cols = _map_columns(_split_csv(first))
        if "name" in cols and {"avg", "hw"} & set(cols):
            return True
    return False


def _split_csv(line: str) -> list[str]:
    cells = [c.strip() for c in line.split(",")]
    while cells and cells[-1] == "":
        cells.pop()
    return cells


def parse_vaitrace_csv(text: str, source: str = "<text>", include_cpu: bool = False,
                       granularity: str = "subgraph") -> DpuReport:
    """Parse vaitrace's ``profile_summary.csv`` (or a bare table with the same header)."""
    lines = text.splitlines()
    meta: dict[str, Any] = {"granularity": granularity}
    start = None
    for i, raw in enumerate(lines):
        s = raw.strip()
        if s.lower().rstrip(":") == "dpu summary":
            start = i + 1
            break
        if ":" in s and "," not in s:
            k, v = s.split(":", 1)
            meta[k.strip().lower().replace(" ", "_")] = v.strip()
    if start is None:  # bare table: the first non-empty line is the header
        start = next((i for i, raw in enumerate(lines) if raw.strip()), len(lines))
    hi = next((i for i in range(start, len(lines)) if lines[i].strip()), None)
    if hi is None:
        raise _fail(source, len(lines), "'DPU Summary' without a column header (truncated)")
    headers = _split_csv(lines[hi])
    cols = _map_columns(headers)
    if "name" not in cols or not ({"avg", "hw"} & set(cols)):
        raise _fail(source, hi + 1, f"unknown DPU summary header {lines[hi].strip()!r}")
    ncols = max(cols.values()) + 1
    rows: list[_Row] = []
    cpu_rows: list[_Row] = []
    for i in range(hi + 1, len(lines)):
        s = lines[i].strip()
        if not s:
            break
        cells = _split_csv(s)
        dev_j = cols.get("device")
        if dev_j is not None and len(cells) > dev_j and cells[dev_j].upper() == "CPU":
            if len(cells) < 6:
                raise _fail(source, i + 1, f"truncated CPU function row: {s!r}")
            try:
                r = _Row(cells[0], "CPU", int(_num(cells[1])), _num(cells[3]), _num(cells[4]), _num(cells[5]),
                         None, None, {})
            except ValueError:
                raise _fail(source, i + 1, f"non-numeric value in CPU function row: {s!r}") from None
            cpu_rows.append(r)
            continue
        if len(cells) < ncols:
            raise _fail(source, i + 1, f"row has {len(cells)} fields, the header {ncols} (truncated?): {s!r}")
        rows.append(_row_from_cells(cells, cols, source, i + 1))
    if not rows:
        raise _fail(source, hi + 1, "DPU summary table without DPU rows")
    records = _rows_to_records(rows, granularity, cpu_rows if include_cpu else [])
    meta["cpu_functions"] = len(cpu_rows)
    return DpuReport("vaitrace-csv", source, records, {}, np.zeros(0), meta)
