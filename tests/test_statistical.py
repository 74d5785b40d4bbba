"""Statistical and mixed layer models: tree export, candidate fits, clipping, JSON round trips, validation."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from annette_torch import PlatformError
from annette_torch.fit.statistical_fit import fit_mixed, fit_statistical, mape
from annette_torch.ir import LayerType as T, NetworkBuilder
from annette_torch.models import LayerFeatures, Mixed, RefinedRoofline, Roofline, Statistical, TreeEnsemble, model_from_dict
from annette_torch.models.statistical import feature_names, layer_features
from annette_torch.platform import Platform, SCHEMA
from annette_torch.prediction import model_times

needs_sklearn = pytest.mark.skipif(importlib.util.find_spec("sklearn") is None, reason="scikit-learn not installed")

UNROLL = {"c": 16, "f": 32}
TRUE = RefinedRoofline(op_s=2e11, bandwidth=2e10, unroll={"c": {"s": 16, "alpha": 0.9}, "f": {"s": 32, "alpha": 0.8}})


def convs(n: int, rng: np.random.Generator, cmax: int = 256, hmax: int = 64) -> LayerFeatures:
    """Random square convolutions (batch 1, kernel 1/3/5, stride 1/2, 'same' padding)."""
    c_in, c_out = rng.integers(1, cmax + 1, n), rng.integers(1, cmax + 1, n)
    h, k, s = rng.integers(4, hmax + 1, n), rng.choice([1, 3, 5], n), rng.choice([1, 2], n)
    ho = (h + 2 * (k // 2) - k) // s + 1
    one = np.ones(n, np.int64)
    out, inn = (c_out * ho * ho).astype(float), (c_in * h * h).astype(float)
    return LayerFeatures(n=one, c_in=c_in, h_in=h, w_in=h, c_out=c_out, h_out=ho, w_out=ho, kh=k, kw=k, sh=s, sw=s,
                         groups=one, ops=2.0 * out * c_in * k * k, in_elems=inn, out_elems=out,
                         weights=(c_in * c_out * k * k).astype(float))


def measured(X: LayerFeatures, rng: np.random.Generator, overhead: float = 0.005, noise: float = 0.03) -> np.ndarray:
    """'Measured' times: the true refined roofline plus a per-layer overhead, with 3% log-normal noise."""
    return (TRUE.predict(X) + overhead) * np.exp(rng.normal(0.0, noise, len(X)))


def roundtrip(model):
    return model_from_dict(json.loads(json.dumps(model.to_dict())), "m")


# ------------------------------------------------------------------------------------------------------
# tree ensembles
def _sk_model(kind: str, seed: int):
    from sklearn.ensemble import (ExtraTreesRegressor, GradientBoostingRegressor, HistGradientBoostingRegressor,
                                  RandomForestRegressor)
    from sklearn.tree import DecisionTreeRegressor
    return {"tree": lambda: DecisionTreeRegressor(max_depth=6, random_state=seed),
            "rf": lambda: RandomForestRegressor(n_estimators=7, max_depth=5, random_state=seed),
            "et": lambda: ExtraTreesRegressor(n_estimators=5, random_state=seed),
            "gbm": lambda: GradientBoostingRegressor(n_estimators=15, max_depth=3, learning_rate=0.3,
                                                     random_state=seed),
            "gbm_lad": lambda: GradientBoostingRegressor(loss="absolute_error", n_estimators=10, random_state=seed),
            "gbm_zero": lambda: GradientBoostingRegressor(init="zero", n_estimators=10, random_state=seed),
            "hgb": lambda: HistGradientBoostingRegressor(max_iter=10, min_samples_leaf=2, random_state=seed),
            }[kind]()


@needs_sklearn
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kind=st.sampled_from(["tree", "rf", "et", "gbm", "gbm_lad", "gbm_zero", "hgb"]),
       seed=st.integers(0, 2**16), data=st.data())
def test_tree_export_equals_sklearn(kind, seed, data):
    n_rows = data.draw(st.integers(8, 60), "rows")
    n_feat = data.draw(st.integers(1, 5), "features")
    values = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False)
    X = data.draw(hnp.arrays(np.float64, (n_rows, n_feat), elements=values), "X")
    y = data.draw(hnp.arrays(np.float64, n_rows, elements=values), "y")
    est = _sk_model(kind, seed).fit(X, y)
    ens = TreeEnsemble.from_sklearn(est)
    Xt = np.vstack([X, np.random.default_rng(seed).normal(0, 1e3, (40, n_feat)), X + 1e-3])
    want = est.predict(Xt)
    got = ens.predict(Xt)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * (1 + np.abs(want).max()))
    again = TreeEnsemble.from_dict(json.loads(json.dumps(ens.to_dict())), "t")
    assert np.array_equal(again.predict(Xt), got)
    # the padded level tables, the node walk and the row-by-row definition agree
    tol = dict(rtol=1e-12, atol=1e-12 * (1 + np.abs(want).max()))
    np.testing.assert_allclose(got, ens.predict_reference(Xt), **tol)
    walked = TreeEnsemble.from_dict(ens.to_dict(), "t")
    walked._padded = lambda: None  # as an ensemble too deep to pad
    np.testing.assert_allclose(walked.predict(Xt), got, **tol)
    assert np.array_equal(walked.apply(Xt), ens.apply(Xt))


@needs_sklearn
def test_tree_export_random_forest_on_random_data():
    from sklearn.ensemble import RandomForestRegressor
    rng = np.random.default_rng(7)
    X = rng.lognormal(0, 2, (400, 6))
    y = np.log(X[:, 0] * X[:, 1] + 1) + rng.normal(0, 0.1, 400)
    rf = RandomForestRegressor(n_estimators=40, max_depth=12, random_state=0).fit(X, y)
    ens = TreeEnsemble.from_sklearn(rf)
    assert ens.n_trees == 40 and ens.max_depth == max(t.get_depth() for t in rf.estimators_)
    Xt = rng.lognormal(0, 2.5, (3000, 6))
    np.testing.assert_allclose(ens.predict(Xt), rf.predict(Xt), rtol=1e-9, atol=0)
    assert ens.apply(Xt).shape == (3000, 40)


@needs_sklearn
def test_tree_export_refuses_what_it_cannot_represent():
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.linear_model import LinearRegression
    X = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(ValueError, match="cannot convert LinearRegression"):
        TreeEnsemble.from_sklearn(LinearRegression().fit(X, X[:, 0]))
    hgb = HistGradientBoostingRegressor(loss="poisson", max_iter=3).fit(X, np.abs(X[:, 0]))
    with pytest.raises(ValueError, match="identity-link"):
        TreeEnsemble.from_sklearn(hgb)


def _small_tree() -> dict:
    # two trees: 0: x0 <= 1 ? 1.0 : (x1 <= 0 ? 2.0 : 3.0);  5: leaf 10.0
    return TreeEnsemble(np.array([0, -1, 1, -1, -1, -1]), np.array([1.0, 0, 0.0, 0, 0, 0]),
                        np.array([1, -1, 3, -1, -1, -1]), np.array([2, -1, 4, -1, -1, -1]),
                        np.array([0, 1.0, 0, 2.0, 3.0, 10.0]), np.array([0, 5]), 2, init=0.5, scale=2.0).to_dict()


def test_tree_predict_by_hand():
    ens = TreeEnsemble.from_dict(_small_tree(), "t")
    X = np.array([[0.0, 5.0], [1.5, -1.0], [1.5, 1.0], [1.0, 1.0]])
    np.testing.assert_array_equal(ens.predict(X), 0.5 + 2.0 * np.array([1.0, 2.0, 3.0, 1.0]) + 2.0 * 10.0)
    assert ens.max_depth == 2


@pytest.mark.parametrize("field, value, match", [
    ("left", [1, -1, 9, -1, -1, -1], "t.left: node 2 points to 9"),
    ("right", [2, -1, 0, -1, -1, -1], "t.right: node 2 points to 0"),  # a cycle (child before parent)
    ("left", [1, -1, 5, -1, -1, -1], "t.left: node 2 points to 5"),  # into the next tree
    ("left", [1, -1, 3, -1, -1, 1], "t.left: node 5 has only one child"),
    ("feature", [0, -1, 2, -1, -1, -1], "t.feature: node 2 splits on feature 2"),
    ("threshold", [1.0, 0, float("inf"), 0, 0, 0], "t.threshold: entry 2 is not finite"),
    ("threshold", [1.0, 0, 0.0], "t.threshold: expected 6 entries"),
    ("value", [0, 1, 0, 2, 3, "x"], "t.value: expected numbers"),
    ("feature", [0, -1, 1.5, -1, -1, -1], "t.feature: expected integers"),
    ("roots", [1, 5], "t.roots"),
    ("roots", [0, 9], "t.roots"),
    ("aggregate", "median", "t.aggregate"),
    ("compare", "float16", "t.compare"),
    ("n_features", 0, "t.n_features"),
    ("init", "0", "t.init"),
    ("value", None, "t.value: expected a list"),
])
def test_tree_from_dict_validates(field, value, match):
    d = _small_tree()
    d[field] = value
    with pytest.raises(PlatformError, match=re.escape(match)):
        TreeEnsemble.from_dict(d, "t")


@given(hnp.arrays(np.float64, st.integers(0, 40), elements=st.floats(allow_nan=False, allow_infinity=False)),
       hnp.arrays(np.int64, st.integers(0, 40), elements=st.integers(-2**40, 2**40)))
@example(np.zeros(0), np.array([-2**31, 2**31 - 1]))  # the int32 bounds: still int32
@example(np.zeros(0), np.array([2**31]))
def test_packed_arrays_round_trip_bit_for_bit(floats, ints):
    from annette_torch.models.trees import pack_array, read_array
    d = json.loads(json.dumps({"f": pack_array(floats), "i": pack_array(ints, integer=True)}))
    assert read_array(d, "f", "t").tobytes() == floats.astype(np.float64).tobytes()  # -0.0, subnormals too
    np.testing.assert_array_equal(read_array(d, "i", "t", integer=True), ints)
    fits32 = ints.size == 0 or (ints.min() >= -2**31 and ints.max() < 2**31)  # int32 holds -2^31 .. 2^31 - 1
    assert d["i"]["dtype"] == ("<i4" if fits32 else "<i8")


def test_tree_files_pack_their_node_arrays_and_plain_lists_still_load():
    d = _small_tree()
    assert d["threshold"]["dtype"] == "<f8" and d["left"]["dtype"] == "<i4"
    plain = {k: (TreeEnsemble.from_dict(d, "t").__dict__[k].tolist() if isinstance(v, dict) else v)
             for k, v in d.items()}
    X = np.array([[0.0, 5.0], [1.5, -1.0], [1.5, 1.0]])
    np.testing.assert_array_equal(TreeEnsemble.from_dict(plain, "t").predict(X),
                                  TreeEnsemble.from_dict(d, "t").predict(X))


@pytest.mark.parametrize("value, match", [
    ({"dtype": "<f4", "base64": ""}, "t.value.dtype: expected one of"),
    ({"dtype": "<f8", "base64": 5}, "t.value.base64: expected a base64 string"),
    ({"dtype": "<f8", "base64": "AAAA*AAA"}, "t.value.base64: not valid base64"),
    ({"dtype": "<f8", "base64": "AAAAAAAAAAA="}, "t.value: expected 6 entries, got 1"),
    ({"dtype": "<f8", "base64": "AAAAAAAA"}, "is not a whole number of <f8 entries"),
    ("nan", "t.value: entry 1 is not finite"),
])
def test_corrupted_packed_arrays_fail_clearly(value, match):
    from annette_torch.models.trees import pack_array
    d = _small_tree()
    d["value"] = pack_array(np.array([0, np.nan, 0, 2.0, 3.0, 10.0])) if value == "nan" else value
    with pytest.raises(PlatformError, match=re.escape(match)):
        TreeEnsemble.from_dict(d, "t")


# ------------------------------------------------------------------------------------------------------
# statistical models
@pytest.fixture(scope="module")
def conv_data():
    rng = np.random.default_rng(11)
    X = convs(300, rng)
    return X, measured(X, rng)


#: CV MAPE bounds (%) on 300 synthetic convolutions with 3% noise (the noise alone gives ~2.4%); measured:
#: gbm 9.5, rf 12.9, hgb 11.3, poly 69, poly3 5.0, lmt 5.7. The degree-2 polynomial is the weak one: the only
#: layer with c_out = 1 lies 10 standard deviations out in f_logutil when its fold is held out, and its
#: quadratic terms predict it ~100x too slow (on other seeds poly gets 8-10%); CV does not choose it then.
BOUNDS = {"gbm": 15, "rf": 20, "hgb": 15, "poly": 100, "poly3": 10, "lmt": 10}


@pytest.mark.slow
@needs_sklearn
def test_statistical_candidates_fit_synthetic_layers(conv_data):
    X, y = conv_data
    model, rep = fit_statistical(X, y, candidates=tuple(BOUNDS), unroll=UNROLL, cv=5)
    assert rep["n_samples"] == 300 and rep["cv_folds"] == 5 and not rep["errors"]
    for c, bound in BOUNDS.items():
        assert rep["cv_mape"][c] < bound, (c, rep["cv_mape"])
    assert rep["chosen"] == min(rep["cv_mape"], key=rep["cv_mape"].get)
    assert model.method == rep["chosen"] and mape(model.predict(X), y) < rep["cv_mape"][rep["chosen"]] * 1.5
    assert set(rep["extrapolation_mape"]) == set(BOUNDS)


@pytest.mark.slow
@needs_sklearn
def test_huber_gbm_is_sklearns_huber_boosting_and_leans_less_on_a_slow_tail():
    """``gbm-huber`` is scikit-learn's GBM with a Huber loss, exported exactly; with a slow tail the features
    cannot explain (5% of the layers 5x slower, as some OpenVINO configurations are), a squared-loss GBM
    over-predicts typical held-out layers (~6% here) and the Huber GBM less (~5%): lower, not zero."""
    from sklearn.ensemble import GradientBoostingRegressor
    from annette_torch.models.statistical import HUBER, fit_regressor
    rng = np.random.default_rng(0)
    F, z = rng.normal(size=(200, 5)), rng.normal(size=200)
    ours = fit_regressor("gbm-huber", F, z, seed=0)
    ref = GradientBoostingRegressor(n_estimators=200, max_depth=4, learning_rate=0.05, subsample=0.8,
                                    min_samples_leaf=3, random_state=0, **HUBER).fit(F, z)
    np.testing.assert_allclose(ours.predict(F), ref.predict(F), rtol=1e-9, atol=1e-9)
    bias = {}
    for method in ("gbm", "gbm-huber"):
        out = []
        for seed in range(3):
            rng = np.random.default_rng(seed)
            X = convs(300, rng)
            y = measured(X, rng)
            y = np.where(rng.random(len(y)) < 0.05, 5 * y, y)
            Xt = convs(300, rng)
            out.append(np.median(Statistical(method, UNROLL).fit(X, y).predict(Xt) / (TRUE.predict(Xt) + 0.005)))
        bias[method] = float(np.mean(out)) - 1
    assert bias["gbm"] > 0.04 and 0 < bias["gbm-huber"] < bias["gbm"] - 0.005, bias


def test_unrolling_features_help_linear_model_tree(conv_data):
    X, y = conv_data
    _, plain = fit_statistical(X, y, candidates=("lmt",))
    _, steps = fit_statistical(X, y, candidates=("lmt",), unroll=UNROLL)
    assert steps["cv_mape"]["lmt"] < plain["cv_mape"]["lmt"]


def test_feature_transform_documented_columns():
    X = convs(5, np.random.default_rng(0))
    names = feature_names(UNROLL)
    F = layer_features(X, UNROLL)
    assert F.shape == (5, len(names)) == (5, 16 + 1 + 2 + 2 * 3 + 1)
    c = X.c_in.astype(float)
    np.testing.assert_allclose(2 ** F[:, names.index("c_align")], np.gcd(X.c_in // X.groups, 64))
    np.testing.assert_allclose(F[:, names.index("c_frac")], np.mod(c, 16) / 16)
    np.testing.assert_allclose(F[:, names.index("c_steps")], np.log(np.ceil(c / 16)))
    np.testing.assert_allclose(F[:, names.index("log1p_ops")], np.log1p(X.ops))
    # the same parameters given as a refined roofline's unroll
    assert np.array_equal(layer_features(X, TRUE.unroll), F) and feature_names(TRUE.unroll) == names


def grouped_convs(n: int, rng: np.random.Generator) -> tuple[LayerFeatures, np.ndarray]:
    """Grouped 3x3 convolutions that run at full speed only when the output channels of one group fill a vector
    of 8 (a runtime's grouped kernel vectorises over them), with 3% noise. The whole layer's counts do not
    tell: 8 groups of 3 output channels have the same aligned total (24) as 3 groups of 8."""
    cpg, fpg = rng.choice([3, 4, 6, 8, 12, 16, 24, 32], n), rng.choice([3, 4, 6, 8, 12, 16, 24, 32], n)
    g, h = rng.choice([2, 3, 4, 8, 16, 32], n), rng.integers(4, 57, n)
    c, f = cpg * g, fpg * g
    one, k = np.ones(n, np.int64), np.full(n, 3)
    e_in, e_out = (c * h * h).astype(float), (f * h * h).astype(float)
    X = LayerFeatures(n=one, c_in=c, h_in=h, w_in=h, c_out=f, h_out=h, w_out=h, kh=k, kw=k, sh=one, sw=one,
                      groups=g, ops=2.0 * e_out * cpg * 9, in_elems=e_in, out_elems=e_out,
                      weights=(f * cpg * 9).astype(float))
    eff = np.where(fpg % 8 == 0, 1.0, 0.4)
    return X, (X.ops / 1e8 / eff + 0.002) * np.exp(rng.normal(0.0, 0.03, n))


@pytest.mark.slow
@needs_sklearn
def test_group_features_help_grouped_convolutions():
    X, y = grouped_convs(600, np.random.default_rng(3))
    _, plain = fit_statistical(X, y, candidates=("gbm",))
    m, grouped = fit_statistical(X, y, candidates=("gbm",), grouped=True)
    assert grouped["cv_mape"]["gbm"] < 0.5 * plain["cv_mape"]["gbm"]
    names = m.to_dict()["features"]
    assert names == feature_names({}, grouped=True) and names[19:22] == ["log1p_cpg", "log1p_fpg", "fpg_align"]
    F = layer_features(X, {}, grouped=True)
    np.testing.assert_allclose(np.expm1(F[:, 19]), X.c_in // X.groups)
    np.testing.assert_allclose(np.expm1(F[:, 20]), X.c_out // X.groups)
    np.testing.assert_allclose(2 ** F[:, 21], np.gcd(X.c_out // X.groups, 64))
    again = roundtrip(m)  # the stored feature names select the transform
    assert again.grouped_ and np.array_equal(again.predict(X), m.predict(X))
    mixed, _ = fit_mixed(X, y, BASE, candidates=("lmt",), grouped=True)
    again = roundtrip(mixed)
    assert again.grouped and again.correction_.grouped_ and np.array_equal(again.predict(X), mixed.predict(X))
    assert not roundtrip(Statistical("lmt").fit(X, y)).grouped_  # files without them load as before


def dilated_convs(n: int, rng: np.random.Generator) -> tuple[LayerFeatures, np.ndarray]:
    """3x3 convolutions of dilation 1..18 with "same" padding on 8..64-wide maps, timed as a runtime that skips
    the taps reading padding (OpenVINO CPU) runs them: MACs times the share of taps inside the input, 3% noise.
    Their `NAMES` columns are those of an undilated convolution."""
    b = NetworkBuilder("dil")
    sides, dils = rng.choice([8, 14, 16, 28, 33, 56, 64], n), rng.choice([1, 2, 4, 6, 12, 18], n)
    chans = rng.choice([32, 64, 128, 256], (n, 2))
    for i in range(n):
        x = b.input(f"x{i}", (1, int(chans[i, 0]), int(sides[i]), int(sides[i])))
        b.conv(f"c{i}", x, int(chans[i, 1]), 3, padding=int(dils[i]), dilation=int(dils[i]))
    net = b.build()
    rows = np.flatnonzero(net.types == T.CONV)
    X = LayerFeatures.from_network(net, rows)
    share = np.exp(X.h_taps + X.w_taps)
    return X, (X.ops * share / 1e8 + 0.002) * np.exp(rng.normal(0.0, 0.03, n))


@needs_sklearn
def test_tap_features_help_dilated_convolutions():
    X, y = dilated_convs(300, np.random.default_rng(4))
    _, plain = fit_mixed(X, y, BASE, candidates=("gbm",))
    m, taps = fit_mixed(X, y, BASE, candidates=("gbm",), taps=True)
    assert taps["cv_mape"]["gbm"] < 0.6 * plain["cv_mape"]["gbm"]
    names = m.correction_.to_dict()["features"]
    assert names == feature_names(BASE.unroll, taps=True) and names[19:21] == ["h_taps", "w_taps"]
    np.testing.assert_array_equal(layer_features(X, {}, taps=True)[:, 19:21], np.column_stack([X.h_taps, X.w_taps]))
    again = roundtrip(m)  # the stored feature names select the transform
    assert again.taps and again.correction_.taps_ and np.array_equal(again.predict(X), m.predict(X))
    assert not roundtrip(Statistical("lmt").fit(X, y)).taps_  # files without them load as before
    undilated = LayerFeatures(**{k: getattr(X, k) for k in LayerFeatures.NAMES})  # no tap columns: shares of 1
    np.testing.assert_array_equal(layer_features(undilated, {}, taps=True)[:, 19:21], 0.0)
    # the share a dilation leaves is a fitted power (here the time follows it fully), which carries it to larger
    # layers than measured: monotone in the dilation, near the true ratios
    assert 0.7 < m.taps_slope_ <= 1.0 and again.taps_slope_ == m.taps_slope_
    big, _ = dilated_convs(1, np.random.default_rng(0))
    b = NetworkBuilder("big")
    x = b.input("x", (1, 2048, 33, 33))
    for d in (1, 6, 12, 18):
        b.conv(f"d{d}", x, 256, 3, padding=d, dilation=d)
    net = b.build()
    Xb = LayerFeatures.from_network(net, np.flatnonzero(net.types == T.CONV))
    t = m.predict(Xb)
    assert np.all(np.diff(t) < 0)
    np.testing.assert_allclose(t[1:] / t[0], np.exp(Xb.h_taps + Xb.w_taps)[1:] / np.exp(Xb.h_taps + Xb.w_taps)[0],
                               rtol=0.15)
    assert not roundtrip(fit_mixed(X, y, BASE, candidates=("gbm",))[0]).taps_slope_  # none without taps


def test_fit_says_what_is_missing():
    X = convs(3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="at least 4 measured layers, got 3"):
        fit_statistical(X, np.ones(3), candidates=("poly",))
    with pytest.raises(ValueError, match="not finite and > 0"):
        fit_statistical(convs(6, np.random.default_rng(0)), np.array([1, 2, 0, 1, 1, 1.0]), candidates=("poly",))
    with pytest.raises(ValueError, match="unknown candidates"):
        fit_statistical(convs(6, np.random.default_rng(0)), np.ones(6), candidates=("svm",))


# ------------------------------------------------------------------------------------------------------
# mixed models
BASE = RefinedRoofline(op_s=1.5e11, bandwidth=3e10, unroll={"c": {"s": 16, "alpha": 0.9}, "f": {"s": 32, "alpha": 0.8}})


@pytest.mark.parametrize("method", ["poly", "lmt", pytest.param("gbm", marks=needs_sklearn)])
def test_mixed_with_zero_correction_is_the_base(method):
    rng = np.random.default_rng(1)
    X = convs(120, rng, cmax=64, hmax=32)
    m = Mixed(BASE, method).fit(X, BASE.predict(X))
    assert m.clip_min_ == m.clip_max_ == 0.0
    for Xq in (X, convs(200, rng, cmax=2048, hmax=512)):
        assert np.array_equal(m.predict(Xq), BASE.predict(Xq))
        assert np.array_equal(roundtrip(m).predict(Xq), BASE.predict(Xq))


@pytest.mark.slow
@needs_sklearn
def test_mixed_extrapolates_no_worse_than_its_base():
    rng = np.random.default_rng(3)
    # 190 layers: the correction is clipped to the full fitted range (>= 200: the central 99%, where a
    # degree-2 polynomial can run to the clip far outside; see test_mixed_correction_is_clipped...)
    Xtr, Xte = convs(190, rng, cmax=64, hmax=32), convs(300, rng, cmax=512, hmax=128)
    ytr, yte = measured(Xtr, rng), measured(Xte, rng)
    for base in (Roofline(op_s=2e11, bandwidth=2e10), BASE):
        model, rep = fit_mixed(Xtr, ytr, base, candidates=("gbm", "rf", "poly", "lmt"), unroll=UNROLL)
        assert rep["cv_mape"][rep["chosen"]] < rep["base_mape"] / 2
        out_mixed, out_base = mape(model.predict(Xte), yte), mape(base.predict(Xte), yte)
        assert out_mixed <= out_base, (base, rep["chosen"], out_mixed, out_base)


def test_larger_gbm_must_earn_its_size():
    """``gbm-large`` wins only with a clear (LARGE_GAIN) score gain over every other candidate."""
    from annette_torch.fit.statistical_fit import LARGE_GAIN, _best
    assert _best({"gbm": 10.0, "gbm-large": 9.5, "rf": 11.0}) == "gbm"  # 5% better: not worth 5x the size
    assert _best({"gbm": 10.0, "gbm-large": 10.0 * (1 - LARGE_GAIN) - 0.01, "rf": 11.0}) == "gbm-large"
    assert _best({"gbm": 10.0, "gbm-large": 12.0, "rf": 9.0}) == "rf"
    assert _best({"gbm-large": 3.0}) == "gbm-large"


@pytest.mark.slow
@needs_sklearn
def test_larger_gbm_competes_only_on_large_types(monkeypatch):
    import annette_torch.fit.statistical_fit as SF
    rng = np.random.default_rng(8)
    X = convs(120, rng, cmax=64, hmax=32)
    y = measured(X, rng)
    _, rep = fit_mixed(X, y, BASE, candidates=("gbm", "lmt"), unroll=UNROLL)
    assert "gbm-large" not in rep["cv_mape"]  # 120 layers < LARGE_N
    monkeypatch.setattr(SF, "LARGE_N", 100)
    monkeypatch.setattr(SF, "LARGE_GBM", {"n_estimators": 30, "max_depth": 5})
    model, rep = fit_mixed(X, y, BASE, candidates=("gbm", "lmt"), unroll=UNROLL)
    assert "gbm-large" in rep["cv_mape"] and np.isfinite(rep["score"]["gbm-large"])
    _, rep_lmt = fit_mixed(X, y, BASE, candidates=("lmt",), unroll=UNROLL)
    assert "gbm-large" not in rep_lmt["cv_mape"]  # only where GBM is a candidate at all
    assert np.array_equal(roundtrip(model).predict(X), model.predict(X))


def test_mixed_correction_is_clipped_to_the_training_range():
    rng = np.random.default_rng(5)
    X = convs(200, rng, cmax=64, hmax=32)
    y = measured(X, rng)
    z = np.log(y / BASE.predict(X))
    for method in ("poly3", "lmt"):
        m = Mixed(BASE, method, clip_inputs=False).fit(X, y)
        lo, hi = np.percentile(z, [0.5, 99.5])  # the central 99% of the fitted corrections (>= 200 layers)
        assert (m.clip_min_, m.clip_max_) == pytest.approx((lo, hi), rel=1e-12, abs=1e-12)
        far = convs(500, rng, cmax=100_000, hmax=4096)
        raw = m.correction_.predict_log(far)
        if method == "poly3":  # (a linear model tree's leaves stay at their fitted range's edge)
            assert raw.min() < lo or raw.max() > hi  # the unclipped correction leaves the range...
        ratio = m.predict(far) / BASE.predict(far)
        assert np.all(np.isfinite(ratio))  # ...the mixed model does not
        assert ratio.min() >= np.exp(lo) * (1 - 1e-12) and ratio.max() <= np.exp(hi) * (1 + 1e-12)


# ------------------------------------------------------------------------------------------------------
# plain data: JSON round trips and validation
@pytest.fixture(scope="module")
def fitted(conv_data):
    X, y = conv_data
    methods = ["poly", "poly3", "lmt"] + (["gbm", "rf", "hgb"] if importlib.util.find_spec("sklearn") else [])
    models = {f"statistical-{m}": Statistical(m, UNROLL).fit(X, y) for m in methods}
    models.update({f"mixed-{m}": Mixed(BASE, m).fit(X, y) for m in methods})
    models["statistical-nounroll"] = Statistical("lmt").fit(X, y)
    return models


def test_json_round_trip_is_bit_identical(fitted):
    Xq = convs(400, np.random.default_rng(9), cmax=512, hmax=128)
    for name, m in fitted.items():
        text = json.dumps(m.to_dict())
        again = model_from_dict(json.loads(text), name)
        assert type(again) is type(m)
        assert np.array_equal(again.predict(Xq), m.predict(Xq)), name
        # a fixed point after one trip (the base roofline's own dict normalises numbers and defaults once)
        assert json.dumps(roundtrip(again).to_dict()) == json.dumps(again.to_dict()), name


def _mut(d, path, value):
    """``d`` with the entry at ``path`` set to ``value`` (deleted for KeyError); an index into a packed array
    edits its entries and packs them again, as an edited file would hold them."""
    from annette_torch.models.trees import pack_array, read_array
    d = copy.deepcopy(d)
    cur = d
    for k in path[:-2]:
        cur = cur[k]
    if isinstance(path[-1], int) and isinstance(cur[path[-2]], dict):
        key, packed = path[-2], cur[path[-2]]
        a = read_array(cur, key, "t", integer=packed["dtype"] != "<f8")
        a[path[-1]] = value
        cur[key] = pack_array(a, integer=packed["dtype"] != "<f8")
        return d
    cur = cur[path[-2]] if len(path) > 1 else cur
    if value is KeyError:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return d


@pytest.mark.parametrize("name, path, value, field", [
    ("statistical-poly", ["method"], "svm", "m.method"),
    ("statistical-poly", ["target"], "log_ratio", "m.target"),
    ("statistical-poly", ["features"], ["log1p_n"], "m.features"),
    ("statistical-poly", ["unroll", "c"], 0.5, "m.unroll.c"),
    ("statistical-poly", ["unroll", "k"], 4, "m.unroll.k"),
    ("statistical-poly", ["x_min"], [0.0], "m.x_min"),
    ("statistical-poly", ["clip_inputs"], "yes", "m.clip_inputs"),
    ("statistical-poly", ["regressor", "kind"], "svm", "m.regressor.kind"),
    ("statistical-poly", ["regressor", "powers", 0, 0], -1, "m.regressor.powers"),
    ("statistical-poly", ["regressor", "powers", 0], [1], "m.regressor.powers"),
    ("statistical-poly", ["regressor", "coef"], [1.0], "m.regressor.coef"),
    ("statistical-poly", ["regressor", "scale", 0], 0.0, "m.regressor.scale"),
    ("statistical-poly", ["regressor", "intercept"], KeyError, "m.regressor.intercept: missing"),
    ("statistical-lmt", ["regressor", "coef"], [[0.0]], "m.regressor.coef"),
    ("statistical-lmt", ["regressor", "tree", "left", 0], 999, "m.regressor.tree.left"),
    ("statistical-lmt", ["regressor", "tree", "feature", 0], 99, "m.regressor.tree.feature"),
    ("statistical-lmt", ["regressor", "tree", "n_features"], 3, "m.regressor.tree.n_features"),
    ("statistical-lmt", ["regressor", "intercept"], "x", "m.regressor.intercept"),
    ("mixed-lmt", ["base"], {"model": "statistical"}, "m.base"),
    ("mixed-lmt", ["base", "op_s"], -1, "m.base.op_s"),
    ("mixed-lmt", ["clip_min"], 1e9, "m.clip_min"),
    ("mixed-lmt", ["clip_max"], float("nan"), "m.clip_max"),
    ("mixed-lmt", ["correction"], None, "m.correction"),
    ("mixed-lmt", ["correction", "target"], "log_ms", "m.correction.target"),
    ("mixed-lmt", ["correction", "regressor", "tree", "threshold", 0], float("inf"),
     "m.correction.regressor.tree.threshold"),
])
def test_malformed_dicts_name_the_field(fitted, name, path, value, field):
    d = _mut(fitted[name].to_dict(), path, value)
    with pytest.raises(PlatformError, match=re.escape(field)):
        model_from_dict(d, "m")


@needs_sklearn
def test_malformed_tree_regressor_names_the_field(fitted):
    d = _mut(fitted["statistical-gbm"].to_dict(), ["regressor", "right", 0], -5)
    with pytest.raises(PlatformError, match=re.escape("m.regressor.right: node 0 points to -5")):
        model_from_dict(d, "m")


# ------------------------------------------------------------------------------------------------------
# in a platform
def _net():
    b = NetworkBuilder("n")
    x = b.input("x", (1, 24, 40, 40))
    c = b.conv("c1", x, 40, 3, padding=1)
    r = b.same(T.RELU, "r", c)
    c = b.conv("c2", r, 70, 3, stride=2, padding=1)
    b.conv("c3", c, 300, 1)
    return b.build()


def test_platform_with_a_mixed_conv_model_loads_and_predicts(fitted, tmp_path):
    mixed = fitted["mixed-lmt"]
    base = Roofline(op_s=2e11, bandwidth=2e10)
    d = {"schema": SCHEMA, "schema_version": 1, "name": "synthetic",
         "layers": {"Base": base.to_dict(), "Conv": mixed.to_dict()}}
    p = Platform.from_dict(json.loads(json.dumps(d)), "synthetic.json")
    assert isinstance(p.layers["Conv"], Mixed) and "mixed:Conv" in p.model_labels()
    net = _net()
    t, mi = model_times(p.tables, net)[:2]
    conv = np.flatnonzero(net.types == T.CONV)
    assert len(conv) == 3 and np.all(t > 0)
    assert np.array_equal(t[conv], mixed.predict(LayerFeatures.from_network(net, conv)))
    other = np.setdiff1d(np.arange(len(net)), conv)
    np.testing.assert_allclose(t[other], base.predict(LayerFeatures.from_network(net, other)), rtol=1e-12)
    p.save(tmp_path / "synthetic.json")
    assert np.array_equal(model_times(Platform.load(tmp_path / "synthetic.json").tables, net)[0], t)


@needs_sklearn
def test_load_time_of_a_200_tree_gbm():
    rng = np.random.default_rng(2)
    X = convs(1500, rng)
    m = Statistical("gbm", UNROLL, params={"n_estimators": 200, "max_depth": 5}).fit(X, measured(X, rng))
    assert m.regressor_.ens.n_trees == 200
    text = json.dumps(m.to_dict())
    assert len(text) < 3_000_000
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        loaded = model_from_dict(json.loads(text), "m")
        best = min(best, time.perf_counter() - t0)
    assert best < 0.1, f"loading took {best * 1e3:.1f} ms"
    assert np.array_equal(loaded.predict(X), m.predict(X))


def test_linear_model_tree_stays_at_the_edge_of_its_fitted_range():
    """A linear leaf holds where it was fitted: features beyond the training range are clamped to it (a tree's
    behaviour), so an unseen layer cannot ride a slope to the correction's clip; files without the range
    predict as before."""
    from annette_torch.models.statistical import LinearModelTree

    rng = np.random.default_rng(0)
    F = rng.uniform(0, 1, (200, 3))
    z = 2.0 * F[:, 0] - F[:, 1] + 0.01 * rng.standard_normal(200)
    lmt = LinearModelTree.fit(F, z)
    inside = lmt.predict(F[:5])
    far = np.array([[50.0, -40.0, 0.5]])
    edge = np.array([[F[:, 0].max(), F[:, 1].min(), 0.5]])
    assert lmt.predict(far) == pytest.approx(lmt.predict(edge))
    assert lmt.predict(far)[0] < 2.0 * F[:, 0].max() + 1.0  # not 2 * 50 + 40
    d = lmt.to_dict()
    assert np.allclose(LinearModelTree.from_dict(d, "m", 3).predict(far), lmt.predict(far))
    old = {k: v for k, v in d.items() if k not in ("lo", "hi")}
    unclamped = LinearModelTree.from_dict(old, "m", 3)
    assert np.allclose(unclamped.predict(F[:5]), inside)
    assert unclamped.predict(far)[0] > 100


def test_a_tree_ensemble_within_one_standard_error_of_the_best_candidate_is_chosen():
    """A linear-model tree or polynomial wins only by more than its score's standard error over the best tree
    ensemble (the GBM priced OpenVINO's transposes by size where a tied linear-model tree inverted them);
    gbm-large keeps its own margin."""
    from annette_torch.fit.statistical_fit import LARGE_GAIN, _best
    assert _best({"lmt": 10.0, "gbm": 10.9, "gbm-huber": 10.5}, {"lmt": 1.0}) == "gbm-huber"
    assert _best({"lmt": 8.0, "gbm": 10.9, "gbm-huber": 10.5}, {"lmt": 1.0}) == "lmt"
    assert _best({"poly": 10.0, "rf": 10.2}, {"poly": 0.5}) == "rf"
    assert _best({"lmt": 10.0, "gbm": 10.5}) == "lmt"  # (without standard errors: the lowest score)
    assert _best({"lmt": 10.0, "gbm": 10.5, "gbm-large": 10.0 * (1 - LARGE_GAIN) - 0.1}, {"lmt": 1.0}) == "gbm-large"
    assert _best({"lmt": 10.0, "gbm": 10.5, "gbm-large": 9.9}, {"lmt": 1.0}) == "gbm"
