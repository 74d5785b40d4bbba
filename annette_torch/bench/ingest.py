"""Store profiler reports copied back from a board (ZCU102), matched against the networks they measured."""

from __future__ import annotations

import json
import logging
import os
from typing import Sequence

import numpy as np

from ..errors import AnnetteError
from .records import NOT_FUSED, LayerRecord
from .store import ConfigResult, Store

__all__ = ["ingest_reports"]

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


def ingest_reports(paths: Sequence[str], platform: str, db: str) -> tuple[int, int]:
    """Parse, match and store every report under ``paths``; returns (stored, unreadable).

    A report from a job folder written by ``annette bench --platform zcu102`` is matched against the
    benchmark network it measured (suite and configuration are in the job folder); a loose report is stored
    node by node under the suite ``ingested``. Each report is stored atomically; an unreadable one is
    skipped with a warning and nothing of it is stored.
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
        return 0, bad
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
            st.add(run_id, platform, ConfigResult(
                suite, cid, config, "ok", layers,
                e2e_median_ms=float(np.median(e2e)) if e2e.size else None,
                e2e_min_ms=float(e2e.min()) if e2e.size else None,
                e2e_std_ms=float(e2e.std()) if e2e.size else None, iterations=int(e2e.size) or None))
    return len(runs), bad
