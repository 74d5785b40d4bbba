"""The `LatencyTable` of a block space whose parts are given as networks: a stem (holding the network's input),
rows of candidate block networks (None: the zero op ``skip``), and a head (writing the network's output).

Shared by the attention spaces (`vit`, `hybrid`); the same construction as `mbv2.latency_table`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ...ir import Network
from ...lookup import LatencyTable, block_latencies, mean_block_traffic
from ...platform import load_platform
from ...types import PlatformLike
from ._stitch import PartCache, as_part

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
    table = LatencyTable.build(nets, plat, None, fixed, [list(o) for o in ops], meta=meta, context_bytes=context,
                               latency=latency)
    seams = _seams(plat, stem, nets, head, context, latency)
    if not np.any(seams):
        return table
    lat = table.lat.copy()
    for b, row in enumerate(nets):
        for k, net in enumerate(row):
            if net is not None:
                lat[b, k] += seams[b]
    fixed_ms = table.fixed_ms + seams[-1]
    return LatencyTable(lat, fixed_ms, table.ops, table.platform, {**table.meta, "seam_ms": seams.tolist()})


def _seams(plat: Any, stem: Network, rows: Sequence[Sequence[Network | None]], head: Network,
           context: float | None, latency: str) -> np.ndarray:
    """What joining a block to the part before it costs beyond the two alone (ms): on a platform that runs
    part of a block on a host, the switch at their seam (e.g. the DPU's Add, then the host's LayerNorm), which
    neither block's own network holds. One value per row (its first candidate after the previous row's first;
    the blocks of these spaces begin and end with the same layer types whatever the candidate), and last the
    head's seam."""
    firsts = [next(n for n in row if n is not None) for row in rows]
    seq = [stem, *firsts, head]
    pairs = [PartCache.stitch("seam", [(as_part(a, keep_input=True), ""), (as_part(b), "")])
             for a, b in zip(seq[:-1], seq[1:])]
    alone = block_latencies(plat, seq, context_bytes=context, latency=latency)
    joined = block_latencies(plat, pairs, context_bytes=context, latency=latency)
    seams = joined - alone[:-1] - alone[1:]
    return np.where(np.abs(seams) > 1e-12, seams, 0.0)
