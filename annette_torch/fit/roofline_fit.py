"""Fit roofline and refined-roofline layer models to measured layers.

Roofline: peak operations per second and peak bandwidth are the rates the measured layers reach at the
top (a high percentile of ops/time among compute-heavy layers and of bytes/time among memory-heavy ones),
so the roofline stays an optimistic bound, as in the paper.

Refined roofline: the unrolling parameter s of each dimension (h, w, c, f) is found by scanning candidate
values and keeping those whose step-wise utilisation explains the measured times best; op_s, bandwidth and
the efficiencies alpha are then fitted by least squares on log time.
"""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np
from scipy.optimize import least_squares

from ..models import LayerFeatures, RefinedRoofline, Roofline
from ..models.refined import DIMENSIONS, dimension_sizes, efficiency

__all__ = ["fit_roofline", "fit_refined", "S_CANDIDATES"]

log = logging.getLogger(__name__)

#: unrolling factors tried per dimension (1 = not unrolled)
S_CANDIDATES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


def fit_roofline(X: LayerFeatures, y_ms: np.ndarray, bit_act: float = 32, bit_weights: float = 32,
                 q: float = 95.0) -> Roofline:
    """Peak op_s / bandwidth as the ``q``-th percentile of the achieved rates (robust upper envelope)."""
    y = np.asarray(y_ms, dtype=np.float64) * 1e-3
    ok = y > 0
    if ok.sum() < 2:
        raise ValueError("need at least two measured layers with a positive time")
    ops, byts = X.ops[ok], X.bytes(bit_act, bit_weights)[ok]
    y = y[ok]
    m = Roofline(1.0, 1.0, bit_act, bit_weights)
    m.bandwidth = float(np.percentile(byts / y, q))
    if (ops > 0).any():
        m.op_s = float(np.percentile(ops[ops > 0] / y[ops > 0], q))
    else:  # data movement only: make compute never the bottleneck
        m.op_s = 1e18
    return m


def _log_residuals(params: np.ndarray, ops, byts, sizes, dims, s_vals, reps, logy):
    op_s, bw = np.exp(np.clip(params[:2], -60.0, 80.0))
    alphas = params[2:]
    eff = np.ones_like(ops)
    for d, s, rep, a in zip(dims, s_vals, reps, alphas):
        eff = eff * efficiency(sizes[d], s, float(np.clip(a, 0, 1)), rep)
    t = np.maximum(ops / (op_s * eff), byts / bw)
    return np.log(np.maximum(t, 1e-12)) - logy


def _fit(ops, byts, sizes, dims, s_vals, reps, logy, x0):
    lb = [-np.inf, -np.inf] + [0.0] * len(dims)
    ub = [np.inf, np.inf] + [1.0] * len(dims)
    x0 = np.clip(x0, [b + 1e-9 if np.isfinite(b) else -1e9 for b in lb], [b - 1e-9 if np.isfinite(b) else 1e9 for b in ub])
    r = least_squares(_log_residuals, x0, bounds=(lb, ub), loss="soft_l1", f_scale=0.1,
                      args=(ops, byts, sizes, dims, s_vals, reps, logy))
    return r.x, float(np.mean(np.abs(np.expm1(r.fun))))


def fit_refined(X: LayerFeatures, y_ms: np.ndarray, bit_act: float = 32, bit_weights: float = 32,
                dims: Sequence[str] = DIMENSIONS, candidates: Sequence[int] = S_CANDIDATES,
                replicate: bool = False, min_gain: float = 0.005) -> tuple[RefinedRoofline, dict]:
    """Refined roofline fitted to measured layers; returns the model and a report (error per step).

    Dimensions are added greedily: each round tries every (dimension, s) pair and keeps the one that lowers
    the mean relative error most, until no pair gains ``min_gain``.
    """
    y = np.asarray(y_ms, dtype=np.float64) * 1e-3
    ok = y > 0
    Xs = X.take(ok)
    y = y[ok]
    if y.size < 8:
        raise ValueError(f"need at least 8 measured layers to fit a refined roofline, got {y.size}")
    ops, byts = Xs.ops, Xs.bytes(bit_act, bit_weights)
    sizes = dimension_sizes(Xs)
    logy = np.log(y)
    base = fit_roofline(Xs, y * 1e3, bit_act, bit_weights)
    x, err = _fit(ops, byts, sizes, [], [], [], logy, np.log([base.op_s, base.bandwidth]))
    report = {"roofline_mre": err, "steps": []}
    chosen: list[tuple[str, int]] = []
    alphas: list[float] = []
    while True:
        best = None
        for d in dims:
            if d in [c[0] for c in chosen]:
                continue
            for s in candidates:
                if s <= 1 or np.all(sizes[d] % s == 0):
                    continue
                xx, e = _fit(ops, byts, sizes, [c[0] for c in chosen] + [d], [c[1] for c in chosen] + [s],
                             [replicate] * (len(chosen) + 1), logy, np.concatenate([x[:2], alphas, [0.5]]))
                if best is None or e < best[0]:
                    best = (e, d, s, xx)
        if best is None or best[0] > err - min_gain:
            break
        err, d, s, x = best
        chosen.append((d, s))
        alphas = list(x[2:])
        report["steps"].append({"dim": d, "s": s, "mre": err})
    unroll = {d: {"s": float(s), "alpha": float(np.clip(a, 0, 1)), "replicate": replicate}
              for (d, s), a in zip(chosen, alphas)}
    op_s, bandwidth = np.exp(np.clip(x[:2], -60.0, 80.0))  # as the residuals saw them (never infinite)
    m = RefinedRoofline(float(op_s), float(bandwidth), bit_act, bit_weights, unroll=unroll)
    report["mre"] = err
    return m, report
