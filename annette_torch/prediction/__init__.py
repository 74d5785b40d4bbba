"""Prediction as an ordered list of small passes over one network or a stack of networks.

`run` maps the layers, places them, costs them with the layer models, adds what the platform's
network-level pieces add (weight residency, fused-layer work, runtime overhead, host-run layers,
accelerator<->host switches), and `totals` turns the per-layer times into each network's latency.
`estimate`, `estimate_many`, `LatencyTable` and the searches all go through these functions.
"""

from .passes import PASSES, layer_times, model_times, run
from .state import Run
from .terms import network_terms, per_inference_ms, totals

__all__ = ["Run", "PASSES", "run", "layer_times", "model_times", "totals", "network_terms", "per_inference_ms"]
