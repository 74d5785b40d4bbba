"""The ``vaitrace-txt`` layout: the ASCII table of ``vaitrace --txt_summary`` (``--txt`` in 1.4), ``DPU
Summary:`` then ``DPU Id | Bat | DPU SubGraph | WL | SW_RT | HW_RT | Effic | LdWB | LdFM | StFM | AvgBw``
(2.x/3.x) or ``DPU | Batch | SubGraph | Workload | Run Time (ms) | Perf(GOP/s) | Mem (MB) | MB/s`` (1.4).
``~0`` means below 0.001. The hardware-counter time (``HW_RT``) is used when present.
"""

from __future__ import annotations

import re

import numpy as np

from .report import DpuReport, _fail, _is_rule, _num
from .vaitrace_rows import _col_key, _map_columns, _Row, _row_from_cells, _rows_to_records, summary_layout


def sniff(text: str, stripped: list[str], source: str) -> bool:
    """A ``DPU Summary`` title over an ASCII table."""
    return summary_layout(stripped) == "vaitrace-txt"


def parse_vaitrace_txt(text: str, source: str = "<text>", include_cpu: bool = False,
                       granularity: str = "subgraph") -> DpuReport:
    """Parse the ASCII ``DPU Summary:`` table of ``vaitrace --txt_summary`` (other tables are ignored)."""
    lines = text.splitlines()
    start = next((i for i, raw in enumerate(lines) if raw.strip() == "DPU Summary:"), None)
    if start is None:
        raise _fail(source, None, "no 'DPU Summary:' table")
    i = start + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines) or not _is_rule(lines[i], "="):
        raise _fail(source, i + 1 if i < len(lines) else len(lines), "expected the '====' line of the DPU table")
    i += 1
    if i >= len(lines) or "|" not in lines[i]:
        raise _fail(source, min(i + 1, len(lines)), "expected the DPU table header (truncated?)")
    headers = [c.strip() for c in lines[i].split("|")]
    cols = _map_columns(headers)
    if "name" not in cols or not ({"avg", "hw"} & set(cols)):
        raise _fail(source, i + 1, f"unknown DPU table header {lines[i].strip()!r}")
    hline = i + 1
    i += 1
    if i >= len(lines) or not re.fullmatch(r"[-+\s]+", lines[i].strip() or "x"):
        raise _fail(source, min(i + 1, len(lines)), "expected the '---+---' separator under the header")
    i += 1
    rows: list[_Row] = []
    closed = False
    while i < len(lines):
        s = lines[i].strip()
        if _is_rule(s, "="):
            closed = True
            break
        cells = [c.strip() for c in lines[i].split("|")]
        if len(cells) != len(headers):
            raise _fail(source, i + 1, f"row has {len(cells)} cells, the header {len(headers)} (truncated?)")
        rows.append(_row_from_cells(cells, cols, source, i + 1))
        i += 1
    if not closed:
        raise _fail(source, hline, "the DPU table that starts here has no closing '====' line (truncated)")
    if not rows:
        raise _fail(source, hline, "DPU table without rows")
    cpu_rows: list[_Row] = []
    if include_cpu:
        cpu_rows = _txt_cpu_functions(lines, i + 1, source)
    records = _rows_to_records(rows, granularity, cpu_rows)
    return DpuReport("vaitrace-txt", source, records, {}, np.zeros(0), {"granularity": granularity})


def _txt_cpu_functions(lines: list[str], i: int, source: str) -> list[_Row]:
    """The ``CPU Functions(...)`` (3.x) / ``CPU Summary:`` (1.4) table (Function | Device | Runs |
    AverageRunTime(ms)) if present."""
    out: list[_Row] = []
    while i < len(lines) and not lines[i].strip().startswith(("CPU Functions", "CPU Summary")):
        i += 1
    i += 2  # title, '====' line
    if i >= len(lines):
        return out
    headers = [_col_key(c) for c in lines[i].split("|")]
    if "function" not in headers:
        return out
    jn, jr, jt = headers.index("function"), headers.index("runs"), headers.index("averageruntime(ms)")
    i += 2
    while i < len(lines) and not _is_rule(lines[i], "="):
        cells = [c.strip() for c in lines[i].split("|")]
        try:
            out.append(_Row(cells[jn], "CPU", int(_num(cells[jr])), None, _num(cells[jt]), None, None, None, {}))
        except (ValueError, IndexError):
            raise _fail(source, i + 1, f"malformed CPU function row: {lines[i].strip()!r}") from None
        i += 1
    return out
