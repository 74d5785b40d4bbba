"""Architectures of the 2020s written from their papers: vision transformers, windowed and multi-axis
attention, ConvNeXt, hybrids, EfficientNetV2 and segmentation networks with dilated convolutions and resize.

Same conventions as :mod:`annette_torch.zoo`: plain ``torch.nn``, random weights, eval mode, standard
published configurations as default arguments. ``MODERN`` maps a name to its constructor and
``MODERN_INPUT_SHAPES`` gives each name's default input shape. Most constructors take ``img_size`` so that
tests can run them at a reduced input (architectures whose token grid or attention bias is tied to the
input size need it; parameter counts below are for the default size).

The networks deliberately use the forms a front end meets in the wild: ``nn.MultiheadAttention``
(``vit_ti16``), attention written by hand (``vit_s16``, ``efficientformer_l1``, ``mobilevit_s``, and
``levit_128s`` with strided queries and BatchNorm1d on tokens), ``F.scaled_dot_product_attention``
(``vit_b16``), ``torch.einsum`` batched products (``maxvit_t``), channels-last LayerNorm via ``permute``
(``convnext_t``, ``swin_t``), GELU exact and tanh-approximated (``efficientformer_l1``'s attention MLP),
GroupNorm (``poolformer_s12``), dilated convolutions and bilinear resize (``deeplabv3_resnet50``,
``segformer_b0``), and stochastic depth both as a ``DropPath`` module and as the free function
``stochastic_depth(x, p, training)`` (``swin_t``, ``efficientnet_v2_s``, ``maxvit_t``), identity in eval.
``stochastic_depth`` and ``shifted_window_attention`` are registered with ``torch.fx.wrap`` (as the reference
library does), so ``torch.fx`` records them as single call nodes that a front end must handle without looking
inside.

Parameter counts (paper figure -> this module; 1000 classes unless noted):

==================== ============================================ =========== ==============
name                 paper                                        paper       here
==================== ============================================ =========== ==============
vit_ti16             DeiT-Ti (Touvron et al. 2021)                5M (5.72M)  5,717,416
vit_s16              DeiT-S (Touvron et al. 2021)                 22M         22,050,664
vit_b16              ViT-B/16 (Dosovitskiy et al. 2021)           86M         86,567,656
swin_t               Swin-T (Liu et al. 2021)                     28M         28,288,354
convnext_t           ConvNeXt-T (Liu et al. 2022)                 28.6M       28,589,128
maxvit_t             MaxViT-T (Tu et al. 2022)                    31M         30,919,624
mobilevit_s          MobileViT-S (Mehta & Rastegari 2022)         5.6M        5,578,632
efficientformer_l1   EfficientFormer-L1 (Li et al. 2022)          12.3M       12,289,928
levit_128s           LeViT-128S (Graham et al. 2021)              7.8M        7,777,058
efficientnet_v2_s    EfficientNetV2-S (Tan & Le 2021)             22M (21.5M) 21,458,488
deeplabv3_resnet50   DeepLabV3, ResNet-50, OS 16 (Chen et al.     39.6M [1]   39,638,869
                     2017), 21 classes (VOC)
poolformer_s12       PoolFormer-S12 (Yu et al. 2022)              12M         11,915,176
segformer_b0         SegFormer-B0 (Xie et al. 2021), 150 classes  3.8M        3,752,694
==================== ============================================ =========== ==============

Figures in parentheses are the reference implementations' exact counts where the paper rounds.
[1] The DeepLabV3 paper states no parameter count; 39.6M is the widely used reference implementation
(ResNet-50 backbone, ASPP, 3x3 head conv, no auxiliary head), which dilation rates do not change.

Fidelity notes: DeiT configurations without the distillation token; ``efficientformer_l1`` and
``levit_128s`` keep their distillation heads (their paper counts include them; inference averages the two
heads); ``maxvit_t`` follows the reference implementation's MBConv (pre-norm BatchNorm, SE on the expanded
width, 3x3 avg-pool shortcut when striding) but scales attention by head_dim^-0.5 as the paper does;
``segformer_b0`` upsamples its 1/4-resolution logits bilinearly to the input size.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from .zoo_blocks import ConvBNAct, SqueezeExcite

__all__ = ["MODERN", "MODERN_INPUT_SHAPES", "stochastic_depth", "shifted_window_attention"]


# ---------------------------------------------------------------------------------------------- helpers
class _Permute(nn.Module):
    """``x.permute(*dims)`` as a module, for use inside ``nn.Sequential``."""

    def __init__(self, *dims: int) -> None:
        super().__init__()
        self.dims = dims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(*self.dims)


def stochastic_depth(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Drop whole residual branches per sample with probability ``p`` (Huang et al. 2016); identity in eval."""
    if not training or p == 0.0:
        return x
    keep = 1.0 - p
    mask = x.new_empty((x.shape[0],) + (1,) * (x.dim() - 1)).bernoulli_(keep)
    return x * mask / keep


torch.fx.wrap("stochastic_depth")


class DropPath(nn.Module):
    """Stochastic depth as a module (ConvNeXt style): per-sample branch drop in training, identity in eval."""

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = 1.0 - self.p
        mask = x.new_empty((x.shape[0],) + (1,) * (x.dim() - 1)).bernoulli_(keep)
        return x * mask / keep


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an NCHW tensor, written as permute -> layer_norm -> permute."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class Mlp(nn.Module):
    """Transformer feed-forward: Linear -> activation -> Linear."""

    def __init__(self, dim: int, hidden: int, act: type[nn.Module] = nn.GELU) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = act()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def _finish(m: nn.Module) -> nn.Module:
    """Random initialisation that keeps activations finite through deep nets (as zoo.py's), eval mode."""
    for mod in m.modules():
        if isinstance(mod, nn.Conv2d):
            nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(mod, nn.Linear):
            nn.init.normal_(mod.weight, 0.0, 0.01)
        else:
            continue
        if mod.bias is not None:
            nn.init.zeros_(mod.bias)
    return m.eval()


def _init_transformer(m: nn.Module) -> nn.Module:
    """`_finish` plus truncated normal (std 0.02) on tokens, position embeddings and bias tables."""
    _finish(m)
    for name, p in m.named_parameters():
        if any(k in name for k in ("pos_embed", "cls_token", "relative_position_bias_table", "attention_biases")):
            nn.init.trunc_normal_(p, std=0.02)
    return m


def _dpr(total: float, n: int) -> list[float]:
    """Stochastic-depth probabilities rising linearly from 0 to ``total`` over ``n`` blocks."""
    return [total * i / max(n - 1, 1) for i in range(n)]


# ------------------------------------------------------------------------------------- ViT / DeiT
# Dosovitskiy et al., "An Image is Worth 16x16 Words" (2021); Touvron et al., "Training data-efficient
# image transformers (DeiT)" (2021). Pre-norm blocks, class token, learned position embedding.

class MHAAttention(nn.Module):
    """Self-attention through ``nn.MultiheadAttention`` (batch_first)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mha(x, x, x, need_weights=False)[0]


class ManualAttention(nn.Module):
    """Self-attention written by hand: ``softmax(q @ k^T * scale) @ v``."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class SDPAttention(ManualAttention):
    """Self-attention through ``F.scaled_dot_product_attention``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


_ATTENTION: dict[str, type[nn.Module]] = {"mha": MHAAttention, "manual": ManualAttention, "sdpa": SDPAttention}


class ViTBlock(nn.Module):
    """Pre-norm transformer encoder block: x + Attn(LN(x)), x + MLP(LN(x))."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float, attention: str, drop_path: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = _ATTENTION[attention](dim, heads)
        self.drop_path = DropPath(drop_path)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x)))
        return x + self.drop_path(self.mlp(self.norm2(x)))


class VisionTransformer(nn.Module):
    def __init__(self, dim: int, depth: int, heads: int, attention: str, img_size: int = 224, patch: int = 16,
                 mlp_ratio: float = 4.0, num_classes: int = 1000, drop_path: float = 0.1) -> None:
        super().__init__()
        n_tokens = (img_size // patch) ** 2
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n_tokens + 1, dim))
        self.blocks = nn.Sequential(*[ViTBlock(dim, heads, mlp_ratio, attention, p) for p in _dpr(drop_path, depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def vit_ti16(num_classes: int = 1000, img_size: int = 224) -> nn.Module:
    """ViT-Ti/16 (DeiT-Tiny): 12 blocks, width 192, 3 heads; attention via nn.MultiheadAttention."""
    return _init_transformer(VisionTransformer(192, 12, 3, "mha", img_size, num_classes=num_classes, drop_path=0.1))


def vit_s16(num_classes: int = 1000, img_size: int = 224) -> nn.Module:
    """ViT-S/16 (DeiT-Small): 12 blocks, width 384, 6 heads; attention written by hand."""
    return _init_transformer(VisionTransformer(384, 12, 6, "manual", img_size, num_classes=num_classes,
                                               drop_path=0.1))


def vit_b16(num_classes: int = 1000, img_size: int = 224) -> nn.Module:
    """ViT-B/16: 12 blocks, width 768, 12 heads; attention via F.scaled_dot_product_attention."""
    return _init_transformer(VisionTransformer(768, 12, 12, "sdpa", img_size, num_classes=num_classes,
                                               drop_path=0.1))


# ------------------------------------------------------------------------------------------------ Swin
# Liu et al., "Swin Transformer: Hierarchical Vision Transformer using Shifted Windows" (2021).

def shifted_window_attention(x: torch.Tensor, qkv_weight: torch.Tensor, proj_weight: torch.Tensor,
                             relative_position_bias: torch.Tensor, window_size: list[int], num_heads: int,
                             shift_size: list[int], qkv_bias: torch.Tensor, proj_bias: torch.Tensor
                             ) -> torch.Tensor:
    """(Shifted) window multi-head self-attention on an NHWC tensor: pad to whole windows, roll by the
    shift, partition into windows (reshape/permute), attention with relative position bias and, when
    shifted, the mask that keeps rolled-in regions apart; then reverse every step.

    Hard to trace: ``torch.fx.wrap`` makes this one opaque call node, and inside it the padding, the shift
    (dropped when a window covers the whole map) and the mask depend on the input's concrete shape (Python
    ``if`` and slice assignment on shape values), so it cannot be traced symbolically either."""
    B, H, W, C = x.shape
    pad_r = (window_size[1] - W % window_size[1]) % window_size[1]
    pad_b = (window_size[0] - H % window_size[0]) % window_size[0]
    x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
    _, pad_H, pad_W, _ = x.shape
    shift_size = list(shift_size)
    if window_size[0] >= pad_H:
        shift_size[0] = 0
    if window_size[1] >= pad_W:
        shift_size[1] = 0
    if sum(shift_size) > 0:
        x = torch.roll(x, shifts=(-shift_size[0], -shift_size[1]), dims=(1, 2))
    ws0, ws1 = window_size
    num_windows = (pad_H // ws0) * (pad_W // ws1)
    x = x.view(B, pad_H // ws0, ws0, pad_W // ws1, ws1, C)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(B * num_windows, ws0 * ws1, C)

    qkv = F.linear(x, qkv_weight, qkv_bias)
    qkv = qkv.reshape(x.size(0), x.size(1), 3, num_heads, C // num_heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    q = q * (C // num_heads) ** -0.5
    attn = q.matmul(k.transpose(-2, -1)) + relative_position_bias

    if sum(shift_size) > 0:
        mask = x.new_zeros((pad_H, pad_W))
        h_slices = ((0, -ws0), (-ws0, -shift_size[0]), (-shift_size[0], None))
        w_slices = ((0, -ws1), (-ws1, -shift_size[1]), (-shift_size[1], None))
        count = 0
        for h in h_slices:
            for w in w_slices:
                mask[h[0]:h[1], w[0]:w[1]] = count
                count += 1
        mask = mask.view(pad_H // ws0, ws0, pad_W // ws1, ws1).permute(0, 2, 1, 3).reshape(num_windows, ws0 * ws1)
        mask = mask.unsqueeze(1) - mask.unsqueeze(2)
        mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
        attn = attn.view(x.size(0) // num_windows, num_windows, num_heads, x.size(1), x.size(1))
        attn = attn + mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, num_heads, x.size(1), x.size(1))

    attn = F.softmax(attn, dim=-1)
    x = attn.matmul(v).transpose(1, 2).reshape(x.size(0), x.size(1), C)
    x = F.linear(x, proj_weight, proj_bias)
    x = x.view(B, pad_H // ws0, pad_W // ws1, ws0, ws1, C)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(B, pad_H, pad_W, C)
    if sum(shift_size) > 0:
        x = torch.roll(x, shifts=(shift_size[0], shift_size[1]), dims=(1, 2))
    return x[:, :H, :W, :].contiguous()


torch.fx.wrap("shifted_window_attention")


def _relative_position_index(wh: int, ww: int) -> torch.Tensor:
    """Index into a ((2wh-1)(2ww-1), heads) bias table for every (query, key) pair of a wh x ww window."""
    coords = torch.stack(torch.meshgrid(torch.arange(wh), torch.arange(ww), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0)
    rel[:, :, 0] += wh - 1
    rel[:, :, 1] += ww - 1
    rel[:, :, 0] *= 2 * ww - 1
    return rel.sum(-1).flatten()


class ShiftedWindowAttention(nn.Module):
    """Parameters of one (shifted) window attention; the computation is :func:`shifted_window_attention`."""

    def __init__(self, dim: int, window: int, shift: int, heads: int) -> None:
        super().__init__()
        self.window_size = [window, window]
        self.shift_size = [shift, shift]
        self.num_heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * window - 1) ** 2, heads))
        self.register_buffer("relative_position_index", _relative_position_index(window, window), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.window_size[0] * self.window_size[1]
        bias = self.relative_position_bias_table[self.relative_position_index]
        bias = bias.view(n, n, -1).permute(2, 0, 1).contiguous().unsqueeze(0)
        return shifted_window_attention(x, self.qkv.weight, self.proj.weight, bias, self.window_size,
                                        self.num_heads, self.shift_size, self.qkv.bias, self.proj.bias)


class SwinBlock(nn.Module):
    def __init__(self, dim: int, heads: int, window: int, shift: int, drop_path: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = ShiftedWindowAttention(dim, window, shift, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, 4 * dim)
        self.p = drop_path

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + stochastic_depth(self.attn(self.norm1(x)), self.p, self.training)
        return x + stochastic_depth(self.mlp(self.norm2(x)), self.p, self.training)


class PatchMerging(nn.Module):
    """2x2 neighbourhood concatenation (NHWC), LayerNorm, linear reduction 4C -> 2C."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4 * dim)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        H, W = x.shape[1], x.shape[2]
        x = F.pad(x, (0, 0, 0, W % 2, 0, H % 2))
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], dim=-1)
        return self.reduction(self.norm(x))


class SwinTransformer(nn.Module):
    def __init__(self, dim: int = 96, depths: Sequence[int] = (2, 2, 6, 2), heads: Sequence[int] = (3, 6, 12, 24),
                 window: int = 7, num_classes: int = 1000, drop_path: float = 0.2) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Sequential(nn.Conv2d(3, dim, 4, 4), _Permute(0, 2, 3, 1), nn.LayerNorm(dim))]
        probs = iter(_dpr(drop_path, sum(depths)))
        for i, (d, h) in enumerate(zip(depths, heads)):
            width = dim * 2 ** i
            layers.append(nn.Sequential(*[SwinBlock(width, h, window, 0 if j % 2 == 0 else window // 2, next(probs))
                                          for j in range(d)]))
            if i < len(depths) - 1:
                layers.append(PatchMerging(width))
        self.features = nn.Sequential(*layers)
        width = dim * 2 ** (len(depths) - 1)
        self.norm = nn.LayerNorm(width)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.features(x)).permute(0, 3, 1, 2)
        return self.head(torch.flatten(self.pool(x), 1))


def swin_t(num_classes: int = 1000) -> nn.Module:
    """Swin-T: C=96, depths (2, 2, 6, 2), heads (3, 6, 12, 24), 7x7 windows, any input size (padded)."""
    return _init_transformer(SwinTransformer(num_classes=num_classes))


# -------------------------------------------------------------------------------------------- ConvNeXt
# Liu et al., "A ConvNet for the 2020s" (2022).

class ConvNeXtBlock(nn.Module):
    """7x7 depthwise -> channels-last LayerNorm -> Linear 4C -> GELU -> Linear C -> layer scale -> DropPath."""

    def __init__(self, dim: int, drop_path: float, layer_scale: float = 1e-6) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), layer_scale))
        self.drop_path = DropPath(drop_path)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pwconv2(self.act(self.pwconv1(self.norm(y))))
        y = (self.gamma * y).permute(0, 3, 1, 2)
        return x + self.drop_path(y)


class ConvNeXt(nn.Module):
    def __init__(self, depths: Sequence[int] = (3, 3, 9, 3), dims: Sequence[int] = (96, 192, 384, 768),
                 num_classes: int = 1000, drop_path: float = 0.1) -> None:
        super().__init__()
        probs = iter(_dpr(drop_path, sum(depths)))
        layers: list[nn.Module] = [nn.Sequential(nn.Conv2d(3, dims[0], 4, 4), LayerNorm2d(dims[0], eps=1e-6))]
        for i, (d, w) in enumerate(zip(depths, dims)):
            if i > 0:
                layers.append(nn.Sequential(LayerNorm2d(dims[i - 1], eps=1e-6), nn.Conv2d(dims[i - 1], w, 2, 2)))
            layers.append(nn.Sequential(*[ConvNeXtBlock(w, next(probs)) for _ in range(d)]))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
        self.head = nn.Linear(dims[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(torch.flatten(self.pool(self.features(x)), 1)))


def convnext_t(num_classes: int = 1000) -> nn.Module:
    """ConvNeXt-T: depths (3, 3, 9, 3), widths (96, 192, 384, 768), drop path 0.1."""
    return _init_transformer(ConvNeXt(num_classes=num_classes))


# ---------------------------------------------------------------------------------------------- MaxViT
# Tu et al., "MaxViT: Multi-Axis Vision Transformer" (2022). Each block: MBConv, block (window) attention,
# grid attention; relative position bias; products written with torch.einsum.

class MaxViTMBConv(nn.Module):
    """Pre-norm MBConv with squeeze-excitation; shortcut is 3x3 avg pool + 1x1 conv when the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int, drop_path: float, expand: int = 4,
                 squeeze: float = 0.25) -> None:
        super().__init__()
        mid = cout * expand
        self.proj: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            pool: list[nn.Module] = [nn.AvgPool2d(3, stride, 1)] if stride == 2 else []
            self.proj = nn.Sequential(*pool, nn.Conv2d(cin, cout, 1))
        self.layers = nn.Sequential(
            nn.BatchNorm2d(cin, eps=1e-3),
            ConvBNAct(cin, mid, 1, act=nn.GELU, eps=1e-3),
            ConvBNAct(mid, mid, 3, stride, groups=mid, act=nn.GELU, eps=1e-3),
            SqueezeExcite(mid, int(cout * squeeze), act=nn.SiLU),
            nn.Conv2d(mid, cout, 1))
        self.p = drop_path

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x) + stochastic_depth(self.layers(x), self.p, self.training)


class RelPosAttention(nn.Module):
    """Multi-head attention over the tokens of each partition, with a learned relative position bias."""

    def __init__(self, dim: int, head_dim: int, partition: int) -> None:
        super().__init__()
        self.heads = dim // head_dim
        self.head_dim = head_dim
        self.scale = head_dim ** -0.5
        self.n = partition * partition
        self.to_qkv = nn.Linear(dim, 3 * dim)
        self.merge = nn.Linear(dim, dim)
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * partition - 1) ** 2, self.heads))
        self.register_buffer("relative_position_index", _relative_position_index(partition, partition),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, G, P, D = x.shape
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q = q.reshape(B, G, P, self.heads, self.head_dim).permute(0, 1, 3, 2, 4)
        k = k.reshape(B, G, P, self.heads, self.head_dim).permute(0, 1, 3, 2, 4)
        v = v.reshape(B, G, P, self.heads, self.head_dim).permute(0, 1, 3, 2, 4)
        bias = self.relative_position_bias_table[self.relative_position_index]
        bias = bias.view(self.n, self.n, -1).permute(2, 0, 1).unsqueeze(0)
        attn = torch.einsum("bghid,bghjd->bghij", q * self.scale, k) + bias
        attn = F.softmax(attn, dim=-1)
        out = torch.einsum("bghij,bghjd->bghid", attn, v)
        return self.merge(out.permute(0, 1, 3, 2, 4).reshape(B, G, P, D))


class PartitionAttention(nn.Module):
    """Block (window) or grid attention + MLP on an NCHW map partitioned into P x P windows or a P x P grid."""

    def __init__(self, dim: int, head_dim: int, partition: int, grid: bool, drop_path: float) -> None:
        super().__init__()
        self.partition = partition
        self.grid = grid
        self.norm1 = nn.LayerNorm(dim)
        self.attn = RelPosAttention(dim, head_dim, partition)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, 4 * dim)
        self.p = drop_path

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        P = self.partition
        if self.grid:  # P x P grid of stride H/P: tokens of one group are H/P apart
            gh, gw = P, P
            x = x.reshape(B, C, P, H // P, P, W // P).permute(0, 3, 5, 2, 4, 1)
        else:          # P x P windows
            gh, gw = H // P, W // P
            x = x.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
        x = x.reshape(B, (H // P) * (W // P), P * P, C)
        x = x + stochastic_depth(self.attn(self.norm1(x)), self.p, self.training)
        x = x + stochastic_depth(self.mlp(self.norm2(x)), self.p, self.training)
        if self.grid:
            x = x.reshape(B, H // P, W // P, gh, gw, C).permute(0, 5, 3, 1, 4, 2)
        else:
            x = x.reshape(B, gh, gw, P, P, C).permute(0, 5, 1, 3, 2, 4)
        return x.reshape(B, C, H, W)


class MaxViT(nn.Module):
    def __init__(self, stem: int = 64, widths: Sequence[int] = (64, 128, 256, 512),
                 depths: Sequence[int] = (2, 2, 5, 2), head_dim: int = 32, partition: int = 7,
                 num_classes: int = 1000, drop_path: float = 0.2) -> None:
        super().__init__()
        self.stem = nn.Sequential(ConvBNAct(3, stem, 3, 2, act=nn.GELU, eps=1e-3), nn.Conv2d(stem, stem, 3, 1, 1))
        probs = iter(_dpr(drop_path, sum(depths)))
        blocks: list[nn.Module] = []
        cin = stem
        for w, d in zip(widths, depths):
            for j in range(d):
                p = next(probs)
                blocks.append(nn.Sequential(MaxViTMBConv(cin, w, 2 if j == 0 else 1, p),
                                            PartitionAttention(w, head_dim, partition, False, p),
                                            PartitionAttention(w, head_dim, partition, True, p)))
                cin = w
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Sequential(nn.LayerNorm(cin), nn.Linear(cin, cin), nn.Tanh(),
                                  nn.Linear(cin, num_classes, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


def maxvit_t(num_classes: int = 1000, partition: int = 7) -> nn.Module:
    """MaxViT-T: widths (64, 128, 256, 512), depths (2, 2, 5, 2), head dim 32, 7x7 partitions (input 224)."""
    return _init_transformer(MaxViT(partition=partition, num_classes=num_classes))


# ------------------------------------------------------------------------------------------- MobileViT
# Mehta & Rastegari, "MobileViT: Light-weight, General-purpose, and Mobile-friendly Vision Transformer" (2022).

class InvertedResidual(nn.Module):
    """MobileNetV2 block with SiLU: 1x1 expand, 3x3 depthwise, 1x1 project; residual when shapes match."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int = 4) -> None:
        super().__init__()
        mid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.conv = nn.Sequential(ConvBNAct(cin, mid, 1, act=nn.SiLU), ConvBNAct(mid, mid, 3, stride, mid, act=nn.SiLU),
                                  ConvBNAct(mid, cout, 1, act=None))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileViTTransformer(nn.Module):
    """Pre-norm transformer layer with hand-written attention and a SiLU feed-forward."""

    def __init__(self, dim: int, ffn: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = ManualAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, ffn, act=nn.SiLU)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class MobileViTBlock(nn.Module):
    """Local 3x3 + 1x1 conv, unfold into 2x2 patches, transformers across patches, fold, 1x1 conv, fuse 3x3."""

    def __init__(self, cin: int, dim: int, depth: int, heads: int = 4, patch: int = 2) -> None:
        super().__init__()
        self.patch = patch
        self.local = nn.Sequential(ConvBNAct(cin, cin, 3, act=nn.SiLU), nn.Conv2d(cin, dim, 1, bias=False))
        self.transformer = nn.Sequential(*[MobileViTTransformer(dim, 2 * dim, heads) for _ in range(depth)],
                                         nn.LayerNorm(dim))
        self.proj = ConvBNAct(dim, cin, 1, act=nn.SiLU)
        self.fusion = ConvBNAct(2 * cin, cin, 3, act=nn.SiLU)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.local(x)
        B, D, H, W = y.shape
        p = self.patch
        # unfold: (B, D, H, W) -> (B * p * p, H/p * W/p, D): attention runs across patches at one pixel offset
        y = y.reshape(B, D, H // p, p, W // p, p).permute(0, 3, 5, 2, 4, 1).reshape(B * p * p, (H // p) * (W // p), D)
        y = self.transformer(y)
        y = y.reshape(B, p, p, H // p, W // p, D).permute(0, 5, 3, 1, 4, 2).reshape(B, D, H, W)
        return self.fusion(torch.cat([x, self.proj(y)], dim=1))


class MobileViT(nn.Module):
    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = ConvBNAct(3, 16, 3, 2, act=nn.SiLU)
        self.layers = nn.Sequential(
            InvertedResidual(16, 32, 1),
            nn.Sequential(InvertedResidual(32, 64, 2), InvertedResidual(64, 64, 1), InvertedResidual(64, 64, 1)),
            nn.Sequential(InvertedResidual(64, 96, 2), MobileViTBlock(96, 144, 2)),
            nn.Sequential(InvertedResidual(96, 128, 2), MobileViTBlock(128, 192, 4)),
            nn.Sequential(InvertedResidual(128, 160, 2), MobileViTBlock(160, 240, 3)))
        self.final = ConvBNAct(160, 640, 1, act=nn.SiLU)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(640, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.pool(self.final(self.layers(self.stem(x)))), 1))


def mobilevit_s(num_classes: int = 1000) -> nn.Module:
    """MobileViT-S (input 256x256): transformer widths 144/192/240, depths 2/4/3, 2x2 patches."""
    return _init_transformer(MobileViT(num_classes))


# ------------------------------------------------------------------------------------- EfficientFormer
# Li et al., "EfficientFormer: Vision Transformers at MobileNet Speed" (2022). Meta4D blocks (pooling mixer,
# conv MLP with BatchNorm), then Meta3D blocks (attention with a learned per-head position bias).

class Meta4D(nn.Module):
    def __init__(self, dim: int, drop_path: float, layer_scale: float = 1e-5) -> None:
        super().__init__()
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.mlp = nn.Sequential(nn.Conv2d(dim, 4 * dim, 1), nn.BatchNorm2d(4 * dim), nn.GELU(),
                                 nn.Conv2d(4 * dim, dim, 1), nn.BatchNorm2d(dim))
        self.ls1 = nn.Parameter(torch.full((dim, 1, 1), layer_scale))
        self.ls2 = nn.Parameter(torch.full((dim, 1, 1), layer_scale))
        self.drop_path = DropPath(drop_path)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path(self.ls1 * (self.pool(x) - x))
        return x + self.drop_path(self.ls2 * self.mlp(x))


class TanhGELUMlp(Mlp):
    """Linear -> GELU (tanh approximation) -> Linear."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class BiasedAttention(nn.Module):
    """Multi-head attention with key dim 32, value dim 4x32 and a learned bias per head and token offset."""

    def __init__(self, dim: int, resolution: int, key_dim: int = 32, heads: int = 8, attn_ratio: int = 4) -> None:
        super().__init__()
        self.heads, self.key_dim, self.val_dim = heads, key_dim, attn_ratio * key_dim
        self.scale = key_dim ** -0.5
        self.qkv = nn.Linear(dim, heads * (2 * key_dim + self.val_dim))
        self.proj = nn.Linear(heads * self.val_dim, dim)
        pos = torch.stack(torch.meshgrid(torch.arange(resolution), torch.arange(resolution), indexing="ij")).flatten(1)
        rel = (pos[..., :, None] - pos[..., None, :]).abs()
        self.attention_biases = nn.Parameter(torch.zeros(heads, resolution * resolution))
        self.register_buffer("attention_bias_idxs", rel[0] * resolution + rel[1], persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, _ = x.shape
        qkv = self.qkv(x).reshape(B, N, self.heads, -1).permute(0, 2, 1, 3)
        q, k, v = qkv.split([self.key_dim, self.key_dim, self.val_dim], dim=3)
        attn = (q @ k.transpose(-2, -1)) * self.scale + self.attention_biases[:, self.attention_bias_idxs]
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, self.heads * self.val_dim)
        return self.proj(x)


class Meta3D(nn.Module):
    def __init__(self, dim: int, resolution: int, drop_path: float, layer_scale: float = 1e-5) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = BiasedAttention(dim, resolution)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = TanhGELUMlp(dim, 4 * dim)
        self.ls1 = nn.Parameter(torch.full((dim,), layer_scale))
        self.ls2 = nn.Parameter(torch.full((dim,), layer_scale))
        self.drop_path = DropPath(drop_path)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path(self.ls1 * self.attn(self.norm1(x)))
        return x + self.drop_path(self.ls2 * self.mlp(self.norm2(x)))


class _Flat(nn.Module):
    """NCHW -> (N, HW, C) tokens."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(2).transpose(1, 2)


class EfficientFormer(nn.Module):
    def __init__(self, depths: Sequence[int] = (3, 2, 6, 4), widths: Sequence[int] = (48, 96, 224, 448),
                 num_vit: int = 1, img_size: int = 224, num_classes: int = 1000, drop_path: float = 0.0) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0] // 2, 3, 2, 1), nn.BatchNorm2d(widths[0] // 2), nn.ReLU(),
                                  nn.Conv2d(widths[0] // 2, widths[0], 3, 2, 1), nn.BatchNorm2d(widths[0]), nn.ReLU())
        probs = iter(_dpr(drop_path, sum(depths)))
        layers: list[nn.Module] = []
        for i, (d, w) in enumerate(zip(depths, widths)):
            if i > 0:
                layers.append(nn.Sequential(nn.Conv2d(widths[i - 1], w, 3, 2, 1), nn.BatchNorm2d(w)))
            n3d = num_vit if i == len(depths) - 1 else 0
            layers += [Meta4D(w, next(probs)) for _ in range(d - n3d)]
            if n3d:
                layers.append(_Flat())
                layers += [Meta3D(w, img_size // 32, next(probs)) for _ in range(n3d)]
        self.stages = nn.Sequential(*layers)
        self.norm = nn.LayerNorm(widths[-1])
        self.head = nn.Linear(widths[-1], num_classes)
        self.head_dist = nn.Linear(widths[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.stages(self.stem(x))).mean(dim=1)
        return (self.head(x) + self.head_dist(x)) / 2


def efficientformer_l1(num_classes: int = 1000, img_size: int = 224) -> nn.Module:
    """EfficientFormer-L1: depths (3, 2, 6, 4), widths (48, 96, 224, 448), one Meta3D block at the end."""
    return _init_transformer(EfficientFormer(img_size=img_size, num_classes=num_classes))


# ------------------------------------------------------------------------------------------------ LeViT
# Graham et al., "LeViT: a Vision Transformer in ConvNet's Clothing for Faster Inference" (2021): a 4-conv
# stem, attention with BatchNorm'd projections, Hardswish and a learned per-head bias over token offsets,
# shrinking attention (strided queries) between stages, and a distillation head.

class LinearBN(nn.Module):
    """Linear (no bias) + BatchNorm1d over the tokens of a (B, N, C) tensor."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.linear = nn.Linear(cin, cout, bias=False)
        self.bn = nn.BatchNorm1d(cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        return self.bn(x.flatten(0, 1)).reshape_as(x)


def _offset_index(resolution: int, stride: int) -> torch.Tensor:
    """Index of |query - key| offsets (queries every ``stride`` points) into a (res*res)-entry bias table."""
    pts = torch.stack(torch.meshgrid(torch.arange(resolution), torch.arange(resolution), indexing="ij")).flatten(1)
    q = pts.reshape(2, resolution, resolution)[:, ::stride, ::stride].flatten(1) if stride > 1 else pts
    rel = (q[:, :, None] - pts[:, None, :]).abs()
    return rel[0] * resolution + rel[1]


class LeViTAttention(nn.Module):
    """Attention with key dim 16; with ``stride`` 2 the queries come from every other token (shrinking)."""

    def __init__(self, cin: int, cout: int, heads: int, attn_ratio: int, resolution: int, stride: int = 1,
                 key_dim: int = 16) -> None:
        super().__init__()
        self.heads, self.key_dim, self.val_dim = heads, key_dim, attn_ratio * key_dim
        self.stride, self.resolution = stride, resolution
        self.scale = key_dim ** -0.5
        if stride == 1:
            self.qkv = LinearBN(cin, heads * (2 * key_dim + self.val_dim))
        else:
            self.kv = LinearBN(cin, heads * (key_dim + self.val_dim))
            self.q = LinearBN(cin, heads * key_dim)
        self.act = nn.Hardswish()
        self.proj = LinearBN(heads * self.val_dim, cout)
        self.attention_biases = nn.Parameter(torch.zeros(heads, resolution * resolution))
        self.register_buffer("attention_bias_idxs", _offset_index(resolution, stride), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        if self.stride == 1:
            qkv = self.qkv(x).view(B, N, self.heads, -1)
            q, k, v = qkv.split([self.key_dim, self.key_dim, self.val_dim], dim=3)
            q = q.permute(0, 2, 1, 3)
        else:
            k, v = self.kv(x).view(B, N, self.heads, -1).split([self.key_dim, self.val_dim], dim=3)
            r = self.resolution
            sub = x.view(B, r, r, C)[:, ::self.stride, ::self.stride].reshape(B, -1, C)
            q = self.q(sub).view(B, -1, self.heads, self.key_dim).permute(0, 2, 1, 3)
        k, v = k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)
        attn = (q @ k.transpose(-2, -1)) * self.scale + self.attention_biases[:, self.attention_bias_idxs]
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, -1, self.heads * self.val_dim)
        return self.proj(self.act(x))


class LeViTMlp(nn.Module):
    def __init__(self, dim: int, ratio: int) -> None:
        super().__init__()
        self.fc1 = LinearBN(dim, dim * ratio)
        self.act = nn.Hardswish()
        self.fc2 = LinearBN(dim * ratio, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class LeViTBlock(nn.Module):
    """Residual attention then residual MLP; a shrinking block has no residual around its attention."""

    def __init__(self, cin: int, cout: int, heads: int, attn_ratio: int, mlp_ratio: int, resolution: int,
                 stride: int = 1) -> None:
        super().__init__()
        self.residual = stride == 1
        self.attn = LeViTAttention(cin, cout, heads, attn_ratio, resolution, stride)
        self.mlp = LeViTMlp(cout, mlp_ratio)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(x) if self.residual else self.attn(x)
        return x + self.mlp(x)


class LeViT(nn.Module):
    def __init__(self, dims: Sequence[int] = (128, 256, 384), heads: Sequence[int] = (4, 6, 8),
                 depths: Sequence[int] = (2, 3, 4), img_size: int = 224, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(ConvBNAct(3, 16, 3, 2, act=nn.Hardswish), ConvBNAct(16, 32, 3, 2, act=nn.Hardswish),
                                  ConvBNAct(32, 64, 3, 2, act=nn.Hardswish), ConvBNAct(64, dims[0], 3, 2, act=None))
        res = img_size // 16
        blocks: list[nn.Module] = []
        for i, (dim, h, d) in enumerate(zip(dims, heads, depths)):
            if i > 0:  # shrinking attention: key dim 16, heads = input width / 16, value ratio 4
                blocks.append(LeViTBlock(dims[i - 1], dim, dims[i - 1] // 16, 4, 2, res, stride=2))
                res = (res - 1) // 2 + 1
            blocks += [LeViTBlock(dim, dim, h, 2, 2, res) for _ in range(d)]
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Sequential(nn.BatchNorm1d(dims[-1]), nn.Linear(dims[-1], num_classes))
        self.head_dist = nn.Sequential(nn.BatchNorm1d(dims[-1]), nn.Linear(dims[-1], num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x).flatten(2).transpose(1, 2)).mean(dim=1)
        return (self.head(x) + self.head_dist(x)) / 2


def levit_128s(num_classes: int = 1000, img_size: int = 224) -> nn.Module:
    """LeViT-128S: widths (128, 256, 384), heads (4, 6, 8), depths (2, 3, 4), key dim 16."""
    return _init_transformer(LeViT(img_size=img_size, num_classes=num_classes))


# ------------------------------------------------------------------------------------- EfficientNetV2
# Tan & Le, "EfficientNetV2: Smaller Models and Faster Training" (2021): Fused-MBConv early, MBConv + SE later.

class FusedMBConv(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int, drop_path: float) -> None:
        super().__init__()
        mid = cin * expand
        self.use_res = stride == 1 and cin == cout
        if expand == 1:
            self.block: nn.Module = ConvBNAct(cin, cout, 3, stride, act=nn.SiLU, eps=1e-3)
        else:
            self.block = nn.Sequential(ConvBNAct(cin, mid, 3, stride, act=nn.SiLU, eps=1e-3),
                                       ConvBNAct(mid, cout, 1, act=None, eps=1e-3))
        self.p = drop_path

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + stochastic_depth(y, self.p, self.training) if self.use_res else y


class MBConvSE(FusedMBConv):
    def __init__(self, cin: int, cout: int, stride: int, expand: int, drop_path: float) -> None:
        nn.Module.__init__(self)
        mid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.block = nn.Sequential(ConvBNAct(cin, mid, 1, act=nn.SiLU, eps=1e-3),
                                   ConvBNAct(mid, mid, 3, stride, groups=mid, act=nn.SiLU, eps=1e-3),
                                   SqueezeExcite(mid, max(1, cin // 4), act=nn.SiLU),
                                   ConvBNAct(mid, cout, 1, act=None, eps=1e-3))
        self.p = drop_path


class EfficientNetV2(nn.Module):
    # (fused, expand, stride, cout, repeats) for EfficientNetV2-S
    STAGES = ((True, 1, 1, 24, 2), (True, 4, 2, 48, 4), (True, 4, 2, 64, 4),
              (False, 4, 2, 128, 6), (False, 6, 1, 160, 9), (False, 6, 2, 256, 15))

    def __init__(self, num_classes: int = 1000, last: int = 1280, drop_path: float = 0.2) -> None:
        super().__init__()
        self.stem = ConvBNAct(3, 24, 3, 2, act=nn.SiLU, eps=1e-3)
        n = sum(s[-1] for s in self.STAGES)
        blocks: list[nn.Module] = []
        cin = 24
        for fused, expand, stride, cout, repeats in self.STAGES:
            for j in range(repeats):
                cls = FusedMBConv if fused else MBConvSE
                blocks.append(cls(cin, cout, stride if j == 0 else 1, expand, drop_path * len(blocks) / n))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.final = ConvBNAct(cin, last, 1, act=nn.SiLU, eps=1e-3)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.2)
        self.head = nn.Linear(last, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.final(self.blocks(self.stem(x))))
        return self.head(self.dropout(torch.flatten(x, 1)))


def efficientnet_v2_s(num_classes: int = 1000) -> nn.Module:
    """EfficientNetV2-S (inference at 384x384)."""
    return _finish(EfficientNetV2(num_classes))


# -------------------------------------------------------------------------------------------- DeepLabV3
# Chen et al., "Rethinking Atrous Convolution for Semantic Image Segmentation" (2017): ResNet-50 with the
# last stage dilated (output stride 16), ASPP (1x1, 3x3 at rates 6/12/18, image pooling), bilinear upsampling.

class DilatedBottleneck(nn.Module):
    def __init__(self, cin: int, planes: int, stride: int, dilation: int) -> None:
        super().__init__()
        cout = 4 * planes
        self.conv1 = ConvBNAct(cin, planes, 1)
        self.conv2 = ConvBNAct(planes, planes, 3, stride, padding=dilation)
        self.conv2[0].dilation = (dilation, dilation)
        self.conv3 = ConvBNAct(planes, cout, 1, act=None)
        self.downsample: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.downsample = ConvBNAct(cin, cout, 1, stride, act=None)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.conv3(self.conv2(self.conv1(x))) + self.downsample(x))


class ASPPPooling(nn.Module):
    """Image-level feature: global average pool, 1x1 conv, BN, ReLU, bilinear upsampling to the map size."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.conv = ConvBNAct(cin, cout, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(self.conv(self.pool(x)), size=x.shape[-2:], mode="bilinear", align_corners=False)


class ASPP(nn.Module):
    def __init__(self, cin: int, rates: Sequence[int] = (6, 12, 18), cout: int = 256) -> None:
        super().__init__()
        branches: list[nn.Module] = [ConvBNAct(cin, cout, 1)]
        for r in rates:
            conv = ConvBNAct(cin, cout, 3, padding=r)
            conv[0].dilation = (r, r)
            branches.append(conv)
        branches.append(ASPPPooling(cin, cout))
        self.branches = nn.ModuleList(branches)
        self.project = nn.Sequential(ConvBNAct(cout * len(branches), cout, 1), nn.Dropout(0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.project(torch.cat([b(x) for b in self.branches], dim=1))


class DeepLabV3(nn.Module):
    def __init__(self, num_classes: int = 21, layers: Sequence[int] = (3, 4, 6, 3)) -> None:
        super().__init__()
        self.stem = nn.Sequential(ConvBNAct(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1))
        stages: list[nn.Module] = []
        cin = 64
        # output stride 16: stage 4 keeps stride 1 and dilates by 2 instead
        for planes, n, stride, dilation in zip((64, 128, 256, 512), layers, (1, 2, 2, 1), (1, 1, 1, 2)):
            blocks = [DilatedBottleneck(cin if i == 0 else 4 * planes, planes, stride if i == 0 else 1, dilation)
                      for i in range(n)]
            stages.append(nn.Sequential(*blocks))
            cin = 4 * planes
        self.backbone = nn.Sequential(*stages)
        self.aspp = ASPP(cin)
        self.head = nn.Sequential(ConvBNAct(256, 256, 3), nn.Conv2d(256, num_classes, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.head(self.aspp(self.backbone(self.stem(x))))
        return F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)


def deeplabv3_resnet50(num_classes: int = 21) -> nn.Module:
    """DeepLabV3, ResNet-50 backbone at output stride 16, ASPP rates 6/12/18, 513x513 crops."""
    return _finish(DeepLabV3(num_classes))


# ------------------------------------------------------------------------------------------- PoolFormer
# Yu et al., "MetaFormer Is Actually What You Need for Vision" (2022): pooling as the token mixer.

class PoolFormerBlock(nn.Module):
    def __init__(self, dim: int, drop_path: float, layer_scale: float = 1e-5) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(1, dim)
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.norm2 = nn.GroupNorm(1, dim)
        self.mlp = nn.Sequential(nn.Conv2d(dim, 4 * dim, 1), nn.GELU(), nn.Conv2d(4 * dim, dim, 1))
        self.ls1 = nn.Parameter(torch.full((dim, 1, 1), layer_scale))
        self.ls2 = nn.Parameter(torch.full((dim, 1, 1), layer_scale))
        self.drop_path = DropPath(drop_path)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(x)
        x = x + self.drop_path(self.ls1 * (self.pool(y) - y))
        return x + self.drop_path(self.ls2 * self.mlp(self.norm2(x)))


class PoolFormer(nn.Module):
    def __init__(self, depths: Sequence[int] = (2, 2, 6, 2), dims: Sequence[int] = (64, 128, 320, 512),
                 num_classes: int = 1000, drop_path: float = 0.1) -> None:
        super().__init__()
        probs = iter(_dpr(drop_path, sum(depths)))
        layers: list[nn.Module] = [nn.Conv2d(3, dims[0], 7, 4, 2)]
        for i, (d, w) in enumerate(zip(depths, dims)):
            if i > 0:
                layers.append(nn.Conv2d(dims[i - 1], w, 3, 2, 1))
            layers += [PoolFormerBlock(w, next(probs)) for _ in range(d)]
        self.features = nn.Sequential(*layers)
        self.norm = nn.GroupNorm(1, dims[-1])
        self.head = nn.Linear(dims[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.features(x)).mean([-2, -1]))


def poolformer_s12(num_classes: int = 1000) -> nn.Module:
    """PoolFormer-S12: depths (2, 2, 6, 2), widths (64, 128, 320, 512)."""
    return _init_transformer(PoolFormer(num_classes=num_classes))


# ------------------------------------------------------------------------------------------- SegFormer
# Xie et al., "SegFormer: Simple and Efficient Design for Semantic Segmentation with Transformers" (2021):
# Mix Transformer encoder (overlapping patch embeddings, spatial-reduction attention, Mix-FFN with a 3x3
# depthwise conv) and an all-MLP decoder that resizes every stage to 1/4 resolution.

class OverlapPatchEmbed(nn.Module):
    def __init__(self, cin: int, dim: int, kernel: int, stride: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(cin, dim, kernel, stride, kernel // 2)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.proj(x).flatten(2).transpose(1, 2))


class SRAttention(nn.Module):
    """Attention whose keys and values come from the map reduced by an sr x sr strided conv + LayerNorm."""

    def __init__(self, dim: int, heads: int, sr: int) -> None:
        super().__init__()
        self.heads, self.sr = heads, sr
        self.scale = (dim // heads) ** -0.5
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)
        if sr > 1:
            self.reduce = nn.Conv2d(dim, dim, sr, sr)
            self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, H: int, W: int) -> torch.Tensor:
        B, N, C = x.shape
        q = self.q(x).reshape(B, N, self.heads, C // self.heads).permute(0, 2, 1, 3)
        if self.sr > 1:
            x = x.transpose(1, 2).reshape(B, C, H, W)
            x = self.norm(self.reduce(x).flatten(2).transpose(1, 2))
        kv = self.kv(x).reshape(B, -1, 2, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        k, v = kv[0], kv[1]
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))


class MixFFN(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.dwconv = nn.Conv2d(hidden, hidden, 3, 1, 1, groups=hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor, H: int, W: int) -> torch.Tensor:
        x = self.fc1(x)
        B, N, C = x.shape
        x = self.dwconv(x.transpose(1, 2).reshape(B, C, H, W)).flatten(2).transpose(1, 2)
        return self.fc2(self.act(x))


class MiTBlock(nn.Module):
    def __init__(self, dim: int, heads: int, sr: int, drop_path: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = SRAttention(dim, heads, sr)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = MixFFN(dim, 4 * dim)
        self.drop_path = DropPath(drop_path)

    def forward(self, x: torch.Tensor, H: int, W: int) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x), H, W))
        return x + self.drop_path(self.mlp(self.norm2(x), H, W))


class MiTStage(nn.Module):
    def __init__(self, cin: int, dim: int, kernel: int, stride: int, depth: int, heads: int, sr: int,
                 probs: Sequence[float]) -> None:
        super().__init__()
        self.embed = OverlapPatchEmbed(cin, dim, kernel, stride)
        self.blocks = nn.ModuleList([MiTBlock(dim, heads, sr, probs[i]) for i in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B = x.shape[0]
        H = (x.shape[2] - 1) // self.stride + 1
        W = (x.shape[3] - 1) // self.stride + 1
        x = self.embed(x)
        for blk in self.blocks:
            x = blk(x, H, W)
        return self.norm(x).transpose(1, 2).reshape(B, -1, H, W)


class SegFormer(nn.Module):
    def __init__(self, dims: Sequence[int] = (32, 64, 160, 256), heads: Sequence[int] = (1, 2, 5, 8),
                 depths: Sequence[int] = (2, 2, 2, 2), srs: Sequence[int] = (8, 4, 2, 1), decoder: int = 256,
                 num_classes: int = 150, drop_path: float = 0.1) -> None:
        super().__init__()
        probs = _dpr(drop_path, sum(depths))
        stages, cin, start = [], 3, 0
        for i, (dim, h, d, sr) in enumerate(zip(dims, heads, depths, srs)):
            kernel, stride = (7, 4) if i == 0 else (3, 2)
            stages.append(MiTStage(cin, dim, kernel, stride, d, h, sr, probs[start:start + d]))
            cin, start = dim, start + d
        self.stages = nn.ModuleList(stages)
        self.linear_c = nn.ModuleList([nn.Linear(dim, decoder) for dim in dims])
        self.fuse = ConvBNAct(len(dims) * decoder, decoder, 1)
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Conv2d(decoder, num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size = x.shape[-2:]
        feats = []
        y = x
        for stage in self.stages:
            y = stage(y)
            feats.append(y)
        quarter = feats[0].shape[-2:]
        outs = []
        for f, lin in zip(feats, self.linear_c):
            B, C, H, W = f.shape
            f = lin(f.flatten(2).transpose(1, 2)).transpose(1, 2).reshape(B, -1, H, W)
            outs.append(F.interpolate(f, size=quarter, mode="bilinear", align_corners=False))
        y = self.classifier(self.dropout(self.fuse(torch.cat(outs[::-1], dim=1))))
        return F.interpolate(y, size=size, mode="bilinear", align_corners=False)


def segformer_b0(num_classes: int = 150) -> nn.Module:
    """SegFormer-B0 (ADE20K, 512x512): MiT-B0 encoder, all-MLP decoder of width 256, logits at input size."""
    return _init_transformer(SegFormer(num_classes=num_classes))


# ----------------------------------------------------------------------------------------------- registry

MODERN: dict[str, Callable[..., nn.Module]] = {
    "vit_ti16": vit_ti16,
    "vit_s16": vit_s16,
    "vit_b16": vit_b16,
    "swin_t": swin_t,
    "convnext_t": convnext_t,
    "maxvit_t": maxvit_t,
    "mobilevit_s": mobilevit_s,
    "efficientformer_l1": efficientformer_l1,
    "levit_128s": levit_128s,
    "efficientnet_v2_s": efficientnet_v2_s,
    "deeplabv3_resnet50": deeplabv3_resnet50,
    "poolformer_s12": poolformer_s12,
    "segformer_b0": segformer_b0,
}

MODERN_INPUT_SHAPES: dict[str, tuple[int, ...]] = {name: (1, 3, 224, 224) for name in MODERN}
MODERN_INPUT_SHAPES.update(mobilevit_s=(1, 3, 256, 256), efficientnet_v2_s=(1, 3, 384, 384),
                           deeplabv3_resnet50=(1, 3, 513, 513), segformer_b0=(1, 3, 512, 512))
