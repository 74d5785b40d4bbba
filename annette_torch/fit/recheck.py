"""Measure again what a first fit finds far slower than it predicts, and keep the faster measurement.

A slow spell of a shared machine slows every inference of the configuration measured during it, so it looks like a
slow layer, and a quick calibration's few samples of a region follow it: one MLP configuration measured at
52 GFLOP/s, where its neighbours ran at 150-185, bent an OpenVINO FullyConnected model around 768-wide layers and
put ViT-B/16 36% high. `annette calibrate` therefore re-measures the configurations whose layers took at least
`RATIO` times what the first fit predicts (the worst `MAX_CONFIGS`, each at least `MIN_MS`) and stores a
re-measurement that comes out `FASTER` in place of the first; then it fits again. A layer that is really slow
measures slow again and stays. The first fit has seen the outlier, so it shows damped (that MLP at 1.31x; 17
configurations of the OpenVINO quick plan reached 1.25x, 15 s to measure again, three came out faster).
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING, Any, Callable

from ..bench.store import ConfigResult, Store
from ..platform import Platform
from .data import Measured, load_measured

if TYPE_CHECKING:
    from ..bench.sweep import MeasuringProcess

__all__ = ["RATIO", "MAX_CONFIGS", "MIN_MS", "FASTER", "suspects", "recheck"]

#: measured over predicted layer time at or above which a configuration is measured again
RATIO = 1.25
#: at most this many configurations per calibration (the worst ratios first)
MAX_CONFIGS = 24
#: configurations whose layers took less (ms) are left alone: timer resolution and dispatch dominate there
MIN_MS = 0.3
#: a re-measurement replaces the stored one when its end-to-end median is below this share of the stored one
FASTER = 0.9


def suspects(measured: list[Measured], plat: Platform, skip: tuple[str, ...] = ()) -> list[tuple[float, Measured]]:
    """(measured / predicted layer time, configuration) of the configurations to measure again, worst first;
    ``plat``: layer and mapping models without end-to-end terms (as `fit_platform` returns them); ``skip``:
    suites left alone (those no layer model is fitted on)."""
    from ..prediction.passes import run

    out = []
    for m in measured:
        if m.suite in skip:
            continue
        took = sum(r.time_ms for r in m.records.values())
        if took < MIN_MS:
            continue
        r = run(plat, m.network)
        assert r.time_ms is not None
        predicted = float(r.time_ms.sum())
        if predicted > 0 and took >= RATIO * predicted:
            out.append((took / predicted, m))
    out.sort(key=lambda t: -t[0])
    return out[:MAX_CONFIGS]


def recheck(db: str, platform: str, plat: Platform, runner: str, runner_kwargs: dict[str, Any],
            skip: tuple[str, ...] = (), progress: Callable[[str], None] | None = None,
            process: MeasuringProcess | None = None) -> dict[str, Any]:
    """Measure the `suspects` of ``plat`` (a `fit_platform` result) in ``db`` again (into a scratch store) and
    replace each stored configuration whose re-measurement is `FASTER`; returns {checked, replaced:
    [suite/config_id, ...]}. ``process``: the `bench.sweep.MeasuringProcess` to measure in."""
    from ..bench.sweep import run_sweep

    with Store(db) as st:
        todo = suspects(load_measured(st, platform), plat, skip)
        if not todo:
            return {"checked": 0, "replaced": []}
        run_id = [r for r in st.runs() if r["platform"] == platform][-1]["id"]
        if progress:
            progress(f"measuring {len(todo)} configurations again (their layers took {todo[-1][0]:.2f}-"
                     f"{todo[0][0]:.2f}x what the fit predicts)")
        stored = {(m.suite, m.config_id): m for _, m in todo}
        again: list[ConfigResult] = []
        with tempfile.TemporaryDirectory() as tmp, Store(os.path.join(tmp, "recheck.sqlite")) as scratch:
            for suite in sorted({s for s, _ in stored}):
                run_sweep(scratch, platform, suite, [m.params for (s, _), m in stored.items() if s == suite],
                          runner, runner_kwargs, iterations=20, warmup=3, progress=False, on_result=again.append,
                          process=process)
        replaced = []
        for r in again:
            old = stored[(r.suite, r.config_id)].e2e_ms
            if r.status == "ok" and old and r.e2e_median_ms is not None and r.e2e_median_ms < FASTER * old:
                st.add(run_id, platform, r, replace=True)
                replaced.append(f"{r.suite}/{r.config_id}")
    return {"checked": len(todo), "replaced": replaced}
