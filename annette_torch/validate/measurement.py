"""One network's measured end-to-end latency: the statistics of its timed repeats and the load while measuring."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Measurement"]


@dataclass(frozen=True)
class Measurement:
    """End-to-end latency of one network: ``median_ms`` = min over repeats of the per-repeat median;
    ``spread`` = (max - min) / min of the per-repeat medians (the noise floor of this network).

    ``busy`` is the machine's 1-minute load average right after measuring minus this process's own share
    (1): other runnable processes. On a shared machine a steady competitor slows every repeat alike, which
    the spread cannot show; a ``busy`` near or above the free cores flags such a measurement.
    """

    median_ms: float
    spread: float
    repeat_medians: tuple[float, ...] = ()
    min_ms: float = float("nan")
    runs: int = 0
    repeats: int = 0
    warmup: int = 0
    seconds: float = 0.0
    busy: float = float("nan")

    @classmethod
    def from_times(cls, times_ms: np.ndarray, warmup: int = 0, seconds: float = 0.0,
                   busy: float = float("nan")) -> "Measurement":
        """From a (repeats, runs) array of per-inference times."""
        t = np.atleast_2d(np.asarray(times_ms, dtype=np.float64))
        med = np.median(t, axis=1)
        lo = float(med.min())
        spread = float((med.max() - lo) / lo) if lo > 0 else 0.0
        return cls(lo, spread, tuple(float(x) for x in med), float(t.min()), int(t.shape[1]), int(t.shape[0]),
                   int(warmup), float(seconds), float(busy))

    def merge(self, other: "Measurement") -> "Measurement":
        """Both measurements' repeats as one: the minimum of all repeat medians, their spread."""
        med = np.array(self.repeat_medians + other.repeat_medians) if self.repeat_medians and other.repeat_medians \
            else np.array([self.median_ms, other.median_ms])
        lo = float(med.min())
        return Measurement(lo, float((med.max() - lo) / lo) if lo > 0 else 0.0, tuple(float(x) for x in med),
                           float(np.nanmin([self.min_ms, other.min_ms])), min(self.runs, other.runs),
                           self.repeats + other.repeats, max(self.warmup, other.warmup), self.seconds + other.seconds,
                           float(np.nanmin([self.busy, other.busy])) if not (math.isnan(self.busy) and
                                                                              math.isnan(other.busy)) else math.nan)
