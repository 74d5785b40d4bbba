"""Per-kind scales in ``annette adapt``: the platform file's ``overhead.kind_scales``, and their fit from the
latencies of a fake device whose runtime weighs layer kinds unlike the base platform and follows a cell
semantics of its own."""

from __future__ import annotations

import numpy as np
import pytest

import annette_torch as at
from annette_torch.errors import PlatformError
from annette_torch.fit.adapt import adapt
from annette_torch.fit.calibrate import without_overhead
from annette_torch.fit.kind_fit import fit_kinds, kind_data, kind_of
from annette_torch.ir import LayerType
from annette_torch.platform import Platform
from annette_torch.search.spaces import nb201


def _with(base: str, scale: float, kinds: dict[str, float]) -> Platform:
    d = at.load_platform(base).to_dict()
    d["overhead"] = {**d["overhead"], "scale": d["overhead"]["scale"] * scale, "kind_scales": kinds}
    return Platform.from_dict(d, "fake-device")


def _cells(seed: int, n: int, semantics: str = "pruned"):
    """``n`` random NAS-Bench-201 cells, their per-kind data on ort-cpu's raw layer times, and the file's overhead
    terms (scale, per-layer, per-network, depthwise scale)."""
    base = at.load_platform("ort-cpu")
    scale, per_layer, per_net, dw = base.overhead
    rng = np.random.default_rng(seed)
    archs = [nb201.index_to_arch(int(i)) for i in rng.choice(nb201.NUM_ARCHS, n, replace=False)]
    raw = without_overhead(base)
    data = kind_data([at.estimate(x, raw) for x in nb201.build_networks(archs, semantics=semantics)], scale, dw)
    return archs, data, (scale, per_layer, per_net, dw)


def test_kind_scales_multiply_the_layers_of_their_kind_and_a_kernel_wins_over_its_type():
    net = nb201.build_network("|nor_conv_3x3~0|+|nor_conv_1x1~0|avg_pool_3x3~1|+|skip_connect~0|none~1|none~2|")
    plain = at.estimate(net, _with("ort-cpu", 1.0, {}))
    scaled = at.estimate(net, _with("ort-cpu", 1.0, {"Conv": 3.0, "Conv 3x3": 2.0, "AvgPool": 0.5}))
    ex = plain.mapped.network
    t0, t1 = plain.mapped_time_ms, scaled.mapped_time_ms
    conv, pool = ex.types == int(LayerType.CONV), ex.types == int(LayerType.AVG_POOL)
    k3 = ex.cols["kh"] == 3
    # per_layer_ms is added after the scale: compare the scaled parts
    per_layer = at.load_platform("ort-cpu").overhead[1]
    for mask, f in ((conv & k3, 2.0), (conv & ~k3, 3.0), (pool, 0.5)):
        assert mask.any()
        assert np.allclose(np.maximum((t0[mask] - per_layer) * f + per_layer, 0), t1[mask])
    other = ~(conv | pool)
    assert np.allclose(t0[other], t1[other])


def test_a_classifiers_fully_connected_layer_takes_the_vector_kind_and_a_transformers_rows_the_types():
    """``FullyConnected vector`` scales the layers of fewer than 8 rows (a classifier's matrix-vector product)
    and wins over the type's scale there; a token projection (16 rows) keeps the type's."""
    from annette_torch.bench.suites import SUITES
    from annette_torch.ir import NetworkBuilder
    b = NetworkBuilder("classifier")
    b.linear("head", b.global_pool("pool", b.input("x", (1, 512, 4, 4))), 1000)
    per_layer = at.load_platform("ort-cpu").overhead[1]
    plain, scaled = _with("ort-cpu", 1.0, {}), _with("ort-cpu", 1.0, {"FullyConnected": 3.0,
                                                                       "FullyConnected vector": 2.0})
    for net, f in ((SUITES["linear"].build({"l": 16, "e": 256, "f": 1024}), 3.0), (b.build(), 2.0)):
        t0, t1 = (at.estimate(net, p) for p in (plain, scaled))
        fc = t0.mapped.network.types == int(LayerType.FULLY_CONNECTED)
        assert fc.sum() == 1 and t0.mapped_time_ms[fc][0] > 0.01
        assert np.allclose(t1.mapped_time_ms[fc], (t0.mapped_time_ms[fc] - per_layer) * f + per_layer)
        assert np.allclose(t1.mapped_time_ms[~fc], t0.mapped_time_ms[~fc])


def test_a_classifier_layer_that_runs_its_activation_inside_takes_the_vector_act_kind():
    """``FullyConnected vector act`` scales a vector layer that absorbed its ReLU (the file's FullyConnected+Relu
    rule) and wins over ``FullyConnected vector`` there; a vector layer without one (or whose activation the
    mapping leaves apart: a Tanh) keeps the vector kind's; the format takes the kind for fully connected layers only."""
    from annette_torch.ir import NetworkBuilder
    b = NetworkBuilder("head")
    x = b.linear("fc1", b.input("x", (1, 4096)), 2048)
    x = b.linear("fc2", b.same(LayerType.RELU, "relu", x), 1024)
    b.linear("fc3", b.same(LayerType.TANH, "tanh", x), 1000)
    net = b.build()
    per_layer = at.load_platform("ort-cpu").overhead[1]
    plain = _with("ort-cpu", 1.0, {"FullyConnected vector": 2.0})
    acted = _with("ort-cpu", 1.0, {"FullyConnected vector": 2.0, "FullyConnected vector act": 3.0})
    e0, e1 = at.estimate(net, plain), at.estimate(net, acted)
    assert list(e0.mapped.activated()) == [name in ("fc1",) for name in e0.mapped.network.names]
    ms0, ms1 = ({r["name"]: r["time_ms"] for r in e.table()} for e in (e0, e1))
    assert ms0["relu"] == 0.0 and ms0["fc1"] > 0.01  # (fused: its kernel applies it)
    assert ms1["fc1"] == pytest.approx((ms0["fc1"] - per_layer) * 1.5 + per_layer)
    assert ms1["fc2"] == pytest.approx(ms0["fc2"]) and ms1["fc3"] == pytest.approx(ms0["fc3"])
    d = plain.to_dict()
    d["overhead"]["kind_scales"] = {"Conv vector act": 2.0}
    with pytest.raises(PlatformError, match="only a fully connected layer has a vector kind"):
        Platform.from_dict(d, "bad")


def test_the_sweep_plans_activated_classifier_layers_on_streamed_micro_kernels_with_a_cache_model():
    """The activated vector layers get a kind of their own in the sweep plan: on the ``fc_act`` suite, or with a
    cache model (``cold``) on the ``cold_weights`` micro-kernels with and without the activation; the plain vector
    kind keeps the plain ones."""
    from annette_torch.fit.kind_sweep import COLD_SUITE, VECTOR_ACT_KIND, VECTOR_ACT_SUITE, VECTOR_KIND, sweep_plan
    from annette_torch.ir import NetworkBuilder
    b = NetworkBuilder("alexnet-head")
    x = b.linear("fc1", b.global_pool("pool", b.input("x", (1, 1024, 4, 4))), 4096)
    x = b.linear("fc2", b.same(LayerType.RELU, "relu", x), 4096)
    b.linear("fc3", b.same(LayerType.RELU, "relu2", x), 1000)
    raw = without_overhead(at.load_platform("openvino-cpu"))
    est = [at.estimate(b.build(), raw)]
    for cold, suite in ((False, VECTOR_ACT_SUITE), (True, COLD_SUITE)):
        plan = sweep_plan(est, cold=cold)
        assert list(plan[VECTOR_ACT_KIND]) == [suite]
        assert len(plan[VECTOR_ACT_KIND][suite].times) == 2  # (fc1, fc2: each absorbed its ReLU)
    assert VECTOR_KIND not in plan and "FullyConnected" in plan  # (fc3 alone: the type's kind, its vector suite)
    assert len(plan["FullyConnected"]["fc"].times) == 1


def test_the_cold_weights_micro_kernels_take_an_activation_after_the_classifier_layer():
    from annette_torch.bench.suites import SUITES
    from annette_torch.fit.kind_sweep import cold_configs
    plain, acted = cold_configs(2), cold_configs(2, act="relu")
    assert [c["act"] for c in acted] == ["relu", "relu"] and all("act" not in c for c in plain)
    assert {c["config_id"] for c in plain}.isdisjoint(c["config_id"] for c in acted)
    assert SUITES["cold_weights"].build(acted[0]).type_labels()[-2:] == ["FullyConnected", "Relu"]
    assert SUITES["cold_weights"].build(plain[0]).type_labels()[-1] == "FullyConnected"


def test_an_elementwise_layer_with_a_constant_operand_takes_the_const_kind():
    """``Add const`` scales the one-input Adds (a constant operand: hard-swish's ``x + 3``) and wins over the
    type's scale there; a residual Add of two tensors keeps the type's."""
    from annette_torch.ir import NetworkBuilder
    b = NetworkBuilder("adds")
    x = b.input("x", (1, 64, 56, 56))
    c = b.same(LayerType.ADD, "plus3", x)
    b.same(LayerType.ADD, "residual", [c, x])
    net = b.build()
    per_layer = at.load_platform("ort-cpu").overhead[1]
    t0, t1 = (at.estimate(net, p).table() for p in (_with("ort-cpu", 1.0, {}),
                                                     _with("ort-cpu", 1.0, {"Add": 3.0, "Add const": 0.5})))
    ms0, ms1 = ({r["name"]: r["time_ms"] for r in t} for t in (t0, t1))
    assert ms0["plus3"] > 0.01 and ms0["residual"] > 0.01
    assert ms1["plus3"] == pytest.approx((ms0["plus3"] - per_layer) * 0.5 + per_layer)
    assert ms1["residual"] == pytest.approx((ms0["residual"] - per_layer) * 3.0 + per_layer)


def test_the_reorders_of_the_mapping_costs_take_the_reorder_scale_not_their_layers_kind():
    """With ``reorder_scale`` a layer's reorders (layout, graph ends: what `fused_work` adds) run that times the
    overhead's scale instead of its kind's factor; the rest of its time keeps the kind's; without it, nothing
    changes."""
    from annette_torch.ir import NetworkBuilder
    b = NetworkBuilder("dw-silu-se")
    x = b.conv("dw", b.input("x", (1, 96, 56, 56)), 96, 3, padding=1, groups=96)
    s = b.same(LayerType.SILU, "silu", x)
    se = b.global_pool("pool", s)
    b.same(LayerType.MUL, "scale", [s, b.same(LayerType.SIGMOID, "gate", se)])
    net = b.build()
    kinds = {"SiLU": 3.0, "Mul": 2.0, "DepthwiseConv": 2.5}
    plain = _with("ort-cpu", 1.0, kinds)
    d = plain.to_dict()
    d["overhead"] = {**d["overhead"], "reorder_scale": 0.8}
    own = Platform.from_dict(d, "fake-device")
    assert plain.reorder_scale is None and own.reorder_scale == 0.8
    e0, e1 = at.estimate(net, plain), at.estimate(net, own)
    ex = e0.mapped.network
    costs = plain.mapping.costs
    reorders = costs.inserted_ms(ex) + costs.layout_ms(ex)
    assert (reorders > 0.005).sum() >= 2  # (the SiLU's output goes plain for the broadcasting Mul, and back)
    scale = plain.overhead[0]
    factor = np.ones(len(ex))
    for label, f in kinds.items():
        factor[ex.types == int(LayerType.from_label(label))] = f
    assert np.allclose(e1.mapped_time_ms, np.maximum(e0.mapped_time_ms + reorders * scale * (0.8 - factor), 0))
    same = Platform.from_dict({**d, "overhead": {**d["overhead"], "kind_scales": {}, "reorder_scale": 1.0}}, "x")
    assert np.allclose(at.estimate(net, same).mapped_time_ms,
                       at.estimate(net, _with("ort-cpu", 1.0, {})).mapped_time_ms)


@pytest.mark.parametrize("value", [-1.0, 0.0, "fast"])
def test_a_bad_reorder_scale_is_one_platform_error(value):
    d = at.load_platform("ort-cpu").to_dict()
    d["overhead"] = {**d["overhead"], "reorder_scale": value}  # (a copy: to_dict shares the loaded file's objects)
    with pytest.raises(PlatformError, match="reorder_scale") as e:
        Platform.from_dict(d, "bad")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("kinds, needle", [
    ({"Conv vector": 2.0}, "only a fully connected layer has a vector kind"),
    ({"Relu const": 2.0}, "only Add, Sub, Mul and Div have a const kind"),
    ({"Conv 3": 2.0}, "written like 3x3"),
    ({"Blorp": 2.0}, "not a layer type"),
    ({"Conv 3x3": -1.0}, "Conv 3x3"),
    ([1, 2], "expected an object"),
])
def test_a_bad_kind_scale_is_one_platform_error(kinds, needle):
    with pytest.raises(PlatformError, match=needle) as e:
        _with("ort-cpu", 1.0, kinds)
    assert "\n" not in str(e.value)


def test_kinds_are_convolutions_by_kernel_elementwise_layers_together_and_other_types_alone():
    assert kind_of("Conv", 3, 3) == "Conv 3x3" and kind_of("DepthwiseConv", 5, 5) == "DepthwiseConv 5x5"
    assert kind_of("Relu", 0, 0) == kind_of("Add", 0, 0) == kind_of("BatchNorm", 0, 0) == "elementwise"
    assert kind_of("AvgPool", 3, 3) == "AvgPool"


def test_fit_kinds_recovers_known_factors_from_exact_latencies():
    archs, data, (scale, per_layer, per_net, dw) = _cells(5, 24)
    truth = {"Conv 3x3": 1.8, "Conv 1x1": 0.6, "AvgPool": 2.5, "elementwise": 1.0}
    assert set(data.kinds) <= set(truth)
    f = np.array([truth[k] for k in data.kinds])
    # (a device's own cost per layer is never negative, whatever the base file's fitted value)
    y = 1.4 * (data.X @ f + data.rest + max(per_layer, 0.0) * data.n_exec) + per_net
    fit = fit_kinds(data, y, per_layer, per_net, lam=1e-6)
    # g and the factors are known up to their product (the ridge sets the split): each kind's speed is exact
    for k in data.kinds:
        assert fit.g * fit.factors[k] == pytest.approx(1.4 * truth[k], rel=0.05), k
    assert np.allclose(fit.predict(data), y, rtol=0.01)


@pytest.mark.parametrize("semantics", ["reach", "pruned", "eager"])
def test_adapt_finds_a_fake_devices_semantics_and_kind_scales_from_its_cells(semantics):
    """A device 2.5x slower than ort-cpu whose 3x3 convolutions run 1.6x and pools 0.5x its own proportions,
    computing the cells as a runtime of ``semantics`` does: adapt from 16 cells predicts the others. An eager
    runtime shows itself by its multiplies by zero; with no constant network among the rows it is recorded as
    ``eager-folded`` (whether it folds a constant, no row shows)."""
    from annette_torch.fit.adapt import ADAPT_SEMANTICS

    assert semantics in ADAPT_SEMANTICS
    fake = _with("ort-cpu", 2.5, {"Conv 3x3": 1.6, "AvgPool": 0.5})
    rng = np.random.default_rng(11)
    idx = rng.choice(nb201.NUM_ARCHS, 40, replace=False)
    archs = [nb201.index_to_arch(int(i)) for i in idx]
    assert not any(nb201.cell_edges(a, "all")[1] for a in archs[:16])
    y = at.estimate_many(nb201.build_networks(archs, semantics=semantics), fake)
    if semantics != "eager":  # constant networks (a few microseconds) say little about the kinds
        keep = y > 0.05
        archs, y = [a for a, k in zip(archs, keep) if k], y[keep]
    res = adapt("ort-cpu", latencies=[(f"nb201:{a}", float(v)) for a, v in zip(archs[:16], y[:16])], save=False)
    recorded = "eager-folded" if semantics == "eager" else semantics
    assert res.semantics == recorded and res.kind_scales is not None
    # 3x3 convolutions relative to pooling as the device runs them (1.6 / 0.5 = 3.2; the ridge toward the base
    # file's proportions, 1.0, keeps it lower), whatever the overall factor
    assert res.kind_scales["Conv 3x3"] / res.kind_scales["AvgPool"] > 1.5
    assert nb201.platform_semantics(res.platform) == recorded
    assert "per-kind scales" in res.fitted() and repr(recorded) in res.fitted()
    pred = at.estimate_many(nb201.build_networks(archs[16:], semantics=semantics), res.platform)
    assert np.mean(np.abs(pred / y[16:] - 1)) < 0.05
    assert res.loo_mape < 0.05


def test_networks_that_are_no_space_candidates_keep_their_own_semantics():
    """Per-kind scales need no search space: zoo-style networks given as Network objects are fitted as given."""
    fake = _with("ort-cpu", 2.0, {"Conv 3x3": 1.5})
    rng = np.random.default_rng(2)
    archs = [nb201.index_to_arch(int(i)) for i in rng.choice(nb201.NUM_ARCHS, 12, replace=False)]
    nets = [n for n in nb201.build_networks(archs) if len(n) > 1][:10]
    y = at.estimate_many(nets, fake)
    res = adapt("ort-cpu", latencies=list(zip(nets, y)), save=False)
    assert res.semantics is None
    assert np.mean(np.abs(res.after_ms / y - 1)) < 0.05


def test_few_cells_of_a_device_are_built_as_the_default_semantics_with_one_factor():
    """Below KIND_MIN_ROWS rows no per-kind scale is fitted, and the cells are built as DEFAULT_SEMANTICS."""
    from annette_torch.fit.adapt import DEFAULT_SEMANTICS, KIND_MIN_ROWS

    archs = [nb201.index_to_arch(i) for i in (5, 77, 901, 4000)][:KIND_MIN_ROWS - 1]
    fake = _with("ort-cpu", 3.0, {})
    y = at.estimate_many(nb201.build_networks(archs, semantics=DEFAULT_SEMANTICS), fake)
    res = adapt("ort-cpu", latencies=[(f"nb201:{a}", float(v)) for a, v in zip(archs, y)], save=False)
    assert res.kind_scales is None and res.semantics == DEFAULT_SEMANTICS
    assert nb201.platform_semantics(res.platform) == DEFAULT_SEMANTICS
    assert np.allclose(res.after_ms, y, rtol=0.02)


def test_fit_kinds_recovers_a_per_inference_cost_on_request_and_never_a_negative_one():
    archs, data, (scale, per_layer, per_net, dw) = _cells(8, 20, "eager")
    # (a layer's own cost is never below zero in the fit: the base file's per-layer term may be negative)
    plain = data.X.sum(axis=1) + data.rest + max(per_layer, 0.0) * data.n_exec
    y = 3.0 * (plain + 2.0) + per_net  # an eager runtime: 6 ms per inference on top
    fit = fit_kinds(data, y, per_layer, per_net, lam=1e-6, constant=True)
    assert fit.per_network - per_net == pytest.approx(6.0, rel=0.05)
    assert np.allclose(fit.predict(data), y, rtol=0.01)
    assert fit_kinds(data, y, per_layer, per_net, lam=1e-6).per_network == per_net  # not on request: the base's
    faster = fit_kinds(data, 3.0 * plain + per_net - 0.5, per_layer, per_net, lam=1e-6, constant=True)
    assert faster.per_network >= per_net


def test_network_level_refit_on_folding_cells_leaves_constants_free_and_fits_no_absent_term(monkeypatch):
    """Without per-kind scales (forced off), ten cells of a device that folds constants and pays a per-inference
    cost: the refit fits no per-inference constant (it would be all of a folded network's microseconds) and
    no depthwise term (no cell has a depthwise layer: any coefficient would fit it), and the file loads."""
    import annette_torch.fit.adapt as adapt_mod
    from annette_torch.fit.adapt import DEFAULT_SEMANTICS

    monkeypatch.setattr(adapt_mod, "KIND_MIN_ROWS", 10**6)
    d = at.load_platform("ort-cpu").to_dict()
    d["overhead"] = {**d["overhead"], "scale": d["overhead"]["scale"] * 2.0, "per_network_ms": 1.5}
    fake = Platform.from_dict(d, "fake-device")
    rng = np.random.default_rng(4)
    archs = [nb201.index_to_arch(int(i)) for i in rng.choice(nb201.NUM_ARCHS, 40, replace=False)]
    archs = [a for a in archs if not nb201.cell_edges(a, DEFAULT_SEMANTICS)[1]][:10]
    y = at.estimate_many(nb201.build_networks(archs, semantics=DEFAULT_SEMANTICS), fake)
    res = adapt("ort-cpu", latencies=[(f"nb201:{a}", float(v)) for a, v in zip(archs, y)], save=False)
    assert res.kind_scales is None and res.semantics == DEFAULT_SEMANTICS
    terms = res.platform.meta["adapted"]["terms"]
    assert "constant" not in terms and "depthwise" not in terms
    folded = nb201.build_network("|nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|",
                                 semantics=DEFAULT_SEMANTICS)
    assert at.estimate(folded, res.platform).latency_ms < 0.01 * float(np.min(y))


def test_fit_kinds_never_fits_a_negative_cost_per_layer():
    """Latencies that a negative per-layer cost would fit best (each layer 0.05 ms cheaper than nothing): the fit
    keeps a layer's own cost at zero or above and leaves the rest to the factors."""
    archs, data, (scale, per_layer, per_net, dw) = _cells(9, 20, "eager")
    plain = data.X.sum(axis=1) + data.rest + max(per_layer, 0.0) * data.n_exec + per_net
    y = np.maximum(2.0 * plain - 0.05 * data.n_exec, 0.1 * plain)
    for lam in (1e-6, 1.0):
        fit = fit_kinds(data, y, per_layer, per_net, lam=lam, constant=True)
        assert fit.per_layer >= -1e-9
        assert fit.per_network >= per_net


def test_a_folded_constant_cell_costs_the_runtimes_call_not_the_devices_compute_factor():
    """A device 8x slower than ort-cpu at computing layers: per-kind scales fitted from its cells leave a
    constant network (folded by a runtime of `reach` semantics) at the base file's per-inference cost, where
    scaling it with the factor would put microsecond networks several times too high."""
    fake = _with("ort-cpu", 8.0, {"Conv 3x3": 1.5})
    rng = np.random.default_rng(5)
    archs = [nb201.index_to_arch(int(i)) for i in rng.choice(nb201.NUM_ARCHS, 60, replace=False)]
    archs = [a for a in archs if not nb201.cell_edges(a, "reach")[1]][:12]
    y = at.estimate_many(nb201.build_networks(archs, semantics="reach"), fake)
    res = adapt("ort-cpu", latencies=[(f"nb201:{a}", float(v)) for a, v in zip(archs, y)], save=False)
    assert res.kind_scales is not None and res.semantics == "reach"
    folded = nb201.build_network("|nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|", semantics="reach")
    base = at.load_platform("ort-cpu")
    assert res.platform.overhead[2] == pytest.approx(base.overhead[2])  # the per-inference cost, not scaled
    # (the graph input's own sub-microsecond copy is the device's and takes its factor)
    assert at.estimate(folded, res.platform).latency_ms < 2 * at.estimate(folded, base).latency_ms


def _eager_device_rows(seed: int, n: int, constant_ms: float | None) -> list[tuple[str, float]]:
    """``n`` cells of a device 3x slower than ort-cpu that computes every edge as eager PyTorch does, plus one
    constant cell measured at ``constant_ms`` (None: no constant cell)."""
    fake = _with("ort-cpu", 3.0, {"Conv 1x1": 1.5})
    rng = np.random.default_rng(seed)
    archs = [nb201.index_to_arch(int(i)) for i in rng.choice(nb201.NUM_ARCHS, 80, replace=False)]
    archs = [a for a in archs if not nb201.cell_edges(a, "reach")[1]][:n]
    y = at.estimate_many(nb201.build_networks(archs, semantics="eager"), fake)
    rows = [(f"nb201:{a}", float(v)) for a, v in zip(archs, y)]
    if constant_ms is not None:
        rows.append(("nb201:|nor_conv_3x3~0|+|nor_conv_3x3~0|none~1|+|none~0|none~1|none~2|", constant_ms))
    return rows


def test_a_constant_cell_measured_in_microseconds_rules_out_eager_semantics():
    """Cells that look eager, but the one constant cell among them ran in microseconds: the device folds
    constants, so adapt never prices them as computed (``eager``, ~1000x off on such cells)."""
    res = adapt("ort-cpu", latencies=_eager_device_rows(3, 12, 0.004), save=False)
    assert res.semantics not in ("eager", "eager-folded")
    const = at.estimate(nb201.build_network(nb201.arch_string(["none"] * 6),
                                            semantics=nb201.platform_semantics(res.platform)), res.platform)
    assert const.latency_ms < 0.1


def test_eager_cells_with_a_computed_constant_are_eager_and_without_one_eager_folded():
    """An eager device: a constant cell measured at a computed network's latency keeps ``eager`` (every
    constant computed); without any constant cell among the rows, constants are priced as folded."""
    rows = _eager_device_rows(4, 12, None)
    folded = adapt("ort-cpu", latencies=rows, save=False)
    assert folded.semantics == "eager-folded" and "constant cells priced as folded" in folded.fitted()
    constant = _eager_device_rows(4, 12, float(np.median([v for _, v in rows])))[-1]
    computed = adapt("ort-cpu", latencies=rows + [constant], save=False)
    assert computed.semantics == "eager"
    cells = ["|nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|", rows[0][0].removeprefix("nb201:")]
    f = nb201.estimate_all(folded.platform)[[nb201.arch_to_index(a) for a in cells]]
    c = nb201.estimate_all(computed.platform)[[nb201.arch_to_index(a) for a in cells]]
    assert f[0] < 0.05 * f[1]  # the constant cell: folded, a per-inference cost
    assert c[0] > 0.3 * c[1]  # computed as the benchmark's code runs it
    assert f[1] == pytest.approx(c[1], rel=0.25)


def _conv_act_measured(c_ins, fused):
    """Measured conv + HardSwish micro-kernels (conv_act), one per input channel count, fused as given."""
    from annette_torch.bench.records import FUSED, NOT_FUSED, LayerRecord
    from annette_torch.bench.suites import SUITES
    from annette_torch.fit.data import Measured

    out = []
    for c, f in zip(c_ins, fused):
        net = SUITES["conv_act"].build({"hw": 14, "c": c, "f": 32, "k": 3, "act": "hardswish", "tail": "none"})
        recs = {n: LayerRecord(n, lab, FUSED if (lab == "HardSwish" and f) else NOT_FUSED)
                for n, lab in zip(net.names, net.type_labels())}
        out.append(Measured("conv_act", f"c{c}", net, recs, []))
    return out


def test_a_conditional_fusion_is_checked_by_the_input_channel_alignment_it_happened_from():
    """`fused_from`: the input-channel alignment from which the measured micro-kernels fused (the blocked
    kernels' multiple where the measurements allow it), 0 where all fused, `NEVER` where none did, None where no
    threshold tells them apart, plus `NARROW` where every layer narrower than one block fused as well;
    `checked_rules` puts one rule in place of the file's conditional ones (two for a narrow finding)."""
    from annette_torch.fit.kind_sweep import FUSES, NARROW, NEVER, checked_rules, fused_from, fusion_words, rule_checks

    aligned = [16, 24, 64, 96, 512]
    odd = [13, 43, 102, 171]
    assert fused_from(_conv_act_measured(aligned + odd, [True] * 5 + [False] * 4), "Conv", "HardSwish") == 3.0
    assert fused_from(_conv_act_measured(aligned + odd, [True] * 9), "Conv", "HardSwish") == 0.0
    assert fused_from(_conv_act_measured(aligned + odd, [False] * 9), "Conv", "HardSwish") == NEVER
    assert fused_from(_conv_act_measured([16, 24], [False, True]), "Conv", "HardSwish") is None  # (no threshold)
    assert fused_from([], "Conv", "HardSwish") is None
    # (narrower than one block of 8: all fused -> NARROW; not all -> the alignment alone; 4 and 8 fused alike: 2)
    four = [12, 20, 36]
    assert fused_from(_conv_act_measured([3, 6] + aligned + odd, [True] * 7 + [False] * 4), "Conv",
                      "HardSwish") == 3.0 + NARROW
    assert fused_from(_conv_act_measured([3, 6] + aligned + four + odd, [True] * 10 + [False] * 4), "Conv",
                      "HardSwish") == 2.0 + NARROW
    assert fused_from(_conv_act_measured([3, 4] + aligned + four + odd, [False, True] + [True] * 8 + [False] * 4),
                      "Conv", "HardSwish") == 2.0  # (4 is aligned as the others: nothing narrow about it)
    assert fused_from(_conv_act_measured([3] + aligned + odd, [True] + [False] * 9), "Conv", "HardSwish") == \
        NEVER + NARROW
    assert fusion_words(2.0 + NARROW) == "where the input channels are a multiple of 4 or fewer than 8"
    assert fusion_words(NEVER + NARROW) == "where the input channels are fewer than 8"
    assert (fusion_words(3.0), fusion_words(0.0), fusion_words(NEVER)) == (
        "where the input channels are a multiple of 8", "always", "never")

    raw = without_overhead(at.load_platform("ort-cpu"))
    checks = rule_checks(raw)
    assert checks[f"{FUSES}Conv+HardSwish"] == ("conv_act", "hardswish")
    rules = raw.to_dict()["mapping"]["rules"]
    pair = [r for r in rules if r["primary"] == ["Conv"] and r["secondary"] == ["HardSwish"]]
    assert len(pair) >= 2 and all(r.get("when") for r in pair)
    at_ = rules.index(pair[0])
    for k, when in ((3.0, [{"layer": "primary", "attr": "c_in_align", "op": ">=", "value": 3}]), (0.0, None)):
        new = checked_rules(rules, {f"{FUSES}Conv+HardSwish": k})
        assert len(new) == len(rules) - len(pair) + 1 and new[at_]["name"] == "Conv+HardSwish"
        assert new[at_].get("when") == when
        assert [r for r in new if r is not new[at_]] == [r for r in rules if r not in pair]  # (the rest as it was)
    assert checked_rules(rules, {f"{FUSES}Conv+HardSwish": float(NEVER)}) == [r for r in rules if r not in pair]
    narrow = [{"layer": "primary", "attr": "c_in", "op": "<", "value": 8}]
    new = checked_rules(rules, {f"{FUSES}Conv+HardSwish": 2.0 + NARROW})
    assert [r.get("when") for r in new[at_:at_ + 2]] == [
        [{"layer": "primary", "attr": "c_in_align", "op": ">=", "value": 2}], narrow]
    assert len(new) == len(rules) - len(pair) + 2
    new = checked_rules(rules, {f"{FUSES}Conv+HardSwish": NEVER + NARROW})
    assert len(new) == len(rules) - len(pair) + 1 and new[at_]["when"] == narrow


def test_a_checked_fusion_rule_fuses_by_alignment_in_the_adapted_mapping():
    """The swept finding goes into the file's mapping (`apply_factors`): a HardSwish after a convolution of 8k
    input channels is fused, after one of 12 it is not (with a narrow finding, after one of 3 too); the network's
    other rules are unchanged."""
    from annette_torch.fit.kind_sweep import FUSES, NARROW, apply_factors
    from annette_torch.ir import NetworkBuilder

    b = NetworkBuilder("hs")
    x = b.input("x", (1, 12, 28, 28))
    y = b.same(LayerType.HARDSWISH, "hs1", b.conv("c1", x, 16, 3, padding=1))
    b.same(LayerType.HARDSWISH, "hs2", b.conv("c2", y, 24, 3, padding=1))
    net = b.build()
    d = without_overhead(at.load_platform("ort-cpu")).to_dict()
    d["overhead"] = {"scale": 1.0, "per_layer_ms": 0.0, "per_network_ms": 0.0}
    apply_factors(d, {f"{FUSES}Conv+HardSwish": 3.0})
    fused = {r["name"]: r["fused_into"] for r in at.estimate(net, Platform.from_dict(d, "x")).table()}
    assert fused["hs1"] == "" and fused["hs2"] == "c2"  # (c1 reads 12 channels, c2 16)
    # (a narrow finding: an image's convolution fused too, a 12-channel one still not)
    b = NetworkBuilder("hs")
    x = b.input("x", (1, 3, 28, 28))
    y = b.same(LayerType.HARDSWISH, "hs0", b.conv("c0", x, 12, 3, padding=1))
    b.same(LayerType.HARDSWISH, "hs1", b.conv("c1", y, 16, 3, padding=1))
    d = without_overhead(at.load_platform("ort-cpu")).to_dict()
    d["overhead"] = {"scale": 1.0, "per_layer_ms": 0.0, "per_network_ms": 0.0}
    apply_factors(d, {f"{FUSES}Conv+HardSwish": 3.0 + NARROW})
    fused = {r["name"]: r["fused_into"] for r in at.estimate(b.build(), Platform.from_dict(d, "x")).table()}
    assert fused["hs0"] == "c0" and fused["hs1"] == ""
