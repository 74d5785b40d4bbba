"""MobileNetV2 / ProxylessNAS block space: per-block MBConv kernel and expansion choices, IR and torch builders.

The network is ProxylessNAS's mobile search space (``SuperProxylessNASNets``): a fixed stem (3x3 conv
stride 2, 32 channels, BN, ReLU6, then an MBConv1 3x3 block to 16 channels), 21 searchable blocks in the
stages of `STAGES` (channels, blocks, first stride), a 1x1 conv to 1280 channels (BN, ReLU6), global
average pooling and a linear classifier; input 1x3x224x224. Each searchable block picks one of
`CANDIDATES` (``mb{k}_e{e}``: inverted residual with a k x k depthwise conv and expansion e: 1x1 conv-BN-
ReLU6, depthwise conv-BN-ReLU6, 1x1 conv-BN) or, where stride is 1 and channels do not change, ``zero``
(the block is skipped: identity); those blocks add their input to the MBConv output (residual).

`build_network` (direct, no torch) and `build_module` (torch) give identical IR; `stem_network`,
`block_network` and `head_network` build the parts, whose operations add up to the whole network's, for
per-candidate latency tables.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ...ir import LayerType, Network, NetworkBuilder
from ...lookup import LatencyTable, block_latencies, mean_block_traffic
from ...platform import load_platform
from ...types import PlatformLike
from ._names import FxNames

__all__ = [
    "STAGES", "CANDIDATES", "ZERO", "BlockSpec", "make_blocks", "BLOCKS", "INPUT_SHAPE", "parse_op",
    "validate", "stem_network", "block_network", "head_network", "build_network", "build_module", "latency_table",
]

T = LayerType

#: ProxylessNAS mobile layout: (output channels, blocks, stride of the first block) per stage.
STAGES: tuple[tuple[int, int, int], ...] = ((24, 4, 2), (40, 4, 2), (80, 4, 2), (96, 4, 1), (192, 4, 2), (320, 1, 1))
#: MBConv candidates of every searchable block: ``mb{kernel}_e{expansion}``.
CANDIDATES: tuple[str, ...] = ("mb3_e3", "mb3_e6", "mb5_e3", "mb5_e6", "mb7_e3", "mb7_e6")
#: The skip candidate of blocks with stride 1 and equal input/output channels.
ZERO = "zero"
STEM_CHANNELS = 32
FIRST_BLOCK_CHANNELS = 16
LAST_CHANNELS = 1280
INPUT_SHAPE: tuple[int, int, int, int] = (1, 3, 224, 224)

_OP_RE = re.compile(r"mb(\d+)_e(\d+)")


@dataclass(frozen=True)
class BlockSpec:
    """One searchable block: channels in and out, stride, and the candidate ops it allows."""

    in_ch: int
    out_ch: int
    stride: int
    ops: tuple[str, ...]

    @property
    def residual(self) -> bool:
        """Whether the block adds its input to its output (and may be skipped with ``zero``)."""
        return self.stride == 1 and self.in_ch == self.out_ch


def parse_op(op: str) -> tuple[int, int] | None:
    """``'mb5_e6'`` -> (kernel 5, expansion 6); ``'zero'`` -> None; ValueError for anything else."""
    if op == ZERO:
        return None
    m = _OP_RE.fullmatch(op) if isinstance(op, str) else None
    if m is None or int(m.group(1)) % 2 == 0 or int(m.group(2)) < 1:
        raise ValueError(f"MBV2 op {op!r} is not 'zero' or 'mb<odd kernel>_e<expansion>' (e.g. 'mb3_e6')")
    return int(m.group(1)), int(m.group(2))


def make_blocks(stages: Sequence[tuple[int, int, int]] = STAGES, candidates: Sequence[str] = CANDIDATES,
                in_ch: int = FIRST_BLOCK_CHANNELS) -> list[BlockSpec]:
    """Block specs of a stage layout; blocks with stride 1 and equal channels also allow ``zero``."""
    for op in candidates:
        parse_op(op)
    blocks = []
    for width, n, stride in stages:
        for i in range(n):
            s = stride if i == 0 else 1
            ops = tuple(candidates) + ((ZERO,) if s == 1 and in_ch == width else ())
            blocks.append(BlockSpec(in_ch, width, s, ops))
            in_ch = width
    return blocks


#: The 21 searchable blocks of the default layout.
BLOCKS: tuple[BlockSpec, ...] = tuple(make_blocks())


def validate(choices: Sequence[str], blocks: Sequence[BlockSpec] = BLOCKS) -> list[str]:
    """Check one op per block, each allowed there; returns the choices as a list (ValueError otherwise)."""
    choices = list(choices)
    if len(choices) != len(blocks):
        raise ValueError(f"MBV2 needs one op per searchable block: {len(blocks)} expected, got {len(choices)}")
    for i, (op, blk) in enumerate(zip(choices, blocks)):
        if op not in blk.ops:
            raise ValueError(f"MBV2 block {i} ({blk.in_ch}->{blk.out_ch}, stride {blk.stride}) does not allow "
                             f"{op!r}; allowed: {', '.join(blk.ops)}")
    return choices


def _block_inputs(resolution: int, blocks: Sequence[BlockSpec]) -> list[tuple[int, int, int, int]]:
    """Input shape of every searchable block (the stem halves the resolution)."""
    h = _conv_out(resolution, 3, 2)
    shapes = []
    for blk in blocks:
        shapes.append((1, blk.in_ch, h, h))
        h = _conv_out(h, 3, blk.stride)  # any odd kernel with 'same' padding gives the same size
    return shapes


def _conv_out(h: int, k: int, s: int) -> int:
    return (h + 2 * (k // 2) - k) // s + 1


# ------------------------------------------------------------------------------------------------------
# direct IR builder


def _mbconv(b: NetworkBuilder, name: str, x: int, c_out: int, k: int, e: int, stride: int) -> int:
    c_in = b.out_shape(x)[1]
    mid = round(c_in * e)
    if e != 1:
        x = b.conv(f"{name}.inverted_bottleneck.0", x, mid, 1)
        x = b.same(T.BATCH_NORM, f"{name}.inverted_bottleneck.1", x)
        x = b.same(T.RELU6, f"{name}.inverted_bottleneck.2", x)
    x = b.conv(f"{name}.depth_conv.0", x, mid, k, stride=stride, padding=k // 2, groups=mid)
    x = b.same(T.BATCH_NORM, f"{name}.depth_conv.1", x)
    x = b.same(T.RELU6, f"{name}.depth_conv.2", x)
    x = b.conv(f"{name}.point_linear.0", x, c_out, 1)
    return b.same(T.BATCH_NORM, f"{name}.point_linear.1", x)


def _stem(b: NetworkBuilder, x: int) -> int:
    x = b.conv("first_conv.0", x, STEM_CHANNELS, 3, stride=2, padding=1)
    x = b.same(T.BATCH_NORM, "first_conv.1", x)
    x = b.same(T.RELU6, "first_conv.2", x)
    return _mbconv(b, "first_block", x, FIRST_BLOCK_CHANNELS, 3, 1, 1)


def _block(b: NetworkBuilder, fx: FxNames, i: int, blk: BlockSpec, op: str, x: int) -> int:
    ke = parse_op(op)
    if ke is None:
        return x
    y = _mbconv(b, f"blocks.{i}.conv", x, blk.out_ch, ke[0], ke[1], blk.stride)
    return b.same(T.ADD, fx("add"), [x, y]) if blk.residual else y


def _head(b: NetworkBuilder, x: int, num_classes: int) -> int:
    x = b.conv("feature_mix_layer.0", x, LAST_CHANNELS, 1)
    x = b.same(T.BATCH_NORM, "feature_mix_layer.1", x)
    x = b.same(T.RELU6, "feature_mix_layer.2", x)
    x = b.global_pool("global_avg_pooling", x)
    n, c = b.out_shape(x)[:2]
    x = b.add(T.RESHAPE, "view", [x], (n, c))
    return b.linear("classifier", x, num_classes)


def build_network(choices: Sequence[str], num_classes: int = 1000, resolution: int = 224,
                  blocks: Sequence[BlockSpec] = BLOCKS) -> Network:
    """The IR of the network with one op per searchable block (see `BLOCKS`), built without torch.

    Identical (names, types, shapes, edges) to ``annette_torch.trace(build_module(...), (1, 3, r, r))``.
    """
    choices = validate(choices, blocks)
    b = NetworkBuilder("mbv2")
    fx = FxNames()
    x = _stem(b, b.input("x", (1, 3, resolution, resolution)))
    for i, (blk, op) in enumerate(zip(blocks, choices)):
        x = _block(b, fx, i, blk, op, x)
    _head(b, x, num_classes)
    return b.build()


def stem_network(resolution: int = 224) -> Network:
    """The fixed stem (first conv and the MBConv1 block) as its own network."""
    b = NetworkBuilder("mbv2_stem")
    _stem(b, b.input("x", (1, 3, resolution, resolution)))
    return b.build()


def block_network(block_index: int, op: str, resolution: int = 224,
                  blocks: Sequence[BlockSpec] = BLOCKS) -> Network:
    """Searchable block ``block_index`` with candidate ``op`` alone, fed by an Input layer of its input shape.

    Layer 0 is that Input (0 ops; platforms may still give it a time, so a per-block latency is
    ``estimate(net).time_ms[1:].sum()``); ``zero`` gives the Input layer only.
    """
    if not 0 <= block_index < len(blocks):
        raise ValueError(f"MBV2 block index must be in 0..{len(blocks) - 1}, got {block_index}")
    blk = blocks[block_index]
    if op not in blk.ops:
        raise ValueError(f"MBV2 block {block_index} does not allow {op!r}; allowed: {', '.join(blk.ops)}")
    b = NetworkBuilder(f"mbv2_block{block_index}_{op}")
    x = b.input("x", _block_inputs(resolution, blocks)[block_index])
    _block(b, FxNames(), block_index, blk, op, x)
    return b.build()


def head_network(num_classes: int = 1000, resolution: int = 224, blocks: Sequence[BlockSpec] = BLOCKS) -> Network:
    """The fixed head (1x1 conv to 1280, pooling, classifier) fed by the last block's output shape."""
    n, _, h, w = _block_inputs(resolution, blocks)[-1]
    h = _conv_out(h, 3, blocks[-1].stride)
    b = NetworkBuilder("mbv2_head")
    _head(b, b.input("x", (n, blocks[-1].out_ch, h, h)), num_classes)
    return b.build()


# ------------------------------------------------------------------------------------------------------
# torch builder


def build_module(choices: Sequence[str], num_classes: int = 1000, blocks: Sequence[BlockSpec] = BLOCKS,
                 dropout_rate: float = 0.0) -> Any:
    """The network with one op per searchable block as an ``nn.Module`` (any input resolution)."""
    choices = validate(choices, blocks)
    return _torch()["ProxylessNet"](choices, list(blocks), num_classes, dropout_rate)


@functools.cache
def _torch() -> dict[str, type]:
    import torch.nn as nn

    def conv_bn_act(c_in: int, c_out: int, k: int, stride: int = 1, groups: int = 1, act: bool = True):
        layers = [nn.Conv2d(c_in, c_out, k, stride=stride, padding=k // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(c_out)]
        if act:
            layers.append(nn.ReLU6(inplace=True))
        return nn.Sequential(*layers)

    class MBConv(nn.Module):
        """Inverted residual body: 1x1 expansion (if e != 1), k x k depthwise, 1x1 linear projection."""

        def __init__(self, c_in: int, c_out: int, k: int, e: int, stride: int) -> None:
            super().__init__()
            mid = round(c_in * e)
            self.inverted_bottleneck = conv_bn_act(c_in, mid, 1) if e != 1 else None
            self.depth_conv = conv_bn_act(mid, mid, k, stride, groups=mid)
            self.point_linear = conv_bn_act(mid, c_out, 1, act=False)

        def forward(self, x):
            if self.inverted_bottleneck is not None:
                x = self.inverted_bottleneck(x)
            return self.point_linear(self.depth_conv(x))

    class Block(nn.Module):
        """A searchable block with its chosen op; ``zero`` is the identity, residual blocks add the input."""

        def __init__(self, spec: BlockSpec, op: str) -> None:
            super().__init__()
            ke = parse_op(op)
            self.conv = MBConv(spec.in_ch, spec.out_ch, ke[0], ke[1], spec.stride) if ke else None
            self.residual = spec.residual

        def forward(self, x):
            if self.conv is None:
                return x
            y = self.conv(x)
            return x + y if self.residual else y

    class ProxylessNet(nn.Module):
        """Stem, searchable blocks, feature-mix 1x1 conv, global average pooling, classifier."""

        def __init__(self, choices: list[str], blocks: list[BlockSpec], num_classes: int,
                     dropout_rate: float) -> None:
            super().__init__()
            self.first_conv = conv_bn_act(3, STEM_CHANNELS, 3, stride=2)
            self.first_block = MBConv(STEM_CHANNELS, FIRST_BLOCK_CHANNELS, 3, 1, 1)
            self.blocks = nn.ModuleList(Block(s, op) for s, op in zip(blocks, choices))
            self.feature_mix_layer = conv_bn_act(blocks[-1].out_ch, LAST_CHANNELS, 1)
            self.global_avg_pooling = nn.AdaptiveAvgPool2d(1)
            self.dropout = nn.Dropout(dropout_rate)
            self.classifier = nn.Linear(LAST_CHANNELS, num_classes)

        def forward(self, x):
            x = self.first_block(self.first_conv(x))
            for block in self.blocks:
                x = block(x)
            x = self.global_avg_pooling(self.feature_mix_layer(x))
            x = x.view(x.size(0), -1)
            return self.classifier(self.dropout(x))

    return {"ProxylessNet": ProxylessNet, "Block": Block, "MBConv": MBConv}


def latency_table(platform: PlatformLike = "zcu102", resolution: int = 224,
                  num_classes: int = 1000, blocks: Sequence[Any] | None = None,
                  latency: str = "latency") -> LatencyTable:
    """The `LatencyTable` of this block space on ``platform`` (default ``zcu102``), full size: rows are
    `BLOCKS` (or ``blocks``), columns each block's ``ops``; ``fixed_ms`` is the stem (with the network
    input) plus the head (feature-mix conv, pooling, classifier), plus the platform's per-inference terms
    for ``latency="latency"`` (`Estimate.latency_ms`; ``"device"``: the layer sum)."""
    plat = load_platform(platform)
    specs = list(BLOCKS if blocks is None else blocks)
    ops = [list(blk.ops) for blk in specs]
    nets = [[None if op == ZERO else block_network(b, op, resolution, specs) for op in cands]
            for b, cands in enumerate(ops)]
    fixed = [stem_network(resolution), head_network(num_classes, resolution, specs)]
    context = mean_block_traffic(plat, nets, fixed)
    stem = float(block_latencies(plat, fixed[:1], count_input=True, context_bytes=context, latency=latency)[0])
    head = float(block_latencies(plat, fixed[1:], context_bytes=context, count_output=True, latency=latency)[0])
    meta = {"space": "mbv2", "resolution": resolution, "num_classes": num_classes,
            "stem_ms": stem, "head_ms": head}
    return LatencyTable.build(nets, plat, None, fixed, ops, meta=meta, context_bytes=context, latency=latency)
