"""Parser for OpenVINO ``benchmark_app`` reports (MYRIAD and CPU plugins, 2019-2022) into `NodeRecord`s.

Three files ``benchmark_app -report_type ... -report_folder DIR`` writes, all ``;``-separated:

``average_counters`` (``benchmark_average_counters_report.csv``)
    One table ``layerName;execStatus;layerType;execType;realTime (ms);cpuTime (ms)`` (later releases add
    columns such as ``proportion (%)``; they are ignored), one row per layer of the runtime graph with
    ``execStatus`` EXECUTED / NOT_RUN / OPTIMIZED_OUT, then a ``Total`` row (the sum of realTime).
``detailed_counters`` (``benchmark_detailed_counters_report.csv``)
    The same table once per infer request, each closed by its ``Total`` row and an empty line: a layer's
    times over the tables give median / min / std.
``statistics`` (``benchmark_report.csv``)
    Sections ``Command line parameters``, ``Configuration setup``, ``Execution results`` of ``key;value``
    lines; the whole-network latency (``latency (ms)``, ``Median latency``, ``avg latency``...) and
    ``throughput`` are read from it.

The MYRIAD plugin's ``execType`` says where a layer ran: ``MyriadXHwOp`` on the Neural Compute Engine
(``exec_kind == "nce"``), ``MyriadXHwOp + injected[Copy]`` on the NCE with a SHAVE stage injected after it
(``"nce+shave"``), anything else (``Copy``, ``Sum``, ``Relu``, ``Permute``, ``SoftMax``...) as a SHAVE
software kernel (``"shave"``); CPU-plugin rows (``jit_avx2_FP32``, ``ref_any``...) get ``"cpu"``.
A truncated or foreign file raises `BenchmarkAppReportError` naming file and line; nothing partial is returned.
"""

from __future__ import annotations

import logging
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..records import NodeRecord
from .dpu import ReportError

__all__ = ["BenchmarkAppReportError", "CounterReport", "StatisticsReport", "FORMATS", "detect_format",
           "parse_counters", "parse_statistics", "parse_counters_text", "exec_kind_of", "NCE", "NCE_SHAVE",
           "SHAVE", "CPU"]

log = logging.getLogger(__name__)

FORMATS = ("average_counters", "detailed_counters", "statistics")
NCE, NCE_SHAVE, SHAVE, CPU = "nce", "nce+shave", "shave", "cpu"
_STATUS = {"EXECUTED": "executed", "NOT_RUN": "not-run", "OPTIMIZED_OUT": "optimized-out"}
_HEADER = ("layername", "execstatus", "layertype", "exectype", "realtime (ms)", "cputime (ms)")
#: the CPU plugin's kernel implementation names (jit_avx512_FP32, ref_any, unknown_I8...)
_CPU_EXEC = re.compile(r"^(jit|ref|gemm|brgemm|acl|unknown|undef|winograd|sse|avx|any)[_a-z0-9]*", re.I)
_MAX_BYTES = 64 * 2 ** 20


class BenchmarkAppReportError(ReportError):
    """A benchmark_app report is truncated, corrupt or not a benchmark_app report (names file and line)."""


@dataclass
class CounterReport:
    """A parsed counters report: one record per runtime-graph layer (NOT_RUN / OPTIMIZED_OUT included).

    ``totals_ms`` holds each table's ``Total`` row (one per infer request in a detailed report); ``plugin``
    is ``MYRIAD`` or ``CPU`` as the exec types show. A record's ``extra["exec_status"]`` keeps the raw status
    (``status`` is ``executed`` or ``not-run``, the latter for NOT_RUN and OPTIMIZED_OUT alike).
    """

    format: str
    source: str
    records: list[NodeRecord]
    totals_ms: np.ndarray
    plugin: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def total_ms(self) -> float:
        """The device time per inference the report states (median of its Total rows)."""
        return float(np.median(self.totals_ms))

    def executed(self) -> list[NodeRecord]:
        """The records of layers that ran (their times add up to `total_ms`)."""
        return [r for r in self.records if r.status == "executed"]


@dataclass
class StatisticsReport:
    """``benchmark_report.csv``: whole-network latency (ms) and throughput (FPS), plus every key read."""

    source: str
    latency_ms: float | None
    throughput_fps: float | None
    sections: dict[str, dict[str, str]]


def exec_kind_of(exec_type: str, status: str) -> str:
    """Where a layer ran, from the plugin's ``execType`` (see the module docstring); '' if it did not run."""
    if status != "executed":
        return ""
    e = exec_type.strip()
    if e.startswith("MyriadXHwOp"):
        return NCE_SHAVE if "injected" in e else NCE
    if _CPU_EXEC.match(e):
        return CPU
    return SHAVE


def _read(path: str | os.PathLike) -> str:
    p = Path(path)
    if not p.is_file():
        raise BenchmarkAppReportError(f"{p}: no such report file")
    if p.stat().st_size > _MAX_BYTES:
        raise BenchmarkAppReportError(f"{p}: {p.stat().st_size} bytes, too large for a benchmark_app report")
    raw = p.read_bytes()
    if b"\0" in raw[:4096]:
        raise BenchmarkAppReportError(f"{p}: a binary file, not a benchmark_app report")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise BenchmarkAppReportError(f"{p}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def _cells(line: str) -> list[str]:
    cells = [c.strip().strip('"') for c in line.rstrip("\r\n").split(";")]
    while cells and cells[-1] == "":
        cells.pop()
    return cells


def _is_header(cells: list[str]) -> bool:
    return tuple(c.lower() for c in cells[:6]) == _HEADER


def detect_format(text: str) -> str | None:
    """``average_counters`` / ``detailed_counters`` / ``statistics`` for a report's text, None if foreign."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    heads = sum(1 for ln in lines if _is_header(_cells(ln)))
    if heads:
        return "detailed_counters" if heads > 1 else "average_counters"
    names = {(_cells(ln) or [""])[0].lower() for ln in lines}
    if names & {"command line parameters", "configuration setup", "execution results"}:
        return "statistics"
    return None


def _number(cell: str, where: str) -> float:
    try:
        v = float(cell)
    except ValueError:
        raise BenchmarkAppReportError(f"{where}: {cell!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise BenchmarkAppReportError(f"{where}: value {cell!r} is negative or not finite")
    return v


def parse_counters_text(text: str, source: str = "<text>") -> CounterReport:
    """Parse the text of an average or detailed counters report (see the module docstring)."""
    fmt = detect_format(text)
    if fmt not in ("average_counters", "detailed_counters"):
        raise BenchmarkAppReportError(f"{source}: not a benchmark_app counters report (no 'layerName;execStatus;"
                                      "layerType;execType;realTime (ms);cpuTime (ms)' header)")
    tables: list[list[tuple[int, list[str]]]] = []
    totals: list[float] = []
    cur: list[tuple[int, list[str]]] | None = None
    width = 6
    for no, line in enumerate(text.splitlines(), 1):
        cells = _cells(line)
        if not cells:
            continue
        where = f"{source}:{no}"
        if _is_header(cells):
            if cur is not None:
                raise BenchmarkAppReportError(f"{where}: a new table starts before the previous one's Total row "
                                              "(truncated table)")
            cur, width = [], len(cells)
            continue
        if cur is None:
            continue  # text around the tables (later releases write the device name after them)
        if cells[0] == "Total" and all(c == "" for c in cells[1:4]):
            if len(cells) < 5 or not cells[4]:
                raise BenchmarkAppReportError(f"{where}: Total row without a time")
            totals.append(_number(cells[4], where))
            tables.append(cur)
            cur = None
            continue
        if len(cells) < 5:
            raise BenchmarkAppReportError(f"{where}: {len(cells)} fields, expected {width} (truncated line?)")
        if cells[1] not in _STATUS:
            raise BenchmarkAppReportError(f"{where}: unknown execStatus {cells[1]!r} "
                                          f"(expected {', '.join(_STATUS)})")
        _number(cells[4], where)
        cur.append((no, cells))
    if cur is not None:
        raise BenchmarkAppReportError(f"{source}: ends inside a table, without its Total row (truncated file)")
    if not tables or not any(tables):
        raise BenchmarkAppReportError(f"{source}: no layer rows")
    return _records(fmt, source, tables, np.asarray(totals, float))


def _records(fmt: str, source: str, tables: list[list[tuple[int, list[str]]]], totals: np.ndarray) -> CounterReport:
    """One record per layer; per-table real times combined into median / min / std."""
    order: list[str] = []
    first: dict[str, tuple[int, list[str]]] = {}
    times: dict[str, list[float]] = {}
    for t in tables:
        seen: set[str] = set()
        for no, cells in t:
            name = cells[0]
            if name in seen:
                raise BenchmarkAppReportError(f"{source}:{no}: layer {name!r} twice in one table")
            seen.add(name)
            if name not in first:
                order.append(name)
                first[name] = (no, cells)
            times.setdefault(name, []).append(float(cells[4]))
    myriad = any(first[n][1][3].startswith("MyriadXHwOp") for n in order)
    records = []
    for name in order:
        no, cells = first[name]
        status = _STATUS[cells[1]]
        layer_type, exec_type = cells[2], cells[3]
        ts = np.asarray(times[name], float)
        # the MYRIAD plugin reports its own conversion stages as "<Extra>" layers: name them by what they do
        node_type = exec_type if layer_type == "<Extra>" else layer_type
        cpu_ms = _number(cells[5], f"{source}:{no}") if len(cells) > 5 and cells[5] else 0.0
        records.append(NodeRecord(
            node=name, node_type=node_type, exec_kind=exec_kind_of(exec_type, status),
            median_ms=float(np.median(ts)), min_ms=float(ts.min()), std_ms=float(ts.std()) if ts.size > 1 else 0.0,
            layers=(name,), status="executed" if status == "executed" else "not-run",
            extra={"exec_type": exec_type, "exec_status": cells[1], "layer_type": layer_type,
                   "runs": int(ts.size), "cpu_ms": cpu_ms}))
    return CounterReport(fmt, source, records, totals, "MYRIAD" if myriad else "CPU", {"tables": len(tables)})


def parse_counters(path: str | os.PathLike) -> CounterReport:
    """Parse ``benchmark_average_counters_report.csv`` or ``benchmark_detailed_counters_report.csv``."""
    return parse_counters_text(_read(path), str(path))


_LATENCY_KEYS = ("latency (ms)", "median latency (ms)", "median latency", "latency", "avg latency (ms)",
                 "average latency (ms)", "avg latency")
_THROUGHPUT_KEYS = ("throughput", "throughput (fps)", "throughput, fps")


def parse_statistics(path: str | os.PathLike) -> StatisticsReport:
    """Parse ``benchmark_report.csv`` (the statistics report): latency in ms and throughput in FPS."""
    source = str(path)
    text = _read(path)
    if detect_format(text) != "statistics":
        raise BenchmarkAppReportError(f"{source}: not a benchmark_app statistics report (no 'Execution results' "
                                      "or 'Command line parameters' section)")
    sections: dict[str, dict[str, str]] = {}
    cur = None
    for no, line in enumerate(text.splitlines(), 1):
        cells = _cells(line)
        if not cells:
            cur = None
            continue
        if len(cells) == 1:
            cur = sections.setdefault(cells[0], {})
            continue
        if cur is None:
            raise BenchmarkAppReportError(f"{source}:{no}: a value line outside a section")
        cur[cells[0].lower()] = cells[1]
    res = sections.get("Execution results", {})

    def pick(keys: tuple[str, ...]) -> float | None:
        for k in keys:
            if k in res:
                return _number(res[k], f"{source}: {k}")
        return None
    latency, tput = pick(_LATENCY_KEYS), pick(_THROUGHPUT_KEYS)
    if latency is None and tput is None:
        raise BenchmarkAppReportError(f"{source}: the 'Execution results' section has no latency or throughput "
                                      "(truncated report?)")
    return StatisticsReport(source, latency, tput, sections)
