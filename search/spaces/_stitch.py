"""A network stitched from traced parts: each part (stem, block, head) traced once on its own input and cached,
then joined end to end, so that a search builds a candidate's IR in about a millisecond instead of tracing
the whole module.

The stitched network has the traced network's layers, types, integer columns and edges; its layer names are
the parts' names under their module path (``blocks.3.matmul`` where a whole-module trace says ``matmul_6``),
and the ``module`` / ``scope`` attributes carry that path too.
"""

from __future__ import annotations

from typing import Callable, Hashable, Sequence

import numpy as np

from ...ir import INT_COLUMNS, Network

__all__ = ["PartCache", "as_part", "same_layers"]

#: a traced part ready to join: types, int-column matrix, local edges (-1: the part's input), names, the
#: index of its output layer, attributes (lists, one value per layer)
_Part = tuple[np.ndarray, np.ndarray, np.ndarray, list[str], int, dict[str, list]]


class PartCache:
    """Traced parts by key; `stitch` joins them."""

    def __init__(self) -> None:
        self._parts: dict[Hashable, _Part] = {}

    def part(self, key: Hashable, trace: Callable[[], Network], keep_input: bool = False) -> _Part:
        """The part of ``key``, traced by ``trace()`` on first use (its Input layer dropped unless
        ``keep_input``: the network's own input)."""
        p = self._parts.get((key, keep_input))
        if p is None:
            p = self._parts[(key, keep_input)] = as_part(trace(), keep_input)
        return p

    @staticmethod
    def stitch(name: str, parts: Sequence[tuple[_Part, str]]) -> Network:
        """The parts, each ``(part, module path)``, joined in order: each part reads the previous one's output."""
        types, mats, edges, names = [], [], [], []
        attrs: dict[str, list] = {}
        at, out = 0, -1
        for (t, mat, e, nm, o, a), prefix in parts:
            if len(e):
                edges.append(np.where(e < 0, out, e + at))
            cols = dict(a)
            mods = cols.get("module", [None] * len(t))
            scopes = cols.get("scope", [None] * len(t))
            if prefix:  # module paths under the part's path; a function node at the part's top level is in its scope
                cols["module"] = [None if m is None else f"{prefix}.{m}" for m in mods]
                cols["scope"] = [(f"{prefix}.{sc}" if sc is not None else (prefix if m is None and int(ty) else None))
                                 for m, sc, ty in zip(mods, scopes, t)]
            for k in set(attrs) | set(cols):
                attrs.setdefault(k, [None] * at).extend(cols.get(k, [None] * len(t)))
            types.append(t)
            mats.append(mat)
            names.extend(f"{prefix}.{n}" if prefix and int(ty) else n for n, ty in zip(nm, t))  # inputs keep theirs
            out = at + o
            at += len(t)
        e = np.concatenate(edges) if edges else np.zeros((0, 2), np.int64)
        return Network.from_matrix(name, names, np.concatenate(types), np.hstack(mats), e,
                                   {k: v for k, v in attrs.items() if any(x is not None for x in v)})


def as_part(net: Network, keep_input: bool = False) -> _Part:
    """A traced network (one Input layer first, one output) as a part to join; its Input layer dropped unless
    ``keep_input``."""
    first = 0 if keep_input else 1
    sinks = np.flatnonzero(net.n_outputs == 0)
    if len(sinks) != 1:
        raise ValueError(f"part {net.name!r} has {len(sinks)} outputs; one expected")
    mat = np.vstack([net.cols[c] for c in INT_COLUMNS])[:, first:]
    attrs = {k: list(v[first:]) for k, v in net.attrs.items()}
    return (net.types[first:].copy(), mat, net.edges - first, list(net.names[first:]), int(sinks[0]) - first, attrs)


def same_layers(a: Network, b: Network) -> bool:
    """Same layer types, integer columns and edges (names aside): the same estimate."""
    return (len(a) == len(b) and np.array_equal(a.types, b.types) and np.array_equal(a.edges, b.edges)
            and all(np.array_equal(a.cols[c], b.cols[c]) for c in INT_COLUMNS))
