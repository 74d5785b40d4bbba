"""Layer models with the original ANNETTE release's semantics, defects included (`AnnetteCompatPlatform`).

For comparing with results of the original tool only. Reproduced defects: layers served by ``Base`` (and
Concat) read only their first input, ``Add`` reads twice its first input; a ConvPool without its own model
falls back to ``Base`` (zero operations); the refined roofline of Conv/DepthwiseConv takes the unrolled "h"
dimension from the output width and applies only to layers that are compute-bound under the plain roofline.
"""

from __future__ import annotations

import numpy as np

from ..ir import LayerType as T
from ..ir import Network
from ..models import LayerFeatures
from ..models.refined import RefinedRoofline
from ..platform import Platform

__all__ = ["original_layer_models"]


def original_layer_models(plat: Platform, net: Network) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per layer: the original release's time, the model index, and the bytes and weight bytes it moves."""
    tables = plat.tables
    mi = tables.model_of_type[net.types]
    keys = np.array(tables.keys, dtype=object)[mi]
    base = np.array([m is plat.layers["Base"] for m in tables.models])[mi]
    n = net.n.astype(np.float64)
    first_in = n * net.c_in * net.h_in * net.w_in
    in_e = np.where(net.types == T.INPUT, 0.0, first_in)
    in_e = np.where(keys == "Add", 2 * first_in, in_e)
    cp = (net.types == T.CONV_POOL) & ~base
    in_e = np.where(cp, n * net.c_in * net.sh * net.sw * (net.h_in // np.maximum(net.sh, 1))
                    * (net.w_in // np.maximum(net.sw, 1)), in_e)
    out_e = np.where(base, n * net.c_out * net.h_out * net.w_out, net.out_elems)
    X = LayerFeatures.from_network(net)
    X = LayerFeatures(**{**X.__dict__, "in_elems": in_e, "out_elems": out_e,
                         "ops": np.where(base, 0.0, net.ops), "weights": np.where(base, 0.0, net.weights)})
    t = np.zeros(len(net))
    for m in np.unique(mi):
        rows = np.flatnonzero(mi == m)
        model = tables.models[m]
        Xs = X.take(rows)
        op_t, mem_t = model.roofs(Xs)  # type: ignore[attr-defined]
        tm = np.maximum(op_t, mem_t)
        if isinstance(model, RefinedRoofline):
            if any(p.get("replicate") for p in model.unroll.values()):
                Xs = LayerFeatures(**{**Xs.__dict__, "h_out": Xs.w_out, "w_out": Xs.h_out})
            tm = np.where(op_t > mem_t, op_t / model.efficiency(Xs), tm)
        t[rows] = tm
    wbytes = net.weights * tables.weight_bytes[mi]
    return t, mi, tables.layer_bytes(net), wbytes
