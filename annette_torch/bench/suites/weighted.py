"""Single-layer suites of the layers with weights: convolutions (plain, depthwise, grouped, transposed) and the
fully connected layer, each a builder with its vectorised analytic cost (and validity where some configs are
impossible)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir import LayerType, Network, NetworkBuilder
from .layers import add_act, add_conv, add_input, add_lead, same_out

__all__ = ["DECONV", "build_conv", "cost_conv", "build_dwconv", "cost_dwconv", "build_gconv", "cost_gconv",
           "valid_gconv", "build_gconv_same", "cost_gconv_same", "valid_gconv_same", "build_convtranspose",
           "cost_convtranspose", "build_fc", "cost_fc"]

T = LayerType


def build_conv(c: dict) -> Network:
    b = NetworkBuilder("conv")
    add_conv(b, "conv", add_lead(b, c, add_input(b, c)), int(c["f"]), int(c["k"]), int(c["s"]), d=int(c.get("d", 1)))
    return b.build()


def cost_conv(c):
    d = c.get("d", 1)
    eff = d * (c["k"] - 1) + 1
    ho = (c["h"] + 2 * (d * (c["k"] // 2)) - eff) // c["s"] + 1
    wo = (c["w"] + 2 * (d * (c["k"] // 2)) - eff) // c["s"] + 1
    n = c.get("n", 1)
    return (2 * n * ho * wo * c["f"] * c["c"] * c["k"] ** 2, n * (c["c"] * c["h"] * c["w"] + c["f"] * ho * wo),
            c["f"] * c["c"] * c["k"] ** 2)


def build_dwconv(c: dict) -> Network:
    b = NetworkBuilder("dwconv")
    add_conv(b, "dwconv", add_lead(b, c, add_input(b, c)), int(c["c"]), int(c["k"]), int(c["s"]), groups=int(c["c"]))
    return b.build()


def cost_dwconv(c):
    ho, wo = same_out(c["h"], c["s"]), same_out(c["w"], c["s"])
    return 2 * ho * wo * c["c"] * c["k"] ** 2, c["c"] * (c["h"] * c["w"] + ho * wo), c["c"] * c["k"] ** 2


def build_gconv(c: dict) -> Network:
    b = NetworkBuilder("gconv")
    add_conv(b, "gconv", add_lead(b, c, add_input(b, c)), int(c["f"]), int(c["k"]), int(c["s"]), groups=int(c["g"]))
    return b.build()


def cost_gconv(c):
    ho, wo = same_out(c["h"], c["s"]), same_out(c["w"], c["s"])
    cpg = c["c"] // c["g"]
    return (2 * ho * wo * c["f"] * cpg * c["k"] ** 2, c["c"] * c["h"] * c["w"] + c["f"] * ho * wo,
            c["f"] * cpg * c["k"] ** 2)


def valid_gconv(c):
    return (c["c"] % c["g"] == 0) & (c["f"] % c["g"] == 0) & (c["g"] < c["c"])


def build_gconv_same(c: dict) -> Network:
    return build_gconv({**c, "f": c["c"]})


def cost_gconv_same(c):
    return cost_gconv({**c, "f": c["c"]})


def valid_gconv_same(c):
    return (c["c"] % c["g"] == 0) & (c["g"] < c["c"])


#: (kernel, stride) pairs of the ``convtranspose`` suite: the decoders' upsampling layers (k2 s2, k4 s2 with one
#: pixel of padding per side: exactly twice the input) and a same-size k3 s1
DECONV = ["2x2", "4x2", "3x1"]


def _deconv(c) -> tuple[Any, Any]:
    """Kernel and stride from the ``ks`` parameter ("4x2"): ints for one configuration, arrays for columns."""
    ks = np.char.split(np.asarray(c["ks"], dtype=str), "x")
    k = np.array([int(v[0]) for v in np.atleast_1d(ks)])
    s = np.array([int(v[1]) for v in np.atleast_1d(ks)])
    return (k, s) if np.ndim(c["ks"]) else (int(k[0]), int(s[0]))


def build_convtranspose(c: dict) -> Network:
    b = NetworkBuilder("convtranspose")
    x = add_lead(b, c, add_input(b, c))
    n, _, h, w = b.out_shape(x)
    k, s = _deconv(c)
    p = k - s  # total padding: the output is exactly s times the input
    b.add(T.CONV_TRANSPOSE, "convtranspose", [x], (n, int(c["f"]), (h - 1) * s - p + k, (w - 1) * s - p + k),
          kernel=(k, k), stride=(s, s), padding=(p, p))
    return b.build()


def cost_convtranspose(c):
    k, s = _deconv(c)
    e = c["h"] * c["w"]
    return 2 * e * c["c"] * c["f"] * k ** 2, e * (c["c"] + c["f"] * s ** 2), c["c"] * c["f"] * k ** 2


def build_fc(c: dict) -> Network:
    b = NetworkBuilder("fc")
    x = b.input("x", (int(c["n"]), int(c["c"])))
    b.linear("fc", x, int(c["f"]))
    return b.build()


def cost_fc(c):
    return 2 * c["n"] * c["f"] * c["c"], c["n"] * (c["c"] + c["f"]), c["c"] * c["f"]


def build_fc_act(c: dict) -> Network:
    """A classifier's fully connected layer and its activation (AlexNet's and VGG's heads, MobileNetV3's)."""
    b = NetworkBuilder("fc_act")
    x = b.linear("fc", b.input("x", (int(c["n"]), int(c["c"]))), int(c["f"]))
    add_act(b, str(c["act"]), str(c["act"]), x)
    return b.build()


def cost_fc_act(c):
    ops, act, weights = cost_fc(c)
    return ops + c["n"] * c["f"], act + c["n"] * c["f"], weights
