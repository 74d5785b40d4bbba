"""Model generator: recovers known parameters from synthetic data; fitted platforms round-trip; clear errors."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from annette_torch.bench.store import Store
from annette_torch.bench.suites import SUITES
from annette_torch.fit.data import FitDataError, FusionExamples
from annette_torch.fit.mapping_fit import fit_mapping
from annette_torch.fit.roofline_fit import fit_refined, fit_roofline
from annette_torch.ir import LayerType as T, NetworkBuilder
from annette_torch.models import LayerFeatures, RefinedRoofline
from annette_torch.platform import Platform

HERE = Path(__file__).resolve().parent


def _convs(n=400, seed=0):
    rng = np.random.default_rng(seed)
    b = NetworkBuilder("convs")
    for i in range(n):
        c, f, h = (int(rng.integers(1, 97)), int(rng.integers(1, 97)), int(rng.choice([7, 14, 28, 56])))
        x = b.input(f"x{i}", (1, c, h, h))
        b.conv(f"c{i}", x, f, int(rng.choice([1, 3])), padding=1)
    net = b.build()
    rows = np.flatnonzero(net.types == T.CONV)
    return LayerFeatures.from_network(net, rows)


def test_roofline_fit_recovers_peaks():
    X = _convs()
    true = RefinedRoofline(op_s=2e11, bandwidth=3e10, bit_act=32, bit_weights=32)
    y = true.predict(X)
    m = fit_roofline(X, y, q=100)
    assert m.op_s == pytest.approx(2e11, rel=1e-6) and m.bandwidth == pytest.approx(3e10, rel=1e-6)


def test_refined_fit_recovers_unrolling():
    X = _convs(600)
    true = RefinedRoofline(op_s=2e11, bandwidth=1e13, bit_act=32, bit_weights=32,
                           unroll={"c": {"s": 16, "alpha": 0.9}, "f": {"s": 8, "alpha": 0.6}})
    y = true.predict(X)
    m, rep = fit_refined(X, y)
    assert {d: int(p["s"]) for d, p in m.unroll.items()} == {"c": 16, "f": 8}
    assert m.unroll["c"]["alpha"] == pytest.approx(0.9, abs=0.05)
    assert m.unroll["f"]["alpha"] == pytest.approx(0.6, abs=0.05)
    assert m.op_s == pytest.approx(2e11, rel=0.05)
    assert rep["mre"] < 0.01


def test_refined_fit_of_layers_no_memory_bound_keeps_a_finite_bandwidth(monkeypatch):
    """Layers whose time no byte count explains leave the log-bandwidth free, and the solver may leave it past
    what exp() holds (a quick calibration's FullyConnected model once came out with bandwidth inf, a platform file
    that does not load): the model takes the clipped values its residuals were computed with."""
    from types import SimpleNamespace
    from annette_torch.fit import roofline_fit as RF
    X = _convs(40)
    y = X.ops / 1e8 * 1e3  # pure compute at 0.1 TFLOP/s
    monkeypatch.setattr(RF, "least_squares", lambda f, x0, **kw: SimpleNamespace(
        x=np.concatenate([[np.log(1e11), 800.0], x0[2:]]), fun=np.zeros(len(y))))
    m, _ = fit_refined(X, y)
    assert m.op_s == pytest.approx(1e11)
    assert np.isfinite(m.bandwidth)
    d = json.loads(json.dumps(Platform("p", {"Base": m}).to_dict()))
    assert np.isfinite(Platform.from_dict(d, "p.json").layers["Base"].bandwidth)


def _examples():
    """Conv+Relu always fuses; Conv+MaxPool only with a 2x2 window; Conv+Conv never."""
    rng = np.random.default_rng(1)
    ht, st, hc, sc, fz = [], [], [], [], []
    for _ in range(300):
        kind = rng.choice(["relu", "pool", "conv"])
        k = int(rng.choice([2, 3]))
        ht.append(T.CONV)
        st.append({"relu": T.RELU, "pool": T.MAX_POOL, "conv": T.CONV}[kind])
        hc.append({"kh": 3, "kw": 3, "sh": 1, "sw": 1, "c_in": 8, "c_out": 16, "h_out": 8, "w_out": 8, "groups": 1})
        sc.append({"kh": k, "kw": k, "sh": k, "sw": k, "c_in": 16, "c_out": 16, "h_out": 4, "w_out": 4, "groups": 1})
        fz.append(kind == "relu" or (kind == "pool" and k == 2))
    cols = lambda rows: {c: np.array([r[c] for r in rows]) for c in rows[0]}
    return FusionExamples(np.array(ht), np.array(st), cols(hc), cols(sc), np.array(fz), np.array(st))


def test_mapping_fit_recovers_rules():
    model, rep = fit_mapping(_examples())
    assert rep["Conv+Relu"]["rule"] == "always" and "rule" not in rep["Conv+Conv"]
    b = NetworkBuilder("n")
    x = b.input("x", (1, 8, 16, 16))
    c = b.conv("c", x, 16, 3, padding=1)
    r = b.same(T.RELU, "r", c)
    p2 = b.pool("p2", r, "max", 2)
    c2 = b.conv("c2", p2, 16, 3, padding=1)
    b.pool("p3", c2, "max", 3)
    m = model.apply(b.build())
    assert m.network.names == ["x", "c", "c2", "p3"]
    assert m.network.types[1] == T.CONV_POOL


def test_mapping_fit_learns_a_channel_alignment_condition():
    """ONNX Runtime fuses a HardSwish into a depthwise conv exactly when the channels are a multiple of 8 (its
    blocked kernels): a threshold on the channel count cannot say that, the alignment attribute can."""
    rng = np.random.default_rng(2)
    ch = rng.choice([24, 25, 40, 43, 96, 102, 144, 171, 240, 250, 576, 600], 120)
    rows = [{"kh": 3, "kw": 3, "sh": 1, "sw": 1, "c_in": int(c), "c_out": int(c), "h_out": 14, "w_out": 14,
             "groups": int(c)} for c in ch]
    cols = {k: np.array([r[k] for r in rows]) for k in rows[0]}
    fz = ch % 8 == 0
    ex = FusionExamples(np.full(ch.size, T.DEPTHWISE_CONV), np.full(ch.size, T.HARDSWISH), cols, cols, fz,
                        np.full(ch.size, T.HARDSWISH))
    model, rep = fit_mapping(ex)
    (rule,) = model.rules
    assert [c.attr for c in rule.when] in (["c_in_align"], ["c_out_align"], ["c_align"])
    for c, fused in ((256, True), (264, True), (100, False), (7, False)):
        b = NetworkBuilder("n")
        x = b.input("x", (1, c, 14, 14))
        b.same(T.HARDSWISH, "hs", b.conv("dw", x, c, 3, padding=1, groups=c))
        assert (len(model.apply(b.build()).network) == 2) == fused, c


def test_mapping_fit_grows_the_tree_only_as_deep_as_the_measurements_need():
    """Fused when the input channels are a multiple of 8 and the conv is 1x1 or its output small (ONNX Runtime's
    HardSwish behind a conv, roughly): three conditions, two fusing leaves; every leaf must fuse in the model."""
    rng = np.random.default_rng(3)
    n = 240
    c_in = rng.choice([24, 25, 40, 43, 96, 102], n)
    kh = rng.choice([1, 3], n)
    h = rng.choice([7, 14, 28, 56], n)
    cols = {"kh": kh, "kw": kh, "sh": np.ones(n, int), "sw": np.ones(n, int), "c_in": c_in, "c_out": np.full(n, 64),
            "h_out": h, "w_out": h, "groups": np.ones(n, int)}
    sec = {**cols, "kh": np.zeros(n, int), "kw": np.zeros(n, int), "c_in": np.full(n, 64)}
    fz = (c_in % 8 == 0) & ((kh == 1) | (h <= 13))
    ex = FusionExamples(np.full(n, T.CONV), np.full(n, T.HARDSWISH), cols, sec, fz, np.full(n, T.HARDSWISH))
    model, rep = fit_mapping(ex)
    assert len(model.rules) == 2 and max(len(r.when) for r in model.rules) == 3
    for c, k, size in itertools.product((32, 33), (1, 3), (7, 28)):
        b = NetworkBuilder("n")
        b.same(T.HARDSWISH, "hs", b.conv("c", b.input("x", (1, c, size, size)), 64, k, padding=k // 2))
        assert (len(model.apply(b.build()).network) == 2) == (c == 32 and (k == 1 or size == 7)), (c, k, size)


def _own_nodes(net):
    """Records of ``net`` as a runtime that ran every layer as a node of its own (0.01 ms each)."""
    from annette_torch.bench.records import NOT_FUSED, LayerRecord
    return {n: LayerRecord(n, T(int(net.types[i])).label, NOT_FUSED, node=n, time_ms=0.01)
            for i, n in enumerate(net.names)}


def _conv_act_fused(act: str):
    """A measured conv_act configuration with activation ``act`` (its layer is named after it) fused into the
    conv, as both runtimes run it."""
    from annette_torch.bench.records import FUSED, NOT_FUSED, LayerRecord
    from annette_torch.fit.data import Measured
    ca = SUITES["conv_act"]
    cfg = next(c for c in ca.configs(n=40, seed=0) if c["act"] == act)
    recs = {"x": LayerRecord("x", "Input", NOT_FUSED),
            "conv": LayerRecord("conv", "Conv", NOT_FUSED, node="conv", time_ms=0.01, absorbed=(act,)),
            act: LayerRecord(act, T(int(ca.build(cfg).types[2])).label, FUSED, fused_into="conv", node="conv")}
    return Measured("conv_act", cfg["config_id"], ca.build(cfg), recs, [])


def test_fusion_examples_skip_producers_absorbed_by_their_consumer():
    """ONNX Runtime runs x * sigmoid(x) as one QuickGelu node on the Mul (the Sigmoid, a producer, fused into
    its consumer): no "Mul+Mul" example may come out of it, only the conv's own edges count."""
    from annette_torch.bench.records import FUSED, NOT_FUSED, LayerRecord
    from annette_torch.fit.data import Measured, fusion_examples
    suite = SUITES["conv_mul"]
    cfg = next(c for c in suite.configs(n=20, seed=0) if c["kind"] == "swish")
    net = suite.build(cfg)
    recs = _own_nodes(net)
    recs["sigmoid"] = LayerRecord("sigmoid", "Sigmoid", FUSED, fused_into="mul", node="mul/QuickGeluFusion/")
    recs["mul"] = LayerRecord("mul", "Mul", NOT_FUSED, node="mul/QuickGeluFusion/", time_ms=0.02, absorbed=("sigmoid",))
    ex = fusion_examples([Measured("conv_mul", cfg["config_id"], net, recs, []), _conv_act_fused("relu")])
    assert list(zip(ex.head_type, ex.sec_type, ex.fused)) == [(T.CONV, T.RELU, True)]


def test_a_consumer_left_out_of_a_group_is_a_no_for_its_producer_too():
    """OpenVINO runs ShuffleNet's concat with the shuffle's view and transpose as one node and the last view
    (with the next split) as another: the transpose -> view edge is a "no" for Transpose+Reshape as well as for
    Concat+Reshape (the mapping's first round pairs the transpose with the view before the transpose joins the
    Concat), so a mapping fitted on it keeps the shuffle's last view apart; yeses stay the group head's."""
    from annette_torch.bench.records import FUSED, LayerRecord
    from annette_torch.fit.data import Measured, fusion_examples
    from annette_torch.fit.mapping_fit import fit_mapping

    suite = SUITES["shuffle"]
    measured = []
    for cfg in suite.configs(n=12, seed=0):
        net = suite.build(cfg)
        recs = _own_nodes(net)
        for i, n in enumerate(net.names):
            if n.endswith(("_shuffle_view", "_shuffle_transpose")):
                cat = n.split("_shuffle")[0] + "_cat"
                recs[n] = LayerRecord(n, T(int(net.types[i])).label, FUSED, fused_into=cat, node=cat)
        measured.append(Measured("shuffle", cfg["config_id"], net, recs, []))
    ex = fusion_examples(measured)
    pairs = list(zip(ex.head_type, ex.sec_type, ex.fused))
    assert (T.TRANSPOSE, T.RESHAPE, False) in pairs and (T.CONCAT, T.RESHAPE, False) in pairs
    assert (T.CONCAT, T.TRANSPOSE, True) in pairs and (T.RESHAPE, T.TRANSPOSE, True) not in pairs
    model, _ = fit_mapping(ex)
    mapped = model.apply(suite.build(suite.configs(n=12, seed=0)[0])).network
    assert (mapped.types == T.RESHAPE).any() and not (mapped.types == T.TRANSPOSE).any()


@pytest.fixture(scope="module")
def _measured_template(tmp_path_factory):
    """The sweeps of `measured_store`, run once per module (tests get a copy: some add to the store)."""
    from annette_torch.bench.sweep import run_sweep
    db = tmp_path_factory.mktemp("measured") / "m.sqlite"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
        mp.syspath_prepend(str(HERE))
        with Store(db) as st:
            for suite, n in (("conv", 40), ("fc", 35), ("conv_bn_relu", 10)):
                run_sweep(st, "fake", suite, SUITES[suite].configs(n=n, seed=0), "fake_runner:FakeRunner", {},
                          iterations=3, warmup=0, progress=False)
    return db


@pytest.fixture
def measured_store(_measured_template, tmp_path, monkeypatch):
    """A store filled through the real sweep machinery by the synthetic fake runner (a copy of one filled once)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(HERE))
    db = tmp_path / "m.sqlite"
    shutil.copyfile(_measured_template, db)
    return db


@pytest.mark.slow
def test_fitted_platform_round_trips(measured_store, tmp_path):
    from annette_torch import estimate
    from annette_torch.fit.generator import fit_platform
    plat, rep = fit_platform(str(measured_store), "fake", cv=2, candidates=("lmt",))
    assert rep["configurations"] == 85 and "Conv" in plat.layers
    path = tmp_path / "p.json"
    plat.save(path)
    text = path.read_text()
    again = Platform.load(path)
    again.save(tmp_path / "q.json")
    assert (tmp_path / "q.json").read_text() == text  # bit-identical JSON
    net = SUITES["conv_bn_relu"].build(SUITES["conv_bn_relu"].configs(n=1, seed=5)[0])
    assert estimate(net, plat).device_ms == estimate(net, again).device_ms


@pytest.mark.slow
def test_stride_probes_inform_the_mapping_model_only(measured_store):
    """The ``stride_prop`` probe decides the mapping model's stride propagation (the fake toolchain runs
    both paths alike: none) and stays out of the layer models' data."""
    from annette_torch.bench.sweep import run_sweep
    from annette_torch.fit.generator import fit_platform
    with Store(measured_store) as st:
        run_sweep(st, "fake", "stride_prop", SUITES["stride_prop"].configs(n=40, seed=0), "fake_runner:FakeRunner",
                  {}, iterations=3, warmup=0, progress=False)
    plat, rep = fit_platform(str(measured_store), "fake", cv=2, candidates=("lmt",))
    assert rep["configurations"] == 85  # the probes are not layer samples
    assert rep["strides"]["verdict"] == "no propagation" and rep["strides"]["none"]["median_ratio"] == \
        pytest.approx(1.0, abs=0.15)
    assert plat.mapping.strides is None and "strides" not in plat.mapping.to_dict()


@pytest.mark.slow
def test_layer_models_fitted_in_worker_processes_are_the_serial_ones_and_a_memo_keeps_unchanged_types(
        measured_store, monkeypatch):
    """The per-type fits run in worker processes give the serial fit's file bit for bit; a fit of the same store
    with the memo of an earlier one (``annette calibrate`` after its recheck) fits no type again, and a type
    whose samples changed gets another key."""
    import dataclasses
    from annette_torch.fit import generator as G

    def fit(**kw):
        plat, _ = G.fit_platform(str(measured_store), "fake", cv=2, candidates=("lmt", "gbm"), **kw)
        return json.dumps(plat.to_dict(), sort_keys=True)

    memo: dict = {}
    monkeypatch.setenv("ANNETTE_FIT_JOBS", "1")
    serial = fit(memo=memo)
    assert len(memo) >= 2
    monkeypatch.setenv("ANNETTE_FIT_JOBS", "2")
    monkeypatch.setattr(G, "PARALLEL_ROWS", 0)
    assert fit() == serial

    def refit(self):
        raise AssertionError(f"{self.type.label} fitted again")
    monkeypatch.setattr(G.TypeFit, "run", refit)
    assert fit(memo=memo) == serial
    task = G.TypeFit(T.CONV, LayerFeatures.from_network(SUITES["conv"].build(SUITES["conv"].configs(n=1)[0])),
                     np.array([1.0, 2.0]), "mixed", 32, 2, 0, ("lmt",))
    assert task.key() == dataclasses.replace(task).key()
    assert task.key() != dataclasses.replace(task, y=np.array([1.0, 2.5])).key()
    assert task.key() != dataclasses.replace(task, candidates=("gbm",)).key()


def test_fitting_empty_or_tiny_store_says_what_is_missing(tmp_path):
    from annette_torch.fit.generator import fit_platform
    with Store(tmp_path / "e.sqlite"):
        pass
    with pytest.raises(FitDataError, match="no usable measurements of platform 'ort-cpu'.*annette bench"):
        fit_platform(str(tmp_path / "e.sqlite"), "ort-cpu")


@pytest.mark.slow
def test_tiny_store_reports_missing_fusion_data(measured_store):
    from annette_torch.fit.generator import fit_platform
    with pytest.raises(FitDataError, match="multi-layer suites"):
        fit_platform(str(measured_store), "fake", suites=["conv"])


def test_newer_or_truncated_platform_files_fail_clearly(tmp_path):
    from annette_torch.errors import PlatformError
    from annette_torch.platform import SCHEMA_VERSION, load_platform
    d = load_platform("zcu102-dnndk").to_dict()
    d["schema_version"] = SCHEMA_VERSION + 1
    (tmp_path / "new.json").write_text(json.dumps(d))
    with pytest.raises(PlatformError, match="newer than this annette-torch"):
        Platform.load(tmp_path / "new.json")
    (tmp_path / "cut.json").write_text(json.dumps(load_platform("zcu102-dnndk").to_dict())[:300])
    with pytest.raises(PlatformError, match="not valid JSON"):
        Platform.load(tmp_path / "cut.json")


@pytest.mark.slow
def test_in_context_suite_feeds_the_cache_model_not_the_layer_models(measured_store):
    """cold_weights configurations are left out of the layer models and fitted into a cache model."""
    from annette_torch.bench.sweep import run_sweep
    from annette_torch.fit.generator import fit_variants
    with Store(measured_store) as st:
        run_sweep(st, "fake", "cold_weights", SUITES["cold_weights"].configs(n=24, seed=0),
                  "fake_runner:FakeRunner", {}, iterations=3, warmup=0, progress=False)
    plats, rep = fit_variants(str(measured_store), "fake", variants=("roofline", "mixed+mapping"), cv=2,
                              candidates=("lmt",))
    assert rep["configurations"] == 85  # the 24 cold_weights configurations are not layer-model samples
    for v in ("roofline", "mixed+mapping"):
        crep = rep["cache"][v]
        assert crep["configurations"] >= 20 and "mape_with_cache" in crep
        assert plats[v].cache is not None and "cache" in plats[v].to_dict()


@pytest.mark.slow
def test_lead_measurements_replace_those_without(measured_store):
    """maxpool measured behind a 1x1 depthwise conv (the in-network layout) replaces maxpool fed by the input."""
    from annette_torch.bench.suites import config_id
    from annette_torch.bench.sweep import run_sweep
    from annette_torch.fit.generator import fit_variants
    plain = SUITES["maxpool"].configs(n=12, seed=0)
    led = SUITES["maxpool"].configs(n=10, seed=0, options={"lead": "dw1"})
    assert [c["config_id"] for c in led] == [config_id({**c, "lead": "dw1"}) for c in plain[:10]]
    assert not {c["config_id"] for c in plain} & {c["config_id"] for c in led}
    assert SUITES["maxpool"].build(led[0]).names == ["x", "lead", "pool"]
    with Store(measured_store) as st:
        for cfgs in (plain, led):
            run_sweep(st, "fake", "maxpool", cfgs, "fake_runner:FakeRunner", {}, iterations=3, warmup=0,
                      progress=False)
    _, rep = fit_variants(str(measured_store), "fake", variants=("roofline",))
    assert rep["configurations"] == 85 + 10


@pytest.mark.slow
def test_grouped_convolutions_get_the_per_group_features(measured_store):
    """Only the GroupConv model sees the channels of one group (`statistical.GROUP_FEATURES`)."""
    from annette_torch.bench.sweep import run_sweep
    from annette_torch.fit.generator import fit_platform
    from annette_torch.models.statistical import GROUP_FEATURES
    with Store(measured_store) as st:
        run_sweep(st, "fake", "gconv", SUITES["gconv"].configs(n=35, seed=0), "fake_runner:FakeRunner", {},
                  iterations=3, warmup=0, progress=False)
    plat, _ = fit_platform(str(measured_store), "fake", cv=2, candidates=("lmt",))
    features = {k: plat.layers[k].to_dict()["correction"]["features"] for k in ("GroupConv", "Conv")}
    assert set(GROUP_FEATURES) <= set(features["GroupConv"]) and not set(GROUP_FEATURES) & set(features["Conv"])


@pytest.mark.slow
def test_convolutions_get_the_kernel_tap_features(measured_store):
    """The convolution models see the share of their kernel taps that read the input (`features.TAP_FEATURES`),
    other types do not."""
    from annette_torch.bench.sweep import run_sweep
    from annette_torch.fit.generator import fit_platform
    from annette_torch.models.features import TAP_FEATURES
    with Store(measured_store) as st:
        run_sweep(st, "fake", "dilconv", SUITES["dilconv"].configs(n=12, seed=0), "fake_runner:FakeRunner", {},
                  iterations=3, warmup=0, progress=False)
    plat, _ = fit_platform(str(measured_store), "fake", cv=2, candidates=("lmt",))
    features = {k: m.to_dict()["correction"]["features"] for k, m in plat.layers.items()
                if m.to_dict().get("model") == "mixed"}
    assert set(TAP_FEATURES) <= set(features["Conv"])
    assert not any(set(TAP_FEATURES) & set(f) for k, f in features.items() if k not in ("Conv", "DepthwiseConv",
                                                                                         "GroupConv", "ConvPool"))


def test_leads_of_conv_suites_and_concat():
    for name, layer in (("conv", "conv"), ("gconv", "gconv"), ("gconv_same", "gconv")):
        led = SUITES[name].configs(n=2, seed=0, options={"lead": "dw1"})[0]
        assert SUITES[name].build(led).names == ["x", "lead", layer]
    c = SUITES["concat"].configs(n=5, seed=0, options={"lead": "dw1"})
    c3 = next(x for x in c if x["inputs"] >= 2)
    net = SUITES["concat"].build(c3)
    leads = [n for n in net.names if n.startswith("lead")]
    assert len(leads) == c3["inputs"] and "lead" in leads
    assert all(net.types[net.names.index(n)] == T.DEPTHWISE_CONV for n in leads)


def test_unknown_lead_is_refused():
    from annette_torch.bench.suites import SuiteError
    c = SUITES["dwconv"].configs(n=1, seed=0)[0]
    with pytest.raises(SuiteError, match="lead must be one of"):
        SUITES["dwconv"].build(dict(c, lead="conv"))
    with pytest.raises(SuiteError, match="has no options"):
        SUITES["conv_bn_relu"].configs(n=1, options={"lead": "dw1"})
    assert SUITES["dwconv"].configs(n=4, options={"lead": "none"}) == SUITES["dwconv"].configs(n=4)


def _swish_measured(one_node: bool):
    """A measured conv_mul swish configuration: OpenVINO runs conv, sigmoid and mul as one node (the
    conv's); a toolchain that does not would leave all three separate."""
    from annette_torch.bench.records import FUSED, LayerRecord
    from annette_torch.fit.data import Measured
    suite = SUITES["conv_mul"]
    cfg = next(c for c in suite.configs(n=20, seed=0) if c["kind"] == "swish")
    net = suite.build(cfg)
    recs = _own_nodes(net)
    if one_node:
        for n in ("sigmoid", "mul"):
            recs[n] = LayerRecord(n, recs[n].layer_type, FUSED, fused_into="conv", node="conv")
    return Measured("conv_mul", cfg["config_id"], net, recs, [])


def test_swish_fold_is_learned_from_the_records_and_gives_silu_examples():
    from annette_torch.fit.data import fusion_examples, learned_folds
    fused = [_swish_measured(True) for _ in range(3)]
    folds, rep = learned_folds(fused)
    assert folds == ("swish",) and rep["swish"] == {"diamonds": 3, "one_node_rate": 1.0}
    assert learned_folds([_swish_measured(False)] * 3)[0] == ()
    assert learned_folds([])[0] == ()
    ex = fusion_examples(fused, folds)
    assert set(zip(ex.head_type.tolist(), ex.sec_type.tolist(), ex.fused.tolist())) == {(T.CONV, T.SILU, True)}
    model, _ = fit_mapping(ex, folds=folds)
    assert model.folds == ("swish",) and [r.name for r in model.rules] == ["Conv+SiLU"]
    # and the model then runs such a network as one conv
    assert model.apply(fused[0].network).network.names == ["x", "conv"]


def _hardswish_measured(how: str):
    """A measured conv_mul hardswish configuration (conv -> add3 -> relu6 -> mul(conv, .) -> div6): ``own``
    one node of its own, headed by the Add (OpenVINO's Subgraph); ``separate`` four nodes (ONNX Runtime);
    ``in_conv`` all inside the conv's node."""
    from annette_torch.bench.records import FUSED, LayerRecord
    from annette_torch.fit.data import Measured
    suite = SUITES["conv_mul"]
    cfg = next(c for c in suite.configs(n=30, seed=0) if c["kind"] == "hardswish")
    net = suite.build(cfg)
    recs = _own_nodes(net)
    head = {"own": "add3", "in_conv": "conv"}.get(how)
    if head:
        for n in ("add3", "relu6", "mul", "div6"):
            if n != head:
                recs[n] = LayerRecord(n, recs[n].layer_type, FUSED, fused_into=head, node=head)
    return Measured("conv_mul", cfg["config_id"], net, recs, [])


def test_hardswish_fold_is_learned_only_when_the_pattern_runs_as_a_node_of_its_own():
    from annette_torch.fit.data import fusion_examples, layer_samples, learned_folds
    own = [_hardswish_measured("own") for _ in range(3)]
    folds, rep = learned_folds(own)
    assert folds == ("hardswish",)
    assert rep["hardswish"] == {"groups": 3, "one_node_rate": 1.0, "own_node_rate": 1.0}
    assert rep["swish"] == "no measured x * sigmoid(x)"
    sep, rep = learned_folds([_hardswish_measured("separate")] * 3)
    assert sep == () and rep["hardswish"]["one_node_rate"] == 0.0
    joined, rep = learned_folds([_hardswish_measured("in_conv")] * 3)
    assert joined == () and rep["hardswish"] == {"groups": 3, "one_node_rate": 1.0, "own_node_rate": 0.0}
    # with the fold the group is one HardSwish: no example with its producer (the conv; a real HardSwish
    # fuses into it), and its layer sample carries the node's time
    ex = fusion_examples(own + [_conv_act_fused("hardswish")] * 3, folds)
    assert list(zip(ex.head_type.tolist(), ex.sec_type.tolist(), ex.fused.tolist())) \
        == [(T.CONV, T.HARDSWISH, True)] * 3
    model, _ = fit_mapping(ex, folds=folds)
    assert model.folds == ("hardswish",) and [r.name for r in model.rules] == ["Conv+HardSwish"]
    ls = layer_samples(own[:1], model)
    hs = np.flatnonzero(ls.network.types == T.HARDSWISH)
    assert hs.size == 1 and ls.time_ms[hs[0]] == pytest.approx(0.01)
    assert model.apply(own[0].network).network.names == ["x", "conv", "div6"]


def test_a_batched_matmul_of_two_activations_joins_the_attention_node_it_ran_in():
    """OpenVINO runs attention's scores, softmax and context product as one node: the context MatMul (two
    inputs) is recorded fused into the scores MatMul. The mapping model learns that join, so the context
    product leaves no zero-time layer behind and its time is the group's (it was priced a second time)."""
    from annette_torch.bench.records import FUSED, NOT_FUSED, LayerRecord
    from annette_torch.fit.data import Measured, fusion_examples, layer_samples
    suite = SUITES["attention"]
    measured = []
    for cfg in suite.configs(n=12, seed=0):
        net = suite.build(cfg)
        recs = _own_nodes(net)
        recs["x"] = LayerRecord("x", "Input", NOT_FUSED)
        for n in ("softmax", "context"):
            recs[n] = LayerRecord(n, recs[n].layer_type, FUSED, fused_into="scores", node="scores")
        recs["scores"] = LayerRecord("scores", "MatMul", NOT_FUSED, node="scores", time_ms=0.05,
                                     absorbed=("softmax", "context"))
        measured.append(Measured("attention", cfg["config_id"], net, recs, []))
    ex = fusion_examples(measured)
    model, rep = fit_mapping(ex)
    assert rep["MatMul+MatMul"]["fused_rate"] == 1.0
    rule = next(r for r in model.rules if r.name == "MatMul+MatMul")
    assert rule.multi_input
    ls = layer_samples(measured, model)
    mm = ls.network.types == T.MATMUL
    assert mm.sum() == len(measured) and (ls.time_ms[mm] == pytest.approx(0.05))


def test_a_type_that_took_no_time_in_its_measured_layers_gets_an_in_place_model():
    """OpenVINO runs the head split's reshape in place (0 ms in every profile). Fitted on positive times only,
    the Reshape model came from channel shuffles and priced every token view as a copy; the full model now
    gives a type measured at zero time in at least IN_PLACE_RATE of its layers no time at all."""
    from annette_torch.bench.records import NOT_FUSED, LayerRecord
    from annette_torch.fit.data import Measured, layer_samples
    from annette_torch.fit.generator import MIN_SAMPLES, _per_type
    from annette_torch.mapping import MappingModel
    suite = SUITES["heads"]
    measured = []
    for cfg in suite.configs(n=MIN_SAMPLES + 10, seed=0):
        net = suite.build(cfg)
        recs = {n: LayerRecord(n, T(int(net.types[i])).label, NOT_FUSED, node=n,
                               time_ms=0.0 if net.types[i] == T.RESHAPE else 1e-6 * float(net.out_elems[i]))
                for i, n in enumerate(net.names)}
        measured.append(Measured("heads", cfg["config_id"], net, recs, []))
    ls = layer_samples(measured, MappingModel(kernel_types=True))
    assert (ls.network.types == T.RESHAPE).sum() >= MIN_SAMPLES
    models, rep = _per_type(ls, "mixed", 32, 3, 0, lambda _m: None, ("lmt",), in_place=True)
    assert rep["Reshape"]["model"] == "in place" and rep["Reshape"]["zero_share"] == 1.0
    feats = LayerFeatures.from_network(ls.network)
    rows = ls.network.types == T.RESHAPE
    assert models["Reshape"].predict(feats)[rows].max() < 1e-12
    assert rep["Transpose"]["model"] != "in place"
    # without in_place (the variants without a mapping model) a zero-time type keeps the old treatment
    models, rep = _per_type(ls, "mixed", 32, 3, 0, lambda _m: None, ("lmt",))
    assert "Reshape" not in models


def test_a_configuration_measured_in_a_slow_spell_is_measured_again_and_replaced(measured_store, monkeypatch):
    """A shared machine's slow spell slows every inference of the configuration measured then: recheck measures
    the configurations far slower than the fit predicts once more and keeps the faster measurement. The fake
    runner measures alike every time: the slowed one comes out faster, the conv_bn_relu groups it times as three
    nodes (0.3 ms where the fused model says 0.1) are checked and kept."""
    import dataclasses
    from annette_torch.bench.store import ConfigResult
    from annette_torch.fit import recheck as R
    from annette_torch.fit.generator import fit_platform
    monkeypatch.setattr(R, "MIN_MS", 0.0)  # the fake runner's layers take 0.1 ms
    plat, _ = fit_platform(str(measured_store), "fake")  # (fitted without the slow spell: no memorised outlier)
    with Store(measured_store) as st:
        run_id = st.runs()[-1]["id"]
        recs: dict = {}
        for suite, cid, params, rec in st.layer_records("fake", "conv"):
            recs.setdefault(cid, (params, []))[1].append(rec)
        cid, (params, layers) = sorted(recs.items())[0]
        e2e = st.e2e_medians("fake", "conv")[("conv", cid)]
        slow = [dataclasses.replace(r, time_ms=3 * r.time_ms) for r in layers]
        st.add(run_id, "fake", ConfigResult("conv", cid, params, "ok", slow, e2e_median_ms=3 * e2e), replace=True)
    rc = R.recheck(str(measured_store), "fake", plat, "fake_runner:FakeRunner", {})
    assert rc["checked"] >= 1, rc
    assert rc["replaced"] == [f"conv/{cid}"], rc
    with Store(measured_store) as st:
        assert st.e2e_medians("fake", "conv")[("conv", cid)] == pytest.approx(e2e)


def test_a_channel_shuffle_fused_into_its_concat_is_priced_as_the_transpose_that_copies():
    """OpenVINO runs a channel shuffle (view, transpose, view back) inside the concat before it. The group's
    fused type was "several" and taught no fused-layer cost; the views move nothing beside the copy, so the
    group now counts as a fused Transpose of the transpose's elements."""
    from annette_torch.fit.data import _fused_summary
    from annette_torch.mapping import FusionRule, MappingModel
    b = NetworkBuilder("shuffle")
    x = b.input("x", (1, 8, 16, 16))
    y = b.concat("cat", [b.conv("a", x, 8, 1), b.conv("b", x, 8, 1)])
    v = b.add(T.RESHAPE, "view", [y], (1, 2, 8, 16, 16))
    t = b.add(T.TRANSPOSE, "transpose", [v], (1, 8, 2, 16, 16))
    b.add(T.RESHAPE, "view_back", [t], (1, 16, 16, 16))
    net = b.build()
    rules = [FusionRule(f"Concat+{s}", ("Concat",), (s,)) for s in ("Reshape", "Transpose")]
    mp = MappingModel(rules).apply(net)
    owner = np.searchsorted(mp.kept, mp.fused_into)
    ftype, felems = _fused_summary(mp.source, owner, mp)
    cat = int(np.flatnonzero(mp.network.types == T.CONCAT)[0])
    assert ftype[cat] == T.TRANSPOSE and felems[cat] == 16 * 16 * 16


def _shuffle_measured(one_node: bool):
    """A measured shuffle-suite configuration: OpenVINO runs each channel shuffle as one node on its last view
    (``ShuffleChannels``), the view and transpose fused into the Concat; ONNX Runtime runs all three apart."""
    from annette_torch.bench.records import FUSED, LayerRecord
    from annette_torch.fit.data import Measured
    suite = SUITES["shuffle"]
    cfg = next(c for c in suite.configs(n=20, seed=0) if c["depth"] == 2)
    net = suite.build(cfg)
    recs = _own_nodes(net)
    if one_node:
        for u in range(2):
            for n in (f"u{u}_shuffle_view", f"u{u}_shuffle_transpose"):
                recs[n] = LayerRecord(n, recs[n].layer_type, FUSED, fused_into=f"u{u}_cat", node=f"u{u}_cat")
    return Measured("shuffle", cfg["config_id"], net, recs, [])


def test_shuffle_fold_is_learned_where_the_shuffle_runs_as_one_node_and_samples_its_time():
    from annette_torch.fit.data import layer_samples, learned_folds
    from annette_torch.mapping import MappingModel
    one = [_shuffle_measured(True) for _ in range(2)]
    folds, rep = learned_folds(one)
    assert folds == ("shuffle",) and rep["shuffle"] == {"shuffles": 4, "one_node_rate": 1.0}
    apart, rep = learned_folds([_shuffle_measured(False)] * 2)
    assert apart == () and rep["shuffle"]["one_node_rate"] == 0.0
    assert learned_folds([_swish_measured(True)])[1]["shuffle"] == "no measured channel shuffle"
    # the folded layer's sample is the last view's node time (the Concat keeps its own)
    ls = layer_samples(one[:1], MappingModel([], folds=folds))
    cs = np.flatnonzero(ls.network.types == T.CHANNEL_SHUFFLE)
    assert [ls.network.names[i] for i in cs] == ["u0_shuffle_view_back", "u1_shuffle_view_back"]
    assert ls.time_ms[cs] == pytest.approx([0.01, 0.01])


@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5"])
def test_a_bad_fit_jobs_setting_is_one_error_line(value, monkeypatch):
    """ANNETTE_FIT_JOBS that is no process count is refused with the variable named (not silently ignored)."""
    from annette_torch.errors import AnnetteError
    from annette_torch.fit.generator import fit_workers
    monkeypatch.setenv("ANNETTE_FIT_JOBS", value)
    with pytest.raises(AnnetteError, match=f"ANNETTE_FIT_JOBS must be .* got '{re.escape(value)}'"):
        fit_workers()
    monkeypatch.setenv("ANNETTE_FIT_JOBS", "3")
    assert fit_workers() == 3


def test_the_mapping_fit_learns_that_an_add_after_the_convs_activation_stays_apart():
    """ONNX Runtime and OpenVINO fuse a residual Add into the conv before it (after its BatchNorm), never into
    one that applied its ReLU (``residual`` with ``post="relu"``, NAS-Bench-101 cells): one Conv+Add rule on
    the fused group's ``activated``, where a rule on the pair alone fused both."""
    from annette_torch.bench.records import FUSED, LayerRecord
    from annette_torch.fit.data import Measured, fusion_examples
    suite = SUITES["residual"]
    measured = []
    for post in ("none", "relu"):
        for cfg in suite.configs(n=10, seed=0, options={"post": post}):
            net = suite.build(cfg)
            recs = _own_nodes(net)
            fused = {"bn1": "conv1", "relu1": "conv1", "bn2": "conv2", "post": "conv2", "proj_bn": "proj",
                     "proj_post": "proj"}
            if post == "none":
                fused.update(add="conv2", relu2="conv2")
            for n, into in fused.items():
                if n in recs:
                    recs[n] = LayerRecord(n, recs[n].layer_type, FUSED, fused_into=into, node=into)
            measured.append(Measured("residual", cfg["config_id"], net, recs, []))
    ex = fusion_examples(measured)
    model, rep = fit_mapping(ex)
    assert 0.2 < rep["Conv+Add"]["fused_rate"] < 0.8
    assert rep["Conv+Add"]["rule"] == [[{"layer": "primary", "attr": "activated", "op": "<=", "value": 0}]]
    for post, runs_apart in (("none", False), ("relu", True)):
        for cfg in suite.configs(n=4, seed=1, options={"post": post}):
            assert ("add" in model.apply(suite.build(cfg)).network.names) == runs_apart
