"""Multi-layer suites of attention-era blocks, built as the torch.fx front end traces their usual PyTorch code,
so the mapping model sees what a runtime fuses in them (ONNX Runtime's attention, LayerNorm, GELU and
MatMul + Add fusions; OpenVINO's): ``attention`` (q / k / v projections, head split, scores, softmax, context,
head merge, output projection), ``mlp`` (Linear - GELU - Linear), ``convnext`` (7x7 depthwise, channels-last
LayerNorm through transposes, two pointwise Linear layers with GELU, residual add) and ``window_attention``
(Swin's window partition by reshape / transpose, attention inside the windows, window reverse) and
``linear_bn`` (LeViT's Linear + BatchNorm over the tokens, which a runtime may fold into the Linear).
"""

from __future__ import annotations

import numpy as np

from ...ir import LayerType, Network
from .base import SuiteError
from .tokens import TokenGraph

__all__ = ["ATTENTION_STYLES", "CONVNEXT_SPATIAL", "CONVNEXT_CHANNELS", "WINDOWS", "MLP_RATIOS", "build_attention", "cost_attention",
           "build_mlp", "cost_mlp", "build_convnext", "cost_convnext", "build_window_attention",
           "cost_window_attention", "build_linear_bn", "cost_linear_bn"]

T = LayerType

#: ConvNeXt stage sizes (224 / 4 .. 224 / 32 and 384 inputs) and widths (ConvNeXt-T/S/B/L, Atto..Nano)
CONVNEXT_SPATIAL = [7, 12, 14, 24, 28, 48, 56, 96]
CONVNEXT_CHANNELS = [40, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024]
#: window sides of Swin (7), Swin V2 (8, 16) and MaxViT (7)
WINDOWS = [4, 7, 8, 12, 16]
#: MLP hidden width over the embedding
MLP_RATIOS = [2, 3, 4]


#: the ``attention`` suite's ``style`` option: ``sdpa`` (`F.scaled_dot_product_attention`, nn.MultiheadAttention:
#: no separate key transpose or scale layer), ``manual`` (``(q @ k.transpose(-2, -1)) * scale``, a Transpose and a
#: scalar Mul that ONNX Runtime folds into one FusedMatMul) or ``qkv`` (as timm's ViT and Swin write it: one fused
#: q / k / v projection, viewed as ``(..., L, 3, H, d)``, permuted to ``(3, ..., H, L, d)`` and picked ``qkv[i]``,
#: then scored as ``manual``: a 5-D transpose and picks along its leading axis, which a runtime may run in place)
ATTENTION_STYLES = ("sdpa", "manual", "qkv")


def _attend(g: TokenGraph, x: int, h: int, prefix: str = "", style: str = "sdpa") -> int:
    """Self-attention of token tensor ``x`` (``(..., L, E)``) with ``h`` heads: q / k / v projections, head
    split, ``q k^T`` (with the key transpose and the scale as layers of their own in the ``manual`` style),
    softmax, ``p v``, head merge, output projection."""
    E = g.shape(x)[-1]
    if E % h:
        raise SuiteError(f"{E} channels do not split into {h} heads")
    if style not in ATTENTION_STYLES:
        raise SuiteError(f"style must be one of {list(ATTENTION_STYLES)}, got {style!r}")
    if style == "qkv":
        q, k, v = g.fused_qkv(prefix, g.linear(f"{prefix}qkv", x, 3 * E), h)
    else:
        q, k, v = (g.split_heads(f"{prefix}{t}", g.linear(f"{prefix}{t}_proj", x, E), h) for t in ("q", "k", "v"))
    if style in ("manual", "qkv"):
        r = len(g.shape(k))
        kt = g.transpose(f"{prefix}k_t", k, (*range(r - 2), r - 1, r - 2))
        s = g.scale(f"{prefix}scale", g.matmul(f"{prefix}scores", q, kt, trans_b=False))
    else:
        s = g.matmul(f"{prefix}scores", q, k, trans_b=True)
    p = g.same(T.SOFTMAX, f"{prefix}softmax", s, axis=-1)
    o = g.merge_heads(f"{prefix}heads", g.matmul(f"{prefix}context", p, v, trans_b=False))
    return g.linear(f"{prefix}out_proj", o, E)


def _attend_cost(nb, L, E, h):
    """(ops, activation elements) of `_attend` on ``nb`` sequences of ``L`` tokens, ``E`` channels."""
    t = nb * L * E
    ops = 4 * 2 * t * E + 2 * 2 * nb * L * L * E + nb * h * L * L
    act = 4 * t + 3 * 2 * t + 2 * nb * h * L * L + t + 2 * t  # projections, splits, scores + softmax, context, merge
    return ops, act


def build_attention(c: dict) -> Network:
    """Multi-head self-attention over ``(1, L, H * d)`` tokens (``style``: `ATTENTION_STYLES`)."""
    g = TokenGraph("attention")
    h, L, d = int(c["h"]), int(c["l"]), int(c["d"])
    _attend(g, g.input("x", (1, L, h * d)), h, style=str(c.get("style", "sdpa")))
    return g.build()


def cost_attention(c):
    h, L, d = (np.asarray(c[k], dtype=np.float64) for k in ("h", "l", "d"))
    E = h * d
    ops, act = _attend_cost(1, L, E, h)
    manual = np.asarray(c.get("style", "sdpa")) == "manual"  # + the key transpose and the scale
    return ops + manual * h * L * L, act + L * E + manual * (L * E + h * L * L), 4 * E * E


def build_linear_bn(c: dict) -> Network:
    """LeViT's ``Linear`` (no bias) + ``BatchNorm1d`` over the tokens of ``(1, L, E)``: the Linear, the tokens
    flattened to ``(L, F)`` rows, BatchNorm, the rows viewed back as ``(1, L, F)`` (``reshape_as``)."""
    g = TokenGraph("linear_bn")
    L, E, F_ = int(c["l"]), int(c["e"]), int(c["f"])
    y = g.linear("fc", g.input("x", (1, L, E)), F_, bias=False)
    rows = g.layer(T.FLATTEN, "flatten", [y], (L, F_))
    g.reshape("reshape_as", g.same(T.BATCH_NORM, "bn", rows), (1, L, F_))
    return g.build()


def cost_linear_bn(c):
    L, E, F_ = (np.asarray(c[k], dtype=np.float64) for k in ("l", "e", "f"))
    return 2 * L * E * F_ + 2 * L * F_, L * (E + 4 * F_), E * F_ + 2 * F_


def build_mlp(c: dict) -> Network:
    """A transformer MLP block over ``(1, L, E)`` tokens: Linear to ``r * E``, GELU, Linear back."""
    g = TokenGraph("mlp")
    L, E, r = int(c["l"]), int(c["e"]), int(c["r"])
    y = g.same(T.GELU, "gelu", g.linear("fc1", g.input("x", (1, L, E)), r * E))
    g.linear("fc2", y, E)
    return g.build()


def cost_mlp(c):
    L, E, r = (np.asarray(c[k], dtype=np.float64) for k in ("l", "e", "r"))
    t = L * E
    return 4 * r * t * E + r * t, 2 * t + 2 * r * t, 2 * r * E * E


def build_convnext(c: dict) -> Network:
    """A ConvNeXt block: 7x7 depthwise conv, permute to channels-last, LayerNorm, Linear to 4C, GELU, Linear
    back, permute to NCHW, residual add."""
    g = TokenGraph("convnext")
    hw, ch = int(c["hw"]), int(c["c"])
    x = g.input("x", (1, ch, hw, hw))
    dw = g.b.conv("dwconv", x, ch, 7, padding=3, groups=ch)
    g.shapes[dw] = (1, ch, hw, hw)
    y = g.same(T.LAYER_NORM, "norm", g.transpose("to_last", dw, (0, 2, 3, 1)))
    y = g.linear("pwconv2", g.same(T.GELU, "gelu", g.linear("pwconv1", y, 4 * ch)), ch)
    g.same(T.ADD, "add", [x, g.transpose("to_first", y, (0, 3, 1, 2))])
    return g.build()


def cost_convnext(c):
    hw, ch = (np.asarray(c[k], dtype=np.float64) for k in ("hw", "c"))
    e = hw * hw * ch
    ops = 2 * 49 * e + e + 2 * 2 * 4 * e * ch + 4 * e + e
    return ops, 7 * e + 8 * e, 49 * ch + 8 * ch * ch


def build_window_attention(c: dict) -> Network:
    """Swin's window attention on a channels-last ``(1, nw * w, nw * w, H * d)`` map: partition into ``nw^2``
    windows of ``w x w`` tokens (reshape, transpose, reshape), attention in every window (``style``:
    `ATTENTION_STYLES`), window reverse."""
    g = TokenGraph("window_attention")
    nw, w, h, d = (int(c[k]) for k in ("nw", "w", "h", "d"))
    C, side = h * d, nw * w
    x = g.input("x", (1, side, side, C))
    y = g.reshape("partition_view", x, (1, nw, w, nw, w, C))
    y = g.transpose("partition", y, (0, 1, 3, 2, 4, 5))
    y = g.reshape("windows", y, (nw * nw, w * w, C))
    y = _attend(g, y, h, style=str(c.get("style", "sdpa")))
    y = g.reshape("reverse_view", y, (1, nw, nw, w, w, C))
    y = g.transpose("reverse", y, (0, 1, 3, 2, 4, 5))
    g.reshape("merge", y, (1, side, side, C))
    return g.build()


def cost_window_attention(c):
    nw, w, h, d = (np.asarray(c[k], dtype=np.float64) for k in ("nw", "w", "h", "d"))
    C = h * d
    t = nw * nw * w * w * C
    ops, act = _attend_cost(nw * nw, w * w, C, h)
    return ops, act + 7 * t, 4 * C * C

