"""What vaitrace's two summary tables (``vaitrace-csv``, ``vaitrace-txt``) share: their column names across
Vitis AI versions, the row of one DPU subgraph on one core, and rows -> records."""

from __future__ import annotations

import math
import re
from typing import Any

from ...records import NodeRecord
from .report import CPU, DPU, _fail, _is_rule, _num, _opt_num, _record

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


def summary_layout(stripped: list[str]) -> str | None:
    """The layout of the first ``DPU Summary`` table: ``vaitrace-txt`` when a ``====`` rule or a ``|`` row
    follows the title, else ``vaitrace-csv``; None without such a title."""
    for j, s in enumerate(stripped):
        if s.lower().rstrip(":") == "dpu summary":
            nxt = next((t for t in stripped[j + 1:] if t), "")
            if _is_rule(nxt, "=") or "|" in nxt:
                return "vaitrace-txt"
            return "vaitrace-csv"
    return None
