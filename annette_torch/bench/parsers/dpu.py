"""Parsers for the ZCU102 DPU profilers' reports, into the standard `NodeRecord` format.

Five layouts are recognised (``detect_format`` names them); every time is converted to milliseconds.

``dnndk``
    The table N2Cube (DNNDK v3.x, Vitis AI 1.0-1.2 edge runtime) prints for every DPU task run when the
    kernel was compiled in debug mode (``dnnc --mode=debug``) and profiling is on (``dexplorer -m profile``,
    or ``dpuCreateTask(kernel, T_MODE_PROF)`` / ``dpuEnableTaskProfile``)::

        [DNNDK] Performance profile - DPU Kernel "net_0" DPU Task "net_0-0"
        ====================================================================
          ID   NodeName Workload(MOP) Mem(MB) RunTime(ms) Perf(GOPS) Utilization    MB/S
           1      conv1       210.830    0.26       1.059      199.1        16.2%   244.2
        ...
                        Total Nodes In Avg:
                                        All      2262.336   59.15      13.937      162.3        13.2%  4244.1
        ====================================================================

    One block per task run, so a log of N runs gives N samples per node (median / min / std are real
    per-iteration statistics); the ``All`` rows give the whole-kernel time per run.
``vaitrace-csv``
    ``profile_summary.csv`` written by Vitis AI's ``vaitrace`` (VART): a ``DPU Summary`` table with one row
    per DPU subgraph and core (``Kernel Name,Number Of Runs,CU Full Name,Minimum Time (ms),Average Time (ms),
    Maximum Time (ms),Workload(GOP),DPU Performance(GOP/s),Mem IO(MB),Mem Bandwidth(MB/s)``), followed by
    CPU function rows (``name,runs,CPU,min,avg,max``). Only min / mean / max are in the file: ``median_ms``
    holds the mean and ``std_ms`` is NaN (unknown).
``vaitrace-txt``
    The ASCII table of ``vaitrace --txt_summary`` (``--txt`` in 1.4): ``DPU Summary:`` then ``DPU Id | Bat |
    DPU SubGraph | WL | SW_RT | HW_RT | Effic | LdWB | LdFM | StFM | AvgBw`` (2.x/3.x) or ``DPU | Batch |
    SubGraph | Workload | Run Time (ms) | Perf(GOP/s) | Mem (MB) | MB/s`` (1.4). ``~0`` means below 0.001.
    The hardware-counter time (``HW_RT``) is used when present.
``vaitrace-vtf``
    ``vart_trace.csv`` (VTF event trace): a start and an end event per subgraph run, so per-run durations
    and real medians / std.
``vart-timing``
    ``vart_timing.json`` written by the job folder's ``run_dpu.py`` (wall-clock time of VART
    ``execute_async`` + ``wait`` per DPU subgraph and run); used when vaitrace is not available.

With vaitrace, a row is a DPU *subgraph* (usually the whole DPU part of a model); the fine-grained mode
(``vaitrace --fine_grained`` on Vitis AI 1.3-2.5 with an xmodel compiled with ``--options
'{"mode":"debug"}'``) runs the model subgraph by subgraph, so the same tables then have one row per DPU
layer. The reports do not say which mode produced them: pass ``granularity`` (the job folder records it).

A corrupt or truncated report raises `ReportError` naming the file and line; nothing partial is returned.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import AnnetteError
from ..records import NodeRecord

__all__ = [
    "ReportError",
    "UnknownLayoutError",
    "DpuReport",
    "FORMATS",
    "detect_format",
    "parse_report",
    "parse_records",
    "parse_text",
    "normalize_node_name",
    "candidate_layers",
    "canonical_name",
    "read_report_text",
    "merge_vtf_with_summary",
]

log = logging.getLogger(__name__)

FORMATS = ("dnndk", "vaitrace-csv", "vaitrace-txt", "vaitrace-vtf", "vart-timing")

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


# ----------------------------------------------------------------------------------------------- names

_PAREN = re.compile(r"\([^()]*\)")
_SUFFIXES = ("_DequantizeLinear_Output", "_QuantizeLinear_Output", "_fix")


def normalize_node_name(name: str) -> str:
    """A DPU node / subgraph name with the toolchains' decorations removed.

    Removes the ``subgraph_`` prefix of xmodel subgraphs, a trailing ``*`` (DNNDK marks cut names so), a
    ``/aten::...`` tail (PyTorch-flow names), parenthesised notes such as ``(TransferMatMulToConv2d)``,
    and ``_fix`` / ONNX QDQ ``_QuantizeLinear_Output`` / ``_DequantizeLinear_Output`` suffixes.
    """
    s = name.strip()
    if s.startswith("subgraph_"):
        s = s[len("subgraph_"):]
    s = s.rstrip("*").strip()
    if "/aten::" in s:
        s = s.split("/aten::", 1)[0]
    prev = None
    while prev != s:  # nested parentheses
        prev, s = s, _PAREN.sub("", s)
    s = s.strip()
    changed = True
    while changed:
        changed = False
        for suf in _SUFFIXES:
            if s.endswith(suf) and len(s) > len(suf):
                s, changed = s[: -len(suf)], True
    return s or name.strip()


def canonical_name(name: str) -> str:
    """Name in the compilers' mangled form, for comparing across toolchains.

    DNNC and the XIR compiler replace ``/``, ``.``, ``[`` ... by ``_`` (``conv2d_1/convolution`` becomes
    ``conv2d_1_convolution``); mapping every run of non-alphanumeric characters to one ``_`` on both sides
    makes an original layer name comparable with a DPU node name.
    """
    return re.sub(r"[^0-9A-Za-z]+", "_", normalize_node_name(name)).strip("_")


def candidate_layers(name: str) -> tuple[str, ...]:
    """Candidate original layer names for a DPU node (normalised name first, then its mangled form)."""
    out: list[str] = []
    for c in (normalize_node_name(name), canonical_name(name)):
        if c and c not in out:
            out.append(c)
    return tuple(out)


# ---------------------------------------------------------------------------------------------- helpers

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


# ------------------------------------------------------------------------------------------------ DNNDK

_DNNDK_TITLE = re.compile(r'Performance profile\s*-\s*DPU Kernel\s+"(?P<kernel>[^"]*)"'
                          r'(?:\s+DPU Task\s+"(?P<task>[^"]*)")?')
_DNNDK_HEADER = ["id", "nodename", "workload(mop)", "mem(mb)", "runtime(ms)", "perf(gops)", "utilization",
                 "mb/s"]


def _is_dnndk_header(line: str) -> bool:
    return [t.lower() for t in line.split()] == _DNNDK_HEADER


def _dnndk_numbers(toks: list[str]) -> tuple[float, ...]:
    return tuple(_num(t) for t in toks)


def parse_dnndk(text: str, source: str = "<text>", skip_runs: int = 0) -> DpuReport:
    """Parse N2Cube profiling output (any number of blocks, kernels and interleaved application output)."""
    lines = text.splitlines()
    blocks: list[dict[str, Any]] = []
    state = "outside"
    cur: dict[str, Any] = {}
    title: tuple[str | None, str | None, int] | None = None
    for i, raw in enumerate(lines, 1):
        line = raw.rstrip()
        s = line.strip()
        if state == "outside":
            m = _DNNDK_TITLE.search(line)
            if m:
                title = (m.group("kernel"), m.group("task"), i)
                continue
            if _is_dnndk_header(s):
                kernel, task, start = title if title else (None, None, i)
                cur = {"kernel": kernel, "task": task, "start": start, "rows": [], "total": None}
                title, state = None, "rows"
                continue
            if title is not None and s and not _is_rule(s, "="):
                raise _fail(source, i, f"expected the DNNDK column header after the title on line {title[2]}")
            continue
        if state == "rows":
            if not s:
                state = "after_rows"
                continue
            if s.startswith("Total Nodes"):
                state = "total"
                continue
            toks = s.split()
            cut = " (the report ends here: truncated)" if i == len(lines) and not text.endswith("\n") else ""
            if len(toks) < 8 or not toks[0].isdigit():
                raise _fail(source, i, f"malformed DNNDK node row (expected ID NodeName and 6 numbers){cut}: {s!r}")
            try:
                nums = _dnndk_numbers(toks[-6:])
            except ValueError:
                raise _fail(source, i, f"non-numeric value in DNNDK node row{cut}: {s!r}") from None
            cur["rows"].append((int(toks[0]), " ".join(toks[1:-6]), nums, i))
            continue
        if state == "after_rows":
            if not s:
                continue
            if s.startswith("Total Nodes"):
                state = "total"
                continue
            raise _fail(source, i, f"expected 'Total Nodes In Avg:' after the node rows, got {s!r}")
        if state == "total":
            if not s:
                continue
            toks = s.split()
            if toks[0].rstrip(":") != "All" or len(toks) != 7:
                raise _fail(source, i, f"malformed DNNDK total row (expected 'All' and 6 numbers): {s!r}")
            try:
                cur["total"] = _dnndk_numbers(toks[1:])
            except ValueError:
                raise _fail(source, i, f"non-numeric value in DNNDK total row: {s!r}") from None
            state = "closing"
            continue
        if state == "closing":
            if not s:
                continue
            if not _is_rule(s, "="):
                raise _fail(source, i, f"expected the closing '====' line of the block, got {s!r}")
            if not cur["rows"]:
                raise _fail(source, cur["start"], "DNNDK profile block without node rows")
            blocks.append(cur)
            state = "outside"
    if state != "outside":
        raise _fail(source, cur.get("start"),
                    f"report ends inside the DNNDK profile block that starts here (truncated after line {len(lines)})")
    if title is not None:
        raise _fail(source, title[2], "report ends after a DNNDK profile title without its table (truncated)")
    if not blocks:
        raise _fail(source, None, "no DNNDK profile block found")

    default_kernel = Path(source).stem if source != "<text>" else "kernel"
    per_kernel: dict[str, list[dict[str, Any]]] = {}
    for b in blocks:
        per_kernel.setdefault(b["kernel"] or default_kernel, []).append(b)
    if skip_runs:
        for k, bl in per_kernel.items():
            if len(bl) <= skip_runs:
                raise _fail(source, None, f"kernel {k!r} has {len(bl)} profiled runs, cannot skip {skip_runs}")
            per_kernel[k] = bl[skip_runs:]

    names_seen: dict[str, str] = {}
    records: list[NodeRecord] = []
    times: dict[str, np.ndarray] = {}
    kernel_totals: dict[str, np.ndarray] = {}
    for kernel, bl in per_kernel.items():
        order: list[str] = []
        samples: dict[str, list[tuple[float, ...]]] = {}
        for b in bl:
            for _id, name, nums, _ln in b["rows"]:
                if name not in samples:
                    order.append(name)
                    samples[name] = []
                samples[name].append(nums)
        kernel_totals[kernel] = np.array([b["total"][2] for b in bl], dtype=np.float64)
        for name in order:
            arr = np.array(samples[name], dtype=np.float64)  # runs x (MOP, MB, ms, GOPS, util%, MB/s)
            node = name if names_seen.setdefault(name, kernel) == kernel else f"{kernel}:{name}"
            t = arr[:, 2]
            med, mn, sd = _stats(t)
            extra = {"kernel": kernel, "runs": int(t.size), "workload_mop": float(arr[0, 0]),
                     "mem_mb": float(arr[0, 1]), "perf_gops": float(np.median(arr[:, 3])),
                     "utilization_pct": float(np.median(arr[:, 4])), "mb_s": float(np.median(arr[:, 5])),
                     "max_ms": float(t.max()), "time_source": "N2Cube node profile (DPU timestamps)"}
            if name.rstrip().endswith("*"):
                extra["name_truncated"] = True
            records.append(_record(node, "dpu-node", DPU, med, mn, sd, extra))
            times[node] = t
    counts = {k: v.size for k, v in kernel_totals.items()}
    if len(set(counts.values())) == 1:
        e2e = np.sum(np.stack(list(kernel_totals.values())), axis=0)
    else:
        log.warning("%s: kernels were profiled a different number of times (%s); no end-to-end series",
                    source, counts)
        e2e = np.zeros(0)
    meta = {"kernels": list(per_kernel), "runs": counts, "kernel_total_ms": kernel_totals,
            "granularity": "layer", "tasks": sorted({b["task"] for b in blocks if b["task"]})}
    return DpuReport("dnndk", source, records, times, e2e, meta)


# ------------------------------------------------------------------------------- vaitrace column names

def _col_key(h: str) -> str:
    return re.sub(r"\s+", "", h).lower()


_ALIASES: dict[str, tuple[str, ...]] = {
    "name": ("kernelname", "dpusubgraph", "subgraph", "subgraphname", "kernel", "layer", "layername"),
    "runs": ("numberofruns", "runs"),
    "device": ("cufullname", "dpuid", "dpu", "device", "cu"),
    "batch": ("bat", "batch"),
    "core": ("coreid",),
    "min": ("minimumtime(ms)", "mintime(ms)", "min(ms)"),
    "avg": ("averagetime(ms)", "averageruntime(ms)", "runtime(ms)", "rt(ms)", "rt", "sw_rt", "time(ms)"),
    "hw": ("hw_rt",),
    "max": ("maximumtime(ms)", "maxtime(ms)", "max(ms)"),
    "workload": ("workload(gop)", "wl", "workload", "wl(gop)"),
    "perf": ("dpuperformance(gop/s)", "perf(gop/s)", "perf"),
    "effic": ("effic", "efficiency"),
    "mem": ("memio(mb)", "mem(mb)"),
    "bw": ("membandwidth(mb/s)", "mb/s", "avgbw"),
    "ldfm": ("ldfm",), "ldwb": ("ldwb",), "stfm": ("stfm",),
}
_KEY_OF = {a: k for k, al in _ALIASES.items() for a in al}
_EXTRA_COLS = {"workload": "workload_gop", "perf": "perf_gop_s", "effic": "effic_pct", "mem": "mem_mb",
               "bw": "mb_s", "ldfm": "load_fm_mb", "ldwb": "load_wb_mb", "stfm": "store_fm_mb"}


def _map_columns(headers: list[str]) -> dict[str, int]:
    cols: dict[str, int] = {}
    for j, h in enumerate(headers):
        k = _KEY_OF.get(_col_key(h))
        if k and k not in cols:
            cols[k] = j
    return cols


def _device_parts(dev: str) -> tuple[str, int | None]:
    """``DPUCZDX8G_1:batch-1`` -> (``DPUCZDX8G_1``, 1)."""
    m = re.match(r"(?P<core>[^:]+)(?::batch-(?P<b>\d+))?$", dev.strip())
    if not m:
        return dev.strip(), None
    return m.group("core"), int(m.group("b")) if m.group("b") else None


class _Row:
    """One summary row: name, device, runs, min / mean / max / hw time, and extra columns."""

    def __init__(self, name: str, device: str, runs: int | None, tmin: float | None, tavg: float,
                 tmax: float | None, hw: float | None, batch: int | None, extra: dict[str, float]):
        self.name, self.device, self.runs = name, device, runs
        self.tmin, self.tavg, self.tmax, self.hw, self.batch, self.extra = tmin, tavg, tmax, hw, batch, extra


def _rows_to_records(rows: list[_Row], granularity: str, cpu_rows: list[_Row]) -> list[NodeRecord]:
    """Merge rows of one subgraph run on several DPU cores; build records (DPU rows, then CPU functions)."""
    merged: dict[str, list[_Row]] = {}
    for r in rows:
        merged.setdefault(r.name, []).append(r)
    out: list[NodeRecord] = []
    for name, rs in merged.items():
        weights = [r.runs or 1 for r in rs]  # rows of one subgraph on several cores: run-weighted mean
        mean = sum(r.tavg * w for r, w in zip(rs, weights)) / sum(weights)
        mins = [r.tmin for r in rs if r.tmin is not None]
        maxs = [r.tmax for r in rs if r.tmax is not None]
        hws = [(r.hw, w) for r, w in zip(rs, weights) if r.hw is not None and r.hw > 0]
        extra: dict[str, Any] = {"cores": [r.device for r in rs], "mean_ms": mean, "granularity": granularity,
                                 "stats": "min/mean/max"}
        if all(r.runs for r in rs):
            extra["runs"] = sum(r.runs for r in rs)
        if maxs:
            extra["max_ms"] = max(maxs)
        if rs[0].batch is not None:
            extra["batch"] = rs[0].batch
        for k, v in rs[0].extra.items():
            extra[k] = v
        if mins and hws:
            extra["sw_min_ms"] = min(mins)
        if hws:  # hardware-counter time (vaitrace 2.x+ on the board): the DPU's own time, mean only
            med = mn = sum(h * n for h, n in hws) / sum(n for _, n in hws)
            extra["sw_mean_ms"] = mean
            extra["time_source"] = "vaitrace HW_RT (DPU hardware counter, mean)"
        else:
            med = mean
            mn = min(mins) if mins else mean
            extra["time_source"] = "vaitrace subgraph run time (mean)"
        if name.startswith("...") or name.endswith("..."):  # vaitrace 3.x keeps the tail, 1.4 the head
            extra["name_truncated"] = True
            name = name[3:] if name.startswith("...") else name[:-3]
        out.append(_record(name, "dpu-layer" if granularity == "layer" else "dpu-subgraph", DPU, med, mn,
                           math.nan, extra))
    for r in cpu_rows:
        out.append(NodeRecord(node=r.name, node_type="cpu-function", exec_kind=CPU, median_ms=r.tavg,
                              min_ms=r.tmin if r.tmin is not None else r.tavg, std_ms=math.nan,
                              extra={"runs": r.runs, "max_ms": r.tmax, "stats": "min/median/max",
                                     "time_source": "vaitrace function trace"}))
    return out


def _row_from_cells(cells: list[str], cols: dict[str, int], source: str, lineno: int) -> _Row:
    def get(key: str) -> str | None:
        j = cols.get(key)
        return cells[j] if j is not None and j < len(cells) else None

    name = (get("name") or "").strip()
    if not name:
        raise _fail(source, lineno, "row without a subgraph / kernel name")
    try:
        tavg_s = get("avg")
        tavg = _opt_num(tavg_s) if tavg_s is not None else None
        hw = _opt_num(get("hw") or "")
        if tavg is None and hw is None:
            raise _fail(source, lineno, f"row {name!r} has no run time")
        tmin = _opt_num(get("min") or "")
        tmax = _opt_num(get("max") or "")
        runs_s = get("runs")
        runs = int(_num(runs_s)) if runs_s and runs_s.strip() not in ("", "-") else None
        batch_s = get("batch")
        dev = (get("device") or "").strip()
        core, dev_batch = _device_parts(dev) if dev else ("", None)
        if get("core"):
            core = f"{core}#{get('core').strip()}" if core else get("core").strip()
        batch = int(_num(batch_s)) if batch_s and batch_s.strip() not in ("", "-") else dev_batch
        extra: dict[str, float] = {}
        for key, ename in _EXTRA_COLS.items():
            v = get(key)
            if v is not None:
                val = _opt_num(v)
                if val is not None:
                    extra[ename] = val
    except ValueError as e:
        raise _fail(source, lineno, f"non-numeric value {str(e)!r} in row {name!r}") from None
    return _Row(name, core, runs, tmin, tavg if tavg is not None else hw, tmax, hw, batch, extra)


# ------------------------------------------------------------------------------------ vaitrace summary CSV

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


# ------------------------------------------------------------------------------------ vaitrace txt summary

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


# ------------------------------------------------------------------------------------- vaitrace VTF trace

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


# ---------------------------------------------------------------------------------- vart_timing.json

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


# ------------------------------------------------------------------------------------------ dispatch

def detect_format(text: str, source: str = "<text>") -> str:
    """Name of the report layout (one of `FORMATS`); `ReportError` for an empty or unknown file."""
    if not text.strip():
        raise _fail(source, None, "empty report", UnknownLayoutError)
    if "\x00" in text[:4096]:
        raise _fail(source, None, "binary file, not a profiler report", UnknownLayoutError)
    head = text.lstrip()
    if head.startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            if '"annette-vart-timing"' in text[:4096]:
                raise _fail(source, e.lineno, f"invalid JSON ({e.msg}; truncated?)") from None
            raise _fail(source, e.lineno, "unknown report layout (JSON that is not a vart_timing.json)",
                        UnknownLayoutError) from None
        if isinstance(doc, dict) and doc.get("format") == "annette-vart-timing":
            return "vart-timing"
        raise _fail(source, None, "unknown report layout (JSON that is not a vart_timing.json)", UnknownLayoutError)
    lines = text.splitlines()
    stripped = [ln.strip() for ln in lines]
    if any(_DNNDK_TITLE.search(ln) or _is_dnndk_header(ln) for ln in lines):
        return "dnndk"
    if "EVENTS" in stripped and ("MAPPING" in stripped or any(s.startswith("VTF File Version") for s in stripped)):
        return "vaitrace-vtf"
    for j, s in enumerate(stripped):
        if s.lower().rstrip(":") == "dpu summary":
            nxt = next((t for t in stripped[j + 1:] if t), "")
            if _is_rule(nxt, "=") or "|" in nxt:
                return "vaitrace-txt"
            return "vaitrace-csv"
    first = next((s for s in stripped if s), "")
    if "," in first:
        cols = _map_columns(_split_csv(first))
        if "name" in cols and {"avg", "hw"} & set(cols):
            return "vaitrace-csv"
    raise _fail(source, None, "unknown report layout (expected a DNNDK profile, vaitrace profile_summary.csv, "
                              "vart_trace.csv, a vaitrace text summary or vart_timing.json)", UnknownLayoutError)


def parse_text(text: str, source: str = "<text>", *, fmt: str | None = None, include_cpu: bool = False,
               skip_runs: int = 0, granularity: str | None = None) -> DpuReport:
    """Parse report text (layout detected unless ``fmt`` is given)."""
    fmt = fmt or detect_format(text, source)
    if fmt not in FORMATS:
        raise ReportError(f"unknown report format {fmt!r} (known: {', '.join(FORMATS)})")
    if granularity not in (None, "subgraph", "layer"):
        raise ReportError(f"granularity must be 'subgraph' or 'layer', not {granularity!r}")
    g = granularity or "subgraph"
    if fmt == "dnndk":
        return parse_dnndk(text, source, skip_runs=skip_runs)
    if fmt == "vaitrace-csv":
        return parse_vaitrace_csv(text, source, include_cpu=include_cpu, granularity=g)
    if fmt == "vaitrace-txt":
        return parse_vaitrace_txt(text, source, include_cpu=include_cpu, granularity=g)
    if fmt == "vaitrace-vtf":
        return parse_vaitrace_vtf(text, source, skip_runs=skip_runs, granularity=g)
    return parse_vart_timing(text, source, skip_runs=skip_runs, granularity=g)


def read_report_text(path: str | os.PathLike) -> str:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ReportError(f"{p}: cannot read report ({e.strerror or e})") from None
    return data.decode("utf-8", errors="replace")


def parse_report(path: str | os.PathLike, *, fmt: str | None = None, include_cpu: bool = False,
                 skip_runs: int = 0, granularity: str | None = None) -> DpuReport:
    """Read and parse one report file (see the module docstring for the layouts)."""
    return parse_text(read_report_text(path), str(path), fmt=fmt, include_cpu=include_cpu, skip_runs=skip_runs,
                      granularity=granularity)


def parse_records(path: str | os.PathLike, **kwargs: Any) -> list[NodeRecord]:
    """`parse_report(path).records`."""
    return parse_report(path, **kwargs).records


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

