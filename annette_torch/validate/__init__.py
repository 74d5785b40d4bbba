"""Accuracy validation: whole-network latency measurements of networks never used in fitting, compared
with what fitted platform variants predict (used by ``benchmarks/accuracy.py``).

- `networks`: the validation set, deterministic (zoo architectures, ANNETTE reference graphs, random
  NAS-Bench-101 cells drawn with `VALIDATION_SEED`) and the network fingerprints;
- `measurement`: a network's measured latency (`Measurement`);
- `measure`: one network's end-to-end latency on ``ort-cpu`` or ``openvino-cpu`` through the benchmark
  runners' session settings without per-node profiling (minimum over repeats of the median of timed
  inferences, and the repeats' spread), and a whole set measured with resume, rounds and re-measurement;
- `cache`: the SQLite measurement cache keyed by (platform, network, fingerprint, machine key);
- `accuracy`: MAPE, share within +-10 %, Spearman rho, max error per platform variant and group;
- `roofline`: measured layers of a benchmark store as roofline points.

Time is in milliseconds everywhere.
"""

from .accuracy import GROUPS, Comparison, compare, load_variants, metrics
from .cache import MeasurementCache
from .errors import ValidationError
from .measure import PLATFORMS, machine_key, measure_all, measure_latency, runtime_info
from .measurement import Measurement
from .networks import (VALIDATION_SEED, WEIGHTED_TYPES, ValidationNet, layer_signature, network_fingerprint,
                       validation_networks)
from .roofline import store_layer_points

__all__ = [
    "ValidationNet", "Measurement", "MeasurementCache", "Comparison", "PLATFORMS", "GROUPS",
    "validation_networks", "network_fingerprint", "layer_signature", "WEIGHTED_TYPES", "machine_key", "runtime_info",
    "measure_latency", "measure_all", "metrics", "compare", "load_variants", "store_layer_points", "ValidationError",
    "VALIDATION_SEED",
]
