"""Mapping pass: fusion chains, conditions, branching, and what each fused layer absorbed."""

from __future__ import annotations

import numpy as np

from annette_torch.ir import LayerType as T, NetworkBuilder
from annette_torch.mapping import Condition, FusionRule, MappingModel

RULES = MappingModel([
    FusionRule("ConvBatch", ("Conv",), ("BatchNorm",)),
    FusionRule("ConvRelu", ("Conv",), ("Relu", "Relu6")),
    FusionRule("ConvPool", ("Conv",), ("MaxPool",), result="ConvPool",
               when=(Condition("secondary", "kh", "==", 2),)),
    FusionRule("DwBatch", ("DepthwiseConv",), ("BatchNorm",)),
])


def _chain(pool_kernel=2, pool_kind="max"):
    b = NetworkBuilder("n")
    x = b.input("x", (1, 8, 16, 16))
    c = b.conv("conv", x, 16, 3, padding=1)
    bn = b.same(T.BATCH_NORM, "bn", c)
    r = b.same(T.RELU, "relu", bn)
    p = b.pool("pool", r, pool_kind, pool_kernel)
    b.conv("conv2", p, 4, 1)
    return b.build()


def test_chain_collapses_into_convpool():
    net = _chain()
    m = RULES.apply(net)
    mn = m.network
    assert mn.names == ["x", "conv", "conv2"]
    assert mn.types[1] == T.CONV_POOL
    assert [net.names[i] for i in m.fused_into] == ["x", "conv", "conv", "conv", "conv", "conv2"]
    # the fused layer computes the conv's operations and writes the pooled output
    assert mn.ops[1] == net.ops[net.index("conv")]
    assert mn.out_elems[1] == net.out_elems[net.index("pool")]
    assert mn.in_elems[1] == net.in_elems[net.index("conv")]
    assert mn.edges.tolist() == [[0, 1], [1, 2]]


def test_condition_blocks_fusion():
    for kernel, kind in ((3, "max"), (2, "avg")):
        m = RULES.apply(_chain(kernel, kind))
        assert m.network.names == ["x", "conv", "pool", "conv2"]
        assert m.network.types[1] == T.CONV


def test_branching_output_blocks_fusion():
    b = NetworkBuilder("n")
    x = b.input("x", (1, 8, 16, 16))
    c = b.conv("conv", x, 8, 3, padding=1)
    r = b.same(T.RELU, "relu", c)
    b.same(T.ADD, "add", [c, r])  # conv has two consumers: the toolchain keeps its output
    m = RULES.apply(b.build())
    assert m.network.names == ["x", "conv", "relu", "add"]


def test_secondary_with_many_consumers_is_fused_and_rewired():
    b = NetworkBuilder("n")
    x = b.input("x", (1, 8, 16, 16))
    c = b.conv("conv", x, 8, 3, padding=1)
    r = b.same(T.RELU, "relu", c)
    b.conv("a", r, 4, 1)
    b.conv("b", r, 4, 1)
    m = RULES.apply(b.build())
    assert m.network.names == ["x", "conv", "a", "b"]
    assert sorted(m.network.edges.tolist()) == [[0, 1], [1, 2], [1, 3]]


def test_no_rules_is_identity():
    net = _chain()
    m = MappingModel([]).apply(net)
    assert m.network.names == net.names
    np.testing.assert_array_equal(m.fused_into, np.arange(len(net)))


def test_batched_mapping_matches_single():
    from annette_torch.ir import Network
    nets = [_chain(2), _chain(3), _chain(2, "avg")]
    big, seg = Network.concat(nets)
    m = RULES.apply(big)
    per = [len(RULES.apply(n).kept) for n in nets]
    assert np.bincount(seg[m.kept]).tolist() == per


def test_multi_input_rule_fuses_residual_add_into_conv():
    b = NetworkBuilder("res")
    x = b.input("x", (1, 8, 16, 16))
    c1 = b.conv("c1", x, 8, 3, padding=1)
    r1 = b.same(T.RELU, "r1", c1)
    c2 = b.conv("c2", r1, 8, 3, padding=1)
    a = b.same(T.ADD, "add", [c2, x])
    b.same(T.RELU, "r2", a)
    net = b.build()
    rules = MappingModel([FusionRule("ConvRelu", ("Conv",), ("Relu",)),
                          FusionRule("ConvAdd", ("Conv",), ("Add",), multi_input=True)])
    m = rules.apply(net)
    assert m.network.names == ["x", "c1", "c2"]
    assert [net.names[i] for i in m.fused_into] == ["x", "c1", "c1", "c2", "c2", "c2"]
    # the fused conv now also reads the residual input
    assert sorted(m.network.edges.tolist()) == [[0, 1], [0, 2], [1, 2]]
    assert m.network.in_elems[2] == net.in_elems[net.index("c2")] + net.out_elems[0]
    # without multi_input the two-input Add stays
    single = MappingModel([FusionRule("ConvAdd", ("Conv",), ("Add",))]).apply(net)
    assert "add" in single.network.names
