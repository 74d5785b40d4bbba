"""Layers on token tensors, as the front ends trace them, and the single-layer suites of attention-era networks.

`TokenGraph` adds layers the way the torch.fx front end records them (see
``annette_torch/frontends/fx/rules/attention.py``): a fully connected layer over the rows of ``(..., L, E)`` has
IR shapes ``(prod(...), E, L, 1) -> (prod(...), F, L, 1)``, a batched product of two activations
``(batch, K, M, 1) -> (batch, N, M, 1)``, every other layer the NCHW fold of its tensor. Each layer also keeps its
real tensor shape (attribute ``shape``), which the exporters read, and where it matters how it is computed
(``trans_b`` of a ``q k^T`` product, ``perm`` of a transpose, ``axis`` of a softmax).

Micro-kernel suites here: ``linear`` (a fully connected layer over the rows of ``(1, L, E)``), ``matmul`` (the
scores ``q k^T`` and context ``p v`` products of attention), ``softmax`` over the last axis of attention scores,
``layernorm`` and ``gelu`` of token tensors ``(1, L, E)``, ``heads`` (the head split ``(1, L, E) -> (1, H, L, d)``
and merge as reshape + transpose), ``pick`` (q, k and v of a fused projection's output: a 5-D transpose and three
picks of its leading axis, which a runtime may run in place), ``interp`` (nearest / bilinear resize) and
``dilconv`` (dilated 3x3 convolutions).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ...ir import LayerType, Network, NetworkBuilder
from .base import SuiteError
from .weighted import build_conv, cost_conv

__all__ = ["TokenGraph", "HEADS", "TOKENS", "HEAD_DIMS", "EMBED", "HIDDEN", "DILATIONS", "DIL_SPATIAL",
           "MATMUL_KINDS", "HEAD_KINDS", "INTERP_MODES", "build_linear", "cost_linear", "build_matmul", "cost_matmul",
           "build_softmax", "cost_softmax", "build_layernorm", "cost_layernorm", "build_gelu", "cost_gelu",
           "build_heads", "cost_heads", "PICK_WINDOWS", "build_pick", "cost_pick", "build_interp", "cost_interp",
           "build_dilconv", "cost_dilconv"]

T = LayerType

#: attention heads (ViT-Ti 3, ViT-S 6, ViT-B 12, ViT-L 16)
HEADS = [1, 2, 3, 4, 6, 8, 12, 16]
#: token counts: ViT grids (196, 576, 784 = 28^2, 3136 = 56^2), Swin windows (49, 64, 144), powers of two
TOKENS = [16, 32, 49, 64, 128, 144, 196, 256, 384, 512, 576, 784, 1024, 2048, 3136, 4096]
#: dimensions per head
HEAD_DIMS = [16, 32, 48, 64, 80, 96, 128]
#: embedding widths of vision transformers, ConvNeXt and hybrid stages
EMBED = [32, 48, 64, 96, 128, 192, 256, 320, 384, 512, 768, 1024, 1280]
#: widths of MLP hidden layers besides EMBED (4 x 768, 4 x 1024)
HIDDEN = EMBED + [1536, 2048, 3072, 4096, 5120]
#: the ``matmul`` suite's products: ``q k^T`` (keys stored as tokens x dims) and ``p v``
MATMUL_KINDS = ["scores", "context"]
#: the ``heads`` suite's layout changes: ``(1, L, E) -> (1, H, L, d)`` and back
HEAD_KINDS = ["split", "merge"]
#: the ``pick`` suite's windows (attention over all tokens, Swin's and MaxViT's windows at its four stages)
PICK_WINDOWS = [1, 4, 16, 64]
#: the ``interp`` suite's modes (torch's ``F.interpolate`` names)
INTERP_MODES = ["nearest", "bilinear"]
#: the ``dilconv`` suite's dilations (DeepLabV3's ASPP rates 6 / 12 / 18, its output-stride-8 rates 2 / 4)
DILATIONS = [2, 3, 4, 6, 8, 12, 16, 18]
#: the ``dilconv`` suite's spatial sizes (segmentation feature maps at output stride 8 / 16 of 257..513 inputs)
DIL_SPATIAL = [8, 14, 16, 28, 32, 33, 56, 64, 65, 96, 128]


class TokenGraph:
    """A `NetworkBuilder` whose layers keep their real tensor shapes and follow the fx front end's IR shapes."""

    def __init__(self, name: str) -> None:
        self.b = NetworkBuilder(name)
        self.shapes: dict[int, tuple[int, ...]] = {}

    def shape(self, x: int) -> tuple[int, ...]:
        """The real tensor shape of layer ``x``'s output."""
        return self.shapes[x]

    def layer(self, t: LayerType, name: str, inputs: Sequence[int], shape: Sequence[int],
              in_shape: Sequence[int] | None = None, ir_out: Sequence[int] | None = None, **attrs: object) -> int:
        """A layer of output tensor ``shape`` (IR output ``ir_out`` when the fold differs), read as ``in_shape``
        (default: its first input's tensor)."""
        shape = tuple(int(v) for v in shape)
        if in_shape is None and inputs:
            in_shape = self.shapes[inputs[0]]
        idx = self.b.add(t, name, inputs, shape if ir_out is None else ir_out, in_shape=in_shape, shape=shape,
                         **attrs)
        self.shapes[idx] = shape
        return idx

    def input(self, name: str, shape: Sequence[int]) -> int:
        return self.layer(T.INPUT, name, [], shape)

    def same(self, t: LayerType, name: str, inputs: int | Sequence[int], **attrs: object) -> int:
        """A layer whose output has its first input's shape (activations, LayerNorm, softmax, adds)."""
        ins = [inputs] if isinstance(inputs, (int, np.integer)) else list(inputs)
        return self.layer(t, name, ins, self.shapes[ins[0]], **attrs)

    def linear(self, name: str, x: int, f: int, bias: bool = True) -> int:
        """A fully connected layer over the last axis (``nn.Linear`` on a token tensor)."""
        s = self.shapes[x]
        nb = math.prod(s[:-2])
        extra = {} if bias else {"bias": False}
        return self.layer(T.FULLY_CONNECTED, name, [x], s[:-1] + (f,), in_shape=(nb, s[-1], s[-2], 1),
                          ir_out=(nb, f, s[-2], 1), **extra)

    def matmul(self, name: str, a: int, b: int, trans_b: bool) -> int:
        """``a @ b`` (``a @ b^T`` over the last two axes when ``trans_b``) of two activations."""
        sa, sb = self.shapes[a], self.shapes[b]
        k, m = sa[-1], sa[-2]
        kb, n = (sb[-1], sb[-2]) if trans_b else (sb[-2], sb[-1])
        if kb != k or tuple(sa[:-2]) != tuple(sb[:-2]):
            raise SuiteError(f"layer {name!r}: {list(sa)} and {list(sb)} do not multiply")
        batch = tuple(sa[:-2])
        nb = math.prod(batch)
        return self.layer(T.MATMUL, name, [a, b], batch + (m, n), in_shape=(nb, k, m, 1), ir_out=(nb, n, m, 1),
                          trans_b=bool(trans_b))

    def scale(self, name: str, x: int) -> int:
        """``x * scale`` with a scalar constant (a one-input ``Mul``), as ``attn * self.scale`` traces."""
        return self.same(T.MUL, name, x, scalar=True)

    def reshape(self, name: str, x: int, shape: Sequence[int]) -> int:
        if math.prod(shape) != math.prod(self.shapes[x]):
            raise SuiteError(f"layer {name!r}: cannot view {list(self.shapes[x])} as {list(shape)}")
        return self.layer(T.RESHAPE, name, [x], shape)

    def transpose(self, name: str, x: int, perm: Sequence[int]) -> int:
        s = self.shapes[x]
        return self.layer(T.TRANSPOSE, name, [x], tuple(s[p] for p in perm), perm=tuple(int(p) for p in perm))

    def pick(self, name: str, x: int, index: int) -> int:
        """Entry ``index`` of ``x``'s leading axis (``qkv[index]``): a ``Pick`` without that axis, as traced."""
        return self.layer(T.PICK, name, [x], self.shapes[x][1:], index=int(index))

    def fused_qkv(self, prefix: str, x: int, h: int) -> tuple[int, int, int]:
        """q, k and v of a fused projection's output ``(..., L, 3 E)`` as timm writes them: viewed
        ``(..., L, 3, h, E / h)``, permuted to ``(3, ..., h, L, E / h)`` and picked ``qkv[i]``."""
        *lead, L, E3 = self.shapes[x]
        r = len(lead)
        qkv = self.reshape(f"{prefix}qkv_view", x, (*lead, L, 3, h, E3 // (3 * h)))
        qkv = self.transpose(f"{prefix}qkv_heads", qkv, (r + 1, *range(r), r + 2, r, r + 3))
        q, k, v = (self.pick(f"{prefix}{t}", qkv, i) for i, t in enumerate("qkv"))
        return q, k, v

    def split_heads(self, name: str, x: int, h: int) -> int:
        """``(..., L, E) -> (..., H, L, E / H)``: a reshape and a transpose (a copy)."""
        *lead, L, E = self.shapes[x]
        r = len(lead)
        y = self.reshape(f"{name}_split", x, (*lead, L, h, E // h))
        return self.transpose(f"{name}_heads", y, (*range(r), r + 1, r, r + 2))

    def merge_heads(self, name: str, x: int) -> int:
        """``(..., H, L, d) -> (..., L, H * d)``: a transpose (a copy) and a reshape."""
        *lead, H, L, d = self.shapes[x]
        r = len(lead)
        y = self.transpose(f"{name}_transpose", x, (*range(r), r + 1, r, r + 2))
        return self.reshape(f"{name}_merge", y, (*lead, L, H * d))

    def build(self) -> Network:
        return self.b.build()


def _kind(c: dict, key: str, allowed: Sequence[str]) -> str:
    v = str(c[key])
    if v not in allowed:
        raise SuiteError(f"{key} must be one of {list(allowed)}, got {v!r}")
    return v


def build_linear(c: dict) -> Network:
    """A fully connected layer over the rows of a token tensor ``(1, L, E) -> (1, L, F)`` (a projection of
    attention, a layer of an MLP block)."""
    g = TokenGraph("linear")
    g.linear("fc", g.input("x", (1, int(c["l"]), int(c["e"]))), int(c["f"]))
    return g.build()


def cost_linear(c):
    L, E, F_ = (np.asarray(c[k], dtype=np.float64) for k in ("l", "e", "f"))
    return 2 * L * E * F_, L * (E + F_), E * F_


def _lead(c: dict) -> tuple[int, ...]:
    """Leading axes of an attention tensor: ``(1,)``, or ``(windows,)`` for the option ``windows`` > 1 (window
    attention batches its windows: Swin's (64 windows, heads, 49, 32) products and softmax)."""
    w = int(c.get("windows", 1))
    if w < 1:
        raise SuiteError(f"windows must be >= 1, got {w}")
    return (w,)


def _windows(c) -> np.ndarray | float:
    return np.asarray(c["windows"], dtype=np.float64) if "windows" in c else 1.0


def build_matmul(c: dict) -> Network:
    """One head-batched product of attention: ``scores = q k^T`` ((1, H, L, d) x (1, H, S, d) -> (1, H, L, S)) or
    ``context = p v`` ((1, H, L, S) x (1, H, S, d) -> (1, H, L, d)); with the option ``windows``, that many
    windows' products in one (leading axis ``windows`` instead of 1)."""
    g = TokenGraph("matmul")
    h, L, S, d = (int(c[k]) for k in ("h", "l", "s", "d"))
    b = _lead(c)
    if _kind(c, "kind", MATMUL_KINDS) == "scores":
        g.matmul("scores", g.input("q", (*b, h, L, d)), g.input("k", (*b, h, S, d)), trans_b=True)
    else:
        g.matmul("context", g.input("p", (*b, h, L, S)), g.input("v", (*b, h, S, d)), trans_b=False)
    return g.build()


def cost_matmul(c):
    h, L, S, d = (np.asarray(c[k], dtype=np.float64) * (_windows(c) if k == "h" else 1.0)
                  for k in ("h", "l", "s", "d"))
    scores = np.asarray(c["kind"]) == "scores"
    out = np.where(scores, h * L * S, h * L * d)
    ins = np.where(scores, h * (L + S) * d, h * (L * S + S * d))
    return 2 * h * L * S * d, ins + out, 0 * out


def build_softmax(c: dict) -> Network:
    """Softmax over the last axis of attention scores ``(1, H, L, S)`` (``(windows, H, L, S)`` with the option)."""
    g = TokenGraph("softmax")
    g.same(T.SOFTMAX, "softmax", g.input("x", (*_lead(c), int(c["h"]), int(c["l"]), int(c["s"]))), axis=-1)
    return g.build()


def cost_softmax(c):
    e = np.asarray(c["h"], dtype=np.float64) * c["l"] * c["s"] * _windows(c)
    return e, 2 * e, 0 * e


def build_layernorm(c: dict) -> Network:
    """LayerNorm over the channels of a token tensor ``(1, L, E)``."""
    g = TokenGraph("layernorm")
    g.same(T.LAYER_NORM, "ln", g.input("x", (1, int(c["l"]), int(c["e"]))))
    return g.build()


def cost_layernorm(c):
    e = np.asarray(c["l"], dtype=np.float64) * c["e"]
    return e, 2 * e, 0 * e


def build_gelu(c: dict) -> Network:
    """GELU (exact, erf form) of a token tensor ``(1, L, E)``, as between the two layers of an MLP block."""
    g = TokenGraph("gelu")
    g.same(T.GELU, "gelu", g.input("x", (1, int(c["l"]), int(c["e"]))))
    return g.build()


cost_gelu = cost_layernorm


def build_heads(c: dict) -> Network:
    """The head split ``(1, L, H * d) -> (1, L, H, d) -> (1, H, L, d)`` or merge (the reverse)."""
    g = TokenGraph("heads")
    h, L, d = int(c["h"]), int(c["l"]), int(c["d"])
    if _kind(c, "kind", HEAD_KINDS) == "split":
        g.split_heads("x", g.input("x", (1, L, h * d)), h)
    else:
        g.merge_heads("x", g.input("x", (1, h, L, d)))
    return g.build()


def cost_heads(c):
    e = np.asarray(c["h"], dtype=np.float64) * c["l"] * c["d"]
    return 0 * e, 3 * e, 0 * e


def build_pick(c: dict) -> Network:
    """q, k and v of a fused projection ``(w, l, 3 h d)``: viewed ``(w, l, 3, h, d)``, permuted to
    ``(3, w, h, l, d)`` and picked ``qkv[i]`` (``w`` windows of ``l`` tokens), as timm's ViT and Swin write it."""
    g = TokenGraph("pick")
    h, L, d, w = int(c["h"]), int(c["l"]), int(c["d"]), int(c["w"])
    g.fused_qkv("", g.input("x", (w, L, 3 * h * d)), h)
    return g.build()


def cost_pick(c):
    e = 3 * np.asarray(c["w"], dtype=np.float64) * c["l"] * c["h"] * c["d"]
    return 0 * e, 4 * e, 0 * e  # the input, its view, the transpose and the three picks


def build_interp(c: dict) -> Network:
    """Nearest or bilinear upsampling of an NCHW tensor by 2 or 4 (``F.interpolate``); behind a 1x1
    depthwise conv with ``lead="dw1"`` (a runtime's blocked layout: `annette_torch.mapping.layout`)."""
    from .layers import add_lead

    b = NetworkBuilder("interp")
    n, ch, h, w = 1, int(c["c"]), int(c["hw"]), int(c["hw"])
    x = add_lead(b, c, b.input("x", (n, ch, h, w)))
    sc = int(c["scale"])
    b.add(T.RESIZE, "resize", [x], (n, ch, h * sc, w * sc), mode=_kind(c, "mode", INTERP_MODES))
    return b.build()


def cost_interp(c):
    e = np.asarray(c["c"], dtype=np.float64) * c["hw"] ** 2
    return e * c["scale"] ** 2, e * (1 + c["scale"] ** 2), 0 * e


def build_dilconv(c: dict) -> Network:
    """A dilated 3x3 convolution with "same" padding (``d`` per side): DeepLab's atrous convolutions."""
    return build_conv({"h": c["hw"], "w": c["hw"], "c": c["c"], "f": c["f"], "k": 3, "s": 1, "d": c["d"]})


def cost_dilconv(c):
    return cost_conv({"h": c["hw"], "w": c["hw"], "c": c["c"], "f": c["f"], "k": 3, "s": 1, "d": c["d"]})
