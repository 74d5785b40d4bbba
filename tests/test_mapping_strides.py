"""Stride propagation (OpenVINO's StridesOptimization) as a shape rewrite of the mapping model."""

from __future__ import annotations

import numpy as np
import pytest

from annette_torch.bench.suites import SUITES
from annette_torch.errors import PlatformError
from annette_torch.ir import LayerType as T, Network, NetworkBuilder
from annette_torch.mapping import FusionRule, MappingModel
from annette_torch.mapping.strides import propagate_strides

THROUGH = (T.RELU, T.ADD, T.BATCH_NORM)


def _stage_end(relu_after_add: bool = True, dw: bool = False) -> Network:
    """The last bottleneck of a Caffe-ResNet stage, then the next stage's two stride-2 1x1 convs."""
    b = NetworkBuilder("stage")
    x = b.input("x", (1, 64, 56, 56))
    skip = b.conv("skip", x, 64, 1, 1)
    y = b.conv("b3x3", skip, 64, 3, 1, padding=1, groups=64 if dw else 1)
    y = b.same(T.BATCH_NORM, "bn", y)
    y = b.same(T.RELU, "relu", y)
    y = b.conv("b1x1", y, 64, 1, 1)
    y = b.same(T.ADD, "add", [y, skip])
    if relu_after_add:
        y = b.same(T.RELU, "relu_out", y)
    b.conv("next_a", y, 128, 1, 2)
    b.conv("next_proj", y, 256, 1, 2)
    return b.build()


def _shape(net: Network, name: str) -> tuple:
    i = net.index(name)
    return net.in_shape(i)[2:], net.out_shape(i)[2:], (int(net.cols["sh"][i]), int(net.cols["sw"][i]))


def test_stride_walks_up_to_the_3x3_conv():
    net = _stage_end()
    out = propagate_strides(net, THROUGH)
    # the strided 1x1 convs run with stride 1 on a quarter of the pixels
    assert _shape(out, "next_a") == ((28, 28), (28, 28), (1, 1))
    assert _shape(out, "next_proj") == ((28, 28), (28, 28), (1, 1))
    # through the relu, the add and the stride-1 1x1 conv, which all compute a quarter
    for name in ("relu_out", "add", "b1x1", "relu", "bn"):
        assert _shape(out, name)[1] == (28, 28), name
    assert _shape(out, "b1x1") == ((28, 28), (28, 28), (1, 1))
    # the 3x3 conv takes the stride on and stops the walk: its input is unchanged
    assert _shape(out, "b3x3") == ((56, 56), (28, 28), (2, 2))
    # the skip tensor has two readers asking different things: computed in full
    assert _shape(out, "skip") == ((56, 56), (56, 56), (1, 1))
    assert out.ops[out.index("b3x3")] == pytest.approx(net.ops[net.index("b3x3")] / 4)
    assert out.ops.sum() < 0.7 * net.ops.sum()
    # names, types and edges stay; the input network is not modified
    assert out.names == net.names and np.array_equal(out.edges, net.edges)
    assert _shape(net, "b3x3") == ((56, 56), (56, 56), (1, 1))


def test_refusing_producers_leave_the_network_as_written():
    # nothing passes a Relu here: the strided convs keep their strides
    net = _stage_end()
    assert propagate_strides(net, (T.ADD,)) is net
    # a depthwise conv does not take a stride on: the walk stops at the BatchNorm behind it, which still
    # computes a quarter (reading a subsampled copy); the depthwise conv computes in full
    dw = propagate_strides(_stage_end(dw=True), THROUGH)
    assert _shape(dw, "b3x3") == ((56, 56), (56, 56), (1, 1))
    assert _shape(dw, "bn") == ((28, 28), (28, 28), (1, 1))


def test_a_1x1_conv_whose_producer_refuses_keeps_the_combined_stride():
    b = NetworkBuilder("chain")
    x = b.input("x", (1, 32, 32, 32))
    y = b.conv("first", x, 32, 1, 2)   # asks the graph input, which refuses
    b.conv("second", y, 32, 1, 2)      # asks "first": it takes the stride on
    net = b.build()
    out = propagate_strides(net, THROUGH)
    assert _shape(out, "first") == ((32, 32), (8, 8), (4, 4))
    assert _shape(out, "second") == ((8, 8), (8, 8), (1, 1))


def test_row_order_does_not_matter():
    net = _stage_end()
    perm = np.random.default_rng(0).permutation(len(net))
    inv = np.argsort(perm)
    shuffled = Network(net.name, [net.names[i] for i in perm], net.types[perm],
                       {k: v[perm] for k, v in net.cols.items()}, inv[net.edges])
    a, b = propagate_strides(net, THROUGH), propagate_strides(shuffled, THROUGH)
    for name in net.names:
        assert _shape(a, name) == _shape(b, name), name


def test_mapping_model_rewrites_before_fusing_and_round_trips():
    net = _stage_end()
    rules = [FusionRule("Conv+BN", ("Conv",), ("BatchNorm",)), FusionRule("Conv+Relu", ("Conv",), ("Relu",))]
    plain = MappingModel(rules).apply(net)
    m = MappingModel(rules, strides=("Relu", "Add", "BatchNorm"))
    mp = m.apply(net)
    assert mp.source is not net and plain.source is net
    assert mp.network.names == plain.network.names  # the same layers fuse
    assert mp.network.ops.sum() < plain.network.ops.sum()
    d = m.to_dict()
    assert d["strides"] == {"through": ["Relu", "Add", "BatchNorm"]}
    back = MappingModel.from_dict(d)
    assert back.strides == m.strides and np.array_equal(back.apply(net).network.ops, mp.network.ops)
    assert "strides" not in MappingModel(rules).to_dict()
    # an empty list: strides pass 1x1 convs only
    assert MappingModel.from_dict({"rules": [], "strides": {"through": []}}).strides == ()


@pytest.mark.parametrize("bad", [["Relu"], {"through": "Relu"}, {"through": ["Relu", 3]}, {"through": ["Nope"]}])
def test_bad_strides_fail_clearly(bad):
    with pytest.raises(PlatformError, match="strides"):
        MappingModel.from_dict({"rules": [], "strides": bad})


def test_batched_rewrite_matches_single():
    nets = [_stage_end(), _stage_end(relu_after_add=False), _stage_end(dw=True)]
    m = MappingModel([], strides=("Relu", "Add", "BatchNorm"))
    big, seg = Network.concat(nets)
    batched = np.bincount(seg[m.apply(big).kept], weights=m.apply(big).network.ops)
    assert batched == pytest.approx([m.apply(n).network.ops.sum() for n in nets])


def _stride_measured(ratio: dict[str, float]):
    """``stride_prop`` configurations whose stride-2 path's 3x3 conv ran ``ratio[mid]`` times as long as the
    stride-1 path's."""
    from annette_torch.bench.records import NOT_FUSED, LayerRecord
    from annette_torch.fit.data import Measured
    suite = SUITES["stride_prop"]
    out = []
    for cfg in suite.configs(n=80, seed=0):
        net = suite.build(cfg)
        mid = "none" if "midA" not in net.names else T(int(net.types[net.index("midA")])).label
        if mid not in ratio:
            continue
        recs = {n: LayerRecord(n, T(int(net.types[i])).label, NOT_FUSED, node=n, time_ms=0.1)
                for i, n in enumerate(net.names)}
        recs["convA"] = LayerRecord("convA", "Conv", NOT_FUSED, node="convA", time_ms=0.1 * ratio[mid])
        out.append(Measured("stride_prop", cfg["config_id"], net, recs, []))
    return out


def test_stride_propagation_is_learned_per_middle_layer():
    from annette_torch.fit.data import learned_strides
    through, rep = learned_strides(_stride_measured({"none": 0.28, "Relu": 0.3, "SiLU": 1.05, "Add": 0.27}))
    assert through == ("Add", "Relu") and rep["verdict"] == "propagates"
    assert rep["SiLU"]["median_ratio"] == pytest.approx(1.05)
    assert learned_strides(_stride_measured({"none": 1.0, "Relu": 1.0}))[0] is None
    assert learned_strides([])[0] is None and "too few" in learned_strides([])[1]["verdict"]


def test_stride_prop_suite_builds_both_paths():
    suite = SUITES["stride_prop"]
    cfgs = suite.configs(n=40, seed=0)
    assert {c["mid"] for c in cfgs} >= {"none", "relu", "add", "bn"}
    for c in cfgs[:12]:
        net = suite.build(c)
        a, b = net.index("outA"), net.index("outB")
        assert net.cols["sh"][a] == 2 and net.cols["sh"][b] == 1 and net.cols["kh"][a] == 1
        assert net.out_shape(net.index("convA")) == net.out_shape(net.index("convB"))
