"""Network-level calibration at prediction time: the terms of an estimate and the fitted map from them to
the latency a platform's users measure end to end (fitted by `annette_torch.fit.calibrate_network`).

The terms: ``layers`` (the layer models' total), ``depthwise`` (its depthwise-convolution part),
``cpu_tail`` (millions of elements processed after the last conv / FC layer, i.e. host post-processing),
``constant`` (per inference), ``executed_layers`` (per executed node, for runtimes with a per-node cost) and
``weights`` (millions of weights the network loads per inference: on an accelerator that fetches every
layer's weights from DRAM, the part of that traffic a layer roofline's max(compute, memory) hides).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import PlatformError
from ..ir import LayerType, Network
from .base import check_number

__all__ = ["TERMS", "SIGNED_TERMS", "network_terms", "network_terms_many", "Calibration"]

TERMS = ("layers", "depthwise", "cpu_tail", "constant", "executed_layers", "weights")
#: terms whose coefficient may be negative (a per-node cost the profiled layer times over-count)
SIGNED_TERMS = ("executed_layers",)
_HEAVY = (LayerType.CONV, LayerType.DEPTHWISE_CONV, LayerType.GROUP_CONV, LayerType.CONV_POOL,
          LayerType.FULLY_CONNECTED, LayerType.CONV_TRANSPOSE)


def _cpu_tail_elems(net: Network) -> float:
    """Input elements of the layers after the last heavy (conv / FC) layer on every path."""
    heavy = np.isin(net.types, _HEAVY)
    children: list[list[int]] = [[] for _ in range(len(net))]
    for s, d in net.edges:
        children[int(s)].append(int(d))
    feeds_heavy = np.zeros(len(net), dtype=bool)
    for i in range(len(net) - 1, -1, -1):  # builders add layers in topological order
        feeds_heavy[i] = any(heavy[c] or feeds_heavy[c] for c in children[i])
    graph_input = (net.types == LayerType.INPUT) & (net.n_inputs == 0)
    tail = ~feeds_heavy & ~heavy & ~graph_input
    return float(net.in_elems[tail].sum())


def network_terms(est: Any) -> dict[str, float]:
    """The calibration terms of one `Estimate`: of its accelerator's part (layers the accelerator leaves to
    its host, and the switches to them, are not calibrated: `Estimate.e2e_ms` adds their time as it is)."""
    labels = est.mapped.network.types
    acc = est.accelerator_time_ms
    dw = float(acc[labels == LayerType.DEPTHWISE_CONV].sum())
    executed = int(np.count_nonzero(labels != LayerType.INPUT))
    return {"layers": est.accelerator_ms, "depthwise": dw, "cpu_tail": _cpu_tail_elems(est.network) / 1e6,
            "constant": 1.0, "executed_layers": float(executed), "weights": float(est.network.weights.sum()) / 1e6}


def network_terms_many(net: Network, segments: np.ndarray, mapped_types: np.ndarray, mapped_segments: np.ndarray,
                       mapped_time_ms: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """`network_terms` of ``n`` networks stacked into one (``Network.concat``), as arrays, in one pass.

    ``segments`` gives each original layer's network, ``mapped_*`` the executed layers' types, networks and
    accelerator times (0 for host-run layers). The tail (layers after the last heavy layer on every path) is
    found by propagating "feeds a heavy layer" backwards over the edge list to a fixed point, not layer by
    layer.
    """
    heavy = np.isin(net.types, _HEAVY)
    feeds = np.zeros(len(net), dtype=bool)
    if len(net.edges):
        src, dst = net.edges[:, 0], net.edges[:, 1]
        while True:
            nxt = feeds.copy()
            np.logical_or.at(nxt, src, heavy[dst] | feeds[dst])
            if np.array_equal(nxt, feeds):
                break
            feeds = nxt
    graph_input = (net.types == LayerType.INPUT) & (net.n_inputs == 0)
    tail = ~feeds & ~heavy & ~graph_input
    dw = mapped_types == LayerType.DEPTHWISE_CONV
    return {"layers": np.bincount(mapped_segments, weights=mapped_time_ms, minlength=n),
            "depthwise": np.bincount(mapped_segments[dw], weights=mapped_time_ms[dw], minlength=n),
            "cpu_tail": np.bincount(segments[tail], weights=np.asarray(net.in_elems, float)[tail], minlength=n) / 1e6,
            "constant": np.ones(n),
            "executed_layers": np.bincount(mapped_segments[mapped_types != LayerType.INPUT], minlength=n).astype(float),
            "weights": np.bincount(segments, weights=np.asarray(net.weights, float), minlength=n) / 1e6}


@dataclass
class Calibration:
    """Fitted coefficients per term; ``predict`` maps an estimate's terms to end-to-end ms."""

    coef: dict[str, float]
    loo_mape: float | None = None
    fitted_on: tuple[str, ...] = ()
    predicts: str = "end-to-end latency (ms)"

    def predict(self, terms: dict[str, float]) -> float:
        """End-to-end ms of one network from its terms."""
        return float(sum(self.coef.get(k, 0.0) * v for k, v in terms.items()))

    def predict_many(self, terms: dict[str, np.ndarray]) -> np.ndarray:
        """End-to-end ms of many networks from `network_terms_many`."""
        return sum((self.coef.get(k, 0.0) * v for k, v in terms.items()), np.zeros(len(terms["constant"])))

    def to_dict(self) -> dict[str, Any]:
        return {"predicts": self.predicts, "coef": self.coef, "loo_mape": self.loo_mape,
                "fitted_on": list(self.fitted_on)}

    @classmethod
    def from_dict(cls, d: Any, where: str) -> "Calibration":
        if not isinstance(d, dict) or not isinstance(d.get("coef"), dict):
            raise PlatformError(f"{where}.coef: expected an object of term -> coefficient")
        coef = {}
        for k in d["coef"]:
            if k not in TERMS:
                raise PlatformError(f"{where}.coef.{k}: unknown term (known: {', '.join(TERMS)})")
            coef[k] = check_number(d["coef"], k, f"{where}.coef", minimum=None if k in SIGNED_TERMS else 0)
        return cls(coef, d.get("loo_mape"), tuple(d.get("fitted_on", ())), str(d.get("predicts", "")))
