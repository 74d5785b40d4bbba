"""Network-level calibration of the ZCU102 platform against published end-to-end latencies."""

from __future__ import annotations

import numpy as np
import pytest

import annette_torch as at
from annette_torch.models.calibration import Calibration
from annette_torch.fit.calibrate_network import fit_calibration, leave_one_out, loo_report
from annette_torch.errors import PlatformError


def test_fit_recovers_known_coefficients():
    rng = np.random.default_rng(0)
    terms = [{"layers": rng.uniform(1, 30), "depthwise": rng.uniform(0, 2), "cpu_tail": rng.uniform(0, 1),
              "constant": 1.0, "weights": rng.uniform(1, 50)} for _ in range(12)]
    true = {"layers": 1.3, "depthwise": 3.0, "cpu_tail": 5.0, "constant": 0.4, "weights": 0.04}
    y = [sum(true[k] * t[k] for k in t) for t in terms]
    cal = fit_calibration(terms, y)
    for k, v in true.items():
        assert cal.coef[k] == pytest.approx(v, rel=1e-6)
    assert np.max(np.abs(leave_one_out(terms, y))) < 1e-6


def test_fit_recovers_a_negative_per_layer_cost():
    """CPU terms: a profiler cost per node that the layer sum over-counts comes back negative."""
    from annette_torch.fit.calibrate_network import CPU_TERMS
    rng = np.random.default_rng(1)
    terms = [{"layers": rng.uniform(0.5, 30), "depthwise": 0.0, "executed_layers": float(rng.integers(5, 300)),
              "constant": 1.0} for _ in range(20)]
    y = [0.98 * t["layers"] - 0.003 * t["executed_layers"] + 0.05 for t in terms]
    cal = fit_calibration(terms, y, CPU_TERMS)
    assert cal.coef["executed_layers"] == pytest.approx(-0.003, rel=1e-6)
    assert cal.coef["layers"] == pytest.approx(0.98, rel=1e-6)
    assert Calibration.from_dict(cal.to_dict(), "x").coef == pytest.approx(cal.coef)


def test_robust_cpu_loss_resists_outlying_networks():
    """A few networks the layer models miss badly (measured 2-5x the model) pull plain least squares off
    the others; the CPU calibration's robust loss keeps the coefficients of the well-modelled majority."""
    from annette_torch.fit.calibrate_network import CPU_LOSS, CPU_TERMS
    rng = np.random.default_rng(2)
    terms = [{"layers": rng.uniform(0.5, 30), "depthwise": 0.0, "executed_layers": float(rng.integers(5, 300)),
              "constant": 1.0} for _ in range(40)]
    y = np.array([0.95 * t["layers"] - 0.002 * t["executed_layers"] + 0.01 for t in terms])
    y[:4] *= rng.uniform(2, 5, 4)  # four outliers, all measured slower than modelled
    plain = fit_calibration(terms, y, CPU_TERMS)
    robust = fit_calibration(terms, y, CPU_TERMS, loss=CPU_LOSS)
    assert abs(robust.coef["layers"] / 0.95 - 1) < 0.01
    assert abs(plain.coef["layers"] / 0.95 - 1) > 3 * abs(robust.coef["layers"] / 0.95 - 1)
    inliers = [abs(robust.predict(t) / m - 1) for t, m in zip(terms[4:], y[4:])]
    assert max(inliers) < 0.02
    loo = leave_one_out(terms, y, CPU_TERMS, loss=CPU_LOSS)
    assert np.median(np.abs(loo)) < 0.02


def test_cpu_calibration_fits_a_signed_depthwise_scale():
    """Depthwise layers that run faster in networks than their micro-kernels (an Intel Xeon) get their own,
    lower scale; networks without depthwise time leave the term out; an absurd depthwise scale is refused."""
    from annette_torch.fit.calibrate_network import fit_cpu_calibration
    rng = np.random.default_rng(3)

    def terms_of(n, dw_share):
        out = []
        for i in range(n):
            layers = rng.uniform(0.5, 30)
            out.append({"layers": layers, "depthwise": layers * dw_share * rng.uniform(0, 1),
                        "executed_layers": float(rng.integers(5, 300)), "constant": 1.0})
        return out
    terms = terms_of(30, 0.5)
    y = np.array([0.9 * t["layers"] - 0.25 * t["depthwise"] - 0.002 * t["executed_layers"] + 0.01 for t in terms])
    cal = fit_cpu_calibration(terms, y * np.exp(rng.normal(0, 0.01, len(y))))
    assert cal.coef["depthwise"] == pytest.approx(-0.25, abs=0.03)
    assert cal.coef["layers"] == pytest.approx(0.9, rel=0.02) and cal.loo_mape < 0.03
    no_dw = terms_of(20, 0.0)
    cal = fit_cpu_calibration(no_dw, [0.9 * t["layers"] + 0.01 for t in no_dw])
    assert "depthwise" not in cal.coef and cal.coef["layers"] == pytest.approx(0.9, rel=0.01)
    # depthwise time "negative": the term would make depthwise layers cost < 0.25 x the others' scale
    y = np.array([0.9 * t["layers"] - 0.85 * t["depthwise"] for t in terms])
    cal = fit_cpu_calibration(terms, y)
    assert "depthwise" not in cal.coef
    # depthwise layers at the common scale, plus noise the term could chase: left out, it does not lower the
    # leave-one-out error
    y = np.array([0.9 * t["layers"] + 0.01 for t in terms]) * np.exp(rng.normal(0, 0.03, len(terms)))
    cal = fit_cpu_calibration(terms, y)
    assert "depthwise" not in cal.coef and cal.coef["layers"] == pytest.approx(0.9, rel=0.03)


def test_cpu_calibration_fits_the_token_mixing_layers_their_own_scale():
    """Attention-era layers (`TOKEN_TYPES`) that run 1.5x slower in networks than their micro-kernels (ONNX
    Runtime on an Intel Xeon) get their own scale, written as per-type factors on the file's scale, and the
    calibrated platform predicts what the fit does; networks without such layers leave the term out."""
    from annette_torch.fit.calibrate import overhead_entry, with_overhead, without_overhead
    from annette_torch.fit.calibrate_network import fit_cpu_calibration
    from annette_torch.models.calibration import TOKEN_TYPES
    from annette_torch.search.spaces import vit
    rng = np.random.default_rng(4)
    terms = []
    for _ in range(24):
        layers = rng.uniform(0.5, 30)
        terms.append({"layers": layers, "tokens": layers * rng.uniform(0, 0.6), "depthwise": 0.0,
                      "executed_layers": float(rng.integers(5, 300)), "constant": 1.0})
    y = np.array([0.95 * t["layers"] + 0.45 * t["tokens"] - 0.003 * t["executed_layers"] for t in terms])
    cal = fit_cpu_calibration(terms, y * np.exp(rng.normal(0, 0.01, len(y))))
    assert cal.coef["tokens"] == pytest.approx(0.45, abs=0.04) and cal.loo_mape < 0.03
    entry = overhead_entry(cal, "test")
    assert set(entry["kind_scales"]) == set(TOKEN_TYPES)
    assert entry["kind_scales"]["MatMul"] == pytest.approx((cal.coef["layers"] + cal.coef["tokens"]) / entry["scale"])
    cnn = [dict(t, tokens=0.0) for t in terms]
    assert "tokens" not in fit_cpu_calibration(cnn, [0.95 * t["layers"] for t in cnn]).coef
    # the attention core alone faster inside a network (OpenVINO's fused attention): that group's term instead
    for t in terms:
        t["attention"] = t["tokens"] * rng.uniform(0.3, 0.7)
    y = np.array([0.95 * t["layers"] - 0.5 * t["attention"] - 0.003 * t["executed_layers"] for t in terms])
    cal = fit_cpu_calibration(terms, y * np.exp(rng.normal(0, 0.01, len(y))))
    assert "tokens" not in cal.coef and cal.coef["attention"] == pytest.approx(-0.5, abs=0.05)
    assert set(overhead_entry(cal, "test")["kind_scales"]) == {"MatMul", "Softmax"}

    # the file applies the term: a calibrated platform's latency is the fit's prediction from the raw terms
    raw = without_overhead(at.load_platform("ort-cpu"))
    nets = [vit.build_network(a) for a in vit.sample(12, np.random.default_rng(5))]
    ts = [at.estimate(n, raw).terms for n in nets]
    assert all(t["tokens"] > 0 for t in ts)
    y = np.array([0.9 * t["layers"] + 0.5 * t["tokens"] - 0.001 * t["executed_layers"] for t in ts])
    plat, _ = with_overhead(raw, ts, y)
    fit = fit_cpu_calibration(ts, y)
    assert "tokens" in fit.coef
    for n, t in zip(nets, ts):
        assert at.estimate(n, plat).latency_ms == pytest.approx(fit.predict(t), rel=1e-3)  # (layers clip at 0)


def test_cpu_calibration_ramps_the_per_layer_cost_where_small_layers_pay_their_share():
    """Layers that run faster inside a network by a fixed cost, which a small layer pays only its share of
    (OpenVINO): the calibration picks the ramped per-layer term, the file writes its ramp, and the calibrated
    platform predicts what the fit does from the raw terms; a flat per-node cost (ONNX Runtime's profiler)
    keeps the flat term. ``ramped_layers`` counts a layer below `RAMP_MS` as its share."""
    from annette_torch.fit.calibrate import overhead_entry, with_overhead, without_overhead
    from annette_torch.fit.calibrate_network import fit_cpu_calibration
    from annette_torch.models.calibration import RAMP_MS
    from annette_torch.search.spaces import mbv2, nb101
    raw = without_overhead(at.load_platform("openvino-cpu"))
    rng = np.random.default_rng(6)
    nets = [nb101.build_network(s.matrix, s.ops) for s in nb101.sample(12, rng)]
    nets += [mbv2.build_network([str(rng.choice(b.ops)) for b in mbv2.BLOCKS], resolution=int(rng.choice([96, 160])))
             for _ in range(12)]
    ests = [at.estimate(n, raw) for n in nets]
    ts = [e.terms for e in ests]
    for e, t in zip(ests, ts):
        acc = e.mapped_time_ms[e.mapped.network.types != int(at.ir.LayerType.INPUT)]
        assert t["ramped_layers"] == pytest.approx(np.minimum(acc / RAMP_MS, 1.0)[acc >= 1e-9].sum())
        assert t["ramped_layers"] < t["executed_layers"]
    noise = np.exp(rng.normal(0, 0.005, len(ts)))
    y = np.array([0.95 * t["layers"] - 0.012 * t["ramped_layers"] + 0.02 for t in ts]) * noise
    fit = fit_cpu_calibration(ts, y)
    assert "ramped_layers" in fit.coef and "executed_layers" not in fit.coef
    assert fit.coef["ramped_layers"] == pytest.approx(-0.012, rel=0.1)
    entry = overhead_entry(fit, "test")
    assert entry["per_layer_ramp_ms"] == RAMP_MS and entry["per_layer_ms"] == fit.coef["ramped_layers"]
    plat, _ = with_overhead(raw, ts, y)
    assert plat.per_layer_ramp_ms == RAMP_MS and plat.to_dict()["overhead"]["per_layer_ramp_ms"] == RAMP_MS
    for n, t in zip(nets, ts):
        assert at.estimate(n, plat).latency_ms == pytest.approx(fit.predict(t), rel=1e-3)
    flat = np.array([0.95 * t["layers"] - 0.004 * t["executed_layers"] + 0.02 for t in ts]) * noise
    fit = fit_cpu_calibration(ts, flat)
    assert "executed_layers" in fit.coef and "ramped_layers" not in fit.coef
    assert "per_layer_ramp_ms" not in overhead_entry(fit, "test")
    d = plat.to_dict()
    d["overhead"]["per_layer_ramp_ms"] = 0
    with pytest.raises(PlatformError, match="overhead.per_layer_ramp_ms"):
        at.platform.Platform.from_dict(d, "x")


def test_zcu102_leave_one_out_within_target(ref_dir):
    rep = loo_report("zcu102-dnndk")
    assert len(rep["rows"]) == 10
    assert rep["uncalibrated_mape"] > 0.3  # the published layer models alone are far off the e2e figures
    assert rep["loo_mape"] <= 0.08  # the issue's target for networks outside the calibration set
    shipped = at.load_platform("zcu102-dnndk").end_to_end
    assert shipped is not None and shipped.coef == pytest.approx(rep["calibration"].coef)


def test_zcu102_holdout_networks_are_outside_the_calibration_and_scored(ref_dir, capsys, accuracy_benchmark):
    """The accuracy benchmark's hold-out rows: other networks of the same published table, none in the calibration
    set, each citing its source line; the report scores every one of them with the shipped platform."""
    import csv

    mod = accuracy_benchmark
    rows = list(csv.DictReader(open(mod.HOLDOUT_ZCU102, encoding="utf-8")))
    calibrated = set(at.load_platform("zcu102-dnndk").end_to_end.fitted_on)
    assert len(calibrated) == 10 and len(rows) >= 10
    for r in rows:
        assert r["graph"] not in calibrated and (ref_dir / "graphs" / f"{r['graph']}.json").is_file()
        assert float(r["e2e_latency_ms_1thread"]) > 0 and "AI-Model-Zoo" in r["source"] and "#L" in r["source"]
    mod.zcu102_holdout()
    out = capsys.readouterr().out
    assert all(f"\n{r['graph']} " in out for r in rows)
    assert "within +-10% " in out and f" of {len(rows)}, Spearman" in out


def test_estimate_reports_end_to_end(ref_dir):
    e = at.estimate(str(ref_dir / "graphs" / "cf_resnet50.json"), "zcu102-dnndk")
    assert e.e2e_ms is not None and e.e2e_ms > e.device_ms
    assert abs(e.e2e_ms / 12.85 - 1) < 0.1  # published 12.85 ms
    assert "e2e_ms" in e.to_dict(per_layer=False)
    assert at.estimate(str(ref_dir / "graphs" / "cf_resnet50.json"), "ncs2").e2e_ms is None


def test_calibration_validation():
    with pytest.raises(PlatformError, match="coef.magic"):
        Calibration.from_dict({"coef": {"magic": 1.0}}, "x")
    with pytest.raises(PlatformError, match="coef.layers"):
        Calibration.from_dict({"coef": {"layers": -1.0}}, "x")


def test_network_level_calibration_measures_in_rounds(monkeypatch):
    """annette calibrate's end-to-end step: every network measured once per round, the fastest round kept."""
    import annette_torch.fit.calibrate as C
    from annette_torch import validate as V
    from annette_torch.bench.suites import SUITES
    from annette_torch.fit.calibrate_network import CPU_TERMS
    nets = [SUITES["conv_bn_relu"].build(c) for c in SUITES["conv_bn_relu"].configs(n=6, seed=1)]
    calls, fake = [], iter(np.linspace(5.0, 0.5, 3 * len(nets)))  # every round faster than the last

    def measure(net, runtime, **kw):
        calls.append((net.name, kw["repeats"]))
        return V.Measurement.from_times(np.full((1, 3), next(fake)))
    monkeypatch.setattr(V, "measure_latency", measure)
    cal, rep = C.calibrate_network_level(at.load_platform("ort-cpu"), "ort-cpu", nets)
    assert [n for n, _ in calls] == [n.name for n in nets] * C.ROUNDS and {r for _, r in calls} == {1}
    # no depthwise here; the per-layer cost flat or ramped, whichever predicts left-out networks better
    per_layer = {"executed_layers", "ramped_layers"}
    assert set(cal.coef) - per_layer == set(CPU_TERMS) - {"depthwise"} - per_layer
    assert len(set(cal.coef) & per_layer) == 1 and np.isfinite(rep["loo_mape"])
    assert rep["networks"] == len(nets)
    assert list(rep["measured_ms"].values()) == pytest.approx(np.linspace(5.0, 0.5, 3 * len(nets))[-len(nets):])


def test_calibration_networks_are_deterministic_and_outside_the_validation_set():
    from annette_torch.fit.calibrate import _validation_hashes, calibration_networks
    nets = calibration_networks(12, exclude_hashes=_validation_hashes())
    assert len(nets) == 12 and len({n.name for n in nets}) == 12
    assert [n.name for n in calibration_networks(12, exclude_hashes=_validation_hashes())] == [n.name for n in nets]
    val = {h[:8] for h in _validation_hashes()}
    assert not {n.name.rsplit("-", 1)[1] for n in nets if "nb101" in n.name} & val


def test_weights_term_leaves_out_fully_connected_layers():
    """A fully connected layer's (memory-bound) model charges its weights already: the ``weights`` term counts the
    other layers' weights only, so a large classifier head does not add its weight traffic twice."""
    import torch.nn as nn

    def net(hidden: int) -> nn.Module:
        return nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 6 * 6, hidden),
                             nn.ReLU(), nn.Linear(hidden, 10))

    small, large = (at.trace(net(h), (1, 3, 8, 8)) for h in (8, 4096))
    terms = [at.estimate(n, "zcu102-dnndk").terms["weights"] for n in (small, large)]
    conv_weights = 16 * 3 * 3 * 3 / 1e6
    assert terms[0] == pytest.approx(conv_weights, rel=0.05) and terms[1] == pytest.approx(terms[0])
    assert large.weights.sum() > 10 * small.weights.sum()  # the heads differ by far more than the convs


def test_quick_plan_sweeps_the_attention_era_suites():
    """`annette calibrate --quick` measures every attention-era suite, each with enough configurations for the
    types it trains (a layer model needs `MIN_SAMPLES`), and stays a small plan."""
    from annette_torch.bench.suites import SUITES
    from annette_torch.fit.calibrate import (CONTEXT, FOLD_SUITES, MICRO, MULTI, PLANS, TOKENS_MICRO, TOKENS_MULTI,
                                             WINDOWED, plan_counts, plan_sweeps)
    from annette_torch.fit.generator import MIN_SAMPLES

    counts = plan_counts(PLANS["quick"])
    suites = {s for s, _, _ in plan_sweeps(PLANS["quick"])}
    assert suites == set(MICRO + MULTI + FOLD_SUITES + TOKENS_MICRO + TOKENS_MULTI + CONTEXT) <= set(SUITES)
    assert {"matmul[windows=64]", "softmax[windows=64]"} <= set(counts) and set(WINDOWED) <= set(TOKENS_MICRO)
    for s, n, opts in plan_sweeps(PLANS["quick"]):
        if opts:  # a windowed sweep has configurations (the caps leave enough) that differ from the plain ones
            cfgs = SUITES[s].configs(n=n, seed=0, options=opts)
            assert len(cfgs) == n and not {c["config_id"] for c in cfgs} & \
                {c["config_id"] for c in SUITES[s].configs(n=n, seed=0)}
    assert {"matmul", "softmax", "layernorm", "gelu", "heads", "attention", "mlp", "convnext",
            "window_attention"} <= set(counts)
    assert all(counts[s] >= MIN_SAMPLES for s in TOKENS_MICRO + TOKENS_MULTI)
    assert sum(counts.values()) <= 2650  # the quick plan's size: about 10 minutes on 2 cores (fc_act, reduce: ~5 s)
    assert all(plan_counts(PLANS["full"])[s] > n for s, n in counts.items())


def test_openvino_sweeps_written_out_attention_as_well():
    """OpenVINO's plan adds the attention suite in timm's written-out style (scale and softmax between the two
    products, which its attention subgraph takes in); its configurations differ from the sdpa ones. Not ONNX
    Runtime's."""
    from annette_torch.bench.suites import SUITES
    from annette_torch.fit.calibrate import PLANS, plan_counts, plan_sweeps

    plan = PLANS["quick"]
    styled = [(s, n, o) for s, n, o in plan_sweeps(plan, "openvino-cpu") if o.get("style")]
    assert styled == [("attention", plan.configs_blocks, {"style": "manual"})]
    assert "attention[style=manual]" not in plan_counts(plan, "ort-cpu")
    suite, n = SUITES["attention"], plan.configs_blocks
    manual = {c["config_id"] for c in suite.configs(n=n, seed=0, options={"style": "manual"})}
    assert len(manual) == n and not manual & {c["config_id"] for c in suite.configs(n=n, seed=0)}


def test_only_openvino_sweeps_the_picks_it_runs_in_place():
    """OpenVINO's plan sweeps the pick suite (q / k / v picks of a fused projection, run in place); ONNX Runtime's
    does not (it runs the three as one Split its profile charges to one of them: its Slice model prices them)."""
    from annette_torch.fit.calibrate import PLANS, TOKENS_MICRO, plan_counts

    plan = PLANS["quick"]
    assert plan_counts(plan, "openvino-cpu")["pick"] == plan.configs_tokens
    assert "pick" not in plan_counts(plan, "ort-cpu") and "pick" not in TOKENS_MICRO


def test_calibration_networks_span_the_transformer_era_families_outside_the_validation_set():
    """A third of the calibration networks are transformer-era architectures, none with the weighted layers of a
    validation network (the accuracy benchmark's ``modern`` kind), and none with Unknown layers."""
    from annette_torch import zoo
    from annette_torch.fit.calibrate import _validation_hashes, calibration_networks
    from annette_torch.fit.calibration_modern import MODERN_CALIBRATION, PREFIX
    from annette_torch.frontends.fx import trace
    from annette_torch.ir import LayerType
    from annette_torch.validate.networks import WEIGHTED_TYPES, layer_signature
    from annette_torch.zoo_modern import MODERN

    nets = calibration_networks(18, exclude_hashes=_validation_hashes())
    modern = [n for n in nets if n.name.startswith(PREFIX)]
    assert len(modern) == 6 and len({n.name for n in nets}) == 18
    assert {n.name.split("-")[2] for n in modern} >= {"vit", "convnext", "swin", "maxvit", "efficientformer"}
    assert all(not (n.types == LayerType.UNKNOWN).any() for n in modern)
    assert all((n.types == LayerType.MATMUL).any() or (n.types == LayerType.LAYER_NORM).any() for n in modern)
    validation = {layer_signature(trace(zoo.get(k), zoo.INPUT_SHAPES[k]), WEIGHTED_TYPES) for k in MODERN}
    assert not {layer_signature(n, WEIGHTED_TYPES) for n in modern} & validation
    assert len(MODERN_CALIBRATION) >= 45 // 3


def test_a_shifted_window_calibration_network_exports_without_tracer_warnings():
    """calibrate prints no TracerWarning about the Swin window's shape-dependent shift (exported at the shape
    it is measured at)."""
    import warnings

    import torch
    from annette_torch.fit.calibration_modern import MODERN_CALIBRATION, PREFIX, onnx_of

    name = PREFIX + next(k for k in MODERN_CALIBRATION if k.startswith("swin"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = onnx_of(name)
    assert any(n.op_type == "Softmax" for n in model.graph.node)
    assert not [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)]


def test_calibration_networks_span_the_classic_families_outside_the_validation_set():
    """A fifth of the calibration networks are convolutional families the NAS spaces lack (SE with hard-swish and
    SiLU, grouped, channel shuffle, dense, large fully connected heads), none with the weighted layers of a
    classic validation network (zoo and reference graphs), none with Unknown layers, and measured through the
    ONNX export of their module."""
    from annette_torch.fit.calibrate import _validation_hashes, calibration_networks
    from annette_torch.fit.calibration_classic import CLASSIC_CALIBRATION, PREFIX
    from annette_torch.fit.calibration_modern import calibration_networks_of, measurable
    from annette_torch.ir import LayerType
    from annette_torch.validate import validation_networks
    from annette_torch.validate.networks import WEIGHTED_TYPES, layer_signature

    nets = calibration_networks(45, exclude_hashes=_validation_hashes())
    assert sum(n.name.startswith(PREFIX) for n in nets) == min(45 // 5, len(CLASSIC_CALIBRATION)) == 9
    assert len({n.name for n in nets}) == 45
    assert [n.name for n in calibration_networks(10) if n.name.startswith(PREFIX)] == \
        [PREFIX + k for k in CLASSIC_CALIBRATION[:2]]
    classic = calibration_networks_of([PREFIX + k for k in CLASSIC_CALIBRATION])
    types = {LayerType(int(t)) for n in classic for t in n.types}
    assert {LayerType.GROUP_CONV, LayerType.HARDSWISH, LayerType.SILU, LayerType.CONCAT, LayerType.TRANSPOSE,
            LayerType.FULLY_CONNECTED, LayerType.DEPTHWISE_CONV, LayerType.CONV_TRANSPOSE, LayerType.LEAKY_RELU,
            LayerType.SOFTPLUS, LayerType.RESIZE} <= types
    assert LayerType.UNKNOWN not in types
    validation = {layer_signature(v.network, WEIGHTED_TYPES)
                  for v in validation_networks(("zoo", "reference"), n_nb101=0, check_export=False)}
    assert not {layer_signature(n, WEIGHTED_TYPES) for n in classic} & validation
    assert hasattr(measurable(classic[0]), "graph")


@pytest.mark.slow
def test_stored_layer_types_are_those_of_the_traced_calibration_networks():
    """calibration_types.json (which networks cover a platform's types, read without tracing all of them) holds
    every transformer-era and classic-family calibration network's layer types as the front end traces them."""
    from annette_torch.fit.calibration_modern import _stored_types, all_names, layer_types

    stored = _stored_types()
    assert sorted(stored) == sorted(all_names()), "calibration_types.json is out of date: run " \
        "scripts/calibration_types.py"
    for name in all_names():
        assert frozenset(stored[name]) == layer_types(name, stored=False), \
            f"{name}: calibration_types.json is out of date: run scripts/calibration_types.py"
        assert layer_types(name) == layer_types(name, stored=False)


def test_modern_calibration_networks_are_measured_through_their_onnx_export():
    from annette_torch.fit.calibration_modern import PREFIX, measurable, modern_calibration_networks

    net = modern_calibration_networks(1)[0]
    model = measurable(net)
    assert net.name.startswith(PREFIX) and hasattr(model, "graph")
    assert {n.op_type for n in model.graph.node} >= {"MatMul", "Softmax"}
    other = calibration_networks_plain()
    assert measurable(other) is other


def calibration_networks_plain():
    from annette_torch.fit.calibrate import calibration_networks
    return calibration_networks(1)[0]


def test_calibrate_fits_holding_this_machines_measuring_lock(monkeypatch, tmp_path):
    """The fit's worker processes take every core, so annette calibrate holds the measuring lock while it fits:
    another calibration's sweep on this machine waits instead of timing its layers beside them."""
    from annette_torch.bench.hostlock import MachineLock
    from annette_torch.fit import generator
    from annette_torch.fit.calibrate import run_calibration
    monkeypatch.setenv("ANNETTE_LOCK_DIR", str(tmp_path))

    class Fitted(Exception):
        pass

    def fit_platform(*a, **kw):
        other = MachineLock(poll_s=0.05)
        try:
            with other.hold(stop=lambda: True) as got:  # (False: held by someone else)
                pass
        finally:
            other.close()
        raise Fitted(got)
    monkeypatch.setattr(generator, "fit_platform", fit_platform)
    with pytest.raises(Fitted) as e:  # (no time for the sweeps: straight to the fit)
        run_calibration("ort-cpu", quick=True, out=str(tmp_path / "p.json"), db=str(tmp_path / "m.sqlite"),
                        progress=lambda _m: None, budget_s=1e-9)
    assert e.value.args == (False,)
