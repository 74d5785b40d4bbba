"""Fit the in-context cache model (`annette_torch.models.cache.CacheModel`) from the ``cold_weights`` suite.

Each configuration runs one weighted layer (FC, 1x1 or 3x3 conv) after a pool that reads a chosen amount
of activations, so the layer finds its weights cached (small traffic) or evicted (large traffic). The
platform's layer models, fitted on the other suites, predict the warm time; the cache model explains the
difference. Traffic thresholds and the capacity are searched on a grid (log-spaced), the per-type penalties
are least-squares on relative error for each grid point, and the streaming bandwidth is searched last.
Then the optional DRAM tier (`CacheModel` docstring): its traffic thresholds on a grid above the first
tier's, a per-type DRAM bandwidth no higher than the first tier's; it is kept when it lowers the squared log
error enough to pay for its parameters (Akaike's criterion on the squared log error, and at least
`DRAM_MIN_LOG_ERROR` per configuration) with at least `MIN_DRAM_CONFIGS` configurations past its warm
threshold.
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
#: configurations with more traffic than the DRAM tier's warm threshold it needs
MIN_DRAM_CONFIGS = 5
#: the tier must remove at least this log error per configuration (squared, summed) besides paying for its
#: parameters: on data the first tier fits, the tier explains nothing
DRAM_MIN_LOG_ERROR = 0.02
#: warm / cold traffic thresholds the DRAM tier is searched on
DRAM_GRID = np.geomspace(16 * MB, 2048 * MB, 15)
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


def _dram_bandwidths(base: np.ndarray, w: np.ndarray, spb1: np.ndarray, phi2: np.ndarray, types: np.ndarray,
                     meas: np.ndarray, bw1: dict[int, float], bws: np.ndarray) -> tuple[dict[int, float], float]:
    """Per type, the DRAM bandwidth of ``bws`` (at most the type's first-tier ``bw1``) with the least squared
    log error of ``max(base, w * (spb1 + phi2 * (1 / bw - 1 / bw1)))``; and the summed error."""
    out, total = {}, 0.0
    for t in np.unique(types):
        sel = types == t
        cand = bws[bws <= bw1[int(t)]]
        cand = np.append(cand, bw1[int(t)]) if len(cand) == 0 or cand[-1] < bw1[int(t)] else cand
        extra = np.maximum(1.0 / cand - 1.0 / bw1[int(t)], 0.0)  # candidates
        floor = w[sel, None] * (spb1[sel, None] + phi2[sel, None] * extra[None, :]) * 1e3
        errs = (np.log(np.maximum(base[sel, None], floor) / meas[sel, None]) ** 2).sum(axis=0)
        k = int(np.argmin(errs))
        out[int(t)], total = float(cand[k]), total + float(errs[k])
    return out, total


def _per_label(v: dict[int, float]) -> dict[str, float]:
    labels = {LayerType(t).label: x for t, x in v.items()}
    return {**labels, "default": labels.get("Conv", max(labels.values()))}  # other conv kinds: as Conv


_BWS = np.geomspace(5e9, 500e9, 31)


def _first_tier(d: dict[str, np.ndarray], sel: np.ndarray, max_cold: float = np.inf) -> tuple[float, CacheModel]:
    """The one-tier model fitted on the configurations ``sel`` (thresholds, capacity on the grid; cold
    threshold at most ``max_cold``) and its squared log error there."""
    meas, warm, types, w, traffic = (d[k][sel] for k in ("measured", "warm", "type", "weight_bytes", "traffic"))
    grid = np.geomspace(0.5 * MB, 512 * MB, 21)
    searched = ((lo, hi, cap) for i, lo in enumerate(grid) for hi in grid[i + 1:] if hi <= max_cold * (1 + 1e-9)
                for cap in np.geomspace(2 * MB, 256 * MB, 8))
    best: tuple[float, CacheModel] | None = None
    for lo, hi, cap in searched:
        phi = cold_share(traffic, lo, hi)
        x = phi * np.minimum(w, cap) / MB
        pen = _penalties(x, types, warm, meas)
        bw, err = _stream_bandwidths(warm + x * np.array([pen[int(t)] for t in types]), phi * w, types, meas, _BWS)
        if best is None or err < best[0]:
            best = (err, CacheModel(lo, hi, cap, _per_label(pen), _per_label(bw)))
    assert best is not None
    return best


def _with_dram_tier(model: CacheModel, d: dict[str, np.ndarray], lo: float) -> tuple[float, CacheModel]:
    """``model`` plus the DRAM tier from ``lo`` bytes of traffic with the least squared log error on all
    configurations (its cold threshold on the grid, bandwidths per type)."""
    meas, warm, types, w, traffic = d["measured"], d["warm"], d["type"], d["weight_bytes"], d["traffic"]
    phi = model.cold_share(traffic)
    base = warm + phi * model._pen[types] * np.minimum(w, model.capacity_bytes) / MB
    bw1 = {int(t): float(model._bw[int(t)]) for t in np.unique(types)}
    spb1 = model.seconds_per_byte(types, traffic, phi)  # (one tier: phi / stream bandwidth)
    best: tuple[float, CacheModel] | None = None
    for hi in DRAM_GRID[DRAM_GRID > lo * (1 + 1e-9)]:
        bw2, err = _dram_bandwidths(base, w, spb1, cold_share(traffic, lo, hi), types, meas, bw1, _BWS)
        if best is None or err < best[0]:
            best = (err, dataclasses.replace(model, dram_warm_bytes=float(lo), dram_cold_bytes=float(hi),
                                             dram_bandwidth=_per_label(bw2)))
    assert best is not None
    return best


def _fit_tiers(d: dict[str, np.ndarray]) -> tuple[CacheModel, dict[str, Any]]:
    """The one-tier model fitted on all configurations, or the two-tier one when its squared log error pays
    for its parameters (two thresholds and a bandwidth per type; Akaike's criterion, n log(err2 / err1) + 2 k
    < 0) and is lower by `DRAM_MIN_LOG_ERROR` per configuration: for each DRAM warm threshold the first tier is
    fitted on the configurations with less traffic (fitted on all, it stretched its ramp to 512 MB to mimic
    both tiers) and the DRAM tier on all."""
    traffic, n = d["traffic"], len(d["measured"])
    err1, one = _first_tier(d, np.ones(n, bool))
    rep: dict[str, Any] = {"error_one_tier": err1}
    best: tuple[float, CacheModel] | None = None
    for lo in DRAM_GRID:
        below = traffic <= lo
        if below.sum() < MIN_CONFIGS or (~below).sum() < MIN_DRAM_CONFIGS:
            continue
        _, first = _first_tier(d, below, max_cold=lo)
        cand = _with_dram_tier(first, d, lo)
        if best is None or cand[0] < best[0]:
            best = cand
    if best is None:
        rep["skipped"] = (f"fewer than {MIN_DRAM_CONFIGS} configurations beyond, or {MIN_CONFIGS} below, every "
                          "DRAM threshold")
        return one, rep
    rep["error_two_tiers"] = best[0]
    k = 2 + len(np.unique(d["type"]))
    aic = n * np.log(max(best[0], 1e-300) / max(err1, 1e-300)) + 2 * k
    rep["aic_change"] = float(aic)
    if not (aic < 0 and err1 - best[0] > n * DRAM_MIN_LOG_ERROR ** 2):
        rep["skipped"] = (f"a DRAM tier does not pay for its {k} parameters (Akaike) or lowers the squared log "
                          f"error by less than {DRAM_MIN_LOG_ERROR:.0%} per configuration")
        return one, rep
    return best[1], rep


def fit_cache(measured: Sequence[Measured], plat: Platform) -> tuple[CacheModel | None, dict[str, Any]]:
    """The cache model of ``plat`` from its ``cold_weights`` measurements (None with a reason if too few)."""
    d = cache_samples(measured, plat)
    n = len(d["measured"])
    if n < MIN_CONFIGS:
        return None, {"configurations": n, "skipped": f"fewer than {MIN_CONFIGS} cold_weights configurations "
                                                         "measured (run the suite to model weights evicted "
                                                         "from the caches inside networks)"}
    meas, warm, types, w, traffic = d["measured"], d["warm"], d["type"], d["weight_bytes"], d["traffic"]
    model, dram_rep = _fit_tiers(d)
    pred = model.apply(warm, types, w, traffic)
    report: dict[str, Any] = {"configurations": n, "mape_warm_models": float(np.mean(np.abs(warm / meas - 1))),
                              "mape_with_cache": float(np.mean(np.abs(pred / meas - 1))), "dram_tier": dram_rep}
    tier = " and a DRAM tier" if model.has_dram_tier else ""
    model = dataclasses.replace(model, origin=f"fitted on {n} cold_weights configurations{tier}: weighted-layer "
                                f"MAPE {report['mape_warm_models']:.1%} (warm layer models) -> "
                                f"{report['mape_with_cache']:.1%}")
    report["model"] = model.to_dict()
    log.info("cache model: %s", model.origin)
    return model, report
