"""Blocked and plain tensor layouts of a mapped network, and the reorders a runtime inserts between them.

CPU runtimes run convolutions in a blocked channel layout (ONNX Runtime's NCHWc, OpenVINO's nChw16c) and most
other layers in the plain one. Layers that compute element by element, pool or interpolate per channel keep
the layout of their inputs; the rest (token operations, reshapes, transposes, slices, broadcasting merges)
need the plain layout. Where a tensor crosses from one layout to the other, the runtime reorders it: a
blocked tensor that a plain layer reads or that leaves the graph (``to_plain``, ONNX Runtime's
``ReorderOutput``), a plain tensor that a convolution reads (``to_blocked``, ``ReorderInput``). A reorder
moves the whole tensor, so its cost follows the tensor's size, not the layer's type: SegFormer's decoder
concatenates four plain 256 x 128 x 128 maps and reorders the 1024-channel result for its fusing 1x1
convolution (9 ms on one core), and upsamples its logits in the blocked layout, then reorders 150 x 512 x 512
at the graph output (19 ms).

`layout_reorders` finds them (one per tensor and direction, as a runtime reorders a tensor once for all its
readers); `MappingCosts.layout` prices them (see `annette_torch.mapping.costs`). The graph input is plain
and its reorders are the per-type ``inserted_input`` terms'.

A layer whose kernel differs by layout gets a type of its own where it runs blocked (`BLOCKED_TYPES`, given by
`MappingModel.apply` with layout costs): ONNX Runtime interpolates a blocked tensor ~3.5x faster per element
than a plain one bilinearly (0.4 vs 1.4 ns), about as fast by nearest neighbour x2.
"""

from __future__ import annotations

import numpy as np

from ..ir import CONV_TYPES, ELEMENTWISE_TYPES, MERGE_TYPES, LayerType, Network

__all__ = ["blocked_layers", "layout_reorders", "blocked_types", "feature_maps", "map_kernel_types",
           "row_batch_norms", "FOLLOWERS",
           "ALIGN", "BLOCK", "DIRECT_CHANNELS", "BLOCKED_TYPES", "VIEW_TYPES"]

T = LayerType
_N_TYPES = max(LayerType) + 1
#: layers that keep the layout of their inputs (blocked when all their inputs are): per-channel and per-element
#: layers; a broadcasting merge and a Concat or Resize that a blocked kernel cannot take are plain (below)
FOLLOWERS = (T.MAX_POOL, T.AVG_POOL, T.PLAIN_MAX_POOL, T.PLAIN_AVG_POOL, T.GLOBAL_POOL, T.BATCH_NORM, T.CONCAT,
             T.RESIZE, T.BLOCKED_RESIZE, T.DROPOUT) + MERGE_TYPES \
    + tuple(t for t in ELEMENTWISE_TYPES if t not in (T.SOFTMAX, T.LRN))
#: the channel multiples blocked kernels take (ONNX Runtime 1.2x's NCHWc, measured on an AVX-512 Xeon): ``ALIGN``
#: of a convolution's input channels (24 or 96 run blocked, 25, 43 or 102 plain) and of a depthwise
#: convolution's channels; ``BLOCK`` of a grouped convolution's input and output channels per group and of every
#: input of a Concat (four 8-channel maps are reordered one by one and concatenated plain)
ALIGN = 8
BLOCK = 16
#: a convolution with fewer input channels reads a plain tensor directly, whatever their count (the RGB stem)
DIRECT_CHANNELS = 16

_ANCHOR = np.zeros(_N_TYPES, bool)
_ANCHOR[list(CONV_TYPES)] = True
_FOLLOW = np.zeros(_N_TYPES, bool)
_FOLLOW[list(FOLLOWERS)] = True
_MERGE = np.zeros(_N_TYPES, bool)
_MERGE[list(MERGE_TYPES)] = True


def blocked_layers(net: Network) -> np.ndarray:
    """Mask of the layers that run in the blocked layout (see the module docstring); computed once per network
    (the mapping pass types blocked layers and the prediction prices their reorders on the same network)."""
    return net._cached("blocked_layout", lambda: _blocked_layers(net))


def _blocked_layers(net: Network) -> np.ndarray:
    types = net.types
    n = len(types)
    c_in, c_out = net.c_in, net.c_out
    g = np.maximum(net.cols["groups"], 1)
    cpg, fpg = c_in // g, c_out // g
    # convolutions, where their channels suit the blocked kernels (a plain convolution pads its outputs)
    depthwise = (g > 1) & (cpg == 1) & (fpg == 1)
    grouped_ok = np.where(depthwise, c_out % ALIGN == 0, (cpg % BLOCK == 0) & (fpg % BLOCK == 0))
    blocked = _ANCHOR[types] & np.where(g > 1, grouped_ok, (c_in < DIRECT_CHANNELS) | (c_in % ALIGN == 0))
    if not n or not net.edges.size:
        return blocked
    follow = _FOLLOW[types] & (net.n_inputs > 0)
    # kernels that cannot take blocked operands: broadcasting merges, a Concat of inputs that do not fill
    # whole blocks, a Resize by a non-integer factor
    follow &= ~(_MERGE[types] & (net.in_elems < net.n_inputs * net.out_elems))
    src, dst = net.edges[:, 0], net.edges[:, 1]
    cat = types == T.CONCAT
    if cat.any():
        ragged = np.bincount(dst, weights=(c_out[src] % BLOCK != 0), minlength=n) > 0
        follow &= ~(cat & ragged)
    rs = (types == T.RESIZE) | (types == T.BLOCKED_RESIZE)
    if rs.any():
        h_in, w_in = np.maximum(net.cols["h_in"], 1), np.maximum(net.cols["w_in"], 1)
        follow &= ~(rs & ((net.cols["h_out"] % h_in != 0) | (net.cols["w_out"] % w_in != 0)))
    # the greatest fixpoint from "every follower blocked": a follower stays blocked while all its producers are
    cand = follow.copy()
    while True:
        bad = np.bincount(dst, weights=~(blocked | cand)[src], minlength=n) > 0
        nxt = cand & ~bad
        if (nxt == cand).all():
            break
        cand = nxt
    return blocked | cand


def layout_reorders(net: Network, outputs: bool = True, inputs: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per layer: whether its output tensor is reordered to the plain layout (blocked, read by a plain layer
    or, with ``outputs``, a graph output) and to the blocked one (plain, read by a blocked convolution that
    does not read plain tensors directly; a graph input only with ``inputs``)."""
    n = len(net.types)
    blocked = blocked_layers(net)
    types = net.types
    if net.edges.size:
        src, dst = net.edges[:, 0], net.edges[:, 1]
        plain_reader = np.bincount(src, weights=~blocked[dst], minlength=n) > 0
        direct = (net.cols["groups"] <= 1) & (net.c_in < DIRECT_CHANNELS)
        conv_reader = np.bincount(src, weights=(_ANCHOR[types] & blocked & ~direct)[dst], minlength=n) > 0
    else:
        plain_reader = conv_reader = np.zeros(n, bool)
    to_plain = blocked & plain_reader
    if outputs:
        to_plain |= blocked & (net.n_outputs == 0)
    to_blocked = ~blocked & conv_reader & (inputs | (types != T.INPUT))
    return to_plain, to_blocked


#: the type a layer takes where it runs blocked (`blocked_types`)
BLOCKED_TYPES = {T.RESIZE: T.BLOCKED_RESIZE}


def blocked_types(net: Network) -> np.ndarray | None:
    """``net``'s types with `BLOCKED_TYPES` applied to its blocked layers; None when none changes."""
    types = net.types
    hit = np.isin(types, list(BLOCKED_TYPES))
    if not hit.any():
        return None
    hit &= blocked_layers(net)
    if not hit.any():
        return None
    out = types.copy()
    for a, b in BLOCKED_TYPES.items():
        out[hit & (types == a)] = b
    return out


#: shape-only layers: a runtime runs them on the tensor's memory as it is, unless that memory is in a blocked layout
VIEW_TYPES = (T.RESHAPE, T.FLATTEN)
_VIEW = np.zeros(_N_TYPES, bool)
_VIEW[list(VIEW_TYPES)] = True
#: layers that keep a feature map a feature map (`feature_maps`): `FOLLOWERS` and slices
_MAP_FOLLOW = _FOLLOW.copy()
_MAP_FOLLOW[T.SLICE] = True


def feature_maps(net: Network) -> np.ndarray:
    """Mask of the layers whose output is a convolution's feature map: written by a convolution, or by a follower
    (`FOLLOWERS`) or slice of a feature map. Unlike `blocked_layers` this ignores channel alignment and needs only
    one such input: OpenVINO keeps unaligned channel counts blocked too (padded), and a channel shuffle's concat of
    a convolution's output and a slice of the block input blocked, so the shuffle's reshape reorders it."""
    types = net.types
    fm = _ANCHOR[types].copy()
    if not net.edges.size or not fm.any():
        return fm
    src, dst = net.edges[:, 0], net.edges[:, 1]
    follow = _MAP_FOLLOW[types]
    while True:  # forward from the convolutions through followers
        nxt = fm | (follow & (np.bincount(dst, weights=fm[src], minlength=len(types)) > 0))
        if (nxt == fm).all():
            return fm
        fm = nxt


def map_kernel_types(net: Network, without_layout: bool = False) -> np.ndarray | None:
    """``net``'s types with every layer that reads a feature map (`feature_maps`) typed by the kernel a CPU runtime
    runs for it there: a view (`VIEW_TYPES`) is a ``BlockedReshape`` (feature maps are kept blocked, so viewing one
    reorders it, a copy, while a view of a plain tensor moves nothing: OpenVINO runs it in place); with
    ``without_layout`` (a runtime without layout costs, whose blocked layers `blocked_types` does not know), a
    ``Resize`` is a ``BlockedResize`` (OpenVINO upsamples a convolution's logits ~8x faster per element than a plain
    tensor), and a max or average pool that reads no feature map a ``PlainMaxPool`` / ``PlainAvgPool`` (OpenVINO
    pools a plain tensor, such as PoolFormer's after a GroupNorm, ~2.2x slower per element than a convolution's map).
    Every other view is a ``Reshape``: a ``Flatten`` of a plain tensor is the same view (ONNX Runtime: ~3 us
    either way), while a Flatten model fitted before views of feature maps had a type of their own prices it as
    the copy it was then (LeViT's 46 flattens of token tensors: 1.0 ms, measured 0.14). A BatchNorm over the
    rows of a matrix (`row_batch_norms`) is a ``RowBatchNorm``. None when no layer changes."""
    types = net.types
    pools = np.isin(types, (T.MAX_POOL, T.AVG_POOL)) & without_layout
    cand = _VIEW[types] | ((types == T.RESIZE) & without_layout) | pools
    hit = np.zeros(len(types), bool)
    if cand.any() and net.edges.size:
        src, dst = net.edges[:, 0], net.edges[:, 1]
        hit = cand & (np.bincount(dst, weights=feature_maps(net)[src], minlength=len(types)) > 0)
    plain = pools & ~hit
    hit &= ~pools
    flat = (types == T.FLATTEN) & ~hit
    rows = row_batch_norms(net)
    if not (hit.any() or flat.any() or rows.any() or plain.any()):
        return None
    out = types.copy()
    out[hit] = np.where(types[hit] == T.RESIZE, T.BLOCKED_RESIZE, T.BLOCKED_RESHAPE)
    out[flat] = T.RESHAPE
    out[rows] = T.ROW_BATCH_NORM
    out[plain] = np.where(types[plain] == T.MAX_POOL, T.PLAIN_MAX_POOL, T.PLAIN_AVG_POOL)
    return out


def row_batch_norms(net: Network) -> np.ndarray:
    """Mask of the BatchNorm layers over the rows of a matrix (``(rows, features)``: IR ``n`` > 1, 1 x 1 maps),
    such as LeViT's BatchNorm over the token rows after each Linear. Runtimes run them as one per-column affine
    pass over contiguous rows, not as per-channel planes: OpenVINO ~5x faster per element than a feature map's
    standalone BatchNorm, ONNX Runtime ~2x slower for small ones (`linear_bn` suite)."""
    return (net.types == T.BATCH_NORM) & (net.n > 1) & (net.h_in == 1) & (net.w_in == 1)
