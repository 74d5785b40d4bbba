"""The vectorised tree walk (padded level tables, packed float32 keys, duplicate rows once) against the plain
row-by-row definition, on fitted scikit-learn ensembles and a shipped platform's largest ensemble; the shared
feature columns and the one walk over all of a platform's ensembles (`models.features`, `models.forest`)
against each model on its own."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

pytest.importorskip("sklearn")
from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingRegressor, RandomForestRegressor

import annette_torch as at
from annette_torch import zoo
from annette_torch.ir import Network
from annette_torch.models import LayerFeatures, Mixed, TreeEnsemble
from annette_torch.models import forest as forest_mod
from annette_torch.models import trees as trees_mod
from annette_torch.models.features import FeaturePlan, layer_features
from annette_torch.models.forest import Forest
from annette_torch.models.refined import dimension_sizes
from annette_torch.platform import load_platform
from annette_torch.prediction import run


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


# ------------------------------------------------------------------------------------------------------
# shared features and one walk for all of a platform's ensembles (models.features, models.forest)
_BASE = LayerFeatures.NAMES


def _documented(X: LayerFeatures, unroll: dict, grouped: bool, taps: bool = False) -> np.ndarray:
    """The feature transform column by column, as `annette_torch.models.features` documents it."""
    cols = [np.log1p(np.maximum(getattr(X, c).astype(np.float64), 0.0)) for c in _BASE]
    moved = X.in_elems.astype(np.float64) + X.out_elems + X.weights
    cols.append(np.log1p(np.maximum(X.ops.astype(np.float64), 0.0)) - np.log1p(np.maximum(moved, 0.0)))
    cpg = np.maximum(X.c_in // np.maximum(X.groups, 1), 1).astype(np.int64)
    cols.append(np.log2(np.gcd(cpg, 64)).astype(np.float64))
    cols.append(np.log2(np.gcd(np.maximum(X.c_out, 1).astype(np.int64), 64)).astype(np.float64))
    if grouped:
        fpg = np.maximum(X.c_out // np.maximum(X.groups, 1), 1).astype(np.int64)
        cols += [np.log1p(cpg.astype(np.float64)), np.log1p(fpg.astype(np.float64)),
                 np.log2(np.gcd(fpg, 64)).astype(np.float64)]
    if taps:
        cols += [X.h_taps.astype(np.float64), X.w_taps.astype(np.float64)]
    if unroll:
        sizes, total = dimension_sizes(X), np.zeros(len(X))
        for d in ("h", "w", "c", "f"):
            if d in unroll:
                s = float(unroll[d])
                n = np.maximum(sizes[d].astype(np.float64), 1.0)
                steps = np.ceil(n / s)
                logutil = np.log(n / (steps * s))
                cols += [np.mod(n, s) / s, np.log(steps), logutil]
                total = total + logutil
        cols.append(total)
    return np.column_stack(cols)


def _layers(rng: np.random.Generator, n: int) -> LayerFeatures:
    """Random layers, zeros and grouped ones included, some reading padding with part of their kernel taps."""
    c_in, c_out = rng.integers(0, 300, n), rng.integers(0, 300, n)
    h, w, k, g = rng.integers(0, 120, n), rng.integers(1, 120, n), rng.choice([1, 3, 5], n), rng.choice([0, 1, 2, 4], n)
    one = rng.integers(1, 3, n)
    out, inn = (one * c_out * h * w).astype(float), (one * c_in * h * w).astype(float)
    taps = np.log(rng.choice([1.0, 1.0, 0.9, 0.6, 0.35], (2, n)))
    return LayerFeatures(n=one, c_in=c_in, h_in=h, w_in=w, c_out=c_out, h_out=h, w_out=w, kh=k, kw=k, sh=one, sw=one,
                         groups=g, ops=2.0 * out * c_in * k * k, in_elems=inn, out_elems=out,
                         weights=(c_in * c_out * k * k).astype(float), h_taps=taps[0], w_taps=taps[1])


_UNROLLS = st.dictionaries(st.sampled_from("hwcf"), st.sampled_from([1.0, 3.0, 8.0, 12.0, 16.0, 48.0, 64.0]),
                           max_size=4)


@settings(max_examples=40, deadline=None)
@given(specs=st.lists(st.tuples(_UNROLLS, st.booleans(), st.booleans()), min_size=1, max_size=4),
       seed=st.integers(0, 2**16),
       n=st.integers(0, 40))
def test_feature_plan_columns_equal_each_transform(specs, seed, n) -> None:
    """One plan for several transforms gives each transform's columns bit for bit (shared columns computed once)."""
    X = _layers(np.random.default_rng(seed), n)
    plan = FeaturePlan(specs)
    M = plan.matrix(X)
    for i, (unroll, grouped, taps) in enumerate(specs):
        want = _documented(X, unroll, grouped, taps) if n else np.zeros((0, len(plan.columns[i])))
        np.testing.assert_array_equal(M[:, plan.columns[i]], want)
        np.testing.assert_array_equal(layer_features(X, unroll, grouped, taps), want)


_SPECS = [({"w": 16.0, "f": 32.0}, False, True), ({}, False, False), ({"c": 8.0}, True, False),
          ({"h": 3.0, "w": 16.0, "f": 8.0}, False, True)]


@pytest.fixture(scope="module")
def forest_members() -> list[tuple[TreeEnsemble, tuple[dict, bool]]]:
    """Ensembles of different kinds and depths, each fitted on its own feature transform."""
    rng = np.random.default_rng(5)
    X = _layers(rng, 400)
    y = np.log1p(X.ops) * 0.1 + np.log1p(X.c_out) * 0.3 + 0.8 * X.h_taps + rng.normal(0, 0.1, len(X))
    fits = [GradientBoostingRegressor(n_estimators=40, max_depth=5, random_state=0),
            RandomForestRegressor(n_estimators=12, max_depth=8, random_state=0),
            GradientBoostingRegressor(n_estimators=25, max_depth=2, learning_rate=0.2, random_state=0),
            RandomForestRegressor(n_estimators=5, max_depth=3, random_state=0)]
    return [(TreeEnsemble.from_sklearn(est.fit(layer_features(X, *spec), y)), spec) for est, spec in zip(fits, _SPECS)]


def _check_forest(members, X: LayerFeatures, member: np.ndarray) -> None:
    forest = Forest([e for e, _ in members], [s for _, s in members])
    got = forest.regress(X, member)
    for m, (ens, spec) in enumerate(members):
        rows = np.flatnonzero(member == m)
        if rows.size:
            F = layer_features(X.take(rows), *spec)
            np.testing.assert_array_equal(got[rows], ens.predict(F))
            np.testing.assert_array_equal(got[rows], ens.predict_reference(F))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), n=st.integers(1, 60), repeats=st.integers(1, 4),
       members=st.sets(st.integers(0, 3), min_size=1))
def test_forest_equals_each_ensemble(forest_members, seed, n, repeats, members) -> None:
    """All ensembles walked together (depths 2..8, sums and means, repeated rows evaluated once) give each
    ensemble's own prediction bit for bit."""
    rng = np.random.default_rng(seed)
    X = _layers(rng, n).take(np.tile(np.arange(n), repeats))
    _check_forest(forest_members, X, rng.choice(sorted(members), len(X)))


def test_forest_tells_apart_rows_that_differ_only_in_their_kernel_taps(forest_members) -> None:
    """Two convolutions alike in every `LayerFeatures.NAMES` column but dilated differently (their tap shares
    differ) get their own outputs, in one call and from the memory of an earlier one."""
    rng = np.random.default_rng(11)
    base = _layers(rng, 30)
    rows = np.repeat(np.arange(30), 3)
    X = base.take(rows)
    X = LayerFeatures(**{k: getattr(X, k) for k in LayerFeatures.NAMES},
                      h_taps=np.tile(np.log([1.0, 0.7, 0.4]), 30), w_taps=np.tile(np.log([1.0, 0.6, 0.3]), 30))
    member = np.zeros(len(X), dtype=np.int64)  # the first member reads the tap features
    assert _SPECS[0][2]
    _check_forest(forest_members, X, member)
    forest = Forest([e for e, _ in forest_members], [s for _, s in forest_members])
    first = forest.regress(X.take(np.arange(0, len(X), 3)), member[::3])  # undilated rows remembered first
    np.testing.assert_array_equal(forest.regress(X, member)[::3], first)
    assert len(set(forest.regress(X, member)[:3].tolist())) > 1


def test_forest_hash_collisions_fall_back_to_whole_rows(forest_members, monkeypatch) -> None:
    """With every row hashed alike, the forest still tells rows apart (by comparing them) and stays exact."""
    monkeypatch.setattr(forest_mod, "_HASH", np.zeros_like(forest_mod._HASH))
    rng = np.random.default_rng(3)
    X = _layers(rng, 200).take(np.tile(np.arange(200), 2))
    _check_forest(forest_members, X, rng.integers(0, 4, len(X)))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ort-cpu", "openvino-cpu"])
def test_platform_forest_changes_no_estimate(name) -> None:
    """A shipped platform's layer times with its forest equal those of its models one by one, bit for bit."""
    plat = load_platform(name)
    assert plat.tables.forest is not None and (plat.tables.member >= 0).sum() > 10
    alone = copy.copy(plat)
    alone.tables = copy.copy(plat.tables)
    alone.tables.forest, alone.tables.member = None, np.full_like(plat.tables.member, -1)
    nets = [at.trace(zoo.get(m), zoo.INPUT_SHAPES[m]) for m in ("resnet18", "mobilenet_v2", "efficientnet_b0")]
    big, seg = Network.concat(nets)
    for net, segments in [(n, None) for n in nets] + [(big, seg)]:
        n = 1 if segments is None else len(nets)
        a, b = run(plat, net, segments, n), run(alone, net, segments, n)
        t, mi, t0, mi0 = a.time_ms, a.model, b.time_ms, b.model
        np.testing.assert_array_equal(t, t0)
        np.testing.assert_array_equal(mi, mi0)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), calls=st.integers(2, 5), size=st.integers(1, 30), memo=st.sampled_from([8, 1 << 16]))
def test_a_forest_reused_across_calls_answers_as_a_fresh_one(forest_members, monkeypatch, seed, calls, size,
                                                             memo) -> None:
    """Outputs a forest remembers from earlier calls (also once its memory overflowed and started afresh) are
    bit for bit what a fresh forest computes."""
    monkeypatch.setattr(forest_mod, "_MEMO_SIZE", memo)
    rng = np.random.default_rng(seed)
    pool = _layers(rng, 40)
    ens, specs = [e for e, _ in forest_members], [s for _, s in forest_members]
    reused = Forest(ens, specs)
    for _ in range(calls):  # overlapping draws from one pool of layers: repeats within and across calls
        X = pool.take(rng.integers(0, 40, size))
        member = rng.integers(0, 4, size)
        np.testing.assert_array_equal(reused.regress(X, member), Forest(ens, specs).regress(X, member))
    assert len(reused._memo) <= max(memo, size)


@pytest.mark.parametrize("name", ["ort-cpu", "openvino-cpu"])
def test_the_regressors_no_forest_walks_predict_as_their_models_and_remember(name) -> None:
    """A shipped platform's linear-model trees and polynomials (`OwnRegressors`: one feature pass, outputs
    remembered) give each model's own prediction (to rounding: a polynomial's products summed over other row
    blocks), and a repeated call the same numbers."""
    plat = load_platform(name)
    own = plat.tables.own
    models = ((own.index >= 0) & (plat.tables.member < 0)).nonzero()[0]  # (the forest walks the others)
    assert models.size >= 2
    nets = [at.estimate(at.trace(zoo.get(m), zoo.INPUT_SHAPES[m]), plat).mapped.network  # as the runtime runs it
            for m in ("vit_b16", "efficientnet_b0", "shufflenet_v2_x0_5", "densenet121")]
    big, _ = Network.concat(nets)
    mi = plat.tables.model_of_type[big.types]
    rows = np.isin(mi, models).nonzero()[0]
    assert rows.size and np.unique(mi[rows]).size >= 2
    X = LayerFeatures.stacked_of(big, rows, taps=own.plan.taps)
    own.forget()
    got = own.regress(X, mi[rows])
    for m in np.unique(mi[rows]).tolist():
        sel = mi[rows] == m
        st_ = own.models[m]
        want = st_.regressor_.predict(st_.features(LayerFeatures.rows_of(big, rows[sel])))
        np.testing.assert_allclose(got[sel], want, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(own.regress(X, mi[rows]), got)
    assert len(own._memo) == len({(m, *c) for m, c in zip(mi[rows].tolist(), X.stacked_keys(own.plan.taps).T.tolist())})
