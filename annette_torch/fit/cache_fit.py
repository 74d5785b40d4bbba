"""Fit the in-context cache model (`annette_torch.models.cache.CacheModel`) from the ``cold_weights`` suite.

Each configuration runs one weighted layer (FC, 1x1 or 3x3 conv) after a pool that reads a chosen amount
of activations, so the layer finds its weights cached (small traffic) or evicted (large traffic). The
platform's layer models, fitted on the other suites, predict the warm time; the cache model explains the
difference. Traffic thresholds and the capacity are searched on a grid (log-spaced), the per-type penalties
are least-squares on relative error for each grid point, and the DRAM streaming bandwidth is searched last.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Sequence

import numpy as np

from ..ir import LayerType
from ..models.cache import MB, CacheModel, cold_share
from ..platform import Platform
from ..prediction import layer_times
from .data import Measured

__all__ = ["CONTEXT_SUITES", "cache_samples", "fit_cache", "MIN_CONFIGS"]

log = logging.getLogger(__name__)

#: suites measuring layers in context; the layer models are fitted without them
CONTEXT_SUITES = ("cold_weights",)
MIN_CONFIGS = 20
_LAYER = "w"  # the weighted layer's name in the suite's networks


def cache_samples(measured: Sequence[Measured], plat: Platform) -> dict[str, np.ndarray]:
    """Per ``cold_weights`` configuration: measured and warm-predicted ms, type, weight bytes, traffic."""
    rows: dict[str, list] = {"measured": [], "warm": [], "type": [], "weight_bytes": [], "traffic": []}
    for m in measured:
        if m.suite not in CONTEXT_SUITES or _LAYER not in m.records:
            continue
        rec = m.records[_LAYER]
        if rec.time_ms <= 0:
            continue
        mapped = plat.mapping.apply(m.network)
        mn = mapped.network
        t, mi = layer_times(plat, mapped, input_reorders=False, output_reorders=False)
        j = int(np.flatnonzero(np.asarray(mapped.kept) == m.network.names.index(_LAYER))[0])
        if mn.cols["kh"][j] > mn.cols["h_in"][j] or mn.cols["kw"][j] > mn.cols["w_in"][j]:
            continue  # a kernel wider than its input reads only part of its weights
        rows["measured"].append(rec.time_ms)
        rows["warm"].append(float(t[j]))
        rows["type"].append(int(mn.types[j]))
        rows["weight_bytes"].append(float(mn.weights[j] * plat.tables.weight_bytes[mi[j]]))
        rows["traffic"].append(float(plat.tables.layer_bytes(mn).sum()))
    return {k: np.asarray(v, dtype=np.int64 if k == "type" else np.float64) for k, v in rows.items()}


def _penalties(x: np.ndarray, types: np.ndarray, warm: np.ndarray, meas: np.ndarray) -> dict[int, float]:
    """Per type: the non-negative k minimising sum(((warm + k x) / meas - 1)^2)."""
    out = {}
    for t in np.unique(types):
        sel = types == t
        xs, r = x[sel] / meas[sel], (meas[sel] - warm[sel]) / meas[sel]
        den = float(xs @ xs)
        out[int(t)] = max(float(xs @ r) / den, 0.0) if den > 0 else 0.0
    return out


def _stream_bandwidths(base: np.ndarray, phi_w: np.ndarray, types: np.ndarray, meas: np.ndarray,
                       bws: np.ndarray) -> tuple[dict[int, float], float]:
    """Per type, the DRAM streaming bandwidth of ``bws`` with the least squared log error of
    ``max(base, phi_w / bw)`` (types are separable); and the summed error."""
    floor = phi_w[:, None] / bws[None, :] * 1e3
    sq = np.log(np.maximum(base[:, None], floor) / meas[:, None]) ** 2  # layers x candidate bandwidths
    out, total = {}, 0.0
    for t in np.unique(types):
        errs = sq[types == t].sum(axis=0)
        k = int(np.argmin(errs))
        out[int(t)], total = float(bws[k]), total + float(errs[k])
    return out, total


def fit_cache(measured: Sequence[Measured], plat: Platform) -> tuple[CacheModel | None, dict[str, Any]]:
    """The cache model of ``plat`` from its ``cold_weights`` measurements (None with a reason if too few)."""
    d = cache_samples(measured, plat)
    n = len(d["measured"])
    if n < MIN_CONFIGS:
        return None, {"configurations": n, "skipped": f"fewer than {MIN_CONFIGS} cold_weights configurations "
                                                         "measured (run the suite to model weights evicted "
                                                         "from the caches inside networks)"}
    meas, warm, types, w, traffic = d["measured"], d["warm"], d["type"], d["weight_bytes"], d["traffic"]

    def per_label(v: dict[int, float]) -> dict[str, float]:
        labels = {LayerType(t).label: x for t, x in v.items()}
        return {**labels, "default": labels.get("Conv", max(labels.values()))}  # other conv kinds: as Conv

    grid = np.geomspace(0.5 * MB, 512 * MB, 21)
    bws = np.geomspace(5e9, 500e9, 31)
    searched = ((lo, hi, cap) for i, lo in enumerate(grid) for hi in grid[i + 1:]
                for cap in np.geomspace(2 * MB, 256 * MB, 8))
    best: tuple[float, CacheModel] | None = None
    for lo, hi, cap in searched:
        phi = cold_share(traffic, lo, hi)
        x = phi * np.minimum(w, cap) / MB
        pen = _penalties(x, types, warm, meas)
        bw, err = _stream_bandwidths(warm + x * np.array([pen[int(t)] for t in types]), phi * w, types, meas, bws)
        if best is None or err < best[0]:
            best = (err, CacheModel(lo, hi, cap, per_label(pen), per_label(bw)))
    assert best is not None
    model = best[1]
    pred = model.apply(warm, types, w, traffic)
    report: dict[str, Any] = {"configurations": n, "mape_warm_models": float(np.mean(np.abs(warm / meas - 1))),
                              "mape_with_cache": float(np.mean(np.abs(pred / meas - 1)))}
    model = dataclasses.replace(model, origin=f"fitted on {n} cold_weights configurations: weighted-layer MAPE "
                                f"{report['mape_warm_models']:.1%} (warm layer models) -> {report['mape_with_cache']:.1%}")
    report["model"] = model.to_dict()
    log.info("cache model: %s", model.origin)
    return model, report
