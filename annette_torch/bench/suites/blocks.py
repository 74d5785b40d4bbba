"""Multi-layer suites of whole network blocks: ShuffleNet V2 units, squeeze-excite blocks, classifier heads;
each a builder with its vectorised analytic cost (and validity where some configs are impossible)."""

from __future__ import annotations

import numpy as np

from ...ir import LayerType, Network, NetworkBuilder
from .base import SuiteError
from .layers import SQUARE, add_act, add_conv, add_input, same_out

__all__ = ["SHUFFLE_CHANNELS", "SE_SPATIAL", "SE_CHANNELS", "SE_REDUCE", "SE_PROJECT", "SE_GATES", "build_shuffle",
           "cost_shuffle", "valid_shuffle", "build_se", "cost_se", "build_head", "cost_head", "valid_head"]

T = LayerType

#: channel counts of the shuffle suite: ShuffleNet V2 stage widths (x0.5 .. x2) and powers of two
SHUFFLE_CHANNELS = [24, 32, 48, 64, 96, 116, 128, 176, 192, 232, 244, 256, 352, 464, 488, 512, 976]


def _shuffle(b: NetworkBuilder, name: str, x: int, g: int) -> int:
    """Channel shuffle as the front ends see it: view to (n, g, c/g, h, w), swap axes 1-2, view back."""
    n, c, h, w = b.out_shape(x)
    x = b.add(T.RESHAPE, f"{name}_view", [x], (n, g, c // g, h, w))
    x = b.add(T.TRANSPOSE, f"{name}_transpose", [x], (n, c // g, g, h, w))
    return b.add(T.RESHAPE, f"{name}_view_back", [x], (n, c, h, w))


def _shuffle_branch(b: NetworkBuilder, name: str, x: int, f: int, s: int) -> int:
    """A unit's conv branch: 1x1 conv-bn-relu, 3x3 depthwise conv (stride ``s``)-bn, 1x1 conv-bn-relu."""
    x = b.same(T.RELU, f"{name}_relu1", b.same(T.BATCH_NORM, f"{name}_bn1", add_conv(b, f"{name}_pw1", x, f, 1)))
    x = b.same(T.BATCH_NORM, f"{name}_bn2", add_conv(b, f"{name}_dw", x, f, 3, s, groups=f))
    return b.same(T.RELU, f"{name}_relu3", b.same(T.BATCH_NORM, f"{name}_bn3", add_conv(b, f"{name}_pw2", x, f, 1)))


def build_shuffle(c: dict) -> Network:
    """ShuffleNet V2 units after a conv: split (one ``Slice`` layer, as the front ends trace ``chunk``), branch,
    concat, channel shuffle; a stride-2 first unit runs two branches on the whole input and doubles the width."""
    b = NetworkBuilder("shuffle")
    g, ch = int(c["g"]), int(c["c"])
    x = add_input(b, c, hw=SQUARE)
    x = b.same(T.RELU, "lead_relu", b.same(T.BATCH_NORM, "lead_bn", add_conv(b, "lead", x, ch, 1)))
    for u in range(int(c["depth"])):
        n, cc, h, w = b.out_shape(x)
        if u == 0 and int(c["s"]) == 2:
            left = b.same(T.BATCH_NORM, f"u{u}_b1_bn", add_conv(b, f"u{u}_b1_dw", x, cc, 3, 2, groups=cc))
            left = b.same(T.RELU, f"u{u}_b1_relu", b.same(T.BATCH_NORM, f"u{u}_b1_bn2",
                                                          add_conv(b, f"u{u}_b1_pw", left, cc, 1)))
            right = _shuffle_branch(b, f"u{u}_b2", x, cc, 2)
        else:
            left = b.add(T.SLICE, f"u{u}_split", [x], (n, cc // 2, h, w))
            right = _shuffle_branch(b, f"u{u}_b2", left, cc // 2, 1)
        x = _shuffle(b, f"u{u}_shuffle", b.concat(f"u{u}_cat", [left, right]), g)
    return b.build()


def cost_shuffle(c):
    def branch(e_in, e_o, f):  # pw1-bn-relu, dw3x3-bn, pw2-bn-relu
        return (2 * e_in * f + 3 * e_in + 20 * e_o + 2 * e_o * f + 3 * e_o, 3 * e_in + 5 * e_o, 2 * f * f + 15 * f)

    ch, hw, depth = (np.asarray(c[k], dtype=np.float64) for k in ("c", "hw", "depth"))
    s2 = np.asarray(c["s"]) == 2
    a = hw * hw * ch
    ops, act, wts = 2 * a * ch + 3 * a, 4 * a, ch * ch + 2 * ch   # input + lead conv-bn-relu
    for u in range(int(np.max(depth))):
        on = depth > u
        if u == 0:  # a stride-2 first unit: two branches on the whole input, width doubled
            ho = same_out(hw, 2)
            eo = ho * ho * ch
            bo, ba, bw = branch(hw * hw * ch, eo, ch)
            o2 = 2 * eo * ch + 23 * eo + bo
            a2 = 5 * eo + ba + 8 * eo
            w2 = 11 * ch + ch * ch + 2 * ch + bw
            hw, ch = np.where(s2, ho, hw), np.where(s2, 2 * ch, ch)
        e = hw * hw * ch
        bo, ba, bw = branch(e / 2, e / 2, ch / 2)
        o1, a1, w1 = bo, e / 2 + ba + 4 * e, bw
        if u == 0:
            o1, a1, w1 = np.where(s2, o2, o1), np.where(s2, a2, a1), np.where(s2, w2, w1)
        ops, act, wts = ops + on * o1, act + on * a1, wts + on * w1
    return ops, act, wts


def valid_shuffle(c):
    cc, g = np.asarray(c["c"]), np.asarray(c["g"])
    return (cc % (2 * g) == 0)


#: the se suite's values: spatial sizes and channel counts of EfficientNet / MobileNetV3 / MnasNet blocks, the
#: squeeze reduction (EfficientNet squeezes its expanded width 24-fold, MobileNetV3 4-fold) and project widths
SE_SPATIAL = [4, 7, 8, 14, 16, 28, 32, 56, 64, 112]
SE_CHANNELS = [16, 24, 32, 40, 48, 64, 72, 96, 120, 144, 192, 240, 288, 384, 480, 576, 672, 960, 1152]
SE_REDUCE = [4, 8, 16, 24]
SE_PROJECT = [16, 24, 40, 64, 80, 112, 160, 192, 320]
#: the se suite's gates: layer type of each ``gate`` value
SE_GATES = {"sigmoid": T.SIGMOID, "hardsigmoid": T.HARDSIGMOID}


def build_se(c: dict) -> Network:
    """A squeeze-excite block as in EfficientNet / MobileNetV3: depthwise 3x3 + activation, global average pool,
    1x1 squeeze + activation, 1x1 excite + gate, the channel-wise product (a broadcasting ``Mul``), a 1x1
    project conv; a global pool and flatten close it, so the graph ends in a plain-layout layer (a runtime's
    reorders inside the block are then all the product's, none at the graph output)."""
    b = NetworkBuilder("se")
    ch = int(c["c"])
    if str(c["gate"]) not in SE_GATES:
        raise SuiteError(f"unknown gate {c['gate']!r}; choose from {list(SE_GATES)}")
    x = add_act(b, str(c["act"]), "dw_act", add_conv(b, "dw", add_input(b, c, hw=SQUARE), ch, 3, groups=ch))
    s = add_act(b, str(c["act"]), "squeeze_act", add_conv(b, "squeeze", b.global_pool("se_pool", x),
                                                          max(1, ch // int(c["r"])), 1))
    g = b.same(SE_GATES[str(c["gate"])], "gate", add_conv(b, "excite", s, ch, 1))
    y = add_conv(b, "project", b.same(T.MUL, "scale", [x, g]), int(c["f"]), 1)
    n = b.out_shape(y)[0]
    b.add(T.FLATTEN, "flatten", [b.global_pool("pool", y)], (n, int(c["f"])))
    return b.build()


def cost_se(c):
    ch, hw, f = (np.asarray(c[k], dtype=np.float64) for k in ("c", "hw", "f"))
    sq = np.maximum(1, ch // np.asarray(c["r"]))
    e = hw * hw * ch
    ops = 22 * e + 4 * ch * sq + sq + ch + 2 * hw * hw * (ch + 1) * f
    return ops, 4 * e + 3 * ch + 2 * sq + hw * hw * f + 2 * f, 9 * ch + 2 * ch * sq + ch * f


def build_head(c: dict) -> Network:
    """A classifier head as in AlexNet / VGG / small landmark nets: 1x1 conv + ReLU, optionally a 2x2 max pool,
    then Flatten of the whole feature map into a fully connected layer. The only suite whose Flatten reads
    more than a pooled vector: elsewhere it sees <= a few thousand elements and extrapolated to 20x its cost."""
    b = NetworkBuilder("head")
    x = b.same(T.RELU, "relu", add_conv(b, "conv", add_input(b, c, hw=SQUARE), int(c["c"]), 1))
    if c["pool"] == "max":
        x = b.pool("pool", x, "max", 2)
    elif c["pool"] != "none":
        raise SuiteError(f"pool must be 'none' or 'max', got {c['pool']!r}")
    n, ch, h, w = b.out_shape(x)
    b.linear("fc", b.add(T.FLATTEN, "flatten", [x], (n, ch * h * w)), int(c["f"]))
    return b.build()


def cost_head(c):
    a = c["hw"] ** 2 * c["c"]
    pool = np.asarray(c["pool"]) == "max"
    p = np.where(pool, (np.asarray(c["hw"]) // 2) ** 2 * c["c"], a)  # the flattened elements
    return (2 * a * c["c"] + a + pool * 8 * p + 2 * p * c["f"], 3 * a + (1 + pool) * p + c["f"],
            c["c"] * c["c"] + p * c["f"])


def valid_head(c):
    return (np.asarray(c["pool"]) == "none") | (np.asarray(c["hw"]) >= 2)
