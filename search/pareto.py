"""Predicted latency of whole NAS-Bench spaces per platform, Pareto fronts, and their plots.

* `nb201_latencies(platform)`: all 15,625 NAS-Bench-201 cells (cells with equal live edges build identical
  networks, so only the 9,445 distinct ones are built and estimated, in batches of `estimate_many`);
  `nb201_costs()` their parameters and ops from the IR (``Network.total_weights``, ``total_ops``).
* `nb101_latencies(platform, n, seed)`: ``n`` sampled (valid, isomorphism-deduplicated) NAS-Bench-101 cells.
* `space_table(space, platforms, ...)`: both of the above for several platforms at once (one IR build).
* `pareto_front(latency, accuracy)`: indices of the non-dominated points (latency minimised, accuracy
  maximised), by one sort and a running maximum.
* `plot_pareto(...)` / `pareto_report(...)`: one colour per platform; with accuracy data (an ``arch,accuracy``
  CSV) accuracy vs latency with each platform's front highlighted; without, latency vs parameters and vs
  ops with the front of (latency minimised, ops maximised), i.e. the cells that get the most compute per ms.
  Writes a PNG and a CSV of the fronts.

Reading the official NAS-Bench result files (NB201's ``.pth`` via ``nas_201_api``, NB101's TFRecord via
``nasbench``) is future work: export them once to an ``arch,accuracy`` CSV (NB201: arch string; NB101: the
spec encoding of `annette_torch.search.spaces.nb101`) and pass that.
"""

from __future__ import annotations

import csv
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..atomic import atomic_write
from ..errors import AnnetteError, check_writable
from ..estimator import estimate_many, latency_definition
from ..ir import Network
from ..platform import Platform, load_platform
from ..types import PlatformLike
from .objectives import read_accuracy_csv, text_key
from .spaces import nb101, nb201
from .spaces.registry import NB101Space, get_space

__all__ = ["SpaceTable", "nb201_latencies", "nb201_costs", "nb101_latencies", "space_table", "pareto_front",
           "attach_accuracy", "fronts", "plot_pareto", "write_front_csv", "pareto_report"]

log = logging.getLogger(__name__)

#: networks per `estimate_many` call: keeps the arrays cache-sized (faster than one huge batch)
CHUNK = 768


@dataclass
class SpaceTable:
    """Architectures of a space with their IR costs and predicted latency per platform."""

    space: str
    archs: list[str]                   # encodings (NB201: arch strings)
    params: np.ndarray                 # weights per network (Network.total_weights)
    ops: np.ndarray                    # ops per network (2 x MACs, Network.total_ops)
    latency_ms: dict[str, np.ndarray] = field(default_factory=dict)  # platform name -> ms per arch
    accuracy: np.ndarray | None = None  # per arch, NaN where unknown
    latency: str = "latency"            # Estimate.latency_ms, or "device" (the layer sum)
    definitions: dict[str, str] = field(default_factory=dict)  # platform name -> what its latency is

    def __len__(self) -> int:
        return len(self.archs)


def _estimate_chunks(nets_of: Any, n: int, platforms: Sequence[Platform], costs: bool = True,
                     latency: str = "latency") -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Build networks ``nets_of(start, stop)`` chunk by chunk and estimate each chunk on every platform;
    with ``costs``, also each network's weights and ops (from the chunk stacked into one network)."""
    lat = {p.name: np.empty(n) for p in platforms}
    params = np.full(n, np.nan)
    ops = np.full(n, np.nan)
    for s in range(0, n, CHUNK):
        nets = nets_of(s, min(n, s + CHUNK))
        e = s + len(nets)
        if costs:
            big, seg = Network.concat(nets)
            params[s:e] = np.bincount(seg, weights=big.weights, minlength=len(nets))
            ops[s:e] = np.bincount(seg, weights=big.ops, minlength=len(nets))
        for p in platforms:
            lat[p.name][s:e] = estimate_many(nets, p, latency=latency)
    return lat, params, ops


def _nb201_table(platforms: Sequence[Platform], costs: bool = True, latency: str = "latency") -> SpaceTable:
    archs = nb201.all_arch_strings()
    first: dict[Any, int] = {}
    which = np.empty(len(archs), np.int64)
    reps: list[str] = []
    for i, a in enumerate(archs):
        k = nb201.live_edges(a)
        j = first.get(k)
        if j is None:
            j = first[k] = len(reps)
            reps.append(a)
        which[i] = j
    lat, params, ops = _estimate_chunks(lambda s, e: nb201.build_networks(reps[s:e]), len(reps), platforms, costs,
                                        latency)
    return SpaceTable("nb201", archs, params[which], ops[which], {k: v[which] for k, v in lat.items()})


def _nb101_table(platforms: Sequence[Platform], n: int, seed: int, latency: str = "latency") -> SpaceTable:
    if n < 1:
        raise AnnetteError(f"number of NB101 samples must be >= 1, got {n}")
    specs = nb101.sample(int(n), np.random.default_rng(seed))
    sp = NB101Space()
    lat, params, ops = _estimate_chunks(lambda s, e: [sp.network(x) for x in specs[s:e]], len(specs), platforms,
                                        latency=latency)
    return SpaceTable("nb101", [sp.encode(x) for x in specs], params, ops, lat)


def _sampled_table(space: str, platforms: Sequence[Platform], n: int, seed: int,
                   latency: str = "latency") -> SpaceTable:
    """``n`` distinct architectures of an attention space (``vit``, ``hybrid``), sampled uniformly per choice."""
    if n < 1:
        raise AnnetteError(f"number of {space} samples must be >= 1, got {n}")
    from .spaces import hybrid, vit
    sp = get_space(space)
    archs = (vit if space == "vit" else hybrid).sample(int(n), np.random.default_rng(seed))
    lat, params, ops = _estimate_chunks(lambda s, e: [sp.network(a) for a in archs[s:e]], len(archs), platforms,
                                        latency=latency)
    return SpaceTable(space, [sp.encode(a) for a in archs], params, ops, lat)


def space_table(space: str, platforms: Sequence[PlatformLike], samples: int = 5000, seed: int = 0,
                costs: bool = True, latency: str = "latency") -> SpaceTable:
    """IR costs and predicted latency on each platform of all NB201 cells (``space='nb201'``) or of
    ``samples`` sampled NB101 cells (``space='nb101'``) or vision transformers (``vit``) or hybrids
    (``hybrid``). ``costs=False`` skips parameters/ops (NaN). ``latency``: `Estimate.latency_ms` (default)
    or ``"device"`` (the layer sum)."""
    plats = [load_platform(p) for p in platforms]
    defs = {p.name: latency_definition(p, latency) for p in plats}
    if space == "nb201":
        t = _nb201_table(plats, costs, latency)
    elif space == "nb101":
        t = _nb101_table(plats, samples, seed, latency)
    elif space in ("vit", "hybrid"):
        t = _sampled_table(space, plats, samples, seed, latency)
    else:
        t = None
    if t is not None:
        t.latency, t.definitions = latency, defs
        return t
    raise AnnetteError(f"unknown space {space!r} for Pareto plots (nb201, nb101, vit or hybrid)")


def nb201_latencies(platform: PlatformLike = "zcu102", latency: str = "latency") -> tuple[list[str], np.ndarray]:
    """All 15,625 NB201 arch strings (in the benchmark's index order, `nb201.arch_to_index`) and their predicted latency (ms) on ``platform`` (default ``zcu102``)."""
    t = space_table("nb201", [platform], costs=False, latency=latency)
    return t.archs, next(iter(t.latency_ms.values()))


def nb201_costs() -> tuple[list[str], np.ndarray, np.ndarray]:
    """All 15,625 NB201 arch strings (in the benchmark's index order) with their parameters (weights) and ops (2 x MACs) from the IR."""
    t = space_table("nb201", [])
    return t.archs, t.params, t.ops


def nb101_latencies(platform: PlatformLike = "zcu102", n: int = 1000, seed: int = 0,
                    latency: str = "latency") -> tuple[list[str], np.ndarray]:
    """``n`` sampled NB101 cells (their encodings) and their predicted latency (ms) on ``platform`` (default ``zcu102``)."""
    t = space_table("nb101", [platform], n, seed, latency=latency)
    return t.archs, next(iter(t.latency_ms.values()))


# ------------------------------------------------------------------------------------------------------
# Pareto front


def pareto_front(latency: Sequence[float] | np.ndarray, accuracy: Sequence[float] | np.ndarray) -> np.ndarray:
    """Indices of the Pareto-optimal points (latency minimised, accuracy maximised), fastest first.

    A point is on the front when no other point is at least as fast and at least as accurate and strictly
    better in one of them; identical points are all kept. NaN points are ignored. O(n log n).
    """
    lat = np.asarray(latency, dtype=float)
    acc = np.asarray(accuracy, dtype=float)
    if lat.shape != acc.shape or lat.ndim != 1:
        raise ValueError(f"latency and accuracy must be 1-D of equal length, got {lat.shape} and {acc.shape}")
    ok = np.flatnonzero(~(np.isnan(lat) | np.isnan(acc)))
    if not ok.size:
        return np.zeros(0, dtype=np.int64)
    order = ok[np.lexsort((-acc[ok], lat[ok]))]          # by latency, then most accurate first
    l, a = lat[order], acc[order]
    starts = np.flatnonzero(np.r_[True, l[1:] != l[:-1]])  # groups of equal latency
    group_best = a[starts]                                  # the first of a group is its most accurate
    before = np.r_[-np.inf, np.maximum.accumulate(group_best)[:-1]]  # best accuracy of strictly faster points
    gid = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, l.size]))
    on = (a == group_best[gid]) & (a > before[gid])
    return order[on]


def attach_accuracy(table: SpaceTable, path: str | os.PathLike) -> int:
    """Read an ``arch,accuracy`` CSV into ``table.accuracy`` (NaN where missing); returns how many matched."""
    sp = get_space(table.space)
    acc = read_accuracy_csv(path, sp)
    keys = table.archs if sp.name == "nb201" else [text_key(sp, a) for a in table.archs]
    values = np.array([acc.get(k, np.nan) for k in keys], dtype=float)
    matched = int(np.count_nonzero(~np.isnan(values)))
    if matched == 0:
        raise AnnetteError(f"{os.fspath(path)}: none of its {len(acc)} architectures is among the "
                           f"{len(table)} {table.space} cells")
    if matched < len(table):
        log.warning("%s: accuracy for %d of %d %s cells; the others are left out", os.fspath(path), matched,
                    len(table), table.space)
    table.accuracy = values
    return matched


def _front_y(table: SpaceTable) -> tuple[np.ndarray, str]:
    if table.accuracy is not None:
        return table.accuracy, "accuracy"
    return table.ops, "ops"


def fronts(table: SpaceTable) -> dict[str, np.ndarray]:
    """Per platform: indices of the front of (latency min, accuracy max) — or (latency min, ops max)."""
    y, _ = _front_y(table)
    return {p: pareto_front(lat, y) for p, lat in table.latency_ms.items()}


def write_front_csv(table: SpaceTable, path: str | os.PathLike, front: dict[str, np.ndarray] | None = None) -> int:
    """CSV of each platform's front: platform, arch, index (NB201: the benchmark's index, `nb201.arch_to_index`;
    empty for other spaces), latency_ms, accuracy, params, ops, latency_definition; returns the row count."""
    front = fronts(table) if front is None else front
    n = 0
    with atomic_write(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["platform", "arch", "index", "latency_ms", "accuracy", "params", "ops", "latency_definition"])
        for p, idx in front.items():
            d = table.definitions.get(p, "")
            for i in idx:
                acc = "" if table.accuracy is None else f"{table.accuracy[i]:.6g}"
                arch = table.archs[i]
                index = nb201.arch_to_index(arch) if table.space == "nb201" else ""
                w.writerow([p, arch, index, f"{table.latency_ms[p][i]:.6g}", acc, int(table.params[i]),
                            int(table.ops[i]), d])
                n += 1
    return n


def plot_pareto(table: SpaceTable, out: str | os.PathLike, front: dict[str, np.ndarray] | None = None,
                title: str | None = None) -> Path:
    """The chart of `annette_torch.plots.plot_pareto` (PNG, PDF or SVG by ``out``'s extension), fronts computed
    here when not given."""
    from ..plots import plot_pareto as draw

    return Path(draw(table, out, fronts(table) if front is None else front, title))


def pareto_report(space: str, platforms: Sequence[PlatformLike], out: str | os.PathLike, accuracy: str | None = None,
                  samples: int = 5000, seed: int = 0, csv_path: str | os.PathLike | None = None,
                  latency: str = "latency") -> tuple[SpaceTable, dict[str, np.ndarray], Path, Path]:
    """`space_table` + optional accuracy + fronts + PNG + front CSV (default: ``<out stem>_front.csv``)."""
    out = Path(out)
    check_writable(out)
    table = space_table(space, platforms, samples, seed, latency=latency)
    if accuracy is not None:
        attach_accuracy(table, accuracy)
    front = fronts(table)
    csv_out = Path(csv_path) if csv_path is not None else out.with_name(out.stem + "_front.csv")
    try:
        plot_pareto(table, out, front)
        write_front_csv(table, csv_out, front)
    except OSError as e:
        raise AnnetteError(f"cannot write {e.filename or out}: {e.strerror or e}") from None
    return table, front, out, csv_out
