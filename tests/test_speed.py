"""The vectorised tree walk (padded level tables, packed float32 keys, duplicate rows once) against the plain
row-by-row definition, on fitted scikit-learn ensembles and a shipped platform's largest ensemble."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingRegressor, RandomForestRegressor

from annette_torch.models import Mixed, TreeEnsemble
from annette_torch.models import trees as trees_mod
from annette_torch.platform import load_platform


def _data(rng: np.random.Generator, n: int = 300, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    X = rng.normal(size=(n, k)) * [1, 10, 0.1, 100, 1]
    X[:, 4] = np.round(X[:, 4])  # ties at thresholds
    return X, np.sin(X[:, 0]) + 0.01 * X[:, 1] + X[:, 4] ** 2


def _rows(ens: TreeEnsemble, X: np.ndarray) -> list[np.ndarray]:
    inner = ~ens._leaf
    at_thr = np.repeat(X[:1], int(inner.sum()), axis=0)
    at_thr[np.arange(len(at_thr)), ens.feature[inner]] = ens.threshold[inner]  # exactly on each threshold
    nan = X[:4].copy()
    nan[:, 0] = np.nan
    neg0 = X[:2].copy()
    neg0[:, :] = -0.0
    return [X, X[:1], np.repeat(X[:7], 9, axis=0), at_thr, nan, neg0, X * 1e40]


@pytest.mark.parametrize("est", [GradientBoostingRegressor(n_estimators=60, max_depth=4, random_state=0),
                                 RandomForestRegressor(n_estimators=20, max_depth=9, random_state=0),
                                 HistGradientBoostingRegressor(max_iter=30, random_state=0)],
                         ids=["gbm", "rf", "hgb-float64"])
def test_vectorised_walk_equals_row_by_row(est) -> None:
    rng = np.random.default_rng(0)
    X, y = _data(rng)
    ens = TreeEnsemble.from_sklearn(est.fit(X, y))
    assert ens._padded() is not None
    for rows in _rows(ens, rng.normal(size=(40, 5)) * [1, 10, 0.1, 100, 1]):
        ref = ens.predict_reference(rows)
        np.testing.assert_array_equal(ens.predict(rows), ref)
        if np.all(np.abs(rows) < 1e38):  # sklearn refuses NaN and values beyond float32
            np.testing.assert_array_equal(ens.predict(rows), est.predict(rows))
    # the node walk (used for ensembles too deep to pad) agrees too, leaf for leaf
    X0 = X[:50]
    padded_leaves = ens.apply(X0)
    ens._tables = None
    np.testing.assert_array_equal(ens.apply(X0), padded_leaves)
    np.testing.assert_array_equal(ens.predict(X0), ens.predict_reference(X0))


def test_too_deep_to_pad_walks_the_nodes(monkeypatch) -> None:
    rng = np.random.default_rng(1)
    X, y = _data(rng)
    ens = TreeEnsemble.from_sklearn(RandomForestRegressor(n_estimators=5, random_state=0).fit(X, y))
    monkeypatch.setattr(trees_mod, "MAX_PADDED_LEAVES", 1)
    assert ens._padded() is None
    np.testing.assert_array_equal(ens.predict(X[:30]), ens.predict_reference(X[:30]))


@pytest.mark.slow
def test_shipped_convolution_ensemble_equals_row_by_row() -> None:
    plat = load_platform("ort-cpu")
    model = plat.layers["Conv"]
    assert isinstance(model, Mixed)
    corr = model.correction_
    ens = corr.regressor_.ens
    rng = np.random.default_rng(2)
    F = corr.x_min_ + (corr.x_max_ - corr.x_min_) * rng.random((25, ens.n_features))
    F = np.concatenate([F, F[:5]])
    np.testing.assert_array_equal(ens.predict(F), ens.predict_reference(F))
