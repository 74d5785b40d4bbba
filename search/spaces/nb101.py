"""NAS-Bench-101 search space: matrix + ops cells, the benchmark's validity rules, graph hash and builders.

A cell is a DAG of at most 7 vertices given as an upper-triangular 0/1 adjacency matrix and one op per
vertex: ``input``, then interior ops from `OPS`, then ``output``; at most 9 edges. Vertices not on an
input -> output path are pruned first (as ``ModelSpec`` does); the rules apply to the pruned cell.

The network is the benchmark's CIFAR-10 model: a 3x3 conv-BN-ReLU stem with 128 channels, 3 stacks of 3
cells, a 2x2 max pool (stride 2) before stacks 2 and 3 doubling the channels, global average pooling and a
linear classifier; input 1x3x32x32. Inside a cell (``model_builder.build_module``): vertices fed by the
input get a 1x1 conv-BN-ReLU projection of it, interior inputs are truncated to the vertex's channels
(a channel slice), a vertex sums its inputs and applies its op, the output concatenates the vertices that
feed it and adds a projection of the input when input -> output is an edge. Channels per vertex follow the
official ``compute_vertex_channels``. Multi-input sums are chains of two-input ``Add`` layers (the
benchmark's ``tf.add_n``); `build_network` (direct, no torch) and `build_module` (torch) give identical IR.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from typing import Any, NamedTuple, Sequence

import numpy as np

from ...ir import LayerType, Network, NetworkBuilder

from ._names import FxNames

__all__ = [
    "OPS", "INPUT", "OUTPUT", "MAX_VERTICES", "MAX_EDGES", "INPUT_SHAPE", "Spec", "prune", "validate",
    "is_valid", "spec_hash", "hash_module", "compute_vertex_channels", "sample", "build_network", "build_module",
]

log = logging.getLogger(__name__)
T = LayerType

INPUT = "input"
OUTPUT = "output"
#: Interior ops in the benchmark's canonical order (their index is the vertex label of the hash).
OPS: tuple[str, ...] = ("conv3x3-bn-relu", "conv1x1-bn-relu", "maxpool3x3")
MAX_VERTICES = 7
MAX_EDGES = 9
INPUT_SHAPE: tuple[int, int, int, int] = (1, 3, 32, 32)


class Spec(NamedTuple):
    """A (pruned) cell: adjacency matrix (V x V, upper triangular, int) and V op names."""

    matrix: np.ndarray
    ops: tuple[str, ...]


def _as_matrix(matrix: Any, ops: Sequence[str]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Shape and value checks of an encoding (the ``ModelSpec`` constructor's); returns int matrix, ops."""
    m = np.asarray(matrix)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"NB101 matrix must be square, got shape {m.shape}")
    ops = tuple(ops)
    if len(ops) != m.shape[0]:
        raise ValueError(f"NB101 spec has a {m.shape[0]}x{m.shape[0]} matrix but {len(ops)} ops")
    if not np.isin(m, (0, 1)).all():
        raise ValueError("NB101 matrix entries must be 0 or 1")
    m = m.astype(np.int64)
    if np.tril(m).any():
        raise ValueError("NB101 matrix must be upper triangular (edges go from lower to higher vertices)")
    return m, ops


def prune(matrix: Any, ops: Sequence[str]) -> Spec | None:
    """Drop vertices not on an input -> output path (``ModelSpec._prune``); None if output is unreachable."""
    m, ops = _as_matrix(matrix, ops)
    v = m.shape[0]
    if v < 2:
        return None
    from_in, frontier = {0}, [0]
    while frontier:
        top = frontier.pop()
        for w in range(top + 1, v):
            if m[top, w] and w not in from_in:
                from_in.add(w)
                frontier.append(w)
    to_out, frontier = {v - 1}, [v - 1]
    while frontier:
        top = frontier.pop()
        for w in range(top):
            if m[w, top] and w not in to_out:
                to_out.add(w)
                frontier.append(w)
    keep = sorted(from_in & to_out)
    if len(keep) < 2:  # input not connected to output
        return None
    return Spec(m[np.ix_(keep, keep)], tuple(ops[i] for i in keep))


def validate(matrix: Any, ops: Sequence[str]) -> Spec:
    """The pruned spec if the cell is in the NB101 space, else ValueError saying which rule it breaks."""
    m, ops = _as_matrix(matrix, ops)
    if m.shape[0] > MAX_VERTICES:
        raise ValueError(f"NB101 cell has {m.shape[0]} vertices, at most {MAX_VERTICES} allowed")
    if not ops or ops[0] != INPUT:
        raise ValueError(f"NB101 first op must be {INPUT!r}, got {ops[0] if ops else None!r}")
    if ops[-1] != OUTPUT:
        raise ValueError(f"NB101 last op must be {OUTPUT!r}, got {ops[-1]!r}")
    for op in ops[1:-1]:
        if op not in OPS:
            raise ValueError(f"NB101 unknown interior op {op!r} (known: {', '.join(OPS)})")
    spec = prune(m, ops)
    if spec is None:
        raise ValueError("NB101 cell: the output is not reachable from the input")
    edges = int(spec.matrix.sum())
    if edges > MAX_EDGES:
        raise ValueError(f"NB101 cell has {edges} edges after pruning, at most {MAX_EDGES} allowed")
    return spec


def is_valid(matrix: Any, ops: Sequence[str]) -> bool:
    """Whether the cell is in the NB101 space (see `validate`)."""
    try:
        validate(matrix, ops)
    except ValueError:
        return False
    return True


def hash_module(matrix: np.ndarray, labeling: Sequence[int]) -> str:
    """Isomorphism-invariant MD5 hash of a labelled graph (``graph_util.hash_module`` of NB101).

    Each vertex starts from the hash of (out-degree, in-degree, label); V times, it is rehashed with the
    sorted hashes of its in- and out-neighbours; the fingerprint hashes the sorted vertex hashes.
    """
    m = np.asarray(matrix)
    v = m.shape[0]
    in_edges = m.sum(axis=0).tolist()
    out_edges = m.sum(axis=1).tolist()
    hashes = [hashlib.md5(str(h).encode("utf-8")).hexdigest()
              for h in zip(out_edges, in_edges, [int(x) for x in labeling])]
    ins = [[w for w in range(v) if m[w, u]] for u in range(v)]
    outs = [[w for w in range(v) if m[u, w]] for u in range(v)]
    for _ in range(v):
        hashes = [hashlib.md5(("".join(sorted(hashes[w] for w in ins[u])) + "|"
                               + "".join(sorted(hashes[w] for w in outs[u])) + "|" + hashes[u]).encode("utf-8")
                              ).hexdigest() for u in range(v)]
    return hashlib.md5(str(sorted(hashes)).encode("utf-8")).hexdigest()


def spec_hash(matrix: Any, ops: Sequence[str]) -> str:
    """The NB101 hash of a valid cell (after pruning; labels: input -1, output -2, interior op index)."""
    spec = validate(matrix, ops)
    labels = [-1] + [OPS.index(op) for op in spec.ops[1:-1]] + [-2]
    return hash_module(spec.matrix, labels)


def sample(n: int, rng: np.random.Generator | int | None = None, max_tries: int | None = None) -> list[Spec]:
    """``n`` valid, pairwise non-isomorphic (distinct `spec_hash`) pruned cells, drawn uniformly.

    Draws a random upper-triangular 7x7 matrix and 5 interior ops until ``n`` new hashes are found.
    """
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    max_tries = max_tries if max_tries is not None else 1000 * max(n, 1)
    seen: set[str] = set()
    out: list[Spec] = []
    for _ in range(max_tries):
        if len(out) >= n:
            break
        m = np.triu(rng.integers(0, 2, (MAX_VERTICES, MAX_VERTICES)), 1)
        ops = (INPUT, *(OPS[i] for i in rng.integers(0, len(OPS), MAX_VERTICES - 2)), OUTPUT)
        try:
            spec = validate(m, ops)
        except ValueError:
            continue
        h = spec_hash(*spec)
        if h not in seen:
            seen.add(h)
            out.append(spec)
    if len(out) < n:
        raise ValueError(f"NB101 sample: found only {len(out)} of {n} distinct cells in {max_tries} draws")
    log.debug("NB101 sample: %d distinct valid cells", n)
    return out


def compute_vertex_channels(input_channels: int, output_channels: int, matrix: np.ndarray) -> list[int]:
    """Channels of each vertex of a pruned cell (``model_builder.compute_vertex_channels``).

    The output's channels are split evenly over the vertices feeding it (remainder to the first ones);
    other vertices take the maximum of their successors' channels.
    """
    m = np.asarray(matrix)
    v = m.shape[0]
    channels = [0] * v
    channels[0] = input_channels
    channels[v - 1] = output_channels
    if v == 2:
        return channels
    in_degree = m[1:].sum(axis=0)
    interior = output_channels // int(in_degree[v - 1])
    correction = output_channels % int(in_degree[v - 1])
    for u in range(1, v - 1):
        if m[u, v - 1]:
            channels[u] = interior
            if correction:
                channels[u] += 1
                correction -= 1
    for u in range(v - 3, 0, -1):
        if not m[u, v - 1]:
            for dst in range(u + 1, v - 1):
                if m[u, dst]:
                    channels[u] = max(channels[u], channels[dst])
        if channels[u] <= 0:
            raise ValueError(f"NB101 vertex {u} gets no channels (matrix {m.tolist()})")
    return channels


# ------------------------------------------------------------------------------------------------------
# direct IR builder


def _conv_bn_relu(b: NetworkBuilder, name: str, x: int, c_out: int, k: int) -> int:
    x = b.conv(f"{name}.conv", x, c_out, k, padding=k // 2)
    x = b.same(T.BATCH_NORM, f"{name}.bn", x)
    return b.same(T.RELU, f"{name}.relu", x)


def _cell(b: NetworkBuilder, fx: FxNames, name: str, spec: Spec, x: int, channels: int) -> int:
    m, ops = spec.matrix, spec.ops
    v = m.shape[0]
    vc = compute_vertex_channels(b.out_shape(x)[1], channels, m)
    n, _, h, w = b.out_shape(x)
    tensors = [x]
    final: list[int] = []
    for t in range(1, v - 1):
        add_in = []
        for src in range(1, t):
            if m[src, t]:
                y = tensors[src]
                if b.out_shape(y)[1] > vc[t]:
                    y = b.add(T.SLICE, fx("getitem"), [y], (n, vc[t], h, w))
                add_in.append(y)
        if m[0, t]:
            add_in.append(_conv_bn_relu(b, f"{name}.projections.vertex_{t}", x, vc[t], 1))
        y = add_in[0]
        for z in add_in[1:]:
            y = b.same(T.ADD, fx("add"), [y, z])
        key = f"{name}.ops.vertex_{t}"
        if ops[t] == "maxpool3x3":
            y = b.pool(key, y, "max", 3, 1, 1)
        else:
            y = _conv_bn_relu(b, key, y, vc[t], 3 if ops[t] == "conv3x3-bn-relu" else 1)
        tensors.append(y)
        if m[t, v - 1]:
            final.append(y)
    if not final:
        return _conv_bn_relu(b, f"{name}.projections.output", x, channels, 1)
    out = final[0] if len(final) == 1 else b.concat(fx("cat"), final)
    if m[0, v - 1]:
        proj = _conv_bn_relu(b, f"{name}.projections.output", x, channels, 1)
        out = b.same(T.ADD, fx("add"), [out, proj])
    return out


def build_network(matrix: Any, ops: Sequence[str], stem_channels: int = 128, num_stacks: int = 3,
                  num_modules: int = 3, num_classes: int = 10,
                  input_shape: Sequence[int] = INPUT_SHAPE) -> Network:
    """The IR of the NB101 network of a cell (validated and pruned first), built without torch.

    Identical (names, types, shapes, edges) to ``annette_torch.trace(build_module(...), input_shape)``.
    """
    spec = validate(matrix, ops)
    b = NetworkBuilder("nb101")
    fx = FxNames()
    x = b.input("x", tuple(input_shape))
    x = _conv_bn_relu(b, "stem", x, stem_channels, 3)
    k = 0
    for s in range(num_stacks):
        channels = b.out_shape(x)[1]
        if s > 0:
            x = b.pool(f"downsample.{s - 1}", x, "max", 2, 2)
            channels *= 2
        for _ in range(num_modules):
            x = _cell(b, fx, f"cells.{k}", spec, x, channels)
            k += 1
    x = b.global_pool(fx("mean"), x)
    b.linear("classifier", x, num_classes)
    return b.build()


# ------------------------------------------------------------------------------------------------------
# torch builder


def build_module(matrix: Any, ops: Sequence[str], stem_channels: int = 128, num_stacks: int = 3,
                 num_modules: int = 3, num_classes: int = 10) -> Any:
    """The NB101 network of a cell as an ``nn.Module`` (the benchmark's model, in PyTorch)."""
    spec = validate(matrix, ops)
    return _torch()["Network"](spec, stem_channels, num_stacks, num_modules, num_classes)


@functools.cache
def _torch() -> dict[str, type]:
    import torch
    import torch.nn as nn

    class ConvBnRelu(nn.Module):
        """Conv (same padding, no bias) -> BN -> ReLU, the benchmark's ``conv_bn_relu``."""

        def __init__(self, c_in: int, c_out: int, k: int) -> None:
            super().__init__()
            self.conv = nn.Conv2d(c_in, c_out, k, padding=k // 2, bias=False)
            self.bn = nn.BatchNorm2d(c_out)
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            return self.relu(self.bn(self.conv(x)))

    class Cell(nn.Module):
        """One NB101 module (``model_builder.build_module``) for a pruned spec."""

        def __init__(self, spec: Spec, c_in: int, channels: int) -> None:
            super().__init__()
            m, ops = spec.matrix, spec.ops
            self.v = v = m.shape[0]
            self.matrix = m.tolist()
            self.vc = vc = compute_vertex_channels(c_in, channels, m)
            self.ops = nn.ModuleDict()
            self.projections = nn.ModuleDict()
            for t in range(1, v - 1):
                if m[0, t]:
                    self.projections[f"vertex_{t}"] = ConvBnRelu(c_in, vc[t], 1)
                if ops[t] == "maxpool3x3":
                    self.ops[f"vertex_{t}"] = nn.MaxPool2d(3, stride=1, padding=1)
                else:
                    self.ops[f"vertex_{t}"] = ConvBnRelu(vc[t], vc[t], 3 if ops[t] == "conv3x3-bn-relu" else 1)
            if m[0, v - 1]:
                self.projections["output"] = ConvBnRelu(c_in, channels, 1)

        def forward(self, x):
            m, v, vc = self.matrix, self.v, self.vc
            tensors = [x]
            final = []
            for t in range(1, v - 1):
                add_in = []
                for src in range(1, t):
                    if m[src][t]:
                        y = tensors[src]
                        if vc[src] > vc[t]:  # truncate (the benchmark slices off the extra channel)
                            y = y[:, :vc[t]]
                        add_in.append(y)
                if m[0][t]:
                    add_in.append(self.projections[f"vertex_{t}"](x))
                y = add_in[0]
                for z in add_in[1:]:
                    y = y + z
                y = self.ops[f"vertex_{t}"](y)
                tensors.append(y)
                if m[t][v - 1]:
                    final.append(y)
            if not final:
                return self.projections["output"](x)
            out = final[0] if len(final) == 1 else torch.cat(final, 1)
            if m[0][v - 1]:
                out = out + self.projections["output"](x)
            return out

    class Network(nn.Module):
        """The NB101 CIFAR-10 model: stem, stacks of cells with max-pool downsampling, GAP, linear."""

        def __init__(self, spec: Spec, stem_channels: int, num_stacks: int, num_modules: int,
                     num_classes: int) -> None:
            super().__init__()
            self.num_stacks, self.num_modules = num_stacks, num_modules
            self.stem = ConvBnRelu(3, stem_channels, 3)
            cells, pools = [], []
            c = stem_channels
            for s in range(num_stacks):
                c_in = c
                if s > 0:
                    pools.append(nn.MaxPool2d(2, stride=2))
                    c *= 2
                for _ in range(num_modules):
                    cells.append(Cell(spec, c_in, c))
                    c_in = c
            self.cells = nn.ModuleList(cells)
            self.downsample = nn.ModuleList(pools)
            self.classifier = nn.Linear(c, num_classes)

        def forward(self, x):
            x = self.stem(x)
            k = 0
            for s in range(self.num_stacks):
                if s > 0:
                    x = self.downsample[s - 1](x)
                for _ in range(self.num_modules):
                    x = self.cells[k](x)
                    k += 1
            return self.classifier(x.mean(dim=(2, 3)))

    return {"Network": Network, "Cell": Cell, "ConvBnRelu": ConvBnRelu}
