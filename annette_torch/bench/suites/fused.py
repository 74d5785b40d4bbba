"""Multi-layer suites of fusion patterns (the shapes of the paper's Fig. 4 and what mobile networks add):
a convolution followed by normalisation, activation, pool, multiply or a second path; each a builder with
its vectorised analytic cost (and validity where some configs are impossible)."""

from __future__ import annotations

import numpy as np

from ...ir import LayerType, Network, NetworkBuilder
from .base import SuiteError
from .layers import ACT_TYPES, SQUARE, add_act, add_conv, add_input, add_tail, pool_out, same_out, tail_cost
from .values import ACTIVATIONS
from .weighted import cost_gconv

__all__ = ["CONV_MUL_KINDS", "STRIDE_MIDS", "BRANCH_KERNELS", "build_conv_bn_relu", "cost_conv_bn_relu",
           "build_gconv_bn_relu", "cost_gconv_bn_relu", "build_conv_pool", "cost_conv_pool", "valid_conv_pool",
           "RESIDUAL_POST", "build_residual", "cost_residual", "valid_residual", "build_concat_branches",
           "cost_concat_branches",
           "build_dwsep", "cost_dwsep", "build_conv_act", "cost_conv_act", "build_conv_mul", "cost_conv_mul",
           "build_stride_prop", "cost_stride_prop", "build_stem", "cost_stem", "build_dw_act", "cost_dw_act",
           "build_preact", "cost_preact", "PREACT_GROWTH"]

T = LayerType

def build_conv_bn_relu(c: dict) -> Network:
    b = NetworkBuilder("conv_bn_relu")
    x = add_input(b, c, hw=SQUARE)
    for j in range(1, int(c["depth"]) + 1):
        x = add_conv(b, f"conv{j}", x, int(c["f"]), int(c["k"]), int(c["s"]) if j == 1 else 1)
        x = b.same(T.BATCH_NORM, f"bn{j}", x)
        x = b.same(T.RELU, f"relu{j}", x)
    return b.build()


def cost_conv_bn_relu(c):
    ho = same_out(c["hw"], c["s"])
    o = ho * ho * c["f"]
    k2 = c["k"] ** 2
    d = c["depth"]
    ops = 2 * o * c["c"] * k2 + (d - 1) * 2 * o * c["f"] * k2 + d * 3 * o
    return ops, c["c"] * c["hw"] ** 2 + d * 3 * o, c["f"] * c["c"] * k2 + (d - 1) * c["f"] ** 2 * k2 + d * 2 * c["f"]


#: channels the growth convolution of a `build_preact` block adds (DenseNet's growth rates)
PREACT_GROWTH = [12, 24, 32, 48]


def build_preact(c: dict) -> Network:
    """A pre-activation (DenseNet) layer: the input and a 3x3 growth conv of it concatenated, BatchNorm, ReLU,
    then a conv (kernel ``k``): a BatchNorm with no convolution before it to fold into, whose ReLU a runtime
    may run inside it (OpenVINO does)."""
    b = NetworkBuilder("preact")
    x = add_input(b, c, hw=SQUARE)
    y = b.concat("cat", [x, add_conv(b, "grow", x, int(c["g"]), 3)])
    add_conv(b, "conv", b.same(T.RELU, "relu", b.same(T.BATCH_NORM, "bn", y)), int(c["f"]), int(c["k"]))
    return b.build()


def cost_preact(c):
    s, ch, g = c["hw"] ** 2, c["c"], c["g"]
    cat = s * (ch + g)
    ops = 2 * s * g * ch * 9 + 3 * cat + 2 * s * c["f"] * (ch + g) * c["k"] ** 2
    return ops, 4 * cat + s * c["f"], g * ch * 9 + 2 * (ch + g) + c["f"] * (ch + g) * c["k"] ** 2


def build_gconv_bn_relu(c: dict) -> Network:
    """A grouped conv + BN + ReLU as in RegNet / ResNeXt blocks (c = f): the only multi-layer suite whose
    convolution is grouped, so the only source of fusion rules for GroupConv."""
    b = NetworkBuilder("gconv_bn_relu")
    x = add_conv(b, "conv", add_input(b, c, hw=SQUARE), int(c["c"]), int(c["k"]), int(c["s"]), groups=int(c["g"]))
    b.same(T.RELU, "relu", b.same(T.BATCH_NORM, "bn", x))
    return b.build()


def cost_gconv_bn_relu(c):
    ops, act, wts = cost_gconv({**c, "h": c["hw"], "w": c["hw"], "f": c["c"]})  # the conv; BN + ReLU per output:
    o = same_out(c["hw"], c["s"]) ** 2 * c["c"]
    return ops + 3 * o, act + 2 * o, wts + 2 * c["c"]


def build_conv_pool(c: dict) -> Network:
    b = NetworkBuilder("conv_pool")
    x = add_conv(b, "conv", add_input(b, c, hw=SQUARE), int(c["f"]), int(c["k"]), 1)
    b.pool("pool", x, str(c["pool"]), int(c["pk"]), int(c["ps"]))
    return b.build()


def cost_conv_pool(c):
    o = c["hw"] ** 2 * c["f"]
    po = pool_out(c["hw"], c["pk"], c["ps"]) ** 2 * c["f"]
    return (2 * o * c["c"] * c["k"] ** 2 + 2 * po * c["pk"] ** 2, c["c"] * c["hw"] ** 2 + o + po,
            c["f"] * c["c"] * c["k"] ** 2)


def valid_conv_pool(c):
    return c["pk"] <= c["hw"]


#: ``post`` values of the residual suite: what ends each path before the add (``none``: its BatchNorm, as in
#: ResNets; ``relu``: a ReLU after it, as NAS-Bench-101 cells and Inception-ResNet sum activated paths)
RESIDUAL_POST = ("none", "relu")


def build_residual(c: dict) -> Network:
    """conv-bn-relu-conv-bn plus a shortcut, added, ReLU; with ``post="relu"`` each path ends in a ReLU before
    the add (a runtime that fuses the add into the convolution before it as ``act(conv + z)`` cannot then)."""
    b = NetworkBuilder("residual")
    x = add_input(b, c, hw=SQUARE)
    f, k, s = int(c["f"]), int(c["k"]), int(c["s"])
    post = str(c.get("post", "none"))
    if post not in RESIDUAL_POST:
        raise SuiteError(f"post must be one of {', '.join(RESIDUAL_POST)}, got {post!r}")
    y = add_conv(b, "conv1", x, f, k, s)
    y = b.same(T.BATCH_NORM, "bn1", y)
    y = b.same(T.RELU, "relu1", y)
    y = add_conv(b, "conv2", y, f, k, 1)
    y = b.same(T.BATCH_NORM, "bn2", y)
    if post == "relu":
        y = b.same(T.RELU, "post", y)
    if c["shortcut"] == "projection":
        x = add_conv(b, "proj", x, f, 1, s)
        x = b.same(T.BATCH_NORM, "proj_bn", x)
        if post == "relu":
            x = b.same(T.RELU, "proj_post", x)
    elif c["shortcut"] != "identity":
        raise SuiteError(f"shortcut must be 'identity' or 'projection', got {c['shortcut']!r}")
    y = b.same(T.ADD, "add", [y, x])
    b.same(T.RELU, "relu2", y)
    return b.build()


def cost_residual(c):
    ho = same_out(c["hw"], c["s"])
    o = ho * ho * c["f"]
    k2 = c["k"] ** 2
    proj = np.asarray(c["shortcut"] == "projection", dtype=np.int64)
    post = (np.asarray(c.get("post", "none")) == "relu").astype(np.int64) * (1 + proj)  # the paths' ReLUs
    ops = (2 * o * c["c"] * k2 + 3 * o + 2 * o * c["f"] * k2 + 2 * o + proj * (2 * o * c["c"] + 2 * o) + 2 * o
           + post * o)
    act = c["c"] * c["hw"] ** 2 + o * (7 + 2 * proj + post)
    wts = c["f"] * c["c"] * k2 + c["f"] ** 2 * k2 + 4 * c["f"] + proj * (c["f"] * c["c"] + 2 * c["f"])
    return ops, act, wts


def valid_residual(c):
    return (c["shortcut"] == "projection") | ((c["s"] == 1) & (c["c"] == c["f"]))


#: kernels of the concat_branches suite's parallel convs, one per branch in this order
BRANCH_KERNELS = (1, 3, 5, 7)


def build_concat_branches(c: dict) -> Network:
    b = NetworkBuilder("concat_branches")
    x = add_input(b, c, hw=SQUARE)
    ys = [add_conv(b, f"conv{j + 1}", x, int(c["f"]), BRANCH_KERNELS[j % 4]) for j in range(int(c["branches"]))]
    b.concat("concat", ys)
    return b.build()


def cost_concat_branches(c):
    o = c["hw"] ** 2 * c["f"]
    ksum = sum(np.where(c["branches"] > j, BRANCH_KERNELS[j] ** 2, 0) for j in range(4))
    return 2 * o * c["c"] * ksum, c["c"] * c["hw"] ** 2 + 2 * o * c["branches"], c["f"] * c["c"] * ksum


def build_dwsep(c: dict) -> Network:
    b = NetworkBuilder("dwsep")
    x = add_input(b, c, hw=SQUARE)
    x = add_conv(b, "dw", x, int(c["c"]), int(c["k"]), int(c["s"]), groups=int(c["c"]))
    x = b.same(T.BATCH_NORM, "dw_bn", x)
    x = b.same(T.RELU6, "dw_relu6", x)
    x = add_conv(b, "pw", x, int(c["f"]), 1)
    x = b.same(T.BATCH_NORM, "pw_bn", x)
    b.same(T.RELU6, "pw_relu6", x)
    return b.build()


def cost_dwsep(c):
    ho = same_out(c["hw"], c["s"])
    a, o = ho * ho * c["c"], ho * ho * c["f"]
    ops = 2 * a * c["k"] ** 2 + 3 * a + 2 * o * c["c"] + 3 * o
    return ops, c["c"] * c["hw"] ** 2 + 3 * a + 3 * o, c["c"] * c["k"] ** 2 + 2 * c["c"] + c["f"] * c["c"] + 2 * c["f"]


def build_conv_act(c: dict) -> Network:
    b = NetworkBuilder("conv_act")
    x = add_conv(b, "conv", add_input(b, c, hw=SQUARE), int(c["f"]), int(c["k"]), 1)
    add_tail(b, c, add_act(b, str(c["act"]), str(c["act"]), x))
    return b.build()


def cost_conv_act(c):
    o = c["hw"] ** 2 * c["f"]
    t = tail_cost(c, o, c["f"])
    return (2 * o * c["c"] * c["k"] ** 2 + o + t[0], c["c"] * c["hw"] ** 2 + 2 * o + t[1],
            c["f"] * c["c"] * c["k"] ** 2 + t[2])


def _tf_pad(hw, k, s):
    """Total padding of TensorFlow's "same" convolution of kernel ``k``, stride ``s`` (asymmetric when odd);
    vectorised over config columns."""
    return np.maximum((-(-hw // s) - 1) * s + k - hw, 0)


def build_pad_conv(c: dict) -> Network:
    """A 1x1 conv, an explicit Pad ("same" padding as TensorFlow and Keras graphs write it) and an unpadded
    ``k x k`` convolution (depthwise with ``dw``) reading the Pad alone: whether the runtime folds the Pad in."""
    b = NetworkBuilder("pad_conv")
    hw, k, s = int(c["hw"]), int(c["k"]), int(c["s"])
    x = add_conv(b, "lead", add_input(b, c, hw=SQUARE), int(c["c"]), 1)
    n, ch, _, _ = b.out_shape(x)
    p = int(_tf_pad(hw, k, s))
    x = b.add(T.PAD, "pad", [x], (n, ch, hw + p, hw + p))
    f = ch if c["dw"] else int(c["f"])
    b.conv("conv", x, f, k, s, groups=ch if c["dw"] else 1)
    return b.build()


def cost_pad_conv(c):
    hw, k, s = np.asarray(c["hw"]), np.asarray(c["k"]), np.asarray(c["s"])
    dw = np.asarray(c["dw"]).astype(bool)
    ho = -(-hw // s)
    padded = hw + _tf_pad(hw, k, s)
    f = np.where(dw, c["c"], c["f"])
    per_out = np.where(dw, 1, c["c"])
    a = hw * hw * c["c"]
    o = ho * ho * f
    return (2 * a * c["c"] + 2 * o * per_out * k * k, 2 * a + padded ** 2 * c["c"] + o,
            c["c"] * c["c"] + f * per_out * k * k)


#: ``kind`` values of the conv_mul suite
CONV_MUL_KINDS = ["swish", "product", "hardswish"]


def build_conv_mul(c: dict) -> Network:
    """A conv whose output is multiplied element-wise (same shapes): by its own sigmoid (``swish``: SiLU
    written out, as YOLOv5 and older ONNX exports have it), by a parallel 1x1 conv's output (``product``), or
    by ``relu6(y + 3)`` and then divided by 6 (``hardswish``: ``y * relu6(y + 3) / 6``, hard-swish written out
    as in MobileNetV3 exports; the constants are per-channel here)."""
    b = NetworkBuilder("conv_mul")
    x = add_input(b, c, hw=SQUARE)
    y = add_conv(b, "conv", x, int(c["f"]), int(c["k"]), 1)
    kind = str(c["kind"])
    if kind == "swish":
        other = b.same(T.SIGMOID, "sigmoid", y)
    elif kind == "product":
        other = add_conv(b, "conv2", x, int(c["f"]), 1)
    elif kind == "hardswish":
        other = b.same(T.RELU6, "relu6", b.same(T.ADD, "add3", y))
    else:
        raise SuiteError(f"unknown kind {c['kind']!r}; choose from {CONV_MUL_KINDS}")
    m = b.same(T.MUL, "mul", [y, other])
    if kind == "hardswish":
        b.same(T.DIV, "div6", m)
    return b.build()


def cost_conv_mul(c):
    o = c["hw"] ** 2 * c["f"]
    kind = np.asarray(c["kind"])
    swish, hard = kind == "swish", kind == "hardswish"
    # after the conv and the Mul: the sigmoid (o), the 1x1 conv (2*o*c), or the add, relu6 and div (3*o)
    ops = 2 * o * c["c"] * c["k"] ** 2 + o + np.where(swish, o, np.where(hard, 3 * o, 2 * o * c["c"]))
    act = c["c"] * c["hw"] ** 2 + np.where(hard, 5, 3) * o
    return ops, act, c["f"] * c["c"] * (c["k"] ** 2 + np.where(swish | hard, 0, 1))


#: the layer between the 3x3 conv and the strided 1x1 conv of the ``stride_prop`` suite: nothing, an
#: activation (`ACTIVATIONS`), a BatchNorm, or an element-wise Add / Mul with a 1x1 conv of the input
STRIDE_MIDS = ["none", *ACTIVATIONS, "bn", "add", "mul"]
_MID_MERGE = {"add": T.ADD, "mul": T.MUL}


def _mid_type(mid: str) -> LayerType | None:
    """The layer type of a ``stride_prop`` middle layer (None for ``none``)."""
    if mid == "none":
        return None
    if mid == "bn":
        return T.BATCH_NORM
    if mid in _MID_MERGE:
        return _MID_MERGE[mid]
    if mid in ACT_TYPES:
        return ACT_TYPES[mid]
    raise SuiteError(f"unknown middle layer {mid!r}; choose from {STRIDE_MIDS}")


def _stride_path(b: NetworkBuilder, c: dict, x: int, tag: str, s: int) -> None:
    """3x3 conv -> middle layer -> 1x1 conv with stride ``s``; layer names end in ``tag``."""
    y = add_conv(b, f"conv{tag}", x, int(c["f"]), 3)
    t = _mid_type(str(c["mid"]))
    if t in (T.ADD, T.MUL):
        y = b.same(t, f"mid{tag}", [y, add_conv(b, f"side{tag}", x, int(c["f"]), 1)])
    elif t is not None:
        y = b.same(t, f"mid{tag}", y, alpha=0.01 if t == T.LEAKY_RELU else None)
    add_conv(b, f"out{tag}", y, int(c["f"]), 1, s)


def build_stride_prop(c: dict) -> Network:
    """Two paths from one input: 3x3 conv -> middle layer -> 1x1 conv with stride 2 (``A``), and the same with
    stride 1 (``B``). A toolchain propagating strides runs conv ``convA`` at a quarter of ``convB``'s work
    when the stride passes the middle layer (`annette_torch.mapping.strides`)."""
    b = NetworkBuilder("stride_prop")
    x = add_input(b, c, hw=SQUARE)
    _stride_path(b, c, x, "A", 2)
    _stride_path(b, c, x, "B", 1)
    return b.build()


def cost_stride_prop(c):
    o = c["hw"] ** 2 * c["f"]
    o2 = ((c["hw"] - 1) // 2 + 1) ** 2 * c["f"]  # the stride-2 1x1 conv's output
    mid = np.asarray(c["mid"]).astype(str)
    side = np.isin(mid, list(_MID_MERGE))
    bn = mid == "bn"
    has = mid != "none"
    mid_ops = np.where(bn, 2, np.where(has, 1, 0)) * o  # BatchNorm 2 per element, the rest 1
    path = 2 * o * c["c"] * 9 + mid_ops + np.where(side, 2 * o * c["c"], 0)
    ops = 2 * path + 2 * (o + o2) * c["f"]
    act = c["c"] * c["hw"] ** 2 + 2 * o * (1 + has + side) + o + o2
    wts = 2 * (c["f"] * c["c"] * (9 + side) + c["f"] ** 2 + 2 * c["f"] * bn)
    return ops, act, wts


def build_stem(c: dict) -> Network:
    b = NetworkBuilder("stem")
    x = add_conv(b, "conv", add_input(b, c, hw=SQUARE), int(c["f"]), int(c["k"]), int(c["s"]))
    x = b.same(T.BATCH_NORM, "bn", x)
    add_tail(b, c, add_act(b, str(c["act"]), "act", x))
    return b.build()


def cost_stem(c):
    ho = same_out(c["hw"], c["s"])
    o = ho * ho * c["f"]
    t = tail_cost(c, o, c["f"])
    return (2 * o * c["c"] * c["k"] ** 2 + 3 * o + t[0], c["c"] * c["hw"] ** 2 + 3 * o + t[1],
            c["f"] * c["c"] * c["k"] ** 2 + 2 * c["f"] + t[2])


def build_dw_act(c: dict) -> Network:
    b = NetworkBuilder("dw_act")
    x = add_input(b, c, hw=SQUARE)
    x = add_conv(b, "dw", x, int(c["c"]), int(c["k"]), 1, groups=int(c["c"]))
    add_tail(b, c, add_act(b, str(c["act"]), str(c["act"]), x))
    return b.build()


def cost_dw_act(c):
    o = c["hw"] ** 2 * c["c"]
    t = tail_cost(c, o, c["c"])
    return 2 * o * c["k"] ** 2 + o + t[0], c["c"] * c["hw"] ** 2 + 2 * o + t[1], c["c"] * c["k"] ** 2 + t[2]
