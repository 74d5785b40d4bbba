"""Layer IR: hand-computed operation and parameter counts, shape folding, batching, input checks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from annette_torch.ir import IRError, LayerType as T, Network, NetworkBuilder, to_nchw


def _single(builder_fn):
    b = NetworkBuilder("t")
    x = b.input("x", (1, 16, 32, 32))
    builder_fn(b, x)
    return b.build()


def test_conv_ops_and_weights_match_hand_computation():
    net = _single(lambda b, x: b.conv("c", x, 32, 3, stride=2, padding=1))
    i = net.index("c")
    assert net.out_shape(i) == (1, 32, 16, 16)
    assert net.weights[i] == 32 * 16 * 3 * 3
    assert net.ops[i] == 2 * (16 * 16 * 32) * (16 * 3 * 3)
    assert net.types[i] == T.CONV


def test_depthwise_and_grouped_conv():
    net = _single(lambda b, x: (b.conv("dw", x, 16, 3, padding=1, groups=16), b.conv("g", x, 32, 3, padding=1, groups=4)))
    dw, g = net.index("dw"), net.index("g")
    assert net.types[dw] == T.DEPTHWISE_CONV and net.types[g] == T.GROUP_CONV
    assert net.weights[dw] == 16 * 9
    assert net.ops[dw] == 2 * 16 * 32 * 32 * 9
    assert net.weights[g] == 32 * 4 * 9
    assert net.ops[g] == 2 * 32 * 32 * 32 * 4 * 9


def test_kernel_taps_count_the_taps_that_read_the_input():
    """Share of a convolution's taps inside its input, per axis: a 3x3 conv of dilation d and padding d on a
    33-wide map has 33 outputs per tap position, the off-centre taps reach 33 - d of them (DeepLab's rates)."""
    b = NetworkBuilder("t")
    x = b.input("x", (1, 8, 33, 20))
    for d in (1, 6, 12, 18, 40):
        b.conv(f"d{d}", x, 8, 3, padding=d, dilation=d)
    b.conv("s2", x, 8, 3, stride=2, padding=1)
    b.conv("k1", x, 8, 1)
    b.pool("pool", x, "max", 3, 1, padding=1)
    net = b.build()
    share = np.exp(net.taps)
    for d in (1, 6, 12, 18, 40):
        i = net.index(f"d{d}")
        assert share[0, i] == pytest.approx((33 + 2 * max(33 - d, 0)) / 99)
        assert share[1, i] == pytest.approx((20 + 2 * max(20 - d, 0)) / 60)
    assert share[0, net.index("s2")] == pytest.approx((17 + 16 + 16) / 51)  # outputs 0..16, input 2o-1+i
    # the dilated part: below the same convolution undilated (padding 1), 0 for an undilated one
    undilated = net.taps[0, net.index("d1")] + net.taps[1, net.index("d1")]
    for d in (6, 18):
        i = net.index(f"d{d}")
        assert net.taps[2, i] == pytest.approx(net.taps[0, i] + net.taps[1, i] - undilated)
    for name in ("d1", "s2", "k1", "pool", "x"):
        assert net.taps[2, net.index(name)] == 0.0
    assert net.taps[:, net.index("k1")].tolist() == [0.0, 0.0, 0.0]
    assert net.taps[:, net.index("pool")].tolist() == [0.0, 0.0, 0.0]  # convolutions only
    assert net.taps[:, net.index("x")].tolist() == [0.0, 0.0, 0.0]


def test_linear_pool_bn_add_concat_counts():
    b = NetworkBuilder("t")
    x = b.input("x", (1, 8, 8, 8))
    p = b.pool("p", x, "max", 2)
    bn = b.same(T.BATCH_NORM, "bn", p)
    a = b.same(T.ADD, "add", [p, bn])
    c = b.concat("cat", [p, a])
    g = b.global_pool("gap", c)
    fc = b.linear("fc", g, 10)
    net = b.build()
    assert net.out_shape(p) == (1, 8, 4, 4)
    assert net.ops[p] == 2 * 8 * 4 * 4 * 4  # two ops per window element
    assert net.ops[bn] == 2 * 128 and net.weights[bn] == 16
    assert net.ops[a] == 128 and net.in_elems[a] == 256
    assert net.out_shape(c) == (1, 16, 4, 4) and net.ops[c] == 0 and net.in_elems[c] == 256
    assert net.ops[g] == 2 * 256
    assert net.weights[fc] == 16 * 10 and net.ops[fc] == 2 * 160
    assert net.in_elems[x] == 0  # network inputs read nothing


def test_shape_folding_keeps_element_count():
    assert to_nchw([5]) == (1, 5, 1, 1)
    assert to_nchw([2, 7]) == (2, 7, 1, 1)
    assert to_nchw([2, 3, 5]) == (2, 3, 5, 1)
    assert to_nchw([1, 2, 3, 4, 5]) == (1, 2, 12, 5)
    for bad in ([1, 0, 3], [1, -1, 4]):
        with pytest.raises(IRError, match="static input shape"):
            to_nchw(bad)


def test_concat_networks_keeps_rows_and_edges():
    nets = [_single(lambda b, x: b.conv("c", x, 8, 1)) for _ in range(3)]
    big, seg = Network.concat(nets)
    assert len(big) == 6 and list(seg) == [0, 0, 1, 1, 2, 2]
    assert big.edges.tolist() == [[0, 1], [2, 3], [4, 5]]
    np.testing.assert_array_equal(big.ops, np.concatenate([n.ops for n in nets]))


def test_bad_edges_are_rejected():
    b = NetworkBuilder("t")
    with pytest.raises(IRError):
        b.add(T.RELU, "r", [3], (1, 2, 3, 4))


@settings(max_examples=60, deadline=None)
@given(c=st.integers(1, 64), f=st.integers(1, 64), h=st.integers(1, 40), k=st.sampled_from([1, 3, 5, 7]),
       s=st.sampled_from([1, 2]))
def test_conv_ops_equal_two_macs(c, f, h, k, s):
    b = NetworkBuilder("t")
    x = b.input("x", (1, c, h + k, h + k))
    y = b.conv("c", x, f, k, stride=s)
    net = b.build()
    n, fo, ho, wo = net.out_shape(y)
    assert net.ops[y] == 2 * (fo * ho * wo) * (c * k * k)
    assert net.weights[y] * ho * wo * 2 == net.ops[y]
