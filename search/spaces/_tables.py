"""The `LatencyTable` of a block space whose parts are given as networks: a stem (holding the network's input),
rows of candidate block networks (None: the zero op ``skip``), and a head (writing the network's output).

Shared by the attention spaces (`vit`, `hybrid`); the same construction as `mbv2.latency_table`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ...ir import Network
from ...lookup import LatencyTable, block_latencies, mean_block_traffic
from ...platform import load_platform
from ...types import PlatformLike

__all__ = ["block_table"]


def block_table(platform: PlatformLike, stem: Network, rows: Sequence[Sequence[Network | None]], head: Network,
                ops: Sequence[Sequence[str]], meta: Mapping[str, Any], latency: str = "latency") -> LatencyTable:
    """A table with one row per searchable block (its candidates' networks, each fed by an Input layer of the
    block's input shape) and ``fixed_ms`` = stem (with the network input) + head (with the network output),
    plus the platform's per-inference terms for ``latency="latency"``."""
    plat = load_platform(platform)
    nets = [list(r) for r in rows]
    fixed = [stem, head]
    context = mean_block_traffic(plat, nets, fixed)
    stem_ms = float(block_latencies(plat, [stem], count_input=True, context_bytes=context, latency=latency)[0])
    head_ms = float(block_latencies(plat, [head], context_bytes=context, count_output=True, latency=latency)[0])
    meta = {**meta, "stem_ms": stem_ms, "head_ms": head_ms}
    return LatencyTable.build(nets, plat, None, fixed, [list(o) for o in ops], meta=meta, context_bytes=context,
                              latency=latency)
