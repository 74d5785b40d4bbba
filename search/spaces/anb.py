"""Accel-NASBench space: EfficientNet-B0's skeleton with per-stage expansion, kernel, depth and SE choices.

The space of Accel-NASBench (Afzal et al., 2024), whose candidates were measured on real accelerators (a
ZCU102 among them). Input 1x3x224x224; a stem (3x3 conv stride 2, 3 -> 32, BN, ReLU), seven stages of MBConv
blocks (`STAGES`: input and output channels, stride of the first block) and a head (1x1 conv 320 -> 1280, BN,
ReLU, global average pool, fully connected 1280 -> 1000). Each stage picks (`StageChoice`): expansion
``e`` in `EXPANSIONS` (the 1x1 expansion conv is skipped for e = 1), depthwise kernel ``k`` in `KERNELS`,
number of blocks ``l`` (`DEPTHS`, per stage) and whether its blocks carry squeeze-excitation (global average
pool, 1x1 conv with bias to max(1, in // 4), ReLU, 1x1 conv with bias back, hard sigmoid, multiply). Blocks
with stride 1 and equal channels add their input (residual). The hidden width is ``round8(in * e)``.

`build_network` (direct, no torch) and `build_module` (torch) give the same IR; `params` counts the
parameters as the dataset does (weights, biases and batch-norm scale and shift).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ...ir import LayerType, Network, NetworkBuilder
from ._names import FxNames

__all__ = ["STAGES", "EXPANSIONS", "KERNELS", "DEPTHS", "StageChoice", "Arch", "INPUT_SHAPE", "round8",
           "validate", "from_row", "encode", "decode", "build_network", "build_module", "params"]

T = LayerType

#: (input channels, output channels, stride of the first block) per stage (EfficientNet-B0's)
STAGES: tuple[tuple[int, int, int], ...] = ((32, 16, 1), (16, 24, 2), (24, 40, 2), (40, 80, 2), (80, 112, 1),
                                            (112, 192, 2), (192, 320, 1))
EXPANSIONS: tuple[int, ...] = (1, 4, 6)
KERNELS: tuple[int, ...] = (3, 5)
#: blocks per stage allowed in each stage (stage 5 -- B0's four-block stage -- allows one more)
DEPTHS: tuple[tuple[int, ...], ...] = ((1, 2, 3),) * 5 + ((1, 2, 3, 4),) + ((1, 2, 3),)
STEM_CHANNELS = 32
LAST_CHANNELS = 1280
INPUT_SHAPE: tuple[int, int, int, int] = (1, 3, 224, 224)

_STAGE_RE = re.compile(r"e(\d+)k(\d+)l(\d+)(\+se)?")


@dataclass(frozen=True)
class StageChoice:
    """The choices of one stage: expansion, depthwise kernel, number of blocks, squeeze-excitation."""

    e: int
    k: int
    l: int  # noqa: E741 - the dataset's name
    se: bool

    def __str__(self) -> str:
        return f"e{self.e}k{self.k}l{self.l}" + ("+se" if self.se else "")


#: an architecture: one `StageChoice` per stage of `STAGES`
Arch = tuple[StageChoice, ...]


def round8(v: float) -> int:
    """Round to the nearest multiple of 8, never below 90% of ``v`` (EfficientNet's rule)."""
    r = max(8, int(v + 4) // 8 * 8)
    return r + 8 if r < 0.9 * v else r


def validate(arch: Sequence[Any]) -> Arch:
    """One `StageChoice` (or (e, k, l, se) tuple) per stage, each within the space; ValueError otherwise."""
    arch = list(arch)
    if len(arch) != len(STAGES):
        raise ValueError(f"ANB needs one choice per stage: {len(STAGES)} expected, got {len(arch)}")
    out = []
    for i, c in enumerate(arch):
        if not isinstance(c, StageChoice):
            try:
                e, k, l, se = c
            except (TypeError, ValueError):
                raise ValueError(f"ANB stage {i}: expected (e, k, l, se), got {c!r}") from None
            c = StageChoice(int(e), int(k), int(l), bool(se))
        if c.e not in EXPANSIONS or c.k not in KERNELS or c.l not in DEPTHS[i]:
            raise ValueError(f"ANB stage {i}: {c} is outside the space (e in {EXPANSIONS}, k in {KERNELS}, "
                             f"l in {DEPTHS[i]})")
        out.append(c)
    return tuple(out)


def _flag(v: Any) -> bool:
    s = str(v).strip().lower()
    if s in ("true", "1"):
        return True
    if s in ("false", "0"):
        return False
    raise ValueError(f"ANB: expected True or False, got {v!r}")


def from_row(row: Mapping[str, Any]) -> Arch:
    """The architecture of a dataset row (columns ``block{b}_e``, ``_k``, ``_l``, ``_se`` for b = 0..6)."""
    try:
        return validate([(int(row[f"block{b}_e"]), int(row[f"block{b}_k"]), int(row[f"block{b}_l"]),
                          _flag(row[f"block{b}_se"])) for b in range(len(STAGES))])
    except KeyError as e:
        raise ValueError(f"ANB row lacks column {e.args[0]!r}") from None


def encode(arch: Sequence[Any]) -> str:
    """``e1k3l2+se-e4k5l1-...``: the stages' choices joined by ``-``."""
    return "-".join(str(c) for c in validate(arch))


def decode(text: str) -> Arch:
    """Inverse of `encode`; ValueError for a malformed string."""
    parts = text.strip().split("-")
    out = []
    for p in parts:
        m = _STAGE_RE.fullmatch(p.strip())
        if m is None:
            raise ValueError(f"ANB encoding {text!r}: stage {p!r} is not 'e<E>k<K>l<L>[+se]'")
        out.append((int(m.group(1)), int(m.group(2)), int(m.group(3)), bool(m.group(4))))
    return validate(out)


def _blocks(arch: Arch) -> list[tuple[int, int, int, StageChoice]]:
    """(input channels, output channels, stride, stage choice) of every block."""
    out = []
    for (c_in, c_out, stride), c in zip(STAGES, arch):
        for j in range(c.l):
            out.append((c_in if j == 0 else c_out, c_out, stride if j == 0 else 1, c))
    return out


# ------------------------------------------------------------------------------------------------------
# direct IR builder


def _block(b: NetworkBuilder, fx: FxNames, name: str, x: int, c_in: int, c_out: int, stride: int,
           c: StageChoice) -> int:
    mid = round8(c_in * c.e)
    y = x
    if c.e != 1:
        y = b.conv(f"{name}.expand.0", y, mid, 1)
        y = b.same(T.BATCH_NORM, f"{name}.expand.1", y)
        y = b.same(T.RELU, f"{name}.expand.2", y)
    y = b.conv(f"{name}.depthwise.0", y, mid, c.k, stride=stride, padding=c.k // 2, groups=mid)
    y = b.same(T.BATCH_NORM, f"{name}.depthwise.1", y)
    y = b.same(T.RELU, f"{name}.depthwise.2", y)
    if c.se:
        s = b.global_pool(f"{name}.se.pool", y)
        s = b.conv(f"{name}.se.reduce", s, max(1, c_in // 4), 1)
        s = b.same(T.RELU, f"{name}.se.act", s)
        s = b.conv(f"{name}.se.expand", s, mid, 1)
        s = b.same(T.HARDSIGMOID, f"{name}.se.gate", s)
        y = b.add(T.MUL, fx("mul"), [y, s], b.out_shape(y))
    y = b.conv(f"{name}.project.0", y, c_out, 1)
    y = b.same(T.BATCH_NORM, f"{name}.project.1", y)
    if stride == 1 and c_in == c_out:
        y = b.same(T.ADD, fx("add"), [y, x])
    return y


def build_network(arch: Sequence[Any], num_classes: int = 1000, resolution: int = 224) -> Network:
    """The IR of architecture ``arch`` (one `StageChoice` per stage), built without torch."""
    arch = validate(arch)
    b = NetworkBuilder("anb")
    fx = FxNames()
    x = b.input("x", (1, 3, resolution, resolution))
    x = b.conv("stem.0", x, STEM_CHANNELS, 3, stride=2, padding=1)
    x = b.same(T.BATCH_NORM, "stem.1", x)
    x = b.same(T.RELU, "stem.2", x)
    for i, (c_in, c_out, stride, c) in enumerate(_blocks(arch)):
        x = _block(b, fx, f"blocks.{i}", x, c_in, c_out, stride, c)
    x = b.conv("head.0", x, LAST_CHANNELS, 1)
    x = b.same(T.BATCH_NORM, "head.1", x)
    x = b.same(T.RELU, "head.2", x)
    x = b.global_pool("pool", x)
    n, ch = b.out_shape(x)[:2]
    x = b.add(T.FLATTEN, "flatten", [x], (n, ch))
    b.linear("classifier", x, num_classes)
    return b.build()


def params(arch: Sequence[Any], num_classes: int = 1000) -> int:
    """Parameters of the network: convolution and FC weights, batch-norm scale and shift, the biases of the
    SE convolutions and the classifier (the dataset's ``params`` column, in units)."""
    net = build_network(arch, num_classes)
    biases = sum(int(net.c_out[i]) for i, n in enumerate(net.names)
                 if n.endswith((".se.reduce", ".se.expand")) or n == "classifier")
    return int(round(net.total_weights)) + biases


# ------------------------------------------------------------------------------------------------------
# torch builder


def build_module(arch: Sequence[Any], num_classes: int = 1000) -> Any:
    """The network of architecture ``arch`` as an ``nn.Module`` (eval mode; any input resolution)."""
    return _torch()["ANBNet"](validate(arch), num_classes).eval()


@functools.cache
def _torch() -> dict[str, type]:
    import torch
    import torch.nn as nn

    from annette_torch.zoo_blocks import ConvBNAct as conv_bn  # Conv2d (no bias), BatchNorm2d, ReLU

    class SE(nn.Module):
        """Squeeze-excitation with a hard-sigmoid gate."""

        def __init__(self, channels: int, squeeze: int) -> None:
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.reduce = nn.Conv2d(channels, squeeze, 1)
            self.act = nn.ReLU()
            self.expand = nn.Conv2d(squeeze, channels, 1)
            self.gate = nn.Hardsigmoid()

        def forward(self, x):
            return x * self.gate(self.expand(self.act(self.reduce(self.pool(x)))))

    class MBConv(nn.Module):
        """Expansion (e != 1), depthwise, optional SE, projection; residual when shapes match."""

        def __init__(self, c_in: int, c_out: int, stride: int, c: StageChoice) -> None:
            super().__init__()
            mid = round8(c_in * c.e)
            self.expand = conv_bn(c_in, mid, 1) if c.e != 1 else None
            self.depthwise = conv_bn(mid, mid, c.k, stride, groups=mid)
            self.se = SE(mid, max(1, c_in // 4)) if c.se else None
            self.project = conv_bn(mid, c_out, 1, act=None)
            self.residual = stride == 1 and c_in == c_out

        def forward(self, x):
            y = x if self.expand is None else self.expand(x)
            y = self.depthwise(y)
            if self.se is not None:
                y = self.se(y)
            y = self.project(y)
            return y + x if self.residual else y

    class ANBNet(nn.Module):
        """Stem, the MBConv blocks of the seven stages, head conv, pooling, classifier."""

        def __init__(self, arch: Arch, num_classes: int) -> None:
            super().__init__()
            self.stem = conv_bn(3, STEM_CHANNELS, 3, 2)
            self.blocks = nn.ModuleList(MBConv(ci, co, s, c) for ci, co, s, c in _blocks(arch))
            self.head = conv_bn(STAGES[-1][1], LAST_CHANNELS, 1)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Linear(LAST_CHANNELS, num_classes)

        def forward(self, x):
            x = self.stem(x)
            for block in self.blocks:
                x = block(x)
            return self.classifier(torch.flatten(self.pool(self.head(x)), 1))

    return {"ANBNet": ANBNet, "MBConv": MBConv, "SE": SE}
