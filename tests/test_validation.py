"""Accuracy-validation pieces: metrics, measurement cache, whole-network measurement, comparison, plots."""

from __future__ import annotations

import math
import os
import sqlite3

import numpy as np
import pytest

from annette_torch import validate as V
from annette_torch.ir import LayerType as T
from annette_torch.ir import NetworkBuilder
from annette_torch.models import Roofline
from annette_torch.platform import Platform


def tiny_net(name: str = "tiny", width: int = 8):
    b = NetworkBuilder(name)
    x = b.input("x", (1, 3, 16, 16))
    x = b.conv("c1", x, width, 3, padding=1)
    x = b.same(T.RELU, "r1", x)
    x = b.pool("p1", x, "max", 2, 2)
    x = b.global_pool("gap", x)
    b.linear("fc", x, 10)
    return b.build()


def vnet(name: str, kind: str = "nb101", width: int = 8) -> V.ValidationNet:
    return V.ValidationNet(name, kind, tiny_net(name, width), (1, 3, 16, 16))


def plat(name: str, op_s: float, bw: float = 1e18) -> Platform:
    return Platform(name, {"Base": Roofline(op_s=op_s, bandwidth=bw, bit_act=32, bit_weights=32)})


# ------------------------------------------------------------------------------------------------- metrics
def test_metrics_hand_made_numbers():
    meas = [10.0, 20.0, 40.0, 80.0]
    pred = [11.0, 18.0, 40.0, 100.0]  # +10 %, -10 %, 0 %, +25 %
    m = V.metrics(pred, meas)
    assert m["n"] == 4
    assert m["mape_pct"] == pytest.approx((10 + 10 + 0 + 25) / 4)
    assert m["within10_pct"] == pytest.approx(75.0)  # the +-10 % boundary counts as within
    assert m["max_err_pct"] == pytest.approx(25.0)
    assert m["bias_pct"] == pytest.approx((10 - 10 + 0 + 25) / 4)
    assert m["spearman"] == pytest.approx(1.0)
    assert V.metrics([4, 3, 2, 1], [1, 2, 3, 4])["spearman"] == pytest.approx(-1.0)


def test_metrics_edge_cases():
    assert V.metrics([], [])["n"] == 0 and math.isnan(V.metrics([], [])["mape_pct"])
    assert math.isnan(V.metrics([1.0, 1.0], [1.0, 2.0])["spearman"])  # constant predictions: no ranking
    with pytest.raises(V.ValidationError):
        V.metrics([1.0], [0.0])
    with pytest.raises(V.ValidationError):
        V.metrics([1.0, 2.0], [1.0])


# ---------------------------------------------------------------------------------------------------- cache
def test_fingerprint_ignores_names_and_sees_shapes():
    a, b, c = tiny_net("a"), tiny_net("b"), tiny_net("a", width=16)
    assert V.network_fingerprint(a) == V.network_fingerprint(b)
    assert V.network_fingerprint(a) != V.network_fingerprint(c)


def test_cache_round_trip(tmp_path):
    m = V.Measurement(1.5, 0.02, (1.5, 1.53, 1.52), 1.4, 30, 3, 5, 0.7, busy=0.25)
    with V.MeasurementCache(tmp_path / "c.sqlite") as c:
        c.put("ort-cpu", "zoo/x", "fp1", "mach", m, {"runtime": "onnxruntime"})
        assert c.get("ort-cpu", "zoo/x", "fp1", "mach") == m
        assert c.get("ort-cpu", "zoo/x", "fp2", "mach") is None  # network changed
        assert c.get("ort-cpu", "zoo/x", "fp1", "other") is None  # other machine / runtime
        assert c.get("openvino-cpu", "zoo/x", "fp1", "mach") is None
        assert c.get("ort-cpu", "zoo/x", "fp1", "mach", runs=40) is None  # fewer runs than asked
        c.put("ort-cpu", "zoo/y", "fp1", "mach", V.Measurement(2.0, 0.0))  # unknown load: nan round-trips
        assert math.isnan(c.get("ort-cpu", "zoo/y", "fp1", "mach").busy)
    with V.MeasurementCache(tmp_path / "c.sqlite") as c:  # persisted
        assert c.get("ort-cpu", "zoo/x", "fp1", "mach", runs=20, repeats=3) == m
        assert len(c) == 2 and [e["network"] for e in c.entries("ort-cpu")] == ["zoo/x", "zoo/y"]


def test_cache_rejects_foreign_file(tmp_path):
    p = tmp_path / "junk.sqlite"
    p.write_bytes(b"not a database at all" * 100)
    with pytest.raises(V.ValidationError):
        V.MeasurementCache(p)


def test_cache_written_before_the_busy_column_is_upgraded(tmp_path):
    p = tmp_path / "old.sqlite"
    with sqlite3.connect(p) as db:
        db.execute("CREATE TABLE measurements (platform TEXT NOT NULL, network TEXT NOT NULL, fingerprint TEXT NOT "
                   "NULL, machine TEXT NOT NULL, median_ms REAL NOT NULL, spread REAL NOT NULL, repeat_medians TEXT "
                   "NOT NULL, min_ms REAL, runs INTEGER NOT NULL, repeats INTEGER NOT NULL, warmup INTEGER NOT NULL, "
                   "seconds REAL, info TEXT, created REAL NOT NULL, "
                   "PRIMARY KEY (platform, network, fingerprint, machine))")
        db.execute("INSERT INTO measurements VALUES ('ort-cpu', 'n', 'f', 'k', 2.0, 0.1, '[2.0, 2.2]', 1.9, 30, 2, 5, "
                   "1.0, '{}', 0)")
    with V.MeasurementCache(p) as c:
        m = c.get("ort-cpu", "n", "f", "k")
        assert (m.median_ms, m.repeat_medians, m.runs, m.repeats) == (2.0, (2.0, 2.2), 30, 2) and math.isnan(m.busy)
        c.put("ort-cpu", "n", "f", "k", V.Measurement(1.0, 0.0, busy=0.5))
        assert c.get("ort-cpu", "n", "f", "k").busy == 0.5 and len(c) == 1  # replaced, not added


def test_store_layer_points_rebuilds_each_configuration(tmp_path):
    from annette_torch.bench.records import INSERTED, LayerRecord
    from annette_torch.bench.store import ConfigResult, Store
    from annette_torch.bench.suites import SUITES
    suite = SUITES["conv_bn_relu"]
    params = suite.configs(n=1, seed=1)[0]
    net = suite.build(params)
    with Store(tmp_path / "s.sqlite") as st:
        run = st.start_run("ort-cpu", "ort-cpu", {}, {})
        layers = [LayerRecord(n, t, "no", time_ms=0.01 * i) for i, (n, t) in
                  enumerate(zip(net.names, net.type_labels()))]  # the input layer: time 0, no point
        layers.append(LayerRecord("reorder", "Reorder", INSERTED, time_ms=0.5))  # no original layer: no point
        st.add(run, "ort-cpu", ConfigResult(suite.name, params["config_id"], params, "ok", layers))
    pts = V.store_layer_points(tmp_path / "s.sqlite", "ort-cpu")
    assert list(pts["type"]) == ["Conv", "BatchNorm", "Relu"]
    assert pts["ops"].tolist() == [float(net.ops[net.index(n)]) for n in ("conv1", "bn1", "relu1")]
    i = net.index("conv1")
    assert pts["bytes"][0] == (net.in_elems[i] + net.out_elems[i] + net.weights[i]) * 4
    assert pts["time_ms"].tolist() == pytest.approx([0.01, 0.02, 0.03])
    assert V.store_layer_points(tmp_path / "s.sqlite", "ort-cpu", suites=["other"])["ops"].size == 0


def test_measure_all_resumes_after_interruption(tmp_path):
    nets = [vnet(f"nb101/{i}", width=8 * (i + 1)) for i in range(4)]
    calls = []

    def fake(v, platform, runs, repeats, warmup):
        calls.append(v.name)
        if v.name == "nb101/2" and len(calls) == 3:
            raise KeyboardInterrupt  # the run is killed while measuring the third network
        return V.Measurement(1.0 + len(v.name), 0.01, (1.0,), 1.0, runs, repeats, warmup, 0.1)

    path = tmp_path / "cache.sqlite"
    with V.MeasurementCache(path) as c:
        with pytest.raises(KeyboardInterrupt):
            V.measure_all(nets, "ort-cpu", c, runs=5, repeats=2, measure=fake)
    assert calls == ["nb101/0", "nb101/1", "nb101/2"]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0] == 2  # finished ones kept
    calls.clear()
    seen = []
    with V.MeasurementCache(path) as c:
        out = V.measure_all(nets, "ort-cpu", c, runs=5, repeats=2, measure=fake,
                            progress=lambda v, m, cached: seen.append((v.name, cached)))
    assert calls == ["nb101/2", "nb101/3"]  # only the missing ones
    assert seen == [("nb101/0", True), ("nb101/1", True), ("nb101/2", False), ("nb101/3", False)]
    assert list(out) == [v.name for v in nets]


def test_measure_all_rounds_keep_each_networks_fastest_pass(tmp_path):
    nets = [vnet("a"), vnet("b", width=16)]
    speeds = iter([3.0, 5.0, 2.0, 6.0, 4.0, 4.0])  # pass 1: a 3, b 5; pass 2: a 2, b 6; pass 3: a 4, b 4
    order = []

    def fake(v, platform, runs, repeats, warmup):
        order.append(v.name)
        t = next(speeds)
        return V.Measurement(t, 0.0, (t,), t, runs, repeats, warmup)

    with V.MeasurementCache(tmp_path / "c.sqlite") as c:
        out = V.measure_all(nets, "ort-cpu", c, runs=5, repeats=1, rounds=3, measure=fake, remeasure_above=None)
        assert order == ["a", "b"] * 3  # passes over all networks, not consecutive repeats
        assert out["a"].median_ms == 2.0 and out["b"].median_ms == 4.0 and out["a"].repeats == 3
        assert c.get("ort-cpu", "a", nets[0].fingerprint, V.machine_key("ort-cpu"), 5, 3).median_ms == 2.0


def test_measure_all_records_failures(tmp_path):
    nets = [vnet("a"), vnet("b", width=16)]

    def fake(v, platform, runs, repeats, warmup):
        if v.name == "a":
            raise RuntimeError("cannot compile\nmore lines")
        return V.Measurement(2.0, 0.0, (2.0,), 2.0, runs, repeats, warmup)

    errors: dict[str, str] = {}
    out = V.measure_all(nets, "ort-cpu", None, measure=fake, errors=errors)
    assert list(out) == ["b"] and errors == {"a": "cannot compile"}


# ------------------------------------------------------------------------------------------------ measuring
def test_measure_latency_tiny_network_ort(monkeypatch):
    pytest.importorskip("onnxruntime")
    monkeypatch.setattr(os, "getloadavg", lambda: (3.25, 0.0, 0.0))  # this process plus 2.25 others
    m = V.measure_latency(tiny_net(), "ort-cpu", runs=5, repeats=2, warmup=1)
    assert m.median_ms > 0 and len(m.repeat_medians) == 2 and m.median_ms == min(m.repeat_medians)
    assert m.spread == pytest.approx((max(m.repeat_medians) - m.median_ms) / m.median_ms)
    assert m.runs == 5 and m.repeats == 2 and m.warmup == 1 and 0 < m.min_ms <= m.median_ms
    assert m.busy == pytest.approx(2.25)


def test_measure_latency_waits_for_this_machines_measuring_lock(monkeypatch, tmp_path):
    """A whole-network measurement takes turns with the sweeps and other measurements on this machine (two
    calibrations at once timed each other's work before); ``lock=False`` is for a caller that holds it."""
    import threading
    from annette_torch.bench.hostlock import MachineLock
    pytest.importorskip("onnxruntime")
    monkeypatch.setenv("ANNETTE_LOCK_DIR", str(tmp_path))
    done: list = []
    other = MachineLock()
    with other.hold():
        t = threading.Thread(target=lambda: done.append(V.measure_latency(tiny_net(), "ort-cpu", runs=2, repeats=1,
                                                                          warmup=0)))
        t.start()
        t.join(1.5)
        assert t.is_alive() and not done  # waiting for the lock another measurement holds
        assert V.measure_latency(tiny_net(), "ort-cpu", runs=2, repeats=1, warmup=0, lock=False).median_ms > 0
    t.join(60)
    other.close()
    assert done and done[0].median_ms > 0


def test_busy_is_the_load_of_other_processes(monkeypatch):
    from annette_torch.validate import measure as M
    monkeypatch.setattr(os, "getloadavg", lambda: (0.4, 0.0, 0.0))
    assert M._busy() == 0.0  # only this process: clamped at zero, never negative

    def no_load_average():
        raise OSError("no load average")
    monkeypatch.setattr(os, "getloadavg", no_load_average)
    assert math.isnan(M._busy())


def test_measurement_sessions_use_the_runners_settings(monkeypatch):
    """measure_latency times with the benchmark runners' session settings (no profiler), and the cache key's
    runtime description is exactly what older caches were written under."""
    ort = pytest.importorskip("onnxruntime")
    options = []
    real = ort.InferenceSession

    def session(model, so, **kw):
        options.append((so, kw))
        return real(model, so, **kw)
    monkeypatch.setattr(ort, "InferenceSession", session)
    V.measure_latency(tiny_net(), "ort-cpu", runs=1, repeats=1, warmup=0)
    (so, kw), = options
    assert kw == {"providers": ["CPUExecutionProvider"]} and not so.enable_profiling
    assert (so.intra_op_num_threads, so.inter_op_num_threads) == (1, 1)
    assert so.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert V.runtime_info("ort-cpu") == {"runtime": "onnxruntime", "version": ort.__version__,
                                         "provider": "CPUExecutionProvider", "threads": 1, "opt_level": "all"}
    assert V.machine_key("ort-cpu") == V.machine_key("ort-cpu") != V.machine_key("openvino-cpu")


def test_openvino_measurement_uses_the_runners_settings(monkeypatch):
    ov = pytest.importorskip("openvino")
    configs = []
    real = ov.Core.compile_model

    def compile_model(self, model, device, config):
        configs.append((device, dict(config)))
        return real(self, model, device, config)
    monkeypatch.setattr(ov.Core, "compile_model", compile_model)
    m = V.measure_latency(tiny_net(), "openvino-cpu", runs=2, repeats=1, warmup=0)
    assert m.median_ms > 0 and m.runs == 2
    assert configs == [("CPU", {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": "1",
                                "INFERENCE_PRECISION_HINT": "f32"})]  # the runner's, without PERF_COUNT
    info = V.runtime_info("openvino-cpu")
    assert {k: v for k, v in info.items() if k != "version"} == {
        "runtime": "openvino", "device": "CPU", "threads": 1, "performance_hint": "LATENCY", "precision": "f32"}


def test_measure_latency_rejects_bad_arguments():
    with pytest.raises(V.ValidationError):
        V.measure_latency(tiny_net(), "zcu102-dnndk")
    with pytest.raises(V.ValidationError):
        V.measure_latency(tiny_net(), "ort-cpu", runs=0)
    with pytest.raises(V.ValidationError):
        V.measure_latency(object(), "ort-cpu")


def test_measurement_from_times():
    m = V.Measurement.from_times(np.array([[1.0, 2.0, 3.0], [1.0, 1.1, 1.2], [2.0, 2.2, 2.4]]), warmup=2)
    assert m.median_ms == pytest.approx(1.1)
    assert m.spread == pytest.approx((2.2 - 1.1) / 1.1)
    assert m.repeat_medians == pytest.approx((2.0, 1.1, 2.2)) and m.min_ms == 1.0 and m.warmup == 2


# ---------------------------------------------------------------------------------------------- comparison
def test_compare_two_hand_made_variants(tmp_path):
    nets = [vnet("zoo/a", "zoo", 8), vnet("ref/b", "reference", 16), vnet("nb101/c", "nb101", 32),
            vnet("nb101/d", "nb101", 64)]
    exact = plat("exact", 1e9)
    slow = plat("slow", 0.5e9)
    slow.save(tmp_path / "slow.json")  # variants may be given as platform files
    from annette_torch import estimate_many
    truth = estimate_many([v.network for v in nets], exact)
    measured = {v.name: V.Measurement(float(t), 0.01 * (i + 1)) for i, (v, t) in enumerate(zip(nets, truth))}
    del measured["nb101/d"]  # not measured: left out
    cmp = V.compare({"exact": exact, "slow": str(tmp_path / "slow.json")}, nets, measured)
    assert cmp.names == ["zoo/a", "ref/b", "nb101/c"] and cmp.variants == ["exact", "slow"]
    assert cmp.metrics("exact")["mape_pct"] == pytest.approx(0.0, abs=1e-9)
    assert cmp.metrics("exact", "real")["n"] == 2 and cmp.metrics("exact", "nb101")["n"] == 1
    s = cmp.metrics("slow")
    assert s["mape_pct"] == pytest.approx(100.0) and s["within10_pct"] == 0.0 and s["spearman"] == pytest.approx(1.0)
    assert cmp.noise_floor("all") == {"n": 3, "median_pct": pytest.approx(2.0), "max_pct": pytest.approx(3.0)}
    assert cmp.rows()[1]["slow"] == pytest.approx(2 * cmp.rows()[1]["exact"])
    assert {(r["variant"], r["group"]) for r in cmp.summary()} == {(v, g) for v in ("exact", "slow")
                                                                    for g in V.GROUPS}
    text = cmp.format()
    assert "exact" in text and "slow" in text and "noise floor" in text and "nb101 (n=1)" in text


# -------------------------------------------------------------------------------------------------- plots
def _png(p):
    data = open(p, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


@pytest.mark.slow
def test_plot_roofline_with_and_without_layers(tmp_path):
    from annette_torch.plots import plot_roofline
    p = Platform("p", {"Base": Roofline(op_s=1e11, bandwidth=1e10, bit_act=32, bit_weights=32),
                       "Conv": Roofline(op_s=2e11, bandwidth=1e10, bit_act=32, bit_weights=32),
                       "Relu": Roofline(op_s=1e11, bandwidth=1e10, bit_act=32, bit_weights=32)})
    _png(plot_roofline(p, path=tmp_path / "bare.png"))
    rng = np.random.default_rng(0)
    ops = 10 ** rng.uniform(5, 9, 50)
    byts = 10 ** rng.uniform(4, 7, 50)
    t = np.maximum(ops / 1e11, byts / 1e10) * 1e3 * rng.uniform(1, 3, 50)
    types = np.where(np.arange(50) % 2 == 0, "Conv", "Relu")
    types[0] = "Reshape"
    ops[0] = 0.0  # no ops: cannot be placed on log axes, counted
    _png(plot_roofline(p, {"ops": ops, "bytes": byts, "time_ms": t, "type": types}, tmp_path / "pts.png"))
    _png(plot_roofline(p, (ops, byts, t), tmp_path / "tuple.png"))
    with pytest.raises(ValueError):
        plot_roofline(p, (ops, byts[:3], t), tmp_path / "bad.png")


@pytest.mark.slow
def test_plot_pred_vs_measured(tmp_path):
    from annette_torch.plots import plot_pred_vs_measured
    rng = np.random.default_rng(1)
    meas = 10 ** rng.uniform(-1, 2, 40)
    data = {v: (meas * rng.normal(1.0, s, 40), meas) for v, s in (("flops", 0.4), ("roofline", 0.2),
                                                                   ("refined", 0.1), ("mixed", 0.03))}
    groups = ["real"] * 15 + ["nb101"] * 25
    _png(plot_pred_vs_measured(data, tmp_path / "pvm.png", groups=groups))
    _png(plot_pred_vs_measured({"one": (meas * 1.05, meas)}, tmp_path / "one.png"))
    with pytest.raises(ValueError):
        plot_pred_vs_measured({}, tmp_path / "none.png")


# ------------------------------------------------------------------------------------------ validation set
@pytest.mark.slow
def test_validation_networks_zoo_deterministic():
    a = V.validation_networks(kinds=("zoo",), check_export=False)
    b = V.validation_networks(kinds=("zoo",), check_export=False)
    names = [v.name for v in a]
    assert names == [v.name for v in b] and len(names) == len(set(names)) >= 13
    assert all(n.startswith("zoo/") for n in names)
    assert "zoo/tiny_cnn" not in names and "zoo/resnet18" in names
    assert [v.fingerprint for v in a] == [v.fingerprint for v in b]


def test_validation_networks_nb101_deterministic():
    a = V.validation_networks(kinds=("nb101",), n_nb101=5, seed=3)
    b = V.validation_networks(kinds=("nb101",), n_nb101=5, seed=3)
    assert [v.name for v in a] == [v.name for v in b] and len(a) == 5
    assert [v.fingerprint for v in a] == [v.fingerprint for v in b]
    assert all(v.kind == "nb101" and v.group == "nb101" for v in a)
    with pytest.raises(V.ValidationError):
        V.validation_networks(kinds=("bogus",))


def test_noisy_networks_are_measured_again_and_merged():
    nets = [vnet("quiet"), vnet("noisy", width=16)]
    n_calls = {"quiet": 0, "noisy": 0}

    def fake(v, platform, runs, repeats, warmup):
        n_calls[v.name] += 1
        if v.name == "noisy" and n_calls["noisy"] == 1:
            return V.Measurement.from_times(np.array([[2.0] * 3, [4.0] * 3, [3.0] * 3]))  # spread 100 %
        return V.Measurement.from_times(np.array([[1.5] * 3, [1.52] * 3, [1.51] * 3]))

    stats: dict[str, int] = {}
    out = V.measure_all(nets, "ort-cpu", None, measure=fake, stats=stats)
    assert n_calls == {"quiet": 1, "noisy": 2}
    assert stats == {"cached": 0, "measured": 2, "remeasured": 1, "failed": 0}
    m = out["noisy"]
    assert m.median_ms == pytest.approx(1.5) and m.repeats == 6 and m.spread == pytest.approx((4.0 - 1.5) / 1.5)
    out = V.measure_all(nets, "ort-cpu", None, measure=fake, remeasure_above=None)
    assert n_calls["noisy"] == 3


def test_layer_signature_ignores_order_and_padding():
    b1, b2 = NetworkBuilder("a"), NetworkBuilder("b")
    for b, order in ((b1, (0, 1)), (b2, (1, 0))):
        x = b.input("x", (1, 3, 16, 16))
        ys = {}
        for k in order:  # two parallel branches, built in different order
            ys[k] = b.conv(f"c{k}", x, 8 * (k + 1), 3, padding=1)
        b.concat("cat", [ys[0], ys[1]])
    a, c = b1.build(), b2.build()
    c.cols["ph"] = np.zeros_like(c.cols["ph"])  # padding stored as 0 (SAME style), same output shapes
    assert V.network_fingerprint(a) != V.network_fingerprint(c)
    assert V.layer_signature(a) == V.layer_signature(c)
    assert V.layer_signature(a) != V.layer_signature(tiny_net())
    d = tiny_net("d")
    e = NetworkBuilder("e")  # the same conv and fc layers without the ReLU
    x = e.input("x", (1, 3, 16, 16))
    x = e.pool("p1", e.conv("c1", x, 8, 3, padding=1), "max", 2, 2)
    e.linear("fc", e.global_pool("gap", x), 10)
    e = e.build()
    assert V.layer_signature(d) != V.layer_signature(e)
    assert V.layer_signature(d, V.WEIGHTED_TYPES) == V.layer_signature(e, V.WEIGHTED_TYPES)


def test_exploding_variant_is_reported_and_plotted(tmp_path):
    from annette_torch.plots import plot_pred_vs_measured
    meas = np.array([1.0, 2.0, 5.0, 10.0])
    pred = np.array([1.1, 2.0, 1e300, np.inf])
    _png(plot_pred_vs_measured({"ok": (meas, meas), "exploding": (pred, meas)}, tmp_path / "x.png"))
    cmp = V.Comparison(["a", "b", "c", "d"], ["zoo", "zoo", "nb101", "nb101"], meas, np.zeros(4),
                       {"exploding": np.array([1.1, 2.0, 1e300, 5.0])})
    line = [ln for ln in cmp.format().splitlines() if ln.startswith("exploding")][0]
    assert "e+" in line and len(line) < 140


@pytest.mark.slow
def test_accuracy_benchmark_interleaves_calibration_networks_evenly(accuracy_benchmark):
    """The accuracy benchmark measures calibration and validation networks in the same passes, spread
    evenly, so a drift of the machine's speed during the run cannot bias the calibration against them."""
    from hypothesis import given, strategies as st

    mod = accuracy_benchmark

    @given(st.integers(0, 120), st.integers(0, 60))
    def check(na, nb):
        a, b = [f"v{i}" for i in range(na)], [f"c{i}" for i in range(nb)]
        out = mod.interleave(a, b)
        assert sorted(out) == sorted(a + b)
        assert [x for x in out if x[0] == "v"] == a and [x for x in out if x[0] == "c"] == b
        if na and nb:  # every stretch of the run holds its share of calibration networks (+-1 per window)
            pos = [i for i, x in enumerate(out) if x[0] == "c"]
            n = na + nb
            for k, p in enumerate(pos):
                assert abs(p - (k + 0.5) * n / nb) <= 1.5

    check()
