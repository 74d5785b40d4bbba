"""Network-level calibration: the fitted map from an estimate's terms (computed by
`annette_torch.prediction.terms`) to the latency a platform's users measure end to end (fitted by
`annette_torch.fit.calibrate_network`).

The terms: ``layers`` (the layer models' total), ``depthwise`` (its depthwise-convolution part),
``cpu_tail`` (millions of elements processed after the last conv / FC layer, i.e. host post-processing),
``constant`` (per inference), ``executed_layers`` (per executed node, for runtimes with a per-node cost),
``ramped_layers`` (the same count, a layer below `RAMP_MS` counting its share of it) and
``weights`` (millions of weights the network loads per inference: on an accelerator that fetches every
layer's weights from DRAM, the part of that traffic a layer roofline's max(compute, memory) hides) and
``tokens`` / ``attention`` (the part of ``layers`` spent in the token-mixing layers of attention-era blocks,
`TOKEN_TYPES`, or in their attention core, `ATTENTION_TYPES`: fitted on micro-kernels, they run at another
speed inside a network, ONNX Runtime on an Intel Xeon ~1.5x slower, OpenVINO's fused attention faster, and a
common scale fitted mostly on CNNs cannot follow them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import PlatformError
from ..ir import LayerType
from .base import check_number

__all__ = ["TERMS", "SIGNED_TERMS", "TOKEN_TYPES", "ATTENTION_TYPES", "TYPE_GROUPS", "TYPE_GROUP_IDS",
           "RAMP_MS", "ramp_share", "Calibration"]

TERMS = ("layers", "depthwise", "cpu_tail", "constant", "executed_layers", "ramped_layers", "weights", "tokens",
         "attention")
#: terms whose coefficient may be negative (a per-node cost the profiled layer times over-count; a type group
#: running faster inside a network than as micro-kernels)
SIGNED_TERMS = ("executed_layers", "ramped_layers", "tokens", "attention")
#: layer time (ms, the layer models' own) from which a ramped per-layer cost applies in full; a smaller layer pays
#: its share of it (t / RAMP_MS). OpenVINO runs a network's layers up to ~30% faster than their micro-kernels, a
#: gain a flat per-layer term (-5.6 us on the Intel Xeon VM) took from every layer alike: the tiny layers of
#: ShuffleNet, MobileNetV3-small or a squeeze-excite block came out at nothing
RAMP_MS = 0.05
#: the layer types of the ``tokens`` term: products of two activations, softmax, layer norm, GELU and the
#: transposes between heads and windows
TOKEN_TYPES = ("MatMul", "Softmax", "LayerNorm", "GELU", "Transpose")
#: ... and of the ``attention`` term: the attention core (scores, softmax, context), which runtimes fuse
ATTENTION_TYPES = ("MatMul", "Softmax")
#: the terms that are the time of a group of layer types, and their types
TYPE_GROUPS = {"tokens": TOKEN_TYPES, "attention": ATTENTION_TYPES}
#: ... and the `LayerType` values of each group's types
TYPE_GROUP_IDS = {term: frozenset(int(LayerType.from_label(t)) for t in types)
                  for term, types in TYPE_GROUPS.items()}


def ramp_share(time_ms: Any, ramp_ms: float = RAMP_MS) -> Any:
    """The share of a ramped per-layer cost a layer of model time ``time_ms`` pays: t / ``ramp_ms`` below the
    ramp, 1 from it (1 everywhere for ``ramp_ms`` 0: a flat cost). Used alike by the calibration's
    ``ramped_layers`` term, the platform's overhead and adapt's per-kind data, so a fit predicts what it fitted."""
    t = np.asarray(time_ms, dtype=np.float64)
    return np.minimum(t / ramp_ms, 1.0) if ramp_ms else np.ones_like(t)


@dataclass
class Calibration:
    """Fitted coefficients per term; ``predict`` maps an estimate's terms to end-to-end ms."""

    coef: dict[str, float]
    loo_mape: float | None = None
    fitted_on: tuple[str, ...] = ()
    predicts: str = "end-to-end latency (ms)"
    #: where the fit measured them: each network's signed leave-one-out error behind ``loo_mape`` (not saved)
    loo_errors: np.ndarray | None = field(default=None, repr=False, compare=False)

    def predict(self, terms: dict[str, float]) -> float:
        """End-to-end ms of one network from its terms."""
        return float(sum(self.coef.get(k, 0.0) * v for k, v in terms.items()))

    def predict_many(self, terms: dict[str, np.ndarray], n: int | None = None) -> np.ndarray:
        """End-to-end ms of ``n`` networks from their terms (arrays, one entry per network)."""
        if n is None:
            n = len(next(iter(terms.values())))
        return sum((self.coef.get(k, 0.0) * v for k, v in terms.items()), np.zeros(n))

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
