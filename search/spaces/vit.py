"""Vision-transformer space in the style of AutoFormer / HAT: embedding dimension, depth, and per block the
number of attention heads and the MLP ratio.

A network: a 16x16 patch embedding (convolution, flatten, transpose, learnt position embedding) to ``embed``
channels, ``depth`` pre-norm transformer blocks (LayerNorm, multi-head self-attention with ``heads`` heads of
`HEAD_DIM` = 64 channels each -- AutoFormer's fixed head width --, residual; LayerNorm, Linear to
``round(embed * ratio)``, GELU, Linear, residual), a final LayerNorm, the mean over the tokens and a
classifier. Input 1x3x224x224 (196 tokens); any resolution that is a multiple of 16.

An architecture is a `ViTArch`; its encoding is ``e<EMBED>-h<HEADS>r<RATIO>-...``, one ``h..r..`` per block
(e.g. ``e240-h4r4-h4r3.5-h3r4-h4r4-h4r4-h4r4``). `build_module` gives the ``nn.Module``; `build_network` its IR
(the module built on torch's meta device and traced, so it is exactly what `annette_torch.trace` reads).

For `LatencyTable` / the ProxylessNAS loop (`latency_table`, `proxy_supernet`, `table_network`), the
embedding dimension is fixed per table and each of the `MAX_DEPTH` block rows chooses ``h<H>r<R>``; rows
from `MIN_DEPTH` on may also choose ``skip`` (all blocks have the same shape, so skipping any of them is the
shallower network).
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

__all__ = ["EMBED_DIMS", "DEPTHS", "HEADS", "MLP_RATIOS", "PATCH", "HEAD_DIM", "INPUT_SHAPE", "MIN_DEPTH", "MAX_DEPTH",
           "SKIP", "BLOCK_OPS", "ViTArch", "validate", "encode", "decode", "op_name", "parse_op", "build_module",
           "build_network", "stitched_network", "sample", "table_ops", "from_choices", "table_network", "latency_table",
           "proxy_supernet"]

EMBED_DIMS: tuple[int, ...] = (192, 240, 320, 384)
DEPTHS: tuple[int, ...] = tuple(range(6, 13))
HEADS: tuple[int, ...] = (3, 4, 5, 6)
MLP_RATIOS: tuple[float, ...] = (3.0, 3.5, 4.0)
PATCH = 16
HEAD_DIM = 64
INPUT_SHAPE: tuple[int, int, int, int] = (1, 3, 224, 224)
MIN_DEPTH, MAX_DEPTH = DEPTHS[0], DEPTHS[-1]
#: the zero op of a table row (a skipped block)
SKIP = "skip"

_OP_RE = re.compile(r"h(\d+)r(\d+(?:\.\d+)?)")
_EMBED_RE = re.compile(r"e(\d+)")
_FORM = "'e<EMBED>-h<HEADS>r<RATIO>-...' (one h..r.. per block), e.g. 'e240-" + "-".join(["h4r4"] * MIN_DEPTH) + "'"


def op_name(heads: int, ratio: float) -> str:
    """A block's choice as text: ``h4r3.5``."""
    return f"h{heads}r{ratio:g}"


#: the choices of one block, as `op_name` gives them
BLOCK_OPS: tuple[str, ...] = tuple(op_name(h, r) for h in HEADS for r in MLP_RATIOS)


def parse_op(text: str) -> tuple[int, float]:
    """``h4r3.5`` -> (4, 3.5) within the space; ValueError otherwise."""
    m = _OP_RE.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"ViT block {text!r} is not 'h<HEADS>r<RATIO>' (e.g. h4r3.5)")
    h, r = int(m.group(1)), float(m.group(2))
    if h not in HEADS or r not in MLP_RATIOS:
        raise ValueError(f"ViT block {text!r} is outside the space (heads in {HEADS}, MLP ratio in "
                         f"{', '.join(f'{v:g}' for v in MLP_RATIOS)})")
    return h, r


@dataclass(frozen=True)
class ViTArch:
    """An architecture: the embedding dimension and (heads, MLP ratio) per block."""

    embed: int
    blocks: tuple[tuple[int, float], ...]

    @property
    def depth(self) -> int:
        """Number of transformer blocks."""
        return len(self.blocks)


def validate(arch: Any) -> ViTArch:
    """A `ViTArch` (or ``(embed, [(heads, ratio), ...])``) within the space; ValueError otherwise."""
    if not isinstance(arch, ViTArch):
        try:
            embed, blks = arch
            arch = ViTArch(int(embed), tuple((int(h), float(r)) for h, r in blks))
        except (TypeError, ValueError):
            raise ValueError(f"ViT: expected (embed, [(heads, ratio), ...]), got {arch!r}") from None
    if arch.embed not in EMBED_DIMS:
        raise ValueError(f"ViT embedding dimension {arch.embed} is outside the space ({EMBED_DIMS})")
    if arch.depth not in DEPTHS:
        raise ValueError(f"ViT depth {arch.depth} is outside the space ({MIN_DEPTH}..{MAX_DEPTH} blocks)")
    for h, r in arch.blocks:
        parse_op(op_name(h, r))
    return arch


def encode(arch: Any) -> str:
    """``e240-h4r4-h4r3.5-...``."""
    a = validate(arch)
    return "-".join([f"e{a.embed}"] + [op_name(h, r) for h, r in a.blocks])


def decode(text: str) -> ViTArch:
    """Inverse of `encode`; ValueError (one line) for a malformed string."""
    head, *rest = text.strip().split("-")
    m = _EMBED_RE.fullmatch(head.strip())
    if m is None or not rest:
        raise ValueError(f"ViT encoding {text!r}: expected {_FORM}")
    return validate(ViTArch(int(m.group(1)), tuple(parse_op(p) for p in rest)))


def sample(n: int, rng: Any) -> list[ViTArch]:
    """``n`` distinct architectures drawn uniformly per choice (embedding, depth, per block heads and ratio)
    with the numpy generator ``rng`` (fewer when the draws repeat too often)."""
    out: dict[str, ViTArch] = {}
    for _ in range(20 * n):
        if len(out) >= n:
            break
        depth = int(rng.choice(DEPTHS))
        a = ViTArch(int(rng.choice(EMBED_DIMS)), tuple((int(rng.choice(HEADS)), float(rng.choice(MLP_RATIOS)))
                                                       for _ in range(depth)))
        out.setdefault(encode(a), a)
    return list(out.values())


def _tokens(resolution: int) -> int:
    if resolution < PATCH or resolution % PATCH:
        raise ValueError(f"ViT input resolution must be a multiple of the patch size {PATCH}, got {resolution}")
    return (resolution // PATCH) ** 2


# ------------------------------------------------------------------------------------------------------
# torch builder and IR


def build_module(arch: Any, num_classes: int = 1000, resolution: int = 224, in_channels: int = 3) -> Any:
    """The network of ``arch`` as an ``nn.Module`` (eval mode) for ``resolution`` x ``resolution`` inputs."""
    return _net_class()(validate(arch), num_classes, resolution, in_channels).eval()


@functools.cache
def _net_class() -> type:
    import torch.nn as nn
    B = _blocks()

    class ViTNet(nn.Module):
        """Patch embedding, transformer blocks, token head."""

        def __init__(self, arch: ViTArch, num_classes: int, resolution: int, in_channels: int) -> None:
            super().__init__()
            self.embed = B["PatchEmbed"](in_channels, arch.embed, PATCH, _tokens(resolution))
            self.blocks = nn.ModuleList(B["Block"](arch.embed, h, r, HEAD_DIM) for h, r in arch.blocks)
            self.head = B["TokenHead"](arch.embed, num_classes)

        def forward(self, x):
            x = self.embed(x)
            for blk in self.blocks:
                x = blk(x)
            return self.head(x)

    return ViTNet


def build_network(arch: Any, num_classes: int = 1000, resolution: int = 224) -> Network:
    """The IR of ``arch``: `build_module` on the meta device (no weights), traced at 1x3xRxR."""
    a = validate(arch)
    _tokens(resolution)
    return meta_trace(lambda: _net_class()(a, num_classes, resolution, 3), (1, 3, resolution, resolution), "vit")


def stitched_network(arch: Any, num_classes: int = 1000, resolution: int = 224, parts: Any = None) -> Network:
    """`build_network`'s layers, types, columns and edges, joined from parts traced once each and kept in
    ``parts`` (a `PartCache`; give the same one to every call): about a millisecond per network."""
    from ._stitch import PartCache
    a = validate(arch)
    tokens = _tokens(resolution)
    cache = parts if parts is not None else PartCache()
    B = _blocks()
    shape = (1, tokens, a.embed)
    seq = [(cache.part(("stem", a.embed, resolution),
                       lambda: meta_trace(lambda: B["PatchEmbed"](3, a.embed, PATCH, tokens),
                                          (1, 3, resolution, resolution), "stem"), keep_input=True), "embed")]
    for i, (h, r) in enumerate(a.blocks):
        seq.append((cache.part(("block", a.embed, h, r, tokens),
                               lambda h=h, r=r: meta_trace(lambda: B["Block"](a.embed, h, r, HEAD_DIM), shape,
                                                           "block")), f"blocks.{i}"))
    seq.append((cache.part(("head", a.embed, num_classes, tokens),
                           lambda: meta_trace(lambda: B["TokenHead"](a.embed, num_classes), shape, "head")), "head"))
    return cache.stitch("vit", seq)


# ------------------------------------------------------------------------------------------------------
# latency table and proxy supernet (ProxylessNAS loop)


def table_ops() -> list[list[str]]:
    """The candidates of each of the `MAX_DEPTH` table rows: `BLOCK_OPS`, plus `SKIP` from `MIN_DEPTH` on."""
    return [list(BLOCK_OPS) + ([SKIP] if b >= MIN_DEPTH else []) for b in range(MAX_DEPTH)]


def from_choices(choices: Sequence[str], embed: int) -> ViTArch:
    """The architecture of a table path (one op per row, `SKIP` dropping a block) at embedding ``embed``."""
    if len(choices) != MAX_DEPTH:
        raise ValueError(f"ViT table path: {MAX_DEPTH} choices expected, got {len(choices)}")
    ops = table_ops()
    for b, c in enumerate(choices):
        if c not in ops[b]:
            raise ValueError(f"ViT table row {b} has no candidate {c!r}")
    return validate(ViTArch(int(embed), tuple(parse_op(c) for c in choices if c != SKIP)))


def table_network(choices: Sequence[str], embed: int = 240, num_classes: int = 1000,
                  resolution: int = 224) -> Network:
    """The full-size network of a table path (`from_choices`)."""
    return build_network(from_choices(choices, embed), num_classes, resolution)


def latency_table(platform: PlatformLike = "zcu102", embed: int = 240, resolution: int = 224,
                  num_classes: int = 1000, latency: str = "latency") -> Any:
    """The `LatencyTable` of the blocks at embedding dimension ``embed``: `MAX_DEPTH` rows of `table_ops`;
    ``fixed_ms`` is the patch embedding (with the network input) plus the head."""
    from ._tables import block_table
    if embed not in EMBED_DIMS:
        raise ValueError(f"ViT embedding dimension {embed} is outside the space ({EMBED_DIMS})")
    B = _blocks()
    tokens = _tokens(resolution)
    shape = (1, tokens, embed)
    cand = {op: meta_trace(lambda op=op: B["Block"](embed, *parse_op(op), HEAD_DIM), shape, f"vit_{op}")
            for op in BLOCK_OPS}
    rows = [[None if op == SKIP else cand[op] for op in ops] for ops in table_ops()]
    stem = meta_trace(lambda: B["PatchEmbed"](3, embed, PATCH, tokens), (1, 3, resolution, resolution), "vit_stem")
    head = meta_trace(lambda: B["TokenHead"](embed, num_classes), shape, "vit_head")
    meta = {"space": "vit", "embed": embed, "resolution": resolution, "num_classes": num_classes}
    return block_table(platform, stem, rows, head, table_ops(), meta, latency)


def proxy_supernet(embed: int = 32, in_channels: int = 1, resolution: int = 8, patch: int = 2,
                   num_classes: int = 10, head_dim: int = 8) -> Any:
    """A small supernet of the table's rows for a proxy task (e.g. 8x8 digits): per row an
    `annette_torch.lookup.Choice` of one transformer block per `BLOCK_OPS` entry (``nn.Identity`` for
    `SKIP`), named as `table_ops`, so ``ProxylessSearch(supernet=..., table=latency_table(...))`` trains it."""
    import torch.nn as nn

    from ...lookup import Choice
    B = _blocks()
    if resolution % patch:
        raise ValueError(f"proxy resolution {resolution} is not a multiple of the patch {patch}")

    class ProxyViT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = B["PatchEmbed"](in_channels, embed, patch, (resolution // patch) ** 2)
            self.blocks = nn.ModuleList(
                Choice(*[nn.Identity() if op == SKIP else B["Block"](embed, *parse_op(op), head_dim) for op in ops],
                       names=ops) for ops in table_ops())
            self.head = B["TokenHead"](embed, num_classes)

        def forward(self, x):
            x = self.embed(x)
            for blk in self.blocks:
                x = blk(x)
            return self.head(x)

    return ProxyViT()
