"""`ModelProgram`: a platform's refined-roofline, mixed and statistical layer models evaluated as one program.

Costed model by model, a network's layers take a dozen numpy calls per model it uses (its rows picked, its
roofline, its correction, its clips), and with calls of ~1 us on arrays of a few dozen rows the calls set the
time. The program holds every such model's parameters as columns of one table, so all rows of all of them
are costed by one sequence of calls over per-row parameters:

    time = base * exp(clip(clip(raw, lo1, hi1), lo2, hi2) + taps_slope * d_taps)

``base`` is the row's roofline (plain or refined; 1.0 for a standalone statistical model), ``raw`` its
regressor's output (0 where there is none), ``lo1 .. hi1`` the statistical model's target range widened by
`Z_MARGIN` and ``lo2 .. hi2`` a mixed model's correction range (a standalone model's: +-700; a model without
a correction: 0 .. 0, a zero correction: its constant) and ``taps_slope`` a mixed model's power of the tap
share a dilation leaves (``d_taps``, `annette_torch.ir.kernel_taps`; 0 without). Each operation is the one
the model's own ``predict`` applies, element by element (an unrolled dimension the model lacks multiplies its
efficiency by exactly 1.0), so the times are the same bit for bit.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .base import LayerModel
from .mixed import Mixed
from .refined import DIMENSIONS, RefinedRoofline
from .roofline import Roofline
from .statistical import Z_MARGIN, Statistical

__all__ = ["ModelProgram"]

# rows of the parameter table (`ModelProgram.params`): scalars, then four per unrolled-dimension slot
_OP_S, _BW, _C_OP, _C_BW, _LO1, _HI1, _LO2, _HI2, _REFINED, _STAT, _TAPS = range(11)
_SLOTS = len(DIMENSIONS)
_S, _A, _REP, _DIM = (11 + k * _SLOTS for k in range(4))
_N_PARAMS = 11 + 4 * _SLOTS


class ModelProgram:
    """The models among ``models`` whose kinds it knows (`covers`), as one table of per-model parameters."""

    def __init__(self, models: Sequence[LayerModel]) -> None:
        n = len(models)
        p = np.zeros((_N_PARAMS, n))
        p[[_OP_S, _BW, _C_OP, _C_BW]] = 1.0
        p[_S: _S + _SLOTS] = 1.0
        p[_DIM: _DIM + _SLOTS] = _SLOTS  # the row of ones: an absent dimension
        #: per model: whether the program costs it
        self.covers = np.zeros(n, dtype=bool)
        #: per model: the statistical model whose regressor gives its ``raw`` (None: it needs none)
        self.regressor: list[Statistical | None] = [None] * n
        self.any_refined = False
        for i, m in enumerate(models):
            try:
                col = self._column(m)
            except (AttributeError, KeyError, TypeError, ValueError):  # unfitted or malformed: it predicts alone
                continue
            if col is None:
                continue
            p[:, i], self.regressor[i] = col
            self.any_refined |= bool(col[0][_REFINED])
            self.covers[i] = True
        #: (`_N_PARAMS`, models) parameters, a column per model
        self.params = p
        self.needs_raw = np.array([r is not None for r in self.regressor], dtype=bool)
        #: per model: whether it has a tap slope (its rows need the dilated share of `kernel_taps`)
        self.tapped = p[_TAPS] != 0
        #: per model: whether its time has a factor (a regressor's or a zero correction's; else it is its base's)
        self.factor = self.needs_raw | (p[_LO2] != 0) | (p[_HI2] != 0) | self.tapped

    @staticmethod
    def _column(m: LayerModel) -> tuple[np.ndarray, Statistical | None] | None:
        """Model ``m``'s parameter column and the statistical model whose regressor gives its ``raw``; None for
        a kind the program does not cost (plain rooflines are the tables' own; other kinds predict alone)."""
        c = np.zeros(_N_PARAMS)
        c[[_OP_S, _BW, _C_OP, _C_BW]] = 1.0
        c[_S: _S + _SLOTS] = 1.0
        c[_DIM: _DIM + _SLOTS] = _SLOTS  # the row of ones: an absent dimension
        base: LayerModel | None = m
        st = None
        if type(m) is Mixed and type(m.base) in (Roofline, RefinedRoofline):
            base = m.base
            if m.clip_min_ == m.clip_max_:  # a zero correction: its constant factor
                c[[_LO2, _HI2]] = m.clip_min_
            else:
                st = m.correction_
                c[[_LO2, _HI2]] = m.clip_min_, m.clip_max_
            c[_TAPS] = getattr(m, "taps_slope_", 0.0)
        elif type(m) is Statistical:
            base, st = None, m
            c[_STAT] = 1.0
            c[[_LO2, _HI2]] = -700.0, 700.0
        elif type(m) is not RefinedRoofline:
            return None
        if st is not None:
            lo, hi = getattr(st, "z_range_", (-np.inf, np.inf))
            c[[_LO1, _HI1]] = lo - Z_MARGIN, hi + Z_MARGIN
        if isinstance(base, Roofline):
            c[[_OP_S, _BW, _C_OP, _C_BW]] = base.op_s, base.bandwidth, 1e3 / base.op_s, 1e3 / base.bandwidth
            if type(base) is RefinedRoofline:
                c[_REFINED] = 1.0
                for k, (d, u) in enumerate(base.unroll.items()):  # the model's own order: its product's
                    c[[_S + k, _A + k, _REP + k, _DIM + k]] = (u["s"], u.get("alpha", 1.0),
                                                               float(bool(u.get("replicate", False))),
                                                               DIMENSIONS.index(d))
        return c, st

    def times(self, mi: np.ndarray, ops: np.ndarray, byts: np.ndarray, sizes: np.ndarray | None,
              raw: np.ndarray, d_taps: np.ndarray | None = None) -> np.ndarray:
        """Times in ms of rows costed by the covered models ``mi``: their operations, bytes moved, unrolled
        dimension sizes (`dimension_sizes` as a (4, rows) array; needed only with a refined roofline among
        them), regressor outputs (0 where the model has none) and the tap shares dilations leave (`kernel_taps`'
        last row; needed only with a tap slope among them)."""
        P = self.params[:, mi]
        t = np.maximum(ops / P[_OP_S], byts / P[_BW]) * 1e3  # `roofline_ms`
        refined = P[_REFINED] > 0
        if self.any_refined and refined.any():
            assert sizes is not None
            k = len(mi)
            n = np.maximum(np.concatenate([sizes.astype(np.float64), np.ones((1, k))]), 1.0)
            n = n[P[_DIM: _DIM + _SLOTS].astype(np.intp), np.arange(k)]
            s, a = P[_S: _S + _SLOTS], P[_A: _A + _SLOTS]
            u = n / (np.ceil(n / s) * s)
            rep = P[_REP: _REP + _SLOTS] > 0
            if rep.any():
                u = np.where(rep & (n < s), 1.0, u)
            eff = np.multiply.reduce(1.0 / ((1.0 - a) + a / u), axis=0)
            t = np.where(refined, np.maximum(ops * P[_C_OP] / eff, byts * P[_C_BW]), t)
        stat = P[_STAT] > 0
        if stat.any():
            t = np.where(stat, 1.0, t)
        if not self.factor[mi].any():  # (exp(0.0) = 1.0: the factor of every row, t times it is t)
            return t
        # the clips as maximum then minimum (np.clip's wrapper costs more than both): the same values, at most a
        # zero's sign apart, which exp() does not see
        z = np.minimum(np.maximum(raw, P[_LO1]), P[_HI1])
        z = np.minimum(np.maximum(z, P[_LO2]), P[_HI2])
        if self.tapped[mi].any():
            assert d_taps is not None
            z = z + P[_TAPS] * d_taps
        return t * np.exp(z)
