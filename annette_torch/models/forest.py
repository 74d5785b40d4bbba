"""The tree ensembles of a platform's statistical layer models, evaluated together in one walk per estimate.

A measured CPU platform has a tree-ensemble model (or a mixed model with a tree-ensemble correction) for
most layer types, so one network needs several ensembles, each over a few rows: evaluated one by one,
numpy's per-call overhead, not the trees, sets the time. A `Forest`, built when the platform is loaded,
holds

* a `FeaturePlan` of all its models' feature transforms: the columns they share are computed once;
* every model's padded level tables (`annette_torch.models.trees`), concatenated deepest ensemble first, the
  tree features renumbered to the plan's columns; level ``l`` holds the trees that reach it, so as the walk
  descends, the rows of shallower ensembles drop out as a shrinking prefix;
* where each model's trees and leaf values sit.

`Forest.regress` keys the whole feature matrix once, evaluates every distinct (model, row) once, walks all
trees of all models level by level, and sums each model's leaves in tree order as `TreeEnsemble.predict`
does: the same numbers bit for bit. It remembers what it computed for the (model, row) pairs of small calls:
a search estimates the same layer configurations over and over, and a remembered pair costs no walk.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .base import LayerFeatures, LayerModel
from .features import FeaturePlan
from .mixed import Mixed
from .statistical import Statistical
from .trees import TreeEnsemble, keys32, walk_packed

__all__ = ["Forest", "forest_of", "OwnRegressors", "RowMemo"]

#: entries x levels from which duplicate (model, row) pairs are evaluated once (finding them costs ~20 us)
_DEDUPE_WORK = 1 << 14
_LOW = np.int64(0xFFFFFFFF)
#: calls of up to this many rows remember their (model, row) outputs, and reuse them (`Forest.regress`)
_MEMO_ROWS = 4096
#: remembered (model, row) outputs per forest; past it the memory starts afresh
_MEMO_SIZE = 1 << 16
#: odd multipliers of a row's columns in the hash `Forest._distinct` sorts by (products wrap around)
_HASH = np.array([((0x5EED + i) * 0x9E3779B97F4A7C15 >> 3) % 2**62 | 1 for i in range(32)], dtype=np.int64)
# (a Fibonacci-hashing sequence: spread odd multipliers without importing numpy.random, ~10 ms at start-up)


class RowMemo:
    """Raw regressor outputs remembered per (row features' bits, model): a search estimates the same layer
    configurations over and over, and a remembered pair costs no feature pass nor walk."""

    def __init__(self) -> None:
        self._memo: dict[bytes, float] = {}

    def __len__(self) -> int:
        return len(self._memo)

    def clear(self) -> None:
        self._memo.clear()

    def outputs(self, X: LayerFeatures, taps: bool, model: np.ndarray,
                compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """The output of model ``model[r]`` on row ``r`` of ``X`` for every row: remembered ones reused, the
        others computed by ``compute(rows)`` (distinct rows of ``X``: each missing key once) and remembered."""
        cols = X.stacked_keys(taps)
        bits = np.empty((len(X), len(cols) + 1), dtype=np.int64)  # a row's key: its features' bits, model
        bits[:, :-1] = cols.T.view(np.int64)
        bits[:, -1] = model
        keys = bits.view(np.dtype((np.void, bits.shape[1] * 8))).ravel().tolist()
        memo = self._memo
        got = [memo.get(k) for k in keys]
        miss = [i for i, v in enumerate(got) if v is None]
        if miss:
            first: dict[bytes, int] = {}  # each missing key once: the rows to compute
            for i in miss:
                first.setdefault(keys[i], i)
            walk = list(first.values())
            new = np.asarray(compute(np.array(walk))).tolist()
            if len(memo) + len(walk) > _MEMO_SIZE:
                memo.clear()
            for i, v in zip(walk, new):
                memo[keys[i]] = v
            for i in miss:
                got[i] = memo[keys[i]]
        return np.array(got, dtype=np.float64)


class OwnRegressors:
    """A platform's statistical regressors for the rows no `Forest` walks (linear-model trees, polynomials,
    ensembles with clipped inputs), predicted with one feature pass over all those rows (a `FeaturePlan` of
    the transforms) and their outputs remembered as the forest's are: evaluated one model at a time, each paid
    a feature pass per estimate (ort-cpu's GELU, Reshape and Concat models: ~0.4 ms of a ViT-B/16's 1.4 ms)."""

    def __init__(self, models: Sequence[Statistical | None]) -> None:
        #: per model index: its transform's index in the plan (-1: not predicted here)
        self.index = np.full(len(models), -1, dtype=np.int64)
        specs = []
        for i, st in enumerate(models):
            if st is not None:
                self.index[i] = len(specs)
                specs.append((st.unroll_, st.grouped_, st.taps_))
        self.models = list(models)
        self.plan = FeaturePlan(specs) if specs else None
        self._memo = RowMemo()

    def regress(self, X: LayerFeatures, model: np.ndarray) -> np.ndarray:
        """The raw output of model ``model[r]``'s regressor on row ``r`` of ``X``, for every row."""
        model = np.asarray(model, dtype=np.int64)
        if not len(X):
            return np.zeros(0)
        assert self.plan is not None
        if len(X) > _MEMO_ROWS:
            return self._regress(X, model)
        return self._memo.outputs(X, self.plan.taps, model, lambda rows: self._regress(X.take(rows), model[rows]))

    def _regress(self, X: LayerFeatures, model: np.ndarray) -> np.ndarray:
        assert self.plan is not None
        F = self.plan.matrix(X)
        out = np.empty(len(X))
        for m in np.unique(model).tolist():
            rows = (model == m).nonzero()[0]
            st = self.models[m]
            assert st is not None
            cols = self.plan.columns[self.index[m]]
            out[rows] = st.regressor_.predict(st.clipped(np.ascontiguousarray(F[np.ix_(rows, cols)])))
        return out

    def forget(self) -> None:
        """Drop the remembered outputs."""
        self._memo.clear()


def _regressor_model(model: LayerModel) -> Statistical | None:
    """The statistical model whose regressor ``model``'s prediction needs (None: it needs none)."""
    if isinstance(model, Mixed):
        return model.correction_ if model.clip_min_ != model.clip_max_ else None
    return model if isinstance(model, Statistical) else None


def forest_of(models: Sequence[LayerModel]) -> tuple["Forest | None", np.ndarray]:
    """The forest of those ``models`` whose regressor is a tree ensemble it can walk (`Statistical.shared_trees`),
    and each model's member number in it (-1: not a member; it predicts on its own). None without such models;
    a single ensemble is a forest too: the forest remembers the outputs of the layer configurations it met."""
    member = np.full(len(models), -1, dtype=np.int64)
    trees: list[TreeEnsemble] = []
    specs = []
    for i, m in enumerate(models):
        st = _regressor_model(m)
        ens = st.shared_trees() if st is not None else None
        if ens is not None:
            member[i] = len(trees)
            trees.append(ens)
            specs.append((st.unroll_, st.grouped_, st.taps_))
    if not trees:
        return None, member
    return Forest(trees, specs), member


class Forest:
    """Float32-comparing tree ensembles, each over its own feature transform ``specs[i]`` (``(unroll, grouped, taps)``,
    see `FeaturePlan`), predicted together; see the module docstring."""

    def __init__(self, ensembles: Sequence[TreeEnsemble], specs: Sequence[tuple[dict, bool, bool]]) -> None:
        if len(ensembles) != len(specs) or not ensembles:
            raise ValueError("a forest needs one feature transform per ensemble, and at least one ensemble")
        self.ensembles = list(ensembles)
        self.plan = FeaturePlan(specs)
        #: (row features' bits, member) -> raw output, of the calls `regress` remembers
        self._memo = RowMemo()
        #: the key matrix's row width
        self.width = self.plan.n_columns
        self._high = np.arange(self.plan.n_columns, dtype=np.int64) << 32
        # members in walk order (deepest first); rank[i] is member i's position in it
        order = sorted(range(len(ensembles)), key=lambda i: -ensembles[i].max_depth)
        self._order = order
        self.rank = np.empty(len(order), dtype=np.int64)
        self.rank[order] = np.arange(len(order))
        n_trees = np.array([ensembles[i].n_trees for i in order], dtype=np.int64)
        depth = [ensembles[i].max_depth for i in order]
        self._n_trees = n_trees
        #: per level: how many ranks (a prefix) have trees that reach it
        self._reaching = [sum(d > level for d in depth) for level in range(max(depth))]
        self._levels = [self._level_table(level, order) for level in range(max(depth))]
        # leaf values: member r's block, indexed by its node at its last level, sits at shift + node
        tables = [ensembles[i]._padded() for i in order]
        sizes = np.array([len(t.value) for t in tables], dtype=np.int64)
        first_tree = np.cumsum(n_trees) - n_trees
        shift = (np.cumsum(sizes) - sizes) - first_tree * (1 << np.array(depth, dtype=np.int64))
        self._values = np.concatenate([t.value for t in tables])
        # per rank (as Python numbers: read one member at a time): its trees, first tree, leaf shift, where a
        # row's sum starts, and what it is divided by at the end (a random forest's mean; None: nothing)
        mean = [ensembles[i].aggregate == "mean" for i in order]
        self._member = [(int(t), int(f), int(sh), 0.0 if m else ensembles[i].init, float(t) if m else None)
                        for t, f, sh, m, i in zip(n_trees, first_tree, shift, mean, order)]

    def _level_table(self, level: int, order: list[int]) -> np.ndarray:
        """Level ``level``'s packed nodes of the members that reach it, features renumbered to plan columns."""
        parts = []
        for i in order[: self._reaching[level]]:
            packed = self.ensembles[i]._padded().packed[level]
            column = self.plan.columns[i].astype(np.int64)
            parts.append((column[packed >> 32] << 32) | (packed & _LOW))
        return np.concatenate(parts)

    def regress(self, X: LayerFeatures, member: np.ndarray) -> np.ndarray:
        """The raw regressor output of ensemble ``member[r]`` on row ``r`` of ``X``, for every row; the outputs
        of (member, row) pairs met in earlier calls are reused (`_MEMO_ROWS`)."""
        member = np.asarray(member, dtype=np.int64)
        if not len(X):
            return np.zeros(0)
        if len(X) > _MEMO_ROWS:
            return self._regress(X, member)
        return self._memo.outputs(X, self.plan.taps, member,
                                  lambda walk: self._regress(X.take(walk), member[walk], distinct=True))

    def forget(self) -> None:
        """Drop the remembered outputs (what a first estimate in a fresh process meets)."""
        self._memo.clear()

    def _regress(self, X: LayerFeatures, member: np.ndarray, distinct: bool = False) -> np.ndarray:
        """`regress` without the memory (``distinct``: no two rows are equal in features and member)."""
        rank = self.rank[member]
        stacked = X.stacked()
        rows, inverse = ((np.arange(len(rank)), None) if distinct
                         else self._distinct(X.stacked_keys(self.plan.taps), rank))
        order = np.argsort(rank[rows], kind="stable")  # the distinct rows grouped by member, walk order
        rows = rows[order]
        F = self.plan.matrix(X.take(rows), stacked[:, rows])
        keys = keys32(F) | self._high
        counts = np.bincount(rank[rows], minlength=len(self._order))
        out = self._walk(keys, counts)
        at = np.empty(len(rows), dtype=np.intp)  # where each distinct row's output is
        at[order] = np.arange(len(rows))
        return out[at if inverse is None else at[inverse]]

    def _distinct(self, stacked: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The rows to walk, as indices into the input rows, and each input row's position among them (None: all
        rows, in order): rows equal in every layer column and member are walked once when that saves work.

        Rows are hashed (a collision is caught by comparing the rows themselves, and then whole rows are sorted):
        sorting 8-byte hashes instead of rows keeps this cheap for the stacks `estimate_many` scores.
        """
        n = len(rank)
        if n < 2 or int(self._n_trees[rank].sum()) * len(self._levels) < _DEDUPE_WORK:
            return np.arange(n), None
        bits = np.concatenate([stacked.view(np.int64), rank[None]])  # (17 or 19, rows): equal bits, equal features
        _, first, inverse = np.unique(_HASH[: len(bits)] @ bits, return_index=True, return_inverse=True)
        if first.size == n:
            return np.arange(n), None
        inverse = inverse.ravel()
        if not np.array_equal(bits[:, first[inverse]], bits):  # a hash collision: compare whole rows
            whole = np.ascontiguousarray(bits.T)
            _, first, inverse = np.unique(whole.view(np.dtype((np.void, whole.itemsize * whole.shape[1]))).ravel(),
                                          return_index=True, return_inverse=True)
            inverse = inverse.ravel()
        return first, inverse

    def _walk(self, keys: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Each row's prediction (rows grouped by member rank, ``counts`` per rank): all trees of all members walked
        together (entries grouped by member rank, tree-major within one), then each member's leaf values summed
        tree by tree as `TreeEnsemble.sum_leaves` does.

        A member's first tree's leaf takes its init (``leaf + init`` is ``init + leaf``: the same first sum), and
        its (trees, rows) leaf table is summed down the trees axis, which numpy adds row after row: sklearn's
        order (a single column would be summed pairwise, so one row is summed by ``cumsum``, sequential)."""
        present = counts.nonzero()[0].tolist()
        width = self.width
        blocks, nodes, bases = [], [], []
        row = 0
        for r in present:
            u = int(counts[r])
            t, first, _, _, _ = self._member[r]
            trees = np.arange(first, first + t, dtype=np.intp)
            if u == 1:
                nodes.append(trees)
                bases.append(np.full(t, row * width, dtype=np.intp))
            else:
                nodes.append(trees.repeat(u))
                bases.append(np.broadcast_to(np.arange(row * width, (row + u) * width, width, dtype=np.intp),
                                             (t, u)).ravel())
            blocks.append((r, u))
            row += u
        node = np.concatenate(nodes) if len(nodes) > 1 else nodes[0]
        base = np.concatenate(bases) if len(bases) > 1 else bases[0]
        ends = np.cumsum(counts * self._n_trees)
        active = [int(ends[k - 1]) if k else 0 for k in self._reaching]
        deepest = sum(a > 0 for a in active)  # (levels below it have no entries left)
        walk_packed(self._levels[:deepest], keys.ravel(), node, base, active)
        out = np.empty(row)
        start = row = 0
        for r, u in blocks:
            t, _, shift, init, divisor = self._member[r]
            block = node[start: start + t * u]
            block += shift
            leaves = self._values.take(block).reshape(t, u)
            leaves[0] += init
            total = np.add.reduce(leaves, axis=0) if u > 1 else np.cumsum(leaves[:, 0])[-1:]
            out[row: row + u] = total if divisor is None else total / divisor
            start, row = start + t * u, row + u
        return out
