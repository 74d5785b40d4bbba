"""Blocked / plain layouts: interpolation taps of a Resize, the layout pass, layout-reorder costs and their fit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import annette_torch as at
from annette_torch.bench.records import INSERTED, NOT_FUSED, LayerRecord
from annette_torch.errors import PlatformError
from annette_torch.fit.data import Measured, layer_samples
from annette_torch.fit.mapping_costs_fit import fit_layout
from annette_torch.ir import LayerType as T, NetworkBuilder
from annette_torch.mapping import MappingModel
from annette_torch.mapping.costs import MappingCosts
from annette_torch.mapping.layout import blocked_layers, layout_reorders
from annette_torch.models import Roofline
from annette_torch.platform import Platform
from annette_torch.prediction import layer_times

ROOT = Path(__file__).resolve().parent.parent
LAYOUT = {"to_plain": (0.001, 0.3, 0.5), "to_blocked": (0.002, 0.2, 1.0)}


def _resize(mode, out=(1, 8, 16, 16), inp=(1, 8, 8, 8)):
    b = NetworkBuilder("r")
    x = b.input("x", inp)
    b.add(T.RESIZE, "up", [x], out, mode=mode)
    return b.build()


@pytest.mark.parametrize("mode, taps", [("nearest", 1), (None, 1), ("bilinear", 2), ("linear", 2), ("bicubic", 4)])
def test_resize_kernel_holds_its_interpolation_taps(mode, taps):
    net = _resize(mode)
    assert (net.kh[1], net.kw[1]) == (taps, taps)
    assert net.ops[1] == 8 * 16 * 16  # an operation per output element, whatever the taps


def test_resize_keeps_one_tap_along_an_axis_it_keeps():
    net = _resize("bilinear", out=(1, 8, 8, 16))
    assert (net.kh[1], net.kw[1]) == (1, 2)
    same = _resize("bilinear", out=(1, 8, 8, 8))
    assert (same.kh[1], same.kw[1]) == (1, 1)


def test_onnx_front_end_reads_the_interpolation_mode():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from annette_torch.frontends.onnx import from_onnx

    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1.0, 1.0, 2.0, 2.0])
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=m, name=f"r_{m}") for m in ("linear",)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])], [scales])
    net = from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    i = net.names.index("r_linear")
    assert net.attr("mode", i) == "linear" and (net.kh[i], net.kw[i]) == (2, 2)
    assert onnx is not None


def _decoder(c=32, hw=16):
    """conv (blocked) -> reshape (plain) -> conv (reads plain: reorder to blocked) -> x2 resize (blocked, graph
    output: reorder to plain); a 3-channel stem reads the plain input directly."""
    b = NetworkBuilder("dec")
    x = b.input("x", (1, 3, hw, hw))
    a = b.conv("stem", x, c, 3, padding=1)
    r = b.add(T.RESHAPE, "view", [a], (1, c, hw, hw))
    y = b.conv("conv", r, c, 1)
    b.add(T.RESIZE, "up", [y], (1, c, 2 * hw, 2 * hw), mode="bilinear")
    return b.build()


def test_layout_pass_finds_the_reorders_at_each_layout_change():
    net = _decoder()
    assert blocked_layers(net).tolist() == [False, True, False, True, True]
    tp, tb = layout_reorders(net)
    assert [net.names[i] for i in np.flatnonzero(tp)] == ["stem", "up"]   # read by the reshape; graph output
    assert [net.names[i] for i in np.flatnonzero(tb)] == ["view"]
    tp_in, _ = layout_reorders(net, outputs=False)
    assert [net.names[i] for i in np.flatnonzero(tp_in)] == ["stem"]
    # the stem reads the RGB input directly: no graph-input reorder even when asked for
    assert not layout_reorders(net, inputs=True)[1][0]


def test_layout_pass_keeps_unaligned_concats_and_fractional_resizes_plain():
    b = NetworkBuilder("cat")
    x = b.input("x", (1, 16, 8, 8))
    p = b.conv("p", x, 16, 1)
    q = b.conv("q", x, 8, 1)
    cat = b.add(T.CONCAT, "cat", [p, q], (1, 24, 8, 8))
    ok = b.add(T.CONCAT, "ok", [p, p], (1, 32, 8, 8))
    frac = b.add(T.RESIZE, "frac", [ok], (1, 32, 12, 12), mode="bilinear")
    b.conv("r", cat, 16, 1)
    b.conv("s", frac, 16, 1)
    net = b.build()
    blocked = dict(zip(net.names, blocked_layers(net)))
    assert blocked["ok"] and not blocked["cat"] and not blocked["frac"]
    tp, tb = layout_reorders(net)
    assert {net.names[i] for i in np.flatnonzero(tp)} == {"p", "q", "ok", "r", "s"}
    assert {net.names[i] for i in np.flatnonzero(tb)} == {"cat", "frac"}


def test_layout_costs_round_trip_and_price_the_reordered_tensors():
    costs = MappingCosts({}, {"Conv": (0.0, 0.1, 0.0)}, {"Conv": (5.0, 0.0, 0.0)}, "o", dict(LAYOUT))
    plat = Platform("p", {"Base": Roofline(op_s=1e11, bandwidth=1e10, bit_act=32, bit_weights=32)},
                    MappingModel([], costs))
    again = Platform.from_dict(json.loads(json.dumps(plat.to_dict())))
    assert again.to_dict() == plat.to_dict() and again.mapping.costs.layout == costs.layout
    net = _decoder()
    mn = plat.mapping.apply(net).network
    t = costs.layout_ms(mn)
    e = 32 * 16 * 16
    assert t[1] == pytest.approx(0.001 + (0.3 * e + 0.5 * e / 32) * 1e-6)      # stem -> plain
    assert t[2] == pytest.approx(0.002 + (0.2 * e + 1.0 * e / 32) * 1e-6)      # view -> blocked
    assert t[4] == pytest.approx(0.001 + (0.3 * 4 * e + 0.5 * 4 * e / 32) * 1e-6)  # the graph output
    assert t[[0, 3]].tolist() == [0.0, 0.0]
    # graph outputs are the layout's: the per-type output table is not added on top
    assert costs.inserted_ms(mn)[4] == 0.0
    full, _ = layer_times(plat, plat.mapping.apply(net))
    bare, _ = layer_times(plat, plat.mapping.apply(net), output_reorders=False)
    assert full[4] - bare[4] == pytest.approx(t[4])


def test_layout_reorders_beyond_a_size_cost_more_per_element():
    over = MappingCosts(layout={"to_plain": (0.0, 0.3, 0.0, 0.2, 1.0)})
    plain = MappingCosts(layout={"to_plain": (0.0, 0.3, 0.0)})
    assert plain.layout["to_plain"] == (0.0, 0.3, 0.0, 0.0, 0.0)
    b = NetworkBuilder("big")
    x = b.input("x", (1, 16, 8, 8))
    y = b.conv("conv", x, 64, 1)
    b.add(T.RESIZE, "up", [y], (1, 64, 256, 256), mode="nearest")  # 4.19M elements, a graph output
    net = MappingModel().apply(b.build()).network
    e = 64 * 256 * 256 * 1e-6
    assert over.layout_ms(net)[2] == pytest.approx(0.3 * e + 0.2 * (e - 1.0))
    assert plain.layout_ms(net)[2] == pytest.approx(0.3 * e)
    again = MappingCosts.from_dict(json.loads(json.dumps(over.to_dict())))
    assert again.layout == over.layout


def test_bad_layout_costs_fail_clearly():
    d = Platform("p", {"Base": Roofline(op_s=1e11, bandwidth=1e10, bit_act=32, bit_weights=32)}).to_dict()
    d["mapping"]["costs"] = {"layout": {"sideways": {"ms": 0, "ms_per_melem": 0, "ms_per_mpixel": 0}}}
    with pytest.raises(PlatformError, match="unknown direction 'sideways'"):
        Platform.from_dict(d, "p.json")
    d["mapping"]["costs"] = {"layout": {"to_plain": {"ms": -1, "ms_per_melem": 0, "ms_per_mpixel": 0}}}
    with pytest.raises(PlatformError, match="layout.to_plain.ms"):
        Platform.from_dict(d, "p.json")


def test_mapping_with_layout_costs_types_blocked_resizes_apart():
    costs = MappingCosts(layout=dict(LAYOUT))
    b = NetworkBuilder("two")
    x = b.input("x", (1, 16, 8, 8))
    y = b.conv("conv", x, 16, 1)
    b.add(T.RESIZE, "after_conv", [y], (1, 16, 16, 16), mode="bilinear")
    r = b.add(T.RESHAPE, "view", [y], (1, 16, 8, 8))
    b.add(T.RESIZE, "after_view", [r], (1, 16, 16, 16), mode="bilinear")
    net = b.build()
    mn = MappingModel([], costs).apply(net).network
    types = dict(zip(mn.names, mn.types))
    assert types["after_conv"] == T.BLOCKED_RESIZE and types["after_view"] == T.RESIZE
    assert MappingModel().apply(net).network.types[net.names.index("after_conv")] == T.RESIZE
    # without a model of its own, a blocked resize takes the Resize model
    rz = Roofline(op_s=1e9, bandwidth=1e9, bit_act=32, bit_weights=32)
    plat = Platform("p", {"Base": Roofline(op_s=1e12, bandwidth=1e12, bit_act=32, bit_weights=32), "Resize": rz},
                    MappingModel([], costs))
    labels = plat.model_labels()
    _, mi = layer_times(plat, plat.mapping.apply(net))
    assert labels[mi[list(mn.names).index("after_conv")]] == "roofline:Resize"


def _measured_decoders(n=60, seed=0, noise=0.0, layout=None, hw=16) -> list[Measured]:
    """Decoder networks "measured" with reorders costed by ``layout`` (default `LAYOUT`), named as ONNX Runtime
    names them."""
    rng = np.random.default_rng(seed)
    costs = MappingCosts(layout=dict(layout or LAYOUT))
    out = []
    for i in range(n):
        net = _decoder(int(rng.choice([16, 32, 64, 128])), hw=int(rng.choice([hw, 2 * hw, 4 * hw])))
        mn = MappingModel().apply(net).network
        recs = {name: LayerRecord(name, T(int(net.types[j])).label, NOT_FUSED, node=name,
                                  time_ms=0.0 if j == 0 else 0.01) for j, name in enumerate(net.names)}
        t = costs.layout_ms(mn) * (1 + noise * rng.standard_normal(len(mn)))
        inserted = [LayerRecord(f"Reorder{k}_token_{j}", f"Reorder{k}", INSERTED, node=f"Reorder{k}_token_{j}",
                                time_ms=float(t[j])) for j, k in ((1, "Output"), (2, "Input"), (4, "Output"))]
        out.append(Measured("dec", str(i), net, recs, inserted))
    return out


def test_fit_layout_recovers_the_reorder_costs_and_layer_samples_leave_them_out():
    ls = layer_samples(_measured_decoders(), MappingModel())
    coefs, rep = fit_layout(ls)
    assert not rep.get("skipped") and rep["mape_over_0_05ms"] < 1e-3
    # (one size per channel count: the fixed and per-pixel terms are told apart, the totals must match)
    got = MappingCosts(layout=coefs)
    want = MappingCosts(layout=dict(LAYOUT))
    for m in _measured_decoders(5, seed=1):
        mn = MappingModel().apply(m.network).network
        assert got.layout_ms(mn).sum() == pytest.approx(want.layout_ms(mn).sum(), rel=1e-3)
    # before: the inner reorders are charged to the reshape; with layout costs nobody carries them
    reshape = ls.network.types == T.RESHAPE
    assert (ls.time_ms[reshape] > 0.01).all()
    ls2 = layer_samples(_measured_decoders(), MappingModel([], MappingCosts(layout=coefs)))
    assert ls2.time_ms[ls2.network.types != T.INPUT] == pytest.approx(0.01)


def test_fit_layout_finds_the_size_beyond_which_reorders_cost_more():
    truth = {"to_plain": (0.0, 0.25, 0.0, 0.3, 8.0), "to_blocked": (0.0, 0.2, 0.0, 0.3, 8.0)}
    ms = _measured_decoders(80, layout=truth, hw=128)  # tensors of 0.26M to 33.6M elements
    coefs, rep = fit_layout(layer_samples(ms, MappingModel()))
    assert not rep.get("skipped") and rep["mape_over_0_05ms"] < 1e-3
    assert coefs["to_plain"][4] == 8.0 and coefs["to_plain"][3] == pytest.approx(0.3, rel=1e-3)
    got, want = MappingCosts(layout=coefs), MappingCosts(layout=truth)
    for m in _measured_decoders(5, seed=1, hw=256):  # (larger than any fitted on)
        mn = MappingModel().apply(m.network).network
        assert got.layout_ms(mn).sum() == pytest.approx(want.layout_ms(mn).sum(), rel=1e-3)
    # with costs linear in the size, no size threshold is taken
    coefs, _ = fit_layout(layer_samples(_measured_decoders(80, hw=128), MappingModel()))
    assert coefs["to_plain"][3:] == (0.0, 0.0)


def test_fit_layout_is_skipped_when_the_reorders_do_not_explain_the_time():
    ms = _measured_decoders()
    for m in ms:  # reorder times unrelated to the tensors
        for r in m.inserted:
            r.time_ms = float(np.random.default_rng(len(m.config_id) + int(m.config_id)).uniform(0.1, 5.0))
    coefs, rep = fit_layout(layer_samples(ms, MappingModel()))
    assert coefs == {} and "MAPE" in rep["skipped"]


def test_quick_plan_sweeps_the_resize_suite_in_both_layouts_and_the_fit_keeps_both():
    from annette_torch.bench.suites import SUITES
    from annette_torch.fit.calibrate import BOTH, PLANS, plan_counts
    from annette_torch.fit.generator import BOTH_LAYOUTS, MIN_SAMPLES

    counts = plan_counts(PLANS["quick"])
    assert set(BOTH) == set(BOTH_LAYOUTS) == {"interp"}
    assert counts["interp"] >= MIN_SAMPLES and counts["interp[lead=dw1]"] == 2 * counts["interp"]
    # behind the lead, the channel counts that fill blocks run blocked: enough of them for a layer model
    cfgs = SUITES["interp"].configs(n=counts["interp[lead=dw1]"], seed=0, options=BOTH["interp"])
    costs = MappingCosts(layout=dict(LAYOUT))
    blocked = sum(int((MappingModel([], costs).apply(SUITES["interp"].build(c)).network.types
                       == T.BLOCKED_RESIZE).any()) for c in cfgs)
    assert blocked >= MIN_SAMPLES


def _measured(suite: str = "interp", layouts=(None, {"lead": "dw1"})) -> list[Measured]:
    """Three configurations of ``suite`` per layout (default: plain, and behind a 1x1 depthwise lead), 0.1 ms per
    layer."""
    from annette_torch.bench.suites import SUITES

    s = SUITES[suite]
    measured = []
    for opts in layouts:
        for c in s.configs(n=3, seed=0, options=opts):
            net = s.build(c)
            recs = {n: LayerRecord(n, T(int(net.types[i])).label, NOT_FUSED, node=n, time_ms=0.0 if i == 0 else 0.1)
                    for i, n in enumerate(net.names)}
            measured.append(Measured(suite, c["config_id"], net, recs, []))
    return measured


def test_without_layout_costs_the_blocked_layout_sweep_stays_out_of_the_layer_models():
    from annette_torch.fit.generator import _mapping_costs

    measured = _measured("interp")
    ls = layer_samples(measured, MappingModel())
    mapping, ls2, rep = _mapping_costs(ls, measured, MappingModel(), 32, 2, 0, lambda _m: None, None)
    assert rep["inserted"]["layout_fit"].get("skipped") and mapping.costs is None
    assert len(ls.configs) == 6 and len(ls2.configs) == 3
    assert not any("lead" in m.network.names for m in ls2.configs)


def test_with_kernel_types_and_no_layout_costs_resizes_of_feature_maps_are_blocked_and_both_sweeps_stay():
    """OpenVINO fits no layout costs, yet upsamples a convolution's output (SegFormer's logits: 21 ms for
    150 x 512 x 512) ~8x faster per element than the plain resizes of its decoder: with ``kernel_types`` a
    resize of a feature map is a BlockedResize there, and the fit keeps the suite's blocked-layout sweep to
    learn it from."""
    from annette_torch.fit.generator import _mapping_costs

    b = NetworkBuilder("two")
    x = b.input("x", (1, 16, 8, 8))
    y = b.conv("conv", x, 16, 1)
    b.add(T.RESIZE, "after_conv", [y], (1, 16, 16, 16), mode="bilinear")
    r = b.add(T.TRANSPOSE, "plain", [y], (1, 8, 8, 16), perm=(0, 2, 3, 1))
    b.add(T.RESIZE, "after_plain", [r], (1, 8, 16, 32), mode="bilinear")
    net = b.build()
    types = dict(zip(net.names, MappingModel(kernel_types=True).apply(net).network.types))
    assert types["after_conv"] == T.BLOCKED_RESIZE and types["after_plain"] == T.RESIZE
    assert not (MappingModel().apply(net).network.types == T.BLOCKED_RESIZE).any()
    measured = _measured("interp")
    mapping = MappingModel(kernel_types=True)
    ls = layer_samples(measured, mapping)
    _, ls2, rep = _mapping_costs(ls, measured, mapping, 32, 2, 0, lambda _m: None, None)
    assert rep["inserted"]["layout_fit"].get("skipped") and len(ls2.configs) == 6
    assert (ls2.network.types == T.BLOCKED_RESIZE).sum() == 3 and (ls2.network.types == T.RESIZE).sum() == 3


def _shuffle_and_tokens():
    """A channel shuffle (concat of a conv's output and a slice of the block input, then reshape -> transpose ->
    reshape), the patch embedding's flatten of a conv output, and token views behind a LayerNorm."""
    b = NetworkBuilder("views")
    x = b.input("x", (1, 24, 8, 8))
    half = b.add(T.SLICE, "half", [x], (1, 12, 8, 8))
    y = b.conv("conv", half, 12, 1)
    cat = b.add(T.CONCAT, "cat", [half, y], (1, 24, 8, 8))
    v = b.add(T.RESHAPE, "shuffle_view", [cat], (1, 2, 12, 8, 8))
    t = b.add(T.TRANSPOSE, "shuffle_t", [v], (1, 12, 2, 8, 8), perm=(0, 2, 1, 3, 4))
    b.add(T.RESHAPE, "shuffle_back", [t], (1, 24, 8, 8))
    f = b.add(T.FLATTEN, "patches", [y], (1, 12, 64, 1))
    ln = b.add(T.LAYER_NORM, "ln", [f], (1, 12, 64, 1))
    b.add(T.RESHAPE, "tokens", [ln], (1, 12, 8, 8))
    return b.build()


def test_a_flatten_of_a_plain_tensor_is_the_reshape_kernel():
    """With ``kernel_types``, a Flatten of a plain tensor (LeViT's flatten of a token projection) runs the view
    kernel a Reshape runs (its own model, fitted when feature-map flattens were Flatten too, priced a copy); a
    Flatten of a feature map is a BlockedReshape; without ``kernel_types`` the types stay."""
    b = NetworkBuilder("tokens")
    x = b.input("x", (1, 196, 128, 1))
    fc = b.add(T.FULLY_CONNECTED, "fc", [x], (1, 196, 256, 1))
    b.add(T.FLATTEN, "flat", [fc], (196, 256, 1, 1))
    y = b.conv("conv", b.input("img", (1, 16, 8, 8)), 16, 1)
    b.add(T.FLATTEN, "patches", [y], (1, 16, 64, 1))
    net = b.build()
    types = dict(zip(*(lambda m: (m.names, m.types))(MappingModel(kernel_types=True).apply(net).network)))
    assert types["flat"] == T.RESHAPE and types["patches"] == T.BLOCKED_RESHAPE
    assert dict(zip(net.names, MappingModel().apply(net).network.types))["flat"] == T.FLATTEN


def test_a_batch_norm_over_token_rows_is_its_own_kernel_and_falls_back_to_the_batch_norm_model():
    """With ``kernel_types``, LeViT's BatchNorm over the token rows after a Linear is a RowBatchNorm (runtimes
    run it as one per-column pass, not per-channel planes); a feature map's BatchNorm and a classifier's
    BatchNorm over one row stay BatchNorm. A file without a RowBatchNorm model prices it with its BatchNorm
    model."""
    from annette_torch.frontends.fx import trace
    from annette_torch.zoo_modern import LinearBN
    mn = MappingModel(kernel_types=True).apply(trace(LinearBN(64, 96).eval(), (1, 49, 64))).network
    assert dict(zip(mn.names, mn.types))["bn"] == T.ROW_BATCH_NORM
    b = NetworkBuilder("cnn")
    y = b.same(T.BATCH_NORM, "map_bn", b.concat("cat", [b.input("a", (1, 8, 4, 4)), b.input("b", (1, 8, 4, 4))]))
    b.same(T.BATCH_NORM, "head_bn", b.add(T.GLOBAL_POOL, "pool", [y], (1, 16, 1, 1)))
    net = b.build()
    types = dict(zip(net.names, MappingModel(kernel_types=True).apply(net).network.types))
    assert types["map_bn"] == types["head_bn"] == T.BATCH_NORM
    assert not (MappingModel().apply(trace(LinearBN(64, 96).eval(), (1, 49, 64))).network.types
                == T.ROW_BATCH_NORM).any()
    import annette_torch as at
    roof = {k: Roofline(op_s=v, bandwidth=v, bit_act=32, bit_weights=32)
            for k, v in (("Base", 1e12), ("BatchNorm", 1e9), ("RowBatchNorm", 1e10))}
    for keys, used in ((("Base", "BatchNorm"), "BatchNorm"), (("Base", "BatchNorm", "RowBatchNorm"), "RowBatchNorm")):
        p = Platform("p", {k: roof[k] for k in keys}, MappingModel(kernel_types=True))
        row = {r["name"]: r for r in at.estimate(LinearBN(64, 96).eval(), p, input_shape=(1, 49, 64)).table()}["bn"]
        assert row["type"] == "RowBatchNorm" and row["model"].split(":")[-1] == used, row


def test_views_of_feature_maps_are_typed_apart_only_where_the_mapping_says_so():
    """OpenVINO runs a view of a plain tensor in place but reorders a blocked feature map first (a channel
    shuffle's reshape copies 0.7 ns per element): with ``kernel_types`` the mapping types such views
    BlockedReshape, the shuffle's included (its concat reads a slice of the block input: one feature-map
    input is enough), while views of the transpose's or a LayerNorm's output stay Reshape."""
    net = _shuffle_and_tokens()
    mn = MappingModel(kernel_types=True).apply(net).network
    types = dict(zip(mn.names, mn.types))
    assert types["shuffle_view"] == T.BLOCKED_RESHAPE and types["patches"] == T.BLOCKED_RESHAPE
    assert types["shuffle_back"] == T.RESHAPE and types["tokens"] == T.RESHAPE
    assert not (MappingModel().apply(net).network.types == T.BLOCKED_RESHAPE).any()
    # the flag is plain data: written only when set, read back, refused when not a boolean
    d = Platform("p", {"Base": Roofline(op_s=1e12, bandwidth=1e12, bit_act=32, bit_weights=32)},
                 MappingModel(kernel_types=True)).to_dict()
    assert d["mapping"]["kernel_types"] is True
    assert Platform.from_dict(d, "p.json").mapping.kernel_types
    assert "kernel_types" not in Platform("p", {"Base": Roofline()}).to_dict()["mapping"]
    d["mapping"]["kernel_types"] = "yes"
    with pytest.raises(PlatformError, match="kernel_types: expected true or false"):
        Platform.from_dict(d, "p.json")


def test_a_layer_run_in_place_pays_no_per_layer_cost_and_is_not_counted_as_executed():
    """The end-to-end calibration's per-layer cost (a runtime's dispatch, or the profiler cost it takes back)
    belongs to layers that run: a view OpenVINO runs in place (an in-place model, no time) neither pays it nor
    counts among the executed layers it is fitted on, so fitting and prediction agree."""
    import annette_torch as at
    from annette_torch.fit.generator import in_place_model
    b = NetworkBuilder("v")
    x = b.input("x", (1, 8, 16, 16))
    y = b.conv("conv", x, 8, 3)
    b.add(T.LAYER_NORM, "ln", [y], (1, 8, 16, 16))
    b.add(T.RESHAPE, "view", [2], (1, 8, 256, 1))
    net = b.build()
    base = Roofline(op_s=1e10, bandwidth=1e9, bit_act=32, bit_weights=32)
    plat = Platform("p", {"Base": base, "Reshape": in_place_model()}, MappingModel(kernel_types=True))
    assert at.estimate(net, plat).terms["executed_layers"] == 2  # conv and LayerNorm; the view runs in place
    d = plat.to_dict()
    d["overhead"] = {"scale": 1.0, "per_layer_ms": 0.01, "per_network_ms": 0.0}
    est = at.estimate(net, Platform.from_dict(d, "p.json"))
    times = {r["name"]: r["time_ms"] for r in est.table()}
    assert times["view"] < 1e-12 and times["ln"] > 0.01


def _pools() -> "Network":
    """Average and max pools of the graph input, of a convolution's map and of a LayerNorm's output (PoolFormer's
    token mixer pools a GroupNorm's)."""
    b = NetworkBuilder("pools")
    x = b.input("x", (1, 64, 56, 56))
    y = b.conv("conv", x, 64, 1)
    ln = b.add(T.LAYER_NORM, "norm", [y], (1, 64, 56, 56))
    for kind in ("avg", "max"):
        for name, src in (("input", x), ("map", y), ("norm", ln)):
            b.pool(f"{kind}_{name}", src, kind, 3, 1)
    return b.build()


def test_pools_of_a_plain_tensor_are_their_own_kernel_only_without_layout_costs():
    """OpenVINO pools a plain tensor ~2.2x slower per element than a convolution's map (1 x 64 x 56 x 56, 3x3
    stride 1: 0.15-0.18 against 0.06-0.08 ms): with kernel types and no layout costs (its files), a pool that
    reads no feature map is a PlainAvgPool / PlainMaxPool; a file with layout costs (ONNX Runtime's) or without
    kernel types keeps the pool types."""
    net = _pools()
    types = dict(zip(net.names, MappingModel(kernel_types=True).apply(net).network.types))
    for kind, plain, same in (("avg", T.PLAIN_AVG_POOL, T.AVG_POOL), ("max", T.PLAIN_MAX_POOL, T.MAX_POOL)):
        assert types[f"{kind}_input"] == types[f"{kind}_norm"] == plain and types[f"{kind}_map"] == same
    for mapping in (MappingModel(), MappingModel([], MappingCosts(layout=dict(LAYOUT)), kernel_types=True)):
        typed = mapping.apply(net).network.types
        assert not np.isin(typed, [T.PLAIN_AVG_POOL, T.PLAIN_MAX_POOL]).any()


@pytest.mark.parametrize("path", ["platforms/openvino-cpu.json",
                                  "platforms/machines/openvino-cpu/intel-r-xeon-r-processor-2c.json"])
def test_a_plain_pool_is_priced_by_its_model_or_else_as_its_pool_type(path):
    net = _pools()
    d = json.loads((ROOT / path).read_text())
    assert {"PlainAvgPool", "PlainMaxPool"} <= set(d["layers"])
    with_plain = at.estimate(net, Platform.from_dict(d, "with"))
    for k in ("PlainAvgPool", "PlainMaxPool"):
        del d["layers"][k]
    without = at.estimate(net, Platform.from_dict(d, "without"))
    t_with, t_without = (dict(zip(e.mapped.network.names, e.mapped_time_ms)) for e in (with_plain, without))
    rows = {r["name"]: r for r in without.table()}
    assert rows["avg_norm"]["model"].endswith(":AvgPool") and rows["max_input"]["model"].endswith(":MaxPool")
    for name in ("avg_map", "max_map"):  # a convolution's map: the pool models either way
        assert t_with[name] == pytest.approx(t_without[name])
    for name in ("avg_input", "avg_norm", "max_input", "max_norm"):  # measured slower than the blocked kernel
        assert t_with[name] > t_without[name]


@pytest.mark.parametrize("platform, swept", [("openvino-cpu", True), ("ort-cpu", False)])
def test_calibrate_sweeps_pools_without_a_lead_where_the_mapping_types_plain_pools(platform, swept):
    from annette_torch.fit.calibrate import LEAD, PLANS, TOKENS_ONLY, plan_counts

    counts = plan_counts(PLANS["quick"], platform)
    for suite in ("maxpool", "avgpool"):
        assert suite in LEAD[platform]  # behind the lead: the blocked kernel of a network's pools
        assert (f"{suite}[lead=none]" in counts) == swept
    # (besides those, a platform adds only its `STYLED` and `TOKENS_ONLY` sweeps)
    assert plan_counts(PLANS["quick"]) == {k: v for k, v in counts.items() if "lead=none" not in k
                                           and "style=" not in k and k not in TOKENS_ONLY.get(platform, ())}


def test_the_pool_sweep_without_a_lead_is_kept_only_for_openvinos_mapping():
    """The lead sweep of a pool suite (the in-network layout) replaces the sweep without it, but for the mapping
    variant of a platform that types pools of a plain tensor apart (`PLAIN_SWEEPS`: openvino-cpu)."""
    from annette_torch.fit.generator import PLAIN_SWEEPS, usable

    ms = _measured("avgpool")
    assert PLAIN_SWEEPS["openvino-cpu"] == ("maxpool", "avgpool")
    assert len(usable(ms, PLAIN_SWEEPS["openvino-cpu"])) == 6
    for plain in ((), PLAIN_SWEEPS.get("ort-cpu", ())):  # (without a mapping; ONNX Runtime's mapping)
        kept = usable(ms, plain)
        assert len(kept) == 3 and all("lead" in m.network.names for m in kept)


def test_under_layout_costs_a_pool_suite_swept_both_ways_keeps_its_lead_sweep_and_one_swept_plain_stays():
    from annette_torch.fit.generator import _mapping_costs

    ms = _measured("avgpool") + _measured("maxpool", (None,))
    mapping = MappingModel()  # (no kernel types: pools are not typed plain)
    _, ls2, _ = _mapping_costs(layer_samples(ms, mapping), ms, mapping, 32, 2, 0, lambda _m: None, None)
    kept = [(m.suite, "lead" in m.network.names) for m in ls2.configs]
    assert kept.count(("avgpool", True)) == 3 and ("avgpool", False) not in kept
    assert kept.count(("maxpool", False)) == 3
