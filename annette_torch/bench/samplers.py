"""Samplers over a discrete parameter space ``{name: [allowed values]}``, each returning a list of config dicts.

* `grid` — every combination, in the space's key order (last key varies fastest);
* `random` — uniform draws;
* `sobol` / `lhs` — scrambled Sobol points / Latin-hypercube points from ``scipy.stats.qmc``; a unit-cube
  coordinate ``u`` picks value ``floor(u * len(values))`` of each list, so every value of a list covers an
  equal share of the cube (lists are used in their given order: give sorted lists for ordered parameters);
* `unrolling_aware` — the paper's feedback loop: once a first sweep has shown latency steps at multiples of
  an unrolling parameter ``s`` of some dimension, sample that dimension just below and just above each
  multiple (``s*k - width + 1 ... s*k + width``, i.e. ``width`` values on each side of the jump between
  ``s*k`` and ``s*k + 1``) within the range of the space's values; the other dimensions are drawn from the
  space;
* `order_space_filling` — reorders a config list so that every prefix is spread out (greedy farthest
  point), for budget-aware sweeps that run configs in order until the time is up.

All samplers are deterministic for a given seed, return each config at most once, and return fewer than
``n`` configs only when the space holds fewer. Values are returned as given in the space (Python objects,
not numpy scalars).
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import AnnetteError

__all__ = ["grid", "random", "sobol", "lhs", "unrolling_aware", "unrolling_values", "order_space_filling",
           "space_size", "SamplerError", "SAMPLERS"]

Space = Mapping[str, Sequence[Any]]

#: Refuse to enumerate grids larger than this (use a sampler instead).
MAX_GRID = 5_000_000


class SamplerError(AnnetteError):
    """A parameter space or sampler argument is unusable (empty value list, negative n, ...)."""


def _check(space: Space) -> list[tuple[str, list]]:
    if not isinstance(space, Mapping) or not space:
        raise SamplerError("a parameter space is a non-empty dict {name: [allowed values]}")
    items = []
    for k, v in space.items():
        if isinstance(v, (str, bytes)) or not isinstance(v, Sequence) and not isinstance(v, np.ndarray):
            raise SamplerError(f"parameter {k!r}: allowed values must be a list, got {type(v).__name__}")
        vals = _dedup_values(list(v))
        if not vals:
            raise SamplerError(f"parameter {k!r} has no allowed values")
        items.append((str(k), vals))
    return items


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _dedup_values(vals: list) -> list:
    out, seen = [], set()
    for v in vals:
        v = _py(v)
        key = _key(v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def _key(v: Any) -> Any:
    try:
        hash(v)
        return (type(v).__name__ if isinstance(v, bool) else "", v)
    except TypeError:
        return repr(v)


def _config_key(cfg: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, _key(v)) for k, v in cfg.items() if k != "config_id"))


def space_size(space: Space) -> int:
    """Number of configs of the full grid."""
    return math.prod(len(v) for _, v in _check(space))


def _check_n(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise SamplerError(f"n must be a non-negative integer, got {n!r}")
    return int(n)


def _from_indices(items: list[tuple[str, list]], idx: np.ndarray, n: int, seen: set | None = None,
                  out: list | None = None) -> list[dict]:
    """Configs from rows of value indices, skipping duplicates, until ``n`` configs are collected."""
    out = [] if out is None else out
    seen = set() if seen is None else seen
    for row in idx:
        if len(out) >= n:
            break
        key = tuple(int(j) for j in row)
        if key in seen:
            continue
        seen.add(key)
        out.append({k: vals[j] for (k, vals), j in zip(items, key)})
    return out


def _unit_to_index(u: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    sizes_a = np.asarray(sizes)
    return np.minimum((u * sizes_a).astype(np.int64), sizes_a - 1)


def grid(space: Space) -> list[dict]:
    """Every combination of the space's values (last parameter varies fastest)."""
    items = _check(space)
    total = math.prod(len(v) for _, v in items)
    if total > MAX_GRID:
        raise SamplerError(f"the full grid has {total:,} configs (more than {MAX_GRID:,}); use a sampler such as "
                           "sobol with n")
    keys = [k for k, _ in items]
    return [dict(zip(keys, combo)) for combo in itertools.product(*(v for _, v in items))]


def random(space: Space, n: int, seed: int = 0) -> list[dict]:
    """``n`` distinct configs drawn uniformly (all of them when the space is smaller)."""
    items = _check(space)
    n = _check_n(n)
    sizes = [len(v) for _, v in items]
    rng = np.random.default_rng(seed)
    return _qmc_fill(items, n, lambda drawn, m: rng.random((m, len(sizes))))


def _qmc_fill(items: list[tuple[str, list]], n: int, draw) -> list[dict]:
    """Collect ``n`` distinct configs from successive unit-cube batches ``draw(drawn, m)`` (``drawn``: points
    drawn so far, ``m``: a batch size hint), skipping duplicates."""
    sizes = [len(v) for _, v in items]
    total = math.prod(sizes)
    n = min(n, total)
    out: list[dict] = []
    seen: set = set()
    m = max(n, 1)
    drawn = 0
    while len(out) < n and drawn <= max(16 * n, 2**16):
        u = draw(drawn, m)
        drawn += len(u)
        _from_indices(items, _unit_to_index(u, sizes), n, seen, out)
        m = max(m, (n - len(out)) * 2)
    if len(out) < n and total <= MAX_GRID:
        # duplicates everywhere (n close to the space size): the rest of the grid, in order
        rest = np.array([c for c in itertools.product(*(range(s) for s in sizes)) if tuple(c) not in seen])
        _from_indices(items, rest.reshape(-1, len(sizes)), n, seen, out)
    return out


def sobol(space: Space, n: int, seed: int = 0) -> list[dict]:
    """``n`` distinct configs from a scrambled Sobol sequence (``scipy.stats.qmc.Sobol``).

    Points are drawn in the sequence's order, skipping configs already taken, so the result for ``n`` is a
    prefix of the result for any larger ``n`` (same seed).
    """
    from scipy.stats import qmc

    items = _check(space)
    n = _check_n(n)
    engine = qmc.Sobol(len(items), scramble=True, seed=seed)

    def draw(drawn: int, m: int) -> np.ndarray:
        # balanced blocks: 2^j points first, then as many again (the sequence continues and its length stays
        # a power of two, which keeps Sobol's balance properties)
        done = engine.num_generated
        return engine.random_base2(int(math.log2(done)) if done else max(int(math.ceil(math.log2(max(m, 2)))), 1))

    return _qmc_fill(items, n, draw)


def lhs(space: Space, n: int, seed: int = 0) -> list[dict]:
    """``n`` distinct configs from a Latin hypercube (``scipy.stats.qmc.LatinHypercube``).

    Every parameter's unit interval is cut into ``n`` strata with one point each, so each value of a list of
    ``m`` values is taken ``n / m`` times (± 1) before duplicates are removed. Duplicates (small spaces) are
    replaced by points of further hypercubes.
    """
    from scipy.stats import qmc

    items = _check(space)
    n = _check_n(n)
    rng = np.random.default_rng(seed)
    engine = qmc.LatinHypercube(len(items), seed=rng)
    return _qmc_fill(items, n, lambda drawn, m: engine.random(n if drawn == 0 else m))


def unrolling_values(lo: int, hi: int, steps: Sequence[int], width: int = 2) -> list[int]:
    """Values around the multiples of each step size ``s`` within ``[lo, hi]`` (sorted, positive).

    Around ``s*k`` the values ``s*k - width + 1 ... s*k + width`` are taken: ``width`` on each side of the
    latency jump that an unrolling factor ``s`` causes between ``s*k`` and ``s*k + 1``.
    """
    width = int(width)
    if width < 1:
        raise SamplerError(f"width must be at least 1, got {width}")
    vals: set[int] = set()
    for s in steps:
        s = int(s)
        if s < 1:
            raise SamplerError(f"step sizes must be positive integers, got {s}")
        for k in range(max(1, (lo - width) // s), (hi + width) // s + 2):
            for off in range(-width + 1, width + 1):
                v = s * k + off
                if lo <= v <= hi and v >= 1:
                    vals.add(v)
    return sorted(vals)


def unrolling_aware(space: Space, steps: Mapping[str, Sequence[int]], n: int, seed: int = 0,
                    width: int = 2) -> list[dict]:
    """``n`` configs placed on both sides of the multiples of unrolling parameters.

    ``steps`` maps a dimension (a key of ``space`` with integer values) to the step sizes ``s`` found by a
    first sweep (e.g. ``{"c": [16], "f": [16, 32]}``). That dimension's candidate values are
    `unrolling_values` over the range ``[min, max]`` of its values in ``space``; the other dimensions keep
    their values. Configs are then drawn from that derived space with `sobol` (same seed), so they are
    spread over all the steps.
    """
    items = dict(_check(space))
    if not isinstance(steps, Mapping) or not steps:
        raise SamplerError("steps must map at least one dimension to its step sizes, e.g. {'c': [16]}")
    derived: dict[str, list] = {}
    for k, vals in items.items():
        if k not in steps:
            derived[k] = vals
            continue
        ints = [v for v in vals if isinstance(v, (int, np.integer)) and not isinstance(v, bool)]
        if len(ints) != len(vals):
            raise SamplerError(f"dimension {k!r} has non-integer values; unrolling steps need integers")
        s = steps[k]
        s = [s] if isinstance(s, (int, np.integer)) else list(s)
        cand = unrolling_values(min(ints), max(ints), s, width)
        if not cand:
            raise SamplerError(f"dimension {k!r}: no multiple of {s} lies within [{min(ints)}, {max(ints)}]")
        derived[k] = cand
    unknown = sorted(set(steps) - set(items))
    if unknown:
        raise SamplerError(f"steps name dimensions that are not in the space: {unknown}")
    return sobol(derived, n, seed)


def _features(configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Each config as a point in [0, 1]^d: numeric parameters by the rank of their value (so geometric value
    lists are spread evenly), others one-hot (each category at distance 1 from the others)."""
    keys = sorted({k for c in configs for k in c if k != "config_id"})
    cols = []
    for k in keys:
        vals = [c.get(k) for c in configs]
        numeric = all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                      for v in vals)
        if numeric:
            uniq = sorted(set(float(v) for v in vals))
            if len(uniq) < 2:
                continue
            pos = {v: j / (len(uniq) - 1) for j, v in enumerate(uniq)}
            cols.append(np.array([pos[float(v)] for v in vals])[:, None])
        else:
            cats = sorted({_key(v) for v in vals}, key=repr)
            if len(cats) < 2:
                continue
            idx = {c: j for j, c in enumerate(cats)}
            onehot = np.zeros((len(vals), len(cats)))
            onehot[np.arange(len(vals)), [idx[_key(v)] for v in vals]] = math.sqrt(0.5)
            cols.append(onehot)
    if not cols:
        return np.zeros((len(configs), 1))
    return np.concatenate(cols, axis=1)


def order_space_filling(configs: Sequence[Mapping[str, Any]], seed: int = 0) -> list[dict]:
    """The configs (duplicates dropped) reordered so that every prefix is spread out over the space.

    Greedy farthest-point order: start at a seeded random config, then repeatedly take the config farthest
    from all taken ones (distances on rank-scaled numeric parameters and one-hot categorical ones; ties go
    to the earlier config). A budget-aware sweep runs configs in this order and stops when time runs out.
    Cost: O(n^2 d) with numpy, about a second for 20,000 configs.
    """
    uniq: list[dict] = []
    seen: set = set()
    for c in configs:
        key = _config_key(c)
        if key not in seen:
            seen.add(key)
            uniq.append(dict(c))
    n = len(uniq)
    if n <= 2:
        return uniq
    x = _features(uniq)
    sq = (x * x).sum(axis=1)
    rng = np.random.default_rng(seed)
    first = int(rng.integers(n))
    order = np.empty(n, np.int64)
    order[0] = first
    dist = sq - 2.0 * (x @ x[first]) + sq[first]  # squared distances to the taken set (|a|^2 - 2ab + |b|^2)
    dist[first] = -np.inf
    for j in range(1, n):
        nxt = int(np.argmax(dist))
        order[j] = nxt
        np.minimum(dist, sq - 2.0 * (x @ x[nxt]) + sq[nxt], out=dist)  # taken configs stay at -inf
        dist[nxt] = -np.inf
    return [uniq[i] for i in order]


#: Samplers by name, as `Suite.configs` looks them up.
SAMPLERS = {"grid": grid, "random": random, "sobol": sobol, "lhs": lhs, "unrolling": unrolling_aware}
