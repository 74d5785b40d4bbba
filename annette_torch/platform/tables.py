"""`ModelTables`: a platform's layer models laid out for vectorised prediction, built once per platform.

Per layer type the index of the model that serves it (its own, else its fallback group's, else ``Base``),
and on a platform with a host the host's models after the accelerator's with their own index per type (one
pass costs the layers of both sides); per model its roofline parameters and bit widths (NaN roofline
parameters for models that are not plain rooflines: those are costed on their own rows) and the tree
ensembles of all its statistical and mixed models merged into one forest walked once per prediction.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..ir import INT_COLUMNS, TYPE_FALLBACKS, LayerType, Network
from ..models import LayerFeatures, LayerModel, Roofline
from ..models.base import layer_bytes
from ..models.forest import OwnRegressors, forest_of
from ..models.program import ModelProgram
from ..models.refined import dimension_sizes

__all__ = ["ModelTables"]


#: rows of a network's integer matrix holding h_out, w_out, c_in, groups, c_out
_SIZE_ROWS = np.array([INT_COLUMNS.index(c) for c in ("h_out", "w_out", "c_in", "groups", "c_out")])[:, None]


def _dimension_sizes(net: Network, rows: np.ndarray) -> np.ndarray:
    """`dimension_sizes` of ``rows`` of ``net``: a (4, rows) array, h, w, c, f (`refined.DIMENSIONS`)."""
    if net.matrix is None:
        X = LayerFeatures.rows_of(net, rows)
        return np.stack([np.asarray(v) for v in dimension_sizes(X).values()])
    m = net.matrix[_SIZE_ROWS, rows]  # h, w, c_in, groups, f
    np.floor_divide(m[2], np.maximum(m[3], 1), out=m[2])
    return m[[0, 1, 2, 4]]


def _model_of_type(layers: Mapping[str, LayerModel], offset: int) -> np.ndarray:
    """Per layer type, the index (from ``offset``) of the model of ``layers`` serving it: its own, else its
    fallback group's, else ``Base``."""
    keys = list(layers)
    out = np.zeros(max(LayerType) + 1, dtype=np.int64)
    for t in LayerType:
        out[t] = offset + keys.index(next(k for k in TYPE_FALLBACKS[t] if k in layers))
    return out


class ModelTables:
    """The lookup tables of one set of layer models (a platform's, or its host's), and the host's models after
    them where ``host`` gives them (`Platform.model_labels`' order)."""

    def __init__(self, layers: Mapping[str, LayerModel], host: Mapping[str, LayerModel] | None = None) -> None:
        #: model keys in model-index order (the host's prefixed ``host:``), and the models
        self.keys = list(layers) + [f"host:{k}" for k in host or ()]
        self.models = list(layers.values()) + list((host or {}).values())
        #: per layer type, its model's index (on the accelerator) and its host model's (None: no host)
        self.model_of_type = _model_of_type(layers, 0)
        self.host_of_type = None if host is None else _model_of_type(host, len(layers))
        self.op_s = np.array([m.op_s if isinstance(m, Roofline) else np.nan for m in self.models])
        self.bandwidth = np.array([m.bandwidth if isinstance(m, Roofline) else np.nan for m in self.models])
        #: models costed on their own rows (anything but a plain roofline)
        self.special = np.array([type(m) is not Roofline for m in self.models])
        self.forest, self.member = forest_of(self.models)
        #: the refined-roofline, mixed and statistical models as one program over all their rows
        self.program = ModelProgram(self.models)
        #: the regressors the program needs, for the rows the forest does not walk
        self.own = OwnRegressors(self.program.regressor)

        def bits(m: LayerModel, attr: str, fallback: LayerModel) -> float:
            """A model's bit width: its own, its roofline base's (mixed), else its side's Base model's."""
            for cand in (m, getattr(m, "base", None), fallback):
                if isinstance(cand, Roofline):
                    return float(getattr(cand, attr))
            return 32.0
        sides = [(m, layers["Base"]) for m in layers.values()] + [(m, host["Base"]) for m in (host or {}).values()]
        self.act_bytes = np.array([bits(m, "bit_act", b) / 8 for m, b in sides])
        self.weight_bytes = np.array([bits(m, "bit_weights", b) / 8 for m, b in sides])

    def forget(self) -> None:
        """Drop the regressor outputs remembered for layer configurations met before (what a first estimate in a
        fresh process meets)."""
        if self.forest is not None:
            self.forest.forget()
        self.own.forget()

    def special_times(self, net: Network, rows: np.ndarray | None, mi: np.ndarray, ops: np.ndarray,
                      byts: np.ndarray, t: np.ndarray) -> np.ndarray:
        """``t`` (per row of ``net``, or of its ``rows``: the plain roofline times), its rows of every other model
        (``mi``: each row's model) costed by that model, in place: the forest's members in one walk, the models
        the program covers in one pass (`ModelProgram`), any others one by one."""
        sel = self.special[mi].nonzero()[0]
        if not sel.size:
            return t
        ms = mi[sel]
        at = sel if rows is None else rows[sel]  # the rows of ``net``
        prog = self.program
        member = self.member[ms]
        raw = np.zeros(sel.size)
        walk = (member >= 0).nonzero()[0]
        if walk.size:
            assert self.forest is not None
            X = LayerFeatures.stacked_of(net, at[walk], taps=self.forest.plan.taps)
            raw[walk] = self.forest.regress(X, member[walk])
        own = (prog.needs_raw[ms] & (member < 0)).nonzero()[0]  # regressors predicting on their own
        if own.size:
            assert self.own.plan is not None
            raw[own] = self.own.regress(LayerFeatures.stacked_of(net, at[own], taps=self.own.plan.taps), ms[own])
        covered = prog.covers[ms]
        done = sel if covered.all() else sel[covered]
        if done.size:
            c = slice(None) if done is sel else covered
            sizes = d_taps = None
            if prog.any_refined:
                sizes = _dimension_sizes(net, at[c])
            if prog.tapped[ms[c]].any():
                d_taps = net.taps[2, at[c]]
            t[done] = prog.times(ms[c], ops[done], byts[done], sizes, raw[c], d_taps)
        if done is not sel:  # models the program does not know: each predicts its own rows
            rest = (~covered).nonzero()[0]
            for m in np.unique(ms[rest]).tolist():
                r = rest[ms[rest] == m]
                X = LayerFeatures.rows_of(net, at[r])
                model = self.models[m]
                t[sel[r]] = (model.predict(X) if member[r[0]] < 0
                             else model.predict(X, raw=raw[r]))  # type: ignore[call-arg]
        return t

    def layer_bytes(self, net: Network) -> np.ndarray:
        """Bytes each layer of ``net`` moves (activations in and out, weights) at its model's bit widths."""
        mi = self.model_of_type[net.types]
        return layer_bytes(net.in_elems + net.out_elems, net.weights * self.weight_bytes[mi], self.act_bytes[mi])
