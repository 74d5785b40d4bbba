"""Fit the mapping model's costs (`annette_torch.mapping.costs.MappingCosts`) from benchmark data.

* Fused-layer work: the layer models of a first pass (fitted on fused groups whatever they absorbed)
  leave a residual per group. Per executing type P and fused type A (``conv_act``, ``dw_act``,
  ``conv_bn_relu``, ``dwsep`` ... give every activation behind convolutions), the median residual per fused
  element, minus the same median of P's groups with nothing fused (the first-pass model carries the
  average epilogue; without such groups, the cheapest A counts as free), clipped at 0 and averaged over P
  weighted by counts.
* Inserted reorders: every configuration's inserted-node time is least squares (non-negative, relative
  weights) over per-type counts, tensor elements and tensor pixels of its graph-input consumers and graph
  outputs; input and output sides separately where the toolchain's node names tell them apart.
* BatchNorm is folded into the convolution's weights by every toolchain here: never costed.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from scipy.optimize import lsq_linear

from ..ir import LayerType
from ..mapping.costs import COEFS, LAYOUT_SIDES, narrow_pixels
from ..mapping.layout import layout_reorders
from ..platform import Platform
from ..prediction import model_times
from .data import LayerSamples

__all__ = ["fit_fused_costs", "fit_inserted", "fit_layout", "MIN_GROUPS", "MIN_CONFIGS", "fused_primaries",
           "MAX_LAYOUT_MAPE"]

log = logging.getLogger(__name__)

MIN_GROUPS = 15    # groups per (executing type, fused type) for a median
MIN_CONFIGS = 20   # configurations per (type, input/output) for an inserted-reorder term
#: layout reorders (`fit_layout`) are costed only when they explain the measured reorder time to this relative
#: error (configurations with > 0.05 ms of it); else the layout breakers keep carrying it
MAX_LAYOUT_MAPE = 0.35
#: `fit_layout`'s weights: relative errors above this inserted time (ms), absolute below it
LAYOUT_FLOOR_MS = 0.2
#: `fit_layout`'s candidate sizes (million elements) beyond which a reorder may cost more per element (it
#: outgrows the caches); the one that fits best is kept (or none)
OVER_MELEM = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
#: fused groups with fewer fused output elements than this say nothing per element (a squeeze-excite gate's
#: 1x1 maps: the group's time is all call overhead and noise) and do not enter the medians
MIN_FUSED_ELEMS = 4096
#: below this (ns per element) a fused type is taken as free
_NS_FLOOR = 0.005


def fused_primaries(ls: LayerSamples) -> set[int]:
    """Executing types with fused groups of at least two fused types (needed for a baseline)."""
    out = set()
    ok = (ls.fused_type >= 0) & (ls.fused_type != LayerType.BATCH_NORM) & (ls.time_ms > 0)
    for p in np.unique(ls.network.types[ok]):
        sel = ok & (ls.network.types == p)
        _, counts = np.unique(ls.fused_type[sel], return_counts=True)
        if (counts >= MIN_GROUPS).sum() >= 2:
            out.add(int(p))
    return out


def fit_fused_costs(ls: LayerSamples, first_pass: Platform,
                    primaries: set[int] | None = None) -> tuple[dict[str, float], dict[str, Any]]:
    """ns per output element of each fused layer type, from ``first_pass``'s residuals on ``ls``.

    ``primaries``: the executing types to look at (default `fused_primaries`).
    """
    net = ls.network
    pred = model_times(first_pass.tables, net)[0]  # (the first pass has layer models only)
    ok = (ls.fused_type >= 0) & (ls.fused_type != LayerType.BATCH_NORM) & (ls.time_ms > 0) \
        & (ls.fused_elems >= MIN_FUSED_ELEMS)
    per_elem = (ls.time_ms - pred) / np.maximum(ls.fused_elems, 1.0) * 1e6  # ns per fused element
    sums: dict[int, list[float]] = {}
    report: dict[str, Any] = {"medians_ns": {}}
    for p in sorted(fused_primaries(ls) if primaries is None else primaries):
        sel = ok & (net.types == p)
        med = {}
        for a in np.unique(ls.fused_type[sel]):
            rows = sel & (ls.fused_type == a)
            if rows.sum() >= MIN_GROUPS:
                med[int(a)] = (float(np.median(per_elem[rows])), int(rows.sum()))
        # the baseline: groups of P with nothing (or only a folded BatchNorm) fused, per output element; else
        # the cheapest fused type
        plain = (net.types == p) & np.isin(ls.fused_type, (-1, int(LayerType.BATCH_NORM))) & (ls.time_ms > 0) \
            & (net.out_elems >= MIN_FUSED_ELEMS)
        if plain.sum() >= MIN_GROUPS:
            base = float(np.median((ls.time_ms - pred)[plain] / np.maximum(net.out_elems[plain], 1.0) * 1e6))
        elif med:
            base = min(v for v, _ in med.values())
        else:  # fused groups exist, but none large enough to measure a per-element cost on: nothing to learn
            continue
        report["medians_ns"][LayerType(p).label] = {"(none)": round(base, 4),
                                                    **{LayerType(a).label: round(v, 4) for a, (v, _) in med.items()}}
        for a, (v, n) in med.items():
            s = sums.setdefault(a, [0.0, 0.0])
            s[0] += max(v - base, 0.0) * n
            s[1] += n
    costs = {LayerType(a).label: s[0] / s[1] for a, s in sums.items() if s[1] and s[0] / s[1] > _NS_FLOOR}
    report["fused_ns"] = costs
    log.info("fused-layer costs (ns/element): %s", {k: round(v, 3) for k, v in costs.items()})
    return costs, report


def _boundary_features(ls: LayerSamples) -> tuple[np.ndarray, list[tuple[str, int, str]]]:
    """Per configuration: count, Melements and Mpixels of graph-input consumers and graph outputs, per type."""
    net, cfg, n_cfg = ls.network, ls.config, len(ls.configs)
    cols: dict[tuple[str, int, str], np.ndarray] = {}
    types = net.types
    if net.edges.size:
        src, dst = net.edges[:, 0], net.edges[:, 1]
        sel = types[src] == LayerType.INPUT
        ends = [("input", dst[sel], src[sel])]
    else:
        ends = []
    outs = np.flatnonzero((net.n_outputs == 0) & (types != LayerType.INPUT))
    ends.append(("output", outs, outs))
    for side, typed, sized in ends:
        for t in np.unique(types[typed]):
            m = types[typed] == t
            c = cfg[sized[m]]
            if np.unique(c).size < MIN_CONFIGS:
                continue
            if side == "input":  # every configuration has one input and one output: one fixed term only
                cols[(side, int(t), "ms")] = np.bincount(c, minlength=n_cfg).astype(float)
            e = net.out_elems[sized[m]] * 1e-6
            cols[(side, int(t), "ms_per_melem")] = np.bincount(c, weights=e, minlength=n_cfg)
            cols[(side, int(t), "ms_per_mpixel")] = np.bincount(
                c, weights=narrow_pixels(net, sized[m]) * 1e-6, minlength=n_cfg)
    keys = list(cols)
    X = np.column_stack([cols[k] for k in keys]) if keys else np.zeros((n_cfg, 0))
    return X, [(s, t, f) for s, t, f in keys]


def fit_inserted(ls: LayerSamples) -> tuple[dict[str, tuple[float, ...]], dict[str, tuple[float, ...]],
                                            dict[str, Any]]:
    """Reorder cost per type at graph inputs and outputs, from each configuration's inserted-node time."""
    y = ls.inserted_ms
    X, keys = _boundary_features(ls)
    report: dict[str, Any] = {"configurations": int(y.size), "with_inserted": int((y > 0).sum())}
    if not keys or not (y > 0).any():
        report["skipped"] = "no inserted nodes measured"
        return {}, {}, report
    tables: dict[str, dict[str, list[float]]] = {"input": {}, "output": {}}
    sol = np.zeros(len(keys))
    # nodes at a graph input are told apart where the toolchain names them (`data.inserted_at_input`):
    # each side is then fitted on its own time, so large output reorders do not swamp the input ones
    y_in = ls.inserted_input_ms if ls.inserted_input_ms.size == y.size else np.zeros_like(y)
    split = bool(y_in.any())
    for side in ("input", "output") if split else ("both",):
        cols = [i for i, k in enumerate(keys) if side in ("both", k[0])]
        target = y if side == "both" else (y_in if side == "input" else y - y_in)
        if not cols:
            continue
        w = 1.0 / (target + 0.05)  # relative error for large reorders, absolute (~50 us) for tiny ones
        sol[cols] = lsq_linear(X[:, cols] * w[:, None], target * w, bounds=(0.0, np.inf)).x
    report["input_told_apart"] = split
    for (side, t, f), v in zip(keys, sol):
        tables[side].setdefault(LayerType(t).label, [0.0] * len(COEFS))[COEFS.index(f)] = float(v)
    pred = X @ sol
    big = y > 0.05
    report.update({"mean_ms_measured": float(y.mean()), "mean_ms_predicted": float(pred.mean()),
                   "mape_over_0.05ms": float(np.mean(np.abs(pred[big] / y[big] - 1))) if big.any() else None})
    clean = {side: {k: tuple(v) for k, v in tab.items() if any(x > 1e-9 for x in v)} for side, tab in tables.items()}
    report["input"], report["output"] = clean["input"], clean["output"]
    return clean["input"], clean["output"], report


def fit_layout(ls: LayerSamples) -> tuple[dict[str, tuple[float, ...]], dict[str, Any]]:
    """Cost of a layout reorder per direction (`annette_torch.mapping.layout`): fixed ms, ms per million
    elements and per million pixels of the reordered tensor and per million elements beyond a size (the best
    of `OVER_MELEM`), least squares (non-negative, relative weights) of every configuration's inserted time
    over its predicted reorders, those of its graph input apart (their per-type terms are `fit_inserted`'s: a
    runtime's node names do not always tell them apart); empty (report says why) when the fit explains the
    time worse than `MAX_LAYOUT_MAPE`."""
    net, cfg, n_cfg = ls.network, ls.config, len(ls.configs)
    report: dict[str, Any] = {}
    if ls.all_inserted_ms.size != n_cfg:
        report["skipped"] = "no inserted-time totals"
        return {}, report
    y = ls.all_inserted_ms
    to_plain, to_blocked = layout_reorders(net, inputs=True)
    at_input = net.types == LayerType.INPUT
    cols, sides = [], []  # (sides: per kind of reorder, its configurations and million elements)
    for mask in (to_plain, to_blocked & ~at_input, to_blocked & at_input):
        rows = np.flatnonzero(mask)
        c = cfg[rows]
        cols += [np.bincount(c, minlength=n_cfg).astype(float),
                 np.bincount(c, weights=net.out_elems[rows] * 1e-6, minlength=n_cfg),
                 np.bincount(c, weights=narrow_pixels(net, rows) * 1e-6, minlength=n_cfg)]
        sides.append((c, net.out_elems[rows] * 1e-6))
    X = np.column_stack(cols)
    used = (X[:, 0] > 0) | (X[:, 3] > 0)  # (configurations with inner or graph-output reorders)
    report.update(configurations=int(n_cfg), with_reorders=int(used.sum()), with_inserted=int((y > 0).sum()))
    if used.sum() < MIN_CONFIGS or not (y > 0).any():
        report["skipped"] = "too few configurations with layout reorders"
        return {}, report
    w = 1.0 / (y + LAYOUT_FLOOR_MS)
    best = None
    c_all, e_all = np.concatenate([c for c, _ in sides]), np.concatenate([e for _, e in sides])
    for over in (np.inf,) + OVER_MELEM:  # the elements beyond `over` million (none: inf), one rate for all
        # reorders (a copy at memory speed whichever way it goes)
        Xo = np.column_stack([X, np.bincount(c_all, weights=np.maximum(e_all - over, 0.0), minlength=n_cfg)])
        sol = np.zeros(Xo.shape[1])
        act = Xo.any(axis=0)  # (a column of zeros leaves its coefficient where the solver started: 0 here)
        sol[act] = lsq_linear(Xo[:, act] * w[:, None], y * w, bounds=(0.0, np.inf)).x
        sse = float(np.sum(((Xo @ sol - y) * w) ** 2))
        if best is None or sse < best[0] * (1 - 1e-3):  # (a larger model must fit better)
            best = (sse, over, sol, Xo @ sol)
    _, over, sol, pred = best
    big = y > 0.05
    mape = float(np.mean(np.abs(pred[big] / y[big] - 1))) if big.any() else 0.0
    report.update(mape_over_0_05ms=mape, mean_ms_measured=float(y.mean()), mean_ms_predicted=float(pred.mean()))
    lim = float(over) if np.isfinite(over) else 0.0
    coefs = {side: tuple(float(v) for v in sol[3 * i: 3 * i + 3]) + (float(sol[9]) if lim else 0.0, lim)
             for i, side in enumerate(LAYOUT_SIDES)}
    report["layout"] = coefs
    report["graph_input"] = tuple(float(v) for v in sol[6:9])
    if mape > MAX_LAYOUT_MAPE:
        report["skipped"] = f"MAPE {mape:.0%} over {MAX_LAYOUT_MAPE:.0%}"
        return {}, report
    log.info("layout reorders (ms, ms/Melem, ms/Mpixel): %s (MAPE %.0f%%)",
             {k: tuple(round(x, 4) for x in v) for k, v in coefs.items()}, 100 * mape)
    return coefs, report


def describe(fused_rep: dict[str, Any], ins_rep: dict[str, Any]) -> str:
    """One line for the platform file's ``origin``."""
    f = ", ".join(f"{k} {v:.3f}" for k, v in sorted(fused_rep.get("fused_ns", {}).items())) or "none"
    n_in, n_out = len(ins_rep.get("input", {})), len(ins_rep.get("output", {}))
    mape = ins_rep.get("mape_over_0.05ms")
    tail = f", inserted-time MAPE {mape:.0%} on configurations with > 0.05 ms" if mape is not None else ""
    lay = ins_rep.get("layout_fit", {})
    if lay.get("layout") and not lay.get("skipped"):
        return (f"fused-layer work (ns/element): {f}; reorders at graph inputs for {n_in} layer types, fitted on "
                f"{ins_rep.get('configurations', 0)} configurations; layout reorders (inside graphs and at their "
                f"outputs) per Melem: {', '.join(f'{k} {v[1]:.3f} ms' for k, v in lay['layout'].items())}, "
                f"MAPE {lay['mape_over_0_05ms']:.0%} on configurations with > 0.05 ms")
    return (f"fused-layer work (ns/element): {f}; reorders at graph inputs for {n_in} and outputs for {n_out} "
            f"layer types, fitted on {ins_rep.get('configurations', 0)} configurations{tail}")

