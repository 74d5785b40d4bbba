"""Stride propagation: the shape rewrite a toolchain applies before fusing (OpenVINO's StridesOptimization).

A 1x1 convolution with stride s > 1 reads one pixel in s x s. When every consumer of a tensor asks for the
same stride, the tensor's producer computes only those pixels: a 1x1 convolution passes the stride on to its
own input (and runs with stride 1), a layer of a pass-through type (element-wise activations, BatchNorm,
Add, ...: which ones is per platform, learned from the ``stride_prop`` suite) computes at the reduced size
and passes it on, a convolution with a larger kernel multiplies its own stride and stops the walk. Any other
producer refuses: a requesting 1x1 convolution keeps its stride, a pass-through layer gets its input
subsampled (the toolchain inserts a cheap strided copy, not costed here).

Caffe-style ResNets (stride 2 on the first 1x1 of a stage) lose three quarters of the work of the last
block before each stage this way. The rewrite only changes shapes and strides; layers and edges stay.
"""

from __future__ import annotations

import heapq
from typing import Iterable

import numpy as np

from ..ir import LayerType, Network, topological_order

__all__ = ["propagate_strides"]


_CONV = int(LayerType.CONV)  # (comparing with a plain int is much faster than with the enum member)
_N_TYPES = max(LayerType) + 1
#: pass-through type masks, per tuple of types (a platform asks with the same one every time)
_MASKS: dict[tuple[int, ...], np.ndarray] = {}


def _through_mask(through: Iterable[LayerType]) -> np.ndarray:
    """Per layer type: whether it is among ``through``."""
    key = tuple(int(t) for t in through)
    mask = _MASKS.get(key)
    if mask is None:
        mask = np.zeros(_N_TYPES, dtype=bool)
        mask[list(key)] = True
        _MASKS[key] = mask
    return mask


def _shrink(v: np.ndarray | int, s: int) -> int:
    return (int(v) - 1) // s + 1


def propagate_strides(net: Network, through: Iterable[LayerType]) -> Network:
    """``net`` with strides propagated as described in the module docstring; ``net`` itself when nothing
    changes (no seed, or every producer refuses). ``through``: the pass-through layer types."""
    cols = net.cols
    # plain 1x1 convolutions without padding pass a stride on; the strided ones start a walk
    pointwise = (net.types == _CONV) & (cols["kh"] == 1) & (cols["kw"] == 1) & (cols["ph"] == 0) \
        & (cols["pw"] == 0)
    is_seed = pointwise & ((cols["sh"] > 1) | (cols["sw"] > 1))
    if not is_seed.any() or not net.edges.size:
        return net
    through_mask = _through_mask(through)
    n = len(net)
    src, dst = net.edges[:, 0], net.edges[:, 1]
    if (src < dst).all():
        rank = np.arange(n)
    else:  # visit consumers before producers: by position in a topological order
        parents: list[list[int]] = [[] for _ in range(n)]
        for a, b in zip(src.tolist(), dst.tolist()):
            parents[b].append(a)
        rank = np.empty(n, dtype=np.int64)
        rank[topological_order(parents)] = np.arange(n)
    order = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[order], np.arange(n + 1))
    in_order = np.argsort(dst, kind="stable")
    in_starts = np.searchsorted(dst[in_order], np.arange(n + 1))

    def consumers(i: int) -> list[int]:
        return dst[order[starts[i]:starts[i + 1]]].tolist()

    def producers(i: int) -> list[int]:
        return src[in_order[in_starts[i]:in_starts[i + 1]]].tolist()

    types = net.types
    asked: dict[tuple[int, int], tuple[int, int]] = {}  # (producer, consumer) -> stride the consumer asks for
    req: dict[int, tuple[int, int]] = {}  # rows asking all their producers for a stride
    refused: set[int] = set()  # rows of which some producer refused
    out_s: dict[int, tuple[int, int]] = {}  # rows computing their output at a stride
    conv_s: dict[int, tuple[int, int]] = {}  # convolutions with a kernel > 1 that take on a stride
    heap: list[tuple[int, int]] = []
    queued: set[int] = set()

    def visit(i: int) -> None:
        if i not in queued:
            queued.add(i)
            heapq.heappush(heap, (-int(rank[i]), i))

    def ask(i: int, s: tuple[int, int]) -> None:
        req[i] = s
        for j in producers(i):
            asked[(j, i)] = s
            visit(j)

    for i in np.flatnonzero(is_seed).tolist():
        visit(i)
    while heap:
        _, i = heapq.heappop(heap)
        cons = consumers(i)
        wants = {asked.get((i, j)) for j in cons}
        p = wants.pop() if len(wants) == 1 and None not in wants else None
        t = int(types[i])
        if t == _CONV and (p is not None or is_seed[i]):
            ph, pw = p if p is not None else (1, 1)
            s = (int(cols["sh"][i]) * ph, int(cols["sw"][i]) * pw)
            if p is not None:
                out_s[i] = p
            if pointwise[i]:
                ask(i, s)
            else:
                conv_s[i] = s
        elif p is not None and through_mask[t]:
            out_s[i] = p
            ask(i, p)
        else:
            refused.update(j for j in cons if (i, j) in asked)
    if not out_s:
        return net  # every producer refused: the toolchain runs the graph as written
    c = {k: v.copy() for k, v in cols.items()}
    for i, (ph, pw) in out_s.items():
        c["h_out"][i], c["w_out"][i] = _shrink(c["h_out"][i], ph), _shrink(c["w_out"][i], pw)
    for i, (sh, sw) in conv_s.items():
        c["sh"][i], c["sw"][i] = sh, sw
    for i, (sh, sw) in req.items():
        if types[i] == _CONV and i in refused:
            c["sh"][i], c["sw"][i] = sh, sw  # strides the full input itself
            continue
        c["h_in"][i], c["w_in"][i] = _shrink(c["h_in"][i], sh), _shrink(c["w_in"][i], sw)
        if types[i] == _CONV:
            c["sh"][i] = c["sw"][i] = 1
    return Network(net.name, net.names, net.types, c, net.edges, net.attrs)
