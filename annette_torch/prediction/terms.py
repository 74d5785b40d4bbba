"""Network-level terms and totals: the one place a network's latency is made from its layers' times.

``device`` latency is the executed layers' sum. ``latency`` is what the platform's users measure: on a
platform with an end-to-end calibration (`annette_torch.models.calibration`) its fitted map of the terms
below, computed over the accelerator's part of the times, plus the host-run layers and switches as they are
(no end-to-end model scales them); elsewhere the layer sum.

The terms (see `annette_torch.models.calibration.TERMS`): ``layers``, ``depthwise``, ``tokens`` and
``attention`` (accelerator ms),
``executed_layers`` (count), ``ramped_layers`` (the count, a layer below `RAMP_MS` counting t / `RAMP_MS`),
``weights`` (millions loaded per inference
by layers other than fully connected ones), ``cpu_tail`` (millions of elements
processed after the last conv / FC layer: host post-processing) and ``constant``. The last two are
per inference: a latency table's blocks leave them out and add them once (`per_inference_ms`).
"""

from __future__ import annotations

import numpy as np

from typing import Collection

from ..ir import LayerType, Network
from ..models.calibration import TERMS, TYPE_GROUP_IDS, ramp_share
from ..platform import Platform
from .state import RUNS_MS, Run

__all__ = ["LATENCY_KINDS", "network_terms", "totals", "per_inference_ms", "tail_elems", "check_kind"]

#: what `totals` returns: ``latency`` (what the platform's users measure) or ``device`` (the layer sum)
LATENCY_KINDS = ("latency", "device")
#: the per-inference terms (a network's, not a block's)
PER_INFERENCE = ("constant", "cpu_tail")
#: per layer type: heavy (a conv or FC layer: what the accelerator is for; the host post-processes after it)
_HEAVY = np.zeros(max(LayerType) + 1, dtype=bool)
_HEAVY[[LayerType.CONV, LayerType.DEPTHWISE_CONV, LayerType.GROUP_CONV, LayerType.CONV_POOL, LayerType.FULLY_CONNECTED,
        LayerType.CONV_TRANSPOSE]] = True
_INPUT, _DEPTHWISE = int(LayerType.INPUT), int(LayerType.DEPTHWISE_CONV)
#: per term of a group of layer types (`TYPE_GROUP_IDS`), per layer type: whether its time counts in the term
_GROUP = {term: np.isin(np.arange(max(LayerType) + 1), list(ids)) for term, ids in TYPE_GROUP_IDS.items()}
#: per layer type: its weights count in the ``weights`` term. A fully connected layer's model already charges
#: its weights as memory traffic (it is memory-bound); counting them again overestimated FC-heavy networks
_FETCHED = np.ones(max(LayerType) + 1, dtype=bool)
_FETCHED[LayerType.FULLY_CONNECTED] = False


def check_kind(latency: str) -> None:
    """Raise ValueError unless ``latency`` is one of `LATENCY_KINDS`."""
    if latency not in LATENCY_KINDS:
        raise ValueError(f"latency must be one of {', '.join(LATENCY_KINDS)}, got {latency!r}")


def _sum(values: np.ndarray, segments: np.ndarray | None, n: int) -> np.ndarray:
    """Per network: the sum of ``values`` over its layers (``segments``: their networks; None: one network)."""
    if segments is None:
        return np.array([values.sum()], dtype=np.float64)
    return np.bincount(segments, weights=values, minlength=n)


def tail_elems(net: Network) -> np.ndarray:
    """Per layer: its input elements when it runs after the last heavy (conv / FC) layer on every path
    (host-side post-processing), else 0.

    The tail grows back from the network's outputs: a layer that is not heavy joins it once all its consumers
    have (a few rounds: the tail is the classifier's last layers).
    """
    heavy = _HEAVY[net.types]
    n = len(net)
    light = ~heavy & ~((net.types == _INPUT) & (net.n_inputs == 0))
    if not len(net.edges):
        tail = light
    else:
        src, dst = net.edges[:, 0], net.edges[:, 1]
        consumers = np.bincount(src, minlength=n)
        tail = light & (consumers == 0)
        while tail.any():  # (an empty tail cannot grow: no layer has all its consumers in it)
            grown = light & (np.bincount(src, weights=tail[dst], minlength=n) == consumers)
            if (grown == tail).all():
                break
            tail = grown
    return np.where(tail, np.asarray(net.in_elems, np.float64), 0.0)


def network_terms(r: Run, per_inference: bool = True, names: Collection[str] | None = None
                  ) -> dict[str, np.ndarray]:
    """The calibration terms of every network of the run (arrays of ``r.n``), over the accelerator's part
    of the times; without ``per_inference`` the ``constant`` and ``cpu_tail`` terms are left out, and only
    ``names`` when given (those a calibration uses)."""
    acc = r.accelerator_time_ms()
    types = r.executed.types
    seg, n = r.executed_segments, r.n
    want = set(TERMS if names is None else names) - (set() if per_inference else set(PER_INFERENCE))
    terms: dict[str, np.ndarray] = {}
    if "layers" in want:
        terms["layers"] = _sum(acc, seg, n)
    if "depthwise" in want:
        dw = types == _DEPTHWISE
        terms["depthwise"] = _sum(acc[dw], None if seg is None else seg[dw], n)
    for term in (t for t in _GROUP if t in want):  # (a fixed order: sums over the terms stay deterministic)
        sel = _GROUP[term][types]
        terms[term] = _sum(acc[sel], None if seg is None else seg[sel], n)
    if "executed_layers" in want or "ramped_layers" in want:
        counted = (types != _INPUT) & (acc >= RUNS_MS)
        terms["executed_layers"] = _sum(counted.astype(np.float64), seg, n)
        terms["ramped_layers"] = _sum(np.where(counted, ramp_share(acc), 0.0), seg, n)
    if "weights" in want:
        net = r.network
        fetched = np.where(_FETCHED[net.types], np.asarray(net.weights, np.float64), 0.0)
        terms["weights"] = _sum(fetched, r.segments, n) / 1e6
    if "cpu_tail" in want:
        terms["cpu_tail"] = _sum(tail_elems(r.network), r.segments, n) / 1e6
    if "constant" in want:
        terms["constant"] = np.ones(n)
    return terms


def totals(r: Run, latency: str = "latency", per_inference: bool = True) -> np.ndarray:
    """Per network of the run: its latency of kind ``latency`` (`LATENCY_KINDS`) in ms; without
    ``per_inference``, a block's share (the per-inference terms left out, see `per_inference_ms`)."""
    check_kind(latency)
    assert r.time_ms is not None
    seg, t = r.executed_segments, r.time_ms
    cal = r.platform.end_to_end if latency == "latency" else None
    if cal is None:
        return _sum(t, seg, r.n)
    e2e = cal.predict_many(network_terms(r, per_inference, [k for k, v in cal.coef.items() if v]), r.n)
    if r.moves:  # host-run layers and switches take their own time, not scaled
        e2e = e2e + _sum(t - r.accelerator_time_ms(), seg, r.n)
    return e2e


def per_inference_ms(platform: Platform, last: Network | None, latency: str = "latency") -> float:
    """The per-inference part of a network's latency that no block carries: the end-to-end calibration's
    constant plus its host-side tail term of ``last`` (the part holding the network's output); 0 for device
    time or a platform without an end-to-end calibration."""
    check_kind(latency)
    cal = platform.end_to_end if latency == "latency" else None
    if cal is None:
        return 0.0
    tail = float(tail_elems(last).sum()) / 1e6 if last is not None else 0.0
    return cal.coef.get("constant", 0.0) + cal.coef.get("cpu_tail", 0.0) * tail
