"""Accuracy of predicted against measured whole-network latency: MAPE, share within +-10 %, Spearman rho,
max error and bias, per platform variant, on real architectures, NAS cells and all networks."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .errors import ValidationError
from .measurement import Measurement
from .networks import ValidationNet

__all__ = ["metrics", "Comparison", "compare", "load_variants", "GROUPS"]

log = logging.getLogger(__name__)

#: Network groups of the report: real architectures (zoo + reference graphs), NAS cells, all.
GROUPS = ("real", "nb101", "all")


def metrics(pred_ms: Any, meas_ms: Any) -> dict[str, float]:
    """Accuracy of predictions against measurements (same order, ms).

    ``mape_pct``: mean absolute percentage error; ``within10_pct``: share of networks within +-10 %;
    ``spearman``: Spearman rank correlation (nan with fewer than 2 networks or constant values);
    ``max_err_pct``: largest absolute percentage error; ``bias_pct``: mean signed percentage error
    (positive = over-prediction); ``n``: number of networks.
    """
    p = np.asarray(pred_ms, dtype=np.float64).reshape(-1)
    m = np.asarray(meas_ms, dtype=np.float64).reshape(-1)
    if p.shape != m.shape:
        raise ValidationError(f"metrics: {p.size} predictions for {m.size} measurements")
    if p.size == 0:
        return {"n": 0, "mape_pct": math.nan, "within10_pct": math.nan, "spearman": math.nan,
                "max_err_pct": math.nan, "bias_pct": math.nan}
    if np.any(m <= 0) or not np.all(np.isfinite(m)):
        raise ValidationError("metrics: measurements must be positive and finite")
    rel = (p - m) / m
    err = np.abs(rel)
    rho = math.nan
    if p.size >= 2 and np.ptp(p) > 0 and np.ptp(m) > 0:
        from scipy.stats import spearmanr
        rho = float(spearmanr(p, m).statistic)
    return {"n": int(p.size), "mape_pct": float(100 * err.mean()), "within10_pct": float(100 * np.mean(err <= 0.10)),
            "spearman": rho, "max_err_pct": float(100 * err.max()), "bias_pct": float(100 * rel.mean())}


@dataclass
class Comparison:
    """Measured and predicted whole-network latency of the validation networks, per platform variant."""

    names: list[str]
    kinds: list[str]
    measured_ms: np.ndarray
    spread: np.ndarray
    predicted: dict[str, np.ndarray]
    busy: np.ndarray | None = None  # other runnable processes while measuring (`Measurement.busy`)

    @property
    def variants(self) -> list[str]:
        return list(self.predicted)

    def mask(self, group: str = "all") -> np.ndarray:
        """Rows of a group: ``real`` (zoo + reference), ``nb101``, ``all``, or a kind (``zoo``, ...)."""
        kinds = np.asarray(self.kinds, dtype=object)
        if group == "all":
            return np.ones(len(self.names), bool)
        if group == "real":
            return kinds != "nb101"
        return kinds == group

    def metrics(self, variant: str, group: str = "all") -> dict[str, float]:
        """`metrics` of one variant on one group."""
        k = self.mask(group)
        return metrics(self.predicted[variant][k], self.measured_ms[k])

    def noise_floor(self, group: str = "all") -> dict[str, float]:
        """Median and max of the measurement spread (repeat-to-repeat) in percent, and the network count."""
        s = self.spread[self.mask(group)]
        if s.size == 0:
            return {"n": 0, "median_pct": math.nan, "max_pct": math.nan}
        return {"n": int(s.size), "median_pct": float(100 * np.median(s)), "max_pct": float(100 * s.max())}

    def summary(self) -> list[dict[str, Any]]:
        """One row per (variant, group) with the metrics."""
        return [{"variant": v, "group": g, **self.metrics(v, g)} for v in self.predicted for g in GROUPS
                if self.mask(g).any()]

    def rows(self) -> list[dict[str, Any]]:
        """One row per network: name, kind, measured ms, spread, busy, and each variant's prediction (ms)."""
        out = []
        for i, n in enumerate(self.names):
            r = {"network": n, "kind": self.kinds[i], "measured_ms": float(self.measured_ms[i]),
                 "spread_pct": float(100 * self.spread[i]),
                 "busy": float(self.busy[i]) if self.busy is not None else math.nan}
            for v, p in self.predicted.items():
                r[v] = float(p[i])
            out.append(r)
        return out

    def format(self) -> str:
        """Side-by-side text table: per variant MAPE, within +-10 %, Spearman rho on real architectures,
        NAS cells and all networks, max error and bias overall; the noise floor below."""
        groups = [g for g in GROUPS if self.mask(g).any()]
        w = max([len("variant")] + [len(v) for v in self.predicted]) + 1
        head1 = " " * w + "".join(f"| {g + f' (n={int(self.mask(g).sum())})':^25s}" for g in groups) + "| overall"
        head2 = f"{'variant':<{w}s}" + "".join(f"| {'MAPE%':>7s} {'±10%':>7s} {'rho':>7s} " for _ in groups) + \
            f"| {'max%':>7s} {'bias%':>7s}"
        lines = [head1, head2, "-" * len(head2)]
        for v in self.predicted:
            s = f"{v:<{w}s}"
            for g in groups:
                m = self.metrics(v, g)
                s += f"| {_fit(m['mape_pct'], 2)} {m['within10_pct']:7.1f} {m['spearman']:7.3f} "
            m = self.metrics(v, "all")
            s += f"| {_fit(m['max_err_pct'], 1)} {_fit(m['bias_pct'], 1, '+')}"
            lines.append(s)
        lines.append("")
        nf = ", ".join(f"{g}: median {self.noise_floor(g)['median_pct']:.2f}% / max {self.noise_floor(g)['max_pct']:.2f}%"
                       for g in groups)
        lines.append(f"measurement noise floor (spread of repeat medians): {nf}")
        return "\n".join(lines)


def _fit(x: float, prec: int, sign: str = "") -> str:
    """A number in 7 characters: fixed point, or scientific when it is too large (an exploding model)."""
    s = f"{x:{sign}7.{prec}f}"
    return s if len(s) <= 7 else f"{x:{sign}7.0e}"


def load_variants(variants: Mapping[str, Any]) -> dict[str, Any]:
    """``{name: Platform or platform file path or shipped name}`` -> ``{name: Platform}``."""
    from ..platform import load_platform
    return {str(k): load_platform(v) for k, v in variants.items()}


def compare(variants: Mapping[str, Any], nets: Sequence[ValidationNet],
            measured: Mapping[str, Measurement | float]) -> Comparison:
    """Predict every measured network with every variant (`annette_torch.estimate_many`).

    ``measured`` maps network names to a `Measurement` or a latency in ms; networks without a measurement
    are left out (logged).
    """
    from ..estimator import estimate_many
    plats = load_variants(variants)
    if not plats:
        raise ValidationError("compare: no platform variants given")
    keep = [v for v in nets if v.name in measured]
    missing = [v.name for v in nets if v.name not in measured]
    if missing:
        log.info("compare: %d network(s) without measurement left out: %s", len(missing), ", ".join(missing[:10]))
    meas = np.array([_ms(measured[v.name]) for v in keep], dtype=np.float64)
    spread = np.array([getattr(measured[v.name], "spread", 0.0) for v in keep], dtype=np.float64)
    pred = {}
    networks = [v.network for v in keep]
    for name, plat in plats.items():
        pred[name] = np.asarray(estimate_many(networks, plat), dtype=np.float64) if networks else np.zeros(0)
    busy = np.array([getattr(measured[v.name], "busy", math.nan) for v in keep], dtype=np.float64)
    return Comparison([v.name for v in keep], [v.kind for v in keep], meas, spread, pred, busy)


def _ms(m: Measurement | float) -> float:
    return float(m.median_ms) if isinstance(m, Measurement) else float(m)
