"""Learn a mapping model (fusion rules) from the fused flags of the multi-layer benchmarks.

For every (group-head type, consumer type) pair seen often enough: fused (almost) always -> one rule;
never -> no rule; sometimes -> a shallow decision tree on the two layers' attributes (as deep as cross-validation
says the examples need, at most ``max_depth``) says when, and each of its leaves that fuses becomes a rule with
the path's conditions (e.g. MaxPool fused only when kh <= 3).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ..ir import LayerType
from ..mapping import GROUP_ATTRS, Condition, FusionRule, MappingModel, attr_values
from .data import JOINING_TYPES, FusionExamples

__all__ = ["fit_mapping"]

log = logging.getLogger(__name__)

_ATTRS = ("kh", "kw", "sh", "sw", "c_out", "h_out", "w_out", "groups", "c_in_align", "c_out_align",
          "c_align")
_POOLS = {LayerType.MAX_POOL, LayerType.AVG_POOL, LayerType.GLOBAL_POOL}
_CONVS = {LayerType.CONV, LayerType.GROUP_CONV, LayerType.DEPTHWISE_CONV}
# rule order: normalisation first, then activations, then the rest (as toolchains apply them)
_ORDER = {LayerType.BATCH_NORM: 0}


def _depth(X: np.ndarray, y: np.ndarray, max_depth: int, folds: int = 5, tol: float = 0.01) -> int:
    """The shallowest tree depth (<= ``max_depth``) whose cross-validated accuracy is within ``tol`` of the
    best: a deeper tree only where the measurements need one (e.g. fused for 1x1 convolutions only when the
    channels are aligned, at any size)."""
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.tree import DecisionTreeClassifier

    k = min(folds, int(np.bincount(y.astype(np.int64), minlength=2).min()))
    if max_depth <= 1 or k < 2:
        return min(max_depth, 1)
    cv = StratifiedKFold(k, shuffle=True, random_state=0)
    scores = [cross_val_score(DecisionTreeClassifier(max_depth=d, min_samples_leaf=3, random_state=0), X, y,
                              cv=cv).mean() for d in range(1, max_depth + 1)]
    return 1 + next(i for i, s in enumerate(scores) if s >= max(scores) - tol)


def _tree_rules(ex: FusionExamples, rows: np.ndarray, max_depth: int, purity: float) -> list[list[Condition]]:
    from sklearn.tree import DecisionTreeClassifier

    feats = [("secondary", a) for a in _ATTRS] + [("primary", a) for a in _ATTRS + GROUP_ATTRS]
    X = np.column_stack([attr_values(ex.sec_cols if side == "secondary" else ex.head_cols, a)[rows]
                         for side, a in feats])
    y = ex.fused[rows]
    tree = DecisionTreeClassifier(max_depth=_depth(X, y, max_depth), min_samples_leaf=3, random_state=0).fit(X, y)
    t = tree.tree_
    out: list[list[Condition]] = []

    def walk(node: int, conds: list[Condition]) -> None:
        if t.children_left[node] == -1:
            counts = t.value[node][0]
            classes = list(tree.classes_)
            n_fused = counts[classes.index(True)] if True in classes else 0.0
            if counts.sum() > 0 and n_fused / counts.sum() >= purity:
                out.append(conds)
            return
        side, attr = feats[t.feature[node]]
        thr = float(np.floor(t.threshold[node]))  # integer attributes: x <= 2.5 <=> x <= 2
        walk(t.children_left[node], conds + [Condition(side, attr, "<=", thr)])
        walk(t.children_right[node], conds + [Condition(side, attr, ">", thr)])

    walk(0, [])
    return out


def fit_mapping(ex: FusionExamples, min_examples: int = 3, always: float = 0.95, never: float = 0.05,
                max_depth: int = 3, purity: float = 0.9,
                folds: tuple[str, ...] = (), strides: tuple[str, ...] | None = None
                ) -> tuple[MappingModel, dict[str, Any]]:
    """Fusion rules explaining the examples (taken with the pattern ``folds``, which the model keeps, as it
    keeps the stride propagation ``strides``); returns the model and a report (rate and rule per pair)."""
    pairs: dict[tuple[int, int], np.ndarray] = {}
    for i, (h, s) in enumerate(zip(ex.head_type.tolist(), ex.sec_type.tolist())):
        pairs.setdefault((h, s), []).append(i)  # type: ignore[arg-type]
    rules: list[tuple[int, FusionRule]] = []
    report: dict[str, Any] = {}
    has_convpool = False
    for (h, s), idx in sorted(pairs.items()):
        rows = np.asarray(idx)
        ht, stt = LayerType(h), LayerType(s)
        rate = float(ex.fused[rows].mean())
        key = f"{ht.label}+{stt.label}"
        report[key] = {"examples": int(rows.size), "fused_rate": round(rate, 3)}
        if rows.size < min_examples or rate <= never:
            continue
        result = "ConvPool" if stt in _POOLS and ht in _CONVS else None
        has_convpool |= result is not None
        order = _ORDER.get(stt, 2 if result else 1)
        if rate >= always:
            rules.append((order, FusionRule(key, (ht.label,), (stt.label,), result,
                                            origin=f"fused in {rate:.0%} of {rows.size} measured pairs",
                                            multi_input=stt in JOINING_TYPES)))
            report[key]["rule"] = "always"
            continue
        leaves = _tree_rules(ex, rows, max_depth, purity)
        for j, conds in enumerate(leaves):
            rules.append((order, FusionRule(f"{key}#{j}", (ht.label,), (stt.label,), result, tuple(conds),
                                            origin=f"decision tree on {rows.size} measured pairs ({rate:.0%} fused)",
                                            multi_input=stt in JOINING_TYPES)))
        report[key]["rule"] = [[c.to_dict() for c in conds] for conds in leaves] or "none (no pure leaf)"
    if has_convpool:  # a convolution that absorbed a pool keeps fusing what follows
        rules = [(o, FusionRule(r.name, r.primary + (("ConvPool",) if "Conv" in r.primary else ()), r.secondary,
                                r.result, r.when, r.origin, r.multi_input)) for o, r in rules]
    rules.sort(key=lambda t: t[0])
    return MappingModel([r for _, r in rules], folds=folds, strides=strides), report
