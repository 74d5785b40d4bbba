"""Refined roofline: the roofline with the accelerator's unrolling (parallelism) per dimension.

Paper (Wess et al. 2021, Sec. IV): a dimension of size n mapped onto s parallel units runs
ceil(n/s) steps, so its utilisation is u = n / (ceil(n/s) * s). The efficiency alpha in [0, 1] says how much
of that step pattern the hardware shows: the per-dimension efficiency is 1 / ((1 - alpha) + alpha / u)
(alpha = 0: no effect; alpha = 1: the full step pattern). Compute time is divided by the product of the
per-dimension efficiencies; memory time is unchanged.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..errors import PlatformError
from .base import LayerFeatures, check_number, register
from .roofline import Roofline

__all__ = ["RefinedRoofline", "DIMENSIONS", "dimension_sizes", "efficiency"]

#: The unrolled dimensions: output height/width, input channels per group, output channels (filters).
DIMENSIONS = ("h", "w", "c", "f")


def dimension_sizes(X: LayerFeatures) -> dict[str, np.ndarray]:
    """Size of each unrolled dimension per layer."""
    return {"h": X.h_out, "w": X.w_out, "c": X.c_in // np.maximum(X.groups, 1), "f": X.c_out}


def efficiency(n: np.ndarray, s: float, alpha: float, replicate: bool = False) -> np.ndarray:
    """Per-dimension efficiency of a dimension of size ``n`` on ``s`` parallel units.

    With ``replicate`` a dimension smaller than ``s`` counts as fully used (the hardware replicates it).
    """
    n = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    u = n / (np.ceil(n / s) * s)
    if replicate:
        u = np.where(n < s, 1.0, u)
    return 1.0 / ((1.0 - alpha) + alpha / u)


@register
class RefinedRoofline(Roofline):
    """Roofline whose compute roof is scaled by the unrolling efficiency of h, w, c and f."""

    kind = "refined_roofline"

    def __init__(self, op_s: float = 1e12, bandwidth: float = 1e10, bit_act: float = 8, bit_weights: float = 8,
                 unroll: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        super().__init__(op_s, bandwidth, bit_act, bit_weights)
        self.unroll = dict(unroll or {})

    def efficiency(self, X: LayerFeatures) -> np.ndarray:
        """Product of the per-dimension efficiencies per layer (1 = the plain roofline); `efficiency` of all
        unrolled dimensions at once, as a (dimensions, layers) array."""
        if not self.unroll:
            return np.ones(len(X))
        sizes = dimension_sizes(X)
        dims = list(self.unroll)
        n = np.maximum(np.stack([np.asarray(sizes[d], dtype=np.float64) for d in dims]), 1.0)
        s = np.array([[self.unroll[d]["s"]] for d in dims], dtype=np.float64)
        a = np.array([[self.unroll[d].get("alpha", 1.0)] for d in dims], dtype=np.float64)
        u = n / (np.ceil(n / s) * s)
        rep = np.array([[bool(self.unroll[d].get("replicate", False))] for d in dims])
        if rep.any():
            u = np.where(rep & (n < s), 1.0, u)
        return np.multiply.reduce(1.0 / ((1.0 - a) + a / u), axis=0)

    def predict(self, X: LayerFeatures) -> np.ndarray:
        op_t, mem_t = self.roofs(X)
        return np.maximum(op_t / self.efficiency(X), mem_t)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.kind, **self.params(),
                "unroll": {d: dict(p) for d, p in self.unroll.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> "RefinedRoofline":
        unroll = d.get("unroll", {})
        if not isinstance(unroll, Mapping):
            raise PlatformError(f"{where}.unroll: expected an object of dimensions")
        parsed: dict[str, dict[str, Any]] = {}
        for dim, p in unroll.items():
            w = f"{where}.unroll.{dim}"
            if dim not in DIMENSIONS:
                raise PlatformError(f"{w}: unknown dimension (known: {', '.join(DIMENSIONS)})")
            if not isinstance(p, Mapping):
                raise PlatformError(f"{w}: expected an object with s and alpha")
            rep = p.get("replicate", False)
            if not isinstance(rep, bool):
                raise PlatformError(f"{w}.replicate: expected true or false")
            parsed[dim] = {"s": check_number(p, "s", w, minimum=1),
                           "alpha": check_number(p, "alpha", w, minimum=0, maximum=1), "replicate": rep}
        return cls(**cls._read(d, where), unroll=parsed)

    def __repr__(self) -> str:
        dims = ", ".join(f"{d}: s={p['s']:g} a={p['alpha']:.3g}" for d, p in self.unroll.items())
        return f"RefinedRoofline(op_s={self.op_s:.4g}, bandwidth={self.bandwidth:.4g}, {dims})"
