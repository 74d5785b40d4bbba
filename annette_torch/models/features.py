"""The feature transform of the statistical layer models: log-scaled layer columns, alignment and step patterns.

Columns (`feature_names` / `layer_features`), in this order:

* ``log1p_<col>`` for the 16 `LayerFeatures` columns: n, c_in, h_in, w_in, c_out, h_out, w_out, kh, kw, sh,
  sw, groups, ops, in_elems, out_elems, weights;
* ``log_intensity`` = log1p(ops) - log1p(in_elems + out_elems + weights) (arithmetic intensity: which roof);
* ``c_align``, ``f_align`` = log2 of the largest power of two (<= 64) dividing the input channels per group and
  the output channels (blocked vector layouts apply to aligned counts only);
* with ``grouped`` (grouped convolutions): ``log1p_cpg``, ``log1p_fpg`` = log1p of the input and output channels
  per group and ``fpg_align`` (as ``f_align``, per group): a runtime picks its grouped-convolution kernel by
  the channels of one group, which trees cannot derive from the logs of channels and groups (OpenVINO CPU:
  cross-validated MAPE of the GroupConv correction 28% -> 26%; ONNX Runtime 27% -> 21%);
* with ``taps`` (convolutions): ``h_taps``, ``w_taps`` = log share of the kernel taps that read the input, not
  its padding (`annette_torch.ir.kernel_taps`): runtimes skip the taps of a dilated convolution that fall
  into its padding, which its MACs do not show (cross-validated MAPE of the dilated convolutions' correction
  on OpenVINO CPU 59% -> 19%, ONNX Runtime 31% -> 14%);
* for every unrolled dimension d in ``unroll`` (``h`` output height, ``w`` output width, ``c`` input
  channels per group, ``f`` output channels; size n, parallelism s), so that the step pattern is learnable:
  ``d_frac`` = (n mod s) / s, ``d_steps`` = log(ceil(n / s)), ``d_logutil`` = log(n / (ceil(n / s) * s));
* with any unrolled dimension, ``logutil`` = the sum of the ``d_logutil`` (log of the joint utilisation).

A `FeaturePlan` computes the columns of several models' transforms at once, each shared column once (a
platform's statistical models all read the first 19): `Platform.predict` builds one matrix per estimate
and each model reads its columns from it. Every column is computed by the same operations either way, so
the values are the same bit for bit.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .base import LayerFeatures
from .refined import DIMENSIONS

__all__ = ["FeaturePlan", "feature_names", "layer_features", "normalize_unroll", "GROUP_FEATURES", "TAP_FEATURES"]

_BASE = LayerFeatures.NAMES
#: the per-group features added with ``grouped`` (see the module docstring)
GROUP_FEATURES = ("log1p_cpg", "log1p_fpg", "fpg_align")
#: the kernel-tap features added with ``taps`` (see the module docstring)
TAP_FEATURES = ("h_taps", "w_taps")
#: columns every transform starts with: the logs of the `LayerFeatures` columns, intensity, alignment
_COMMON = len(_BASE) + 3


def normalize_unroll(unroll: Mapping[str, Any] | None) -> dict[str, float]:
    """``{dim: s}`` in `DIMENSIONS` order from ``{dim: s}`` or a refined roofline's ``{dim: {"s": ...}}``."""
    out: dict[str, float] = {}
    for d in DIMENSIONS:
        if unroll and d in unroll:
            p = unroll[d]
            s = float(p["s"] if isinstance(p, Mapping) else p)
            if not np.isfinite(s) or s < 1:
                raise ValueError(f"unroll.{d}: parallelism s must be >= 1, got {s}")
            out[d] = s
    for d in unroll or {}:
        if d not in DIMENSIONS:
            raise ValueError(f"unroll.{d}: unknown dimension (known: {', '.join(DIMENSIONS)})")
    return out


def feature_names(unroll: Mapping[str, float] | None = None, grouped: bool = False,
                  taps: bool = False) -> list[str]:
    """Column names of `layer_features` for the given (normalised) unrolling parameters."""
    names = [f"log1p_{c}" for c in _BASE] + ["log_intensity", "c_align", "f_align"]
    if grouped:
        names += list(GROUP_FEATURES)
    if taps:
        names += list(TAP_FEATURES)
    u = normalize_unroll(unroll)
    for d in u:
        names += [f"{d}_frac", f"{d}_steps", f"{d}_logutil"]
    if u:
        names.append("logutil")
    return names


def layer_features(X: LayerFeatures, unroll: Mapping[str, float] | None = None, grouped: bool = False,
                   taps: bool = False) -> np.ndarray:
    """The feature matrix (rows = layers, columns = `feature_names(unroll, grouped, taps)`), float64."""
    return FeaturePlan([(unroll, grouped, taps)]).features(X, 0)


def _spec(spec: Sequence[Any]) -> tuple[Any, bool, bool]:
    """``(unroll, grouped[, taps])`` as a triple."""
    return (spec[0], bool(spec[1]), bool(spec[2]) if len(spec) > 2 else False)


class FeaturePlan:
    """The columns of several feature transforms (each given as ``(unroll, grouped[, taps])``), each computed
    once.

    `matrix` holds the common columns, the per-group and tap ones (if any transform has them), the three step
    columns of every distinct (dimension, parallelism) and each transform's joint utilisation; ``columns[i]``
    lists the matrix columns of transform ``i`` in its `feature_names` order.
    """

    def __init__(self, specs: Sequence[tuple[Any, ...]]) -> None:
        specs = [_spec(sp) for sp in specs]
        units = [normalize_unroll(u) for u, _, _ in specs]
        self.grouped = any(g for _, g, _ in specs)
        self.taps = any(t for _, _, t in specs)
        #: the distinct (dimension, parallelism) pairs, in first-use order
        self.steps: list[tuple[str, float]] = []
        for u in units:
            self.steps += [ds for ds in u.items() if ds not in self.steps]
        p = len(self.steps)
        first_tap = _COMMON + (len(GROUP_FEATURES) if self.grouped else 0)
        first_step = first_tap + (len(TAP_FEATURES) if self.taps else 0)
        #: per transform with unrolled dimensions: its step indices, in its dimension order, padded with p (a row
        #: of zeros below the p step rows; adding +0.0 changes no sum here: a log utilisation is never -0.0)
        joint = [[self.steps.index(ds) for ds in u.items()] for u in units if u]
        width = max((len(j) for j in joint), default=0)
        self.joint = np.array([j + [p] * (width - len(j)) for j in joint], dtype=np.intp).reshape(len(joint), width)
        self.n_columns = first_step + 3 * p + len(joint)
        self.columns: list[np.ndarray] = []
        j = 0
        for u, (_, grouped, taps) in zip(units, specs):
            cols = list(range(_COMMON))
            if grouped:
                cols += range(_COMMON, _COMMON + len(GROUP_FEATURES))
            if taps:
                cols += range(first_tap, first_tap + len(TAP_FEATURES))
            for ds in u.items():  # frac, steps, logutil of each dimension
                k = self.steps.index(ds)
                cols += [first_step + k, first_step + p + k, first_step + 2 * p + k]
            if u:
                cols.append(first_step + 3 * p + j)
                j += 1
            self.columns.append(np.array(cols, dtype=np.intp))
        self._s = np.array([s for _, s in self.steps], dtype=np.float64)[:, None]
        self._step_dim = np.array([DIMENSIONS.index(d) for d, _ in self.steps], dtype=np.intp)

    def matrix(self, X: LayerFeatures, stacked: np.ndarray | None = None) -> np.ndarray:
        """All columns of the plan for every row of ``X``: shape (rows, `n_columns`), float64 (``stacked``:
        ``X.stacked()`` when the caller has it)."""
        k = len(X)
        if not k:
            return np.zeros((0, self.n_columns))
        out = np.empty((self.n_columns, k))  # the columns as rows, written in place (no stacking)
        base = out[: len(_BASE)]
        np.log1p(np.maximum(X.stacked() if stacked is None else stacked, 0.0), out=base)
        moved = X.in_elems.astype(np.float64) + X.out_elems + X.weights
        np.subtract(base[_BASE.index("ops")], np.log1p(np.maximum(moved, 0.0)), out=out[len(_BASE)])
        # vector-width alignment of the channel counts (log2 of the largest power of two dividing them, <= 64):
        # blocked layouts (e.g. ONNX Runtime's NCHWc, 8 or 16 channels) apply only to aligned counts
        groups = np.maximum(X.groups, 1)
        c_per_group = X.c_in // groups  # (also the unrolled dimension c: `dimension_sizes`)
        counts = np.empty((3 if self.grouped else 2, k), dtype=np.int64)  # cpg, c_out [, fpg]
        counts[0] = np.maximum(c_per_group, 1)
        counts[1] = np.maximum(X.c_out, 1)
        if self.grouped:
            counts[2] = np.maximum(X.c_out // groups, 1)
        align = np.log2(np.gcd(counts, 64))
        c = len(_BASE) + 1
        out[c: c + 2] = align[:2]
        c += 2
        if self.grouped:
            np.log1p(counts[[0, 2]].astype(np.float64), out=out[c: c + 2])
            out[c + 2] = align[2]
            c += len(GROUP_FEATURES)
        if self.taps:
            out[c: c + len(TAP_FEATURES)] = X.tap_columns()[: len(TAP_FEATURES)]
            c += len(TAP_FEATURES)
        if self.steps:
            p = len(self.steps)
            sizes = np.empty((len(DIMENSIONS), k))  # `dimension_sizes`, in `DIMENSIONS` order
            sizes[0], sizes[1], sizes[2], sizes[3] = X.h_out, X.w_out, c_per_group, X.c_out
            n = np.maximum(sizes[self._step_dim], 1.0)
            steps = np.ceil(n / self._s)
            logutil = out[c + 2 * p: c + 3 * p]
            np.log(n / (steps * self._s), out=logutil)
            np.divide(np.mod(n, self._s), self._s, out=out[c: c + p])
            np.log(steps, out=out[c + p: c + 2 * p])
            # each transform's joint utilisation: the sum of its dimensions' log utilisations, in its order
            padded = np.concatenate([logutil, np.zeros((1, k))])
            total = out[c + 3 * p:]
            np.take(padded, self.joint[:, 0], axis=0, out=total)
            for j in range(1, self.joint.shape[1]):
                total += padded[self.joint[:, j]]
        return out.T

    def features(self, X: LayerFeatures, i: int) -> np.ndarray:
        """Transform ``i``'s feature matrix (rows = layers, its `feature_names` order), float64, C-ordered."""
        return np.ascontiguousarray(self.matrix(X)[:, self.columns[i]])
