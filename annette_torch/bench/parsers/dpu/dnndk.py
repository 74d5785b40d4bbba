"""The ``dnndk`` layout: the table N2Cube (DNNDK v3.x, Vitis AI 1.0-1.2 edge runtime) prints for every DPU task
run when the kernel was compiled in debug mode (``dnnc --mode=debug``) and profiling is on (``dexplorer -m
profile``, or ``dpuCreateTask(kernel, T_MODE_PROF)`` / ``dpuEnableTaskProfile``)::

    [DNNDK] Performance profile - DPU Kernel "net_0" DPU Task "net_0-0"
    ====================================================================
      ID   NodeName Workload(MOP) Mem(MB) RunTime(ms) Perf(GOPS) Utilization    MB/S
       1      conv1       210.830    0.26       1.059      199.1        16.2%   244.2
    ...
                    Total Nodes In Avg:
                                    All      2262.336   59.15      13.937      162.3        13.2%  4244.1
    ====================================================================

One block per task run, so a log of N runs gives N samples per node (median / min / std are real per-iteration
statistics); the ``All`` rows give the whole-kernel time per run.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import numpy as np

from ...records import NodeRecord
from .report import DPU, DpuReport, _fail, _is_rule, _num, _record, _stats

log = logging.getLogger(__name__)

_DNNDK_TITLE = re.compile(r'Performance profile\s*-\s*DPU Kernel\s+"(?P<kernel>[^"]*)"'
                          r'(?:\s+DPU Task\s+"(?P<task>[^"]*)")?')
_DNNDK_HEADER = ["id", "nodename", "workload(mop)", "mem(mb)", "runtime(ms)", "perf(gops)", "utilization",
                 "mb/s"]


def _is_dnndk_header(line: str) -> bool:
    return [t.lower() for t in line.split()] == _DNNDK_HEADER


def _dnndk_numbers(toks: list[str]) -> tuple[float, ...]:
    return tuple(_num(t) for t in toks)


def sniff(text: str, stripped: list[str], source: str) -> bool:
    """A DNNDK profile title or column header anywhere in the text."""
    return any(_DNNDK_TITLE.search(s) or _is_dnndk_header(s) for s in stripped)


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
