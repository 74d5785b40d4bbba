"""Statistical layer model: a regressor on log-scaled layer features predicts log(time in ms).

Features: `annette_torch.models.features` (log-scaled layer columns, channel alignment, the step pattern of
unrolled dimensions), computed once per estimate for all of a platform's statistical models.

Regressors (``method``), all stored as plain data and predicted with numpy alone (scikit-learn is needed
only to fit the tree ensembles):

* ``gbm`` / ``rf`` / ``hgb``: scikit-learn gradient boosting / random forest / histogram gradient boosting,
  converted to a `TreeEnsemble` and kept small (GBM: 200 trees of depth 4; RF: 60 trees of depth <= 10
  with <= 256 leaves; HGB: 200 trees of depth <= 5), so a model is < ~1 MB of JSON and loads in < 20 ms;
* ``gbm-huber``: the same GBM with a Huber loss (residuals beyond their 90th percentile count linearly): a
  runtime's benchmark timings may have a slow tail the features cannot explain (OpenVINO: a few
  configurations 2-5x slower than their neighbours, e.g. many input and few output channels); under a
  squared loss it lifts every leaf (OpenVINO's convolution models predicted their own typical layers ~8%
  high). Cross-validation decides per layer type whether the robust fit is better;
* ``poly`` / ``poly3``: polynomial regression of degree 2 / 3 on the standardised features (NeuralPower),
  ridge-regularised with the penalty chosen by leave-one-out error, terms of degree d penalised
  ``damping ** (2 (d - 1))`` (default 10) times more than linear ones; stored as the exponent matrix
  (terms x features), the coefficient vector and the intercept (``poly3`` has ~4000 terms on 27 features:
  fine for a few hundred layers, slow to fit beyond a few thousand);
* ``lmt``: a linear model tree (FastDeepIoT): a shallow tree (depth <= 3) whose splits are chosen to
  minimise the squared error of ridge models in the two children, and a linear model per leaf (shrunk
  towards its parent's model); stored as a one-tree `TreeEnsemble` plus a coefficient row per leaf.

Statistical models interpolate; outside the sampled ranges prefer the mixed model (`models/mixed.py`).
"""

from __future__ import annotations

from itertools import combinations_with_replacement
from typing import Any, Mapping

import numpy as np

from ..errors import PlatformError
from .base import LayerFeatures, LayerModel, check_number, register
from .features import GROUP_FEATURES, TAP_FEATURES, FeaturePlan, feature_names, layer_features, normalize_unroll
from .refined import DIMENSIONS
from .trees import TreeEnsemble, read_array

__all__ = ["Statistical", "METHODS", "feature_names", "layer_features", "normalize_unroll", "subset",
           "PolyRegressor", "LinearModelTree", "fit_regressor", "regressor_from_dict"]

#: Regressor methods `Statistical` can fit.
METHODS = ("gbm", "gbm-huber", "rf", "hgb", "poly", "poly3", "lmt")
#: Targets: log of the time in ms (a standalone model) or log of measured / base time (a mixed correction).
TARGETS = ("log_ms", "log_ratio")


def subset(X: LayerFeatures, rows: np.ndarray) -> LayerFeatures:
    """The rows ``rows`` (index or bool array) of ``X``."""
    return X.take(rows)


# ----------------------------------------------------------------------------------------------------
# linear algebra shared by the polynomial and linear-model-tree regressors
def _standardize(F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = F.mean(axis=0)
    scale = F.std(axis=0)
    scale = np.where(scale > 1e-12 * np.maximum(1.0, np.abs(mean)), scale, 1.0)
    return mean, scale


def _ridge_loo(A: np.ndarray, z: np.ndarray, n_alphas: int = 25) -> tuple[np.ndarray, float, float]:
    """Ridge regression of z (a log time or log ratio) on A with an unpenalised intercept; the penalty
    minimises the exact leave-one-out error (closed form through the SVD), measured as the mean relative error
    of the time, |exp(predicted - z) - 1|, the quantity the fit is judged by (a squared log error would let a
    few wild extrapolations through). Returns (coef, intercept, penalty)."""
    n = len(z)
    am, zm = A.mean(axis=0), z.mean()
    Ac, zc = A - am, z - zm
    U, s, Vt = np.linalg.svd(Ac, full_matrices=False)
    if s.size == 0 or s[0] <= 0:
        return np.zeros(A.shape[1]), float(zm), 1.0
    Uz = U.T @ zc
    U2 = U * U
    best = (np.inf, 1.0)
    for a in (s[0] ** 2) * np.logspace(-10, 1, n_alphas):
        d = s * s / (s * s + a)
        resid = zc - U @ (d * Uz)
        h = U2 @ d + 1.0 / n
        loo = np.clip(resid / np.maximum(1.0 - h, 1e-9), -50.0, 50.0)
        err = float(np.mean(np.abs(np.expm1(-loo))))
        if err < best[0]:
            best = (err, float(a))
    a = best[1]
    coef = Vt.T @ (s / (s * s + a) * Uz)
    return coef, float(zm - am @ coef), a


class PolyRegressor:
    """Polynomial regression on standardised features: ``intercept + sum_t coef[t] * prod_j z_j ** powers[t, j]``."""

    kind = "poly"

    def __init__(self, degree: int, mean: np.ndarray, scale: np.ndarray, powers: np.ndarray, coef: np.ndarray,
                 intercept: float) -> None:
        self.degree = int(degree)
        self.mean, self.scale = np.asarray(mean, np.float64), np.asarray(scale, np.float64)
        self.powers = np.asarray(powers, np.int64).reshape(-1, len(self.mean))
        self.coef = np.asarray(coef, np.float64)
        self.intercept = float(intercept)
        # each term as the list of feature indices it multiplies, padded with the all-ones column (index k)
        k, T = len(self.mean), len(self.powers)
        deg = self.powers.sum(axis=1)
        flat = np.repeat(np.tile(np.arange(k), T), self.powers.ravel())
        row = np.repeat(np.arange(T), deg)
        pos = np.arange(len(flat)) - np.repeat(np.cumsum(deg) - deg, deg)
        self._idx = np.full((T, max(self.degree, 1)), k, dtype=np.int64)
        self._idx[row, pos] = flat

    def terms(self, F: np.ndarray) -> np.ndarray:
        Z = np.column_stack([(F - self.mean) / self.scale, np.ones(len(F))])
        out = Z[:, self._idx[:, 0]]
        for j in range(1, self._idx.shape[1]):
            out = out * Z[:, self._idx[:, j]]
        return out

    def predict(self, F: np.ndarray) -> np.ndarray:
        return self.terms(F) @ self.coef + self.intercept

    @classmethod
    def fit(cls, F: np.ndarray, z: np.ndarray, degree: int = 2, damping: float = 10.0) -> "PolyRegressor":
        """Ridge fit; a term of degree d is penalised ``damping ** (2 (d - 1))`` times more than a linear one
        (higher-order terms only where the data insist: they are what explodes between and beyond samples)."""
        mean, scale = _standardize(F)
        active = np.flatnonzero(F.std(axis=0) > 1e-12 * np.maximum(1.0, np.abs(mean)))
        k = F.shape[1]
        rows = []
        for d in range(1, degree + 1):
            for combo in combinations_with_replacement(active, d):
                p = np.zeros(k, dtype=np.int64)
                np.add.at(p, list(combo), 1)
                rows.append(p)
        powers = np.array(rows, dtype=np.int64).reshape(-1, k)
        model = cls(degree, mean, scale, powers, np.zeros(len(powers)), 0.0)
        if len(powers):
            shrink = float(damping) ** -(powers.sum(axis=1) - 1.0)
            coef, intercept, _ = _ridge_loo(model.terms(F) * shrink, z)
            coef = coef * shrink
        else:
            coef, intercept = np.zeros(0), float(z.mean())
        model.coef, model.intercept = coef, intercept
        return model

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "degree": self.degree, "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                "powers": self.powers.tolist(), "coef": self.coef.tolist(), "intercept": self.intercept}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str, n_features: int) -> "PolyRegressor":
        deg = d.get("degree")
        if isinstance(deg, bool) or not isinstance(deg, int) or not 1 <= deg <= 4:
            raise PlatformError(f"{where}.degree: expected an integer 1..4, got {deg!r}")
        mean = read_array(d, "mean", where, length=n_features)
        scale = read_array(d, "scale", where, length=n_features)
        if np.any(scale <= 0):
            raise PlatformError(f"{where}.scale: entries must be > 0")
        powers = read_array(d, "powers", where, integer=True, ndim=2)
        if powers.shape[0] and powers.shape[1] != n_features:
            raise PlatformError(f"{where}.powers: rows must have {n_features} exponents (one per feature), "
                                f"got {powers.shape[1]}")
        if np.any(powers < 0) or np.any(powers.sum(axis=1) > deg) or np.any(powers.sum(axis=1) < 1):
            raise PlatformError(f"{where}.powers: exponents must be >= 0 with a total degree 1..{deg} per term")
        coef = read_array(d, "coef", where, length=len(powers))
        return cls(deg, mean, scale, powers.reshape(-1, n_features), coef, check_number(d, "intercept", where))


class LinearModelTree:
    """A shallow tree routing each row to a leaf that holds a linear model on the standardised features.

    With ``lo`` / ``hi`` (the features' range in fitting) the linear models read the features clamped to it:
    a linear leaf holds where it was fitted, and beyond, like a tree, it stays at its edge (an unclamped leaf
    put one grouped convolution of RegNetX at 40x its measured time, at the correction's clip)."""

    kind = "lmt"

    def __init__(self, tree: TreeEnsemble, mean: np.ndarray, scale: np.ndarray, coef: np.ndarray,
                 intercept: np.ndarray, lo: np.ndarray | None = None, hi: np.ndarray | None = None) -> None:
        self.tree = tree
        self.mean, self.scale = np.asarray(mean, np.float64), np.asarray(scale, np.float64)
        self.coef = np.asarray(coef, np.float64).reshape(-1, len(self.mean))
        self.intercept = np.asarray(intercept, np.float64)
        self.lo = None if lo is None else np.asarray(lo, np.float64)
        self.hi = None if hi is None else np.asarray(hi, np.float64)
        self._rank = np.cumsum(tree._leaf) - 1  # node -> leaf model row (leaves in node order)

    def predict(self, F: np.ndarray) -> np.ndarray:
        r = self._rank[self.tree.apply(F)[:, 0]]
        if self.lo is not None and self.hi is not None:
            F = np.clip(F, self.lo, self.hi)
        Z = (F - self.mean) / self.scale
        return np.einsum("ij,ij->i", Z, self.coef[r]) + self.intercept[r]

    @classmethod
    def fit(cls, F: np.ndarray, z: np.ndarray, max_depth: int = 3, min_leaf: int | None = None,
            n_thresholds: int = 16, shrink: float = 1.0) -> "LinearModelTree":
        n, k = F.shape
        mean, scale = _standardize(F)
        Z = (F - mean) / scale
        A = np.column_stack([Z, np.ones(n)])
        _, _, lam = _ridge_loo(Z, z)
        pen = np.full(k + 1, lam)
        pen[-1] = 0.0  # intercept unpenalised
        min_leaf = max(k + 1, n // 20) if min_leaf is None else int(min_leaf)
        qs = np.linspace(0, 1, n_thresholds + 2)[1:-1]

        def solve(G, b, w_parent, root=False):
            p = pen if root else pen * shrink
            return np.linalg.solve(G + np.diag(p), (b + p * w_parent)[..., None])[..., 0]

        def sse(G, b, yy, w):
            return yy - 2 * np.einsum("...i,...i->...", w, b) + np.einsum("...i,...ij,...j->...", w, G, w)

        nodes: list[dict[str, Any]] = []

        def grow(rows: np.ndarray, w_parent: np.ndarray, depth: int) -> int:
            Ar, zr = A[rows], z[rows]
            G, b, yy = Ar.T @ Ar, Ar.T @ zr, float(zr @ zr)
            w = solve(G, b, w_parent, root=depth == 0)
            me = len(nodes)
            nodes.append({"w": w})
            best = None
            if depth < max_depth and len(rows) >= 2 * min_leaf:
                own = float(sse(G, b, yy, w))
                for j in range(k):
                    x = F[rows, j]
                    order = np.argsort(x, kind="stable")
                    xs = x[order]
                    cut = np.unique(np.searchsorted(xs, np.quantile(xs, qs), side="right"))
                    cut = cut[(cut >= min_leaf) & (cut <= len(rows) - min_leaf)]
                    if cut.size == 0:
                        continue
                    As, zs = Ar[order], zr[order]
                    bounds = np.concatenate([[0], cut])
                    Gb = np.stack([As[s:e].T @ As[s:e] for s, e in zip(bounds[:-1], bounds[1:])]).cumsum(axis=0)
                    bb = np.stack([As[s:e].T @ zs[s:e] for s, e in zip(bounds[:-1], bounds[1:])]).cumsum(axis=0)
                    yb = np.cumsum([zs[s:e] @ zs[s:e] for s, e in zip(bounds[:-1], bounds[1:])])
                    GR, bR, yR = G - Gb, b - bb, yy - yb
                    wL, wR = solve(Gb, bb, w), solve(GR, bR, w)
                    total = sse(Gb, bb, yb, wL) + sse(GR, bR, yR, wR)
                    i = int(np.argmin(total))
                    gain = own - float(total[i])
                    if gain > 1e-6 * max(own, 1e-300) and (best is None or gain > best[0]):
                        best = (gain, j, float(xs[cut[i] - 1]))
            if best is None:
                return me
            _, j, thr = best
            go_left = F[rows, j] <= thr
            nodes[me].update(feature=j, threshold=thr)
            nodes[me]["left"] = grow(rows[go_left], w, depth + 1)
            nodes[me]["right"] = grow(rows[~go_left], w, depth + 1)
            return me

        grow(np.arange(n), np.zeros(k + 1), 0)
        leaf = np.array(["left" not in nd for nd in nodes])
        tree = TreeEnsemble(np.array([nd.get("feature", -1) for nd in nodes]),
                            np.array([nd.get("threshold", 0.0) for nd in nodes]),
                            np.array([nd.get("left", -1) for nd in nodes]),
                            np.array([nd.get("right", -1) for nd in nodes]),
                            np.zeros(len(nodes)), np.array([0]), k, compare="float64", source="lmt")
        W = np.array([nd["w"] for nd, is_leaf in zip(nodes, leaf) if is_leaf])
        return cls(tree, mean, scale, W[:, :k], W[:, k], F.min(axis=0), F.max(axis=0))

    def to_dict(self) -> dict[str, Any]:
        d = {"kind": self.kind, "tree": self.tree.to_dict(), "mean": self.mean.tolist(),
             "scale": self.scale.tolist(), "coef": self.coef.tolist(), "intercept": self.intercept.tolist()}
        if self.lo is not None and self.hi is not None:
            d.update(lo=self.lo.tolist(), hi=self.hi.tolist())
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str, n_features: int) -> "LinearModelTree":
        tree = TreeEnsemble.from_dict(d.get("tree"), f"{where}.tree", n_features)
        if tree.n_trees != 1:
            raise PlatformError(f"{where}.tree.roots: a linear model tree has exactly one tree")
        mean = read_array(d, "mean", where, length=n_features)
        scale = read_array(d, "scale", where, length=n_features)
        if np.any(scale <= 0):
            raise PlatformError(f"{where}.scale: entries must be > 0")
        n_leaves = int(tree._leaf.sum())
        coef = read_array(d, "coef", where, ndim=2, length=n_leaves)
        if coef.shape[1] != n_features:
            raise PlatformError(f"{where}.coef: rows must have {n_features} coefficients, got {coef.shape[1]}")
        lo = hi = None
        if "lo" in d or "hi" in d:  # (files written before the clamp have neither)
            lo = read_array(d, "lo", where, length=n_features)
            hi = read_array(d, "hi", where, length=n_features)
            if np.any(hi < lo):
                raise PlatformError(f"{where}.hi: entries must be >= lo")
        return cls(tree, mean, scale, coef, read_array(d, "intercept", where, length=n_leaves), lo, hi)


class _Trees:
    """Adapter: a `TreeEnsemble` as a regressor of the features."""

    kind = "trees"

    def __init__(self, ens: TreeEnsemble) -> None:
        self.ens = ens

    def predict(self, F: np.ndarray) -> np.ndarray:
        return self.ens.predict(F)

    def to_dict(self) -> dict[str, Any]:
        return self.ens.to_dict()


def fit_regressor(method: str, F: np.ndarray, z: np.ndarray, seed: int = 0,
                  params: Mapping[str, Any] | None = None) -> Any:
    """Fit a plain-data regressor of ``z`` on the feature matrix ``F`` (see the module docstring).

    Runs with one BLAS/OpenMP thread where threadpoolctl is installed: on a few hundred rows threads cost
    more than they bring (on a busy 2-core machine 100x more for the SVD and the histogram boosting).
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - comes with scikit-learn
        return _fit_regressor(method, F, z, seed, dict(params or {}))
    with threadpool_limits(limits=1):
        return _fit_regressor(method, F, z, seed, dict(params or {}))


#: the loss of ``gbm-huber`` (scikit-learn's ``alpha``: the residual quantile beyond which it is linear)
HUBER = {"loss": "huber", "alpha": 0.9}


def _fit_regressor(method: str, F: np.ndarray, z: np.ndarray, seed: int, params: dict[str, Any]) -> Any:
    if method == "gbm-huber":
        method, params = "gbm", {**HUBER, **params}
    if method in ("gbm", "rf", "hgb"):
        try:
            from sklearn.ensemble import (GradientBoostingRegressor, HistGradientBoostingRegressor,
                                          RandomForestRegressor)
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("fitting tree ensembles needs scikit-learn (pip install 'annette-torch[fit]')") from e
        n = len(z)
        if method == "gbm":
            kw = dict(n_estimators=200, max_depth=4, learning_rate=0.05, subsample=0.8,
                      min_samples_leaf=min(3, max(1, n // 10)), random_state=seed)
            est = GradientBoostingRegressor(**{**kw, **params})
        elif method == "rf":
            kw = dict(n_estimators=60, max_depth=10, max_leaf_nodes=256, min_samples_leaf=2 if n >= 20 else 1,
                      max_features=1.0,
                      random_state=seed, n_jobs=1)
            est = RandomForestRegressor(**{**kw, **params})
        else:
            kw = dict(max_iter=200, max_depth=5, learning_rate=0.1, min_samples_leaf=min(5, max(1, n // 10)),
                      early_stopping=False, random_state=seed)
            est = HistGradientBoostingRegressor(**{**kw, **params})
        return _Trees(TreeEnsemble.from_sklearn(est.fit(F, z)))
    if method in ("poly", "poly3"):
        return PolyRegressor.fit(F, z, **{"degree": 2 if method == "poly" else 3, **params})
    if method == "lmt":
        return LinearModelTree.fit(F, z, **params)
    raise ValueError(f"unknown statistical method {method!r} (known: {', '.join(METHODS)})")


def regressor_from_dict(d: Any, where: str, n_features: int) -> Any:
    """Rebuild a regressor stored by its ``to_dict`` (kind ``trees``, ``poly`` or ``lmt``)."""
    if not isinstance(d, Mapping):
        raise PlatformError(f"{where}: expected an object")
    kind = d.get("kind")
    if kind == "trees":
        return _Trees(TreeEnsemble.from_dict(d, where, n_features))
    if kind == "poly":
        return PolyRegressor.from_dict(d, where, n_features)
    if kind == "lmt":
        return LinearModelTree.from_dict(d, where, n_features)
    raise PlatformError(f"{where}.kind: unknown regressor kind {kind!r} (known: trees, poly, lmt)")


# ----------------------------------------------------------------------------------------------------
#: how far (in log units) a statistical prediction may leave the range of the targets it was fitted on
Z_MARGIN = float(np.log(10.0))


@register
class Statistical(LayerModel):
    """time = exp(regressor(features)); fitted on log(time) (see the module docstring).

    Hyper-parameters: ``method`` (one of `METHODS`), ``unroll`` (``{dim: s}`` or a refined roofline's
    ``unroll``; adds the step-pattern features), ``clip_inputs`` (clip each feature to its training range
    before predicting; off by default: the features are correlated, and clipping some but not others feeds
    the regressor combinations it never saw, which hurt more than plain extrapolation in our tests), ``seed``,
    ``params`` (overrides for the regressor), ``target`` (``log_ms``, or ``log_ratio`` for a correction),
    ``grouped`` (add the per-group channel features, `GROUP_FEATURES`), ``taps`` (add the kernel-tap features,
    `TAP_FEATURES`).
    Fitted: ``regressor_``, ``unroll_``, ``feature_names_``, ``x_min_`` / ``x_max_`` (training feature range),
    ``clip_inputs_``, ``grouped_``, ``taps_``.
    """

    kind = "statistical"

    def __init__(self, method: str = "gbm", unroll: Mapping[str, Any] | None = None,
                 clip_inputs: bool = False,
                 seed: int = 0, params: Mapping[str, Any] | None = None, target: str = "log_ms",
                 grouped: bool = False, taps: bool = False) -> None:
        self.method = method
        self.unroll = unroll
        self.clip_inputs = clip_inputs
        self.seed = seed
        self.params = params
        self.target = target
        self.grouped = grouped
        self.taps = taps

    def fit(self, X: LayerFeatures, y: np.ndarray) -> "Statistical":
        """Fit on measured times ``y`` (ms, > 0)."""
        y = np.asarray(y, dtype=np.float64)
        if len(y) != len(X):
            raise ValueError(f"{len(X)} layers but {len(y)} times")
        if not np.all(np.isfinite(y) & (y > 0)):
            raise ValueError(f"measured times must be finite and > 0 ({int(np.sum(~(y > 0)))} are not)")
        return self.fit_log(X, np.log(y))

    def fit_log(self, X: LayerFeatures, z: np.ndarray) -> "Statistical":
        """Fit the regressor on a log-scale target ``z`` directly (log ms, or a log ratio for corrections)."""
        z = np.asarray(z, dtype=np.float64)
        if len(z) < 2:
            raise ValueError(f"a statistical model needs at least 2 measured layers, got {len(z)}")
        if self.target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {self.target!r}")
        self.unroll_ = normalize_unroll(self.unroll)
        self.grouped_ = bool(self.grouped)
        self.taps_ = bool(self.taps)
        F = layer_features(X, self.unroll_, self.grouped_, self.taps_)
        self.feature_names_ = feature_names(self.unroll_, self.grouped_, self.taps_)
        self.x_min_, self.x_max_ = F.min(axis=0), F.max(axis=0)
        self.clip_inputs_ = bool(self.clip_inputs)
        self.z_range_ = (float(z.min()), float(z.max()))
        self.regressor_ = fit_regressor(self.method, F, z, self.seed, self.params)
        return self

    def feature_plan(self) -> FeaturePlan:
        """The plan of this model's feature transform (built on first use)."""
        key = (tuple(self.unroll_.items()), self.grouped_, self.taps_)
        plan = self.__dict__.get("_plan")
        if plan is None or plan[0] != key:
            plan = (key, FeaturePlan([(self.unroll_, self.grouped_, self.taps_)]))
            self._plan = plan
        return plan[1]

    def features(self, X: LayerFeatures) -> np.ndarray:
        return self.clipped(self.feature_plan().features(X, 0))

    def clipped(self, F: np.ndarray) -> np.ndarray:
        """A feature matrix in this model's order as its regressor reads it: within the fitted range where the
        model clips its inputs."""
        return np.clip(F, self.x_min_, self.x_max_) if self.clip_inputs_ else F

    def shared_trees(self) -> TreeEnsemble | None:
        """The regressor's tree ensemble if a platform may walk it together with its other models' ensembles
        over features shared between them (`annette_torch.models.forest`): float32 comparisons, paddable
        depth, unclipped inputs. None otherwise (the model then predicts on its own)."""
        ens = getattr(self.regressor_, "ens", None)
        if not isinstance(ens, TreeEnsemble) or self.clip_inputs_ or ens.compare != "float32" or ens.max_depth < 1:
            return None
        return ens if ens._padded() is not None else None

    def predict_log(self, X: LayerFeatures, raw: np.ndarray | None = None) -> np.ndarray:
        """The regressor's output (log ms, or the log ratio of a correction) for every row; ``raw``: the
        regressor's output for these rows when already evaluated (a platform's `Forest` walk)."""
        if len(X) == 0:
            return np.zeros(0)
        z = self.regressor_.predict(self.features(X)) if raw is None else raw
        lo, hi = getattr(self, "z_range_", (-np.inf, np.inf))
        # guard against wild extrapolation (polynomials): at most Z_MARGIN beyond the trained target range
        return np.clip(z, lo - Z_MARGIN, hi + Z_MARGIN)

    def predict(self, X: LayerFeatures, raw: np.ndarray | None = None) -> np.ndarray:
        return np.exp(np.clip(self.predict_log(X, raw), -700.0, 700.0))

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.kind, "method": self.method, "target": self.target, "unroll": dict(self.unroll_),
                "features": list(self.feature_names_), "clip_inputs": bool(self.clip_inputs_),
                "x_min": self.x_min_.tolist(), "x_max": self.x_max_.tolist(), "z_range": list(self.z_range_),
                "regressor": self.regressor_.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str, target: str = "log_ms") -> "Statistical":
        if not isinstance(d, Mapping):
            raise PlatformError(f"{where}: expected an object")
        method = d.get("method")
        if method not in METHODS:
            raise PlatformError(f"{where}.method: expected one of {', '.join(METHODS)}, got {method!r}")
        if d.get("target", "log_ms") != target:
            raise PlatformError(f"{where}.target: expected {target!r} here, got {d.get('target')!r}")
        unroll = d.get("unroll", {})
        if not isinstance(unroll, Mapping):
            raise PlatformError(f"{where}.unroll: expected an object {{dimension: s}}")
        for dim in unroll:
            if dim not in DIMENSIONS:
                raise PlatformError(f"{where}.unroll.{dim}: unknown dimension (known: {', '.join(DIMENSIONS)})")
            check_number(unroll, dim, f"{where}.unroll", minimum=1)
        u = normalize_unroll(unroll)
        options = [(g, t) for g in (False, True) for t in (False, True)]
        grouped, taps = next((o for o in options if d.get("features") == feature_names(u, *o)), (False, False))
        names = feature_names(u, grouped, taps)
        if d.get("features") != names:
            raise PlatformError(f"{where}.features: do not match this version's feature transform for the "
                                f"given unroll (expected {names}, optionally with {list(GROUP_FEATURES)} and / or "
                                f"{list(TAP_FEATURES)} after f_align)")
        clip = d.get("clip_inputs", False)
        if not isinstance(clip, bool):
            raise PlatformError(f"{where}.clip_inputs: expected true or false")
        k = len(names)
        x_min = read_array(d, "x_min", where, length=k)
        x_max = read_array(d, "x_max", where, length=k)
        if np.any(x_min > x_max):
            raise PlatformError(f"{where}.x_min: entries must be <= x_max")
        m = cls(method, u, clip, target=target, grouped=grouped, taps=taps)
        m.unroll_, m.feature_names_, m.x_min_, m.x_max_, m.clip_inputs_ = u, names, x_min, x_max, clip
        m.grouped_, m.taps_ = grouped, taps
        m.regressor_ = regressor_from_dict(d.get("regressor"), f"{where}.regressor", k)
        zr = read_array(d, "z_range", where, length=2) if "z_range" in d else np.array([-np.inf, np.inf])
        if zr[0] > zr[1]:
            raise PlatformError(f"{where}.z_range: expected [min, max]")
        m.z_range_ = (float(zr[0]), float(zr[1]))
        return m

    def __repr__(self) -> str:
        reg = getattr(self, "regressor_", None)
        return f"Statistical(method={self.method!r}, unroll={self.unroll!r}, regressor={reg!r})"
