"""Layer IR: a network as columns of numpy arrays (struct-of-arrays), names and edges.

Every front end (torch.fx, ONNX, ANNETTE JSON, search-space builders) produces a `Network`; the mapping
pass and the layer models consume it. Per-layer quantities (ops, element counts) are computed for all
layers at once, so estimating a network costs a handful of numpy calls, not a Python loop per layer.

Shapes are NCHW. Tensors of other ranks are folded into four dimensions so element counts stay exact:
``[C] -> (1, C, 1, 1)``, ``[N, C] -> (N, C, 1, 1)``, ``[N, C, L] -> (N, C, L, 1)``,
``[N, C, D, H, W] -> (N, C, D*H, W)``.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from .errors import AnnetteError

__all__ = [
    "topological_order",
    "LayerType",
    "Network",
    "NetworkBuilder",
    "IRError",
    "to_nchw",
    "check_size",
    "MAX_ELEMS",
    "MAX_WINDOW",
    "SLOW_UNITS",
    "transpose_slow",
    "SUBNORMAL_LOGITS",
    "MASK_SCAN_LIMIT",
    "subnormal_share",
    "TYPE_FALLBACKS",
    "kernel_taps",
]


class IRError(AnnetteError):
    """A network description is inconsistent (bad shape, dangling edge, unknown layer)."""


class LayerType(enum.IntEnum):
    """Layer types of the IR. Values are stable: they index per-type lookup tables of platforms."""

    INPUT = 0
    CONV = 1
    DEPTHWISE_CONV = 2
    GROUP_CONV = 3
    CONV_TRANSPOSE = 4
    FULLY_CONNECTED = 5
    MATMUL = 6
    MAX_POOL = 7
    AVG_POOL = 8
    GLOBAL_POOL = 9
    BATCH_NORM = 10
    RELU = 11
    RELU6 = 12
    LEAKY_RELU = 13
    SIGMOID = 14
    SILU = 15
    HARDSWISH = 16
    HARDSIGMOID = 17
    GELU = 18
    TANH = 19
    ADD = 20
    MUL = 21
    CONCAT = 22
    RESHAPE = 23
    FLATTEN = 24
    TRANSPOSE = 25
    RESIZE = 26
    PAD = 27
    SOFTMAX = 28
    UNKNOWN = 29
    CONV_POOL = 30  # a convolution with a fused pooling layer (produced by the mapping pass)
    SUB = 31
    DIV = 32
    SOFTPLUS = 33
    CLIP = 34
    LRN = 35
    SLICE = 36
    DROPOUT = 37
    REDUCE_MEAN = 38
    LAYER_NORM = 39
    BLOCKED_RESIZE = 40  # a Resize that runs in the blocked layout (produced by the mapping pass)
    BLOCKED_RESHAPE = 41  # a Reshape / Flatten of a convolution's feature map (produced by the mapping pass)
    ROW_BATCH_NORM = 42  # a BatchNorm over the rows of a matrix, e.g. token rows (produced by the mapping pass)
    CHANNEL_SHUFFLE = 43  # a view, transpose and view back of a feature map run as one kernel (mapping pass)
    PLAIN_MAX_POOL = 44  # a max pool of a plain-layout tensor, no feature map (mapping pass, no layout costs)
    PLAIN_AVG_POOL = 45  # an average pool of a plain-layout tensor (as PLAIN_MAX_POOL)
    ELEMENTWISE = 46  # other element-wise math: exp, log, sqrt, pow, erf, neg, abs, where, comparisons, ELU, ...
    PICK = 47  # whole entries of the leading axis (``qkv[i]``, ``unbind(0)``): a contiguous part, no strided copy

    @property
    def label(self) -> str:
        """The public name used in platform files, tables and plots (e.g. ``DepthwiseConv``)."""
        return _LABELS[self]

    @classmethod
    def from_label(cls, label: str) -> "LayerType":
        """Parse a public name (case-insensitive, ``_``/``-`` ignored); raises KeyError if unknown."""
        key = label.replace("_", "").replace("-", "").lower()
        return _BY_KEY[key]


_LABELS: dict[LayerType, str] = {
    LayerType.INPUT: "Input",
    LayerType.CONV: "Conv",
    LayerType.DEPTHWISE_CONV: "DepthwiseConv",
    LayerType.GROUP_CONV: "GroupConv",
    LayerType.CONV_TRANSPOSE: "ConvTranspose",
    LayerType.FULLY_CONNECTED: "FullyConnected",
    LayerType.MATMUL: "MatMul",
    LayerType.MAX_POOL: "MaxPool",
    LayerType.AVG_POOL: "AvgPool",
    LayerType.GLOBAL_POOL: "GlobalPool",
    LayerType.BATCH_NORM: "BatchNorm",
    LayerType.RELU: "Relu",
    LayerType.RELU6: "Relu6",
    LayerType.LEAKY_RELU: "LeakyRelu",
    LayerType.SIGMOID: "Sigmoid",
    LayerType.SILU: "SiLU",
    LayerType.HARDSWISH: "HardSwish",
    LayerType.HARDSIGMOID: "HardSigmoid",
    LayerType.GELU: "GELU",
    LayerType.TANH: "Tanh",
    LayerType.ADD: "Add",
    LayerType.MUL: "Mul",
    LayerType.CONCAT: "Concat",
    LayerType.RESHAPE: "Reshape",
    LayerType.FLATTEN: "Flatten",
    LayerType.TRANSPOSE: "Transpose",
    LayerType.RESIZE: "Resize",
    LayerType.PAD: "Pad",
    LayerType.SOFTMAX: "Softmax",
    LayerType.UNKNOWN: "Unknown",
    LayerType.CONV_POOL: "ConvPool",
    LayerType.SUB: "Sub",
    LayerType.DIV: "Div",
    LayerType.SOFTPLUS: "Softplus",
    LayerType.CLIP: "Clip",
    LayerType.LRN: "LRN",
    LayerType.SLICE: "Slice",
    LayerType.DROPOUT: "Dropout",
    LayerType.REDUCE_MEAN: "ReduceMean",
    LayerType.LAYER_NORM: "LayerNorm",
    LayerType.BLOCKED_RESIZE: "BlockedResize",
    LayerType.BLOCKED_RESHAPE: "BlockedReshape",
    LayerType.ROW_BATCH_NORM: "RowBatchNorm",
    LayerType.CHANNEL_SHUFFLE: "ChannelShuffle",
    LayerType.PLAIN_MAX_POOL: "PlainMaxPool",
    LayerType.PLAIN_AVG_POOL: "PlainAvgPool",
    LayerType.ELEMENTWISE: "Elementwise",
    LayerType.PICK: "Pick",
}
_BY_KEY: dict[str, LayerType] = {v.lower(): k for k, v in _LABELS.items()}
_BY_KEY.update({"swish": LayerType.SILU, "upsample": LayerType.RESIZE, "gemm": LayerType.FULLY_CONNECTED,
                "linear": LayerType.FULLY_CONNECTED, "dwconv": LayerType.DEPTHWISE_CONV})

T = LayerType

#: Where a platform looks when it has no model for a type: the first key present wins, ``Base`` last.
TYPE_FALLBACKS: dict[LayerType, tuple[str, ...]] = {
    t: (t.label,) for t in LayerType
}
TYPE_FALLBACKS.update({
    T.GROUP_CONV: ("GroupConv", "Conv"),
    T.CONV_POOL: ("ConvPool", "Conv"),
    T.MAX_POOL: ("MaxPool", "Pool"),
    T.AVG_POOL: ("AvgPool", "Pool"),
    T.GLOBAL_POOL: ("GlobalPool", "Pool"),
    T.MATMUL: ("MatMul", "FullyConnected"),
    T.RELU6: ("Relu6", "Relu"),
    T.LEAKY_RELU: ("LeakyRelu", "Relu"),
    T.FLATTEN: ("Flatten", "Reshape"),
    T.TRANSPOSE: ("Transpose", "Reshape"),
    T.BLOCKED_RESIZE: ("BlockedResize", "Resize"),
    T.BLOCKED_RESHAPE: ("BlockedReshape", "Reshape"),
    T.ROW_BATCH_NORM: ("RowBatchNorm", "BatchNorm"),
    T.CHANNEL_SHUFFLE: ("ChannelShuffle", "Transpose", "Reshape"),
    T.PLAIN_MAX_POOL: ("PlainMaxPool", "MaxPool", "Pool"),
    T.PLAIN_AVG_POOL: ("PlainAvgPool", "AvgPool", "Pool"),
    T.PICK: ("Pick", "Slice"),
    # the same runtime kernel as a swept type: Clip is what Relu6 exports to; Sub and Div are the binary
    # element-wise kernels of Add and Mul
    T.CLIP: ("Clip", "Relu6", "Relu"),
    T.SUB: ("Sub", "Add"),
    T.DIV: ("Div", "Mul"),
    # no suite sweeps them: a transcendental activation's kernel is the nearest in cost per element
    T.ELEMENTWISE: ("Elementwise", "Sigmoid", "Relu"),
})
TYPE_FALLBACKS = {t: keys + ("Base",) for t, keys in TYPE_FALLBACKS.items()}

CONV_TYPES = (T.CONV, T.DEPTHWISE_CONV, T.GROUP_CONV, T.CONV_POOL)
POOL_TYPES = (T.MAX_POOL, T.AVG_POOL, T.GLOBAL_POOL)
#: Types whose cost is one operation per output element (activations and element-wise math).
ELEMENTWISE_TYPES = (T.RELU, T.RELU6, T.LEAKY_RELU, T.SIGMOID, T.SILU, T.HARDSWISH, T.HARDSIGMOID, T.GELU,
                     T.TANH, T.SOFTPLUS, T.CLIP, T.SOFTMAX, T.LRN, T.ELEMENTWISE)
#: Types combining several inputs element by element: (inputs - 1) operations per output element.
MERGE_TYPES = (T.ADD, T.MUL, T.SUB, T.DIV)
#: Pure data movement: no arithmetic.
MOVE_TYPES = (T.CONCAT, T.RESHAPE, T.FLATTEN, T.TRANSPOSE, T.PAD, T.SLICE, T.DROPOUT, T.RESIZE, T.BLOCKED_RESIZE,
              T.BLOCKED_RESHAPE, T.CHANNEL_SHUFFLE, T.PICK)

_INPUT = int(T.INPUT)

#: Integer columns of a network, one value per layer (``slow``: see `SLOW_UNITS`).
INT_COLUMNS = ("n", "c_in", "h_in", "w_in", "c_out", "h_out", "w_out",
               "kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw", "groups", "slow")

#: What a layer's ``slow`` column counts: its work on a runtime's slow path, which its shapes do not show. A
#: platform's ``slow_ns`` prices one unit per type. MatMul: multiply-adds with a subnormal operand (attention
#: probabilities of a masked softmax: exp(-100) is subnormal and x86 takes a microcode assist per operation);
#: Softmax: its subnormal outputs; Transpose: the elements it moves one at a time (`transpose_slow`).
SLOW_UNITS = {T.MATMUL: "multiply-adds with a subnormal operand", T.SOFTMAX: "subnormal outputs",
              T.TRANSPOSE: "elements moved one at a time"}

#: An additive constant whose exp() is subnormal in float32 (e^-103.3 .. e^-87.3): the -100 of a shifted-window
#: attention mask is; -inf or -1e4 underflow to exact zeros, which cost nothing extra.
SUBNORMAL_LOGITS = (-103.28, -87.34)
#: largest constant (elements) the front ends read or compute to look for attention-mask values
MASK_SCAN_LIMIT = 1 << 22


def subnormal_share(values: np.ndarray) -> float:
    """Share of ``values`` (an additive mask) that a following softmax turns subnormal (`SUBNORMAL_LOGITS`)."""
    if not values.size or not np.issubdtype(values.dtype, np.floating):
        return 0.0
    lo, hi = SUBNORMAL_LOGITS
    return float(np.count_nonzero((values >= lo) & (values <= hi))) / values.size


def transpose_slow(shape: Sequence[int], perm: Sequence[int]) -> int:
    """Elements a permutation moves one at a time: all of them when, with unit axes dropped and axes that stay
    neighbours merged, the innermost axis moves and no single axis move gives the order (a block or grid
    partition's ``(0, 5, 1, 3, 2, 4)``); 0 when rows are copied whole or one axis moves (NCHW <-> NHWC)."""
    keep = [a for a in perm if shape[a] != 1]
    order = sorted(keep)
    merged: list[int] = []  # the kept axes in output order, neighbours in input order merged
    for a in keep:
        if merged and order.index(a) == order.index(merged[-1]) + 1:
            merged[-1] = a
            continue
        merged.append(a)
    rank = sorted(merged)
    q = [rank.index(a) for a in merged]
    if len(q) < 2 or q[-1] == len(q) - 1:
        return 0
    if any(q[:i] + q[i + 1:] == sorted(q[:i] + q[i + 1:]) for i in range(len(q))):
        return 0
    return int(np.prod(np.asarray(shape, dtype=np.int64)))

#: Largest element count of one tensor that a front end accepts (about 10^15; far beyond any real network,
#: small enough that element and operation counts stay exact in int64 and float64).
MAX_ELEMS = 2**50

#: Largest kernel, stride, dilation or padding value a front end accepts (far beyond any real layer).
MAX_WINDOW = 2**24


def check_size(shape: Sequence[int], what: str = "shape") -> None:
    """Raise `IRError` unless every dimension is a positive integer and the element count is at most
    `MAX_ELEMS` (catches absurd sizes such as 10^300 before they overflow the int64 columns)."""
    total = 1
    for d in shape:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d <= 0:
            raise IRError(f"{what} {_show_dims(shape)} has a dimension that is not a positive integer: {d!r}")
        total *= int(d)
        if total > MAX_ELEMS:
            raise IRError(f"{what} {_show_dims(shape)} has more than 2^50 elements; no network has tensors "
                          "this large")


def _show_dims(shape: Sequence[int]) -> str:
    """A shape for a message; absurdly long numbers shortened."""
    return "[" + ", ".join(str(d) if len(str(d)) <= 20 else f"{str(d)[:6]}...({len(str(d))} digits)"
                           for d in shape) + "]"


def to_nchw(shape: Sequence[int]) -> tuple[int, int, int, int]:
    """Fold a tensor shape of any rank into (N, C, H, W) with the same element count."""
    s = [int(x) for x in shape]
    if any(x <= 0 for x in s):
        raise IRError(f"shape {list(shape)} has a zero, negative or dynamic dimension; give a static input shape")
    if len(s) == 0:
        return (1, 1, 1, 1)
    if len(s) == 1:
        return (1, s[0], 1, 1)
    if len(s) == 2:
        return (s[0], s[1], 1, 1)
    if len(s) == 3:
        return (s[0], s[1], s[2], 1)
    if len(s) == 4:
        return (s[0], s[1], s[2], s[3])
    h = 1
    for x in s[2:-1]:
        h *= x
    return (s[0], s[1], h, s[-1])


def _rows_last(shape: Sequence[int]) -> tuple[int, ...]:
    """A 3-D shape with a unit axis in front: a softmax over the last axis of ``(B * H, L, S)`` scores folds as the
    ``(1, H, L, S)`` of 4-D attention (row length in W), not as ``(B * H, L, S, 1)``, where the layer models read
    it as rows (2.4x the time ONNX Runtime takes); other ranks keep `to_nchw`."""
    return (1, *shape) if len(shape) == 3 else tuple(shape)


#: derived quantities `Network.set_derived` may give
DERIVED = frozenset({"ops", "weights", "in_elems", "out_elems"})


@dataclass
class Network:
    """A network as parallel per-layer columns (numpy arrays) plus names and edges.

    ``types`` holds `LayerType` values; the integer columns are listed in `INT_COLUMNS`; ``edges`` is an
    (E, 2) int array of (producer, consumer) layer indices; ``attrs`` holds optional per-layer extras
    (e.g. absorbed layers after mapping, the original op name of an Unknown layer).
    """

    name: str
    names: list[str]
    types: np.ndarray
    cols: dict[str, np.ndarray]
    edges: np.ndarray
    attrs: dict[str, list] = field(default_factory=dict)
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    #: optional (len(INT_COLUMNS), L) int64 array the columns are rows of (lets `concat` stack in one call)
    matrix: np.ndarray | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = len(self.names)
        if self.types.shape != (n,):
            raise IRError(f"network {self.name!r}: {n} names but {self.types.shape[0]} types")
        if "slow" not in self.cols:  # a network from before the column: nothing on a slow path
            self.cols = {**self.cols, "slow": np.zeros(n, dtype=np.int64)}
            self.matrix = None
        for c in INT_COLUMNS:
            if c not in self.cols:
                raise IRError(f"network {self.name!r}: column {c!r} missing")
            if self.cols[c].shape != (n,):
                raise IRError(f"network {self.name!r}: column {c!r} has {self.cols[c].shape[0]} rows, expected {n}")
        if self.edges.size and (self.edges.min() < 0 or self.edges.max() >= n):
            raise IRError(f"network {self.name!r}: an edge points outside the {n} layers")

    @classmethod
    def from_matrix(cls, name: str, names: list[str], types: np.ndarray, matrix: np.ndarray, edges: np.ndarray,
                    attrs: dict[str, list] | None = None, derived: dict[str, np.ndarray] | None = None,
                    check: bool = True) -> "Network":
        """A network whose integer columns are the rows of ``matrix`` (shape (len(INT_COLUMNS), L)); ``derived``:
        see `set_derived`. Without ``check`` the shapes and edges are not validated (for a network derived from a
        validated one, e.g. the mapping's executed network)."""
        if check:
            net = cls(name, names, types, dict(zip(INT_COLUMNS, matrix)), edges, attrs or {}, matrix=matrix)
        else:
            net = cls.__new__(cls)
            net.__dict__.update(name=name, names=names, types=types, cols=dict(zip(INT_COLUMNS, matrix)), edges=edges,
                                attrs=attrs or {}, _cache={}, matrix=matrix)
        if derived:
            net.set_derived(derived)
        return net

    # ----------------------------------------------------------------------------------------------
    # column access
    def __len__(self) -> int:
        return len(self.names)

    def __getattr__(self, item: str) -> np.ndarray:
        cols = self.__dict__.get("cols")
        if cols is not None and item in cols:
            return cols[item]
        raise AttributeError(item)

    # ----------------------------------------------------------------------------------------------
    # derived quantities, all vectorised and cached (a Network is immutable after construction)
    def _cached(self, key: str, fn):
        v = self._cache.get(key)
        if v is None:
            v = fn()
            self._cache[key] = v
        return v

    def set_derived(self, derived: dict[str, np.ndarray]) -> None:
        """Give derived quantities (``ops``, ``weights``, ``in_elems``, ``out_elems``) instead of deriving them from
        the columns: a fused layer computes its primary's operations but writes its last secondary's output."""
        unknown = set(derived) - DERIVED
        if unknown:
            raise IRError(f"network {self.name!r}: not a derived quantity: {', '.join(sorted(unknown))}")
        self._cache.update(derived)

    @property
    def out_elems(self) -> np.ndarray:
        """Output element count per layer (float64, exact for realistic sizes)."""
        cols = self.cols
        return self._cached("out_elems", lambda: cols["n"].astype(np.float64) * cols["c_out"] * cols["h_out"]
                            * cols["w_out"])

    @property
    def in_elems(self) -> np.ndarray:
        """Input element count per layer: the sum over all producing layers (the own input shape if none).

        Network inputs read nothing (0): their cost, if a platform gives them one, is writing the output.
        """
        def f():
            cols, edges = self.cols, self.edges
            own = cols["n"].astype(np.float64) * cols["c_in"] * cols["h_in"] * cols["w_in"]
            if edges.size:
                total = np.bincount(edges[:, 1], weights=self.out_elems[edges[:, 0]], minlength=len(self))
                own = np.where(self.n_inputs > 0, total, own)
            return np.where(self.types == _INPUT, 0.0, own)
        return self._cached("in_elems", f)

    @property
    def n_inputs(self) -> np.ndarray:
        """Number of producing layers per layer."""
        return self._cached("n_inputs", lambda: np.bincount(self.edges[:, 1], minlength=len(self))
                            if self.edges.size else np.zeros(len(self), np.int64))

    @property
    def n_outputs(self) -> np.ndarray:
        """Number of consuming layers per layer."""
        return self._cached("n_outputs", lambda: np.bincount(self.edges[:, 0], minlength=len(self))
                            if self.edges.size else np.zeros(len(self), np.int64))

    @property
    def weights(self) -> np.ndarray:
        """Weight (parameter) element count per layer, biases excluded."""
        return self._cached("weights", lambda: layer_weights(self.types, self.cols))

    @property
    def ops(self) -> np.ndarray:
        """Operations per layer: 2 x MACs for convolutions and matrix products, element ops otherwise."""
        return self._cached("ops", lambda: layer_ops(self.types, self.cols, self.out_elems, self.in_elems,
                                                     self.n_inputs))

    @property
    def taps(self) -> np.ndarray:
        """Per convolution (3, layers): the log share of its kernel taps that read the input rather than its
        padding, along h and w, and the part of their sum its dilation causes (`kernel_taps`); 0 elsewhere."""
        return self._cached("taps", lambda: kernel_taps(self.types, self.cols))

    @property
    def total_ops(self) -> float:
        """Sum of `ops` over all layers."""
        return float(self.ops.sum())

    @property
    def total_weights(self) -> float:
        """Sum of `weights` over all layers (parameter count without biases)."""
        return float(self.weights.sum())

    def parents(self, i: int) -> list[int]:
        """Indices of the layers feeding layer ``i``."""
        return [int(s) for s, d in self.edges if d == i]

    def children(self, i: int) -> list[int]:
        """Indices of the layers fed by layer ``i``."""
        return [int(d) for s, d in self.edges if s == i]

    def index(self, name: str) -> int:
        """Row of the layer called ``name``."""
        idx = self._cached("name_index", lambda: {n: i for i, n in enumerate(self.names)})
        try:
            return idx[name]
        except KeyError:
            raise KeyError(f"network {self.name!r} has no layer {name!r}") from None

    def type_labels(self) -> list[str]:
        """Public type names of all layers, in order."""
        labels = [t.label for t in LayerType]
        return [labels[t] for t in self.types]

    def in_shape(self, i: int) -> tuple[int, int, int, int]:
        """Input (first input) shape of layer ``i`` as NCHW."""
        return tuple(int(self.cols[c][i]) for c in ("n", "c_in", "h_in", "w_in"))  # type: ignore[return-value]

    def out_shape(self, i: int) -> tuple[int, int, int, int]:
        """Output shape of layer ``i`` as NCHW."""
        return tuple(int(self.cols[c][i]) for c in ("n", "c_out", "h_out", "w_out"))  # type: ignore[return-value]

    def summary(self) -> dict[str, int]:
        """Count of layers per public type name."""
        labels, counts = np.unique(self.types, return_counts=True)
        return {LayerType(int(t)).label: int(c) for t, c in zip(labels, counts)}

    def unknown_ops(self) -> list[str]:
        """Original op names of the layers typed `Unknown` (sorted, unique)."""
        ops = self.attrs.get("op")
        idx = np.flatnonzero(self.types == T.UNKNOWN)
        return sorted({(ops[i] if ops else None) or "?" for i in idx})

    def attr(self, key: str, i: int, default=None):
        """Optional extra attribute ``key`` of layer ``i``."""
        col = self.attrs.get(key)
        return default if col is None else col[i]

    def __repr__(self) -> str:
        return f"Network({self.name!r}, {len(self)} layers, {self.total_ops / 1e9:.3f} GOPs)"

    @classmethod
    def concat(cls, networks: Sequence["Network"], name: str = "batch",
               keep_names: bool = True) -> tuple["Network", np.ndarray]:
        """Stack networks into one (disjoint union); returns it and each layer's network index.

        Without ``keep_names`` the layer names are left empty (batch scoring does not need them).
        """
        if not networks:
            raise IRError("no networks given")
        sizes = np.fromiter((len(n.types) for n in networks), np.int64, len(networks))
        offsets = np.zeros(len(networks), np.int64)
        np.cumsum(sizes[:-1], out=offsets[1:])
        total = int(sizes.sum())
        if keep_names:
            names: list[str] = []
            for n in networks:
                names.extend(n.names)
        else:
            names = [""] * total
        e_sizes = np.fromiter((len(n.edges) for n in networks), np.int64, len(networks))
        edges = (np.concatenate([n.edges for n in networks]) + np.repeat(offsets, e_sizes)[:, None]
                 if e_sizes.sum() else np.zeros((0, 2), np.int64))
        matrix = np.concatenate([n.matrix if n.matrix is not None else np.stack([n.cols[c] for c in INT_COLUMNS])
                                 for n in networks], axis=1)
        net = cls.from_matrix(name, names, np.concatenate([n.types for n in networks]), matrix, edges)
        return net, np.repeat(np.arange(len(networks)), sizes)


#: input elements a Resize reads per output element and spatial axis, by interpolation mode (torch's and ONNX's
#: names; none given: nearest, both libraries' default). A Resize's kernel columns (kh, kw) hold them (1 along an
#: axis it keeps: a copy): a bilinear resize computes 4 taps per output element where a nearest one copies one
#: (ONNX Runtime on one core: ~1.4 vs 0.1-0.5 ns per output element). Its operations stay one per output element:
#: a layer model fitted before the taps were recorded saw kh = kw = 0 on every Resize, never split on them, and
#: predicts as it did.
RESIZE_TAPS = {"nearest": 1, "area": 1, "linear": 2, "bilinear": 2, "trilinear": 2, "cubic": 4, "bicubic": 4}


def resize_taps(mode: object) -> int:
    """Interpolation taps per spatial axis of a Resize of ``mode`` (`RESIZE_TAPS`; unknown modes: 1)."""
    return RESIZE_TAPS.get(str(mode).lower(), 1) if mode is not None else 1


def _table(entries: dict[tuple[LayerType, ...], float]) -> np.ndarray:
    """A per-type coefficient table (indexed by type value)."""
    tab = np.zeros(max(LayerType) + 1)
    for types, v in entries.items():
        tab[list(types)] = v
    return tab


# Operations = one basis quantity per layer times a per-type coefficient: the basis a type counts on and its
# coefficient are two table lookups instead of per-type branching, so counting costs the same for 10 or 10,000
# layers of any mix. The bases, in the order `layer_ops` stacks them, with the types counting on each:
_OPS_TERMS: tuple[dict[tuple[LayerType, ...], float], ...] = (
    {CONV_TYPES: 2.0},                                                 # 2 * out * (c_in / groups) * kh * kw
    {(T.CONV_TRANSPOSE,): 2.0},                                        # 2 * n * h_in * w_in * c_in * (c_out / groups) * k
    {(T.FULLY_CONNECTED, T.MATMUL): 2.0},                              # 2 * out * c_in
    {(T.MAX_POOL, T.AVG_POOL, T.PLAIN_MAX_POOL, T.PLAIN_AVG_POOL): 2.0},  # 2 ops per window element (ANNETTE's)
    {(T.GLOBAL_POOL,): 2.0, (T.REDUCE_MEAN, T.LAYER_NORM): 1.0},       # per input element
    {(T.BATCH_NORM, T.ROW_BATCH_NORM): 2.0, ELEMENTWISE_TYPES: 1.0, (T.RESIZE, T.BLOCKED_RESIZE): 1.0},  # per output element
    {MERGE_TYPES: 1.0},                                                # (inputs - 1) per output element
)


def _basis_tables(terms: Sequence[dict[tuple[LayerType, ...], float]]) -> tuple[np.ndarray, np.ndarray]:
    """Per type (indexed by type value): the index of the basis it counts on, and its coefficient (0: none)."""
    basis, coef = np.zeros(max(LayerType) + 1, dtype=np.intp), np.zeros(max(LayerType) + 1)
    for i, entries in enumerate(terms):
        for types, v in entries.items():
            assert not coef[list(types)].any(), f"a type counts on two bases: {types}"
            basis[list(types)], coef[list(types)] = i, v
    return basis, coef


_OPS_BASIS, _OPS_COEF = _basis_tables(_OPS_TERMS)
_W_CONV = _table({CONV_TYPES: 1.0})
_W_CONVT = _table({(T.CONV_TRANSPOSE,): 1.0})
_W_FC = _table({(T.FULLY_CONNECTED,): 1.0})
_W_BN = _table({(T.BATCH_NORM, T.ROW_BATCH_NORM): 2.0})


def layer_weights(types: np.ndarray, cols: dict[str, np.ndarray]) -> np.ndarray:
    """Parameter element count per layer, vectorised over all layers (biases excluded)."""
    c_in, c_out = cols["c_in"].astype(np.float64), cols["c_out"].astype(np.float64)
    kg = cols["kh"] * cols["kw"] / np.maximum(cols["groups"], 1)
    return (_W_CONV[types] * c_out * c_in * kg + _W_CONVT[types] * c_in * c_out * kg
            + _W_FC[types] * c_in * c_out + _W_BN[types] * c_out)


def layer_ops(types: np.ndarray, cols: dict[str, np.ndarray], out_elems: np.ndarray, in_elems: np.ndarray,
              n_inputs: np.ndarray) -> np.ndarray:
    """Operations per layer (2 x MACs where there are MACs), vectorised over all layers.

    A ConvPool row keeps the convolution's shapes (the mapping pass records the pooled output size).
    """
    c_in = cols["c_in"].astype(np.float64)
    k = cols["kh"].astype(np.float64) * cols["kw"]
    kg = k / np.maximum(cols["groups"], 1)
    n = len(types)
    bases = np.empty((len(_OPS_TERMS), n))  # (filled row by row: np.stack costs several calls more)
    np.multiply(out_elems * c_in, kg, out=bases[0])
    np.multiply(cols["n"] * cols["h_in"] * cols["w_in"] * c_in * cols["c_out"], kg, out=bases[1])
    np.multiply(out_elems, c_in, out=bases[2])
    np.multiply(out_elems, k, out=bases[3])
    bases[4] = in_elems
    bases[5] = out_elems
    np.multiply(np.maximum(n_inputs - 1, 1), out_elems, out=bases[6])
    return _OPS_COEF[types] * bases.take(_OPS_BASIS[types] * n + np.arange(n))


def _axis_taps(size: np.ndarray, out: np.ndarray, k: np.ndarray, s: np.ndarray, pad: np.ndarray,
               d: np.ndarray) -> np.ndarray:
    """Log of (taps reading the input) / (all taps) along one axis, summed over the output positions: tap ``i``
    reads input ``o * s - pad // 2 + i * d``, inside for a closed range of outputs ``o`` (all taps at once: a
    (taps, layers) array, so the cost does not grow with the kernel size)."""
    shift = np.floor(pad / 2) - np.arange(int(k.max(initial=1)))[:, None] * d
    first = np.maximum(np.ceil(shift / s), 0)
    last = np.minimum(np.floor((size - 1 + shift) / s), out - 1)
    inside = np.maximum(last - first + 1, 0)
    inside[np.arange(len(shift))[:, None] >= k] = 0
    return np.log(np.maximum(inside.sum(axis=0), 1) / np.maximum(k * out, 1))


def kernel_taps(types: np.ndarray, cols: dict[str, np.ndarray]) -> np.ndarray:
    """Per layer, shape (3, layers): log of the share of a convolution's kernel taps that read its input and not
    its padding, along h and along w, and how much lower their sum is than that of the same convolution
    undilated (its padding divided by its dilation); 0 for other layers. A dilated convolution whose dilation
    nears its input size (DeepLab's atrous rates 12-18 on 33 x 33 maps) reads padding with most taps; runtimes
    skip such taps (ONNX Runtime, OpenVINO), so its time follows this share, not its MACs."""
    out = np.zeros((3, len(types)))
    conv = np.flatnonzero(np.isin(types, CONV_TYPES))
    if conv.size:
        f = {c: cols[c][conv].astype(np.float64) for c in ("h_in", "w_in", "h_out", "w_out", "kh", "kw", "sh",
                                                              "sw", "ph", "pw", "dh", "dw")}
        out[0, conv] = _axis_taps(f["h_in"], f["h_out"], f["kh"], np.maximum(f["sh"], 1), f["ph"],
                                  np.maximum(f["dh"], 1))
        out[1, conv] = _axis_taps(f["w_in"], f["w_out"], f["kw"], np.maximum(f["sw"], 1), f["pw"],
                                  np.maximum(f["dw"], 1))
        dilated = np.flatnonzero((f["dh"] > 1) | (f["dw"] > 1))
        if dilated.size:
            g = {k: v[dilated] for k, v in f.items()}
            one = np.ones(dilated.size)
            plain = sum(_axis_taps(g[f"{a}_in"], g[f"{a}_out"], g[f"k{a[0]}"], np.maximum(g[f"s{a[0]}"], 1),
                                   np.round(g[f"p{a[0]}"] / np.maximum(g[f"d{a[0]}"], 1)), one) for a in ("h", "w"))
            rows = conv[dilated]
            out[2, rows] = np.minimum(out[0, rows] + out[1, rows] - plain, 0.0)
    return out


class NetworkBuilder:
    """Accumulates layers one by one (front ends) and freezes them into a `Network`.

    Example::

        b = NetworkBuilder("tiny")
        x = b.input("x", (1, 3, 32, 32))
        y = b.conv("conv", x, out_channels=8, kernel=3, padding=1)
        net = b.build()
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._names: list[str] = []
        self._types: list[int] = []
        self._rows: list[tuple[int, ...]] = []
        self._edges: list[tuple[int, int]] = []
        self._attrs: dict[str, dict[int, object]] = {}
        self._index: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._names)

    def out_shape(self, layer: int) -> tuple[int, int, int, int]:
        """NCHW output shape of an already added layer."""
        r = self._rows[layer]
        return (r[0], r[4], r[5], r[6])

    def index(self, name: str) -> int:
        """Index of an already added layer by name."""
        return self._index[name]

    def add(self, type_: LayerType, name: str, inputs: Iterable[int], out_shape: Sequence[int],
            in_shape: Sequence[int] | None = None, kernel: tuple[int, int] = (0, 0),
            stride: tuple[int, int] = (1, 1), padding: tuple[int, int] = (0, 0),
            dilation: tuple[int, int] = (1, 1), groups: int = 1, slow: int = 0, **attrs: object) -> int:
        """Add a layer; shapes may have any rank (folded to NCHW); returns the new layer's index.

        ``in_shape`` defaults to the first input's output shape; ``padding`` is the total padding per
        spatial axis (both sides); ``slow``: the layer's work units on a runtime's slow path (`SLOW_UNITS`).
        Extra keyword attributes are kept in ``Network.attrs``.
        """
        inputs = list(inputs)
        for i in inputs:
            if not 0 <= i < len(self._names):
                raise IRError(f"layer {name!r}: input index {i} does not exist")
        if type_ == T.SOFTMAX:  # (B * H, L, S) scores: folded as (1, B * H, L, S)
            out_shape, in_shape = _rows_last(out_shape), None if in_shape is None else _rows_last(in_shape)
        on, oc, oh, ow = to_nchw(out_shape)
        if in_shape is not None:
            inn, ic, ih, iw = to_nchw(in_shape)
        elif inputs:
            inn, ic, ih, iw = self.out_shape(inputs[0])
        else:
            inn, ic, ih, iw = on, oc, oh, ow
        if type_ == LayerType.RESIZE and tuple(kernel) == (0, 0):  # taps along the axes it resizes
            taps = resize_taps(attrs.get("mode"))
            kernel = (taps if oh != ih else 1, taps if ow != iw else 1)
        if name in self._index:
            base, k = name, 1
            while f"{base}_{k}" in self._index:
                k += 1
            name = f"{base}_{k}"
        idx = len(self._names)
        self._index[name] = idx
        self._names.append(name)
        self._types.append(int(type_))
        self._rows.append((on, ic, ih, iw, oc, oh, ow, int(kernel[0]), int(kernel[1]), int(stride[0]),
                           int(stride[1]), int(padding[0]), int(padding[1]), int(dilation[0]),
                           int(dilation[1]), int(groups), int(slow)))
        self._edges.extend((i, idx) for i in inputs)
        for k, v in attrs.items():
            if v is not None:
                self._attrs.setdefault(k, {})[idx] = v
        if len(out_shape) > 4 and type_ in (LayerType.RESHAPE, LayerType.TRANSPOSE):
            # the folded NCHW columns lose a 5-D view (ShuffleNet's channel shuffle); the exporter needs it back
            self._attrs.setdefault("shape", {})[idx] = tuple(int(v) for v in out_shape)
        return idx

    # convenience helpers for the common layers; each computes its output shape analytically
    def input(self, name: str, shape: Sequence[int]) -> int:
        """Add a network input of the given shape."""
        return self.add(T.INPUT, name, [], shape)

    def conv(self, name: str, x: int, out_channels: int, kernel: int | tuple[int, int],
             stride: int | tuple[int, int] = 1, padding: int | tuple[int, int] = 0,
             dilation: int | tuple[int, int] = 1, groups: int = 1) -> int:
        """Add a 2-D convolution (depthwise / grouped typed by ``groups``); ``padding`` per side."""
        n, c, h, w = self.out_shape(x)
        kh, kw = _pair(kernel)
        sh, sw = _pair(stride)
        ph, pw = _pair(padding)
        dh, dw = _pair(dilation)
        oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        return self.add(conv_type(c, out_channels, groups), name, [x], (n, out_channels, oh, ow),
                        kernel=(kh, kw), stride=(sh, sw), padding=(2 * ph, 2 * pw), dilation=(dh, dw),
                        groups=groups)

    def pool(self, name: str, x: int, kind: str, kernel: int | tuple[int, int],
             stride: int | tuple[int, int] | None = None, padding: int | tuple[int, int] = 0,
             ceil_mode: bool = False) -> int:
        """Add a max (``kind='max'``) or average (``'avg'``) pooling layer; ``padding`` per side."""
        n, c, h, w = self.out_shape(x)
        kh, kw = _pair(kernel)
        sh, sw = _pair(stride if stride is not None else kernel)
        ph, pw = _pair(padding)
        rnd = (lambda a, b: -(-a // b)) if ceil_mode else (lambda a, b: a // b)
        oh = rnd(h + 2 * ph - kh, sh) + 1
        ow = rnd(w + 2 * pw - kw, sw) + 1
        t = T.MAX_POOL if kind == "max" else T.AVG_POOL
        return self.add(t, name, [x], (n, c, oh, ow), kernel=(kh, kw), stride=(sh, sw), padding=(2 * ph, 2 * pw))

    def global_pool(self, name: str, x: int, kind: str = "avg") -> int:
        """Add a global pooling layer (output N x C x 1 x 1)."""
        n, c, h, w = self.out_shape(x)
        return self.add(T.GLOBAL_POOL, name, [x], (n, c, 1, 1), kernel=(h, w), pool=kind)

    def linear(self, name: str, x: int, out_features: int) -> int:
        """Add a fully connected layer on the flattened input."""
        n, c, h, w = self.out_shape(x)
        return self.add(T.FULLY_CONNECTED, name, [x], (n, out_features), in_shape=(n, c * h * w))

    def same(self, type_: LayerType, name: str, inputs: int | Sequence[int], **attrs: object) -> int:
        """Add a layer whose output shape equals its first input's (activations, BN, Add, Mul ...)."""
        ins = [inputs] if isinstance(inputs, (int, np.integer)) else list(inputs)
        return self.add(type_, name, ins, self.out_shape(ins[0]), **attrs)

    def concat(self, name: str, inputs: Sequence[int]) -> int:
        """Add a channel concatenation."""
        n, _, h, w = self.out_shape(inputs[0])
        c = sum(self.out_shape(i)[1] for i in inputs)
        return self.add(T.CONCAT, name, inputs, (n, c, h, w))

    def build(self) -> Network:
        """Freeze into a `Network`."""
        n = len(self._names)
        matrix = np.array(self._rows, dtype=np.int64).reshape(n, len(INT_COLUMNS)).T.copy()
        attrs = {k: [d.get(i) for i in range(n)] for k, d in self._attrs.items()}
        edges = np.array(self._edges, dtype=np.int64).reshape(-1, 2)
        return Network.from_matrix(self.name, list(self._names), np.array(self._types, dtype=np.int64), matrix,
                                   edges, attrs)


def conv_type(c_in: int, c_out: int, groups: int) -> LayerType:
    """Conv, DepthwiseConv (one group per input channel) or GroupConv from the channel counts."""
    if groups <= 1:
        return T.CONV
    if groups == c_in and c_out % c_in == 0:
        return T.DEPTHWISE_CONV
    return T.GROUP_CONV


def _pair(v: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(v, (int, np.integer)):
        return (int(v), int(v))
    v = tuple(int(x) for x in v)
    if len(v) == 1:
        return (v[0], v[0])
    return (v[0], v[1])


def topological_order(parents: Sequence[Sequence[int]]) -> list[int]:
    """Kahn's order of nodes ``0..n-1`` given each node's parents; nodes on a cycle are left out.

    Callers compare the length with ``len(parents)`` to detect a cycle.
    """
    n = len(parents)
    children: list[list[int]] = [[] for _ in range(n)]
    for i, ps in enumerate(parents):
        for p in ps:
            children[p].append(i)
    indeg = [len(ps) for ps in parents]
    ready = deque(i for i in range(n) if indeg[i] == 0)
    out: list[int] = []
    while ready:
        i = ready.popleft()
        out.append(i)
        for c in children[i]:
            indeg[c] -= 1
            if indeg[c] == 0:
                ready.append(c)
    return out
