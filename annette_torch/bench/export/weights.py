"""Deterministic random weights shared by `to_onnx` and `to_module`, so both back ends compute the same.

Weights are float32 drawn per layer from ``numpy.random.default_rng([seed, crc32(layer name)])`` (He-scaled
normal weights, small biases; BatchNorm scale/bias/mean random, variance in [0.5, 1.5]): the same network,
seed and layer name give the same numbers on every machine, and one layer's weights do not depend on the
rest of the network.
"""

from __future__ import annotations

import math
import zlib
from typing import Sequence

import numpy as np

from ...ir import LayerType, Network
from .plan import CONV, MERGE, ExportError, Plan, where

__all__ = ["layer_params", "check_size"]

T = LayerType
_MAX_PROTO_BYTES = 2_000_000_000  # protobuf's 2 GB limit for one serialized model


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(name.encode("utf-8"))])


def _normal(rng: np.random.Generator, shape: Sequence[int], std: float) -> np.ndarray:
    return (rng.standard_normal(tuple(int(s) for s in shape), dtype=np.float32) * np.float32(std))


def layer_params(net: Network, plan: Plan, i: int, seed: int) -> dict[str, np.ndarray]:
    """The constant tensors of layer ``i`` (weights, biases, constant operands), by role (``W``, ``B``,
    ``scale``, ``bias``, ``mean``, ``var``, ``C``); empty for layers without any."""
    t = LayerType(int(net.types[i]))
    name = net.names[i]
    c_in, c_out = int(net.c_in[i]), int(net.c_out[i])
    if t in CONV or t == T.CONV_TRANSPOSE:
        g = max(int(net.groups[i]), 1)
        if c_in % g or c_out % g:
            raise ExportError(f"{where(net, i)}: {c_in} input and {c_out} output channels do not split into "
                              f"{g} groups")
        kh, kw = int(net.kh[i]), int(net.kw[i])
        rng = _rng(seed, name)
        if t == T.CONV_TRANSPOSE:
            w = _normal(rng, (c_in, c_out // g, kh, kw), math.sqrt(2.0 / max(c_in // g * kh * kw, 1)))
        else:
            w = _normal(rng, (c_out, c_in // g, kh, kw), math.sqrt(2.0 / max(c_in // g * kh * kw, 1)))
        return {"W": w, "B": _normal(rng, (c_out,), 0.01)}
    if t == T.FULLY_CONNECTED:
        rng = _rng(seed, name)
        return {"W": _normal(rng, (c_out, c_in), math.sqrt(2.0 / max(c_in, 1))), "B": _normal(rng, (c_out,), 0.01)}
    if t == T.BATCH_NORM:
        rng = _rng(seed, name)
        c = int(net.c_out[i])
        return {"scale": rng.uniform(0.5, 1.5, c).astype(np.float32), "bias": _normal(rng, (c,), 0.1),
                "mean": _normal(rng, (c,), 0.1), "var": rng.uniform(0.5, 1.5, c).astype(np.float32)}
    if t == T.LAYER_NORM:
        rng = _rng(seed, name)
        last = plan.shape(i)[-1]
        return {"scale": rng.uniform(0.5, 1.5, last).astype(np.float32), "bias": _normal(rng, (last,), 0.1)}
    if t in MERGE and len(plan.parents[i]) == 1:
        # x (op) constant: a per-channel constant, away from zero (safe for Div); a scalar when the layer says so
        # (attention's ``* scale``, which ONNX Runtime folds into the MatMul before it only when it is a scalar)
        rng = _rng(seed, name)
        if net.attr("scalar", i):
            return {"C": np.array(rng.uniform(0.5, 1.5), np.float32)}
        shape = (1, c_out) if plan.rank[i] == 2 else (1, c_out, 1, 1)
        return {"C": rng.uniform(0.5, 1.5, shape).astype(np.float32)}
    return {}


def check_size(net: Network) -> None:
    """Raise `ExportError` when ``net``'s float32 weights exceed the 2 GB limit of one ONNX protobuf."""
    total = 0.0
    for i in range(len(net)):
        t = net.types[i]
        if t in CONV or t in (T.CONV_TRANSPOSE, T.FULLY_CONNECTED):
            total += float(net.weights[i]) + float(net.c_out[i])
    if total * 4 > _MAX_PROTO_BYTES:
        raise ExportError(f"network {net.name!r}: {total * 4 / 1e9:.1f} GB of weights exceed the 2 GB limit of "
                          "one ONNX protobuf")
