"""Graph matcher rules on synthetic node records (no toolchain needed)."""

from __future__ import annotations

import pytest

from annette_torch.bench.matcher import GraphMatcher, match, resolve_name
from annette_torch.bench.records import FUSED, INSERTED, NOT_FUSED, POSSIBLY_FUSED, NodeRecord
from annette_torch.ir import LayerType as T, Network, NetworkBuilder


def N(node, typ, ms=1.0, layers=(), status="executed", **extra):
    return NodeRecord(node=node, node_type=typ, exec_kind="k", median_ms=ms, min_ms=ms * 0.9, std_ms=0.1,
                      layers=tuple(layers), status=status, extra=extra)


def by_layer(recs):
    return {r.layer: r for r in recs}


def chain_net():
    """x -> conv -> bn -> relu -> pool -> conv2"""
    b = NetworkBuilder("chain")
    x = b.input("x", (1, 8, 16, 16))
    r = b.same(T.RELU, "relu", b.same(T.BATCH_NORM, "bn", b.conv("conv", x, 16, 3, padding=1)))
    b.conv("conv2", b.pool("pool", r, "max", 2), 8, 1)
    return b.build()


def residual_net():
    """x -> conv_a -> relu_a ; x -> conv_b ; add(relu_a, conv_b) -> relu_out"""
    b = NetworkBuilder("res")
    x = b.input("x", (1, 8, 16, 16))
    a = b.same(T.RELU, "relu_a", b.conv("conv_a", x, 8, 3, padding=1))
    c = b.conv("conv_b", x, 8, 1)
    b.same(T.RELU, "relu_out", b.same(T.ADD, "add", [a, c]))
    return b.build()


def test_every_node_own_layer_is_not_fused():
    net = chain_net()
    recs = match(net, [N(n, t, ms) for n, t, ms in [("conv", "Conv", 2), ("bn", "BatchNormalization", 0.5),
                                                    ("relu", "Relu", 0.3), ("pool", "MaxPool", 0.4),
                                                    ("conv2", "Conv", 1)]], "ort-cpu")
    assert [r.layer for r in recs] == net.names
    assert [r.fused for r in recs] == [NOT_FUSED] * 6
    r = by_layer(recs)
    assert r["x"].time_ms == 0 and r["conv"].time_ms == 2 and r["conv"].min_ms == pytest.approx(1.8)


def test_single_producer_layers_fuse_into_survivor_with_params():
    net = chain_net()
    # the conv absorbed bn, relu and the pool (a DPU-style ConvPool)
    recs = match(net, [N("conv", "Conv", 3), N("conv2", "Conv", 1)], "x")
    r = by_layer(recs)
    for layer in ("bn", "relu", "pool"):
        assert r[layer].fused == FUSED and r[layer].fused_into == "conv" and r[layer].time_ms == 0
        assert r[layer].node == "conv"
    assert r["conv"].absorbed == ("bn", "relu", "pool")
    assert r["conv"].params["pool"] == {"kind": "max", "kernel": [2, 2], "stride": [2, 2], "padding": [0, 0],
                                        "layer": "pool"}
    assert r["conv"].params["bn"] == {"layer": "bn"}
    assert r["conv"].params["activation"] == {"kind": "Relu", "layer": "relu"}
    assert r["conv2"].fused == NOT_FUSED and r["conv2"].absorbed == ()


def test_node_named_after_last_layer_walks_up_to_the_conv():
    """ONNX Runtime NCHWc: Conv+BN+Relu runs as ``relu_nchwc`` (op Conv)."""
    net = chain_net()
    nodes = [N("ReorderInput", "ReorderInput", 0.2), N("relu_nchwc_kernel_time", "Conv", 3),
             N("pool_nchwc", "MaxPool", 0.5), N("conv2_nchwc", "Conv", 1),
             N("ReorderOutput_token_3", "ReorderOutput", 0.1)]
    recs = match(net, nodes, "ort-cpu")
    r = by_layer(recs)
    assert r["conv"].fused == NOT_FUSED and r["conv"].time_ms == 3 and r["conv"].node == "relu_nchwc_kernel_time"
    assert r["bn"].fused_into == "conv" and r["relu"].fused_into == "conv"
    assert r["pool"].fused == NOT_FUSED and r["pool"].time_ms == 0.5
    ins = [x for x in recs if x.fused == INSERTED]
    assert [(x.layer, x.layer_type, x.time_ms) for x in ins] == [("ReorderInput", "ReorderInput", 0.2),
                                                                ("ReorderOutput_token_3", "ReorderOutput", 0.1)]
    assert sum(x.time_ms for x in recs) == pytest.approx(sum(n.median_ms for n in nodes))


def test_openvino_original_layer_names_and_not_run():
    """OpenVINO: a renamed conv lists the original layers it contains; absorbed ones are NOT_RUN."""
    net = chain_net()
    nodes = [N("x", "Parameter", 0, status="not-run"),
             N("x_abcd_acdb_Multiply_12", "Reorder", 0.2),
             N("Multiply_12", "Convolution", 3, layers=("Multiply_12", "bn", "relu")),
             N("relu", "Relu", 0, status="not-run"),
             N("pool", "MaxPool", 0.5, layers=("pool",)),
             N("conv2/WithoutBiases", "Convolution", 1, layers=("conv2/WithoutBiases", "conv2")),
             N("conv2_acdb_abcd_out", "Reorder", 0, status="not-run"),
             N("conv2/sink_port_0", "Result", 0, status="not-run")]
    recs = match(net, nodes, "openvino")
    r = by_layer(recs)
    assert r["conv"].node == "Multiply_12" and r["conv"].absorbed == ("bn", "relu")
    assert r["conv2"].node == "conv2/WithoutBiases" and r["conv2"].time_ms == 1
    assert [x.layer for x in recs if x.fused == INSERTED] == ["x_abcd_acdb_Multiply_12"]  # NOT_RUN reorder: free
    assert r["x"].fused == NOT_FUSED and r["x"].time_ms == 0


def test_subgraph_time_goes_to_first_layer():
    b = NetworkBuilder("elt")
    x = b.input("x", (1, 8, 8, 8))
    y = b.input("y", (1, 8, 8, 8))
    t = b.same(T.TANH, "t0", b.same(T.MUL, "m0", [b.same(T.ADD, "a0", [x, y]), y]))
    b.conv("conv", t, 8, 1)
    net = b.build()
    recs = match(net, [N("t0", "Subgraph", 0.7, layers=("t0", "a0", "m0")), N("conv", "Convolution", 1)], "openvino")
    r = by_layer(recs)
    assert r["a0"].fused == NOT_FUSED and r["a0"].time_ms == 0.7 and r["a0"].absorbed == ("m0", "t0")
    assert r["m0"].fused_into == "a0" and r["t0"].fused_into == "a0"


def test_multi_input_layer_possibly_fused_then_decided_by_evidence():
    net = residual_net()
    nodes = [N("conv_a", "FusedConv", 2), N("conv_b", "Conv", 1)]
    r = by_layer(match(net, nodes, "x"))
    assert r["relu_a"].fused == FUSED and r["relu_a"].fused_into == "conv_a"
    assert r["add"].fused == POSSIBLY_FUSED and r["add"].fused_into == "conv_a|conv_b"
    assert r["add"].time_ms == 0 and r["add"].node == ""
    # the Relu after an undecided Add is undecided the same way
    assert r["relu_out"].fused == POSSIBLY_FUSED and r["relu_out"].fused_into == "conv_a|conv_b"
    assert "add" not in r["conv_a"].absorbed and "add" not in r["conv_b"].absorbed
    # a node that says it absorbed an Add (ONNX Runtime: Conv with a residual input) decides it
    nodes = [N("conv_a", "FusedConv", 2), N("conv_b", "Conv", 1, fused_ops=["Add", "Relu"])]
    r = by_layer(match(net, nodes, "ort-cpu"))
    assert r["add"].fused == FUSED and r["add"].fused_into == "conv_b"
    assert r["relu_out"].fused == FUSED and r["relu_out"].fused_into == "conv_b"
    assert r["conv_b"].absorbed == ("add", "relu_out")
    assert r["conv_b"].params["eltwise"] == {"kind": "Add", "inputs": 2, "layer": "add"}


def test_multi_input_with_one_candidate_is_fused():
    b = NetworkBuilder("same")
    x = b.input("x", (1, 8, 8, 8))
    c = b.conv("conv", x, 8, 1)
    b.same(T.ADD, "add", [c, b.same(T.RELU, "relu", c)])
    net = b.build()
    r = by_layer(match(net, [N("conv", "Conv", 1)], "x"))
    assert r["relu"].fused_into == "conv" and r["add"].fused == FUSED and r["add"].fused_into == "conv"
    # an input is no candidate when a real layer is: add(x, conv) goes into conv
    b = NetworkBuilder("inp")
    x = b.input("x", (1, 8, 8, 8))
    b.same(T.ADD, "add", [x, b.conv("conv", x, 8, 1)])
    r = by_layer(match(b.build(), [N("conv", "Conv", 1)], "x"))
    assert r["add"].fused == FUSED and r["add"].fused_into == "conv"


def test_silu_diamond_sigmoid_follows_its_consumer():
    """ONNX Runtime's QuickGelu runs Sigmoid+Mul under the Mul's name: the Sigmoid goes with the Mul."""
    b = NetworkBuilder("silu")
    x = b.input("x", (1, 8, 8, 8))
    c = b.conv("conv", x, 8, 1)
    b.same(T.MUL, "mul", [c, b.same(T.SIGMOID, "sig", c)])
    net = b.build()
    r = by_layer(match(net, [N("conv", "Conv", 1), N("mul/QuickGeluFusion/", "QuickGelu", 0.2)], "ort-cpu"))
    assert r["mul"].fused == NOT_FUSED and r["mul"].time_ms == 0.2
    assert r["sig"].fused == FUSED and r["sig"].fused_into == "mul"
    # OpenVINO: the whole SiLU is absorbed by the conv
    r = by_layer(match(net, [N("conv/WithoutBiases", "Convolution", 1, layers=("conv", "mul"))], "openvino"))
    assert r["sig"].fused_into == "conv" and r["mul"].fused_into == "conv"


def test_several_nodes_on_one_layer_add_up_and_unknown_nodes_are_inserted():
    b = NetworkBuilder("fc")
    x = b.input("x", (1, 8, 4, 4))
    b.linear("fc", b.global_pool("gap", x), 10)
    net = b.build()
    nodes = [N("gap", "GlobalAveragePool", 0.1), N("fc/flatten", "Flatten", 0.05), N("fc", "Gemm", 0.5),
             N("GeluFusion_17", "Gelu", 0.3)]
    recs = match(net, nodes, "ort-cpu")
    r = by_layer(recs)
    assert r["fc"].time_ms == pytest.approx(0.55) and r["fc"].node == "fc+fc/flatten" and r["fc"].node_type == "Gemm"
    assert r["fc"].std_ms == pytest.approx(0.1 * 2 ** 0.5)
    assert r["GeluFusion_17"].fused == INSERTED and r["GeluFusion_17"].time_ms == 0.3
    assert sum(x.time_ms for x in recs) == pytest.approx(sum(n.median_ms for n in nodes))


def test_resolve_name_strips_toolchain_decorations():
    index = {"conv1": 0, "emul": 1, "k0/conv": 2, "fc": 3, "conv10": 4}
    cases = {"conv1_kernel_time": 0, "conv1_nchwc": 0, "emul_mul_nchwc": 1, "k0/conv/WithoutBiases": 2,
             "fc/flatten": 3, "fc/sink_port_0": 3, "conv10_nchwc": 4, "conv1_nchwc_token_3": 0,
             "emul/QuickGeluFusion/": 1, "/2/Relu_output_0": None, "Multiply_3877": None, "": None}
    for name, want in cases.items():
        assert resolve_name(name, index) == want, name


def test_stacked_residual_adds_each_take_one_conv():
    """Each conv with a residual input absorbs one Add; the other candidate already absorbed its own."""
    b = NetworkBuilder("res2")
    y = b.conv("stem", b.input("x", (1, 8, 8, 8)), 8, 3, padding=1)
    for k in range(2):
        a = b.same(T.ADD, f"add{k}", [b.conv(f"conv{k}", y, 8, 3, padding=1), y])
        y = b.same(T.RELU, f"relu{k}", a)
    net = b.build()
    nodes = [N("stem", "Conv"), N("conv0", "Conv", fused_ops=["Add", "Relu"]),
             N("conv1", "Conv", fused_ops=["Add", "Relu"])]
    r = by_layer(match(net, nodes, "ort-cpu"))
    assert (r["add0"].fused_into, r["add1"].fused_into) == ("conv0", "conv1")
    assert r["relu1"].fused_into == "conv1" and r["add1"].fused == FUSED
    # without what the nodes say, the second Add has two candidates
    r = by_layer(match(net, [N("stem", "Conv"), N("conv0", "Conv"), N("conv1", "Conv")], "x"))
    assert r["add0"].fused == POSSIBLY_FUSED and r["add0"].fused_into == "stem|conv0"
    assert r["add1"].fused == POSSIBLY_FUSED and r["add1"].fused_into == "stem|conv0|conv1"


def test_nameless_nodes_follow_the_data_flow():
    """``Gelu`` / ``HardSigmoid_7`` / ``Mul_8`` name no layer; their tensors place them."""
    b = NetworkBuilder("flow")
    x = b.input("x", (1, 8, 8, 8))
    h = b.same(T.HARDSWISH, "hsw", b.same(T.GELU, "gelu", b.conv("conv", x, 8, 1)))
    b.conv("conv2", h, 8, 1)
    net = b.build()
    nodes = [N("conv_nchwc", "Conv", 1, inputs=["x"], outputs=["t1"]),
             N("Gelu", "Gelu", 0.2, inputs=["t1"], outputs=["t2"]),
             N("HardSigmoid_7", "HardSigmoid", 0.1, inputs=["t2"], outputs=["t3"]),
             N("Mul_8", "Mul", 0.1, inputs=["t2", "t3"], outputs=["t4"]),
             N("conv2_nchwc", "Conv", 1, inputs=["t4"], outputs=["t5"]),
             N("ReorderOutput", "ReorderOutput", 0.05, inputs=["t5"], outputs=["conv2"])]
    recs = match(net, nodes, "ort-cpu")
    r = by_layer(recs)
    assert r["gelu"].fused == NOT_FUSED and r["gelu"].node == "Gelu" and r["gelu"].time_ms == 0.2
    assert r["hsw"].node == "HardSigmoid_7+Mul_8" and r["hsw"].time_ms == pytest.approx(0.2)
    assert [x.layer for x in recs if x.fused == INSERTED] == ["ReorderOutput"]
    # the first half of an expanded op whose second half is named: it goes where its consumer went
    nodes = [N("conv", "Conv", 1, inputs=["x"], outputs=["conv"]),
             N("gelu", "Gelu", 0.2, inputs=["conv"], outputs=["gelu"]),
             N("HardSigmoid_7", "HardSigmoid", 0.1, inputs=["gelu"], outputs=["t3"]),
             N("Mul_8", "Mul", 0.1, layers=("hsw",), inputs=["gelu", "t3"], outputs=["hsw"]),
             N("conv2", "Conv", 1, inputs=["hsw"], outputs=["conv2"])]
    r = by_layer(match(net, nodes, "ort-cpu"))
    assert r["hsw"].node == "Mul_8+HardSigmoid_7" and r["hsw"].node_type == "Mul"
    # no tensors, no guess: the node's time stays visible as an inserted row
    recs = match(net, [N("conv", "Conv"), N("Gelu", "Gelu", 0.2), N("conv2", "Conv")], "x")
    assert by_layer(recs)["Gelu"].fused == INSERTED


def test_layers_out_of_topological_order():
    """A Network whose rows are not in topological order (hand-built) matches the same way."""
    import numpy as np

    net = chain_net()
    perm = [5, 3, 1, 0, 4, 2]                     # new row k holds old layer perm[k]
    new_of = {old: k for k, old in enumerate(perm)}
    shuffled = Network("shuffled", [net.names[i] for i in perm], net.types[perm],
                       {c: v[perm] for c, v in net.cols.items()},
                       np.array([[new_of[int(s)], new_of[int(d)]] for s, d in net.edges]))
    recs = match(shuffled, [N("relu_nchwc", "Conv", 3), N("conv2", "Conv", 1)], "ort-cpu")
    assert [r.layer for r in recs] == shuffled.names
    r = by_layer(recs)
    assert r["conv"].time_ms == 3 and r["conv"].absorbed == ("bn", "relu", "pool")
    assert r["pool"].fused_into == "conv"


def test_not_run_layer_fed_only_by_inputs_is_optimised_out():
    """OpenVINO concatenates inputs in place: the Concat is NOT_RUN under its own name, nobody absorbs it."""
    b = NetworkBuilder("cat")
    b.concat("cat", [b.input("x0", (1, 8, 4, 4)), b.input("x1", (1, 8, 4, 4))])
    net = b.build()
    nodes = [N("x0", "Parameter", 0, status="not-run"), N("x1", "Parameter", 0, status="not-run"),
             N("cat", "Concat", 0, status="not-run"), N("cat/sink_port_0", "Result", 0, status="not-run")]
    r = by_layer(match(net, nodes, "openvino"))
    assert (r["cat"].fused, r["cat"].time_ms, r["cat"].node, r["cat"].node_type) == (NOT_FUSED, 0, "cat", "Concat")
    assert r["x0"].fused == NOT_FUSED and r["x0"].node == "x0" and r["x0"].node_type == "Parameter"
    # without a NOT_RUN record nothing says what became of it
    assert by_layer(match(net, [], "openvino"))["cat"].fused == POSSIBLY_FUSED


def test_ambiguous_walk_up_leaves_the_node_on_its_named_layer():
    """``relu_nchwc`` (op Conv) has two convs at the same distance above it: neither is guessed as its head."""
    b = NetworkBuilder("two")
    x = b.input("x", (1, 8, 8, 8))
    b.same(T.RELU, "relu", b.same(T.ADD, "add", [b.conv("conv_a", x, 8, 1), b.conv("conv_b", x, 8, 1)]))
    recs = match(b.build(), [N("relu_nchwc", "Conv", 2)], "ort-cpu")
    r = by_layer(recs)
    assert (r["relu"].fused, r["relu"].time_ms, r["relu"].node, r["relu"].absorbed) == (NOT_FUSED, 2, "relu_nchwc", ())
    assert all(r[n].fused_into != "relu" for n in ("conv_a", "conv_b", "add"))
    assert sum(x.time_ms for x in recs) == 2


def test_layer_without_producers_is_possibly_fused_into_nothing():
    """A hand-built Network whose BN lost its input edge: nothing can have absorbed it or what follows it."""
    import numpy as np

    net = chain_net()
    edges = np.array([e for e in np.asarray(net.edges).tolist() if net.names[e[1]] != "bn"])
    cut = Network("cut", list(net.names), net.types, net.cols, edges)
    r = by_layer(match(cut, [N("conv", "Conv", 2), N("conv2", "Conv", 1)], "x"))
    for layer in ("bn", "relu", "pool"):
        assert (r[layer].fused, r[layer].fused_into, r[layer].node) == (POSSIBLY_FUSED, "", "")
    assert r["conv"].fused == NOT_FUSED and r["conv"].absorbed == ()


def test_graph_matcher_runs_once_and_exposes_its_placements():
    """`match` is `GraphMatcher(...).run()`; the records iterable is read once and the result is cached."""
    net = chain_net()
    nodes = [N("relu_nchwc", "Conv", 3), N("conv2", "Conv", 1)]
    matcher = GraphMatcher(net, iter(nodes), "ort-cpu")
    recs = matcher.run()
    assert matcher.run() is recs and recs == match(net, nodes, "ort-cpu")
    idx = {nm: i for i, nm in enumerate(net.names)}
    assert {net.names[j]: net.names[h] for j, h in matcher.survivor_of.items()} == {
        "x": "x", "conv": "conv", "bn": "conv", "relu": "conv", "pool": "conv", "conv2": "conv2"}
    assert matcher.candidates == {} and sorted(matcher.head_records) == [idx["conv"], idx["conv2"]]


def _convnext_net():
    """x -> dw -> to_last (transpose) -> norm (LayerNorm) -> fc"""
    b = NetworkBuilder("cnx")
    x = b.input("x", (1, 16, 8, 8))
    t = b.add(T.TRANSPOSE, "to_last", [b.conv("dw", x, 16, 7, padding=3, groups=16)], (1, 8, 8, 16))
    b.add(T.FULLY_CONNECTED, "fc", [b.same(T.LAYER_NORM, "norm", t)], (8, 32, 8, 1), in_shape=(8, 16, 8, 1))
    return b.build()


def test_decomposed_layernorm_pieces_join_it_through_a_reorder():
    """OpenVINO decomposes a LayerNorm into nameless ReduceMean / Subtract / RMS nodes with a reorder between:
    all of them are the LayerNorm's time, none is left as an inserted node."""
    net = _convnext_net()
    nodes = [N("dw", "GroupConvolution", 1.0, outputs=["dw"]),
             N("to_last", "Transpose", 0.5, inputs=["dw"], outputs=["to_last"]),
             N("ReduceMean_1", "ReduceMean", 0.25, inputs=["to_last"], outputs=["ReduceMean_1"]),
             N("Subtract_2", "Subgraph", 0.25, inputs=["to_last", "ReduceMean_1"], outputs=["Subtract_2"]),
             N("Subtract_2_reorder", "Reorder", 0.125, inputs=["Subtract_2"], outputs=["Subtract_2_r"]),
             N("Multiply_3", "RMS", 0.25, inputs=["Subtract_2_r"], outputs=["Multiply_3"]),
             N("norm", "Subgraph", 0.125, inputs=["Multiply_3"], outputs=["norm"]),
             N("fc", "FullyConnected", 2.0, inputs=["norm"], outputs=["fc"])]
    recs = match(net, nodes, "openvino")
    r = by_layer(recs)
    assert r["norm"].fused == NOT_FUSED and r["norm"].time_ms == pytest.approx(0.875)
    assert [x.layer for x in recs if x.fused == INSERTED] == ["Subtract_2_reorder"]
    assert sum(x.time_ms for x in recs) == pytest.approx(sum(n.median_ms for n in nodes))


def test_attention_subgraph_is_headed_by_its_scores_product():
    b = NetworkBuilder("att")
    q = b.add(T.INPUT, "q", [], (1, 2, 16, 8))
    k = b.add(T.INPUT, "k", [], (1, 2, 16, 8))
    v = b.add(T.INPUT, "v", [], (1, 2, 16, 8))
    qt = b.add(T.TRANSPOSE, "q_heads", [q], (1, 16, 2, 8))
    s = b.add(T.MATMUL, "scores", [qt, k], (2, 16, 16, 1), in_shape=(2, 8, 16, 1))
    p = b.add(T.SOFTMAX, "softmax", [s], (1, 2, 16, 16))
    b.add(T.MATMUL, "context", [p, v], (2, 8, 16, 1), in_shape=(2, 16, 16, 1))
    net = b.build()
    recs = by_layer(match(net, [N("context", "Subgraph", 3.0, layers=("q_heads", "scores", "softmax", "context"))],
                          "openvino"))
    assert recs["scores"].fused == NOT_FUSED and recs["scores"].time_ms == 3.0
    assert all(recs[n].fused == FUSED and recs[n].fused_into == "scores" for n in ("q_heads", "softmax", "context"))
