"""Fit statistical and mixed layer models: compare regressors by K-fold cross-validation and keep the best.

The score is the MAPE of the time itself (not of its log), pooled over the out-of-fold predictions of
all folds. The winner is refitted on all the data; a tree ensemble within one standard error of a better-scoring
linear-model tree or polynomial wins instead (`TREES`).

Extrapolation check: cross-validation only tests inside the sampled ranges, so every candidate is also
fitted on the smallest 80% of the layers (by ops) and scored on the largest 20% (``extrapolation_mape`` in
the report). With ``extrapolation_check`` (the default of `fit_mixed`, whose point is to extrapolate sanely)
a candidate's score is the worse of its CV and extrapolation MAPE: polynomial corrections, for instance,
fit well inside the sampled ranges and may explode outside. `fit_statistical` scores by CV alone by default
and reports the extrapolation MAPE for information. Candidates are the `Statistical` methods
(``gbm``, ``gbm-huber``, ``rf``, ``hgb``, ``poly``, ``poly3``, ``lmt``); the tree ensembles are kept small
(GBM: 200 trees of depth 4; RF: 60 trees of depth <= 10 with <= 256 leaves) so a platform file stays small
and loads fast (measured on 1000 layers: GBM 207 kB / 2.5 ms to load, RF 1.1 MB / 13 ms, LMT 6 kB / 0.15 ms).

Large types: with at least `LARGE_N` layers (ONNX Runtime's convolutions: ~12k), 200 shallow trees underfit
(CV MAPE 11.5% vs 8.2% for 500 trees of depth 5), so a larger GBM (`LARGE_GBM`, reported as ``gbm-large``)
competes too; it is kept only when its score beats every other candidate by `LARGE_GAIN` (relative), since
it costs ~5x the file size and load time of the default GBM.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..models.base import LayerFeatures, LayerModel
from ..models.mixed import Mixed
from ..models.roofline import Roofline
from ..models.statistical import METHODS, Statistical, subset

__all__ = ["fit_statistical", "fit_mixed", "cross_val_predict", "extrapolation_split", "mape",
           "DEFAULT_CANDIDATES", "LARGE_N", "LARGE_GBM", "LARGE_GAIN", "TREES"]

log = logging.getLogger(__name__)

DEFAULT_CANDIDATES = ("gbm", "gbm-huber", "rf", "poly", "lmt")
#: layer count from which a larger GBM is tried as well, its hyper-parameters, and the relative score gain
#: over the best other candidate it must bring to be kept
LARGE_N = 3000
LARGE_GBM = {"n_estimators": 500, "max_depth": 5}
LARGE_GAIN = 0.10
#: Fewest measured layers a fit accepts (cross-validation needs at least two folds of two).
MIN_SAMPLES = 4
#: candidates that predict piecewise from the layers they were fitted on (tree ensembles), preferred where they
#: score within one standard error of a linear-model tree or polynomial: those fit a slope per region and carry it
#: to layers between and beyond the samples. On OpenVINO's transposes (214 layers, CV MAPE 65.0% for the linear
#: model tree, 65.8% for the GBM) the linear model tree priced Swin-T's three qkv transposes opposite to their size
#: (0.06 ms for 903k elements, 1.45 ms for 225k; the GBM 1.40 / 0.10 ms) and put the network 10% high
TREES = ("gbm", "gbm-huber", "rf", "hgb", "gbm-large")


def mape(pred: np.ndarray, y: np.ndarray) -> float:
    """Mean absolute percentage error of ``pred`` against ``y`` (> 0), in percent."""
    y = np.asarray(y, dtype=np.float64)
    return float(np.mean(np.abs(np.asarray(pred, dtype=np.float64) - y) / y) * 100.0)


def cross_val_predict(make: Callable[[], LayerModel], X: LayerFeatures, y: np.ndarray, cv: int,
                      seed: int) -> np.ndarray:
    """Out-of-fold predictions of ``make()`` models over ``cv`` shuffled folds."""
    n = len(y)
    order = np.random.default_rng(seed).permutation(n)
    folds = np.array_split(order, cv)
    out = np.empty(n)
    for test in folds:
        train = np.setdiff1d(order, test)
        out[test] = make().fit(subset(X, train), y[train]).predict(subset(X, test))
    return out


def _check(X: LayerFeatures, y_ms: Any, candidates: Sequence[str], cv: int, what: str) -> tuple[np.ndarray, int]:
    y = np.asarray(y_ms, dtype=np.float64).ravel()
    if len(y) != len(X):
        raise ValueError(f"{what}: {len(X)} layers but {len(y)} measured times")
    bad = ~(np.isfinite(y) & (y > 0))
    if bad.any():
        raise ValueError(f"{what}: {int(bad.sum())} measured times are not finite and > 0")
    if len(y) < MIN_SAMPLES:
        raise ValueError(f"{what}: needs at least {MIN_SAMPLES} measured layers, got {len(y)} "
                         "(run the layer's benchmark suite first)")
    unknown = [c for c in candidates if c not in METHODS]
    if unknown or not candidates:
        raise ValueError(f"{what}: unknown candidates {unknown} (known: {', '.join(METHODS)})")
    if cv < 2:
        raise ValueError(f"{what}: cv must be >= 2, got {cv}")
    return y, min(int(cv), len(y) // 2)


def extrapolation_split(X: LayerFeatures, frac: float = 0.2) -> tuple[np.ndarray, np.ndarray] | None:
    """(train, test) rows: the smallest ``1 - frac`` of the layers by ops, and the largest ``frac``;
    None when there are too few layers for both sides."""
    n = len(X)
    n_test = int(round(frac * n))
    if n_test < 2 or n - n_test < MIN_SAMPLES:
        return None
    order = np.argsort(X.ops, kind="stable")
    return order[:-n_test], order[-n_test:]


def _select(makers: Mapping[str, Callable[[], LayerModel]], X: LayerFeatures, y: np.ndarray, folds: int,
            seed: int, what: str) -> tuple[dict[str, float], dict[str, float], dict[str, str], dict[str, float]]:
    """CV MAPE and extrapolation MAPE per candidate (failed candidates in the third dict), and the standard error
    of each CV MAPE (percent)."""
    scores: dict[str, float] = {}
    extra: dict[str, float] = {}
    errors: dict[str, str] = {}
    ses: dict[str, float] = {}
    split = extrapolation_split(X)
    for name, make in makers.items():
        try:
            ape = np.abs(cross_val_predict(make, X, y, folds, seed) / y - 1) * 100.0
            scores[name] = float(np.mean(ape))
            ses[name] = float(np.std(ape, ddof=1) / np.sqrt(len(ape))) if len(ape) > 1 else 0.0
            if split is not None:
                tr, te = split
                extra[name] = mape(make().fit(subset(X, tr), y[tr]).predict(subset(X, te)), y[te])
        except (ValueError, np.linalg.LinAlgError, ImportError) as e:
            scores.pop(name, None)
            errors[name] = f"{type(e).__name__}: {e}"
            log.warning("%s: candidate %s failed: %s", what, name, e)
        else:
            log.info("%s: candidate %s: CV MAPE %.2f%%, extrapolation MAPE %.2f%%", what, name, scores[name],
                     extra.get(name, float("nan")))
    if not scores:
        raise ValueError(f"{what}: every candidate failed: {errors}")
    return scores, extra, errors, ses


def _score(cv: dict[str, float], extra: dict[str, float], check: bool) -> dict[str, float]:
    return {c: max(v, extra.get(c, v)) if check else v for c, v in cv.items()}


def _with_large(makers: dict[str, Callable[[], LayerModel]], make_large: Callable[[], LayerModel],
                candidates: Sequence[str], n: int) -> dict[str, Callable[[], LayerModel]]:
    """``makers`` plus the larger GBM (``gbm-large``) when GBM is a candidate and there are >= `LARGE_N` layers."""
    if "gbm" in candidates and n >= LARGE_N:
        return {**makers, "gbm-large": make_large}
    return makers


def _best(score: dict[str, float], se: Mapping[str, float] | None = None) -> str:
    """The lowest score; ``gbm-large`` only when it beats the best other candidate by `LARGE_GAIN`; and with the
    scores' standard errors ``se``, a tree ensemble (`TREES`) instead of a lower-scoring other candidate whose
    score it is within one standard error of (the one-standard-error rule, between a tie and a real win)."""
    best = min(score, key=score.__getitem__)
    others = {c: v for c, v in score.items() if c != "gbm-large"}
    if best == "gbm-large" and others and score[best] > (1 - LARGE_GAIN) * min(others.values()):
        best = min(others, key=others.__getitem__)
    trees = {c: v for c, v in others.items() if c in TREES}
    if se is not None and best not in TREES and trees:
        tree = min(trees, key=trees.__getitem__)
        if trees[tree] <= score[best] + se.get(best, 0.0):
            best = tree
    return best


def fit_statistical(X: LayerFeatures, y_ms: Any, candidates: Sequence[str] = DEFAULT_CANDIDATES, cv: int = 5,
                    seed: int = 0, unroll: Mapping[str, Any] | None = None,
                    extrapolation_check: bool = False, grouped: bool = False,
                    taps: bool = False) -> tuple[Statistical, dict[str, Any]]:
    """The best `Statistical` model of ``candidates`` by ``cv``-fold CV MAPE, refitted on all layers.

    ``unroll`` (``{dim: s}`` or a refined roofline's ``unroll``) adds the step-pattern features, ``grouped`` the
    per-group channel features (grouped convolutions), ``taps`` the kernel-tap features (convolutions). Report:
    ``cv_mape`` (candidate -> %), ``extrapolation_mape`` (-> %), ``score`` (what was compared), ``chosen``,
    ``n_samples``, ``cv_folds``, ``errors`` (failed candidates -> message).
    """
    y, folds = _check(X, y_ms, candidates, cv, "fit_statistical")
    makers = _with_large({c: (lambda c=c: Statistical(c, unroll, seed=seed, grouped=grouped, taps=taps))
                          for c in candidates},
                         lambda: Statistical("gbm", unroll, seed=seed, params=LARGE_GBM, grouped=grouped, taps=taps),
                         candidates, len(y))
    scores, extra, errors, ses = _select(makers, X, y, folds, seed, "fit_statistical")
    score = _score(scores, extra, extrapolation_check)
    best = _best(score, ses)
    model = makers[best]().fit(X, y)
    return model, {"model": "statistical", "cv_mape": scores, "extrapolation_mape": extra, "score": score,
                   "chosen": best, "n_samples": len(y), "cv_folds": folds, "cv_se": ses, "errors": errors}


def fit_mixed(X: LayerFeatures, y_ms: Any, base: Roofline, candidates: Sequence[str] = DEFAULT_CANDIDATES,
              cv: int = 5, seed: int = 0, unroll: Mapping[str, Any] | None = None,
              extrapolation_check: bool = True, grouped: bool = False,
              taps: bool = False) -> tuple[Mixed, dict[str, Any]]:
    """The best `Mixed` model on ``base`` (a fitted `Roofline` / `RefinedRoofline`, kept as is); ``grouped``
    and ``taps`` as in `fit_statistical`.

    Layers the base gives no time (0) are left out. Report as `fit_statistical`'s plus ``base_mape`` and
    ``base_extrapolation_mape`` (the base alone on the same layers / the largest 20%) and ``clip`` (the
    correction's log range).
    """
    if not isinstance(base, Roofline):
        raise ValueError(f"fit_mixed: base must be a Roofline or RefinedRoofline, got {type(base).__name__}")
    y, folds = _check(X, y_ms, candidates, cv, "fit_mixed")
    b = base.predict(X)
    ok = b > 0
    if not ok.all():
        log.warning("fit_mixed: %d of %d layers have no base time and are left out", int((~ok).sum()), len(ok))
        X, y, b = subset(X, ok), y[ok], b[ok]
        if len(y) < MIN_SAMPLES:
            raise ValueError(f"fit_mixed: needs at least {MIN_SAMPLES} layers with a base time, got {len(y)}")
        folds = min(folds, len(y) // 2)
    makers = _with_large({c: (lambda c=c: Mixed(base, c, unroll, seed=seed, grouped=grouped, taps=taps))
                          for c in candidates},
                         lambda: Mixed(base, "gbm", unroll, seed=seed, params=LARGE_GBM, grouped=grouped, taps=taps),
                         candidates, len(y))
    scores, extra, errors, ses = _select(makers, X, y, folds, seed, "fit_mixed")
    split = extrapolation_split(X)
    base_extra = mape(b[split[1]], y[split[1]]) if split is not None else None
    score = _score(scores, extra, extrapolation_check)
    best = _best(score, ses)
    model = makers[best]().fit(X, y)
    return model, {"model": "mixed", "cv_mape": scores, "extrapolation_mape": extra, "score": score,
                   "chosen": best, "n_samples": len(y), "cv_folds": folds, "cv_se": ses, "base_mape": mape(b, y),
                   "base_extrapolation_mape": base_extra, "clip": [model.clip_min_, model.clip_max_],
                   "errors": errors}
