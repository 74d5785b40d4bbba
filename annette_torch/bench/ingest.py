"""Store profiler reports copied back from a device (ZCU102 job folders, OpenVINO benchmark_app counters
reports of the NCS2), matched against the networks they measured."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from ..errors import AnnetteError
from ..ir import LayerType, Network
from .parsers.benchmark_app import BenchmarkAppReportError, CounterReport, parse_counters
from .records import NOT_FUSED, POSSIBLY_FUSED, LayerRecord, NodeRecord
from .store import ConfigResult, Store

__all__ = ["ingest_reports", "ingest_benchmark_app", "match_benchmark_app", "MatchedReport", "GRAPH_SUITE"]

log = logging.getLogger(__name__)

JOB_FILE = "annette-job.json"  # written next to each job folder's files by `annette bench --platform zcu102`


def _job_meta(job_dir) -> dict | None:
    if job_dir is None:
        return None
    p = os.path.join(str(job_dir), JOB_FILE)
    if not os.path.isfile(p):
        return None
    with open(p, encoding="utf-8") as f:
        return json.load(f)


def ingest_reports(paths: Sequence[str], platform: str, db: str) -> tuple[int, int, int]:
    """Parse, match and store every report under ``paths``; returns (stored, unreadable, already stored).

    A report from a job folder written by ``annette bench --platform zcu102`` is matched against the
    benchmark network it measured (suite and configuration are in the job folder) and ends that
    configuration's claim; a loose report is stored node by node under the suite ``ingested``. Each report
    is stored atomically; an unreadable one is skipped with a warning and nothing of it is stored; one
    already in the store (ingested before, or by another machine) is left as stored. ``db`` is a store file
    or URL.
    """
    from .matcher import match
    from .runners.vitis import VitisRunner, collect
    from ..platform.machine import machine_fingerprint
    from .suites import SUITES

    runs, bad = [], 0
    for p in paths:
        try:
            runs.extend(collect([p]))
        except AnnetteError as e:
            bad += 1
            log.warning("%s", e)
    if not runs:
        return 0, bad, 0
    stored = kept = 0
    with Store(db) as st:
        run_id = st.start_run(platform, "vitis", VitisRunner().toolchain(), {**machine_fingerprint(), "board": platform})
        for r in runs:
            meta = _job_meta(r.job_dir)
            e2e = np.asarray(r.report.e2e_ms, dtype=np.float64)
            if meta and meta.get("suite") in SUITES:
                config = meta["config"]
                net = SUITES[meta["suite"]].build(config)
                layers = match(net, r.records, "vitis")
                suite, cid = meta["suite"], config["config_id"]
            else:
                config, suite, cid = {"report": str(r.path)}, "ingested", r.name
                layers = [LayerRecord(layer=n.node, layer_type=n.node_type, fused=NOT_FUSED, node=n.node,
                                      node_type=n.node_type, exec_kind=n.exec_kind, time_ms=n.median_ms,
                                      min_ms=n.min_ms, std_ms=n.std_ms) for n in r.records]
            new = st.add(run_id, platform, ConfigResult(
                suite, cid, config, "ok", layers,
                e2e_median_ms=float(np.median(e2e)) if e2e.size else None,
                e2e_min_ms=float(e2e.min()) if e2e.size else None,
                e2e_std_ms=float(e2e.std()) if e2e.size else None, iterations=int(e2e.size) or None))
            stored, kept = stored + new, kept + (not new)
    return stored, bad, kept


# ----------------------------------------------------------------------------------------------- benchmark_app

#: suite under which `ingest_benchmark_app` stores a measured network (config_id = the network's name)
GRAPH_SUITE = "graph"


@dataclass
class MatchedReport:
    """One benchmark_app counters report matched against the network it measured."""

    graph: str
    report: str
    network: Network
    parsed: CounterReport
    layers: list[LayerRecord]

    @property
    def config_id(self) -> str:
        return self.network.name or os.path.splitext(os.path.basename(self.graph))[0]


def _aliases(records: Sequence[NodeRecord], net: Network) -> list[NodeRecord]:
    """Records whose name is no layer's get the one layer named ``<name>_<k>`` of a fitting role as an
    alias (converters split e.g. Caffe's ``classifier`` into ``classifier_0`` (Flatten) + ``classifier_1``)."""
    from .matcher import _can_head
    names = set(net.names)
    by_prefix: dict[str, list[int]] = {}
    for i, n in enumerate(net.names):
        head, _, tail = n.rpartition("_")
        if head and tail.isdigit():
            by_prefix.setdefault(head, []).append(i)
    out = []
    for r in records:
        if r.node not in names and r.node in by_prefix:
            fits = [i for i in by_prefix[r.node] if _can_head(r.node_type, LayerType(int(net.types[i])))]
            if len(fits) == 1:
                r = replace(r, layers=(r.node, net.names[fits[0]]))
        out.append(r)
    return out


def _in_place(layers: list[LayerRecord], parsed: CounterReport) -> list[LayerRecord]:
    """A Concat the MYRIAD plugin lists NOT_RUN under its own name (``StubConcat``: its producers write into
    one buffer) costs nothing of its own: its own survivor with time 0, not 'possibly fused'."""
    stub = {r.node for r in parsed.records if r.status == "not-run" and r.extra.get("exec_type") == "StubConcat"}
    return [replace(L, fused=NOT_FUSED, fused_into="", node=L.layer, node_type="Concat", exec_kind="in-place")
            if L.fused == POSSIBLY_FUSED and L.layer in stub else L for L in layers]


def match_benchmark_app(graph: str | os.PathLike, report: str | os.PathLike) -> MatchedReport:
    """Parse a counters report and match its layers against the network in ``graph`` (.json / .onnx)."""
    from ..estimator import to_network
    from .matcher import match

    net = to_network(os.fspath(graph))
    parsed = parse_counters(report)
    layers = _in_place(match(net, _aliases(parsed.records, net), "openvino"), parsed)
    named = {r.node for r in parsed.executed()}
    hit = named & set(net.names) | {a for r in parsed.executed() for a in r.layers[1:]}
    share = len(hit & set(net.names)) / max(len(named), 1)
    if share < 0.5:
        raise BenchmarkAppReportError(f"{report}: only {share:.0%} of its executed layers are layers of {graph}; "
                          "is it the report of another network?")
    return MatchedReport(os.fspath(graph), os.fspath(report), net, parsed, layers)


def ingest_benchmark_app(pairs: Sequence[tuple[str, str]], platform: str, db: str,
                         replace_stored: bool = False) -> tuple[int, int]:
    """Store benchmark_app counters reports, each matched against its graph: returns (stored, already stored).

    Every report is parsed and matched before anything is written, so a bad one stores nothing (its error
    names file and line). A network already stored for ``platform`` is left as it is unless
    ``replace_stored``. The configuration's end-to-end time is the report's Total (device time).
    """
    from ..platform.machine import machine_fingerprint

    matched = [match_benchmark_app(g, r) for g, r in pairs]
    ids = [m.config_id for m in matched]
    if len(set(ids)) != len(ids):
        twice = ", ".join(sorted({i for i in ids if ids.count(i) > 1}))
        raise BenchmarkAppReportError(f"two reports for the same network ({twice})")
    stored = skipped = 0
    with Store(db) as st:
        done = st.done(platform, GRAPH_SUITE)
        todo = [m for m in matched if replace_stored or m.config_id not in done]
        skipped = len(matched) - len(todo)
        if not todo:
            return 0, skipped
        plugins = sorted({m.parsed.plugin for m in todo})
        run_id = st.start_run(platform, "benchmark_app", {"toolchain": "openvino benchmark_app",
                                                          "plugins": plugins, "source": "ingested reports"},
                              {**machine_fingerprint(), "board": platform})
        for m in todo:
            totals = m.parsed.totals_ms
            new = st.add(run_id, platform, ConfigResult(
                GRAPH_SUITE, m.config_id,
                {"graph": os.path.abspath(m.graph), "report": os.path.abspath(m.report), "format": m.parsed.format,
                 "plugin": m.parsed.plugin},
                "ok", m.layers, e2e_median_ms=float(np.median(totals)), e2e_min_ms=float(totals.min()),
                e2e_std_ms=float(totals.std()), iterations=int(totals.size)), replace=replace_stored)
            stored, skipped = stored + new, skipped + (not new)  # not new: another process stored it meanwhile
    return stored, skipped
