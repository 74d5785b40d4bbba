"""Roofline layer model: a layer takes as long as its operations at peak speed or its bytes at peak bandwidth."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .base import LayerFeatures, LayerModel, check_number, register

__all__ = ["Roofline", "roofline_ms"]


def roofline_ms(ops: np.ndarray, byts: np.ndarray, op_s: float | np.ndarray, bandwidth: float | np.ndarray) -> np.ndarray:
    """The roofline time in ms: operations at peak speed or bytes at peak bandwidth, whichever takes longer."""
    return np.maximum(ops / op_s, byts / bandwidth) * 1e3


@register
class Roofline(LayerModel):
    """time = max(ops / op_s, bytes / bandwidth); bytes from element counts and the bit widths."""

    kind = "roofline"

    def __init__(self, op_s: float = 1e12, bandwidth: float = 1e10, bit_act: float = 8,
                 bit_weights: float = 8) -> None:
        self.op_s = op_s
        self.bandwidth = bandwidth
        self.bit_act = bit_act
        self.bit_weights = bit_weights

    def roofs(self, X: LayerFeatures) -> tuple[np.ndarray, np.ndarray]:
        """(compute time, memory time) in ms for every row."""
        return X.ops * (1e3 / self.op_s), X.bytes(self.bit_act, self.bit_weights) * (1e3 / self.bandwidth)

    def predict(self, X: LayerFeatures) -> np.ndarray:
        return roofline_ms(X.ops, X.bytes(self.bit_act, self.bit_weights), self.op_s, self.bandwidth)

    def fit(self, X: LayerFeatures, y: np.ndarray) -> "Roofline":
        """Peak op_s and bandwidth as the best rates the measured layers reach (upper envelope)."""
        y = np.asarray(y, dtype=np.float64)
        ok = y > 0
        if not ok.any():
            raise ValueError("no positive measured times to fit a roofline")
        self.op_s = float(np.max(X.ops[ok] / (y[ok] * 1e-3))) or self.op_s
        self.bandwidth = float(np.max(X.bytes(self.bit_act, self.bit_weights)[ok] / (y[ok] * 1e-3)))
        return self

    def params(self) -> dict[str, Any]:
        return {"op_s": float(self.op_s), "bandwidth": float(self.bandwidth), "bit_act": float(self.bit_act),
                "bit_weights": float(self.bit_weights)}

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.kind, **self.params()}

    @classmethod
    def _read(cls, d: Mapping[str, Any], where: str) -> dict[str, float]:
        return dict(op_s=check_number(d, "op_s", where, positive=True),
                    bandwidth=check_number(d, "bandwidth", where, positive=True),
                    bit_act=check_number(d, "bit_act", where, positive=True, maximum=64, default=8),
                    bit_weights=check_number(d, "bit_weights", where, positive=True, maximum=64, default=8))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> "Roofline":
        return cls(**cls._read(d, where))

    def __repr__(self) -> str:
        return f"Roofline(op_s={self.op_s:.4g}, bandwidth={self.bandwidth:.4g})"
