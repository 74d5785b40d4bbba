"""Building blocks of the suites' networks (on a `NetworkBuilder`) and the output-size formulas their analytic
costs share.

Conventions: NCHW; convolutions use "same" padding (``k // 2`` per side, so the output is ``ceil(size / stride)``,
as the original ANNETTE generator's TensorFlow ``SAME``); pools use no padding; inputs are called ``x``.
"""

from __future__ import annotations

import numpy as np

from ...ir import LayerType, NetworkBuilder
from .base import SuiteError
from .values import ACT_KINDS

__all__ = ["ACT_TYPES", "LEADS", "TAILS", "SQUARE", "same_out", "pool_out", "add_conv", "add_act", "add_input",
           "add_lead", "add_tail", "tail_cost"]

T = LayerType

#: layer type of each activation kind (`ACT_KINDS`)
ACT_TYPES = {"relu": T.RELU, "relu6": T.RELU6, "leaky": T.LEAKY_RELU, "sigmoid": T.SIGMOID, "silu": T.SILU,
             "hardswish": T.HARDSWISH, "tanh": T.TANH, "gelu": T.GELU, "softplus": T.SOFTPLUS,
             "hardsigmoid": T.HARDSIGMOID}

#: ``lead`` values of the conv / gconv / gconv_same / dwconv / maxpool / avgpool / concat / slice suites: what produces
#: the measured layer's input(s)
LEADS = ("none", "dw1")
#: ``tail`` values of the conv_act / dw_act / stem suites: what consumes the activation (as `LEADS`)
TAILS = LEADS
#: ``hw`` argument of `add_input` for the suites with square inputs (one ``hw`` parameter)
SQUARE = ("hw", "hw")


def same_out(size, s):
    """Output size of an odd kernel with k // 2 padding per side and stride s."""
    return (size - 1) // s + 1


def pool_out(size, k, s):
    """Output size of an unpadded pool window ``k`` with stride ``s``."""
    return (size - k) // s + 1


def add_conv(b: NetworkBuilder, name: str, x: int, f: int, k: int, s: int = 1, groups: int = 1, d: int = 1) -> int:
    """A ``k x k`` convolution to ``f`` channels with "same" padding (dilated by ``d``)."""
    return b.conv(name, x, f, k, s, padding=d * (k // 2), dilation=d, groups=groups)


def add_act(b: NetworkBuilder, kind: str, name: str, x: int) -> int:
    """An activation layer of ``kind`` (`ACT_KINDS`; leaky ReLU with slope 0.01)."""
    try:
        t = ACT_TYPES[kind]
    except KeyError:
        raise SuiteError(f"unknown activation {kind!r}; choose from {ACT_KINDS}") from None
    return b.same(t, name, x, alpha=0.01 if t == T.LEAKY_RELU else None)


def add_input(b: NetworkBuilder, c: dict, name: str = "x", hw: tuple[str, str] = ("h", "w")) -> int:
    """The graph input ``(n, c, h, w)`` of a config; ``hw=("hw", "hw")`` for square suites."""
    if hw[0] == "hw":
        return b.input(name, (int(c.get("n", 1)), int(c["c"]), int(c["hw"]), int(c["hw"])))
    return b.input(name, (int(c.get("n", 1)), int(c["c"]), int(c[hw[0]]), int(c[hw[1]])))


def add_lead(b: NetworkBuilder, c: dict, x: int, name: str = "lead") -> int:
    """The measured layer's producer: the graph input itself (``none``) or a 1x1 depthwise conv (``dw1``).

    A runtime may run a layer fed by the graph input in another layout, with another kernel, than inside a
    network: OpenVINO's CPU plugin runs a max pool on the plain NCHW input 4-6x slower than after any conv
    (blocked layout), a depthwise conv ~30% slower. The cheapest conv in front gives the in-network layout.
    """
    return _add_dw1(b, c, "lead", x, name)


def add_tail(b: NetworkBuilder, c: dict, x: int) -> int:
    """The activation's consumer: none (the activation is the graph output) or a 1x1 depthwise conv (``dw1``).

    A runtime may not fuse an activation whose output is a graph output: ONNX Runtime folds a HardSwish into
    the convolution before it only when another layer reads it, as in every network.
    """
    return _add_dw1(b, c, "tail", x, "tail")


def tail_cost(c, o, ch):
    """(ops, activation elements, weights) the ``tail`` adds: a 1x1 depthwise conv over ``o`` elements."""
    on = np.asarray(c.get("tail", "none")) == "dw1"
    return on * 2 * o, on * o, on * ch


def _add_dw1(b: NetworkBuilder, c: dict, key: str, x: int, name: str) -> int:
    """``x`` when the config's ``key`` (``lead`` / ``tail``) is ``none``, a 1x1 depthwise conv on it when ``dw1``."""
    v = str(c.get(key, "none"))
    if v == "none":
        return x
    if v != "dw1":
        raise SuiteError(f"{key} must be one of {list(LEADS)}, got {v!r}")
    ch = b.out_shape(x)[1]
    return b.conv(name, x, ch, 1, groups=ch)
