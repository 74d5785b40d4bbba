"""In-context suites: a measured layer placed where a network would leave it. ``cold_weights`` runs a weighted
layer after a pool that streams a chosen amount of activations through the caches, so its weights are no
longer cached (`annette_torch.models.cache`)."""

from __future__ import annotations

import numpy as np

from ...ir import Network, NetworkBuilder
from .base import SuiteError
from .layers import add_act, add_conv

__all__ = ["COLD_LAYERS", "COLD_FLUSH_MB", "COLD_MAX_ACT_BYTES", "build_cold_weights", "cost_cold_weights",
           "valid_cold_weights"]

#: weighted layers of the cold_weights suite: kernel size (0 = fully connected)
COLD_LAYERS = {"fc": 0, "conv1": 1, "conv3": 3}
#: MB of activations the pool streams before the weighted layer. Up to 48 MB the traffic evicts the weights
#: from the private caches only: a server part's last-level cache (480 MB listed on the 2-core Xeon VM) still
#: held them, and FC weights streamed at ~23 GB/s there, where AlexNet's classifier (250 MB of traffic per
#: inference) streams at ~10 GB/s from DRAM. Hundreds of MB reach the DRAM regime the cache model's second tier
#: (`annette_torch.models.cache`) is fitted on.
COLD_FLUSH_MB = [0, 1, 2, 4, 8, 16, 32, 48, 96, 160, 256]
#: the suite's activation cap: the largest flush input (256 MB) plus the layer's own activations
COLD_MAX_ACT_BYTES = 320 * 2**20


def _cold_input_side(c):
    """Input side of a cold_weights config: ``s`` times the pool window that makes ~``flush`` MB of input."""
    want = np.sqrt(np.asarray(c["flush"], float) * 2**20 / (4.0 * np.asarray(c["c"], float)))
    r = np.maximum(1, np.round(want / np.asarray(c["s"], float))).astype(np.int64)
    return np.where(np.asarray(c["flush"]) > 0, r, 1) * c["s"]


def build_cold_weights(c: dict) -> Network:
    k = COLD_LAYERS.get(str(c["layer"]))
    if k is None:
        raise SuiteError(f"layer must be one of {list(COLD_LAYERS)}, got {c['layer']!r}")
    side = int(_cold_input_side(c))
    b = NetworkBuilder("cold_weights")
    x = b.input("x", (1, int(c["c"]), side, side))
    if k == 0:
        w = b.linear("w", b.global_pool("pool", x), int(c["f"]))
        if c.get("act", "none") != "none":  # (a classifier's activation, which a runtime may run inside the layer)
            add_act(b, str(c["act"]), "act", w)
    else:
        if side > int(c["s"]):
            x = b.pool("pool", x, "max", side // int(c["s"]))
        add_conv(b, "w", x, int(c["f"]), k)
    return b.build()


def cost_cold_weights(c):
    k = np.vectorize(lambda v: COLD_LAYERS.get(str(v), 0))(np.asarray(c["layer"], dtype=object)).astype(np.int64)
    side = _cold_input_side(c)
    s2 = np.where(k == 0, 1, np.asarray(c["s"])) ** 2  # fc: on the globally pooled 1 x 1 map whatever s
    k2 = np.maximum(k, 1) ** 2
    inp = c["c"] * side ** 2
    pooled = (k == 0) | (side > c["s"])  # fc: always a global pool; conv: a pool unless the input is s x s
    return (2 * s2 * c["c"] * c["f"] * k2 + np.where(pooled, 2 * inp, 0),  # pools: 2 ops per window element
            inp + np.where(pooled, c["c"] * s2, 0) + c["f"] * s2, c["c"] * c["f"] * k2)


def valid_cold_weights(c):
    layer = np.asarray(c["layer"], dtype=object)
    s = np.asarray(c["s"])
    # fc: on the 1 x 1 pooled map, any s (it only rounds the pooled input's side: rejecting s > 1 left FC a
    # tenth of the random draws, 7 of 50 in the quick plan, none with more than 16 MB of weights); a 3x3 conv
    # needs s >= 2 (on 1 x 1 only its centre tap reads weights)
    return np.where(layer == "fc", True, (np.asarray(c["c"]) <= 4096) & ((layer != "conv3") | (s >= 2)))
