"""Mapping costs: fused-layer work and inserted reorders — format, estimation, and fitting from known data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from annette_torch.bench.records import FUSED, INSERTED, NOT_FUSED, LayerRecord
from annette_torch.bench.suites import SUITES
from annette_torch.errors import PlatformError
from annette_torch.fit.data import Measured, layer_samples
from annette_torch.fit.mapping_costs_fit import fit_fused_costs, fit_inserted
from annette_torch.ir import LayerType as T, NetworkBuilder
from annette_torch.mapping import FusionRule, MappingModel
from annette_torch.mapping.costs import MappingCosts
from annette_torch.models import LayerFeatures, Roofline
from annette_torch.platform import Platform
from annette_torch.prediction import layer_times

CONV = Roofline(op_s=5e10, bandwidth=2e10, bit_act=32, bit_weights=32)
TRUE_NS = {"Relu": 0.02, "SiLU": 0.3, "GELU": 0.25, "Sigmoid": 0.2}
TRUE_IN = (0.01, 0.2, 0.9)   # reorder of a graph input into a conv: ms, ms/Melem, ms/Mpixel
TRUE_OUT = (0.0, 0.3, 0.0)   # of a conv's output that is a graph output
ACT_RULE = FusionRule("ConvAct", ("Conv",), ("Relu", "SiLU", "GELU", "Sigmoid", "BatchNorm"))


def _costs() -> MappingCosts:
    return MappingCosts(dict(TRUE_NS), {"Conv": TRUE_IN}, {"Conv": TRUE_OUT})


def _stem(c=3, hw=56, act=T.SILU, f=16, s=1):
    b = NetworkBuilder("stem")
    x = b.input("x", (1, c, hw, hw))
    y = b.conv("conv", x, f, 3, s, padding=1)
    y = b.same(T.BATCH_NORM, "bn", y)
    if act is not None:
        b.same(act, "act", y)
    return b.build()


def test_costs_round_trip_and_estimate():
    plat = Platform("p", {"Base": CONV}, MappingModel([ACT_RULE], _costs()))
    again = Platform.from_dict(json.loads(json.dumps(plat.to_dict())))
    assert again.to_dict() == plat.to_dict()
    net = _stem()
    mapped = plat.mapping.apply(net)
    assert mapped.network.names == ["x", "conv"]
    e = 16 * 56 * 56
    assert mapped.fused_ms[1] == pytest.approx(e * 0.3e-6)        # SiLU work; BatchNorm free
    t, _ = layer_times(plat, mapped)
    bare, _ = layer_times(Platform("p", {"Base": CONV}, MappingModel([ACT_RULE])), mapped)
    x_elems = 3 * 56 * 56
    assert t[0] - bare[0] == pytest.approx(0.01 + (0.2 * x_elems + 0.9 * x_elems / 3) * 1e-6)
    assert t[1] - bare[1] == pytest.approx(e * 0.3e-6 + 0.3 * e * 1e-6)
    t_none, _ = layer_times(plat, mapped, input_reorders=False, output_reorders=False)
    assert t_none[0] == pytest.approx(bare[0]) and t_none[1] == pytest.approx(bare[1] + e * 0.3e-6)


@pytest.mark.parametrize("bad, msg", [
    ({"fused_ns": {"SiLU": -1}}, "fused_ns.SiLU"),
    ({"fused_ns": {"Nope": 1}}, "unknown layer type"),
    ({"inserted_input": {"Conv": {"ms": 0.1}}}, "inserted_input.Conv.ms_per_melem"),
    ({"inserted_output": []}, "inserted_output"),
    ("x", "mapping.costs"),
])
def test_bad_costs_fail_clearly(bad, msg):
    d = Platform("p", {"Base": CONV}, MappingModel([ACT_RULE])).to_dict()
    d["mapping"]["costs"] = bad
    with pytest.raises(PlatformError, match=msg):
        Platform.from_dict(d, "p.json")


def _measured(n=300, seed=0) -> list[Measured]:
    """Stem configurations "measured" on a toolchain that fuses conv+bn+act, with known extra costs."""
    rng = np.random.default_rng(seed)
    acts = [T.RELU, T.SILU, T.GELU, T.SIGMOID, None]
    costs = _costs()
    out = []
    for i in range(n):
        c, hw, act = int(rng.choice([1, 3, 16, 32])), int(rng.choice([28, 56, 112])), acts[i % len(acts)]
        net = _stem(c, hw, act, f=int(rng.choice([8, 16, 32])), s=int(rng.choice([1, 2])))
        conv = 1
        t_conv = float(CONV.predict(LayerFeatures.from_network(net, np.array([conv])))[0])
        recs = {"x": LayerRecord("x", "Input", NOT_FUSED),
                "bn": LayerRecord("bn", "BatchNorm", FUSED, "conv")}
        if act is not None:
            t_conv += net.out_elems[3] * TRUE_NS[act.label] * 1e-6
            recs["act"] = LayerRecord("act", act.label, FUSED, "conv")
        recs["conv"] = LayerRecord("conv", "Conv", NOT_FUSED, time_ms=t_conv)
        ins = float(costs.inserted_ms(MappingModel([ACT_RULE]).apply(net).network).sum())
        mn = MappingModel([ACT_RULE]).apply(net).network
        t_in = float(costs.inserted_ms(mn, outputs=False).sum())
        inserted = [LayerRecord("x_abcd_acdb_conv", "Reorder", INSERTED, node="x_abcd_acdb_conv", time_ms=t_in),
                    LayerRecord("conv_acdb_abcd", "Reorder", INSERTED, node="conv_acdb_abcd", time_ms=ins - t_in)]
        out.append(Measured("stem", str(i), net, recs, inserted))
    return out


def test_fit_recovers_fused_and_inserted_costs():
    measured = _measured()
    mapping = MappingModel([ACT_RULE])
    ls = layer_samples(measured, mapping)
    # first pass: the bare conv model; groups with nothing but a BatchNorm fused are the baseline
    fused, rep = fit_fused_costs(ls, Platform("first", {"Base": CONV}, mapping))
    for k, v in TRUE_NS.items():
        assert fused.get(k, 0.0) == pytest.approx(v, abs=1e-6), k
    ins_in, ins_out, irep = fit_inserted(ls)
    assert ins_in["Conv"] == pytest.approx(TRUE_IN, abs=1e-4)
    assert ins_out["Conv"] == pytest.approx(TRUE_OUT, abs=1e-4)
    # samples re-taken with the costs are the conv alone: the layer model no longer carries the epilogue
    ls2 = layer_samples(measured, MappingModel([ACT_RULE], MappingCosts(fused)))
    conv_rows = np.flatnonzero(ls2.network.types == T.CONV)
    alone = CONV.predict(LayerFeatures.from_network(ls2.network, conv_rows))
    assert np.allclose(ls2.time_ms[conv_rows], alone, rtol=1e-6)


def test_block_tables_leave_reorders_to_the_network_ends():
    from annette_torch.lookup import block_latencies
    plat = Platform("p", {"Base": CONV}, MappingModel([ACT_RULE], _costs()))
    net = _stem()
    inner = block_latencies(plat, [net])[0]
    both = block_latencies(plat, [net], count_input=True, count_output=True)[0]
    t, _ = layer_times(plat, plat.mapping.apply(net))
    assert both == pytest.approx(t.sum())
    x_elems, e = 3 * 56 * 56, 16 * 56 * 56
    # the whole network adds its input layer (carrying the input reorder) and the output reorder
    assert both - inner == pytest.approx(t[0] + 0.3 * e * 1e-6, rel=1e-6)
    assert t[0] > 0.01 + (0.2 * x_elems + 0.9 * x_elems / 3) * 1e-6


def test_stem_suite_builds_image_inputs():
    s = SUITES["stem"]
    for cfg in s.configs(n=5, seed=0):
        net = s.build(cfg)
        assert net.cols["c_out"][0] in (1, 3, 4) and net.types[1] == T.CONV


def _unfused_records(net) -> dict[str, LayerRecord]:
    """One not-fused record per layer, named after it: 0.01 ms each, the graph input 0."""
    return {n: LayerRecord(n, T(int(net.types[i])).label, NOT_FUSED, node=n, time_ms=0.0 if i == 0 else 0.01)
            for i, n in enumerate(net.names)}


def _shuffle_measured(inner_ms=(0.004, 0.006), out_ms=0.002, in_ms=0.003) -> Measured:
    """One shuffle-suite configuration with ONNX Runtime-style reorders: the graph input's, two inside
    (around the plain-layout split) and one named after the output layer (OpenVINO's naming)."""
    s = SUITES["shuffle"]
    cfg = next(c for c in s.configs(n=40, seed=0) if c["s"] == 1 and c["depth"] == 2)
    net = s.build(cfg)
    recs = _unfused_records(net)
    out_name = net.names[-1]
    inserted = [LayerRecord("ReorderInput", "ReorderInput", INSERTED, node="ReorderInput", time_ms=in_ms),
                LayerRecord("ReorderOutput_token_3", "ReorderOutput", INSERTED, node="ReorderOutput_token_3",
                            time_ms=inner_ms[0]),
                LayerRecord("ReorderInput_token_7", "ReorderInput", INSERTED, node="ReorderInput_token_7",
                            time_ms=inner_ms[1]),
                LayerRecord(f"{out_name}_acdb_abcd", "Reorder", INSERTED, node=f"{out_name}_acdb_abcd",
                            time_ms=out_ms)]
    return Measured("shuffle", cfg["config_id"], net, recs, inserted)


def test_reorders_inside_a_graph_are_charged_to_its_plain_layout_layers():
    from annette_torch.fit.data import LAYOUT_BREAKERS
    m = _shuffle_measured()
    ls = layer_samples([m], MappingModel())
    net = ls.network
    breakers = np.isin(net.types, LAYOUT_BREAKERS)
    assert breakers.sum() == 2 + 2 * 3   # two splits, two shuffles of three layers
    # layer times: 0.01 each, the breakers' share of the two inner reorders on top, by output size
    extra = ls.time_ms - np.where(net.types == T.INPUT, 0.0, 0.01)
    assert extra[~breakers] == pytest.approx(0.0)
    assert extra[breakers].sum() == pytest.approx(0.010)
    e = net.out_elems[breakers]
    assert extra[breakers] == pytest.approx(0.010 * e / e.sum())
    # the graph-end reorders stay with the inserted-node fit: input side and output side
    assert ls.inserted_ms[0] == pytest.approx(0.005) and ls.inserted_input_ms[0] == pytest.approx(0.003)


def test_reorders_inside_a_squeeze_excite_block_are_charged_to_its_broadcasting_product():
    """ONNX Runtime runs a gate x feature-map product in the plain layout: the reorders of the feature map and
    the gate into it and of the product back (inner, ``_token_`` names) are the product's cost."""
    from annette_torch.fit.data import layout_breakers
    s = SUITES["se"]
    cfg = s.configs(n=1, seed=0)[0]
    net = s.build(cfg)
    recs = _unfused_records(net)
    inserted = [LayerRecord("ReorderInput", "ReorderInput", INSERTED, node="ReorderInput", time_ms=0.003)] + [
        LayerRecord(f"Reorder{side}_token_{k}", f"Reorder{side}", INSERTED, node=f"Reorder{side}_token_{k}",
                    time_ms=t) for k, (side, t) in enumerate([("Output", 0.02), ("Output", 0.002), ("Input", 0.02)])]
    ls = layer_samples([Measured("se", cfg["config_id"], net, recs, inserted)], MappingModel())
    mnet = ls.network
    product = np.flatnonzero(mnet.types == T.MUL)
    assert product.size == 1
    breakers = layout_breakers(mnet)
    assert breakers[product[0]] and set(mnet.types[breakers]) == {T.MUL, T.FLATTEN}
    extra = ls.time_ms - np.where(mnet.types == T.INPUT, 0.0, 0.01)
    assert extra[~breakers] == pytest.approx(0.0)
    # spread by output size: the product (c x hw x hw elements) takes nearly all, the flatten (f) the rest
    e = mnet.out_elems[breakers]
    assert extra[breakers] == pytest.approx(0.042 * e / e.sum())
    assert extra[product[0]] > 0.9 * 0.042
    assert ls.inserted_ms[0] == pytest.approx(0.003)


def test_same_shape_merges_do_not_break_the_layout():
    from annette_torch.fit.data import layout_breakers
    b = NetworkBuilder("merges")
    x = b.input("x", (1, 16, 8, 8))
    y = b.conv("conv", x, 16, 1)
    g = b.conv("gate", b.global_pool("pool", y), 16, 1)
    b.same(T.MUL, "scale", [y, g])
    b.same(T.ADD, "add", [x, y])
    b.same(T.MUL, "mul", [x, y])
    net = b.build()
    assert [n for n, m in zip(net.names, layout_breakers(net)) if m] == ["scale"]


def test_shuffle_suite_concat_trains_no_concat_model():
    from annette_torch.fit.generator import _trains
    ls = layer_samples([_shuffle_measured(), _measured(1)[0]], MappingModel())
    ok = _trains(ls)
    shuffle_rows = ls.config == 0
    assert not ok[shuffle_rows & (ls.network.types == T.CONCAT)].any()
    assert ok[shuffle_rows & (ls.network.types == T.SLICE)].all()
    assert ok[~shuffle_rows].all()


def test_fused_groups_too_small_to_measure_are_skipped_not_a_crash():
    # two activation kinds fused often enough to count, but every group below MIN_FUSED_ELEMS and no plain
    # (nothing fused) groups: there is no per-element cost to learn, and the fit must say nothing, not fail
    from annette_torch.fit.mapping_costs_fit import MIN_FUSED_ELEMS, MIN_GROUPS
    out = []
    for i in range(2 * MIN_GROUPS):
        act = (T.RELU, T.SIGMOID)[i % 2]
        net = _stem(3, 14, act, f=8)
        assert net.out_elems[3] < MIN_FUSED_ELEMS
        recs = {"x": LayerRecord("x", "Input", NOT_FUSED), "bn": LayerRecord("bn", "BatchNorm", FUSED, "conv"),
                "act": LayerRecord("act", act.label, FUSED, "conv"),
                "conv": LayerRecord("conv", "Conv", NOT_FUSED, time_ms=0.01 + 0.001 * i)}
        out.append(Measured("stem", str(i), net, recs, []))
    mapping = MappingModel([ACT_RULE])
    fused, rep = fit_fused_costs(layer_samples(out, mapping), Platform("first", {"Base": CONV}, mapping))
    assert fused == {} and rep["medians_ns"] == {}
