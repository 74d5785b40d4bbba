"""Benchmark suites, samplers, multi-kernel graphs and the ANNETTE template / sweep-table loaders."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from annette_torch.bench import samplers as S
from annette_torch.bench.export import to_onnx
from annette_torch.bench.suites import (GROUPS, MAX_ACT_BYTES, MAX_OPS, MAX_WEIGHT_BYTES, PW_ACTIVATIONS, SUITES, Suite,
                                        SuiteError, config_id, from_annette_template, get_suite, list_suites,
                                        load_sweep_table, multi_kernel)
from annette_torch.errors import AnnetteError
from annette_torch.ir import LayerType as T

SPACE = {"h": [8, 16, 32, 64], "w": [8, 16, 32], "k": [1, 3, 5, 7], "act": ["relu", "gelu"]}  # 96 configs


def key(c):
    return tuple(sorted((k, v) for k, v in c.items() if k != "config_id"))


# --------------------------------------------------------------------------------------------------
# samplers


def test_grid_is_complete_and_ordered():
    g = S.grid(SPACE)
    assert len(g) == S.space_size(SPACE) == 96
    assert len({key(c) for c in g}) == 96
    assert g[0] == {"h": 8, "w": 8, "k": 1, "act": "relu"} and g[1]["act"] == "gelu"  # last key fastest
    with pytest.raises(AnnetteError, match="no allowed values"):
        S.grid({"a": []})


@pytest.mark.parametrize("name", ["random", "sobol", "lhs"])
def test_samplers_deterministic_distinct_sized(name):
    fn = S.SAMPLERS[name]
    a, b, c = fn(SPACE, 40, 0), fn(SPACE, 40, 0), fn(SPACE, 40, 1)
    assert a == b and a != c
    assert len(a) == 40 and len({key(x) for x in a}) == 40
    assert all(x["h"] in SPACE["h"] and x["act"] in SPACE["act"] for x in a)
    assert all(type(x["h"]) is int for x in a)  # plain Python values, not numpy scalars
    full = fn(SPACE, 500, 0)  # more than the space holds: the whole space, once
    assert len(full) == 96 and {key(x) for x in full} == {key(x) for x in S.grid(SPACE)}
    assert fn(SPACE, 0, 0) == []
    with pytest.raises(AnnetteError):
        fn(SPACE, -1, 0)


def test_sobol_prefix_and_balance():
    space = {"a": list(range(8)), "b": list(range(4)), "c": list(range(16)), "d": list(range(1000))}
    long, short = S.sobol(space, 64, seed=5), S.sobol(space, 16, seed=5)
    assert long[:16] == short
    # 64 Sobol points: every value of a power-of-two list gets exactly its share
    for k, m in (("a", 8), ("b", 4), ("c", 16)):
        assert Counter(x[k] for x in long) == {v: 64 // m for v in range(m)}


def test_lhs_stratified():
    space = {"a": list(range(10)), "b": list(range(7)), "c": list(range(700)), "d": list(range(1000))}
    n = 70
    pts = S.lhs(space, n, seed=3)
    assert len(pts) == n
    for k, m in (("a", 10), ("b", 7)):
        counts = Counter(x[k] for x in pts)
        assert set(counts) == set(range(m))
        assert max(counts.values()) - min(counts.values()) <= 2  # n / m each, give or take a stratum edge
    # one point in each of the 70 strata of a 700-value dimension
    assert sorted(x["c"] // 10 for x in pts) == list(range(n))


def test_unrolling_values_sit_around_multiples():
    assert S.unrolling_values(8, 70, [16], width=1) == [16, 17, 32, 33, 48, 49, 64, 65]
    assert S.unrolling_values(8, 70, [16], width=2) == [15, 16, 17, 18, 31, 32, 33, 34, 47, 48, 49, 50, 63, 64,
                                                        65, 66]
    vals = S.unrolling_values(1, 100, [8, 12], width=2)
    assert all(min(abs(v - 8 * k) for k in range(14)) <= 2 or min(abs(v - 12 * k) for k in range(10)) <= 2
               for v in vals)
    space = {"c": [8, 16, 32, 64, 128, 256], "f": [8, 512], "k": [1, 3]}
    cfgs = S.unrolling_aware(space, {"c": [32]}, n=50, seed=0)
    assert cfgs == S.unrolling_aware(space, {"c": [32]}, n=50, seed=0)
    assert len(cfgs) == len({key(c) for c in cfgs}) == 50
    for c in cfgs:
        r = c["c"] % 32
        assert r in (0, 1, 2, 31) and 8 <= c["c"] <= 256  # both sides of each multiple of 32, in range
        assert c["f"] in (8, 512) and c["k"] in (1, 3)  # other dimensions from the space
    sides = Counter("below" if c["c"] % 32 in (31, 0) else "above" for c in cfgs)
    assert sides["below"] > 5 and sides["above"] > 5
    with pytest.raises(AnnetteError, match="not in the space"):
        S.unrolling_aware(space, {"x": [4]}, 5)
    with pytest.raises(AnnetteError, match="no multiple"):
        S.unrolling_aware({"c": [3, 5]}, {"c": [64]}, 5)


def _min_dist(cfgs):
    x = np.array([[math.log2(c["h"]), math.log2(c["w"])] for c in cfgs])
    d = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    return d[np.triu_indices(len(x), 1)].min()


def test_order_space_filling():
    space = {"h": [2 ** i for i in range(10)], "w": [2 ** i for i in range(10)]}
    g = S.grid(space)
    order = S.order_space_filling(g + g[:5], seed=0)  # duplicates dropped
    assert len(order) == 100 and {key(c) for c in order} == {key(c) for c in g}
    assert order == S.order_space_filling(g, seed=0)
    assert S.order_space_filling(g, seed=1) != order
    # every prefix is spread out: far better than the grid's own order, as good as the best of random orders
    rng = np.random.default_rng(0)
    for m in (4, 9, 16):
        assert _min_dist(order[:m]) > _min_dist(g[:m])
        best_random = max(_min_dist([g[i] for i in rng.permutation(100)[:m]]) for _ in range(20))
        assert _min_dist(order[:m]) >= best_random * 0.99
    mixed = S.order_space_filling([{"a": 1, "act": "relu"}, {"a": 1, "act": "gelu"}, {"a": 2, "act": "relu"}])
    assert len(mixed) == 3


# --------------------------------------------------------------------------------------------------
# suites


def session_ok(model: onnx.ModelProto) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


MICRO = ["conv", "conv_odd", "dwconv", "gconv", "gconv_same", "maxpool", "avgpool", "fc", "add", "eltwise_const",
         "concat", "slice", "reduce", "act", "bn", "resize", "convtranspose", "linear", "matmul", "softmax",
         "layernorm", "gelu", "heads", "pick", "interp", "dilconv"]
MULTI = ["conv_bn_relu", "conv_pool", "preact", "residual", "concat_branches", "dwsep", "conv_act", "dw_act", "stem", "shuffle",
         "se", "conv_mul", "stride_prop", "head", "gconv_bn_relu", "pw_act", "cold_weights", "attention", "mlp",
         "convnext", "window_attention", "linear_bn", "pad_conv", "fc_act"]


#: the listing order of the suites (``annette bench --list``, calibration sweeps)
ORDER = ["conv", "conv_odd", "dwconv", "gconv", "gconv_same", "convtranspose", "maxpool", "avgpool", "fc", "fc_act",
         "add", "eltwise_const", "concat", "slice", "reduce", "act", "bn", "resize", "linear", "matmul", "softmax",
         "layernorm", "gelu", "heads", "pick", "interp", "dilconv", "conv_bn_relu", "conv_pool", "preact", "residual",
         "concat_branches", "pad_conv", "dwsep", "conv_act", "pw_act", "conv_mul", "stride_prop", "dw_act", "stem",
         "shuffle", "se", "gconv_bn_relu", "head", "attention", "mlp", "convnext", "window_attention", "linear_bn",
         "cold_weights", "paper_conv"]


def test_suite_names_order_and_lookup():
    assert list(SUITES) == ORDER
    assert set(MICRO + MULTI) | {"paper_conv"} == set(SUITES)
    assert get_suite("se") is SUITES["se"]
    with pytest.raises(SuiteError, match="unknown suite 'nope'; choose from conv, conv_odd, dwconv"):
        get_suite("nope")
    # the grouped-convolution suites sweep one list of group counts
    assert SUITES["gconv"].space["g"] == SUITES["gconv_same"].space["g"] == SUITES["gconv_bn_relu"].space["g"] == GROUPS


@pytest.mark.slow
def test_suite_registry():
    assert set(MICRO + MULTI) | {"paper_conv"} == set(SUITES)
    assert all(SUITES[s].kind == "micro" for s in MICRO) and all(SUITES[s].kind == "multi" for s in MULTI)
    listing = list_suites()
    assert set(listing) == set(SUITES)
    for name in MICRO + MULTI:
        assert f"{SUITES[name].count():,} configs" in listing[name]
        assert 0 < SUITES[name].count() <= S.space_size(SUITES[name].space)


@pytest.mark.slow
def test_stored_counts_equal_the_enumeration():
    """counts.json (what --list shows) holds every grid suite's count for its current space and caps, equal to
    enumerating the grid (regenerate with scripts/suite_counts.py after changing a suite)."""
    from annette_torch.bench.suites.counts import stored_count
    for name, suite in SUITES.items():
        if suite.default_sampler == "table":
            continue
        stored = stored_count(name, suite.count_fingerprint())
        assert stored is not None, f"{name}: counts.json is out of date; run scripts/suite_counts.py"
        assert stored == Suite(**{**suite.__dict__, "_counts": {}}).count(stored=False), name
        assert suite.count() == stored


def test_a_changed_space_is_counted_not_looked_up():
    conv = SUITES["conv"]
    small = Suite("conv", conv.description, {**conv.space, "h": [8], "w": [8]}, conv.builder, cost=conv.cost,
                  optional=conv.optional)
    assert small.count() == small.count(stored=False) == len(small.configs(sampler="grid")) < conv.count()


@pytest.mark.slow
def test_bench_list_runs_from_the_stored_counts():
    """`annette bench --list` in a fresh interpreter (its speed: benchmarks/estimator_speed.py)."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "annette_torch.cli.app", "bench", "--list"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "gconv" in r.stdout


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "cold_weights" else n
                                  for n in MICRO + MULTI])
def test_suite_builds_exports_and_runs(name):
    suite = SUITES[name]
    cfgs = suite.configs(n=12, seed=0)
    assert len(cfgs) == 12 and len({c["config_id"] for c in cfgs}) == 12
    assert cfgs == suite.configs(n=12, seed=0)
    for c in cfgs:
        net = suite.build(c)
        assert net.name == f"{name}-{c['config_id']}"
        # analytic caps agree with the built network and are respected
        cols = {k: np.array([v], dtype=object if isinstance(v, str) else np.int64)
                for k, v in {**suite.optional, **c}.items() if k != "config_id"}
        ops, act, wts = (float(np.asarray(v).reshape(-1)[0]) for v in suite.cost(cols))
        assert ops == pytest.approx(net.total_ops, rel=1e-9)
        assert act == pytest.approx(float(net.out_elems.sum()), rel=1e-9)
        assert wts == pytest.approx(net.total_weights, rel=1e-9)
        assert net.total_ops <= MAX_OPS and 4 * net.out_elems.sum() <= suite.max_act_bytes
        assert 4 * net.total_weights <= suite.max_weight_bytes
        assert suite.max_weight_bytes == MAX_WEIGHT_BYTES or name in ("cold_weights", "fc")
        assert suite.max_act_bytes == MAX_ACT_BYTES or name in ("interp", "cold_weights")
    # the first few export and load in ONNX Runtime; the smallest one runs
    small = min(cfgs, key=lambda c: suite.build(c).total_ops)
    for c in cfgs[:2] + [small]:
        model = to_onnx(suite.build(c))
        onnx.checker.check_model(model)
        sess = session_ok(model)
    rng = np.random.default_rng(0)
    model = to_onnx(suite.build(small))
    sess = session_ok(model)
    outs = sess.run(None, {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim],
                                                       dtype=np.float32) for i in model.graph.input})
    assert all(np.isfinite(o).all() for o in outs)


def test_layer_names_readable():
    names = {s: SUITES[s].build(SUITES[s].configs(n=1)[0]).names for s in ("conv", "maxpool", "bn", "fc")}
    assert names == {"conv": ["x", "conv"], "maxpool": ["x", "pool"], "bn": ["x", "bn"], "fc": ["x", "fc"]}
    res = SUITES["residual"].build({"hw": 16, "c": 16, "f": 32, "k": 3, "s": 2, "shortcut": "projection"})
    assert res.names == ["x", "conv1", "bn1", "relu1", "conv2", "bn2", "proj", "proj_bn", "add", "relu2"]
    dws = SUITES["dwsep"].build({"hw": 16, "c": 16, "f": 32, "k": 3, "s": 1})
    assert dws.type_labels() == ["Input", "DepthwiseConv", "BatchNorm", "Relu6", "Conv", "BatchNorm", "Relu6"]
    act = SUITES["conv_act"].build({"hw": 8, "c": 8, "f": 8, "k": 3, "act": "silu"})
    assert act.names == ["x", "conv", "silu"] and act.type_labels()[-1] == "SiLU"
    chain = SUITES["conv_bn_relu"].build({"hw": 32, "c": 8, "f": 16, "k": 3, "s": 2, "depth": 3})
    assert chain.names[1:4] == ["conv1", "bn1", "relu1"] and chain.out_shape(len(chain) - 1) == (1, 16, 16, 16)
    g = SUITES["gconv"].build({"h": 8, "w": 8, "c": 32, "f": 64, "g": 4, "k": 3, "s": 1})
    assert g.type_labels()[1] == "GroupConv" and int(g.groups[1]) == 4


def test_config_ids_stable():
    """Config ids and the sampled configs are part of stored data: they must never change."""
    assert config_id({"b": 2, "a": 1}) == config_id({"a": 1, "b": 2}) == config_id({"a": 1, "b": 2, "config_id": "x"})
    assert config_id({"a": 1, "b": 2}) == "4acc71e054"
    assert SUITES["conv"].configs(n=1, seed=0) == [{"h": 128, "w": 192, "c": 51, "f": 51, "k": 1, "s": 2,
                                                    "config_id": "02ebe4314a"}]
    ids = {name: [c["config_id"] for c in SUITES[name].configs(n=3, seed=0)] for name in ("conv", "gconv", "se")}
    assert ids == {"conv": ["02ebe4314a", "0d93fee1ba", "38b9d1d787"], "gconv": ["3ee74d1be6", "03a6a50d0f",
                   "10b3ed0ce8"], "se": ["941041cfd2", "1fb55777a3", "7add259970"]}
    tailed = SUITES["conv_act"].configs(n=1, seed=0, options={"tail": "dw1"})
    assert tailed == [{"hw": 1, "c": 43, "f": 171, "k": 5, "act": "hardswish", "tail": "dw1",
                       "config_id": "a81d7b83da"}]
    assert SUITES["conv_act"].build(tailed[0]).name == "conv_act-a81d7b83da"


@pytest.mark.slow
def test_sampler_options():
    conv = SUITES["conv"]
    grid = conv.configs(sampler="grid", n=10)
    assert len(grid) == 10 and grid[0]["config_id"] == config_id({k: v for k, v in grid[0].items()
                                                                  if k != "config_id"})
    assert len(conv.configs(sampler="lhs", n=20, seed=2)) == 20
    assert len(conv.configs(sampler="random", n=20, seed=2)) == 20
    unrolled = conv.configs(sampler="unrolling", n=20, steps={"c": [16], "f": [16]}, width=1)
    assert len(unrolled) == 20 and all(c["c"] % 16 in (0, 1) and c["f"] % 16 in (0, 1) for c in unrolled)
    conv.build(unrolled[0])  # values outside the space's lists build fine
    assert len(SUITES["fc"].configs(sampler="grid")) == SUITES["fc"].count()
    uncapped = SUITES["residual"].configs(sampler="grid", capped=False)
    assert len(uncapped) == SUITES["residual"].count(capped=False) > SUITES["residual"].count()
    with pytest.raises(SuiteError, match="unknown sampler"):
        conv.configs(sampler="nope")
    with pytest.raises(SuiteError, match="lacks"):
        conv.build({"h": 8})
    with pytest.raises(SuiteError, match="unknown keys"):
        conv.build({"h": 8, "w": 8, "c": 8, "f": 8, "k": 3, "s": 1, "bogus": 1})


def test_infeasible_configs_skipped():
    big = Suite("big", "test", {"h": [8, 4096], "c": [8]}, SUITES["bn"].builder, cost=lambda c: (
        c["h"] * 0, c["h"] * c["h"] * c["c"] * 10, c["h"] * 0))
    assert big.count() == 1 and len(big.configs(n=5)) == 1


def test_multi_kernel():
    nets = [SUITES["conv"].build({"h": 16, "w": 16, "c": 8, "f": 8, "k": 3, "s": 1}),
            SUITES["act"].build({"h": 8, "w": 8, "c": 8, "act": "leaky"}),
            SUITES["add"].build({"h": 8, "w": 8, "c": 4})]
    mk = multi_kernel(nets)
    assert mk.names == ["k0/x", "k0/conv", "k1/x", "k1/leaky", "k2/x0", "k2/x1", "k2/add"]
    assert mk.total_ops == pytest.approx(sum(n.total_ops for n in nets))
    assert mk.attr("alpha", 3) == 0.01
    owner = np.repeat(np.arange(3), [len(n) for n in nets])
    assert all(owner[s] == owner[d] for s, d in mk.edges.tolist())  # nothing connects two kernels
    model = to_onnx(mk)
    assert [i.name for i in model.graph.input] == ["k0/x", "k1/x", "k2/x0", "k2/x1"]
    assert [o.name for o in model.graph.output] == ["k0/conv", "k1/leaky", "k2/add"]
    sess = session_ok(model)
    assert len(sess.run(None, {i.name: np.zeros([d.dim_value for d in i.type.tensor_type.shape.dim], np.float32)
                               for i in model.graph.input})) == 3
    with pytest.raises(AnnetteError):
        multi_kernel([])


# --------------------------------------------------------------------------------------------------
# ANNETTE templates and sweep tables (reference data)


CFG = {"width": 32, "height": 24, "channels": 16, "filters": 40, "k_size": 3, "stride": 2, "batch_size": 1,
       "dilation": 1}


def _template(ref_dir, name):
    return ref_dir / "graphs" / "templates" / "micro-kernel" / f"{name}.json"


def test_template_conv2d(ref_dir):
    net = from_annette_template(_template(ref_dir, "conv2d"), CFG)
    assert net.type_labels() == ["Input", "Conv"]
    # NHWC positions of the template: [batch_size, width, height, channels] -> H = width
    assert net.out_shape(0) == (1, 16, 32, 24)
    assert net.out_shape(1) == (1, 40, 16, 12)  # SAME: ceil(size / stride)
    assert (int(net.kh[1]), int(net.sh[1]), int(net.ph[1]), int(net.pw[1])) == (3, 2, 1, 1)
    assert net.total_ops == 2 * 40 * 16 * 12 * 16 * 9
    valid = from_annette_template(_template(ref_dir, "conv2d"), {**CFG, "stride": 1}, padding="valid")
    assert valid.out_shape(1) == (1, 40, 30, 22)
    same = from_annette_template("conv2d", {**CFG, "k_size": 5, "stride": 1})  # by name, defaults filled
    assert same.out_shape(1) == (1, 40, 32, 24) and int(same.ph[1]) == 4
    session_ok(to_onnx(net))


def test_template_dw_pool_fc(ref_dir):
    dw = from_annette_template(_template(ref_dir, "dw-conv2d"), CFG)
    assert dw.type_labels() == ["Input", "DepthwiseConv"] and dw.out_shape(1) == (1, 16, 16, 12)
    assert int(dw.groups[1]) == 16
    mp = from_annette_template(_template(ref_dir, "max-pool2d"), {**CFG, "k_size": 2})
    assert mp.type_labels() == ["Input", "MaxPool"] and mp.out_shape(1) == (1, 16, 16, 12)
    ap = from_annette_template(_template(ref_dir, "max-pool2d"), {**CFG, "k_size": 3, "stride": 1}, padding="valid")
    assert ap.out_shape(1) == (1, 16, 30, 22)
    fc = from_annette_template(_template(ref_dir, "fully-connected"), {"channels": 256, "filters": 10,
                                                                       "batch_size": 4})
    assert fc.type_labels() == ["Input", "FullyConnected"]
    assert fc.in_shape(1) == (4, 256, 1, 1) and fc.out_shape(1) == (4, 10, 1, 1)
    assert fc.total_ops == 2 * 4 * 256 * 10
    for net in (dw, mp, fc):
        session_ok(to_onnx(net))


def test_templates_all_load(ref_dir):
    for path in sorted((ref_dir / "graphs" / "templates").rglob("*.json")):
        net = from_annette_template(path, CFG)
        assert "Unknown" not in net.type_labels(), path.name
        session_ok(to_onnx(net))
    convnet = from_annette_template(ref_dir / "graphs/templates/multi-layer/annette_convnet.json", CFG)
    i = convnet.index("concat")
    assert convnet.out_shape(i)[1] == 2 * CFG["channels"]
    with pytest.raises(SuiteError, match="filters"):
        from_annette_template(_template(ref_dir, "conv2d"), {"width": 8, "height": 8, "channels": 3, "k_size": 3})
    with pytest.raises(SuiteError, match="no such file"):
        from_annette_template("no-such-template", CFG)


def test_load_sweep_table(ref_dir):
    rows = load_sweep_table(ref_dir / "benchmark-configs" / "paper35k.csv")
    assert len(rows) == 34993
    assert set(rows[0]) == {"width", "height", "channels", "filters", "k_size", "batch_size"}
    assert rows[0] == {"width": 8, "height": 8, "channels": 3, "filters": 3, "k_size": 1, "batch_size": 1}
    assert {r["k_size"] for r in rows} == {1, 3, 5, 7}
    sweep = load_sweep_table(ref_dir / "benchmark-configs" / "config_sweep_v2.csv")
    assert {"stride", "dilation"} <= set(sweep[0])
    net = from_annette_template(_template(ref_dir, "conv2d"), sweep[100])
    assert net.type_labels() == ["Input", "Conv"]


def test_paper_conv_suite(ref_dir, monkeypatch):
    monkeypatch.setenv("ANNETTE_REFERENCE_DIR", str(ref_dir))
    suite = SUITES["paper_conv"]
    rows = suite.configs()
    assert 0 < len(rows) == suite.count() < 34993  # rows beyond the size caps are skipped
    assert len(suite.configs(capped=False)) == 34993
    assert rows[0] == {"h": 8, "w": 8, "c": 3, "f": 3, "k": 1, "s": 1, "config_id": rows[0]["config_id"]}
    net = suite.build(rows[-1])
    assert net.name.startswith("paper_conv-") and net.type_labels() == ["Input", "Conv"]
    assert len(suite.configs(sampler="sobol", n=5)) == 5


@pytest.mark.parametrize("name", ["conv_act", "pw_act", "dw_act", "stem"])
def test_tail_option_puts_a_layer_behind_the_activation(name):
    """``tail="dw1"``: a 1x1 depthwise conv reads the activation, so it is no graph output (ONNX Runtime fuses a
    HardSwish into its convolution only then); the analytic cost counts it, ids differ from the plain config."""
    suite = SUITES[name]
    plain = suite.configs(n=4, seed=0)
    tailed = suite.configs(n=4, seed=0, options={"tail": "dw1"})
    assert [c["config_id"] for c in plain] != [c["config_id"] for c in tailed]
    for p, c in zip(plain, tailed):
        a, b = suite.build(p), suite.build(c)
        assert len(b) == len(a) + 1 and b.names[-1] == "tail" and b.types[-1] == T.DEPTHWISE_CONV
        act = b.index("act") if "act" in b.names else b.index(str(c["act"]))
        assert b.n_outputs[act] == 1 and a.n_outputs[-1] == 0
        cols = {k: np.array([v], dtype=object if isinstance(v, str) else np.int64)
                for k, v in {**suite.optional, **c}.items() if k != "config_id"}
        ops, act_e, wts = (float(np.asarray(v).reshape(-1)[0]) for v in suite.cost(cols))
        assert (ops, act_e, wts) == (pytest.approx(b.total_ops), pytest.approx(float(b.out_elems.sum())),
                                     pytest.approx(b.total_weights))
    with pytest.raises(SuiteError, match="tail must be one of"):
        suite.build({**{k: v for k, v in plain[0].items() if k != "config_id"}, "tail": "conv"})


def test_pw_act_sweeps_pointwise_convs_with_every_mobile_activation():
    """The pointwise suite: all 1x1 convs (stride 1), its activations spread evenly over the sample."""
    cfgs = SUITES["pw_act"].configs(n=40, seed=0)
    assert {c["k"] for c in cfgs} == {1}
    counts = {a: sum(c["act"] == a for c in cfgs) for a in PW_ACTIVATIONS}
    assert min(counts.values()) >= 8, counts
    net = SUITES["pw_act"].build(cfgs[0])
    assert net.type_labels()[:2] == ["Input", "Conv"] and int(net.kh[1]) == 1


def test_conv_odd_draws_the_part_filled_widths_the_conv_suite_lacks():
    """conv_odd: every draw's output width ends a 16-wide block part-filled (17 -> 2 blocks, 1 of 16 used), which
    the conv suite's sizes almost never do; the quick plan sweeps it, on OpenVINO behind the lead as conv."""
    from annette_torch.bench.suites.values import ODD_SPATIAL
    from annette_torch.fit.calibrate import PLANS, plan_counts, suite_options
    odd = SUITES["conv_odd"].configs(n=PLANS["quick"].configs_micro, seed=0)
    outs = {(c["w"] - 1) // c["s"] + 1 for c in odd}
    assert len(outs) >= 8 and sum(w % 8 != 0 for w in outs) >= 6, outs
    assert {c["w"] for c in odd} <= set(ODD_SPATIAL)
    plain = SUITES["conv"].configs(n=PLANS["quick"].configs_micro, seed=0)
    assert not {c["w"] for c in plain} & set(ODD_SPATIAL)
    assert plan_counts(PLANS["quick"])["conv_odd"] == PLANS["quick"].configs_micro
    assert suite_options("openvino-cpu", "conv_odd") == suite_options("openvino-cpu", "conv") == {"lead": "dw1"}
    assert SUITES["conv_odd"].build(odd[0]).type_labels() == ["Input", "Conv"]


def test_calibration_measures_onnx_runtime_activations_behind_a_tail():
    from annette_torch.fit.calibrate import MULTI, suite_options
    assert {"se", "conv_mul"} <= set(MULTI)
    assert suite_options("ort-cpu", "conv_act") == suite_options("ort-cpu", "pw_act") == {"tail": "dw1"}
    assert suite_options("ort-cpu", "dwconv") == {"lead": "dw1"}
    assert suite_options("openvino-cpu", "conv_act") is None
    assert suite_options("openvino-cpu", "conv") == {"lead": "dw1"}


def test_cold_weights_reaches_dram_traffic_and_samples_fc_as_often_as_convs():
    """The quick plan's cold_weights draws: FC at any s (s only rounds the pooled input), a third of the
    draws, some with tens of MB of weights; and pools streaming beyond 48 MB, up to the suite's own cap."""
    from annette_torch.fit.calibrate import PLANS
    suite = SUITES["cold_weights"]
    cfgs = suite.configs(n=PLANS["quick"].configs_context, seed=0)
    kinds = Counter(c["layer"] for c in cfgs)
    assert kinds["fc"] >= len(cfgs) // 4, kinds
    assert {c["s"] for c in cfgs if c["layer"] == "fc"} > {1}
    assert max(4 * c["c"] * c["f"] for c in cfgs if c["layer"] == "fc") >= 64 * 2**20
    big = [c for c in cfgs if c["flush"] >= 160]
    assert len(big) >= 8
    net = suite.build(max(big, key=lambda c: c["flush"]))
    inp = 4 * net.cols["c_in"][0] * net.cols["h_in"][0] * net.cols["w_in"][0]
    assert 200 * 2**20 < inp <= suite.max_act_bytes and suite.max_act_bytes > MAX_ACT_BYTES
    fc = suite.build({"layer": "fc", "c": 256, "f": 128, "s": 7, "flush": 4})
    assert fc.type_labels()[-2:] == ["GlobalPool", "FullyConnected"] and fc.cols["h_out"][-1] == 1
