"""Network -> ONNX / nn.Module export: naming contract, shapes, round trips, ONNX Runtime, determinism, errors."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import annette_torch
from annette_torch.bench.export import EXPORTABLE, ExportError, node_layers, to_module, to_onnx
from annette_torch.errors import AnnetteError
from annette_torch.frontends.annette_json import from_annette_json
from annette_torch.frontends.onnx import from_onnx
from annette_torch.ir import INT_COLUMNS, LayerType as T, NetworkBuilder, to_nchw


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim], dtype=np.float32)
            for i in model.graph.input}


def inferred_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    m = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    out = {}
    for vi in (*m.graph.input, *m.graph.value_info, *m.graph.output):
        out[vi.name] = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
    return out


def zoo_net():
    """One network using most exportable layer types, with 2-D and 4-D tensors and two inputs."""
    b = NetworkBuilder("zoo")
    x = b.input("x", (1, 3, 20, 18))
    v = b.input("v", (1, 6))
    c = b.conv("conv", x, 12, 3, 2, 1)
    bn = b.same(T.BATCH_NORM, "bn", c)
    r = b.same(T.RELU, "relu", bn)
    p = b.pool("pool", r, "max", 3, 2, 1)
    dw = b.conv("dw", p, 12, 3, 1, 1, groups=12)
    g = b.conv("gconv", dw, 8, 1, groups=4)
    g2 = b.conv("gconv2", p, 8, 5, 1, 2, dilation=2)
    a = b.same(T.ADD, "add", [g, g2])
    m = b.same(T.MUL, "mul", [a, g])
    sub = b.same(T.SUB, "sub", [m, g2])
    div = b.same(T.DIV, "div", [sub])  # x / constant
    s = b.same(T.SILU, "silu", div)
    ge = b.same(T.GELU, "gelu", s)
    r6 = b.same(T.RELU6, "relu6", ge)
    lk = b.same(T.LEAKY_RELU, "leaky", r6, alpha=0.2)
    sg = b.same(T.SIGMOID, "sigmoid", lk)
    hs = b.same(T.HARDSWISH, "hswish", sg)
    hg = b.same(T.HARDSIGMOID, "hsig", hs)
    th = b.same(T.TANH, "tanh", hg)
    sp = b.same(T.SOFTPLUS, "softplus", th)
    cl = b.same(T.CLIP, "clip", sp, clip_min=-1.0, clip_max=1.0)
    cc = b.concat("cat", [cl, hs, g])
    rs = b.add(T.RESIZE, "up", [cc], (1, 24, 10, 10))
    pd = b.add(T.PAD, "pad", [rs], (1, 24, 13, 12))
    ap = b.pool("avg", pd, "avg", 2, 2)
    sl = b.add(T.SLICE, "slice", [ap], (1, 20, 5, 6))
    tr = b.add(T.TRANSPOSE, "transpose", [sl], (1, 20, 6, 5))
    lrn = b.same(T.LRN, "lrn", tr)
    # a batched product of two activations (q k^T of the same tensor) and a softmax over its last axis
    mm = b.add(T.MATMUL, "matmul", [tr, tr], (20, 6, 6, 1), in_shape=(20, 5, 6, 1), shape=(1, 20, 6, 6), trans_b=True)
    b.add(T.SOFTMAX, "scores", [mm], (1, 20, 6, 6), shape=(1, 20, 6, 6), axis=-1)
    b.add(T.PICK, "pick", [mm], (20, 6, 6, 1), shape=(20, 6, 6), index=0)  # mm[0]: a Gather of axis 0
    rm = b.add(T.REDUCE_MEAN, "mean", [lrn], (1, 20, 1, 5))
    ln = b.same(T.LAYER_NORM, "ln", rm)
    gp = b.global_pool("gap", ln)
    fl = b.add(T.FLATTEN, "flatten", [gp], (1, 20))
    fc = b.linear("fc", fl, 6)
    a2 = b.same(T.ADD, "add2", [fc, v])
    b.same(T.SOFTMAX, "softmax", a2)
    fc2 = b.linear("fc2", lrn, 4)  # 4-D producer: a Flatten helper node
    rh = b.add(T.RESHAPE, "reshape", [fc2], (1, 4, 1, 1))
    b.same(T.DROPOUT, "dropout", rh)
    ct = b.add(T.CONV_TRANSPOSE, "deconv", [p], (1, 4, 11, 11), kernel=(3, 3), stride=(2, 2), padding=(2, 2))
    b.same(T.TANH, "deconv_act", ct)
    return b.build()


@pytest.fixture(scope="module")
def zoo():
    return zoo_net()


@pytest.mark.parametrize("opset", [17, 20])
def test_export_checks_infers_ir_shapes_and_runs(zoo, opset):
    model = to_onnx(zoo, opset=opset)
    onnx.checker.check_model(model, full_check=True)
    shapes = inferred_shapes(model)
    for i, name in enumerate(zoo.names):
        assert name in shapes, name
        full = zoo.attr("shape", i)  # a MatMul's IR shape is (batch, N, M, 1), its tensor (..., M, N)
        assert to_nchw(shapes[name]) == (zoo.out_shape(i) if full is None else to_nchw(full)), name
    outs = session(model).run(None, feeds(model))
    assert all(np.isfinite(o).all() for o in outs)
    assert {o.name for o in model.graph.output} == {"softmax", "dropout", "deconv_act", "scores", "pick"}
    assert [i.name for i in model.graph.input] == ["x", "v"]


def test_every_exportable_type_is_covered(zoo):
    assert {T(int(t)) for t in zoo.types} == set(EXPORTABLE)


def test_naming_contract(zoo):
    model = to_onnx(zoo, opset=17)
    nodes = {n.name: n for n in model.graph.node}
    for name, t in zip(zoo.names, zoo.types):
        if t == T.INPUT:
            continue
        assert name in nodes and list(nodes[name].output) == [name]
    helpers = {n for n in nodes if n not in zoo.names}
    assert helpers == {"silu/sigmoid", "gelu/div", "gelu/erf", "gelu/add", "gelu/mul", "fc2/flatten",
                       "matmul/transpose_b"}
    owners = node_layers(model)
    assert owners["fc2/flatten"] == "fc2" and owners["gelu/erf"] == "gelu" and owners["conv"] == "conv"
    assert owners["matmul/transpose_b"] == "matmul" and nodes["matmul"].op_type == "MatMul"
    assert {a.name: onnx.helper.get_attribute_value(a) for a in nodes["scores"].attribute} == {"axis": -1}
    assert nodes["fc"].op_type == "Gemm" and "fc/flatten" not in nodes  # producer already 2-D
    assert nodes["relu6"].op_type == "Clip" and nodes["silu"].op_type == "Mul"
    assert nodes["pool"].op_type == "MaxPool" and nodes["avg"].op_type == "AveragePool"
    assert nodes["gap"].op_type == "GlobalAveragePool"
    conv = {a.name: onnx.helper.get_attribute_value(a) for a in nodes["gconv2"].attribute}
    assert conv["pads"] == [2, 2, 2, 2] and conv["dilations"] == [2, 2] and conv["kernel_shape"] == [5, 5]
    assert {a.name: onnx.helper.get_attribute_value(a) for a in nodes["gconv"].attribute}["group"] == 4
    gelu20 = {n.name: n.op_type for n in to_onnx(zoo, opset=20).graph.node}
    assert gelu20["gelu"] == "Gelu" and "gelu/erf" not in gelu20


def test_odd_padding_splits_begin_floor():
    b = NetworkBuilder("odd")
    x = b.input("x", (1, 4, 10, 10))
    b.add(T.CONV, "conv", [x], (1, 4, 5, 5), kernel=(3, 3), stride=(2, 2), padding=(1, 1))
    model = to_onnx(b.build())
    pads = {a.name: onnx.helper.get_attribute_value(a) for a in model.graph.node[0].attribute}["pads"]
    assert pads == [0, 0, 1, 1]
    assert inferred_shapes(model)["conv"] == (1, 4, 5, 5)


def test_same_padding_recorded_as_zero_is_refitted():
    # ANNETTE graphs built with TF SAME padding often store pads of 0; the output size decides
    g = {"name": "same", "layers": {
        "x": {"type": "DataInput", "parents": [], "output_shape": [1, 15, 15, 8]},
        "conv": {"type": "Conv", "parents": ["x"], "input_shape": [1, 15, 15, 8], "output_shape": [1, 8, 8, 16],
                 "kernel_shape": [3, 3, 8, 16], "strides": [1, 2, 2, 1], "pads": [0] * 8},
        "pool": {"type": "Pool", "parents": ["conv"], "input_shape": [1, 8, 8, 16], "output_shape": [1, 4, 4, 16],
                 "kernel_shape": [1, 3, 3, 1], "strides": [1, 2, 2, 1], "pads": [0] * 8, "pooling_type": "MAX"}}}
    net = from_annette_json(g)
    model = to_onnx(net)
    shapes = inferred_shapes(model)
    assert shapes["conv"] == (1, 16, 8, 8) and shapes["pool"] == (1, 16, 4, 4)
    attrs = {n.name: {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute} for n in model.graph.node}
    assert attrs["conv"]["pads"] == [1, 1, 1, 1]  # the smallest padding giving 8 from 15
    assert attrs["pool"]["pads"] == [0, 0, 0, 0] and attrs["pool"]["ceil_mode"] == 1  # ceil mode before refitting
    (out,) = session(model).run(None, feeds(model))
    assert out.shape == (1, 16, 4, 4)


def test_ceil_mode_pool():
    b = NetworkBuilder("ceil")
    x = b.input("x", (1, 2, 10, 10))
    b.pool("pool", x, "max", 3, 2, ceil_mode=True)
    model = to_onnx(b.build())
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in model.graph.node[0].attribute}
    assert attrs["ceil_mode"] == 1 and attrs["pads"] == [0, 0, 0, 0]
    assert inferred_shapes(model)["pool"] == (1, 2, 5, 5)
    (out,) = session(model).run(None, feeds(model))
    assert out.shape == (1, 2, 5, 5)


def helper_net():
    """Layers that need helper nodes: merges of three inputs, a Gemm on a 4-D producer, a convolution on a
    2-D tensor."""
    b = NetworkBuilder("helpers")
    x = b.input("x", (1, 4, 6, 6))
    a = b.conv("a", x, 4, 3, 1, 1)
    c = b.conv("c", x, 4, 1)
    d = b.conv("d", x, 4, 1)
    s = b.same(T.ADD, "sum3", [a, c, d])
    m = b.same(T.MUL, "mul3", [s, c, d])
    sub = b.same(T.SUB, "sub3", [m, a, c])
    fc = b.linear("fc", b.global_pool("gap", sub), 8)
    b.same(T.SIGMOID, "gate", b.conv("expand", fc, 4, 1))
    return b.build()


def test_helper_nodes_of_many_input_merges_and_rank_changes():
    net = helper_net()
    model = to_onnx(net)
    onnx.checker.check_model(model, full_check=True)
    ops = [(n.name, n.op_type) for n in model.graph.node]
    assert ops == [("a", "Conv"), ("c", "Conv"), ("d", "Conv"), ("sum3", "Sum"), ("mul3/0", "Mul"), ("mul3", "Mul"),
                   ("sub3/0", "Sub"), ("sub3", "Sub"), ("gap", "GlobalAveragePool"), ("fc/flatten", "Flatten"),
                   ("fc", "Gemm"), ("expand/reshape", "Reshape"), ("expand", "Conv"), ("gate", "Sigmoid")]
    helpers = {"mul3/0": "mul3", "sub3/0": "sub3", "fc/flatten": "fc", "expand/reshape": "expand"}
    assert node_layers(model) == {**{n: n for n, _ in ops if "/" not in n}, **helpers}
    assert json.loads({p.key: p.value for p in model.metadata_props}["annette:helpers"]) == helpers
    assert list(model.graph.node[4].input) == ["sum3", "c"] and list(model.graph.node[5].input) == ["mul3/0", "d"]
    shapes = inferred_shapes(model)
    assert shapes["fc"] == (1, 8) and shapes["expand"] == (1, 4, 1, 1)
    inputs = feeds(model)
    (gate,) = session(model).run(None, inputs)
    assert gate.shape == (1, 4, 1, 1) and ((gate > 0) & (gate < 1)).all()
    a, c, d, sub3 = session(_with_outputs(model, ["a", "c", "d", "sub3"])).run(None, inputs)
    np.testing.assert_allclose(sub3, (a + c + d) * c * d - a - c, rtol=1e-5, atol=1e-5)


def _with_outputs(model: onnx.ModelProto, outputs: list[str]) -> onnx.ModelProto:
    """``model`` with the tensors ``outputs`` (inner ones included) as its graph outputs."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.output[:]
    m.graph.output.extend(onnx.helper.make_empty_tensor_value_info(o) for o in outputs)
    return m


# --------------------------------------------------------------------------------------------------
# round trips: Network -> ONNX -> Network


@st.composite
def chains(draw):
    """Small random graphs of conv / pool / bn / relu / add / concat layers."""
    b = NetworkBuilder("rand")
    x = b.input("x", (1, draw(st.integers(1, 6)), draw(st.integers(6, 20)), draw(st.integers(6, 20))))
    layers = [x]
    for j in range(draw(st.integers(1, 7))):
        src = layers[draw(st.integers(0, len(layers) - 1))]
        n, c, h, w = b.out_shape(src)
        kind = draw(st.sampled_from(["conv", "pool", "bn", "relu", "add", "concat"]))
        name = f"{kind}{j}"
        if kind == "conv":
            k = draw(st.integers(1, min(5, h, w)))
            groups = draw(st.sampled_from([g for g in (1, 2, c) if c % g == 0]))
            f = groups * draw(st.integers(1, 4))
            layers.append(b.conv(name, src, f, k, draw(st.integers(1, 2)), draw(st.integers(0, k // 2)),
                                 groups=groups))
        elif kind == "pool":
            k = draw(st.integers(1, min(3, h, w)))
            layers.append(b.pool(name, src, draw(st.sampled_from(["max", "avg"])), k, draw(st.integers(1, 2)),
                                 draw(st.integers(0, k // 2))))
        elif kind in ("bn", "relu"):
            layers.append(b.same(T.BATCH_NORM if kind == "bn" else T.RELU, name, src))
        else:
            same = [i for i in layers if b.out_shape(i)[2:] == (h, w) and i != src
                    and (kind == "concat" or b.out_shape(i) == (n, c, h, w))]
            if not same:
                continue
            other = same[draw(st.integers(0, len(same) - 1))]
            layers.append(b.same(T.ADD, name, [src, other]) if kind == "add" else b.concat(name, [src, other]))
    if len(layers) == 1:
        layers.append(b.same(T.RELU, "relu", x))
    return b.build()


def assert_same_network(a, b):
    assert a.names == b.names
    assert a.type_labels() == b.type_labels()
    for col in INT_COLUMNS:
        assert a.cols[col].tolist() == b.cols[col].tolist(), col
    assert {(a.names[s], a.names[d]) for s, d in a.edges.tolist()} == \
        {(b.names[s], b.names[d]) for s, d in b.edges.tolist()}
    np.testing.assert_allclose(a.ops, b.ops)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains())
def test_round_trip_random_chains(net):
    model = to_onnx(net)
    onnx.checker.check_model(model)
    assert_same_network(net, from_onnx(model, name=net.name))
    outs = session(model).run(None, feeds(model))
    leaves = [i for i in range(len(net)) if net.n_outputs[i] == 0 and net.types[i] != T.INPUT]
    assert [o.shape for o in outs] == [net.out_shape(i) for i in leaves]


def test_round_trip_fixed_networks():
    b = NetworkBuilder("head")
    x = b.input("x", (2, 8, 7, 7))
    y = b.global_pool("gap", x)
    y = b.linear("fc1", y, 16)
    y = b.same(T.RELU, "relu", y)
    y = b.linear("fc2", y, 5)
    b.same(T.SOFTMAX, "softmax", y)
    net = b.build()
    back = from_onnx(to_onnx(net), name="head")
    # the documented helper: a Flatten before a Gemm whose producer is 4-D (the global pool), none after fc1
    assert back.names == ["x", "gap", "fc1/flatten", "fc1", "relu", "fc2", "softmax"]
    assert back.type_labels()[2] == "Flatten"
    keep = [back.index(n) for n in net.names]
    assert [back.type_labels()[i] for i in keep] == net.type_labels()
    assert [back.out_shape(i) for i in keep] == [net.out_shape(i) for i in range(len(net))]
    np.testing.assert_allclose(back.ops[keep], net.ops)
    b = NetworkBuilder("flat_in")
    v = b.input("v", (4, 32))
    b.linear("fc", v, 3)
    net = b.build()
    model = to_onnx(net)
    assert [n.op_type for n in model.graph.node] == ["Gemm"]
    assert_same_network(net, from_onnx(model, name="flat_in"))


# --------------------------------------------------------------------------------------------------
# weights, determinism, errors


def _weights(model):
    return {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}


def test_weights_deterministic_and_sane(zoo):
    a, b, c = _weights(to_onnx(zoo, seed=0)), _weights(to_onnx(zoo, seed=0)), _weights(to_onnx(zoo, seed=1))
    assert a.keys() == b.keys() == c.keys()
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["conv/W"], c["conv/W"])
    assert all(v.dtype == np.float32 for k, v in a.items() if not k.endswith(("shape", "pads", "starts", "ends",
                                                                              "axes", "index")))
    assert a["conv/W"].shape == (12, 3, 3, 3) and a["gconv/W"].shape == (8, 3, 1, 1) and a["fc/W"].shape == (6, 20)
    assert (a["bn/var"] > 0).all()
    # a layer's weights do not depend on the rest of the network
    b2 = NetworkBuilder("other")
    b2.conv("conv", b2.input("inp", (1, 3, 20, 18)), 12, 3, 2, 1)
    assert np.array_equal(_weights(to_onnx(b2.build()))["conv/W"], a["conv/W"])


def test_unsupported_types_and_bad_opset():
    for t in (T.MATMUL, T.UNKNOWN, T.CONV_POOL):
        b = NetworkBuilder("bad")
        x = b.input("x", (1, 4, 8, 8))
        b.add(t, "weird", [x], (1, 4, 8, 8))
        with pytest.raises(ExportError, match=r"'weird' \(" + t.label):
            to_onnx(b.build())
    b = NetworkBuilder("ok")
    b.same(T.RELU, "relu", b.input("x", (1, 4, 8, 8)))
    with pytest.raises(AnnetteError, match="opset"):
        to_onnx(b.build(), opset=9)
    b = NetworkBuilder("shape")
    x = b.input("x", (1, 4, 8, 8))
    b.add(T.CONV, "conv", [x], (1, 4, 30, 30), kernel=(3, 3))
    with pytest.raises(ExportError, match="'conv'"):
        to_onnx(b.build())


def test_layer_names_clashing_with_weight_names_are_rejected():
    b = NetworkBuilder("clash")
    x = b.input("x", (1, 4, 8, 8))
    b.same(T.RELU, "conv/W", b.conv("conv", x, 4, 3, 1, 1))
    with pytest.raises(ExportError, match="'conv/W' is used twice"):
        to_onnx(b.build())


def test_networks_over_the_protobuf_limit_are_rejected_before_any_weight_is_drawn():
    b = NetworkBuilder("huge")
    b.linear("fc", b.input("v", (1, 100_000)), 10_000)  # 4 GB of float32 weights
    with pytest.raises(ExportError, match="exceed the 2 GB limit"):
        to_onnx(b.build())


def test_ir_version_loadable_by_older_runtimes(zoo):
    model = to_onnx(zoo, opset=17)
    assert model.ir_version == 8
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]
    assert to_onnx(zoo, opset=20).ir_version == 9
    props = {p.key: p.value for p in model.metadata_props}
    assert props["annette:network"] == "zoo" and props["annette:seed"] == "0"
    assert model.producer_name == "annette-torch" and model.producer_version == annette_torch.__version__


# --------------------------------------------------------------------------------------------------
# torch


def test_module_matches_onnx_runtime(zoo):
    torch = pytest.importorskip("torch")
    model = to_onnx(zoo, opset=17, seed=3)
    inputs = feeds(model, seed=1)
    ref = dict(zip([o.name for o in model.graph.output], session(model).run(None, inputs)))
    mod = to_module(zoo, seed=3)
    assert mod.input_shapes == [(1, 3, 20, 18), (1, 6)]
    assert not mod.training and mod.network_name == "zoo"
    assert mod.layer_names["conv"] == "conv" and isinstance(mod.conv, torch.nn.Conv2d)
    np.testing.assert_array_equal(mod.conv.weight.detach().numpy(), _weights(model)["conv/W"])
    with torch.no_grad():
        got = mod(*[torch.from_numpy(inputs[n]) for n in ("x", "v")])
    assert len(got) == 5
    for name, y in zip(("scores", "pick", "softmax", "dropout", "deconv_act"), got):
        np.testing.assert_allclose(y.numpy(), ref[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_module_helper_layers_match_onnx_runtime():
    torch = pytest.importorskip("torch")
    net = helper_net()
    model = to_onnx(net, seed=2)
    inputs = feeds(model)
    (ref,) = session(model).run(None, inputs)
    with torch.no_grad():
        got = to_module(net, seed=2)(torch.from_numpy(inputs["x"]))
    assert tuple(got.shape) == ref.shape
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.xfail(strict=True, reason="to_module merges a 2-D and a 4-D tensor by broadcasting, not reshaping")
def test_module_merge_of_2d_and_4d_tensors_matches_onnx_runtime():
    torch = pytest.importorskip("torch")
    b = NetworkBuilder("mixed")
    gp = b.global_pool("gap", b.input("x", (1, 4, 6, 6)))
    b.same(T.ADD, "mix", [b.linear("fc", gp, 4), gp])
    net = b.build()
    model = to_onnx(net)
    assert [n.name for n in model.graph.node] == ["gap", "fc/flatten", "fc", "mix/reshape0", "mix"]
    inputs = feeds(model)
    (ref,) = session(model).run(None, inputs)
    with torch.no_grad():
        got = to_module(net)(torch.from_numpy(inputs["x"]))
    assert tuple(got.shape) == ref.shape


def test_module_rejects_what_onnx_rejects():
    pytest.importorskip("torch")
    b = NetworkBuilder("bad")
    b.add(T.MATMUL, "weird", [b.input("x", (1, 4, 8, 8))], (1, 4, 8, 8))
    with pytest.raises(ExportError, match=r"'weird' \(" + T.MATMUL.label):
        to_module(b.build())


def _ops_by_type(net):
    out: dict[str, float] = {}
    for label, ops in zip(net.type_labels(), net.ops):
        if ops:
            out[label] = out.get(label, 0.0) + float(ops)
    return out


@pytest.mark.parametrize("which", ["zoo", "chain"])
def test_module_traces_to_same_ops(zoo, which):
    pytest.importorskip("torch")
    if which == "zoo":
        net = zoo
    else:
        b = NetworkBuilder("chain")
        x = b.input("x", (1, 3, 32, 32))
        y = b.same(T.RELU, "relu", b.same(T.BATCH_NORM, "bn", b.conv("conv", x, 16, 3, 1, 1)))
        y = b.same(T.ADD, "add", [y, b.conv("proj", x, 16, 1)])
        b.linear("fc", b.global_pool("gap", b.pool("pool", y, "avg", 2, 2)), 10)
        net = b.build()
    mod = to_module(net)
    traced = annette_torch.trace(mod, mod.input_shapes)
    want, got = _ops_by_type(net), _ops_by_type(traced)
    assert want.keys() == got.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k]), k
    if which == "chain":
        assert [n for n in traced.names if n in net.names] == ["x", "conv", "bn", "relu", "proj", "add", "pool", "gap",
                                                                 "fc"]


def test_five_d_channel_shuffle_exports_like_torch():
    """ShuffleNet's channel shuffle (view to 5-D, transpose, view back) survives the IR's NCHW folding."""
    torch = pytest.importorskip("torch")
    from annette_torch.frontends.fx import trace

    class Shuffle(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(12, 12, 1)

        def forward(self, x):
            y = self.conv(x)
            n, c, h, w = y.shape
            y = y.view(n, 3, c // 3, h, w).transpose(1, 2).contiguous().view(n, c, h, w)
            return torch.relu(y)

    torch.manual_seed(0)
    m = Shuffle().eval()
    net = trace(m, (1, 12, 5, 7))
    assert net.attr("shape", net.index("view")) == (1, 3, 4, 5, 7)
    model = to_onnx(net)
    onnx.checker.check_model(model)
    assert [n.op_type for n in model.graph.node if n.op_type in ("Reshape", "Transpose")] == \
        ["Reshape", "Transpose", "Reshape"]
    perm = next(a.ints for n in model.graph.node if n.op_type == "Transpose" for a in n.attribute)
    assert list(perm) == [0, 2, 1, 3, 4]
    # same permutation of channels as torch (weights differ: compare with the shuffle of the exported conv)
    x = np.random.default_rng(0).standard_normal((1, 12, 5, 7)).astype(np.float32)
    got = session(model).run(None, {"x": x})[0]
    mod = to_module(net)
    with torch.no_grad():
        ref = mod(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    # the ONNX front end reads the export back to the same layers
    back = from_onnx(model)
    assert back.attr("shape", [i for i, t in enumerate(back.types) if t == T.TRANSPOSE][0]) == (1, 4, 3, 5, 7)


def test_five_d_tensor_into_a_layer_that_needs_4d_fails_clearly():
    b = NetworkBuilder("five")
    x = b.input("x", (1, 6, 4, 4))
    y = b.add(T.RESHAPE, "view", [x], (1, 2, 3, 4, 4))
    b.same(T.RELU, "relu", y)
    with pytest.raises(ExportError, match="'relu'.*more than 4 dimensions"):
        to_onnx(b.build())


def test_a_broadcast_or_repeat_read_as_a_copy_exports_as_its_tiles():
    """The front ends read expand / repeat as a one-input Concat to a larger output: both back ends write the
    copies (ONNX Tile, torch repeat), so what is measured does the work the IR prices."""
    import torch
    import torch.nn as nn

    class Broadcasts(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)

        def forward(self, x):
            y = self.conv(x)
            return y.mean(1, keepdim=True).expand_as(y) * y + y.repeat(1, 1, 2, 1)[:, :, :14]

    net = annette_torch.trace(Broadcasts().eval(), (1, 3, 16, 16))
    assert net.type_labels().count("Concat") == 2
    model = to_onnx(net)
    assert [n.op_type for n in model.graph.node].count("Tile") == 2
    assert [tuple(o.shape) for o in session(model).run(None, feeds(model))] == [(1, 8, 14, 14)]
    shapes = inferred_shapes(model)
    tiles = [n.output[0] for n in model.graph.node if n.op_type == "Tile"]
    assert sorted(shapes[t] for t in tiles) == [(1, 8, 14, 14), (1, 8, 28, 14)]
    assert tuple(to_module(net)(torch.zeros(1, 3, 16, 16)).shape) == (1, 8, 14, 14)
