"""The layer-model interface: sklearn-style estimators over per-layer feature columns.

A layer model predicts the execution time (ms) of many layers of one type at once. Hyper-parameters and
fitted parameters are plain data, so a model round-trips through a platform JSON file without pickles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import numpy as np

from ..errors import PlatformError
from ..ir import INT_COLUMNS, Network

#: rows of a network's integer matrix holding the first 12 `LayerFeatures` columns (n .. sw, groups)
_MATRIX_ROWS = np.array([INT_COLUMNS.index(c) for c in ("n", "c_in", "h_in", "w_in", "c_out", "h_out", "w_out", "kh",
                                                         "kw", "sh", "sw", "groups")])[:, None]

__all__ = ["LayerFeatures", "LayerModel", "MODEL_KINDS", "register", "model_from_dict", "check_number", "layer_bytes"]


def layer_bytes(elems: np.ndarray, weight_bytes: np.ndarray, act_bytes: float | np.ndarray) -> np.ndarray:
    """Bytes a layer moves: its input and output elements at the activation width plus its weights' bytes."""
    return elems * act_bytes + weight_bytes


@dataclass(frozen=True)
class LayerFeatures:
    """Feature columns of a set of layers (one row per layer): shapes, kernel, stride, ops, element counts.

    Built from a `Network` (optionally a subset of its rows) so that every layer model sees the same
    vocabulary; statistical models use `matrix()`.
    """

    n: np.ndarray
    c_in: np.ndarray
    h_in: np.ndarray
    w_in: np.ndarray
    c_out: np.ndarray
    h_out: np.ndarray
    w_out: np.ndarray
    kh: np.ndarray
    kw: np.ndarray
    sh: np.ndarray
    sw: np.ndarray
    groups: np.ndarray
    ops: np.ndarray
    in_elems: np.ndarray
    out_elems: np.ndarray
    weights: np.ndarray
    #: log share of a convolution's kernel taps that read its input, along h and w, and the part of their sum
    #: its dilation causes (`ir.kernel_taps`); None: 0
    h_taps: np.ndarray | None = None
    w_taps: np.ndarray | None = None
    d_taps: np.ndarray | None = None

    NAMES: ClassVar[tuple[str, ...]] = ("n", "c_in", "h_in", "w_in", "c_out", "h_out", "w_out", "kh", "kw",
                                        "sh", "sw", "groups", "ops", "in_elems", "out_elems", "weights")
    #: columns besides `NAMES`: the first two are the features `models.features.TAP_FEATURES`, the last the
    #: dilated share a convolution's `Mixed` model prices (`taps_slope`)
    TAPS: ClassVar[tuple[str, ...]] = ("h_taps", "w_taps", "d_taps")

    @classmethod
    def from_network(cls, net: Network, rows: np.ndarray | None = None) -> "LayerFeatures":
        """Features of ``net``'s layers (all, or the rows selected by an index/bool array)."""
        cols = net.cols
        data = {c: cols[c] for c in ("n", "c_in", "h_in", "w_in", "c_out", "h_out", "w_out", "kh", "kw", "sh",
                                     "sw", "groups")}
        data.update(ops=net.ops, in_elems=net.in_elems, out_elems=net.out_elems, weights=net.weights,
                    h_taps=net.taps[0], w_taps=net.taps[1], d_taps=net.taps[2])
        if rows is not None:
            data = {k: v[rows] for k, v in data.items()}
        return cls(**data)

    @classmethod
    def rows_of(cls, net: Network, rows: np.ndarray) -> "LayerFeatures":
        """`from_network` of ``rows``, each column taken when a model first reads it: a model that reads few
        columns (a roofline; a mixed model whose correction was already evaluated) pays for those only."""
        return _RowFeatures(net, rows)

    @classmethod
    def stacked_of(cls, net: Network, rows: np.ndarray, taps: bool = True) -> "LayerFeatures":
        """`from_network` of ``rows`` held as one (16, rows) float64 array (`stacked`) above the (3, rows) `TAPS`,
        the integer columns taken in one call from the network's matrix where it has one: the tree ensembles read
        it whole. Without ``taps`` (no reader of them) the `TAPS` rows are zeros, and the network's taps are not
        computed."""
        s = np.empty((len(cls.NAMES) + len(cls.TAPS), len(rows)))
        if net.matrix is not None:
            s[:12] = net.matrix[_MATRIX_ROWS, rows]
        else:
            for i, c in enumerate(cls.NAMES[:12]):
                s[i] = net.cols[c][rows]
        for i, v in enumerate((net.ops, net.in_elems, net.out_elems, net.weights)):
            v.take(rows, out=s[12 + i])
        if taps:
            net.taps.take(rows, axis=1, out=s[len(cls.NAMES):])
        else:
            s[len(cls.NAMES):] = 0.0
        return _Stacked(s)

    def __len__(self) -> int:
        return len(self.ops)

    def matrix(self) -> np.ndarray:
        """All features as a float64 matrix (rows = layers, columns in `NAMES` order)."""
        return np.column_stack([getattr(self, k).astype(np.float64) for k in self.NAMES])

    def take(self, rows: np.ndarray) -> "LayerFeatures":
        """The rows ``rows`` (an index or bool array)."""
        taps = {k: v[rows] for k in self.TAPS if (v := getattr(self, k)) is not None}
        return LayerFeatures(**{k: getattr(self, k)[rows] for k in self.NAMES}, **taps)

    def stacked_keys(self, taps: bool) -> np.ndarray:
        """`stacked`, with the `TAPS` rows below it if ``taps``: the columns that tell two rows apart for feature
        transforms with (or without) the kernel-tap features."""
        return np.concatenate([self.stacked(), self.tap_columns()]) if taps else self.stacked()

    def tap_columns(self) -> np.ndarray:
        """`TAPS` as a (3, rows) float64 array (zeros for those not given)."""
        out = np.zeros((len(self.TAPS), len(self)))
        for i, k in enumerate(self.TAPS):
            v = getattr(self, k)
            if v is not None:
                out[i] = v
        return out

    def stacked(self) -> np.ndarray:
        """All features as one float64 array with a row per feature (`NAMES` order) and a column per layer."""
        return np.stack([getattr(self, k) for k in self.NAMES]).astype(np.float64, copy=False)

    def bytes(self, bit_act: float, bit_weights: float) -> np.ndarray:
        """Bytes moved per layer: inputs and outputs at the activation width, weights at the weight width."""
        return layer_bytes(self.in_elems + self.out_elems, self.weights * (bit_weights / 8.0), bit_act / 8.0)


class _RowFeatures(LayerFeatures):
    """`LayerFeatures.rows_of`: the columns of some rows of a network, taken on first use."""

    def __init__(self, net: Network, rows: np.ndarray) -> None:  # (no dataclass init: columns come lazily)
        object.__setattr__(self, "_net", net)
        object.__setattr__(self, "_rows", rows)

    def tap_columns(self) -> np.ndarray:
        return self.__dict__["_net"].taps[:, self.__dict__["_rows"]]

    h_taps, w_taps, d_taps = (property(lambda self, i=i: self.tap_columns()[i]) for i in range(3))  # type: ignore

    def __getattr__(self, name: str) -> np.ndarray:
        if name not in LayerFeatures.NAMES:
            raise AttributeError(name)
        net = self.__dict__["_net"]
        col = net.cols.get(name)
        v = (col if col is not None else getattr(net, name))[self.__dict__["_rows"]]
        object.__setattr__(self, name, v)
        return v

    def __len__(self) -> int:
        return len(self.__dict__["_rows"])


class _Stacked(LayerFeatures):
    """`LayerFeatures` whose columns are the rows of one float64 array (`LayerFeatures.stacked_of`): `stacked`
    costs nothing, `take` one call. The integer columns hold their values as floats (exact: < 2^53)."""

    def __init__(self, stacked: np.ndarray) -> None:  # (no dataclass init: the columns are views)
        object.__setattr__(self, "_s", stacked)

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["_s"][_NAME_ROW[name]]
        except KeyError:
            raise AttributeError(name) from None

    def __len__(self) -> int:
        return self.__dict__["_s"].shape[1]

    h_taps, w_taps, d_taps = (property(lambda self, i=i: self.tap_columns()[i]) for i in range(3))  # type: ignore

    def stacked(self) -> np.ndarray:
        return self.__dict__["_s"][: len(LayerFeatures.NAMES)]

    def stacked_keys(self, taps: bool) -> np.ndarray:
        s = self.__dict__["_s"]
        return s if taps else s[: len(LayerFeatures.NAMES)]

    def tap_columns(self) -> np.ndarray:
        return self.__dict__["_s"][len(LayerFeatures.NAMES):]

    def take(self, rows: np.ndarray) -> "LayerFeatures":
        return _Stacked(self.__dict__["_s"][:, rows])


_NAME_ROW = {c: i for i, c in enumerate(LayerFeatures.NAMES)}


class LayerModel:
    """Predicts per-layer execution time in milliseconds from `LayerFeatures` (sklearn contract).

    Subclasses set ``kind`` (the name in platform files), take hyper-parameters in ``__init__`` (no work),
    learn attributes in ``fit`` and keep ``predict`` pure and vectorised.
    """

    kind: ClassVar[str] = "base"

    def fit(self, X: LayerFeatures, y: np.ndarray) -> "LayerModel":
        """Learn parameters from measured times ``y`` (ms); returns self."""
        raise NotImplementedError(f"{type(self).__name__} cannot be fitted")

    def predict(self, X: LayerFeatures) -> np.ndarray:
        """Predicted time in ms for every row of ``X``."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form for the platform file (``{"model": kind, ...}``)."""
        raise NotImplementedError

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> "LayerModel":
        """Build from plain data, validating every field; ``where`` names the place for errors."""
        raise NotImplementedError


MODEL_KINDS: dict[str, type[LayerModel]] = {}


def register(cls: type[LayerModel]) -> type[LayerModel]:
    """Class decorator: make a model kind loadable from platform files by its ``kind`` name."""
    MODEL_KINDS[cls.kind] = cls
    return cls


def model_from_dict(d: Any, where: str) -> LayerModel:
    """Instantiate the layer model described by ``d`` (its ``model`` field picks the kind)."""
    if not isinstance(d, Mapping):
        raise PlatformError(f"{where}: expected an object, got {type(d).__name__}")
    kind = d.get("model")
    if kind not in MODEL_KINDS:
        raise PlatformError(f"{where}.model: unknown model kind {kind!r} (known: {', '.join(sorted(MODEL_KINDS))})")
    return MODEL_KINDS[kind].from_dict(d, where)


def check_number(d: Mapping[str, Any], key: str, where: str, *, positive: bool = False,
                 minimum: float | None = None, maximum: float | None = None, default: Any = ...) -> float:
    """Read a finite number ``d[key]`` with range checks; errors name the field ``where.key``."""
    if key not in d:
        if default is not ...:
            return default
        raise PlatformError(f"{where}.{key}: missing")
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise PlatformError(f"{where}.{key}: expected a number, got {v!r}")
    v = float(v)
    if not np.isfinite(v):
        raise PlatformError(f"{where}.{key}: must be finite, got {v!r}")
    if positive and v <= 0:
        raise PlatformError(f"{where}.{key}: must be > 0, got {v!r}")
    if minimum is not None and v < minimum:
        raise PlatformError(f"{where}.{key}: must be >= {minimum}, got {v!r}")
    if maximum is not None and v > maximum:
        raise PlatformError(f"{where}.{key}: must be <= {maximum}, got {v!r}")
    return v
