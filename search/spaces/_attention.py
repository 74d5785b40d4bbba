"""Torch building blocks of the attention spaces (`vit`, `hybrid`): multi-head self-attention written as a
runtime executes it, the pre-norm transformer block, the patch embedding, the token head, the inverted
residual convolution block and the stage entry that turns an image (or the previous stage's tokens) into
tokens at half the resolution.

Defined on first use (`blocks`), so importing a space module does not import torch. Every module here traces
with torch.fx into known layers (FullyConnected, MatMul, Softmax, LayerNorm, GELU, layout ops), no `Unknown`.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["blocks", "mlp_hidden", "meta_trace"]


def mlp_hidden(dim: int, ratio: float) -> int:
    """Hidden width of a block's MLP: ``round(dim * ratio)``."""
    return int(round(dim * ratio))


@functools.cache
def blocks() -> dict[str, type]:
    """The block classes by name (``Attention``, ``Block``, ``PatchEmbed``, ``TokenHead``, ``MBConv``,
    ``ConvStem``, ``ToTokens``)."""
    import torch.nn as nn

    class Attention(nn.Module):
        """Multi-head self-attention on (B, N, C) tokens: ``heads`` heads of ``head_dim`` each (AutoFormer's
        fixed head width, so heads and embedding dimension are searched independently)."""

        def __init__(self, dim: int, heads: int, head_dim: int) -> None:
            super().__init__()
            self.heads, self.head_dim = heads, head_dim
            self.scale = head_dim ** -0.5
            self.qkv = nn.Linear(dim, 3 * heads * head_dim)
            self.proj = nn.Linear(heads * head_dim, dim)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
            a = (q @ k.transpose(-2, -1) * self.scale).softmax(dim=-1)
            return self.proj((a @ v).transpose(1, 2).reshape(b, n, self.heads * self.head_dim))

    class Block(nn.Module):
        """Pre-norm transformer block: LayerNorm, attention, residual; LayerNorm, Linear-GELU-Linear, residual."""

        def __init__(self, dim: int, heads: int, ratio: float, head_dim: int) -> None:
            super().__init__()
            hidden = mlp_hidden(dim, ratio)
            self.norm1 = nn.LayerNorm(dim)
            self.attn = Attention(dim, heads, head_dim)
            self.norm2 = nn.LayerNorm(dim)
            self.fc1 = nn.Linear(dim, hidden)
            self.act = nn.GELU()
            self.fc2 = nn.Linear(hidden, dim)

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.fc2(self.act(self.fc1(self.norm2(x))))

    class PatchEmbed(nn.Module):
        """Non-overlapping ``patch`` x ``patch`` convolution to ``dim`` channels, flattened to tokens, plus a
        learnt position embedding."""

        def __init__(self, in_channels: int, dim: int, patch: int, tokens: int) -> None:
            super().__init__()
            import torch
            self.proj = nn.Conv2d(in_channels, dim, patch, stride=patch)
            self.pos = nn.Parameter(torch.zeros(1, tokens, dim))

        def forward(self, x):
            return self.proj(x).flatten(2).transpose(1, 2) + self.pos

    class TokenHead(nn.Module):
        """Final LayerNorm, mean over the tokens, classifier."""

        def __init__(self, dim: int, num_classes: int) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.fc = nn.Linear(dim, num_classes)

        def forward(self, x):
            return self.fc(self.norm(x).mean(1))

    from annette_torch.zoo_blocks import ConvBNAct as conv_bn  # Conv2d (no bias), BatchNorm2d, ReLU

    class ConvStem(nn.Module):
        """3x3 convolution, stride 2, BatchNorm, ReLU."""

        def __init__(self, in_channels: int, c_out: int) -> None:
            super().__init__()
            self.conv = conv_bn(in_channels, c_out, 3, 2)

        def forward(self, x):
            return self.conv(x)

    class MBConv(nn.Module):
        """Inverted residual: 1x1 expansion by ``e``, 3x3 depthwise (``stride``), 1x1 projection; residual
        when the shapes match."""

        def __init__(self, c_in: int, c_out: int, stride: int, e: int) -> None:
            super().__init__()
            mid = c_in * e
            self.expand = conv_bn(c_in, mid, 1)
            self.depthwise = conv_bn(mid, mid, 3, stride, groups=mid)
            self.project = conv_bn(mid, c_out, 1, act=None)
            self.residual = stride == 1 and c_in == c_out

        def forward(self, x):
            y = self.project(self.depthwise(self.expand(x)))
            return y + x if self.residual else y

    class ToTokens(nn.Module):
        """Stage entry: an image (B, C, H, W) -- or the previous stage's tokens, folded back to its ``hw``
        grid -- through a 3x3 stride-2 convolution and BatchNorm to ``dim`` channels, then flattened to
        (B, H'W', dim) tokens."""

        def __init__(self, c_in: int, dim: int, hw: tuple[int, int] | None = None) -> None:
            super().__init__()
            self.hw = hw
            self.down = conv_bn(c_in, dim, 3, 2, act=None)

        def forward(self, x):
            if self.hw is not None:
                b, _, c = x.shape
                x = x.transpose(1, 2).reshape(b, c, self.hw[0], self.hw[1])
            return self.down(x).flatten(2).transpose(1, 2)

    class Sequence(nn.Module):
        """Modules applied one after the other (a plain ``nn.Sequential`` with block-level names)."""

        def __init__(self, *mods: nn.Module) -> None:
            super().__init__()
            self.parts = nn.ModuleList(mods)

        def forward(self, x):
            for m in self.parts:
                x = m(x)
            return x

    return {"Attention": Attention, "Block": Block, "PatchEmbed": PatchEmbed, "TokenHead": TokenHead,
            "ConvStem": ConvStem, "MBConv": MBConv, "ToTokens": ToTokens, "Sequence": Sequence}


def meta_trace(build: Any, input_shape: tuple[int, ...], name: str) -> Any:
    """The IR of the module ``build()`` makes, built on torch's ``meta`` device (no weights are allocated or
    initialised: the trace reads only shapes) and traced at ``input_shape``."""
    import torch

    from ...frontends.fx import trace
    with torch.device("meta"):
        module = build()
    return trace(module.eval(), input_shape, name=name)
