"""`ModelTables`: a platform's layer models laid out for vectorised prediction, built once per platform.

Per layer type the index of the model that serves it (its own, else its fallback group's, else ``Base``);
per model its roofline parameters and bit widths (NaN roofline parameters for models that are not plain
rooflines: those are costed on their own rows) and the tree ensembles of all its statistical and mixed
models merged into one forest walked once per prediction.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..ir import TYPE_FALLBACKS, LayerType, Network
from ..models import LayerFeatures, LayerModel, Roofline
from ..models.base import layer_bytes
from ..models.forest import forest_of

__all__ = ["ModelTables"]


class ModelTables:
    """The lookup tables of one set of layer models (a platform's, or its host's)."""

    def __init__(self, layers: Mapping[str, LayerModel]) -> None:
        #: model keys in model-index order, and the models
        self.keys = list(layers)
        self.models = [layers[k] for k in self.keys]
        self.model_of_type = np.zeros(max(LayerType) + 1, dtype=np.int64)
        for t in LayerType:
            key = next(k for k in TYPE_FALLBACKS[t] if k in layers)
            self.model_of_type[t] = self.keys.index(key)
        self.op_s = np.array([m.op_s if isinstance(m, Roofline) else np.nan for m in self.models])
        self.bandwidth = np.array([m.bandwidth if isinstance(m, Roofline) else np.nan for m in self.models])
        #: models costed on their own rows (anything but a plain roofline)
        self.special = np.array([type(m) is not Roofline for m in self.models])
        self.forest, self.member = forest_of(self.models)
        fallback = layers["Base"]

        def bits(m: LayerModel, attr: str) -> float:
            """A model's bit width: its own, its roofline base's (mixed), else the Base model's."""
            for cand in (m, getattr(m, "base", None), fallback):
                if isinstance(cand, Roofline):
                    return float(getattr(cand, attr))
            return 32.0
        self.act_bytes = np.array([bits(m, "bit_act") / 8 for m in self.models])
        self.weight_bytes = np.array([bits(m, "bit_weights") / 8 for m in self.models])

    def special_rows(self, mi: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """(model index, its positions in ``mi`` in ascending order) for each model other than a plain roofline
        that ``mi`` (the model index of every row) uses."""
        used = (np.bincount(mi, minlength=len(self.keys)) > 0) & self.special
        return [(m, (mi == m).nonzero()[0]) for m in used.nonzero()[0].tolist()]

    def regress(self, net: Network, groups: list[tuple[int, np.ndarray]], rows: np.ndarray | None = None
                ) -> dict[int, np.ndarray]:
        """The raw regressor output of every forest member among ``groups`` (`special_rows` over ``rows`` of
        ``net``, or all its layers) for its rows, in one walk: model index -> array."""
        groups = [(m, sel) for m, sel in groups if self.member[m] >= 0]
        if not groups:
            return {}
        assert self.forest is not None
        sel = np.concatenate([s for _, s in groups])
        member = np.repeat(self.member[[m for m, _ in groups]], [len(s) for _, s in groups])
        raw = self.forest.regress(LayerFeatures.from_network(net, sel if rows is None else rows[sel]), member)
        ends = np.cumsum([len(s) for _, s in groups]).tolist()
        return {m: raw[e - len(s): e] for (m, s), e in zip(groups, ends)}

    def layer_bytes(self, net: Network) -> np.ndarray:
        """Bytes each layer of ``net`` moves (activations in and out, weights) at its model's bit widths."""
        mi = self.model_of_type[net.types]
        return layer_bytes(net.in_elems + net.out_elems, net.weights * self.weight_bytes[mi], self.act_bytes[mi])
