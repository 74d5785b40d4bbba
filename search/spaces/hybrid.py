"""Hybrid convolution + attention space in the style of MobileViT / EfficientFormer: convolution stages at
high resolution, then attention stages on the tokens of the coarse feature maps, with searchable widths,
depths, and per block the expansion (convolution) or the heads and MLP ratio (attention).

A network (input 1x3x224x224): a stem (3x3 convolution, stride 2, to `STEM_CHANNELS`, BatchNorm, ReLU); two
convolution stages (`STAGES` kind ``c``) of inverted-residual blocks (1x1 expansion by ``e``, 3x3 depthwise,
1x1 projection, BatchNorm and ReLU; the first block of a stage has stride 2, the others add their input);
two attention stages (kind ``a``), each entered by a 3x3 stride-2 convolution with BatchNorm to the stage's
width whose output is flattened to tokens (the second stage folds the first one's tokens back to their grid
first), followed by pre-norm transformer blocks (heads of `HEAD_DIM` = 32 channels, MLP ratio ``r``); a final
LayerNorm, the mean over the tokens and a classifier. At 224x224 the convolution stages run at 56x56 and
28x28, the attention stages on 196 and 49 tokens.

An architecture is a tuple of `Stage`; its encoding joins the stages with ``-``, each as its kind and width
followed by one ``_``-separated choice per block: ``c32_e4_e4-c48_e4_e6-a160_h4r2_h2r4-a224_h4r4``. The
first block of each attention stage holds the stage's entry convolution.

For `LatencyTable` / the ProxylessNAS loop the stage widths are fixed per table (`latency_table`) and each
stage has as many rows as its deepest choice; rows after a stage's shallowest depth may choose ``skip``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ...ir import Network
from ...types import PlatformLike
from ._attention import blocks as _blocks
from ._attention import meta_trace

__all__ = ["STAGES", "EXPANSIONS", "HEADS", "MLP_RATIOS", "HEAD_DIM", "STEM_CHANNELS", "INPUT_SHAPE", "SKIP",
           "StageSpec", "Stage", "validate", "encode", "decode", "block_ops", "build_module", "build_network",
           "stitched_network",
           "sample", "table_ops", "from_choices", "table_network", "latency_table", "proxy_supernet",
           "DEFAULT_WIDTHS"]


@dataclass(frozen=True)
class StageSpec:
    """A stage of the space: its kind (``c`` convolution, ``a`` attention), widths and depths allowed."""

    kind: str
    widths: tuple[int, ...]
    depths: tuple[int, ...]


STAGES: tuple[StageSpec, ...] = (StageSpec("c", (24, 32, 40), (1, 2, 3)),
                                 StageSpec("c", (40, 48, 64), (1, 2, 3, 4)),
                                 StageSpec("a", (96, 128, 160, 192), (1, 2, 3, 4)),
                                 StageSpec("a", (160, 192, 224, 256), (1, 2, 3, 4)))
EXPANSIONS: tuple[int, ...] = (2, 4, 6)
HEADS: tuple[int, ...] = (2, 4, 6)
MLP_RATIOS: tuple[float, ...] = (2.0, 3.0, 4.0)
HEAD_DIM = 32
STEM_CHANNELS = 16
INPUT_SHAPE: tuple[int, int, int, int] = (1, 3, 224, 224)
#: the stage widths `latency_table` uses by default
DEFAULT_WIDTHS: tuple[int, ...] = (32, 48, 128, 192)
SKIP = "skip"

_CONV_RE = re.compile(r"e(\d+)")
_ATTN_RE = re.compile(r"h(\d+)r(\d+(?:\.\d+)?)")
_STAGE_RE = re.compile(r"([ca])(\d+)")
_FORM = "stages joined by '-', each '<c|a><WIDTH>_<block>_<block>...', e.g. 'c32_e4_e4-c48_e4-a128_h4r2-a192_h4r4'"


def block_ops(kind: str) -> tuple[str, ...]:
    """The choices of one block of a ``c`` (``e2`` ...) or ``a`` (``h4r2`` ...) stage."""
    if kind == "c":
        return tuple(f"e{e}" for e in EXPANSIONS)
    return tuple(f"h{h}r{r:g}" for h in HEADS for r in MLP_RATIOS)


def _parse_block(kind: str, text: str) -> tuple[int, ...] | tuple[int, float]:
    """``e4`` -> (4,) / ``h4r2`` -> (4, 2.0), within the space; ValueError otherwise."""
    if kind == "c":
        m = _CONV_RE.fullmatch(text)
        if m is None or int(m.group(1)) not in EXPANSIONS:
            raise ValueError(f"hybrid convolution block {text!r} is not 'e<E>' with E in {EXPANSIONS}")
        return (int(m.group(1)),)
    m = _ATTN_RE.fullmatch(text)
    if m is None or int(m.group(1)) not in HEADS or float(m.group(2)) not in MLP_RATIOS:
        raise ValueError(f"hybrid attention block {text!r} is not 'h<HEADS>r<RATIO>' with heads in {HEADS}, "
                         f"ratio in {', '.join(f'{r:g}' for r in MLP_RATIOS)}")
    return int(m.group(1)), float(m.group(2))


@dataclass(frozen=True)
class Stage:
    """One stage of an architecture: its width and its blocks' choices (``e4`` / ``h4r2``, one per block)."""

    width: int
    blocks: tuple[str, ...]

    @property
    def depth(self) -> int:
        return len(self.blocks)


def validate(arch: Sequence[Any]) -> tuple[Stage, ...]:
    """One `Stage` (or ``(width, [block choices])``) per stage of `STAGES`, each within the space."""
    arch = list(arch)
    if len(arch) != len(STAGES):
        raise ValueError(f"hybrid: one choice per stage expected ({len(STAGES)}), got {len(arch)}")
    out = []
    for i, (st, spec) in enumerate(zip(arch, STAGES)):
        if not isinstance(st, Stage):
            try:
                w, blks = st
                st = Stage(int(w), tuple(str(b) for b in blks))
            except (TypeError, ValueError):
                raise ValueError(f"hybrid stage {i}: expected (width, [blocks]), got {st!r}") from None
        if st.width not in spec.widths or st.depth not in spec.depths:
            raise ValueError(f"hybrid stage {i}: width {st.width} / depth {st.depth} outside the space (widths "
                             f"{spec.widths}, depths {spec.depths})")
        for b in st.blocks:
            _parse_block(spec.kind, b)
        out.append(st)
    return tuple(out)


def encode(arch: Sequence[Any]) -> str:
    """``c32_e4_e4-c48_e4-a128_h4r2-a192_h4r4``."""
    return "-".join("_".join([f"{spec.kind}{st.width}", *st.blocks]) for st, spec in zip(validate(arch), STAGES))


def decode(text: str) -> tuple[Stage, ...]:
    """Inverse of `encode`; ValueError (one line) for a malformed string."""
    parts = text.strip().split("-")
    if len(parts) != len(STAGES):
        raise ValueError(f"hybrid encoding {text!r}: {len(STAGES)} stages expected, got {len(parts)} ({_FORM})")
    out = []
    for i, (p, spec) in enumerate(zip(parts, STAGES)):
        head, *blks = p.strip().split("_")
        m = _STAGE_RE.fullmatch(head)
        if m is None or m.group(1) != spec.kind or not blks:
            raise ValueError(f"hybrid encoding {text!r}: stage {i} {p!r} is not '{spec.kind}<WIDTH>_<block>...' "
                             f"({_FORM})")
        out.append(Stage(int(m.group(2)), tuple(b.strip() for b in blks)))
    return validate(out)


def sample(n: int, rng: Any) -> list[tuple[Stage, ...]]:
    """``n`` distinct architectures drawn uniformly per choice (per stage width and depth, per block its op)
    with the numpy generator ``rng`` (fewer when the draws repeat too often)."""
    out: dict[str, tuple[Stage, ...]] = {}
    for _ in range(20 * n):
        if len(out) >= n:
            break
        a = tuple(Stage(int(rng.choice(s.widths)), tuple(str(rng.choice(block_ops(s.kind)))
                                                          for _ in range(int(rng.choice(s.depths)))))
                  for s in STAGES)
        out.setdefault(encode(a), a)
    return list(out.values())


def _down(h: int) -> int:
    """Output size of a 3x3, stride-2, padding-1 convolution."""
    return (h - 1) // 2 + 1


def _plan(widths: Sequence[int], resolution: int, in_channels: int = 3) -> list[tuple[int, tuple[int, int]]]:
    """(input channels, input grid) of each stage (the grid its entry reads)."""
    h = _down(resolution)
    c = STEM_CHANNELS
    out = []
    for w in widths:
        out.append((c, (h, h)))
        c, h = w, _down(h)
    return out


# ------------------------------------------------------------------------------------------------------
# torch builder and IR


def _stage_blocks(i: int, width: int, ops: Sequence[str], c_in: int, grid: tuple[int, int], head_dim: int) -> list:
    """The modules of stage ``i``'s blocks (`SKIP` -> ``nn.Identity``)."""
    import torch.nn as nn
    B = _blocks()
    kind = STAGES[i].kind
    mods = []
    for j, op in enumerate(ops):
        if op == SKIP:
            mods.append(nn.Identity())
        elif kind == "c":
            (e,) = _parse_block("c", op)
            mods.append(B["MBConv"](c_in if j == 0 else width, width, 2 if j == 0 else 1, e))
        else:
            h, r = _parse_block("a", op)
            blk = B["Block"](width, h, r, head_dim)
            if j == 0:  # the stage's entry: from an image (after a conv stage) or from the previous tokens
                prev_tokens = i > 0 and STAGES[i - 1].kind == "a"
                blk = B["Sequence"](B["ToTokens"](c_in, width, grid if prev_tokens else None), blk)
            mods.append(blk)
    return mods


@functools.cache
def _net_class() -> type:
    import torch.nn as nn
    B = _blocks()

    class HybridNet(nn.Module):
        """Stem, the stages' blocks (one flat list), token head."""

        def __init__(self, stages: Sequence[Stage], num_classes: int, resolution: int, in_channels: int,
                     head_dim: int = HEAD_DIM, stem: int = STEM_CHANNELS) -> None:
            super().__init__()
            self.stem = B["ConvStem"](in_channels, stem)
            plan = _plan([s.width for s in stages], resolution)
            plan[0] = (stem, plan[0][1])
            self.blocks = nn.ModuleList(m for i, (st, (c, g)) in enumerate(zip(stages, plan))
                                        for m in _stage_blocks(i, st.width, st.blocks, c, g, head_dim))
            self.head = B["TokenHead"](stages[-1].width, num_classes)

        def forward(self, x):
            x = self.stem(x)
            for blk in self.blocks:
                x = blk(x)
            return self.head(x)

    return HybridNet


def build_module(arch: Sequence[Any], num_classes: int = 1000, resolution: int = 224, in_channels: int = 3) -> Any:
    """The network of ``arch`` as an ``nn.Module`` (eval mode) for ``resolution`` x ``resolution`` inputs."""
    return _net_class()(validate(arch), num_classes, resolution, in_channels).eval()


def _check_resolution(resolution: int) -> None:
    if not isinstance(resolution, int) or resolution < 1:
        raise ValueError(f"hybrid input resolution must be a positive integer, got {resolution!r}")


def build_network(arch: Sequence[Any], num_classes: int = 1000, resolution: int = 224) -> Network:
    """The IR of ``arch``: `build_module` on the meta device (no weights), traced at 1x3xRxR."""
    a = validate(arch)
    _check_resolution(resolution)
    return meta_trace(lambda: _net_class()(a, num_classes, resolution, 3), (1, 3, resolution, resolution),
                      "hybrid")


def stitched_network(arch: Sequence[Any], num_classes: int = 1000, resolution: int = 224, parts: Any = None) -> Network:
    """`build_network`'s layers, types, columns and edges, joined from parts traced once each and kept in
    ``parts`` (a `PartCache`; give the same one to every call): about a millisecond per network."""
    from ._stitch import PartCache
    a = validate(arch)
    _check_resolution(resolution)
    cache = parts if parts is not None else PartCache()
    B = _blocks()
    r = resolution
    seq = [(cache.part(("stem", r), lambda: meta_trace(lambda: B["ConvStem"](3, STEM_CHANNELS), (1, 3, r, r), "stem"),
                       keep_input=True), "stem")]
    plan = _plan([st.width for st in a], resolution)
    k = 0
    for i, (st, (c, (h, _))) in enumerate(zip(a, plan)):
        tokens_in = i > 0 and STAGES[i - 1].kind == "a"
        g = _down(h)
        for j, op in enumerate(st.blocks):
            if j == 0:
                shape = (1, h * h, c) if tokens_in else (1, c, h, h)
            else:
                shape = (1, st.width, g, g) if STAGES[i].kind == "c" else (1, g * g, st.width)
            key = ("block", i, j == 0, st.width, c, h, op)
            mod = lambda i=i, w=st.width, c=c, h=h, op=op, j=j: _stage_blocks(  # noqa: E731
                i, w, [op] * (min(j, 1) + 1), c, (h, h), HEAD_DIM)[min(j, 1)]
            seq.append((cache.part(key, lambda mod=mod, shape=shape: meta_trace(mod, shape, "block")), f"blocks.{k}"))
            k += 1
    g = _down(plan[-1][1][0])
    w = a[-1].width
    seq.append((cache.part(("head", w, num_classes, g),
                           lambda: meta_trace(lambda: B["TokenHead"](w, num_classes), (1, g * g, w), "head")), "head"))
    return cache.stitch("hybrid", seq)


# ------------------------------------------------------------------------------------------------------
# latency table and proxy supernet (ProxylessNAS loop)


def table_ops() -> list[list[str]]:
    """The candidates of each table row: per stage, as many rows as its deepest choice; `SKIP` allowed from
    the stage's shallowest depth on."""
    return [list(block_ops(s.kind)) + ([SKIP] if j >= s.depths[0] else [])
            for s in STAGES for j in range(s.depths[-1])]


def from_choices(choices: Sequence[str], widths: Sequence[int] = DEFAULT_WIDTHS) -> tuple[Stage, ...]:
    """The architecture of a table path (one op per row, `SKIP` dropping a block) at stage ``widths``."""
    ops = table_ops()
    if len(choices) != len(ops):
        raise ValueError(f"hybrid table path: {len(ops)} choices expected, got {len(choices)}")
    for b, c in enumerate(choices):
        if c not in ops[b]:
            raise ValueError(f"hybrid table row {b} has no candidate {c!r}")
    stages, at = [], 0
    for s, w in zip(STAGES, widths):
        row = list(choices[at: at + s.depths[-1]])
        at += s.depths[-1]
        stages.append(Stage(int(w), tuple(c for c in row if c != SKIP)))
    return validate(stages)


def table_network(choices: Sequence[str], widths: Sequence[int] = DEFAULT_WIDTHS, num_classes: int = 1000,
                  resolution: int = 224) -> Network:
    """The full-size network of a table path (`from_choices`)."""
    return build_network(from_choices(choices, widths), num_classes, resolution)


def latency_table(platform: PlatformLike = "zcu102", widths: Sequence[int] = DEFAULT_WIDTHS, resolution: int = 224,
                  num_classes: int = 1000, latency: str = "latency") -> Any:
    """The `LatencyTable` of the blocks at stage ``widths``: rows as `table_ops`; ``fixed_ms`` is the stem
    (with the network input) plus the head."""
    from ._tables import block_table
    _check_resolution(resolution)
    widths = tuple(int(w) for w in widths)
    validate([Stage(w, (block_ops(s.kind)[0],) * s.depths[0]) for w, s in zip(widths, STAGES)])
    B = _blocks()
    plan = _plan(widths, resolution)
    rows: list[list[Network | None]] = []
    for i, (s, w, (c, (h, _))) in enumerate(zip(STAGES, widths, plan)):
        tokens_in = i > 0 and STAGES[i - 1].kind == "a"
        first = (1, h * h, c) if tokens_in else (1, c, h, h)
        g = _down(h)
        rest = (1, w, g, g) if s.kind == "c" else (1, g * g, w)
        for j in range(s.depths[-1]):
            shape = first if j == 0 else rest
            row: list[Network | None] = []
            for op in block_ops(s.kind):
                mod = lambda op=op, j=j, i=i, w=w, c=c, h=h: _stage_blocks(  # noqa: E731
                    i, w, [op] * (j + 1), c, (h, h), HEAD_DIM)[j]
                row.append(meta_trace(mod, shape, f"hybrid_s{i}b{j}_{op}"))
            if j >= s.depths[0]:
                row.append(None)
            rows.append(row)
    r = resolution
    stem = meta_trace(lambda: B["ConvStem"](3, STEM_CHANNELS), (1, 3, r, r), "hybrid_stem")
    g = _down(plan[-1][1][0])
    head = meta_trace(lambda: B["TokenHead"](widths[-1], num_classes), (1, g * g, widths[-1]), "hybrid_head")
    meta = {"space": "hybrid", "widths": list(widths), "resolution": resolution, "num_classes": num_classes}
    return block_table(platform, stem, rows, head, table_ops(), meta, latency)


def proxy_supernet(width_mult: float = 0.25, in_channels: int = 1, num_classes: int = 10,
                   widths: Sequence[int] = DEFAULT_WIDTHS, head_dim: int = 8) -> Any:
    """A narrow supernet of the table's rows for a proxy task (e.g. 8x8 digits; any resolution): per row an
    `annette_torch.lookup.Choice` of its candidates named as `table_ops` (``nn.Identity`` for `SKIP`), so
    ``ProxylessSearch(supernet=..., table=latency_table(...))`` trains it. Widths scale by ``width_mult``
    (rounded to multiples of 8); the attention stages fold tokens back to their grid at the proxy size."""
    import torch.nn as nn

    from ...lookup import Choice
    B = _blocks()
    ws = [max(8, int(round(w * width_mult / 8)) * 8) for w in widths]
    stem_c = max(8, int(round(STEM_CHANNELS * width_mult / 8)) * 8)

    class ProxyHybrid(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = B["ConvStem"](in_channels, stem_c)
            choices = []
            c = stem_c
            for i, (s, w) in enumerate(zip(STAGES, ws)):
                for j in range(s.depths[-1]):
                    ops = list(block_ops(s.kind)) + ([SKIP] if j >= s.depths[0] else [])
                    cands = []
                    for op in ops:
                        if op == SKIP:
                            cands.append(nn.Identity())
                        elif s.kind == "c":
                            cands.append(B["MBConv"](c if j == 0 else w, w, 2 if j == 0 else 1, int(op[1:])))
                        else:
                            blk = B["Block"](w, *_parse_block("a", op), head_dim)
                            if j == 0:
                                blk = B["Sequence"](_ProxyTokens(c, w, STAGES[i - 1].kind == "a"), blk)
                            cands.append(blk)
                    choices.append(Choice(*cands, names=ops))
                c = w
            self.blocks = nn.ModuleList(choices)
            self.head = B["TokenHead"](ws[-1], num_classes)

        def forward(self, x):
            x = self.stem(x)
            for blk in self.blocks:
                x = blk(x)
            return self.head(x)

    class _ProxyTokens(nn.Module):
        """`ToTokens` whose token grid is square and read from the token count (proxy inputs of any size)."""

        def __init__(self, c_in: int, dim: int, from_tokens: bool) -> None:
            super().__init__()
            self.from_tokens = from_tokens
            self.down = B["ToTokens"](c_in, dim).down

        def forward(self, x):
            if self.from_tokens:
                b, n, c = x.shape
                s = int(round(n ** 0.5))
                x = x.transpose(1, 2).reshape(b, c, s, s)
            return self.down(x).flatten(2).transpose(1, 2)

    return ProxyHybrid()
