"""Mixed layer model (ANNETTE's best): a (refined) roofline times a learned residual efficiency.

time = base(X) * exp(clip(correction(X), clip_min, clip_max) + taps_slope * d_taps(X))

The correction is a `Statistical` regressor fitted on log(measured / base prediction), the part of the
time the roofline does not explain. Outside the sampled ranges the model falls back toward its base:
the correction's output is clipped to ``[clip_min, clip_max]``, the range of log(measured / base) seen in
training, so the mixed model never corrects the base by more than some training layer needed, and its
error there is bounded by the base's error times that factor.

Tree corrections are constant outside the sampled range anyway, and so are linear model trees' (their leaves
read features clamped to the fitted range); polynomials extrapolate in the log features, bounded by the output
clip. (Clipping the correction's inputs to their
training range, ``clip_inputs=True``, is available but off: the features are correlated, and clipping some
of them but not others produced combinations never seen in training and worse corrections in our tests.)
`fit_mixed` moreover scores each candidate by the worse of its cross-validation error and its error on the
largest layers when fitted on the smaller ones, so corrections that extrapolate badly are not chosen.

A convolution's model (``taps``) reads the shares of its kernel taps that read the input (not padding) as
correction features, and scales its base by the share its dilation removes, to a fitted power (``taps_slope``
in [0, 1]; ``d_taps``, `annette_torch.ir.kernel_taps`): runtimes skip the taps of a dilated convolution that
fall into its padding, and trees, stepwise in that share, carry it neither smoothly nor monotonically to
layers larger than the few dilated ones measured (DeepLab's 2048-channel atrous convolutions: a tree
correction alone priced rate 6 above rate 1). Undilated layers have ``d_taps`` 0: the factor is 1 for them.

A zero correction (``clip_min == clip_max == 0``, e.g. fitted on times the base predicts exactly) reproduces
the base model bit for bit.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

import numpy as np

from ..errors import PlatformError
from .base import LayerFeatures, LayerModel, check_number, model_from_dict, register
from .refined import RefinedRoofline
from .roofline import Roofline
from .statistical import Statistical, subset

__all__ = ["Mixed", "TAPS_MIN_ROWS", "TAPS_SHARE"]

log = logging.getLogger(__name__)

#: fewest dilated training layers that lose a sizable share of their taps to padding (`TAPS_SHARE` or less
#: left, `kernel_taps`'s dilated part) for a fitted tap slope; with fewer the slope stays 0
TAPS_MIN_ROWS = 8
TAPS_SHARE = 0.8


@register
class Mixed(LayerModel):
    """Base roofline model times a clipped statistical correction (see the module docstring).

    Hyper-parameters: ``base`` (a fitted `Roofline` or `RefinedRoofline`, not refitted here), ``method`` (the
    correction's regressor, see `Statistical`), ``unroll`` (step-pattern features; default: the base's own
    unrolling), ``clip_inputs`` (see the module docstring), ``seed``, ``params``, ``grouped`` (per-group channel
    features), ``taps`` (kernel-tap features and slope; both see `Statistical` and the module docstring).
    Fitted: ``correction_`` (a `Statistical` with target ``log_ratio``), ``clip_min_``, ``clip_max_``,
    ``taps_slope_`` (0.0 without ``taps``: `_fit_taps_slope`).
    """

    kind = "mixed"

    def __init__(self, base: Roofline, method: str = "gbm", unroll: Mapping[str, Any] | None = None,
                 clip_inputs: bool = False, seed: int = 0, params: Mapping[str, Any] | None = None,
                 grouped: bool = False, taps: bool = False) -> None:
        self.base = base
        self.method = method
        self.unroll = unroll
        self.clip_inputs = clip_inputs
        self.seed = seed
        self.params = params
        self.grouped = grouped
        self.taps = taps

    def _unroll(self) -> Mapping[str, Any]:
        if self.unroll is not None:
            return self.unroll
        return dict(self.base.unroll) if isinstance(self.base, RefinedRoofline) else {}

    def fit(self, X: LayerFeatures, y: np.ndarray) -> "Mixed":
        """Fit the correction on log(y / base(X)); rows the base gives no time (0) are left out."""
        if not isinstance(self.base, Roofline):
            raise ValueError(f"the base of a mixed model must be a roofline or refined roofline, got {self.base!r}")
        y = np.asarray(y, dtype=np.float64)
        if len(y) != len(X):
            raise ValueError(f"{len(X)} layers but {len(y)} times")
        if not np.all(np.isfinite(y) & (y > 0)):
            raise ValueError(f"measured times must be finite and > 0 ({int(np.sum(~(y > 0)))} are not)")
        b = self.base.predict(X)
        ok = b > 0
        if not ok.all():
            log.warning("mixed fit: %d of %d layers have no base time and are left out", int((~ok).sum()), len(ok))
        rows = np.flatnonzero(ok)
        if rows.size < 2:
            raise ValueError(f"a mixed model needs at least 2 layers with a base time, got {rows.size}")
        z = np.log(y[rows]) - np.log(b[rows])
        Xr = subset(X, rows)
        self.taps_slope_ = self._fit_taps_slope(Xr, z) if self.taps else 0.0
        if self.taps_slope_:
            z = z - self._tap_term(Xr)
        self.correction_ = Statistical(self.method, self._unroll(), clip_inputs=self.clip_inputs, seed=self.seed,
                                       params=self.params, target="log_ratio",
                                       grouped=self.grouped, taps=self.taps).fit_log(Xr, z)
        # the central 99% of the fitted corrections: a few extreme layers (e.g. tiny ones dominated by a fixed
        # cost) must not license extreme factors for unseen layers
        lo, hi = np.percentile(z, [0.5, 99.5]) if z.size >= 200 else (z.min(), z.max())
        self.clip_min_, self.clip_max_ = float(lo), float(hi)
        return self

    def correction(self, X: LayerFeatures, raw: np.ndarray | None = None) -> np.ndarray:
        """The clipped log factor applied to the base time, per row (``raw``: the correction regressor's
        output when already evaluated, see `Statistical.predict_log`)."""
        if self.clip_min_ == self.clip_max_:
            return np.full(len(X), self.clip_min_)
        return np.clip(self.correction_.predict_log(X, raw), self.clip_min_, self.clip_max_)

    def _fit_taps_slope(self, X: LayerFeatures, z: np.ndarray) -> float:
        """The power of the tap share a dilation leaves that best explains how much the dilated layers' log
        residuals ``z`` lie below what a correction fitted on the undilated layers predicts for them (robust
        least squares through the origin, clipped to [0, 1]); 0.0 with fewer than `TAPS_MIN_ROWS` dilated
        layers losing a sizable share of their taps."""
        d = X.tap_columns()[2]
        dilated = np.flatnonzero(d < 0)
        if int(np.sum(d <= np.log(TAPS_SHARE))) < TAPS_MIN_ROWS or len(z) - dilated.size < TAPS_MIN_ROWS:
            return 0.0
        from scipy.optimize import least_squares  # fitting only

        plain = np.setdiff1d(np.arange(len(z)), dilated)
        undilated = Statistical(self.method, self._unroll(), seed=self.seed, params=self.params, target="log_ratio",
                                grouped=self.grouped).fit_log(subset(X, plain), z[plain])
        r = z[dilated] - undilated.predict_log(subset(X, dilated))
        fit = least_squares(lambda c: c[0] * d[dilated] - r, [0.5], loss="soft_l1", f_scale=0.1)
        return float(np.clip(fit.x[0], 0.0, 1.0))

    def _tap_term(self, X: LayerFeatures) -> np.ndarray | float:
        """The log factor of the dilation's skipped taps per row (0.0 without a slope); `ModelProgram` adds it
        alike."""
        s = getattr(self, "taps_slope_", 0.0)
        return s * X.tap_columns()[2] if s else 0.0

    def predict(self, X: LayerFeatures, raw: np.ndarray | None = None) -> np.ndarray:
        return self.base.predict(X) * np.exp(self.correction(X, raw) + self._tap_term(X))

    def to_dict(self) -> dict[str, Any]:
        d = {"model": self.kind, "base": self.base.to_dict(), "clip_min": self.clip_min_,
             "clip_max": self.clip_max_, "correction": self.correction_.to_dict()}
        if getattr(self, "taps_slope_", 0.0):
            d["taps_slope"] = float(self.taps_slope_)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> "Mixed":
        base_d = d.get("base")
        if not isinstance(base_d, Mapping) or base_d.get("model") not in ("roofline", "refined_roofline"):
            raise PlatformError(f"{where}.base: expected a roofline or refined_roofline model")
        base = model_from_dict(base_d, f"{where}.base")
        lo = check_number(d, "clip_min", where)
        hi = check_number(d, "clip_max", where)
        if lo > hi:
            raise PlatformError(f"{where}.clip_min: must be <= clip_max ({lo!r} > {hi!r})")
        corr = Statistical.from_dict(d.get("correction"), f"{where}.correction", target="log_ratio")
        m = cls(base, corr.method, corr.unroll_, corr.clip_inputs_, grouped=corr.grouped_, taps=corr.taps_)
        m.correction_, m.clip_min_, m.clip_max_ = corr, lo, hi
        m.taps_slope_ = check_number(d, "taps_slope", where, minimum=0, maximum=1, default=0.0)
        return m

    def __repr__(self) -> str:
        return f"Mixed(base={self.base!r}, method={self.method!r})"

