"""Per-kind scales for ``annette adapt``: how much faster or slower a device's runtime runs each kind of layer
(3x3 convolutions, 1x1 convolutions, pooling, elementwise layers) than the base platform predicts.

One factor for the whole network (the base file's terms times one factor) keeps the base platform's ranking;
a device whose runtime differs (a phone running TensorFlow Lite against ONNX Runtime on a server CPU) weighs
the kinds differently, and only a factor per kind changes the ranking. The model, on the base file's layer
times ``X[k]`` of each kind ``k`` (its own scale applied) and its per-layer and per-inference costs:

    latency = g * (sum_k f_k * X[k] + X[rest] + (per_layer + d) * executed_layers + c) + per_network

``g`` is free, each ``log f_k`` is pulled toward 0 (the base file's own proportions) by a ridge penalty of
weight ``lam`` times the kind's share of the time, ``d`` (a runtime's own cost per executed layer: eager
frameworks dispatch each layer from Python) toward 0 by ``lam`` times its share with ``per_layer + d >= 0``
(a layer costs no less than nothing; a negative cost lets ten latencies trade it against ``g`` and ``c``),
and ``c >= 0`` (a per-inference cost, fitted on request) by ``lam`` in units of the mean network time. The
fit minimises log errors (relative errors of fast and slow networks weigh alike) under a robust loss
(`LOSS`). Kinds below `MIN_SHARE` of the time stay under ``g`` alone. A network with no executed layer (a
constant) costs ``g * (per_network + c)`` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy.optimize import least_squares

from ..models.calibration import ramp_share

__all__ = ["KindData", "KindFit", "kind_data", "fit_kinds", "loo_kinds", "kind_of", "ELEMENTWISE", "MIN_SHARE",
           "LAMBDAS"]

#: layer types fitted as one kind: their time is a pass over a tensor's elements
ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div", "Relu", "Relu6", "LeakyRelu", "Sigmoid", "SiLU",
                         "HardSwish", "HardSigmoid", "GELU", "Tanh", "Softplus", "BatchNorm"})
_KERNEL_KINDS = frozenset({"Conv", "DepthwiseConv", "GroupConv", "ConvTranspose"})
#: a kind below this share of the networks' time is not fitted apart (it cannot be pinned down)
MIN_SHARE = 0.03
#: ridge weights tried by leave-one-out (large: the base file's proportions, small: the latencies' own)
LAMBDAS = (0.01, 0.1, 1.0, 10.0)
#: robust loss of the fit (a few odd latencies do not set the factors), on log errors beyond 0.1
LOSS = "soft_l1"


def kind_of(label: str, kh: int, kw: int) -> str:
    """The kind of an executed layer: a convolution with its kernel (``Conv 3x3``), ``elementwise`` for the
    `ELEMENTWISE` types, else its type (``AvgPool``, ``FullyConnected``)."""
    if label in _KERNEL_KINDS:
        return f"{label} {kh}x{kw}"
    return "elementwise" if label in ELEMENTWISE else label


@dataclass
class KindData:
    """Per network: the base file's time of each fitted kind (ms), of the rest, and its executed layers."""

    kinds: tuple[str, ...]
    X: np.ndarray
    rest: np.ndarray
    n_exec: np.ndarray
    #: the platform file's kind keys of each fitted kind (``elementwise``: the types it covered)
    keys: dict[str, tuple[str, ...]]

    def rows(self, idx: Any) -> "KindData":
        """The networks ``idx`` only."""
        return KindData(self.kinds, self.X[idx], self.rest[idx], self.n_exec[idx], self.keys)


def kind_data(estimates: Sequence[Any], scale: float, dw_scale: float, min_share: float = MIN_SHARE,
              ramp_ms: float = 0.0) -> KindData:
    """`KindData` of estimates by a platform without overhead (`calibrate.without_overhead`), the base
    overhead's ``scale`` (``dw_scale`` for depthwise convolutions) applied; with ``ramp_ms`` (the base file's per-
    layer ramp) a layer below it counts its share of an executed layer."""
    per: list[dict[str, float]] = []
    types_of: dict[str, set[str]] = {}
    n_exec = np.zeros(len(estimates))
    for i, e in enumerate(estimates):
        net = e.mapped.network
        t = e.mapped_time_ms
        labels = net.type_labels()
        kh, kw = net.cols["kh"], net.cols["kw"]
        d: dict[str, float] = {}
        for j, lab in enumerate(labels):
            if lab == "Input":
                continue
            k = kind_of(lab, int(kh[j]), int(kw[j]))
            d[k] = d.get(k, 0.0) + float(t[j]) * (dw_scale if lab == "DepthwiseConv" else scale)
            types_of.setdefault(k, set()).add(f"{lab} {kh[j]}x{kw[j]}" if lab in _KERNEL_KINDS else lab)
        n_exec[i] = float(ramp_share(t, ramp_ms)[np.array(labels) != "Input"].sum())
        per.append(d)
    total = np.array([sum(d.values()) for d in per])
    share = {k: float(np.mean([d.get(k, 0.0) for d in per] / np.maximum(total, 1e-12))) for k in types_of}
    kinds = tuple(sorted(k for k, s in share.items() if s >= min_share))
    X = np.array([[d.get(k, 0.0) for k in kinds] for d in per]).reshape(len(per), len(kinds))
    rest = total - X.sum(axis=1)
    return KindData(kinds, X, rest, n_exec, {k: tuple(sorted(types_of[k])) for k in kinds})


@dataclass
class KindFit:
    """The fitted factor ``g`` and per-kind factors (relative to ``g``); `predict` applies them. ``per_layer``
    is before ``g``, ``per_network`` (ms) after it."""

    g: float
    factors: dict[str, float]
    per_layer: float
    per_network: float

    def predict(self, data: KindData) -> np.ndarray:
        """Latency (ms) of the networks of ``data``."""
        f = np.array([self.factors[k] for k in data.kinds])
        return self.g * (data.X @ f + data.rest + self.per_layer * data.n_exec) + self.per_network

    def kind_scales(self, data: KindData) -> dict[str, float]:
        """The platform file's ``overhead.kind_scales`` entries (one per type and kernel of each kind)."""
        return {key: round(self.factors[k], 6) for k in data.kinds for key in data.keys[k]}


def fit_kinds(data: KindData, y: np.ndarray, per_layer: float, per_network: float, lam: float,
              constant: bool = False) -> KindFit:
    """Fit ``g`` and the per-kind factors to latencies ``y`` (ms); see the module docstring. ``constant``:
    fit a per-inference cost too (pulled toward the base's by ``lam`` in units of the mean network time)."""
    K = len(data.kinds)
    total = np.maximum(data.X.sum(axis=1) + data.rest, 1e-12)
    share = np.mean(data.X / total[:, None], axis=0) if K else np.zeros(0)
    ly = np.log(y)
    fixed = per_layer * data.n_exec
    # d in units of the mean layer time: d = u * unit, its penalty is its share of the time
    unit = float(np.mean(total) / max(np.mean(data.n_exec), 1.0))
    net_unit = float(np.mean(total))

    def pred(th: np.ndarray) -> np.ndarray:
        c = th[K + 2] * net_unit if constant else 0.0
        return (np.exp(th[0]) * (data.X @ np.exp(th[1:K + 1]) + data.rest + fixed + th[K + 1] * unit * data.n_exec + c)
                + per_network)

    def residuals(th: np.ndarray) -> np.ndarray:
        return np.concatenate([np.log(np.maximum(pred(th), 1e-12)) - ly,
                               np.sqrt(lam * share) * th[1:K + 1], np.sqrt(lam) * th[K + 1:]])

    base = np.maximum(data.X.sum(axis=1) + data.rest + fixed + per_network, 1e-12)
    P = K + 3 if constant else K + 2
    th0 = np.concatenate([[float(np.median(ly - np.log(base)))], np.zeros(P - 1)])
    lo = np.full(P, -np.inf)
    lo[K + 1] = -per_layer / unit  # a layer's own cost is never negative: per_layer + d >= 0
    th0[K + 1] = max(th0[K + 1], lo[K + 1] + 1e-9)
    if constant:
        lo[-1] = 0.0  # a per-inference cost is never negative
    th = least_squares(residuals, th0, method="trf", x_scale=1.0, loss=LOSS, f_scale=0.1,
                       bounds=(lo, np.full(P, np.inf))).x
    g = float(np.exp(th[0]))
    extra = float(th[K + 2]) * net_unit if constant else 0.0
    return KindFit(g, {k: float(np.exp(v)) for k, v in zip(data.kinds, th[1:K + 1])},
                   per_layer + float(th[K + 1]) * unit, per_network + g * extra)


def loo_kinds(data: KindData, y: np.ndarray, per_layer: float, per_network: float, lam: float,
              constant: bool = False) -> np.ndarray:
    """Absolute relative error of each network predicted by `fit_kinds` on all the others."""
    n = len(y)
    err = np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        fit = fit_kinds(data.rows(keep), y[keep], per_layer, per_network, lam, constant)
        err[i] = abs(fit.predict(data.rows([i]))[0] / y[i] - 1)
    return err
