"""Mapping pass: fusion chains, conditions, branching, and what each fused layer absorbed."""

from __future__ import annotations

import numpy as np
import pytest

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


def test_a_pair_fuses_by_any_of_its_rules():
    """A decision tree gives one rule per fusing leaf: each leaf's conditions must count, not only the first's."""
    from annette_torch.ir import Network
    leaves = MappingModel([
        FusionRule("ConvPool#0", ("Conv",), ("MaxPool",), result="ConvPool", when=(Condition("secondary", "kh", "==", 2),)),
        FusionRule("ConvPool#1", ("Conv",), ("MaxPool",), when=(Condition("secondary", "kh", "==", 3),)),
    ])

    def conv_pool(kernel):
        b = NetworkBuilder("n")
        x = b.input("x", (1, 8, 16, 16))
        b.conv("conv2", b.pool("pool", b.conv("conv", x, 16, 3, padding=1), "max", kernel), 4, 1)
        return b.build()

    for kernel, names, fused_type in ((2, ["x", "conv", "conv2"], T.CONV_POOL), (3, ["x", "conv", "conv2"], T.CONV),
                                      (4, ["x", "conv", "pool", "conv2"], T.CONV)):
        m = leaves.apply(conv_pool(kernel))
        assert m.network.names == names, kernel
        assert m.network.types[1] == fused_type  # the first rule that holds decides the result
    big, seg = Network.concat([conv_pool(k) for k in (2, 3, 4)])  # the batched pass agrees
    assert np.bincount(seg[leaves.apply(big).kept]).tolist() == [3, 3, 4]


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


def _swish_net(gate_of_other: bool = False, sigmoid_read_twice: bool = False):
    """conv -> sigmoid -> mul(conv, sigmoid) -> conv2 (SiLU written out, as exporters write nn.SiLU)."""
    b = NetworkBuilder("n")
    x = b.input("x", (1, 8, 16, 16))
    c = b.conv("conv", x, 8, 3, padding=1)
    s = b.same(T.SIGMOID, "sigmoid", x if gate_of_other else c)
    m = b.same(T.MUL, "mul", [c, s])
    out = b.conv("conv2", m, 4, 1)
    if sigmoid_read_twice:
        b.same(T.ADD, "add", [out, b.conv("conv3", s, 4, 1)])
    return b.build()


def test_swish_diamonds_are_found_and_nothing_else():
    from annette_torch.mapping import swish_diamonds
    net = _swish_net()
    sig, mul = swish_diamonds(net)
    assert [net.names[i] for i in sig] == ["sigmoid"] and [net.names[i] for i in mul] == ["mul"]
    for kw in ({"gate_of_other": True}, {"sigmoid_read_twice": True}):
        assert swish_diamonds(_swish_net(**kw))[0].size == 0, kw


def test_swish_fold_lets_a_rule_fuse_silu_into_the_conv():
    from annette_torch.mapping.costs import MappingCosts
    net = _swish_net()
    rules = [FusionRule("ConvSiLU", ("Conv",), ("SiLU",))]
    costs = MappingCosts({"SiLU": 1.0, "Sigmoid": 100.0, "Mul": 100.0})
    # without the fold the conv has two consumers: nothing fuses
    assert MappingModel(rules, costs).apply(net).network.names == net.names
    m = MappingModel(rules, costs, folds=("swish",)).apply(net)
    assert m.network.names == ["x", "conv", "conv2"]
    assert [net.names[i] for i in m.fused_into] == ["x", "conv", "conv", "conv", "conv2"]
    assert m.folded.tolist() == [False, False, True, False, False]
    assert m.layer_types[net.index("mul")] == T.SILU
    # the fused work is one SiLU per output element: the folded Sigmoid costs nothing of its own
    assert m.fused_ms.tolist() == [0.0, net.out_elems[net.index("mul")] * 1e-6, 0.0]
    assert m.network.edges.tolist() == [[0, 1], [1, 2]]


def test_swish_fold_without_a_rule_leaves_one_silu_reading_x():
    net = _swish_net()
    m = MappingModel([], folds=("swish",)).apply(net)
    mn = m.network
    assert mn.names == ["x", "conv", "mul", "conv2"]
    i = mn.names.index("mul")
    assert mn.types[i] == T.SILU and mn.n_inputs[i] == 1
    assert mn.in_elems[i] == net.out_elems[net.index("conv")]  # reads x once, not x and the gate
    assert mn.ops[i] == net.ops[net.index("mul")]


def _hardswish_net(form: str = "div_after"):
    """conv -> hard-swish written out -> conv2, in one of the forms exporters write ``x * relu6(x + 3) / 6``;
    ``se_gate``: the same chain gating another tensor (a squeeze-excite gate, not a hard-swish)."""
    b = NetworkBuilder("n")
    x = b.input("x", (1, 8, 16, 16))
    c = b.conv("conv", x, 8, 3, padding=1)
    r = b.same(T.RELU6, "relu6", b.same(T.ADD, "add3", c))
    if form == "div_after":
        out = b.same(T.DIV, "div6", b.same(T.MUL, "mul", [c, r]))
    elif form == "div_before":
        out = b.same(T.MUL, "mul", [c, b.same(T.DIV, "div6", r)])
    elif form == "no_scale":
        out = b.same(T.MUL, "mul", [r, c])
    elif form == "se_gate":
        out = b.same(T.MUL, "mul", [x, b.same(T.DIV, "div6", r)])
    elif form == "relu":  # not a hard-swish: a plain Relu in the chain
        b2 = NetworkBuilder("n")
        x = b2.input("x", (1, 8, 16, 16))
        c = b2.conv("conv", x, 8, 3, padding=1)
        out = b2.same(T.MUL, "mul", [c, b2.same(T.RELU, "relu", b2.same(T.ADD, "add3", c))])
        b2.conv("conv2", out, 4, 1)
        return b2.build()
    b.conv("conv2", out, 4, 1)
    return b.build()


def test_hardswish_groups_are_found_in_every_written_form_and_nothing_else():
    from annette_torch.mapping import hardswish_groups
    for form, survivor, members in (("div_after", "div6", ["add3", "relu6", "mul"]),
                                    ("div_before", "mul", ["add3", "relu6", "div6"]),
                                    ("no_scale", "mul", ["add3", "relu6"])):
        net = _hardswish_net(form)
        g = hardswish_groups(net)
        assert len(g) == 1, form
        assert net.names[g.x[0]] == "conv" and net.names[g.survivor[0]] == survivor, form
        assert [net.names[i] for i in g.members] == members and g.member_group.tolist() == [0] * len(members)
    for form in ("se_gate", "relu"):
        assert len(hardswish_groups(_hardswish_net(form))) == 0, form


def test_hardswish_fold_is_one_pinned_hardswish_reading_x():
    """OpenVINO runs the written-out hard-swish as one element-wise node beside the conv, while it fuses a
    real HardSwish into the conv: the folded layer must not join the conv even with that rule."""
    rules = [FusionRule("ConvHardSwish", ("Conv",), ("HardSwish",)), FusionRule("HSConv", ("HardSwish",), ("Conv",))]
    for form in ("div_after", "div_before", "no_scale"):
        net = _hardswish_net(form)
        m = MappingModel(rules, folds=("hardswish",)).apply(net)
        mn = m.network
        surv = "div6" if form == "div_after" else "mul"
        # pinned against its producer, but it may still absorb its consumer
        assert mn.names == ["x", "conv", surv], form
        i = mn.names.index(surv)
        assert mn.types[i] == T.HARDSWISH and mn.n_inputs[i] == 1
        assert mn.edges.tolist() == [[0, 1], [1, 2]]
        assert mn.in_elems[i] == net.out_elems[net.index("conv")]  # reads x once
        assert m.folded.sum() == len(net) - 4
        assert {net.names[j] for j in np.flatnonzero(m.fused_into == net.index(surv))} \
            == {"add3", "relu6", "mul", "div6", "conv2"} - ({"div6"} if form == "no_scale" else set())
    # without the fold nothing changes the five layers' types; a model without it leaves them alone
    net = _hardswish_net()
    assert MappingModel(rules).apply(net).network.names == net.names
    # both folds together: each pattern folds on its own
    both = MappingModel([], folds=("swish", "hardswish"))
    assert both.folds == ("swish", "hardswish")
    assert both.apply(_swish_net()).network.types.tolist() == [T.INPUT, T.CONV, T.SILU, T.CONV]
    assert both.apply(net).network.types.tolist() == [T.INPUT, T.CONV, T.HARDSWISH, T.CONV]


def test_folds_round_trip_and_bad_folds_fail_clearly():
    import pytest
    from annette_torch.errors import PlatformError
    m = MappingModel([FusionRule("ConvSiLU", ("Conv",), ("SiLU",))], folds=("swish",))
    d = m.to_dict()
    assert d["folds"] == ["swish"]
    assert MappingModel.from_dict(d).folds == ("swish",)
    assert "folds" not in MappingModel([]).to_dict()
    with pytest.raises(PlatformError, match="unknown fold.*'gelu'"):
        MappingModel.from_dict({"rules": [], "folds": ["gelu"]})
    with pytest.raises(PlatformError, match="folds: expected a list"):
        MappingModel.from_dict({"rules": [], "folds": "swish"})


def test_a_pass_cut_short_by_the_round_limit_warns(monkeypatch, caplog):
    """Each round adds one link to a chain: conv-bn-relu needs two, so a limit of one leaves the relu unfused
    and says so; the full limit fuses all and stays quiet."""
    import logging

    from annette_torch.mapping import model
    net = _chain(pool_kernel=3)
    with caplog.at_level(logging.WARNING, logger="annette_torch.mapping"):
        assert RULES.apply(net).network.names == ["x", "conv", "pool", "conv2"]
        assert not caplog.records
        monkeypatch.setattr(model, "MAX_FUSION_ROUNDS", 1)
        assert RULES.apply(net).network.names == ["x", "conv", "relu", "pool", "conv2"]
    assert "stopped after 1 fusion rounds" in caplog.text


def _shuffle_net(back_shape: bool = True, c: int = 16, hw: int = 8):
    """A ShuffleNet-style concat followed by a channel shuffle (view to 5-D, swap axes 1-2, view back), then a
    conv; with ``back_shape`` False the last view goes elsewhere (a window partition, not a shuffle)."""
    from annette_torch.ir import NetworkBuilder
    b = NetworkBuilder("n")
    x = b.input("x", (1, c, hw, hw))
    cat = b.concat("cat", [b.conv("a", x, c // 2, 1), b.conv("b", x, c // 2, 1)])
    v = b.add(T.RESHAPE, "view", [cat], (1, 2, c // 2, hw, hw))
    t = b.add(T.TRANSPOSE, "transpose", [v], (1, c // 2, 2, hw, hw))
    back = b.add(T.RESHAPE, "view_back", [t], (1, c, hw, hw) if back_shape else (1, c, hw // 2, hw * 2))
    b.conv("conv2", back, 4, 1)
    return b.build()


def _shipped_cpu_files():
    """The shipped ONNX Runtime and OpenVINO files: the defaults and the other machines' ones."""
    import glob
    from pathlib import Path
    import annette_torch as at
    root = at.platform.platform_dir()
    return [root / "openvino-cpu.json", root / "ort-cpu.json", *map(Path, glob.glob(str(root / "machines/*/*.json")))]


def test_channel_shuffle_fold_is_one_pinned_layer_after_the_concat():
    """OpenVINO runs a channel shuffle as one ShuffleChannels node after the Concat: with the ``shuffle`` fold the
    view, transpose and view back are one pinned ChannelShuffle layer that no rule fuses into the Concat; a view
    back to another shape (a window partition) is no shuffle."""
    from annette_torch.mapping import shuffle_groups
    net = _shuffle_net()
    assert [[net.names[i] for i in g] for g in shuffle_groups(net)] == [["view", "transpose", "view_back"]]
    assert shuffle_groups(_shuffle_net(back_shape=False)).shape == (0, 3)
    rules = [FusionRule("ConcatReshape", ("Concat",), ("Reshape",)), FusionRule("ConcatT", ("Concat",), ("Transpose",)),
             FusionRule("TReshape", ("Transpose",), ("Reshape",))]
    unfolded = MappingModel(rules).apply(net).network
    assert "view_back" not in unfolded.names  # the rules alone fuse the whole shuffle into the Concat
    m = MappingModel(rules, folds=("shuffle",)).apply(net)
    mn = m.network
    assert mn.names == ["x", "a", "b", "cat", "view_back", "conv2"]
    i = mn.names.index("view_back")
    assert mn.types[i] == T.CHANNEL_SHUFFLE and mn.in_elems[i] == mn.out_elems[i] == 16 * 8 * 8
    assert sorted(mn.names[s] + ">" + mn.names[d] for s, d in mn.edges if i in (s, d)) == ["cat>view_back",
                                                                                            "view_back>conv2"]
    assert m.folded.sum() == 2
    assert MappingModel([], folds=("shuffle",)).apply(_shuffle_net(back_shape=False)).network.names \
        == _shuffle_net(back_shape=False).names
    assert MappingModel.from_dict(MappingModel([], folds=("shuffle", "swish")).to_dict()).folds == ("swish", "shuffle")


def test_shipped_openvino_files_price_a_channel_shuffle_and_onnx_runtime_files_do_not_fold_it():
    """The OpenVINO files fold a channel shuffle into a ChannelShuffle layer priced by its own model (measured
    ShuffleChannels nodes); ONNX Runtime runs a Reshape, a Transpose and a Reshape, so its files do not fold."""
    import annette_torch as at
    from annette_torch.platform import Platform
    for path in _shipped_cpu_files():
        plat = Platform.load(path)
        ov = plat.name == "openvino-cpu"
        assert ("shuffle" in plat.mapping.folds) == ov, path
        rows = {r["name"]: r for r in at.estimate(_shuffle_net(c=96, hw=28), plat).table()}
        if ov:
            assert rows["view_back"]["type"] == "ChannelShuffle" and rows["view_back"]["time_ms"] > 0, path
            assert rows["view_back"]["model"].split()[0] == "mixed:ChannelShuffle", path
        else:
            assert rows["view_back"]["type"] != "ChannelShuffle", path


def _pad_net(dw: bool = True, second_reader: bool = False):
    """conv 1x1 -> Pad (TensorFlow "same", asymmetric) -> unpadded 3x3 stride-2 conv (depthwise with ``dw``)."""
    b = NetworkBuilder("tfpad")
    x = b.conv("lead", b.input("x", (1, 8, 16, 16)), 8, 1)
    p = b.add(T.PAD, "pad", [x], (1, 8, 17, 17))
    y = b.conv("conv", p, 8 if dw else 16, 3, 2, groups=8 if dw else 1)
    if second_reader:
        b.same(T.RELU, "other", p)
    b.same(T.RELU, "relu", y)
    return b.build()


def test_a_pad_read_by_one_convolution_folds_into_it():
    """With the ``pad`` fold (ONNX Runtime's PadFusion) an explicit Pad read by one convolution alone is part of
    that convolution, which reads the Pad's input (unpadded: fewer input elements); a Pad that something else
    reads as well stays a layer; the shipped CPU files fold Pads."""
    import annette_torch as at
    from annette_torch.mapping import pad_consumers
    from annette_torch.platform import Platform
    for dw in (True, False):
        net = _pad_net(dw)
        assert [[net.names[i] for i in g] for g in pad_consumers(net)] == [["pad", "conv"]]
        m = MappingModel([], folds=("pad",)).apply(net)
        mn = m.network
        assert mn.names == ["x", "lead", "conv", "relu"] and m.folded.sum() == 1
        i = mn.names.index("conv")
        assert mn.in_elems[i] == net.in_elems[net.names.index("conv")] - (17 * 17 - 16 * 16) * 8 == 8 * 16 * 16
        assert sorted(mn.names[a] + ">" + mn.names[b] for a, b in mn.edges) == ["conv>relu", "lead>conv", "x>lead"]
    assert pad_consumers(_pad_net(second_reader=True)).shape == (0, 2)
    assert "pad" in MappingModel([], folds=("pad",)).apply(_pad_net(second_reader=True)).network.names
    for path in _shipped_cpu_files():
        plat = Platform.load(path)
        rows = {r["name"]: r for r in at.estimate(_pad_net(), plat).table()}
        assert "pad" in plat.mapping.folds and rows["pad"]["time_ms"] == 0 and rows["pad"]["fused_into"] == "conv", path


def _path_add(activated: bool):
    """conv -> bn [-> relu] -> add(., x) -> relu: a residual path that ends in its BatchNorm or in a ReLU."""
    b = NetworkBuilder("res")
    x = b.input("x", (1, 8, 16, 16))
    y = b.same(T.BATCH_NORM, "bn", b.conv("conv", x, 8, 3, padding=1))
    if activated:
        y = b.same(T.RELU, "post", y)
    b.same(T.RELU, "relu", b.same(T.ADD, "add", [y, x]))
    return b.build()


def test_an_add_fuses_into_a_conv_only_before_the_conv_applied_an_activation():
    """Runtimes fuse a residual Add into the conv before it as act(conv + z): not after the conv's ReLU
    (NAS-Bench-101 cells sum activated paths). ``activated`` is the primary group's, updated as it fuses."""
    rules = MappingModel([FusionRule("ConvBatch", ("Conv",), ("BatchNorm",)),
                          FusionRule("ConvRelu", ("Conv",), ("Relu",)),
                          FusionRule("ConvAdd", ("Conv",), ("Add",), multi_input=True,
                                     when=(Condition("primary", "activated", "<=", 0),))])
    plain = rules.apply(_path_add(False))
    assert plain.network.names == ["x", "conv"]
    post = rules.apply(_path_add(True))
    assert post.network.names == ["x", "conv", "add", "relu"]  # (no Add+Relu rule here)
    # batched like one
    from annette_torch.ir import Network
    big, seg = Network.concat([_path_add(False), _path_add(True)])
    assert np.bincount(seg[rules.apply(big).kept]).tolist() == [2, 4]


def test_the_group_attribute_is_the_primarys_and_round_trips():
    from annette_torch.errors import PlatformError
    c = Condition.from_dict({"layer": "primary", "attr": "activated", "op": "<=", "value": 0}, "w")
    assert Condition.from_dict(c.to_dict(), "w") == c
    with pytest.raises(PlatformError, match="primary"):
        Condition.from_dict({"layer": "secondary", "attr": "activated", "op": "<=", "value": 0}, "w")
