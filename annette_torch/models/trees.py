"""Tree ensembles as plain data: fitted scikit-learn trees packed into numpy arrays, predicted without sklearn.

All trees of an ensemble share one set of node arrays (``feature``, ``threshold``, ``left``, ``right``,
``value``); tree ``t`` occupies the nodes ``roots[t] .. roots[t + 1] - 1`` and child indices are absolute
(``-1`` on both sides marks a leaf). A row goes left at an internal node when
``x[feature] <= threshold``. The prediction is

* ``aggregate == "sum"``: ``init + scale * leaf_1 + scale * leaf_2 + ...`` (boosting: ``init`` is the initial
  estimator's constant, ``scale`` the learning rate; a single tree has ``init = 0, scale = 1``), or
* ``aggregate == "mean"``: ``(leaf_1 + leaf_2 + ...) / n_trees`` (random forests),

accumulated tree by tree in the same order as scikit-learn, so the result equals sklearn's ``predict``
bit for bit. ``compare == "float32"`` rounds the inputs to float32 before comparing, as sklearn's
``DecisionTreeRegressor`` (and the forests and ``GradientBoostingRegressor`` built on it) do;
``HistGradientBoostingRegressor`` compares in float64. NaN inputs go right (trees fitted here never see NaN).

`predict` walks every tree for every row at once, one depth level per numpy step (``max_depth`` steps),
over tables built on first use: each tree padded to a complete tree of depth ``max_depth`` (a leaf above
that depth repeats its value below it), so the node reached at a level is ``2 * node + went_right`` with no
child lookup. With float32 comparisons a node's feature and threshold share one int64 (feature in the high
half, the threshold as an order-preserving integer key in the low half) and a row's feature values are
keyed the same way, so a step is two gathers and one integer comparison (`walk_packed`, which also walks
the trees of several ensembles at once: `annette_torch.models.forest`). Rows that agree after rounding
are evaluated once. Ensembles too deep to pad (more than `MAX_PADDED_LEAVES` leaves) walk the node
arrays instead. Every path gives the same numbers (`predict_reference` is the row-by-row definition).

In a file the node arrays are packed (`pack_array`): ``{"dtype": "<f8", "base64": ...}``, the array's
little-endian bytes: the shipped ort-cpu files (GBMs of up to 26,000 nodes) loaded in 102-143 ms with lists,
33-45 ms packed, inside the < 100 ms a NAS loop expects. Plain lists still load.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Mapping

import numpy as np

from ..errors import PlatformError

__all__ = ["TreeEnsemble", "read_array", "pack_array", "walk_packed", "keys32", "MAX_PADDED_LEAVES"]

#: padded level tables are built while trees x 2 ** max_depth stays within this (8 bytes per leaf and node)
MAX_PADDED_LEAVES = 1 << 21
#: rows x trees x depth from which duplicate rows are evaluated once (finding them costs ~20 us)
_DEDUPE_WORK = 1 << 14
#: the low half of a packed node holds a 32-bit threshold key; a padded leaf's key sends every row left
_LOW = np.int64(0xFFFFFFFF)

#: dtypes a packed array may have (little-endian)
_PACKED = ("<f8", "<i4", "<i8")

_AGGREGATES = ("sum", "mean")
_COMPARES = ("float32", "float64")


def read_array(d: Mapping[str, Any], key: str, where: str, *, integer: bool = False, ndim: int = 1,
               length: int | None = None) -> np.ndarray:
    """``d[key]`` as a numpy array of finite numbers (int64 with ``integer``), naming ``where.key`` on errors."""
    w = f"{where}.{key}"
    if key not in d:
        raise PlatformError(f"{w}: missing")
    v = d[key]
    if isinstance(v, Mapping) and ndim == 1:
        a = _unpack(v, w)
    elif not isinstance(v, list):
        raise PlatformError(f"{w}: expected a list{' or a packed array' if ndim == 1 else ''}, got "
                            f"{type(v).__name__}")
    else:
        try:
            a = np.asarray(v)
        except (TypeError, ValueError):
            raise PlatformError(f"{w}: expected a {ndim}-d list of numbers (ragged or mixed entries)") from None
    if a.size == 0:
        a = a.reshape((0,) * ndim) if a.ndim != ndim else a
        a = a.astype(np.int64 if integer else np.float64)
    if a.ndim != ndim:
        raise PlatformError(f"{w}: expected a {ndim}-d list of numbers, got {a.ndim} dimension(s)")
    if a.dtype.kind not in "iuf":  # strings, booleans, objects (None, nested objects)
        raise PlatformError(f"{w}: expected numbers, got entries of type {a.dtype}")
    if integer:
        if a.dtype.kind == "f":
            if not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
                raise PlatformError(f"{w}: expected integers")
        a = a.astype(np.int64)
    else:
        a = a.astype(np.float64)
        if not np.all(np.isfinite(a)):
            bad = int(np.flatnonzero(~np.isfinite(a.ravel()))[0])
            raise PlatformError(f"{w}: entry {bad} is not finite")
    if length is not None and a.shape[0] != length:
        raise PlatformError(f"{w}: expected {length} entries, got {a.shape[0]}")
    return a


def pack_array(a: np.ndarray, integer: bool = False) -> dict[str, str]:
    """A 1-d array as plain JSON data: its little-endian bytes in base64 (int32 when ``integer`` and it fits,
    else int64; float64 otherwise), restored bit for bit by `read_array`."""
    a = np.asarray(a)
    if integer:
        small = a.size == 0 or (a.min() >= np.iinfo(np.int32).min and a.max() <= np.iinfo(np.int32).max)
        dtype = "<i4" if small else "<i8"
    else:
        dtype = "<f8"
    return {"dtype": dtype, "base64": base64.b64encode(np.ascontiguousarray(a, dtype=dtype).tobytes()).decode()}


def _unpack(v: Mapping[str, Any], w: str) -> np.ndarray:
    """The array of a packed object (`pack_array`), checked for dtype, base64 and whole entries."""
    dtype, data = v.get("dtype"), v.get("base64")
    if dtype not in _PACKED:
        raise PlatformError(f"{w}.dtype: expected one of {', '.join(_PACKED)}, got {dtype!r}")
    if not isinstance(data, str):
        raise PlatformError(f"{w}.base64: expected a base64 string, got {type(data).__name__}")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise PlatformError(f"{w}.base64: not valid base64 (truncated or edited file?)") from None
    size = np.dtype(dtype).itemsize
    if len(raw) % size:
        raise PlatformError(f"{w}.base64: {len(raw)} bytes is not a whole number of {dtype} entries")
    return np.frombuffer(raw, dtype=dtype)


def _fail(where: str, msg: str) -> None:
    raise PlatformError(f"{where}: {msg}")


class TreeEnsemble:
    """Packed regression trees with a vectorised `predict`; see the module docstring for the format."""

    def __init__(self, feature: np.ndarray, threshold: np.ndarray, left: np.ndarray, right: np.ndarray,
                 value: np.ndarray, roots: np.ndarray, n_features: int, *, init: float = 0.0,
                 scale: float = 1.0, aggregate: str = "sum", compare: str = "float32", source: str = "",
                 where: str = "trees") -> None:
        self.feature = np.asarray(feature, dtype=np.int64)
        self.threshold = np.asarray(threshold, dtype=np.float64)
        self.left = np.asarray(left, dtype=np.int64)
        self.right = np.asarray(right, dtype=np.int64)
        self.value = np.asarray(value, dtype=np.float64)
        self.roots = np.asarray(roots, dtype=np.int64)
        self.n_features = int(n_features)
        self.init = float(init)
        self.scale = float(scale)
        self.aggregate = aggregate
        self.compare = compare
        self.source = source
        self._prepare(where)

    # ------------------------------------------------------------------------------------------------
    def _prepare(self, where: str) -> None:
        """Validate the structure and build the walking tables (leaves loop to themselves)."""
        n = len(self.feature)
        if n == 0:
            _fail(f"{where}.feature", "no nodes")
        for name in ("threshold", "left", "right", "value"):
            if len(getattr(self, name)) != n:
                _fail(f"{where}.{name}", f"expected {n} entries (one per node), got {len(getattr(self, name))}")
        if self.n_features < 1:
            _fail(f"{where}.n_features", f"must be >= 1, got {self.n_features}")
        if self.aggregate not in _AGGREGATES:
            _fail(f"{where}.aggregate", f"expected one of {', '.join(_AGGREGATES)}, got {self.aggregate!r}")
        if self.compare not in _COMPARES:
            _fail(f"{where}.compare", f"expected one of {', '.join(_COMPARES)}, got {self.compare!r}")
        if not (np.isfinite(self.init) and np.isfinite(self.scale)):
            _fail(f"{where}.init", "init and scale must be finite")
        r = self.roots
        if r.size == 0 or r[0] != 0 or np.any(np.diff(r) <= 0) or r[-1] >= n:
            _fail(f"{where}.roots", f"expected strictly increasing node indices starting at 0 and below {n}")
        if not (np.all(np.isfinite(self.threshold)) and np.all(np.isfinite(self.value))):
            bad = "threshold" if not np.all(np.isfinite(self.threshold)) else "value"
            _fail(f"{where}.{bad}", "entries must be finite")
        idx = np.arange(n)
        leaf = (self.left == -1) & (self.right == -1)
        half = (self.left == -1) ^ (self.right == -1)
        if half.any():
            _fail(f"{where}.left", f"node {int(np.flatnonzero(half)[0])} has only one child (-1 on one side)")
        inner = ~leaf
        end = np.append(r[1:], n)[np.searchsorted(r, idx, side="right") - 1]  # first node after each tree
        for name in ("left", "right"):
            c = getattr(self, name)
            bad = inner & ((c <= idx) | (c >= end))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                _fail(f"{where}.{name}", f"node {i} points to {int(c[i])}, outside its tree after itself "
                      f"(nodes {i + 1}..{int(end[i]) - 1})")
        bad = inner & ((self.feature < 0) | (self.feature >= self.n_features))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            _fail(f"{where}.feature",
                  f"node {i} splits on feature {int(self.feature[i])}, outside 0..{self.n_features - 1}")
        self._leaf = leaf
        self._feat = np.where(leaf, 0, self.feature).astype(np.intp)
        # children of node i at 2i (left) and 2i + 1 (right); a leaf is its own child
        self._kids = np.stack([np.where(leaf, idx, self.left), np.where(leaf, idx, self.right)], axis=1).ravel()
        self._kids = self._kids.astype(np.intp)
        # depth: advance the set of reached nodes level by level (children come after parents: terminates)
        depth, frontier = 0, np.unique(r[inner[r]])
        while frontier.size:
            depth += 1
            kids = np.concatenate([self.left[frontier], self.right[frontier]])
            frontier = np.unique(kids[inner[kids]])
        self.max_depth = depth

    @property
    def n_trees(self) -> int:
        return len(self.roots)

    @property
    def n_nodes(self) -> int:
        return len(self.feature)

    # ------------------------------------------------------------------------------------------------
    def _check_X(self, X: np.ndarray, round32: bool = True) -> np.ndarray:
        """``X`` as a contiguous float64 (rows, n_features) matrix, rounded through float32 when the trees
        compare in float32 (``round32``; the padded walk rounds it itself)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"expected a (rows, {self.n_features}) feature matrix, got shape {X.shape}")
        if round32 and self.compare == "float32":
            with np.errstate(over="ignore"):  # beyond float32: +-inf, as sklearn's own rounding gives
                X = X.astype(np.float32).astype(np.float64)
        return np.ascontiguousarray(X)

    def apply(self, X: np.ndarray) -> np.ndarray:
        """Leaf node index reached in every tree: an int array of shape (rows, trees)."""
        tables = self._padded()
        X = self._check_X(X, round32=tables is None)
        if tables is None:
            return self._walk_nodes(X)
        keys, inverse = self._row_keys(X)
        leaf = tables.leaf_node.take(self._walk_padded(keys)).T
        return leaf if inverse is None else leaf[inverse]

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Ensemble prediction per row (float64), equal to the source sklearn model's ``predict``."""
        tables = self._padded()
        X = self._check_X(X, round32=tables is None)
        if tables is None:
            return self._aggregate(self.value[self._walk_nodes(X)])
        keys, inverse = self._row_keys(X)
        out = self.sum_leaves(tables.value.take(self._walk_padded(keys)))
        return out if inverse is None else out[inverse]

    def sum_leaves(self, leaves: np.ndarray) -> np.ndarray:
        """Predictions from the (trees, rows) padded leaf values the rows reached (``scale`` already applied),
        accumulated tree by tree as sklearn does."""
        rows = leaves.shape[1]
        if rows == 1:  # (a reduction along the only contiguous axis would sum pairwise)
            return self._aggregate(leaves.T, scaled=True)
        # summed down the trees axis, which is not the contiguous one: numpy adds row after row there, the
        # same sequence of additions as sklearn's tree-by-tree accumulation
        first = np.zeros((1, rows)) if self.aggregate == "mean" else np.full((1, rows), self.init)
        out = np.add.reduce(np.concatenate([first, leaves]), axis=0)
        return out / self.n_trees if self.aggregate == "mean" else out

    def predict_reference(self, X: np.ndarray) -> np.ndarray:
        """`predict` by definition: every row down every tree one node at a time, leaves summed in tree order
        (plain Python; for checking the vectorised paths, far too slow for estimates)."""
        X = self._check_X(X)
        out = np.empty(X.shape[0])
        for i, x in enumerate(X.tolist()):
            total = 0.0 if self.aggregate == "mean" else self.init
            for root in self.roots.tolist():
                node = root
                while not self._leaf[node]:
                    node = int(self.left[node] if x[self.feature[node]] <= self.threshold[node] else self.right[node])
                total += float(self.value[node]) if self.aggregate == "mean" else self.scale * float(self.value[node])
            out[i] = total / self.n_trees if self.aggregate == "mean" else total
        return out

    # ------------------------------------------------------------------------------------------------
    def _aggregate(self, leaves: np.ndarray, scaled: bool = False) -> np.ndarray:
        """(rows, trees) leaf values -> predictions, accumulated in tree order as sklearn does (``scaled``:
        the values already carry ``scale``)."""
        rows = leaves.shape[0]
        if self.aggregate == "mean":
            terms = np.concatenate([np.zeros((rows, 1)), leaves], axis=1)
            return np.cumsum(terms, axis=1)[:, -1] / self.n_trees
        terms = np.concatenate([np.full((rows, 1), self.init), leaves if scaled else self.scale * leaves], axis=1)
        return np.cumsum(terms, axis=1)[:, -1]  # sequential, in tree order, as sklearn accumulates

    def _walk_nodes(self, X: np.ndarray) -> np.ndarray:
        """Leaf node per (row, tree) by walking the node arrays (for ensembles too deep to pad)."""
        rows = X.shape[0]
        node = np.broadcast_to(self.roots.astype(np.intp), (rows, self.n_trees)).copy()
        flat = X.ravel()
        base = (np.arange(rows, dtype=np.intp) * self.n_features)[:, None]
        for _ in range(self.max_depth):
            go_right = ~(flat[base + self._feat[node]] <= self.threshold[node])  # NaN goes right
            node = self._kids[2 * node + go_right]
        return node

    def _padded(self) -> "_PaddedTables | None":
        """The padded level tables (built on first use), None when the ensemble is too deep to pad."""
        tables = self.__dict__.get("_tables", False)
        if tables is False:
            tables = _PaddedTables.build(self) if self.n_trees << self.max_depth <= MAX_PADDED_LEAVES else None
            self._tables = tables
        return tables

    def _row_keys(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The rows as the padded walk compares them (int64 keys with float32 comparisons, else float64 with
        NaN as +inf), duplicates dropped when that saves work: (unique rows, index of each row's one or None)."""
        if self.compare == "float32":
            keys = keys32(X) | self._padded().feature_high  # type: ignore[union-attr]
        else:
            keys = np.where(np.isnan(X), np.inf, X)
        if keys.shape[0] > 1 and keys.shape[0] * self.n_trees * self.max_depth >= _DEDUPE_WORK:
            rows = np.ascontiguousarray(keys).view(np.dtype((np.void, keys.dtype.itemsize * keys.shape[1])))
            _, first, inverse = np.unique(rows.ravel(), return_index=True, return_inverse=True)
            if first.size < keys.shape[0]:
                return keys[first], inverse.ravel()
        return keys, None

    def _walk_padded(self, keys: np.ndarray) -> np.ndarray:
        """Index into the padded leaf tables reached per (tree, row), shape (trees, rows)."""
        t = self._padded()
        assert t is not None
        rows, n_feat = keys.shape
        if self.max_depth == 0:  # every tree a single leaf
            return np.repeat(np.arange(self.n_trees, dtype=np.intp), rows).reshape(self.n_trees, rows)
        flat = keys.ravel()
        row_base = np.arange(0, rows * n_feat, n_feat, dtype=np.intp)
        base = np.tile(row_base, self.n_trees)  # tree-major: entry tree * rows + row
        node = np.repeat(np.arange(self.n_trees, dtype=np.intp), rows)  # every row at every root
        if self.compare == "float32":
            return walk_packed(t.packed, flat, node, base).reshape(self.n_trees, rows)
        for feature, threshold in zip(t.feature, t.threshold):
            x = flat.take(feature.take(node) + base)
            node = node + node + (x > threshold.take(node))
        return node.reshape(self.n_trees, rows)

    # ------------------------------------------------------------------------------------------------
    @classmethod
    def from_sklearn(cls, est: Any) -> "TreeEnsemble":
        """Pack a fitted ``DecisionTreeRegressor``, ``RandomForestRegressor``, ``ExtraTreesRegressor``,
        ``GradientBoostingRegressor`` or ``HistGradientBoostingRegressor`` (single output, numeric features,
        identity link, no missing-value splits); anything else raises ``ValueError``."""
        from sklearn.ensemble import (ExtraTreesRegressor, GradientBoostingRegressor,
                                      HistGradientBoostingRegressor, RandomForestRegressor)
        from sklearn.tree import DecisionTreeRegressor

        name = type(est).__name__
        n_features = getattr(est, "n_features_in_", None)
        if n_features is None:
            raise ValueError(f"{name} is not fitted")
        if isinstance(est, HistGradientBoostingRegressor):
            return cls._from_hgb(est, int(n_features))
        if isinstance(est, DecisionTreeRegressor):
            trees, kw = [est], dict(init=0.0, scale=1.0, aggregate="sum")
        elif isinstance(est, (RandomForestRegressor, ExtraTreesRegressor)):
            trees, kw = list(est.estimators_), dict(aggregate="mean")
        elif isinstance(est, GradientBoostingRegressor):
            if est.estimators_.shape[1] != 1:
                raise ValueError(f"{name}: only single-output regression is supported")
            if isinstance(est.init_, str):
                if est.init_ != "zero":
                    raise ValueError(f"{name}: unsupported init {est.init_!r}")
                init = 0.0
            else:
                from sklearn.dummy import DummyRegressor
                if not isinstance(est.init_, DummyRegressor):
                    raise ValueError(f"{name}: only a constant (DummyRegressor) or 'zero' init is supported")
                init = float(np.ravel(est.init_.predict(np.zeros((1, n_features))))[0])
            trees = list(est.estimators_[:, 0])
            kw = dict(init=init, scale=float(est.learning_rate), aggregate="sum")
        else:
            raise ValueError(f"cannot convert {name} to a tree ensemble")
        feature, threshold, left, right, value, roots = [], [], [], [], [], []
        offset = 0
        for t in trees:
            tr = t.tree_
            if tr.n_outputs != 1:
                raise ValueError(f"{name}: only single-output regression is supported")
            cl, cr = tr.children_left.astype(np.int64), tr.children_right.astype(np.int64)
            leaf = cl == -1
            roots.append(offset)
            feature.append(np.where(leaf, -1, tr.feature))
            threshold.append(np.where(leaf, 0.0, tr.threshold))
            left.append(np.where(leaf, -1, cl + offset))
            right.append(np.where(leaf, -1, cr + offset))
            value.append(np.where(leaf, tr.value[:, 0, 0], 0.0))
            offset += tr.node_count
        cat = np.concatenate
        return cls(cat(feature), cat(threshold), cat(left), cat(right), cat(value), np.array(roots),
                   int(n_features), compare="float32", source=name, **kw)

    @classmethod
    def _from_hgb(cls, est: Any, n_features: int) -> "TreeEnsemble":
        link = type(est._loss.link).__name__
        if link != "IdentityLink":
            raise ValueError(f"HistGradientBoostingRegressor: only identity-link losses are supported, not {link}")
        if est.n_trees_per_iteration_ != 1:
            raise ValueError("HistGradientBoostingRegressor: only single-output regression is supported")
        feature, threshold, left, right, value, roots = [], [], [], [], [], []
        offset = 0
        for (pred,) in est._predictors:
            nd = pred.nodes
            leaf = nd["is_leaf"].astype(bool)
            if np.any(nd["is_categorical"][~leaf]):
                raise ValueError("HistGradientBoostingRegressor: categorical splits are not supported")
            if not np.all(np.isfinite(nd["num_threshold"][~leaf])):
                raise ValueError("HistGradientBoostingRegressor: missing-value splits are not supported")
            roots.append(offset)
            feature.append(np.where(leaf, -1, nd["feature_idx"]))
            threshold.append(np.where(leaf, 0.0, nd["num_threshold"]))
            left.append(np.where(leaf, -1, nd["left"].astype(np.int64) + offset))
            right.append(np.where(leaf, -1, nd["right"].astype(np.int64) + offset))
            value.append(np.where(leaf, nd["value"], 0.0))
            offset += len(nd)
        if not roots:
            raise ValueError("HistGradientBoostingRegressor: no trees")
        cat = np.concatenate
        return cls(cat(feature), cat(threshold), cat(left), cat(right), cat(value), np.array(roots), n_features,
                   init=float(np.ravel(est._baseline_prediction)[0]), scale=1.0, aggregate="sum",
                   compare="float64", source="HistGradientBoostingRegressor")

    # ------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (node arrays packed, `pack_array`); `from_dict` restores an identical ensemble."""
        return {"kind": "trees", "source": self.source, "n_features": self.n_features, "aggregate": self.aggregate,
                "compare": self.compare, "init": self.init, "scale": self.scale,
                "roots": pack_array(self.roots, integer=True), "feature": pack_array(self.feature, integer=True),
                "threshold": pack_array(self.threshold), "left": pack_array(self.left, integer=True),
                "right": pack_array(self.right, integer=True), "value": pack_array(self.value)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str, n_features: int | None = None) -> "TreeEnsemble":
        """Validate and build; ``n_features`` (when given) must match the stored feature count."""
        if not isinstance(d, Mapping):
            raise PlatformError(f"{where}: expected an object")
        nf = d.get("n_features")
        if isinstance(nf, bool) or not isinstance(nf, int) or nf < 1:
            raise PlatformError(f"{where}.n_features: expected a positive integer, got {nf!r}")
        if n_features is not None and nf != n_features:
            raise PlatformError(f"{where}.n_features: {nf} does not match the {n_features} model features")
        for key, allowed in (("aggregate", _AGGREGATES), ("compare", _COMPARES)):
            if d.get(key) not in allowed:
                raise PlatformError(f"{where}.{key}: expected one of {', '.join(allowed)}, got {d.get(key)!r}")
        from .base import check_number
        init = check_number(d, "init", where, default=0.0)
        scale = check_number(d, "scale", where, default=1.0)
        feature = read_array(d, "feature", where, integer=True)
        n = len(feature)
        return cls(feature, read_array(d, "threshold", where, length=n),
                   read_array(d, "left", where, integer=True, length=n),
                   read_array(d, "right", where, integer=True, length=n),
                   read_array(d, "value", where, length=n), read_array(d, "roots", where, integer=True), nf,
                   init=init, scale=scale, aggregate=d["aggregate"], compare=d["compare"],
                   source=str(d.get("source", "")), where=where)

    def __repr__(self) -> str:
        return (f"TreeEnsemble({self.source or 'trees'}: {self.n_trees} trees, {self.n_nodes} nodes, "
                f"depth {self.max_depth}, {self.aggregate})")


def walk_packed(packed: list[np.ndarray], keys: np.ndarray, node: np.ndarray, base: np.ndarray,
                active: list[int] | None = None) -> np.ndarray:
    """Walk padded float32 level tables (`_PaddedTables.packed`): ``node`` holds each entry's tree and is advanced
    in place, one level per table, to the index of the leaf it reaches; ``keys`` are the rows' keys (`keys32`
    with the column in the high half), flat, an entry's row starting at ``base``. With ``active``, level ``l``
    advances only the first ``active[l]`` entries (the trees of the others ended above it)."""
    p, i, x = np.empty_like(node), np.empty(node.size, np.intp), np.empty(node.size, np.int64)
    for level, table in enumerate(packed):
        k = node.size if active is None else active[level]
        nd, pk, ik, xk = node[:k], p[:k], i[:k], x[:k]
        # in place: node = 2 node + (x > p), with (p - x) >> 63 = -(x > p) (the columns in the high halves cancel)
        np.take(table, nd, out=pk, mode="wrap")
        np.right_shift(pk, 32, out=ik)
        np.add(ik, base[:k], out=ik)
        np.take(keys, ik, out=xk, mode="wrap")
        np.subtract(pk, xk, out=pk)
        np.right_shift(pk, 63, out=pk)
        np.add(nd, nd, out=nd)
        np.subtract(nd, pk, out=nd)
    return node


def keys32(a: np.ndarray) -> np.ndarray:
    """float32 values as int64 keys in 0 .. 2**32 - 1 ordered as the values (-0.0 = 0.0, NaN as +inf)."""
    with np.errstate(over="ignore"):  # beyond float32: +-inf, as sklearn's own rounding gives
        a = np.asarray(a, dtype=np.float32) + np.float32(0.0)  # -0.0 + 0.0 = +0.0
    a[np.isnan(a)] = np.inf
    bits = a.view(np.int32).astype(np.int64)
    return (bits ^ ((bits >> 31) & 0x7FFFFFFF)) + (1 << 31)


class _PaddedTables:
    """An ensemble's trees padded to complete trees of depth ``max_depth``, one table per level.

    Level ``l`` holds the ``2 ** l`` nodes of each tree at that depth (tree-major), so the node reached
    below node ``k`` is ``2 k`` (left) or ``2 k + 1`` (right). A leaf above the last level continues as a
    node that sends every row left (its value repeated in all its descendant leaves).
    """

    def __init__(self, **arrays: Any) -> None:
        self.__dict__.update(arrays)

    @classmethod
    def build(cls, ens: TreeEnsemble) -> "_PaddedTables":
        n_trees, node = ens.n_trees, ens.roots.astype(np.intp)[:, None]
        levels: list[tuple[np.ndarray, np.ndarray]] = []  # (feature, threshold) per level, -1 for padding
        for _ in range(ens.max_depth):
            leaf = ens._leaf[node]
            levels.append((np.where(leaf, -1, ens.feature[node]).ravel(), ens.threshold[node].ravel()))
            node = np.stack([np.where(leaf, node, ens.left[node]), np.where(leaf, node, ens.right[node])],
                            axis=-1).reshape(n_trees, -1)
        value = ens.value[node].ravel()
        if ens.aggregate == "sum":
            value = ens.scale * value  # what `_aggregate` multiplies: the same products
        arrays: dict[str, Any] = {"value": value, "leaf_node": node.ravel()}
        if ens.compare == "float32":
            packed = []
            for feature, threshold in levels:
                # x32 <= t (float64)  <=>  x32 <= the largest float32 not above t
                t32 = threshold.astype(np.float32)
                t32 = np.where(t32.astype(np.float64) > threshold, np.nextafter(t32, np.float32(-np.inf)), t32)
                key = np.where(feature < 0, _LOW, keys32(t32))
                packed.append((np.maximum(feature, 0).astype(np.int64) << 32) | key)
            arrays.update(packed=packed, feature_high=np.arange(ens.n_features, dtype=np.int64) << 32)
        else:
            arrays.update(feature=[np.maximum(f, 0).astype(np.intp) for f, _ in levels],
                          threshold=[np.where(f < 0, np.inf, t) for f, t in levels])
        return cls(**arrays)
