"""Operator support and host fallback: placement, host and switch costs, the per-layer column, the schema,
the shipped zcu102 / ncs2 declarations and platforms without one."""

from __future__ import annotations

import copy
import csv
import io
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import annette_torch as at
from annette_torch import PlatformError, zoo
from annette_torch.cli.app import main
from annette_torch.ir import LayerType as T, Network, NetworkBuilder
from annette_torch.lookup import block_latencies
from annette_torch.prediction import per_inference_ms
from annette_torch.mapping.support import ATTRS, NEUTRAL_TYPES, OperatorSupport
from annette_torch.platform import Platform

HOST_BASE = {"model": "roofline", "op_s": 1e9, "bandwidth": 1e9, "bit_act": 32, "bit_weights": 32}
SWITCH = {"ms": 0.1, "bandwidth": 5e8, "bit_act": 8}


def _platform(accelerator: dict, rules: list | None = None, base: str = "zcu102-dnndk") -> Platform:
    """``base``'s layer models (and end-to-end model) with a support section declaring ``accelerator``."""
    d = at.load_platform(base).to_dict()
    d["support"] = {"accelerator": accelerator, "host": {"layers": {"Base": HOST_BASE}}, "switch": SWITCH}
    if rules is not None:
        d["mapping"] = {"rules": rules}
    return Platform.from_dict(d, "test")


def _no_support(base: str = "zcu102-dnndk") -> Platform:
    """``base`` without its support section: every layer costed by the device's own models."""
    d = at.load_platform(base).to_dict()
    d.pop("support", None)
    return Platform.from_dict(d, "plain")


def _conv_silu_conv():
    b = NetworkBuilder("csc")
    x = b.input("x", (1, 8, 16, 16))
    c = b.conv("c1", x, 8, 3, padding=1)
    s = b.same(T.SILU, "silu", c)
    b.conv("c2", s, 8, 3, padding=1)
    return b.build()


# ------------------------------------------------------------------------------------------------------
# the check: a platform declaring only Conv runs a SiLU on the host, plus host time and switch costs


def test_conv_only_platform_runs_silu_on_host_with_host_time_and_switch_cost():
    plat = _platform({"Conv": {}})
    net = _conv_silu_conv()
    e = at.estimate(net, plat)
    rows = {r["name"]: r for r in e.table()}
    assert rows["silu"]["executes_on"] == "host" and rows["silu"]["model"] == "host:roofline:Base"
    assert [rows[n]["executes_on"] for n in ("x", "c1", "c2")] == ["accelerator"] * 3
    elems = 8 * 16 * 16
    host = max(elems / 1e9, 2 * elems * 4 / 1e9) * 1e3  # roofline: ops vs (in + out) FP32 bytes
    switch = SWITCH["ms"] + elems * 1 / SWITCH["bandwidth"] * 1e3  # one INT8 tensor each way
    assert e.host_ms == pytest.approx(host) and e.switches == 2
    assert e.switch_ms == pytest.approx(2 * switch)
    assert rows["silu"]["time_ms"] == pytest.approx(host + switch)  # the host reads c1's output
    # the switch a layer waits for has a column of its own (part of its time_ms)
    assert rows["silu"]["switch_ms"] == pytest.approx(switch) and rows["c2"]["switch_ms"] == pytest.approx(switch)
    assert rows["c1"]["switch_ms"] == 0.0 and sum(r["switch_ms"] for r in rows.values()) == pytest.approx(e.switch_ms)
    alone = at.estimate(net, _no_support())  # same layer models, no support: the SiLU costed as if the DPU ran it
    acc = alone.time_ms[[0, 1, 3]].sum()  # input, c1, c2
    assert e.accelerator_ms == pytest.approx(acc)
    assert e.device_ms == pytest.approx(acc + host + 2 * switch)
    assert e.device_ms == pytest.approx(e.accelerator_ms + e.host_ms + e.switch_ms)
    # end to end: the calibration scales the accelerator's part only; host and switches add as they are
    cal = plat.end_to_end
    assert cal is not None
    assert e.latency_ms == pytest.approx(alone.latency_ms - cal.coef["layers"] * alone.time_ms[2]
                                         + host + 2 * switch)
    assert e.host_summary() == "1 of 4 executed layers run on the host (SiLU)"


def test_executes_on_in_table_csv_and_json(capsys, tmp_path, monkeypatch):
    plat = _platform({"Conv": {}})
    e = at.estimate(_conv_silu_conv(), plat)
    csv_rows = list(csv.DictReader(io.StringIO(e.to_csv())))
    assert [r["executes_on"] for r in csv_rows] == ["accelerator", "accelerator", "host", "accelerator"]
    d = json.loads(json.dumps(e.to_dict()))
    assert [r["executes_on"] for r in d["layers"]] == ["accelerator", "accelerator", "host", "accelerator"]
    assert d["host_layers"] == ["silu"] and d["layers_on_host"] == 1 and d["switches"] == 2
    assert d["device_ms"] == pytest.approx(d["accelerator_ms"] + d["host_ms"] + d["switch_ms"])
    path = tmp_path / "plat.json"
    plat.save(path)
    model = _user_model(tmp_path, monkeypatch)
    assert main(["estimate", model, "-p", str(path), "-i", "1,8,16,16", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["executes_on"] for r in doc["layers"]] == ["accelerator", "accelerator", "host", "accelerator"]
    assert doc["layers_on_host"] == 1 and doc["host_summary"] == "1 of 4 executed layers run on the host (SiLU)"
    assert main(["estimate", model, "-p", str(path), "-i", "1,8,16,16", "--per-layer"]) == 0
    out = capsys.readouterr().out
    assert "host      1 of 4 executed layers run on the host (SiLU): " in out and "runs on" in out


def _user_model(tmp_path, monkeypatch) -> str:
    """``module:callable`` of conv -> SiLU -> conv as an nn.Module (for the CLI)."""
    (tmp_path / "support_cli_models.py").write_text(
        "import torch.nn as nn\n"
        "def csc():\n"
        "    return nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.SiLU(), nn.Conv2d(8, 8, 3, padding=1)).eval()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "support_cli_models:csc"


def test_fused_activation_the_accelerator_lacks_stays_a_host_layer():
    rule = [{"name": "ConvSiLU", "primary": ["Conv"], "secondary": ["SiLU"]}]
    net = _conv_silu_conv()
    lacks = at.estimate(net, _platform({"Conv": {"activations": ["Relu"]}}, rule))
    assert (lacks.mapped.rules_applied == -1).all() and lacks.host_layers == ["silu"]
    has = at.estimate(net, _platform({"Conv": {"activations": ["Relu", "SiLU"]}}, rule))
    assert has.mapped.fused_into[2] == 1 and has.host_layers == [] and has.switches == 0


def test_parameter_ranges_move_layers():
    b = NetworkBuilder("k")
    x = b.input("x", (1, 16, 32, 32))
    a = b.conv("k3", x, 16, 3, padding=1)
    c = b.conv("k7s2", a, 16, 7, stride=2, padding=3)
    b.conv("dw", c, 16, 3, padding=1, groups=16)
    e = at.estimate(b.build(), _platform({"Conv": {"kernel": [1, 5]}, "DepthwiseConv": {"stride": [1, 1]}}))
    assert e.host_layers == ["k7s2"] and e.switches == 2


def test_a_pick_is_declared_as_the_slice_it_specialises():
    """A support table that lists Slice runs a pick of the leading axis (``qkv[i]``) there too; one that lists
    Pick itself decides for it."""
    b = NetworkBuilder("picks")
    x = b.input("x", (1, 24, 8, 8))
    c = b.conv("conv", x, 24, 1)
    b.add(T.PICK, "pick", [c], (1, 24, 8, 8))
    b.add(T.SLICE, "slice", [c], (1, 12, 8, 8))
    net = b.build()
    assert at.estimate(net, _platform({"Conv": {}, "Slice": {}})).host_layers == []
    assert at.estimate(net, _platform({"Conv": {}})).host_layers == ["pick", "slice"]
    assert at.estimate(net, _platform({"Conv": {}, "Slice": {}, "Pick": {"c_out": [1, 8]}})).host_layers == ["pick"]


def test_shape_only_layers_do_not_move_or_switch():
    """A Flatten between a host layer and the accelerator passes its producer's side on: one switch, not two."""
    b = NetworkBuilder("flat")
    x = b.input("x", (1, 8, 4, 4))
    s = b.same(T.SIGMOID, "sig", x)
    f = b.add(T.FLATTEN, "flat", [s], (1, 128))
    b.linear("fc", f, 10)
    e = at.estimate(b.build(), _platform({"FullyConnected": {}}))
    rows = {r["name"]: r["executes_on"] for r in e.table()}
    assert rows == {"x": "accelerator", "sig": "host", "flat": "accelerator", "fc": "accelerator"}
    assert e.switches == 1  # the graph input belongs to neither side


def test_one_switch_per_tensor_and_direction():
    b = NetworkBuilder("fan")
    x = b.input("x", (1, 8, 8, 8))
    c = b.conv("c", x, 8, 3, padding=1)
    s1 = b.same(T.SIGMOID, "s1", c)
    s2 = b.same(T.TANH, "s2", c)
    b.same(T.ADD, "add", [s1, s2])
    e = at.estimate(b.build(), _platform({"Conv": {}, "Add": {}}))
    assert sorted(e.host_layers) == ["s1", "s2"] and e.switches == 3  # c -> host once, s1 and s2 back


def test_unknown_layers_are_flagged_not_moved():
    b = NetworkBuilder("u")
    x = b.input("x", (1, 8, 8, 8))
    c = b.conv("c", x, 8, 3, padding=1)
    u = b.add(T.UNKNOWN, "weird", [c], (1, 8, 8, 8), op="Mystery")
    b.conv("c2", u, 8, 3, padding=1)
    net = b.build()
    plat = _platform({"Conv": {}})
    e = at.estimate(net, plat)
    rows = {r["name"]: r for r in e.table()}
    assert rows["weird"]["executes_on"] == "accelerator" and "Mystery" in rows["weird"]["flag"]
    assert e.flagged_layers == ["weird"] and e.switches == 0
    assert e.time_ms[2] == at.estimate(net, _no_support()).time_ms[2]  # costed as without a support section
    assert at.estimate(net, "ort-cpu").flagged_layers == []  # no operator support, nothing to flag against


def test_cli_flags_unknown_layers_on_an_accelerator_platform(capsys, ref_dir):
    graph = str(ref_dir / "graphs" / "tf_inceptionv1.json")
    assert main(["estimate", graph, "-p", "zcu102-dnndk"]) == 0
    out = capsys.readouterr().out
    assert "host      0 of " in out and "executed layers run on the host" in out
    assert "flagged   1 layer(s) of unknown type (Shape): not in zcu102-dnndk's operator support" in out


def test_estimate_many_and_block_latencies_agree_with_estimate():
    plat = _platform({"Conv": {}, "Add": {}})
    nets = [_conv_silu_conv()]
    b = NetworkBuilder("fan")
    x = b.input("x", (1, 8, 8, 8))
    c = b.conv("c", x, 8, 3, padding=1)
    b.same(T.ADD, "add", [b.same(T.SIGMOID, "s1", c), b.same(T.TANH, "s2", c)])
    nets.append(b.build())
    nets.append(at.trace(zoo.get("tiny_resnet"), (1, 3, 32, 32)))
    single = [at.estimate(n, plat) for n in nets]
    assert at.estimate_many(nets, plat) == pytest.approx([e.latency_ms for e in single])
    assert at.estimate_many(nets, plat, latency="device") == pytest.approx([e.device_ms for e in single])
    for n, e in zip(nets, single):
        whole = block_latencies(plat, [n], count_input=True, count_output=True, latency="latency")[0]
        assert whole + per_inference_ms(plat, n) == pytest.approx(e.latency_ms)


# ------------------------------------------------------------------------------------------------------
# the vectorised check against a per-layer reference


def _reference_supported(support: OperatorSupport, net) -> list[bool]:
    out = []
    for i in range(len(net)):
        label = T(int(net.types[i])).label
        ts = support.accelerator.get(label)
        if ts is None:
            out.append(False)
            continue
        ok = True
        for attr, (lo, hi) in ts.ranges.items():
            if attr == "dilation_x_c_in":
                vals = [max(int(net.dh[i]), int(net.dw[i])) * int(net.c_in[i])]
            else:
                vals = [int(net.cols[c][i]) for c in ATTRS[attr]]
            ok &= all(lo <= v <= hi for v in vals)
        if ts.square:
            ok &= int(net.kh[i]) == int(net.kw[i])
        out.append(bool(ok))
    return out


def _reference_crossings(support: OperatorSupport, net) -> set[int]:
    """Producers of tensors that cross sides, layer by layer: shape-only layers take their producer's side,
    graph inputs belong to neither."""
    ok = _reference_supported(support, net)
    side: dict[int, str] = {}
    for i in range(len(net)):  # builders add layers in topological order
        t = T(int(net.types[i]))
        parents = net.parents(i)
        if t in NEUTRAL_TYPES:
            side[i] = "none" if not parents else side[parents[-1]]
        else:
            side[i] = "acc" if ok[i] else "host"
    return {s for s, d in net.edges.tolist() if "none" not in (side[s], side[d]) and side[s] != side[d]}


_TYPES = [T.CONV, T.DEPTHWISE_CONV, T.MAX_POOL, T.AVG_POOL, T.RELU, T.SILU, T.SIGMOID, T.ADD, T.FLATTEN,
          T.RESHAPE, T.GROUP_CONV]


@st.composite
def _random_case(draw):
    b = NetworkBuilder("rand")
    layers = [b.input("x", (1, draw(st.sampled_from([8, 16, 32])), 16, 16))]
    for k in range(draw(st.integers(1, 12))):
        t = draw(st.sampled_from(_TYPES))
        src = layers[draw(st.integers(0, len(layers) - 1))]
        n, c, h, w = b.out_shape(src)
        # odd kernels with "same" padding: only strides shrink the maps, and never below one pixel
        kern, kern2 = draw(st.sampled_from([1, 3, 5, 7])), draw(st.sampled_from([1, 3, 5, 7]))
        stride, dil = draw(st.integers(1, 3)) if h >= 4 else 1, draw(st.integers(1, 3))
        pad = (dil * (kern - 1) // 2, dil * (kern2 - 1) // 2)
        if t in (T.CONV, T.GROUP_CONV):
            groups = 1 if t == T.CONV else (2 if c % 2 == 0 else 1)
            out = draw(st.sampled_from([8, 16, 4096 + 16]))
            layers.append(b.conv(f"l{k}", src, out, (kern, kern2), stride=stride, padding=pad, dilation=dil,
                                 groups=groups))
        elif t == T.DEPTHWISE_CONV:
            layers.append(b.conv(f"l{k}", src, c, kern, stride=stride, padding=kern // 2, groups=c))
        elif t in (T.MAX_POOL, T.AVG_POOL):
            layers.append(b.pool(f"l{k}", src, "max" if t == T.MAX_POOL else "avg", min(kern, h), stride))
        elif t == T.ADD:
            other = layers[draw(st.integers(0, len(layers) - 1))]
            layers.append(b.same(T.ADD, f"l{k}", [src, other] if b.out_shape(other) == (n, c, h, w) else [src]))
        elif t in (T.FLATTEN, T.RESHAPE):
            layers.append(b.add(t, f"l{k}", [src], (n, c, h, w)))
        else:
            layers.append(b.same(t, f"l{k}", src))
    accel = {}
    for t in draw(st.lists(st.sampled_from(_TYPES), unique=True)):
        entry: dict = {}
        for attr in draw(st.lists(st.sampled_from(sorted(ATTRS)), unique=True, max_size=3)):
            lo = draw(st.integers(0, 4))
            entry[attr] = [lo, lo + draw(st.integers(0, 5000))]
        if draw(st.booleans()):
            entry["square"] = True
        accel[t.label] = entry
    support = OperatorSupport.from_dict({"accelerator": accel, "switch": SWITCH})
    return b.build(), support


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_random_case())
def test_vectorised_support_check_matches_per_layer_reference(case):
    net, support = case
    ref = _reference_supported(support, net)
    assert support.supported(net).tolist() == ref
    # the same network held as columns only (as after a shape rewrite)
    cols_only = Network(net.name, net.names, net.types, dict(net.cols), net.edges)
    assert cols_only.matrix is None and support.supported(cols_only).tolist() == ref
    pl = support.place(net)
    neutral = np.isin(net.types, NEUTRAL_TYPES)
    assert (pl.on_host == (~neutral & ~support.supported(net))).all()
    crossing = _reference_crossings(support, net)
    assert pl.switches == len(crossing)
    expected = sum(SWITCH["ms"] + net.out_elems[s] * SWITCH["bit_act"] / 8 / SWITCH["bandwidth"] * 1e3
                   for s in crossing)
    assert pl.switch_ms.sum() == pytest.approx(expected)


# ------------------------------------------------------------------------------------------------------
# schema


def _with_support(support) -> dict:
    d = at.load_platform("zcu102-dnndk").to_dict()
    d["support"] = support
    return d


_GOOD = {"accelerator": {"Conv": {}}, "host": {"layers": {"Base": HOST_BASE}}, "switch": SWITCH}


@pytest.mark.parametrize("edit, field", [
    (lambda s: s.pop("accelerator"), "support.accelerator"),
    (lambda s: s["accelerator"].update(Conf={}), "unknown layer type 'Conf'"),
    (lambda s: s["accelerator"]["Conv"].update(kernel=[5, 3]), "support.accelerator.Conv.kernel"),
    (lambda s: s["accelerator"]["Conv"].update(kernel=3), "support.accelerator.Conv.kernel"),
    (lambda s: s["accelerator"]["Conv"].update(size=[1, 3]), "support.accelerator.Conv.size"),
    (lambda s: s["accelerator"]["Conv"].update(square="yes"), "support.accelerator.Conv.square"),
    (lambda s: s["accelerator"]["Conv"].update(activations=["Conv"]), "'Conv' is not an activation"),
    (lambda s: s.pop("switch"), "support.switch"),
    (lambda s: s["switch"].update(bandwidth=0), "support.switch.bandwidth"),
    (lambda s: s["switch"].update(ms=-1), "support.switch.ms"),
    (lambda s: s.pop("host"), "support.host"),
    (lambda s: s["host"]["layers"].pop("Base") and s["host"]["layers"].update(SiLU=HOST_BASE),
     "support.host.layers.Base"),
    (lambda s: s["host"]["layers"].update(Base={"model": "nope"}), "support.host.layers.Base.model"),
])
def test_support_schema_errors_are_one_line(edit, field):
    s = copy.deepcopy(_GOOD)
    edit(s)
    with pytest.raises(PlatformError) as e:
        Platform.from_dict(_with_support(s), "f.json")
    msg = str(e.value)
    assert field in msg and "\n" not in msg


def test_support_round_trips(tmp_path):
    plat = at.load_platform("zcu102-dnndk")
    path = tmp_path / "z.json"
    plat.save(path)
    again = Platform.load(path)
    assert again.to_dict()["support"] == plat.to_dict()["support"]
    assert OperatorSupport.from_dict(plat.support.to_dict()).to_dict() == plat.support.to_dict()
    net = _conv_silu_conv()
    assert at.estimate(net, again).latency_ms == at.estimate(net, plat).latency_ms


# ------------------------------------------------------------------------------------------------------
# the shipped declarations


@pytest.mark.slow
def test_zoo_networks_with_silu_or_hardswish_get_host_layers_on_zcu102():
    hosts = {}
    for name in ("efficientnet_b0", "mobilenet_v3_small", "resnet18"):
        net = at.trace(zoo.get(name), (1, 3, 224, 224))
        e = at.estimate(net, "zcu102-dnndk")
        types = {r["type"] for r in e.table() if r["executes_on"] == "host" and not r["fused_into"]}
        hosts[name] = types
        if types:
            assert e.switches > 0 and e.latency_ms > e.accelerator_ms
    assert {"SiLU", "Sigmoid", "Mul"} <= hosts["efficientnet_b0"]
    assert {"HardSwish", "HardSigmoid", "Mul"} <= hosts["mobilenet_v3_small"]
    assert hosts["resnet18"] == set()


def test_ncs2_runs_only_what_the_myriad_table_lacks_on_the_host():
    b = NetworkBuilder("se")
    x = b.input("x", (1, 16, 8, 8))
    c = b.conv("c", x, 16, 3, padding=1)
    h = b.same(T.HARDSWISH, "hswish", c)
    g = b.global_pool("gap", h)
    s = b.conv("fc1", g, 16, 1)
    gate = b.same(T.HARDSIGMOID, "hsig", s)
    b.same(T.MUL, "scale", [h, gate])
    e = at.estimate(b.build(), "ncs2")
    assert e.host_layers == ["hsig"] and e.switches == 2
    assert "Supported Layers" in e.platform.support.origin


def test_zcu102_calibration_networks_run_on_the_dpu_alone(ref_dir):
    """The end-to-end calibration was fitted on these: none may move (Shape stays, flagged)."""
    from annette_torch.fit.calibrate_network import load_published_zcu102
    plat = at.load_platform("zcu102-dnndk")
    for graph, net, _ in load_published_zcu102():
        e = at.estimate(net, plat)
        assert e.host_layers == [] and e.switches == 0, graph
        if graph == "tf_inceptionv1":
            assert e.flagged_layers and all(r["executes_on"] == "accelerator" for r in e.table())


@pytest.mark.parametrize("name", ["ort-cpu", "openvino-cpu"])
def test_cpu_platforms_have_no_support_and_run_everything_on_their_device(name):
    plat = at.load_platform(name)
    assert plat.support is None and plat.host is None
    e = at.estimate(_conv_silu_conv(), plat)
    assert e.placement is None and e.host_ms == 0 and e.switch_ms == 0 and e.host_summary() == ""
    assert {r["executes_on"] for r in e.table()} == {"accelerator"} and "host_ms" not in e.to_dict()
    assert e.accelerator_ms == e.device_ms


def test_declaring_every_type_changes_no_number():
    net = at.trace(zoo.get("tiny_resnet"), (1, 3, 32, 32))
    everything = _platform({t.label: {} for t in T})
    base = _no_support()
    a, b = at.estimate(net, everything), at.estimate(net, base)
    assert a.time_ms.tolist() == b.time_ms.tolist() and a.latency_ms == b.latency_ms
