"""NAS-Bench-201 search space: arch strings, the 15,625-cell index, a fast IR builder and a torch builder.

A cell is a 4-node DAG; each of its 6 edges ``i -> j`` (i < j) carries one of `OPS`, and node j is the
sum over i < j of ``op_{i->j}(node i)``. The macro skeleton is the benchmark's ``TinyNetwork``: a 3x3 stem
conv (16 channels) + BN, three stages of N = 5 cells with C = 16, 32, 64 channels separated by residual
reduction blocks (ResNet basic block, stride 2, AvgPool + 1x1 conv shortcut), then BN-ReLU, global average
pooling and a linear classifier; input 1x3x32x32.

Both builders emit the same, *pruned*, cell (see `live_edges`): ``none`` edges add nothing, a node whose
incoming edges are all ``none`` (or come from such nodes) is zero and dropped with its outgoing edges, and
edges whose result cannot reach the cell output (dead code) are dropped. A cell whose output is zero becomes
one ``x * 0`` layer (a Mul, as the benchmark's ``Zero`` op computes it) so the layers after it stay in the
network. Node sums are chains of two-input ``Add`` layers (what ``a + b + c`` traces and exports to).

`build_network` builds the IR directly from cached per-stage layer rows (no torch); `build_networks` does
many at once (all 15,625 in ~0.25-0.6 s on 2 cores) and `estimate_all` scores the whole space on a platform.
`build_module` builds the ``nn.Module`` for training or measuring. Arch indices are this module's own
(base-5 over the edges in string order, ``none`` = 0), not the benchmark API's file order.
"""

from __future__ import annotations

import functools
import itertools
import logging
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ...ir import INT_COLUMNS, LayerType, Network, NetworkBuilder
from ...types import PlatformLike

__all__ = [
    "OPS", "EDGES", "NUM_ARCHS", "INPUT_SHAPE", "parse", "arch_string", "arch_to_index", "index_to_arch",
    "all_arch_strings", "live_edges", "build_network", "build_networks", "build_module", "estimate_all",
]

log = logging.getLogger(__name__)
T = LayerType

#: Candidate operations of an edge, in the benchmark's order (``none`` first: op index 0).
OPS: tuple[str, ...] = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
#: The 6 edges ``(src, dst)`` in arch-string order.
EDGES: tuple[tuple[int, int], ...] = ((0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3))
#: Number of cells (5 ops on 6 edges).
NUM_ARCHS: int = len(OPS) ** len(EDGES)
#: Input shape of the benchmark's CIFAR networks.
INPUT_SHAPE: tuple[int, int, int, int] = (1, 3, 32, 32)

_OP_INDEX = {op: i for i, op in enumerate(OPS)}
_EDGE_INDEX = {e: i for i, e in enumerate(EDGES)}
_EDGE_KEYS = tuple(f"{d}<-{s}" for s, d in EDGES)  # module keys, as in the benchmark's search cells


# ------------------------------------------------------------------------------------------------------
# encoding


def parse(arch: str) -> list[tuple[str, int, int]]:
    """``|op~0|+|op~0|op~1|+|op~0|op~1|op~2|`` -> ``[(op, src, dst), ...]`` in `EDGES` order.

    Raises ValueError naming the problem for a malformed string, an unknown op or a missing/duplicate edge.
    """
    if not isinstance(arch, str):
        raise ValueError(f"NB201 arch must be a string like '|nor_conv_3x3~0|+|...|', got {type(arch).__name__}")
    idx = _canonical().get(arch)
    if idx is not None:
        return [(o, s, d) for (s, d), o in zip(EDGES, _index_ops(idx))]
    nodes = arch.split("+")
    if len(nodes) != 3:
        raise ValueError(f"NB201 arch {arch!r}: expected 3 node groups separated by '+', got {len(nodes)}")
    ops: dict[tuple[int, int], str] = {}
    for j, group in enumerate(nodes, start=1):
        if len(group) < 2 or not (group.startswith("|") and group.endswith("|")):
            raise ValueError(f"NB201 arch {arch!r}: node {j} group {group!r} must start and end with '|'")
        for item in group[1:-1].split("|"):
            op, sep, src = item.partition("~")
            if not sep or not src.isdigit():
                raise ValueError(f"NB201 arch {arch!r}: node {j} entry {item!r} is not 'op~source'")
            if op not in _OP_INDEX:
                raise ValueError(f"NB201 arch {arch!r}: unknown op {op!r} (known: {', '.join(OPS)})")
            i = int(src)
            if i >= j:
                raise ValueError(f"NB201 arch {arch!r}: node {j} cannot take input from node {i} (must be < {j})")
            if (i, j) in ops:
                raise ValueError(f"NB201 arch {arch!r}: edge {i}->{j} given twice")
            ops[(i, j)] = op
        if len(ops) != j * (j + 1) // 2:
            missing = [i for i in range(j) if (i, j) not in ops]
            raise ValueError(f"NB201 arch {arch!r}: node {j} lacks input(s) from node(s) {missing}")
    return [(ops[e], e[0], e[1]) for e in EDGES]


def arch_string(ops: Sequence[str]) -> str:
    """The arch string of 6 edge ops given in `EDGES` order."""
    if len(ops) != len(EDGES):
        raise ValueError(f"NB201 needs {len(EDGES)} edge ops, got {len(ops)}")
    for op in ops:
        if op not in _OP_INDEX:
            raise ValueError(f"NB201: unknown op {op!r} (known: {', '.join(OPS)})")
    o = ops
    return f"|{o[0]}~0|+|{o[1]}~0|{o[2]}~1|+|{o[3]}~0|{o[4]}~1|{o[5]}~2|"


def arch_to_index(arch: str) -> int:
    """Index in 0..15624: the edges' op indices read as a base-5 number, first edge most significant."""
    idx = _canonical().get(arch) if isinstance(arch, str) else None
    if idx is None:
        idx = 0
        for op, _, _ in parse(arch):
            idx = idx * len(OPS) + _OP_INDEX[op]
    return idx


def index_to_arch(index: int) -> str:
    """Inverse of `arch_to_index`."""
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < NUM_ARCHS:
        raise ValueError(f"NB201 index must be an int in 0..{NUM_ARCHS - 1}, got {index!r}")
    return arch_string(_index_ops(int(index)))


def all_arch_strings() -> list[str]:
    """All 15,625 arch strings, in index order."""
    return [arch_string(ops) for ops in itertools.product(OPS, repeat=len(EDGES))]


def live_edges(arch: str | Sequence[tuple[str, int, int]]) -> tuple[tuple[str, int, int], ...]:
    """The edges that contribute to the cell output, as ``(op, src, dst)`` in `EDGES` order.

    Drops ``none`` edges, edges leaving a zero node (all its inputs dropped) and edges whose result never
    reaches node 3. An empty result means the cell output is zero; ``(('skip_connect', 0, 3),)`` is the
    identity. Cells with equal live edges build identical networks.
    """
    if isinstance(arch, str):
        return _live(arch_to_index(arch))
    arch = list(arch)
    ops = {(s, d): o for o, s, d in arch}
    if len(arch) != len(EDGES) or sorted(ops) != sorted(EDGES) or any(o not in _OP_INDEX for o in ops.values()):
        raise ValueError(f"NB201 cell needs one known op on each of the edges {list(EDGES)}, got {list(arch)}")
    return _live_of(tuple(ops[e] for e in EDGES))


@functools.cache
def _canonical() -> dict[str, int]:
    return {a: i for i, a in enumerate(all_arch_strings())}


def _index_ops(index: int) -> tuple[str, ...]:
    digits = []
    for _ in EDGES:
        index, d = divmod(index, len(OPS))
        digits.append(OPS[d])
    return tuple(digits[::-1])


@functools.lru_cache(maxsize=None)  # at most NUM_ARCHS entries
def _live(index: int) -> tuple[tuple[str, int, int], ...]:
    return _live_of(_index_ops(index))


def _live_of(ops: tuple[str, ...]) -> tuple[tuple[str, int, int], ...]:
    op = dict(zip(EDGES, ops))
    nonzero = [True, False, False, False]
    for j in (1, 2, 3):
        nonzero[j] = any(op[(i, j)] != "none" and nonzero[i] for i in range(j))
    reach = [False, False, False, True]
    for i in (2, 1, 0):
        reach[i] = any(op[(i, j)] != "none" and reach[j] for j in range(i + 1, 4))
    return tuple((o, s, d) for (s, d), o in zip(EDGES, ops) if o != "none" and nonzero[s] and reach[d])


# ------------------------------------------------------------------------------------------------------
# direct IR builder
#
# Every layer of a network is described by a "kind" (a column of a per-configuration table holding its type
# and the 16 integer IR columns) and a name (an entry of a name table). A cell is built once per arch as a
# short template of local kinds, names and edges; the fixed parts (stem, reduction blocks, head) are laid
# out once per template shape. A network is then a few vectorised gathers.

# cell-local kinds: index into a stage's block of the kind table
_K_RELU, _K_CONV1, _K_CONV3, _K_BN, _K_POOL, _K_ADD, _K_MUL = range(7)
_N_CELL_KINDS = 7
# cell-local name slots: 7 per edge (conv1: 3, conv3: 3, pool: 1), then the Mul of a zero cell
_OP_SLOT = {"nor_conv_1x1": 0, "nor_conv_3x3": 3, "avg_pool_3x3": 6}
_SLOT_MUL = 7 * len(EDGES)
_SLOTS = _SLOT_MUL + 1
_MAX_ADDS = 3  # node 2: 1, node 3: 2


@dataclass
class _Cell:
    """A pruned cell as local arrays: kinds (L,), name slots (L,; >= _SLOTS: add number + _SLOTS),
    edges (E, 2; -1 = the cell input), output layer (-1: the input itself), number of adds."""

    kinds: np.ndarray
    slots: np.ndarray
    edges: np.ndarray
    out: int
    adds: int

    @property
    def key(self) -> tuple[int, int, int]:
        """What the network layout depends on: cell length, number of adds, output layer."""
        return (len(self.kinds), self.adds, self.out)

    @functools.cached_property
    def packed(self) -> np.ndarray:
        """kinds, slots and edges in one vector (stacked per layout group)."""
        return np.concatenate([self.kinds, self.slots, self.edges.ravel()])


@functools.lru_cache(maxsize=16384)
def _cell(live: tuple[tuple[str, int, int], ...]) -> _Cell:
    kinds: list[int] = []
    slots: list[int] = []
    edges: list[tuple[int, int]] = []

    def layer(kind: int, slot: int, *inputs: int) -> int:
        idx = len(kinds)
        kinds.append(kind)
        slots.append(slot)
        edges.extend((i, idx) for i in inputs)
        return idx

    if not live:  # zero output: x * 0
        layer(_K_MUL, _SLOT_MUL, -1)
        return _Cell(np.array(kinds, np.int64), np.array(slots, np.int64), np.array(edges, np.int64), 0, 0)
    ref = {0: -1}
    adds = 0
    for j in (1, 2, 3):
        acc = None
        for op, i, d in live:
            if d != j:
                continue
            x = ref[i]
            base = 7 * _EDGE_INDEX[(i, j)] + _OP_SLOT.get(op, 0)
            if op == "skip_connect":
                y = x
            elif op == "avg_pool_3x3":
                y = layer(_K_POOL, base, x)
            else:
                r = layer(_K_RELU, base, x)
                c = layer(_K_CONV1 if op == "nor_conv_1x1" else _K_CONV3, base + 1, r)
                y = layer(_K_BN, base + 2, c)
            if acc is None:
                acc = y
            else:
                acc = layer(_K_ADD, _SLOTS + adds, acc, y)
                adds += 1
        if acc is not None:
            ref[j] = acc
    out = ref[3]
    return _Cell(np.array(kinds, np.int64), np.array(slots, np.int64),
                 np.array(edges, np.int64).reshape(-1, 2), out, adds)


class _Segment:
    """A fixed sub-network as local arrays (rows: type + INT_COLUMNS, edges with -1 = segment input)."""

    def __init__(self, b: NetworkBuilder, out: int, external: bool = True) -> None:
        net = b.build()
        first = 1 if external else 0
        self.rows = np.vstack([net.types[None, :]] + [net.cols[c][None, :] for c in INT_COLUMNS])[:, first:]
        self.edges = net.edges - first
        self.out = out - first
        self.names = net.names[first:]

    def __len__(self) -> int:
        return self.rows.shape[1]


def _relu_conv_bn(b: NetworkBuilder, prefix: str, x: int, c_out: int, k: int, stride: int = 1) -> int:
    x = b.same(T.RELU, f"{prefix}.op.0", x)
    x = b.conv(f"{prefix}.op.1", x, c_out, k, stride=stride, padding=k // 2)
    return b.same(T.BATCH_NORM, f"{prefix}.op.2", x)


def _add_name(g: int) -> str:
    return "add" if g == 0 else f"add_{g}"


class _Plan:
    """Everything of one (C, N, num_classes) configuration that does not depend on the cell."""

    def __init__(self, C: int, N: int, num_classes: int) -> None:
        self.C, self.N, self.num_classes = C, N, num_classes
        n, _, h, w = INPUT_SHAPE
        b = NetworkBuilder("stem")
        x = b.input("inputs", INPUT_SHAPE)
        x = b.conv("stem.0", x, C, 3, padding=1)
        self.stem = _Segment(b, b.same(T.BATCH_NORM, "stem.1", x), external=False)
        self.reductions: list[_Segment] = []
        self.stage_shapes = []
        for s in range(3):
            c = C * 2 ** s
            self.stage_shapes.append((n, c, h >> s, w >> s))
            if s == 0:
                continue
            k = s * (N + 1) - 1  # module index in `cells`
            b = NetworkBuilder("reduction")
            x = b.input("x", (n, c // 2, h >> (s - 1), w >> (s - 1)))
            a = _relu_conv_bn(b, f"cells.{k}.conv_a", x, c, 3, stride=2)
            a = _relu_conv_bn(b, f"cells.{k}.conv_b", a, c, 3)
            r = b.pool(f"cells.{k}.downsample.0", x, "avg", 2, 2)
            r = b.conv(f"cells.{k}.downsample.1", r, c, 1)
            self.reductions.append(_Segment(b, b.same(T.ADD, "add", [r, a])))
        b = NetworkBuilder("head")
        x = b.input("x", self.stage_shapes[-1])
        x = b.same(T.BATCH_NORM, "lastact.0", x)
        x = b.same(T.RELU, "lastact.1", x)
        x = b.global_pool("global_pooling", x)
        x = b.add(T.RESHAPE, "view", [x], (n, 4 * C))
        self.head = _Segment(b, b.linear("classifier", x, num_classes))

        # kind table: fixed segments first, then _N_CELL_KINDS kinds per stage
        cell_rows = []
        for shape in self.stage_shapes:
            b = NetworkBuilder("kinds")
            x = b.input("x", shape)
            c = shape[1]
            b.same(T.RELU, "relu", x)
            b.conv("conv1", x, c, 1)
            b.conv("conv3", x, c, 3, padding=1)
            b.same(T.BATCH_NORM, "bn", x)
            b.pool("pool", x, "avg", 3, 1, 1)
            b.same(T.ADD, "add", [x, x])
            b.same(T.MUL, "mul", x)
            cell_rows.append(_Segment(b, 0).rows)
        fixed = [self.stem, *self.reductions, self.head]
        self.rows = np.ascontiguousarray(np.hstack([s.rows for s in fixed] + cell_rows))
        starts = np.cumsum([0] + [len(s) for s in fixed])
        self.fixed_kinds = [np.arange(a, b_) for a, b_ in zip(starts[:-1], starts[1:])]
        self.cell_kind0 = int(starts[-1])

        # name table: per cell position _SLOTS local names, then the fixed names, then "add", "add_1", ...
        self.cell_pos = [s * (N + 1) + p for s in range(3) for p in range(N)]  # module index of each cell
        names: list[str] = []
        for c_idx, k in enumerate(self.cell_pos):
            for key in _EDGE_KEYS:
                pre = f"cells.{k}.edges.{key}"
                names += [f"{pre}.op.0", f"{pre}.op.1", f"{pre}.op.2"] * 2 + [f"{pre}.op"]
            names.append("mul" if c_idx == 0 else f"mul_{c_idx}")
        self.fixed_name0 = len(names)
        for seg in fixed:
            names += seg.names
        self.add_name0 = len(names)
        names += [_add_name(g) for g in range(3 * N * _MAX_ADDS + 2)]
        self.names = np.array(names, dtype=object)
        self.fixed_names = []
        at = self.fixed_name0
        for seg in fixed:
            self.fixed_names.append(np.arange(at, at + len(seg)))
            at += len(seg)

    @functools.lru_cache(maxsize=64)
    def layout(self, L: int, adds: int, out: int) -> "_Layout":
        """Positions, fixed kinds/names/edges of a network whose cells have ``L`` layers."""
        return _Layout(self, L, adds, out)


class _Layout:
    """Positions of all layers of a network with L-layer cells; the fixed parts' kinds, names and edges."""

    def __init__(self, plan: _Plan, L: int, adds: int, out: int) -> None:
        N = plan.N
        stem, (red1, red2), head = plan.stem, plan.reductions, plan.head
        seg_kinds = plan.fixed_kinds
        seg_names = [v.copy() for v in plan.fixed_names]
        # the reduction blocks' Add names follow the cells' adds in graph order
        for s, red in enumerate((red1, red2)):
            seg_names[1 + s][-1] = plan.add_name0 + (s + 1) * N * adds + s
        n = len(stem) + 3 * N * L + len(red1) + len(red2) + len(head)
        kinds = np.empty(n, np.int64)
        names = np.empty(n, np.int64)
        cell_idx: list[np.ndarray] = []
        edges = [stem.edges]
        offs, ins = [], []
        at = len(stem)
        prev_out = stem.out
        for s in range(3):
            for p in range(N):
                offs.append(at)
                ins.append(prev_out)
                cell_idx.append(np.arange(at, at + L))
                if out >= 0:
                    prev_out = at + out
                at += L
            seg = (red1, red2, head)[s]
            kinds[at:at + len(seg)] = seg_kinds[1 + s]
            names[at:at + len(seg)] = seg_names[1 + s]
            edges.append(np.where(seg.edges < 0, prev_out, seg.edges + at))
            prev_out = at + seg.out
            at += len(seg)
        kinds[:len(stem)] = seg_kinds[0]
        names[:len(stem)] = seg_names[0]
        self.n = n
        self.kinds, self.names = kinds, names
        self.cell_idx = np.concatenate(cell_idx)
        self.fixed_edges = np.concatenate(edges)
        self.offs = np.array(offs, np.int64)[:, None, None]
        self.ins = np.array(ins, np.int64)[:, None, None]
        c = np.arange(3 * N)
        stage = c // N
        self.kind_off = (plan.cell_kind0 + _N_CELL_KINDS * stage)[:, None]
        self.slot_base = (c * _SLOTS)[:, None]
        # global add number of a cell's first add: adds of the cells and reductions before it
        self.add_base = (plan.add_name0 + stage * (N * adds + 1) + (c % N) * adds - _SLOTS)[:, None]


@functools.lru_cache(maxsize=8)
def _plan(C: int, N: int, num_classes: int) -> _Plan:
    if C < 1 or N < 1 or num_classes < 1:
        raise ValueError(f"NB201 needs C, N and num_classes >= 1, got C={C}, N={N}, num_classes={num_classes}")
    plan = _Plan(C, N, num_classes)
    log.debug("NB201 tables for C=%d, N=%d, %d classes: %d layer kinds, %d names", C, N, num_classes,
              plan.rows.shape[1], len(plan.names))
    return plan


@functools.lru_cache(maxsize=None)  # at most NUM_ARCHS entries, a few hundred bytes each
def _cell_of(index: int) -> _Cell:
    return _cell(_live(index))


def build_network(arch: str, C: int = 16, N: int = 5, num_classes: int = 10) -> Network:
    """The IR of the NB201 network for ``arch`` (input 1x3x32x32), built without torch.

    Identical (names, types, shapes, edges) to ``annette_torch.trace(build_module(arch, ...), INPUT_SHAPE)``.
    """
    return build_networks([arch], C, N, num_classes)[0]


def build_networks(archs: Sequence[str], C: int = 16, N: int = 5, num_classes: int = 10) -> list[Network]:
    """`build_network` for many archs at once: cells with the same layout are built in one array pass.

    All 15,625 networks take a fraction of a second (see ``benchmarks/nb201_speed.py``).
    """
    plan = _plan(int(C), int(N), int(num_classes))
    cells = [_cell_of(arch_to_index(a)) for a in archs]
    groups: dict[tuple[int, int, int], list[int]] = {}
    for m, cell in enumerate(cells):
        groups.setdefault(cell.key, []).append(m)
    out: list[Network] = [None] * len(cells)  # type: ignore[list-item]
    for key, members in groups.items():
        lay = plan.layout(*key)
        G, L = len(members), key[0]
        kinds = np.empty((G, lay.n), np.int64)
        kinds[:] = lay.kinds
        names = np.empty((G, lay.n), np.int64)
        names[:] = lay.names
        n_edges = len(lay.fixed_edges) + lay.offs.size * len(cells[members[0]].edges)
        edges = np.empty((G, n_edges, 2), np.int64)
        edges[:, :len(lay.fixed_edges)] = lay.fixed_edges
        if L:
            packed = np.array([cells[m].packed for m in members])
            ck, slots, e = packed[:, :L], packed[:, L:2 * L], packed[:, 2 * L:].reshape(G, 1, -1, 2)
            kinds[:, lay.cell_idx] = (ck[:, None, :] + lay.kind_off).reshape(G, -1)
            names[:, lay.cell_idx] = np.where(slots[:, None, :] < _SLOTS, lay.slot_base + slots[:, None, :],
                                              lay.add_base + slots[:, None, :]).reshape(G, -1)
            edges[:, len(lay.fixed_edges):] = np.where(e < 0, lay.ins, e + lay.offs).reshape(G, -1, 2)
        rows = plan.rows[:, kinds]  # (17, G, n)
        name_lists = plan.names[names].tolist()
        for g, m in enumerate(members):
            r = rows[:, g]
            out[m] = Network.from_matrix(archs[m], name_lists[g], r[0], r[1:], edges[g])
    return out


def estimate_all(platform: PlatformLike = "zcu102", C: int = 16, N: int = 5, num_classes: int = 10) -> np.ndarray:
    """Predicted latency (ms) of every cell on ``platform`` (default ``zcu102``), indexed by `arch_to_index`
    (shape ``(NUM_ARCHS,)``).

    Cells with equal `live_edges` have identical networks, so only the distinct ones (9,445) are estimated.
    """
    from ...estimator import estimate_many

    first: dict[tuple[tuple[str, int, int], ...], int] = {}
    which = np.empty(NUM_ARCHS, np.int64)
    for i in range(NUM_ARCHS):
        which[i] = first.setdefault(_live(i), len(first))
    reps = [index_to_arch(i) for i in np.unique(which, return_index=True)[1]]
    times = estimate_many(build_networks(reps, C, N, num_classes), platform)
    return times[which]


# ------------------------------------------------------------------------------------------------------
# torch builder


def build_module(arch: str, C: int = 16, N: int = 5, num_classes: int = 10) -> Any:
    """The NB201 network for ``arch`` as an ``nn.Module`` (the benchmark's TinyNetwork with pruned cells)."""
    return _torch()["TinyNetwork"](live_edges(arch), C, N, num_classes)


@functools.cache
def _torch() -> dict[str, type]:
    import torch.nn as nn

    class ReLUConvBN(nn.Module):
        """ReLU -> Conv (no bias) -> BN, as ``nor_conv_kxk`` and the reduction block's convolutions."""

        def __init__(self, c_in: int, c_out: int, k: int, stride: int = 1) -> None:
            super().__init__()
            self.op = nn.Sequential(nn.ReLU(inplace=False),
                                    nn.Conv2d(c_in, c_out, k, stride=stride, padding=k // 2, bias=False),
                                    nn.BatchNorm2d(c_out))

        def forward(self, x):
            return self.op(x)

    class Pooling(nn.Module):
        """``avg_pool_3x3`` (stride 1, padding 1, padding excluded from the average)."""

        def __init__(self) -> None:
            super().__init__()
            self.op = nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)

        def forward(self, x):
            return self.op(x)

    class InferCell(nn.Module):
        """A fixed cell: only its live edges have modules; node j = chain of adds over its inputs."""

        def __init__(self, live: tuple[tuple[str, int, int], ...], C: int) -> None:
            super().__init__()
            self.live = live
            self.edges = nn.ModuleDict()
            for op, i, j in live:
                if op == "nor_conv_1x1":
                    self.edges[f"{j}<-{i}"] = ReLUConvBN(C, C, 1)
                elif op == "nor_conv_3x3":
                    self.edges[f"{j}<-{i}"] = ReLUConvBN(C, C, 3)
                elif op == "avg_pool_3x3":
                    self.edges[f"{j}<-{i}"] = Pooling()

        def forward(self, x):
            if not self.live:
                return x * 0.0
            nodes = {0: x}
            for j in (1, 2, 3):
                acc = None
                for op, i, d in self.live:
                    if d != j:
                        continue
                    y = nodes[i] if op == "skip_connect" else self.edges[f"{j}<-{i}"](nodes[i])
                    acc = y if acc is None else acc + y
                if acc is not None:
                    nodes[j] = acc
            return nodes[3]

    class ResNetBasicblock(nn.Module):
        """The reduction block between stages: two ReLUConvBN (first stride 2) + AvgPool/1x1-conv shortcut."""

        def __init__(self, c_in: int, c_out: int) -> None:
            super().__init__()
            self.conv_a = ReLUConvBN(c_in, c_out, 3, stride=2)
            self.conv_b = ReLUConvBN(c_out, c_out, 3)
            self.downsample = nn.Sequential(nn.AvgPool2d(kernel_size=2, stride=2, padding=0),
                                            nn.Conv2d(c_in, c_out, 1, bias=False))

        def forward(self, x):
            basicblock = self.conv_b(self.conv_a(x))
            residual = self.downsample(x)
            return residual + basicblock

    class TinyNetwork(nn.Module):
        """The benchmark's CIFAR macro skeleton around one cell repeated 3 x N times."""

        def __init__(self, live: tuple[tuple[str, int, int], ...], C: int, N: int, num_classes: int) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, C, 3, padding=1, bias=False), nn.BatchNorm2d(C))
            cells = []
            c_prev = C
            for s in range(3):
                c = C * 2 ** s
                if s > 0:
                    cells.append(ResNetBasicblock(c_prev, c))
                cells.extend(InferCell(live, c) for _ in range(N))
                c_prev = c
            self.cells = nn.ModuleList(cells)
            self.lastact = nn.Sequential(nn.BatchNorm2d(c_prev), nn.ReLU(inplace=True))
            self.global_pooling = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Linear(c_prev, num_classes)

        def forward(self, inputs):
            feature = self.stem(inputs)
            for cell in self.cells:
                feature = cell(feature)
            out = self.global_pooling(self.lastact(feature))
            out = out.view(out.size(0), -1)
            return self.classifier(out)

    return {"TinyNetwork": TinyNetwork, "InferCell": InferCell, "ResNetBasicblock": ResNetBasicblock}
