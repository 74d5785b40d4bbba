"""Several networks side by side in one graph, so one compiled model measures several kernels."""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from ...ir import INT_COLUMNS, Network
from .base import SuiteError

__all__ = ["multi_kernel"]


def multi_kernel(networks: Sequence[Network], name: str | None = None) -> Network:
    """Independent networks side by side in one graph: each keeps its own input(s), nothing connects them,
    so a toolchain cannot fuse across kernels; layer ``L`` of network ``i`` is named ``k{i}/L``.

    Measuring several kernels in one compiled model cuts the per-model overhead (compile, session setup).
    Layer attributes (``attrs``) are kept.
    """
    nets = list(networks)
    if not nets:
        raise SuiteError("multi_kernel needs at least one network")
    names: list[str] = []
    for i, n in enumerate(nets):
        names.extend(f"k{i}/{x}" for x in n.names)
    sizes = [len(n) for n in nets]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    edges = [n.edges + off for n, off in zip(nets, offsets) if n.edges.size]
    keys = sorted({k for n in nets for k in n.attrs})
    attrs = {k: [v for n in nets for v in (n.attrs.get(k) or [None] * len(n))] for k in keys}
    if name is None:
        joined = "+".join(n.name for n in nets)
        name = joined if len(joined) <= 120 else \
            f"multi{len(nets)}-{hashlib.sha1(joined.encode()).hexdigest()[:10]}"
    return Network(name=name, names=names, types=np.concatenate([n.types for n in nets]),
                   cols={c: np.concatenate([n.cols[c] for n in nets]) for c in INT_COLUMNS},
                   edges=np.concatenate(edges) if edges else np.zeros((0, 2), np.int64), attrs=attrs)
