"""What both export back ends read off a `Network` first: exportable layer types, topological order,
producers and consumers, and the rank of every exported tensor.

Tensor ranks: the IR folds every tensor into NCHW. Exported tensors are 4-D, except graph inputs of shape
``(N, C, 1, 1)`` feeding no spatial layer (exported as ``[N, C]``), and the outputs of ``FullyConnected``
and ``Flatten`` (and ``Reshape`` to ``(N, C, 1, 1)``), which are 2-D like the ONNX front end reads them; a
layer recorded with its full tensor shape (attribute ``shape``: a ``Reshape`` / ``Transpose`` of more than 4
dimensions, and every layer of the token-tensor suites, e.g. ``(batch, tokens, channels)``) keeps it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

from ...errors import AnnetteError
from ...ir import LayerType, Network

__all__ = ["ExportError", "EXPORTABLE", "CONV", "NEEDS_4D", "MERGE", "Plan", "Layer", "where", "tile_repeats"]

T = LayerType


class ExportError(AnnetteError):
    """A network cannot be exported (unsupported layer type, inconsistent shapes, bad opset)."""


#: Layer types `to_onnx` and `to_module` can export.
EXPORTABLE = frozenset({
    T.INPUT, T.CONV, T.DEPTHWISE_CONV, T.GROUP_CONV, T.CONV_TRANSPOSE, T.FULLY_CONNECTED, T.MAX_POOL, T.AVG_POOL,
    T.GLOBAL_POOL, T.BATCH_NORM, T.RELU, T.RELU6, T.LEAKY_RELU, T.SIGMOID, T.SILU, T.HARDSWISH, T.HARDSIGMOID,
    T.GELU, T.TANH, T.ADD, T.MUL, T.SUB, T.DIV, T.CONCAT, T.RESHAPE, T.FLATTEN, T.TRANSPOSE, T.RESIZE, T.PAD,
    T.SOFTMAX, T.SOFTPLUS, T.CLIP, T.LRN, T.SLICE, T.PICK, T.DROPOUT, T.REDUCE_MEAN, T.LAYER_NORM, T.MATMUL,
})
#: Convolutions exported as one ``Conv`` / ``nn.Conv2d`` (plain, depthwise, grouped).
CONV = (T.CONV, T.DEPTHWISE_CONV, T.GROUP_CONV)
#: Layers whose op needs a 4-D (N, C, H, W) input.
NEEDS_4D = frozenset(CONV + (T.CONV_TRANSPOSE, T.MAX_POOL, T.AVG_POOL, T.GLOBAL_POOL, T.LRN, T.RESIZE))
#: Element-wise merges of one or more inputs (one input: the other operand is a constant).
MERGE = (T.ADD, T.MUL, T.SUB, T.DIV)


def _label(net: Network, i: int) -> str:
    return LayerType(int(net.types[i])).label


def where(net: Network, i: int) -> str:
    """``network 'n': layer 'l' (Type)``: the prefix of every error message about layer ``i``."""
    return f"network {net.name!r}: layer {net.names[i]!r} ({_label(net, i)})"


@dataclass(frozen=True)
class Layer:
    """One layer as a back end's builder for its type reads it (`Plan.layer`)."""

    i: int
    t: LayerType
    parents: list[int]
    #: shape of the first input as the layer reads it (`Plan.source_shape`)
    src: tuple[int, ...]
    #: exported output shape (`Plan.shape`)
    dst: tuple[int, ...]
    #: the layer's constant tensors by role (`annette_torch.bench.export.weights.layer_params`)
    params: dict[str, Any]

    @property
    def flattens_leading(self) -> bool:
        """Whether a Flatten merges its input's leading axes into rows (torch's ``x.flatten(0, 1)`` of a token
        tensor ``(1, L, F) -> (L, F)``, exported as a reshape) rather than keeping the batch axis (axis 1)."""
        return not (len(self.dst) == 2 and self.src and self.dst[0] == self.src[0])


class Plan:
    """Per-layer facts both back ends need, computed once: order, parents, consumers, output ranks.

    Raises `ExportError` for what neither back end can export (unknown layer types, cycles, missing or extra
    producers, empty names).
    """

    def __init__(self, net: Network) -> None:
        n = len(net)
        self.net = net
        self.parents: list[list[int]] = [[] for _ in range(n)]
        self.children: list[list[int]] = [[] for _ in range(n)]
        for s, d in net.edges.tolist():
            self.parents[d].append(s)
            self.children[s].append(d)
        self.order = self._topo()
        for i in range(n):
            if not net.names[i]:
                raise ExportError(f"network {net.name!r}: layer {i} has an empty name")
            t = LayerType(int(net.types[i]))
            if t not in EXPORTABLE:
                raise ExportError(f"{where(net, i)}: layer type {t.label} cannot be exported "
                                  f"(exportable: {', '.join(sorted(x.label for x in EXPORTABLE))})")
            if t == T.INPUT and self.parents[i]:
                raise ExportError(f"{where(net, i)}: an Input layer has producers")
            if t != T.INPUT and not self.parents[i]:
                raise ExportError(f"{where(net, i)}: no producing layer (only Input layers may have none)")
            if t == T.MATMUL and len(self.parents[i]) != 2:
                raise ExportError(f"{where(net, i)}: a MatMul multiplies two activations, got "
                                  f"{len(self.parents[i])} producers")
            if t not in MERGE and t not in (T.CONCAT, T.MATMUL) and len(self.parents[i]) > 1:
                raise ExportError(f"{where(net, i)}: {len(self.parents[i])} producers for a one-input layer")
        self.rank = [4] * n
        for i in self.order:
            self.rank[i] = self._rank(i)
        self.outputs = [i for i in range(n) if not self.children[i] and net.types[i] != T.INPUT]
        if not self.outputs:
            raise ExportError(f"network {net.name!r} has no layer besides its inputs")

    def _topo(self) -> list[int]:
        """Kahn's order, lowest ready index first: the IR's own order whenever that is topological."""
        n = len(self.net)
        indeg = [len(p) for p in self.parents]
        ready = [i for i in range(n) if indeg[i] == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for c in self.children[i]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    heapq.heappush(ready, c)
        if len(order) != n:
            stuck = [self.net.names[i] for i in range(n) if indeg[i] > 0][:5]
            raise ExportError(f"network {self.net.name!r} has a cycle through layers {stuck}")
        return order

    def _rank(self, i: int) -> int:
        net = self.net
        t = LayerType(int(net.types[i]))
        full = net.attr("shape", i)
        if full is not None:
            return len(full)
        if t not in (T.RESHAPE, T.TRANSPOSE, T.FLATTEN) and any(self.rank[p] > 4 for p in self.parents[i]):
            raise ExportError(f"{where(net, i)}: a {t.label} layer cannot read a tensor of more than 4 "
                              "dimensions (only Reshape, Flatten and Transpose can)")
        flat_out = int(net.h_out[i]) == 1 and int(net.w_out[i]) == 1
        if t == T.INPUT:
            spatial_use = any(net.types[c] in NEEDS_4D for c in self.children[i])
            return 2 if flat_out and not spatial_use else 4
        if t in (T.FULLY_CONNECTED, T.FLATTEN):
            return 2
        if t == T.RESHAPE:
            return 2 if flat_out else 4
        if t in NEEDS_4D:
            return 4
        r = max(self.rank[p] for p in self.parents[i])
        return r if flat_out else 4

    def source_shape(self, i: int) -> tuple[int, ...]:
        """Shape of layer ``i``'s first input as the layer reads it: the producer's full shape when it has
        one recorded (always above rank 4), else 4-D for a 4-D layer (a 2-D producer is viewed as (N, C, 1, 1))
        and 2-D for a 2-D one."""
        p = self.parents[i][0]
        if self.rank[p] > 4 or self.net.attr("shape", p) is not None:
            return self.shape(p)
        s = self.net.out_shape(p)
        return s if self.rank[i] == 4 else s[:2]

    def shape(self, i: int) -> tuple[int, ...]:
        """Exported output tensor shape of layer ``i`` (rank 2 or 4; a Reshape / Transpose to 5-D keeps its
        full shape, as in ShuffleNet's channel shuffle)."""
        full = self.net.attr("shape", i)
        if full is not None:
            return tuple(full)
        s = self.net.out_shape(i)
        return s[:2] if self.rank[i] == 2 else s

    def layer(self, i: int, params: dict[str, Any]) -> Layer:
        """Layer ``i`` (not an ``Input``) with its constant tensors ``params``, as a builder reads it."""
        return Layer(i, LayerType(int(self.net.types[i])), self.parents[i], self.source_shape(i), self.shape(i),
                     params)


def tile_repeats(layer: Layer) -> tuple[int, ...] | None:
    """The repeats per axis of a one-input ``Concat`` whose output is its input tiled (an expand, repeat or tile
    the front ends read as a copy); None for an ordinary concatenation."""
    if len(layer.parents) != 1 or len(layer.src) != len(layer.dst) or tuple(layer.src) == tuple(layer.dst):
        return None
    if any(s <= 0 or d % s for s, d in zip(layer.src, layer.dst)):
        return None
    return tuple(d // s for s, d in zip(layer.src, layer.dst))
