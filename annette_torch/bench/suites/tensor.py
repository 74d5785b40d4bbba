"""Single-layer suites that move data with little or no arithmetic: channel concat, channel slice, a mean over one
axis, nearest upsampling."""

from __future__ import annotations

import numpy as np

from ...ir import LayerType, Network, NetworkBuilder
from .layers import add_input, add_lead

__all__ = ["build_concat", "cost_concat", "build_slice", "cost_slice", "build_reduce", "cost_reduce", "valid_reduce",
           "REDUCE_AXES", "build_resize", "cost_resize"]

T = LayerType


def build_concat(c: dict) -> Network:
    b = NetworkBuilder("concat")
    xs = [add_lead(b, c, add_input(b, c, f"x{j}"), "lead" if j == 0 else f"lead{j}") for j in range(int(c["inputs"]))]
    b.concat("concat", xs)
    return b.build()


def cost_concat(c):
    e = c["c"] * c["h"] * c["w"] * c["inputs"]
    return 0 * e, 2 * e, 0 * e


def build_slice(c: dict) -> Network:
    """Leading channels of a tensor (``drop`` % of them left out, at least one): NAS-Bench-101's channel
    truncation, a half of ShuffleNet's split."""
    b = NetworkBuilder("slice")
    x = add_lead(b, c, add_input(b, c))
    n, ch, h, w = b.out_shape(x)
    b.add(T.SLICE, "slice", [x], (n, _slice_keep(ch, c["drop"]), h, w))
    return b.build()


def _slice_keep(ch, drop):
    """Channels a slice keeps: ``100 - drop`` % of ``ch``, at least one and at most ``ch - 1``."""
    return np.maximum(np.minimum(np.asarray(ch) - 1, np.asarray(ch) * (100 - np.asarray(drop)) // 100), 1)


def cost_slice(c):
    e = c["c"] * c["h"] * c["w"]
    return 0 * e, e + _slice_keep(c["c"], c["drop"]) * c["h"] * c["w"], 0 * e


#: the axis a ``reduce`` configuration averages over, keeping it as 1: a feature map's width or height (the
#: two-step spatial mean of TensorFlow graphs' squeeze-excite blocks) or its channels
REDUCE_AXES = ["w", "h", "c"]


def build_reduce(c: dict) -> Network:
    """A mean over one axis of a feature map (ONNX ``ReduceMean``, keepdims)."""
    b = NetworkBuilder("reduce")
    x = add_input(b, c)
    n, ch, h, w = b.out_shape(x)
    b.add(T.REDUCE_MEAN, "reduce", [x], {"w": (n, ch, h, 1), "h": (n, ch, 1, w), "c": (n, 1, h, w)}[str(c["axis"])])
    return b.build()


def _reduce_out(c):
    axis = np.asarray(c["axis"], dtype=object)
    return np.where(axis == "w", c["c"] * c["h"], np.where(axis == "h", c["c"] * c["w"], c["h"] * c["w"]))


def cost_reduce(c):
    e = c["c"] * c["h"] * c["w"]
    return e, e + _reduce_out(c), 0 * e


def valid_reduce(c):
    """The averaged axis has more than one element."""
    axis = np.asarray(c["axis"], dtype=object)
    return np.where(axis == "w", c["w"] > 1, np.where(axis == "h", c["h"] > 1, c["c"] > 1))


def build_resize(c: dict) -> Network:
    b = NetworkBuilder("resize")
    x = add_input(b, c)
    n, ch, h, w = b.out_shape(x)
    sc = int(c["scale"])
    b.add(T.RESIZE, "resize", [x], (n, ch, h * sc, w * sc), mode="nearest")
    return b.build()


def cost_resize(c):
    e = c["c"] * c["h"] * c["w"]
    return e * c["scale"] ** 2, e * (1 + c["scale"] ** 2), 0 * e
