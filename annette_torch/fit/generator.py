"""The model generator: measurement store -> mapping model + layer models -> platform (and its variants).

Variants (for the accuracy comparison of the paper and beyond):

* ``flops``: time proportional to operations (one rate fitted on all layers);
* ``roofline``, ``refined``, ``statistical``, ``mixed``: one model kind per layer type, no mapping model
  (every layer estimated on its own, as a tool without fusion knowledge would);
* ``mixed+mapping``: the learned fusion rules plus mixed layer models fitted on the fused groups — the
  full ANNETTE model and what ``annette calibrate`` ships.

Layer types with too few samples use the ``Base`` roofline fitted on all memory-bound layers. Where a suite
was measured behind a lead layer (``lead="dw1"``: the layout a network gives the layer), its measurements
without one are left out. Layer models are fitted on every suite except the in-context ones
(`cache_fit.CONTEXT_SUITES`) and the mapping probes (`PROBE_SUITES`: their networks ask the toolchain a
question); when in-context ones were measured, every variant but ``flops`` also gets a cache model fitted on
top of its own layer models (weights evicted from the caches inside a network, `annette_torch.models.cache`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Collection, Sequence

import numpy as np

from ..bench.store import Store
from ..errors import AnnetteError
from ..platform.machine import machine_fingerprint
from ..ir import CONV_TYPES, LayerType, Network
from ..mapping import MappingModel
from ..mapping.costs import MappingCosts
from ..models import LayerFeatures, LayerModel, Roofline
from ..platform import Platform
from .data import (FitDataError, LayerSamples, Measured, fusion_examples, layer_samples, learned_folds, learned_strides,
                   load_measured)
from .cache_fit import CONTEXT_SUITES, fit_cache
from .mapping_costs_fit import describe, fit_fused_costs, fit_inserted, fit_layout, fused_primaries
from .mapping_fit import fit_mapping
from .roofline_fit import fit_refined, fit_roofline

__all__ = ["VARIANTS", "fit_variants", "fit_platform", "MIN_SAMPLES", "IN_PLACE_RATE", "in_place_model"]

log = logging.getLogger(__name__)

VARIANTS = ("flops", "roofline", "refined", "statistical", "mixed", "mixed+mapping")
#: suites that only ask the toolchain what it does, for the mapping model (``stride_prop``: does a stride pass
#: a layer); their layers -- small convolutions beside a twin path -- would skew the layer models' data
PROBE_SUITES = ("stride_prop",)
MIN_SAMPLES = 30
#: share of a type's measured layers that took no time at or above which the runtime runs it in place
IN_PLACE_RATE = 0.95
#: types whose compute follows the unrolled h/w/c/f dimensions (refined roofline applies)
_REFINED_TYPES = {LayerType.CONV, LayerType.DEPTHWISE_CONV, LayerType.GROUP_CONV, LayerType.CONV_POOL,
                  LayerType.FULLY_CONNECTED, LayerType.CONV_TRANSPOSE}
#: layer types a suite's samples do not train: the shuffle suite's concat reads a plain-layout split (ONNX
#: Runtime runs it in NCHW, ~7x cheaper than a concat of conv outputs), unlike concats elsewhere
SUITE_EXCLUDED: dict[str, tuple[LayerType, ...]] = {"shuffle": (LayerType.CONCAT,)}
#: layer-model key per type (pools share one "Pool" key when a pool kind has too few samples)
_KEY = {t: t.label for t in LayerType}
#: suites whose measurements behind a lead layer (blocked layout) and without one (plain) are both kept: the
#: mapping's layout pass types the layer by layout (`annette_torch.mapping.layout.BLOCKED_TYPES`)
BOTH_LAYOUTS = ("interp",)
#: per platform, suites measured behind a lead layer whose sweep without one is kept too for the mapping variant
#: (`annette calibrate` sweeps them): a pool of a plain tensor is a kernel of its own there
#: (`mapping.layout.map_kernel_types`, without layout costs: OpenVINO's ~2.2x slower per element). Elsewhere, in the
#: variants without a mapping and under fitted layout costs, the lead sweep replaces it
PLAIN_SWEEPS: dict[str, tuple[str, ...]] = {"openvino-cpu": ("maxpool", "avgpool")}


def usable(everything: Sequence[Measured], plain: Collection[str] = ()) -> list[Measured]:
    """The measurements layer models learn from: not the in-context and probe suites; of a suite measured behind a
    lead layer (the in-network layout), only those, but for the suites networks feed in both layouts
    (`BOTH_LAYOUTS`) and those of ``plain`` (a mapping variant's `PLAIN_SWEEPS`)."""
    led = {m.suite for m in everything if "lead" in m.network.names} - set(BOTH_LAYOUTS) - set(plain)
    return [m for m in everything if m.suite not in CONTEXT_SUITES and m.suite not in PROBE_SUITES
            and (m.suite not in led or "lead" in m.network.names)]


def in_place_model() -> Roofline:
    """The layer model of a type a runtime runs in place: no time (a roofline of unbounded speed)."""
    return Roofline(op_s=1e30, bandwidth=1e30, bit_act=32, bit_weights=32)


def _subset(net: Network, rows: np.ndarray) -> LayerFeatures:
    return LayerFeatures.from_network(net, rows)


def _trains(ls: LayerSamples) -> np.ndarray:
    """Per sample: whether it may train its type's model (`SUITE_EXCLUDED`)."""
    suite = np.array([m.suite for m in ls.configs], dtype=object)[ls.config]
    ok = np.ones(len(ls.time_ms), bool)
    for name, types in SUITE_EXCLUDED.items():
        ok &= ~((suite == name) & np.isin(ls.network.types, types))
    return ok


def _per_type(ls: LayerSamples, kind: str, bits: float, cv: int, seed: int,
              progress: Callable[[str], None],
              candidates: Sequence[str] | None = None,
              only: set[int] | None = None, in_place: bool = False,
              memo: FitMemo | None = None) -> tuple[dict[str, LayerModel], dict[str, Any]]:
    """One layer model of ``kind`` per executed type with enough positive samples, plus ``Base``.

    ``only``: fit just these types (the others fall back to ``Base``). ``in_place``: a type that took no time in
    at least `IN_PLACE_RATE` of its (at least `MIN_SAMPLES`) measured layers gets `in_place_model` (OpenVINO runs
    a view of a plain tensor in place; fitted on its few positive samples, its model priced every such view as a
    copy). The types are fitted in parallel (`fit_types`); ``memo`` reuses a fit of the same samples.
    """
    net, y = ls.network, ls.time_ms
    types = net.types
    models: dict[str, LayerModel] = {}
    report: dict[str, Any] = {}
    trains = _trains(ls)
    pos = (y > 0) & trains
    base_rows = np.flatnonzero(pos & ~np.isin(types, list(_REFINED_TYPES)) & (types != LayerType.INPUT))
    if base_rows.size < 2:
        base_rows = np.flatnonzero(pos & (types != LayerType.INPUT))
    if base_rows.size < 2:
        raise FitDataError("fewer than two measured layers with a positive time")
    models["Base"] = fit_roofline(_subset(net, base_rows), y[base_rows], bits, bits)
    report["Base"] = {"model": "roofline", "n_samples": int(base_rows.size)}
    tasks: list[TypeFit] = []
    for t in np.unique(types):
        lt = LayerType(int(t))
        if lt == LayerType.INPUT or (only is not None and int(t) not in only):
            continue
        if in_place:
            every = (types == t) & trains
            share = float(np.mean(y[every] <= 0)) if every.any() else 0.0
            if every.sum() >= MIN_SAMPLES and share >= IN_PLACE_RATE:
                models[lt.label] = in_place_model()
                report[lt.label] = {"model": "in place", "n_samples": int(every.sum()), "zero_share": share}
                continue
        rows = np.flatnonzero((types == t) & pos)
        if rows.size < MIN_SAMPLES:
            if rows.size:
                report[lt.label] = {"model": "Base fallback", "n_samples": int(rows.size)}
            continue
        tasks.append(TypeFit(lt, _subset(net, rows), y[rows], kind, bits, cv, seed,
                             tuple(candidates) if candidates else None))
    for task, (m, rep) in zip(tasks, fit_types(tasks, progress, memo)):
        models[task.type.label] = m
        report[task.type.label] = rep
    return models, report


@dataclass(frozen=True)
class TypeFit:
    """One layer type's model fit: its samples (features, times in ms) and how to fit them."""

    type: LayerType
    X: LayerFeatures
    y: np.ndarray
    kind: str
    bits: float
    cv: int
    seed: int
    candidates: tuple[str, ...] | None

    def key(self) -> str:
        """A digest of everything the fit depends on: equal keys, equal models (the fits are seeded)."""
        h = hashlib.sha256(repr((int(self.type), self.kind, self.bits, self.cv, self.seed, self.candidates,
                                 len(self.y))).encode())
        for name in LayerFeatures.NAMES + LayerFeatures.TAPS:
            col = getattr(self.X, name)
            h.update(name.encode() + (b"-" if col is None else np.ascontiguousarray(col, np.float64).tobytes()))
        h.update(np.ascontiguousarray(self.y, np.float64).tobytes())
        return h.hexdigest()

    def what(self) -> str:
        """``mixed: Conv (1445 layers``: the start of the progress line of this fit."""
        return f"{self.kind}: {self.type.label} ({len(self.y)} layers"

    def run(self) -> tuple[LayerModel, dict[str, Any]]:
        """Fit this type's model of `kind` (``roofline``, ``refined``, ``statistical`` or ``mixed``)."""
        from .statistical_fit import fit_mixed, fit_statistical

        lt, X, yy, bits = self.type, self.X, self.y, self.bits
        refined_ok = lt in _REFINED_TYPES
        if self.kind == "roofline" or (self.kind == "refined" and not refined_ok):
            return fit_roofline(X, yy, bits, bits), {"model": "roofline", "n_samples": len(yy)}
        base: Roofline
        if refined_ok:
            base, rrep = fit_refined(X, yy, bits, bits)
        else:
            base, rrep = fit_roofline(X, yy, bits, bits), {}
        if self.kind == "refined":
            return base, {"model": "refined_roofline", "n_samples": len(yy), **rrep}
        unroll = getattr(base, "unroll", None) or None
        kw: dict[str, Any] = {"candidates": self.candidates} if self.candidates else {}
        # the kernel a runtime picks for a grouped convolution depends on the channels of one group
        kw["grouped"] = lt == LayerType.GROUP_CONV
        # and runtimes skip the kernel taps that read a convolution's padding (dilated convolutions)
        kw["taps"] = lt in CONV_TYPES
        if self.kind == "statistical":
            return fit_statistical(X, yy, cv=self.cv, seed=self.seed, unroll=unroll, **kw)
        return fit_mixed(X, yy, base, cv=self.cv, seed=self.seed, unroll=unroll, **kw)


#: fitted models by `TypeFit.key`: ``annette calibrate`` fits again after re-measuring a few configurations,
#: and a type whose samples did not change keeps its model instead of being fitted anew
FitMemo = dict[str, tuple[LayerModel, dict[str, Any]]]
#: layers of all the types to fit from which their fits go to worker processes (below, starting them costs more)
PARALLEL_ROWS = 2000


def fit_workers() -> int:
    """Processes the layer-model fits run in: the CPUs this process may use (``ANNETTE_FIT_JOBS`` overrides)."""
    env = os.environ.get("ANNETTE_FIT_JOBS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise AnnetteError(f"ANNETTE_FIT_JOBS must be a whole number of processes >= 1, got {env!r}")
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def fit_types(tasks: Sequence[TypeFit], progress: Callable[[str], None],
              memo: FitMemo | None = None) -> list[tuple[LayerModel, dict[str, Any]]]:
    """Run ``tasks`` (results in their order): the memorised ones from ``memo``, the rest in `fit_workers`
    processes, largest first, when they hold at least `PARALLEL_ROWS` layers together (the fits are independent
    and CPU-bound: on 2 cores the model fits of a ``calibrate --quick`` store take ~half the time)."""
    memo = {} if memo is None else memo
    keys = [t.key() for t in tasks]
    todo = []
    for i, (task, key) in enumerate(zip(tasks, keys)):
        if key in memo:
            progress(f"{task.what()}, unchanged: kept)")
        else:
            todo.append(i)
    jobs = min(fit_workers(), len(todo))
    if jobs > 1 and sum(len(tasks[i].y) for i in todo) >= PARALLEL_ROWS:
        from joblib import Parallel, delayed

        order = sorted(todo, key=lambda i: -len(tasks[i].y))
        run = Parallel(n_jobs=jobs, return_as="generator")(delayed(TypeFit.run)(tasks[i]) for i in order)
        for i, res in zip(order, run):
            progress(f"{tasks[i].what()})")
            memo[keys[i]] = res
    else:
        for i in todo:
            progress(f"{tasks[i].what()})")
            memo[keys[i]] = tasks[i].run()
    return [memo[k] for k in keys]


def _mapping_costs(ls: LayerSamples, measured: list, mapping: MappingModel, bits: float, cv: int, seed: int,
                   progress: Callable[[str], None], candidates: Sequence[str] | None, memo: FitMemo | None = None
                   ) -> tuple[MappingModel, LayerSamples, dict[str, Any]]:
    """Add fused-layer work and inserted reorders to ``mapping``; the layer samples net of fused work.

    A first pass fits mixed models of the types that execute fused groups, whose residuals give the
    fused-layer costs (`mapping_costs_fit`); the returned samples are re-taken with them.
    """
    primaries = fused_primaries(ls)
    fused, frep = {}, {"skipped": "no executing type with groups of two or more fused types"}
    if primaries:
        progress(f"fused-layer costs: first pass on {', '.join(LayerType(p).label for p in sorted(primaries))}")
        models, _ = _per_type(ls, "mixed", bits, cv, seed, lambda _m: None, candidates, only=primaries, memo=memo)
        fused, frep = fit_fused_costs(ls, Platform("first-pass", models, mapping), primaries)
    ins_in, ins_out, irep = fit_inserted(ls)
    layout, irep["layout_fit"] = fit_layout(ls)
    if layout:  # layout reorders price the graph outputs too
        ins_out = {}
    costs = MappingCosts(fused, ins_in, ins_out, describe(frep, irep), layout)
    progress(f"mapping costs: {costs.origin}")
    out = MappingModel(mapping.rules, costs, mapping.folds, mapping.strides, mapping.kernel_types)
    retake = bool(fused or layout)
    if layout or not mapping.kernel_types:  # pools of a plain tensor keep the pool types: of a suite swept both
        # ways (`PLAIN_SWEEPS`), the lead sweep alone
        kept = usable(measured)
        retake |= len(kept) < len(measured)
        measured = kept
    if not layout and not mapping.kernel_types:  # without layout or kernel types, a suite's blocked-layout sweep
        # would blur its plain one's model
        plain = [m for m in measured if not (m.suite in BOTH_LAYOUTS and "lead" in m.network.names)]
        retake |= len(plain) < len(measured)
        measured = plain
    return out, (layer_samples(measured, out) if retake else ls), {"fused": frep, "inserted": irep}


def _flops_platform(ls: LayerSamples, name: str) -> Platform:
    """Time proportional to operations: one rate from all layers (memory traffic ignored)."""
    ops = ls.network.ops
    k = float(ls.time_ms.sum() * 1e-3 / max(ops.sum(), 1.0))
    m = Roofline(op_s=1.0 / k if k > 0 else 1e12, bandwidth=1e30, bit_act=32, bit_weights=32)
    return Platform(name, {"Base": m}, MappingModel(), "FLOPs proxy")


def fit_variants(db: str | Store, platform: str, variants: Sequence[str] = VARIANTS, bits: float = 32,
                 cv: int = 5, seed: int = 0, suites: Sequence[str] | None = None,
                 progress: Callable[[str], None] | None = None, candidates: Sequence[str] | None = None,
                 memo: FitMemo | None = None) -> tuple[dict[str, Platform], dict[str, Any]]:
    """Fit every requested variant from the measurements of ``platform`` in the store ``db``.

    Returns ``({variant: Platform}, report)``; the report holds the learned fusion rules, per-type CV
    errors and sample counts. ``memo`` (a dict kept between calls) reuses the layer models of types whose
    samples a later fit of the same store finds unchanged.
    """
    progress = progress or (lambda msg: log.info("%s", msg))
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise ValueError(f"unknown variants {sorted(unknown)} (known: {', '.join(VARIANTS)})")
    st = Store(db, create=False) if isinstance(db, str) else db
    t0 = time.perf_counter()
    everything = load_measured(st, platform, suites)
    context = [m for m in everything if m.suite in CONTEXT_SUITES]
    probes = [m for m in everything if m.suite in PROBE_SUITES]
    measured = usable(everything)
    if not measured:
        counts = st.counts(platform)
        raise FitDataError(f"no usable measurements of platform {platform!r} in {st.label} "
                           f"(stored: {counts or 'nothing'}); run 'annette bench --platform {platform} --suite ...' "
                           "or 'annette calibrate' first")
    report: dict[str, Any] = {"configurations": len(measured)}
    fp = {}
    runs = st.runs()
    if runs:
        fp = {"fingerprint": runs[-1]["fingerprint"], "toolchain": runs[-1]["toolchain"]}
    need_nomap = [v for v in variants if v not in ("mixed+mapping",)]
    out: dict[str, Platform] = {}
    if need_nomap:
        ls0 = layer_samples(measured, MappingModel())
        report["samples_unmapped"] = int((ls0.time_ms > 0).sum())
        for v in need_nomap:
            if v == "flops":
                out[v] = _flops_platform(ls0, f"{platform}-flops")
                continue
            kind = {"refined": "refined"}.get(v, v)
            models, rep = _per_type(ls0, kind, bits, cv, seed, progress, candidates, memo=memo)
            report[v] = rep
            out[v] = Platform(f"{platform}-{v}", models, MappingModel(), f"{platform}: {v} layer models, no mapping",
                              {**fp})
    if "mixed+mapping" in variants:
        measured = usable(everything, PLAIN_SWEEPS.get(platform, ()))
        folds, report["folds"] = learned_folds(measured)
        fx = fusion_examples(measured, folds)
        strides, report["strides"] = learned_strides(probes)
        mapping, mrep = fit_mapping(fx, folds=folds, strides=strides)
        mapping = MappingModel(mapping.rules, None, mapping.folds, mapping.strides, kernel_types=True)
        report["mapping"] = mrep
        progress(f"mapping: {len(mapping.rules)} fusion rules from {len(fx)} candidate pairs"
                 + (f", folds: {', '.join(folds)}" if folds else "")
                 + (f", strides through {', '.join(strides) or 'convolutions only'}" if strides is not None else ""))
        ls1 = layer_samples(measured, mapping)
        report["samples_mapped"] = int((ls1.time_ms > 0).sum())
        mapping, ls1, report["mapping_costs"] = _mapping_costs(ls1, measured, mapping, bits, cv, seed, progress,
                                                               candidates, memo)
        models, rep = _per_type(ls1, "mixed", bits, cv, seed, progress, candidates, in_place=True, memo=memo)
        report["mixed+mapping"] = rep
        out["mixed+mapping"] = Platform(platform, models, mapping, f"{platform}: mixed layer models + learned mapping",
                                        {**fp})
    report["cache"] = {}
    for v, plat in list(out.items()):
        if v == "flops":
            continue
        cm, crep = fit_cache(context, plat)
        report["cache"][v] = crep
        if cm is not None:
            out[v] = Platform(plat.name, plat.layers, plat.mapping, plat.description,
                              {**plat.meta, "cache": cm.to_dict()})
    for v, crep in report["cache"].items():
        progress(f"cache model ({v}): {crep.get('model', {}).get('origin') or crep.get('skipped')}")
    report["seconds"] = time.perf_counter() - t0
    if isinstance(db, str):
        st.close()
    return out, report


def fit_platform(db: str | Store, platform: str, **kw: Any) -> tuple[Platform, dict[str, Any]]:
    """The full model (mixed layer models + learned mapping) of ``platform``; see `fit_variants`."""
    plats, rep = fit_variants(db, platform, variants=("mixed+mapping",), **kw)
    p = plats["mixed+mapping"]
    p.meta.setdefault("fingerprint", machine_fingerprint())
    return p, rep
