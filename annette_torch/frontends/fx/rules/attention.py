"""fx rules for attention: `nn.MultiheadAttention`, `F.scaled_dot_product_attention` and the transformer
encoder modules (`nn.TransformerEncoderLayer`, `nn.TransformerEncoder`) traced into the layers a runtime
executes (projections, the head split, scores, softmax, context, output projection, the feed-forward block,
LayerNorms and residual adds), and `torch.einsum` contractions of two tensors as batched matrix products."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from ....ir import transpose_slow
from ..registry import _FUNCTIONS, _MODULES, _reg
from ..values import T, _arg, _NoRule, _prod, _ShapeError, _TV
from ..walker import _Walker
from .linear import _linear_core


def _bmm(w: _Walker, a: _TV, b: _TV, batch: tuple[int, ...], m: int, k: int, n: int, name: str) -> _TV:
    """A batched product of two activations, ``batch`` x (m, k) @ (k, n): the IR's MatMul with the batch
    in N, k in C, m rows in H (ops = 2 * batch * m * k * n)."""
    nb = _prod(batch)
    return w.emit(T.MATMUL, (a, b), batch + (m, n), in_shape=(nb, k, m, 1), ir_out=(nb, n, m, 1), name=name)


def _attend(w: _Walker, q: _TV, k: _TV, v: _TV, mask: Any, prefix: str) -> _TV:
    """softmax(q k^T * scale [+ mask]) v over the trailing two dimensions of ``(..., L, E)`` tensors: the
    score product, the mask addition, the softmax and the context product."""
    *bq, L, E = q.shape
    *_, S, Ek = k.shape
    Ev = v.shape[-1]
    if Ek != E or v.shape[-2] != S:
        raise _ShapeError(f"attention of query {list(q.shape)}, key {list(k.shape)} and value {list(v.shape)}: "
                          "the sizes do not match")
    batch = tuple(bq)
    scores = _bmm(w, q, k, batch, L, E, S, f"{prefix}.scores")
    if type(mask) is _TV and (mask.layer >= 0 or mask.logits):  # (a constant mask of -100s: subnormal work)
        scores = w.emit(T.ADD, (scores, mask), scores.shape, name=f"{prefix}.mask")
    probs = w.emit(T.SOFTMAX, (scores,), scores.shape, name=f"{prefix}.softmax")
    return _bmm(w, probs, v, batch, L, S, Ev, f"{prefix}.context")


def _proj(w: _Walker, x: _TV, fin: int, fout: int, name: str) -> _TV:
    """A projection (fully connected layer over the last dimension) named ``name``."""
    saved, w.name = w.name, name
    try:
        return _linear_core(w, x, fin, fout)
    finally:
        w.name = saved


def _sdpa(w: _Walker, fn, args, kwargs):
    q, k, v = (_arg(args, kwargs, i, key) for i, key in enumerate(("query", "key", "value")))
    if not all(type(t) is _TV for t in (q, k, v)) or min(len(t.shape) for t in (q, k, v)) < 2:
        raise _NoRule("scaled_dot_product_attention of non-tensors")
    return _attend(w, q, k, v, _arg(args, kwargs, 3, "attn_mask"), w.name)


def _mha_module(w: _Walker, m: nn.MultiheadAttention, args, kwargs):
    q, k, v = (_arg(args, kwargs, i, key) for i, key in enumerate(("query", "key", "value")))
    if not all(type(t) is _TV for t in (q, k, v)):
        raise _NoRule("MultiheadAttention of non-tensors")
    return _mha(w, m, q, k, v, _arg(args, kwargs, 5, "attn_mask"), _arg(args, kwargs, 4, "need_weights", True),
                w.name)


def _mha(w: _Walker, m: nn.MultiheadAttention, q: _TV, k: _TV, v: _TV, mask: Any, need_weights: bool,
         base: str) -> tuple[_TV, _TV | None]:
    """The layers of one `nn.MultiheadAttention` call; returns its output and (if asked) the weights."""
    if len(q.shape) not in (2, 3):
        raise _ShapeError(f"MultiheadAttention expects a 2-D or 3-D query, got shape {list(q.shape)}")
    E, H = m.embed_dim, m.num_heads
    hd = E // H
    unbatched = len(q.shape) == 2
    if unbatched:
        (L, _), S, B = q.shape, k.shape[0], 1
    elif m.batch_first:
        (B, L, _), S = q.shape, k.shape[1]
    else:
        (L, B, _), S = q.shape, k.shape[0]
    if q is k and k is v and m._qkv_same_embed_dim:  # self-attention: one projection to q, k and v
        q_ = k_ = v_ = _proj(w, q, E, 3 * E, f"{base}.in_proj")
    else:
        q_ = _proj(w, q, E, E, f"{base}.q_proj")
        k_ = _proj(w, k, m.kdim, E, f"{base}.k_proj")
        v_ = _proj(w, v, m.vdim, E, f"{base}.v_proj")
    # the head split for each of q, k and v, a copy each: to (B, H, L, hd) for batch_first, else (B * H, L, hd),
    # as the module's ONNX export has them (so the scores and softmax fold alike in both front ends)
    heads = []
    for t, n, tag in ((q_, L, "q"), (k_, S, "k"), (v_, S, "v")):
        split = (B, H, n, hd) if m.batch_first and not unbatched else (B * H, n, hd)
        heads.append(w.emit(T.TRANSPOSE, (t,), split, name=f"{base}.{tag}_heads"))
    ctx = _attend(w, heads[0], heads[1], heads[2], mask, base)
    merged = w.emit(T.TRANSPOSE, (ctx,), (L, B, E), name=f"{base}.merge_heads")
    out_shape = (L, E) if unbatched else ((B, L, E) if m.batch_first else (L, B, E))
    out = _proj(w, _TV(merged.layer, out_shape), E, E, f"{base}.out_proj")
    if not need_weights:
        return out, None
    # the head-averaged attention weights, a small mean over the heads that only the caller's use keeps
    return out, _TV(-1, (L, S) if unbatched else (B, L, S))


def _encoder_layer(w: _Walker, m: nn.TransformerEncoderLayer, x: _TV, mask: Any, base: str) -> _TV:
    """One `nn.TransformerEncoderLayer` (post- or pre-norm): self-attention and the feed-forward block, each
    with its residual add and LayerNorm; dropout is the identity at inference."""
    d = m.self_attn.embed_dim

    def norm(t: _TV, name: str) -> _TV:
        return w.emit(T.LAYER_NORM, (t,), t.shape, name=f"{base}.{name}")

    def attention(t: _TV) -> _TV:
        return _mha(w, m.self_attn, t, t, t, mask, False, f"{base}.self_attn")[0]

    def feed_forward(t: _TV) -> _TV:
        h = _proj(w, t, d, m.linear1.out_features, f"{base}.linear1")
        act = T.GELU if getattr(m, "activation_relu_or_gelu", 1) == 2 else T.RELU
        h = w.emit(act, (h,), h.shape, name=f"{base}.activation")
        return _proj(w, h, m.linear1.out_features, d, f"{base}.linear2")

    def add(a: _TV, b: _TV, name: str) -> _TV:
        return w.emit(T.ADD, (a, b), a.shape, name=f"{base}.{name}")

    if m.norm_first:
        x = add(x, attention(norm(x, "norm1")), "add1")
        return add(x, feed_forward(norm(x, "norm2")), "add2")
    x = norm(add(x, attention(x), "add1"), "norm1")
    return norm(add(x, feed_forward(x), "add2"), "norm2")


def _encoder_layer_module(w: _Walker, m, args, kwargs):
    x = _arg(args, kwargs, 0, "src")
    if type(x) is not _TV or len(x.shape) != 3:
        raise _NoRule("TransformerEncoderLayer of a non-3-D input")
    return _encoder_layer(w, m, x, _arg(args, kwargs, 1, "src_mask"), w.name)


def _encoder_module(w: _Walker, m, args, kwargs):
    x = _arg(args, kwargs, 0, "src")
    if type(x) is not _TV or len(x.shape) != 3:
        raise _NoRule("TransformerEncoder of a non-3-D input")
    mask = _arg(args, kwargs, 1, "mask")
    for i, layer in enumerate(m.layers):
        x = _encoder_layer(w, layer, x, mask, f"{w.name}.layers.{i}")
    if m.norm is not None:
        x = w.emit(T.LAYER_NORM, (x,), x.shape, name=f"{w.name}.norm")
    return x


def _einsum(w: _Walker, fn, args, kwargs):
    eq = args[0] if args else kwargs.get("equation")
    ops = list(args[1:])
    if len(ops) == 1 and isinstance(ops[0], (tuple, list)):
        ops = list(ops[0])
    if not isinstance(eq, str) or "..." in eq or not all(type(t) is _TV for t in ops):
        raise _NoRule("einsum form not covered")
    lhs, _, rhs = eq.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ops) or not rhs and "->" not in eq:
        raise _NoRule("implicit einsum output")
    size: dict[str, int] = {}
    for term, t in zip(terms, ops):
        if len(term) != len(t.shape):
            raise _ShapeError(f"einsum {eq!r}: operand {term!r} has {len(t.shape)} dimensions")
        for c, d in zip(term, t.shape):
            if size.setdefault(c, d) != d and d != 1 and size[c] != 1:
                raise _ShapeError(f"einsum {eq!r}: index {c!r} has sizes {size[c]} and {d}")
            size[c] = max(size[c], d)
    out = tuple(size[c] for c in rhs)
    if len(ops) == 1:  # a permutation (a copy), or a reduction over the dropped indices
        if sorted(rhs) == sorted(terms[0]):
            return w.emit(T.TRANSPOSE, (ops[0],), out,
                          slow=transpose_slow(ops[0].shape, [terms[0].index(c) for c in rhs]))
        return w.emit(T.REDUCE_MEAN, (ops[0],), out)
    if len(ops) != 2:
        raise _NoRule("einsum of more than two operands")
    a, b = terms
    batch = [c for c in rhs if c in a and c in b]
    m_idx = [c for c in rhs if c in a and c not in b]
    n_idx = [c for c in rhs if c in b and c not in a]
    k_idx = [c for c in a if c in b and c not in rhs]
    nb, m, k, n = (math.prod(size[c] for c in idx) for idx in (batch, m_idx, k_idx, n_idx))
    if not k_idx:  # an outer or element-wise product: no contraction
        return w.emit(T.MUL, tuple(ops), out)
    return w.emit(T.MATMUL, tuple(ops), out, in_shape=(nb, k, m, 1), ir_out=(nb, n, m, 1))


# ------------------------------------------------------------------------------------------------------
# registration

_reg(_MODULES, (nn.MultiheadAttention,), _mha_module)
_reg(_MODULES, (nn.TransformerEncoderLayer,), _encoder_layer_module)
_reg(_MODULES, (nn.TransformerEncoder,), _encoder_module)
_reg(_FUNCTIONS, (F.scaled_dot_product_attention,), _sdpa, T.MATMUL)
_reg(_FUNCTIONS, (torch.einsum,), _einsum, T.MATMUL)
