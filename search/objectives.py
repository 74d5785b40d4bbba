"""What a search maximises: accuracy tables (``arch,accuracy`` CSVs), the synthetic stand-in, their keys.

The `synthetic_accuracy` objectives are deterministic stand-ins for demos and tests: they are NOT accuracy.
`arch_key` / `text_key` are how architectures and table entries are matched (NB101: by the
isomorphism-invariant spec hash), shared by the searches and the Pareto plots.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
from typing import Any, Callable

from ..errors import AnnetteError
from .spaces.registry import Space, get_space

__all__ = ["Objective", "synthetic_accuracy", "arch_key", "text_key", "read_accuracy_csv", "csv_objective",
           "load_objective"]

#: a function of an architecture to maximise
Objective = Callable[[Any], float]


def _unit_noise(text: str, salt: str = "") -> float:
    """Deterministic pseudo-random number in [0, 1) from a string (stable across processes and runs)."""
    h = hashlib.blake2b((salt + text).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") / 2.0 ** 64


def synthetic_accuracy(space: str | Space, noise: float = 0.5) -> Objective:
    """A deterministic *synthetic* accuracy proxy (percent) for demos and tests. It is NOT real accuracy.

    NB201: rewards live conv3x3 / conv1x1 edges and the longest conv path of the cell, a little for skips and
    pools (score -> ``94 - 30 exp(-score / 3)``); a cell whose output is zero scores 10 (chance). Other spaces:
    a saturating function of the network's ops (``log10``), centred on the space's typical size. Plus
    ``+-noise`` points of hash noise of the encoding, so ties are broken the same way everywhere.
    """
    sp = get_space(space)
    if sp.name == "nb201":
        weight = {"nor_conv_3x3": 3.0, "nor_conv_1x1": 1.5, "skip_connect": 0.8, "avg_pool_3x3": 0.3}
        m = sp._m  # type: ignore[attr-defined]

        def nb201_proxy(arch: str) -> float:
            live = m.live_edges(arch)
            if not live:
                return 10.0
            depth = [0, 0, 0, 0]
            for op, s, d in live:  # edges in topological (string) order
                depth[d] = max(depth[d], depth[s] + (1 if op.startswith("nor_conv") else 0))
            score = sum(weight[op] for op, _, _ in live) + 1.0 * depth[3]
            return 94.0 - 30.0 * math.exp(-score / 3.0) + noise * (2 * _unit_noise(arch, "nb201") - 1)

        nb201_proxy.__doc__ = "synthetic NB201 accuracy proxy (NOT real accuracy)"
        return nb201_proxy

    centre, slope = {"nb101": (9.0, 2.5), "mbv2": (8.9, 12.0)}.get(sp.name, (9.0, 2.5))  # log10(ops): typical, spread

    def ops_proxy(arch: Any) -> float:
        ops = max(float(sp.network(arch).total_ops), 1.0)
        x = math.log10(ops) - centre
        return 60.0 + 35.0 / (1.0 + math.exp(-slope * x)) + noise * (2 * _unit_noise(sp.encode(arch), sp.name) - 1)

    ops_proxy.__doc__ = f"synthetic {sp.name} accuracy proxy from the network's ops (NOT real accuracy)"
    return ops_proxy


def arch_key(space: Space, arch: Any) -> str:
    """Key of an architecture in accuracy tables: the space's ``key`` (NB101: spec hash), else its encoding."""
    f = getattr(space, "key", None)
    return f(arch) if f is not None else space.encode(arch)


def text_key(space: Space, text: str) -> str:
    """Key of a table entry written as text (the space's ``text_key``, else the normalised encoding);
    ValueError (or KeyError / TypeError from a space's parser) if it is not an architecture of ``space``."""
    f = getattr(space, "text_key", None)
    return f(text) if f is not None else space.encode(space.decode(text))


def read_accuracy_csv(path: str | os.PathLike, space: str | Space | None = None) -> dict[str, float]:
    """``arch,accuracy`` CSV (header optional) -> {key: accuracy}; with ``space``, keys are normalised to the
    space's table keys (`text_key`: NB201 the canonical arch string, NB101 the spec hash). Raises
    `AnnetteError` naming the file and line on bad input."""
    sp = get_space(space) if space is not None else None
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise AnnetteError(f"{path}: no such accuracy file")
    table: dict[str, float] = {}
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise AnnetteError(f"{path}: empty accuracy file (expected 'arch,accuracy' rows)")
    a_col, v_col, start = 0, 1, 0
    head = [c.strip().lower() for c in rows[0]]
    try:
        float(rows[0][1]) if len(rows[0]) > 1 else None
    except ValueError:  # a header
        start = 1
        if "arch" in head:
            a_col = head.index("arch")
        for name in ("accuracy", "acc", "test_accuracy", "valid_accuracy", "objective"):
            if name in head:
                v_col = head.index(name)
                break
    for n, row in enumerate(rows[start:], start=start + 1):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) <= max(a_col, v_col):
            raise AnnetteError(f"{path}:{n}: expected 'arch,accuracy', got {','.join(row)!r}")
        key = row[a_col].strip()
        try:
            value = float(row[v_col])
        except ValueError:
            raise AnnetteError(f"{path}:{n}: accuracy {row[v_col]!r} is not a number") from None
        if sp is not None:
            try:
                key = text_key(sp, key)
            except (ValueError, KeyError, TypeError) as e:
                raise AnnetteError(f"{path}:{n}: not a {sp.name} architecture: {e}") from None
        table[key] = value
    if not table:
        raise AnnetteError(f"{path}: no 'arch,accuracy' rows")
    return table


def csv_objective(path: str | os.PathLike, space: str | Space) -> Objective:
    """Objective = lookup of the architecture in an ``arch,accuracy`` CSV (e.g. exported NAS-Bench results).

    An architecture missing from the table prunes its trial (``optuna.TrialPruned``)."""
    sp = get_space(space)
    table = read_accuracy_csv(path, sp)

    def lookup(arch: Any) -> float:
        key = arch_key(sp, arch)
        value = table.get(key)
        if value is None:
            import optuna
            raise optuna.TrialPruned(f"{key} is not in {os.fspath(path)}")
        return value

    lookup.__doc__ = f"accuracy lookup in {os.fspath(path)} ({len(table)} architectures)"
    return lookup


def load_objective(spec: str | Objective, space: str | Space) -> Objective:
    """``'synthetic'`` -> `synthetic_accuracy`; a ``.csv`` path -> `csv_objective`; a callable -> itself."""
    if callable(spec):
        return spec
    if spec == "synthetic":
        return synthetic_accuracy(space)
    if str(spec).lower().endswith(".csv") or os.path.isfile(spec):
        return csv_objective(spec, space)
    raise AnnetteError(f"unknown objective {spec!r}: give 'synthetic' or an 'arch,accuracy' .csv file")
