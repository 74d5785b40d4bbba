"""The NCS2 (Myriad X, MYRIAD plugin) platform fitted from ingested ``benchmark_app`` reports of whole networks.

Input: networks stored by ``annette bench ingest --platform ncs2 --graph ...`` (suite ``graph``: each
configuration names its graph file). The model generator's pieces do the work: the fusion rules are learned
from the matcher's fused flags (`fusion_examples` / `fit_mapping`), layer samples come from `layer_samples`,
and every layer model is a least-squares roofline on log time (`fit_refined`, with the unrolling search for
convolutions). On top: one per-layer overhead (the plugin's per-stage cost, subtracted before the layer
models are fitted and added back by the platform's ``overhead``; chosen on the data, 0 drops it), the input
conversion stage as a mapping cost at the graph input (``mapping.costs.inserted_input``), and per type whether
it ran on the Neural Compute Engine or on the SHAVE cores.

Layer types the measured networks lack are costed by a stated rule (`ASSUMED`) or by the published ANNETTE
model (`PUBLISHED_TYPES`); their models' ``origin`` begins with ``assumed:`` or ``published:``.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from ..bench.ingest import GRAPH_SUITE
from ..bench.records import INSERTED
from ..bench.store import Store
from ..estimator import estimate, to_network
from ..ir import LayerType
from ..mapping import MappingCosts, MappingModel
from ..mapping.model import FusionRule, expand_types
from ..models import LayerFeatures, LayerModel, RefinedRoofline, Roofline
from ..platform import Platform
from .data import FitDataError, LayerSamples, Measured, fusion_examples, layer_samples
from .mapping_fit import fit_mapping
from .roofline_fit import fit_refined
from .statistical_fit import fit_mixed

__all__ = ["load_graph_measurements", "fit_ncs2", "leave_one_network_out", "Ncs2Fit", "BITS",
           "PUBLISHED_TYPES", "ASSUMED", "ASSUMED_PASSES", "ASSUMED_OVER_MEASURED", "DILATED_CONV", "ZERO_COST_TYPES",
           "published_errors", "published_platform"]

log = logging.getLogger(__name__)
T = LayerType

BITS = 16.0  # FP16 activations and weights
#: fewest positive samples for a layer type's own model
MIN_SAMPLES = 8
#: per-layer overheads tried (ms): the MYRIAD plugin's per-stage cost
OVERHEAD_GRID = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05)
#: layer types the MYRIAD plugin does not execute (NOT_RUN: a view of the same buffer; a Pad becomes the next
#: convolution's padding)
ZERO_COST_TYPES = (T.RESHAPE, T.FLATTEN, T.BLOCKED_RESHAPE, T.DROPOUT, T.PAD)
#: types absent from the four measured networks, costed by the published ANNETTE ncs2 model
PUBLISHED_TYPES = ("DepthwiseConv", "GroupConv", "ConvTranspose")
#: types absent from the measured networks, costed like a measured type (key -> (measured key, reason))
ASSUMED: dict[str, tuple[str, str]] = {
    "Mul": ("Add", "element-wise multiply runs as a SHAVE kernel like the measured Sum (Eltwise)"),
    "Sub": ("Add", "element-wise SHAVE kernel like the measured Sum"),
    "Div": ("Add", "element-wise SHAVE kernel like the measured Sum"),
    "Sigmoid": ("Relu", "activation on the SHAVE cores, at the measured ReLU kernel's rate"),
    "HardSwish": ("Relu", "activation on the SHAVE cores (the plugin's HSwish stage), at the measured ReLU rate"),
    "HardSigmoid": ("Relu", "activation on the SHAVE cores, at the measured ReLU rate"),
    "SiLU": ("Relu", "activation on the SHAVE cores (Swish stage), at the measured ReLU rate"),
    "Tanh": ("Relu", "activation on the SHAVE cores, at the measured ReLU rate"),
    "GELU": ("Relu", "written with Erf (Supported in the VPU column): one activation pass on the SHAVE cores at "
                     "the measured ReLU rate"),
    "Softplus": ("Relu", "activation on the SHAVE cores, at the measured ReLU rate"),
    "Clip": ("Relu", "activation on the SHAVE cores, at the measured ReLU rate"),
    "BatchNorm": ("Add", "a batch norm not folded into a convolution is a SHAVE scale-shift, like Sum"),
    "Transpose": ("Add", "Permute (Supported in the VPU column) on the SHAVE cores, at the element-wise rate"),
    "Resize": ("Add", "Interp / Resample (Supported in the VPU column) on the SHAVE cores, at the element-wise "
                      "rate"),
    "Slice": ("Add", "a copy on the SHAVE cores, at the element-wise rate"),
    "MatMul": ("FullyConnected", "Gemm (Supported in the VPU column) as a SHAVE software stage: the measured "
                                 "fully connected layers' bandwidth (both ran as SHAVE stages), compute bounded by "
                                 "the rate of the convolutions that ran as SHAVE stages"),
    "LayerNorm": ("Relu", "MVN (Supported*, fixed eps, in the VPU column) as a SHAVE stage of three passes over "
                          "the tensor (mean, variance, normalise), each at the measured ReLU kernel's rate"),
    "Softmax": ("Relu", "SoftMax (Supported in the VPU column) as a SHAVE stage of three passes (max, exponent "
                        "and sum, normalise), each at the measured ReLU kernel's rate; the measured SoftMax "
                        "stages (1000-class heads) took a per-stage time that does not scale with the tensor"),
}
#: assumed types whose stage passes over the tensor several times: time = passes x the named kernel's time
ASSUMED_PASSES: dict[str, float] = {"LayerNorm": 3.0, "Softmax": 3.0}
#: measured types whose own model is replaced by the `ASSUMED` rule (the measured layers do not cover the sizes
#: the rule is for; their figures stay in the fit report)
ASSUMED_OVER_MEASURED = ("Softmax",)
#: what the VPU column says about types that need no model of their own (an origin note)
DILATED_CONV = ("dilated convolutions (Convolution-Dilated: Supported in the VPU column; none in the measured "
                "networks) are assumed to cost an ordinary convolution of the same kernel and MACs")
#: SHAVE element-wise types that fall to the published model (entry) when the measurements have none
UNMEASURED_SHAVE = {"Add": "Add", "Relu": "Base"}
#: where each measured type ran, in words (from the reports' execType)
_WHERE = {"nce": "the Neural Compute Engine (MyriadXHwOp)", "nce+shave": "the NCE with an injected SHAVE stage",
          "shave": "SHAVE software kernels", "in-place": "in place (no stage)", "": "not run"}


@dataclass
class Ncs2Fit:
    """A fitted ncs2 platform with what it was fitted on and how."""

    platform: Platform
    report: dict[str, Any]


def load_graph_measurements(store: Store, platform: str = "ncs2",
                            graph_dirs: Sequence[str | os.PathLike] = ()) -> list[Measured]:
    """Every network stored by ``ingest --graph`` for ``platform``, rebuilt from its graph file.

    A graph file no longer at its stored path is looked up by name in ``graph_dirs``.
    """
    groups: dict[str, tuple[dict, list]] = {}
    for suite, cid, params, rec in store.layer_records(platform, GRAPH_SUITE):
        groups.setdefault(cid, (params, []))[1].append(rec)
    e2e = {c: m for (_, c), m in store.e2e_medians(platform, GRAPH_SUITE).items()}
    out = []
    for cid, (params, recs) in groups.items():
        path = str(params.get("graph", ""))
        if not os.path.isfile(path):
            found = [os.path.join(os.fspath(d), os.path.basename(path)) for d in graph_dirs]
            found = [p for p in found if os.path.isfile(p)]
            if not found:
                raise FitDataError(f"{cid}: graph file {path} not found (give the folder that holds it)")
            path = found[0]
        net = to_network(path)
        layers = {r.layer: r for r in recs if r.fused != INSERTED}
        missing = set(net.names) - set(layers)
        if missing:
            raise FitDataError(f"{cid}: the stored records miss {len(missing)} layers of {path} (e.g. "
                               f"{sorted(missing)[0]}); ingest the report again")
        out.append(Measured(GRAPH_SUITE, cid, net, layers, [r for r in recs if r.fused == INSERTED], e2e.get(cid)))
    if not out:
        raise FitDataError(f"no networks of platform {platform!r} in {store.label}: run 'annette bench ingest "
                           f"--platform {platform} --graph GRAPH REPORT ...' first")
    return sorted(out, key=lambda m: m.config_id)


def _mapping(measured: list[Measured], published: MappingModel | None) -> tuple[MappingModel, dict[str, Any]]:
    """Learned fusion rules, zero-cost views folded into their producer, published rules for unseen pairs."""
    fx = fusion_examples(measured)
    learned, rep = fit_mapping(fx, min_examples=2)
    seen = {k for k, v in rep.items() if isinstance(v, dict) and "examples" in v}
    rules = [r for r in learned.rules if not (set(r.secondary) & {t.label for t in ZERO_COST_TYPES})]
    views = tuple(t.label for t in ZERO_COST_TYPES)
    producers = tuple(t.label for t in LayerType if t not in ZERO_COST_TYPES and t != T.INPUT)
    rules.append(FusionRule("ViewFold", producers, views,
                            origin="MYRIAD runs no stage for Reshape / Flatten / Dropout (a view of the buffer) "
                                   "or Pad (merged into the next convolution's padding)"))
    added = []
    for r in (published.rules if published is not None else ()):
        pairs = {f"{p.label}+{s.label}" for p in expand_types(r.primary, r.name)
                 for s in expand_types(r.secondary, r.name)}
        if pairs & seen:
            continue  # the measurements say what the toolchain does with this pair
        rules.append(FusionRule(r.name, r.primary, r.secondary, r.result, r.when, origin=f"published: {r.origin}",
                                multi_input=r.multi_input))
        added.append(r.name)
    rep["published_rules_kept"] = added
    return MappingModel(tuple(rules), None, learned.folds, learned.strides), rep


def _ls_roofline(X: LayerFeatures, y: np.ndarray, refined: bool) -> tuple[Roofline, dict]:
    """Least-squares (log time) roofline, with the unrolling search when ``refined``."""
    m, rep = fit_refined(X, y, BITS, BITS) if refined else fit_refined(X, y, BITS, BITS, dims=())
    if not refined or not m.unroll:
        m = Roofline(m.op_s, m.bandwidth, BITS, BITS)
    return m, rep


def _mean_rate(X: LayerFeatures, y: np.ndarray) -> Roofline:
    """Memory-bound roofline whose bandwidth is total bytes / total time (few or partly zero samples)."""
    byts = X.bytes(BITS, BITS)
    bw = float(byts.sum() / max(y.sum() * 1e-3, 1e-12))
    return Roofline(1e18, bw, BITS, BITS)


def _samples(ls: LayerSamples, rows: np.ndarray) -> LayerFeatures:
    return LayerFeatures.from_network(ls.network, rows)


def _kinds(measured: list[Measured]) -> dict[str, Counter]:
    """Per executed layer type: how many layers ran where (exec kind from the reports)."""
    out: dict[str, Counter] = {}
    for m in measured:
        labels = m.network.type_labels()
        for name, lab in zip(m.network.names, labels):
            r = m.records[name]
            if r.fused == "not-fused" and lab != "Input":
                out.setdefault(lab, Counter())[r.exec_kind] += 1
    return out


def _where(c: Counter | None) -> str:
    if not c:
        return ""
    parts = [f"{n} on {_WHERE.get(k, k)}" for k, n in c.most_common()]
    return "; ran " + ", ".join(parts)


def _layer_models(ls: LayerSamples, overhead_ms: float, kinds: Mapping[str, Counter],
                  published: Mapping[str, LayerModel], shave: np.ndarray, conv_kind: str = "mixed"
                  ) -> tuple[dict[str, LayerModel], dict[str, Any]]:
    """One model per measured type, fitted on the measured times less the per-layer overhead.

    ``shave``: per sample, whether it ran as a SHAVE software stage (their mean rate is the ``Base`` model).
    ``conv_kind``: ``mixed`` (refined roofline times a tree-ensemble correction) or ``refined``.
    """
    net = ls.network
    y = np.maximum(ls.time_ms - overhead_ms, 0.0)
    labels = np.array(net.type_labels(), dtype=object)
    models: dict[str, LayerModel] = {}
    report: dict[str, Any] = {}

    def put(key: str, m: LayerModel, origin: str, n: int) -> None:
        m.origin = origin  # type: ignore[attr-defined]
        models[key] = m
        report[key] = {"model": m.kind, "n_samples": n, "origin": origin}

    groups = {"Conv": ("Conv",), "MaxPool": ("MaxPool",), "AvgPool": ("AvgPool",), "Pool": ("MaxPool", "AvgPool"),
              "GlobalPool": ("GlobalPool", "ReduceMean"), "Add": ("Add",),
              "Relu": ("Relu",), "Concat": ("Concat",), "FullyConnected": ("FullyConnected",),
              "Softmax": ("Softmax",)}
    measured_note: dict[str, str] = {}
    for key in ASSUMED_OVER_MEASURED:
        rows = np.flatnonzero(labels == key)
        if rows.size:
            measured_note[key] = (f"; measured: {rows.size} layers, {float(y[rows].mean()):.4f} ms each on "
                                  f"average ({int(_samples(ls, rows).out_elems.mean())} output elements)")
        groups.pop(key, None)
    for key, labs in groups.items():
        rows = np.flatnonzero(np.isin(labels, labs))
        if not rows.size:
            continue
        X, yy = _samples(ls, rows), y[rows]
        pos = yy > 0
        where = "".join(_where(kinds.get(lab)) for lab in labs)
        n = int(rows.size)
        if key in ("Conv", "MaxPool", "AvgPool", "Pool", "Add", "Relu") and pos.sum() >= MIN_SAMPLES:
            Xp = _samples(ls, rows[pos])
            m, rep = _ls_roofline(Xp, yy[pos], refined=key == "Conv")
            # least squares on log time fits the typical layer; rescale so the fitted layers' total is right
            k = float(yy[pos].sum() / max(m.predict(Xp).sum(), 1e-12))
            m.op_s, m.bandwidth = m.op_s / k, m.bandwidth / k
            kind = ("refined roofline" if isinstance(m, RefinedRoofline) else "roofline") + \
                f" (least squares on log time, scaled by {k:.3f} to the measured total)"
            if key == "Conv" and conv_kind == "mixed":
                m, mrep = fit_mixed(Xp, yy[pos], m, candidates=("gbm",), cv=3, seed=0)
                kind = "mixed (refined roofline x gradient-boosted correction)"
            put(key, m, f"fitted: {kind}, {n} measured layers"
                        f" ({', '.join(labs)}){where}", n)
            report[key]["mre"] = round(float(rep.get("mre", np.nan)), 4)
        else:  # few samples, or in-place (zero) ones among them: the mean rate keeps the total right
            put(key, _mean_rate(X, yy), f"fitted: total bytes / total time of {n} measured layers{where}", n)
    fc = models.get("FullyConnected")
    rate = _shave_conv_rate(ls, y, labels, shave)
    if isinstance(fc, Roofline) and rate is not None and rate < fc.op_s:
        # the measured fully connected layers (classifier heads) are weight-bound: their mean rate says nothing
        # of compute; a layer over many tokens is bounded by the SHAVE stages' compute rate too
        fc.op_s = rate
        fc.origin += (f"; compute bounded at {rate:.3g} op/s, the measured rate of the "  # type: ignore[attr-defined]
                      "convolutions that ran as SHAVE stages (assumed: the measured layers are weight-bound)")
        report["FullyConnected"]["origin"] = fc.origin  # type: ignore[attr-defined]
    # SHAVE element-wise kernels: the fallback for every other type
    sw = shave & ~np.isin(labels, ("Conv", "FullyConnected")) & (y > 0)
    if sw.any():
        rows = np.flatnonzero(sw)
        base = _mean_rate(_samples(ls, rows), y[rows])
        used = ", ".join(sorted(set(labels[rows])))
        put("Base", base, f"fitted: total bytes / total time of the {rows.size} measured SHAVE software stages "
                          f"({used}); every type without a model of its own", int(rows.size))
    else:
        put("Base", Roofline(1e18, 1e9, BITS, BITS), "assumed: 1 GB/s memory-bound (no SHAVE layer measured)", 0)
    for view in ZERO_COST_TYPES:
        put(view.label, Roofline(1e30, 1e30, BITS, BITS),
            "fitted: no stage of its own in any report (NOT_RUN view, or padding merged into the next "
            "convolution)", 0)
    for key in PUBLISHED_TYPES:
        if key in published and key not in models:
            src = published[key]
            m = type(src).from_dict(src.to_dict(), key)
            put(key, m, f"published: ANNETTE ncs2 model ({getattr(src, 'origin', '') or 'ncs2-ref_roofline.json'})"
                        "; not in the measured networks", 0)
    for key, pub_key in UNMEASURED_SHAVE.items():  # element-wise kernels no measured network had
        if key not in models and pub_key in published:
            src = published[pub_key]
            put(key, type(src).from_dict(src.to_dict(), key),
                f"published: ANNETTE ncs2 model entry '{pub_key}'; no {key} layer in the measured networks", 0)
    for key, (like, why) in ASSUMED.items():
        if key in models:
            continue
        like = like if like in models else "Base"
        src = models[like]
        m = type(src).from_dict(src.to_dict(), key)
        how = f"model of {like}"
        passes = ASSUMED_PASSES.get(key, 1.0)
        if passes != 1.0 and isinstance(m, Roofline):
            m.op_s, m.bandwidth = m.op_s / passes, m.bandwidth / passes
            how = f"{passes:g} x the time of the {like} model"
        if key == "MatMul" and isinstance(m, Roofline):
            rate = _shave_conv_rate(ls, y, labels, shave)
            if rate is not None:
                m.op_s = rate
                how += f", at most {rate:.3g} op/s (the SHAVE convolutions' measured rate)"
        put(key, m, f"assumed: {why} ({how}){measured_note.get(key, '')}", 0)
    if "Conv" in models:
        models["Conv"].origin += f"; {DILATED_CONV}"  # type: ignore[attr-defined]
        report["Conv"]["origin"] = models["Conv"].origin  # type: ignore[attr-defined]
    return models, report


def _shave_conv_rate(ls: LayerSamples, y: np.ndarray, labels: np.ndarray, shave: np.ndarray) -> float | None:
    """Operations per second of the convolutions that ran as SHAVE software stages (total ops / total time),
    or None when none did."""
    rows = np.flatnonzero((labels == "Conv") & shave & (y > 0))
    if not rows.size:
        return None
    return float(ls.network.ops[rows].sum() / (y[rows].sum() * 1e-3))


def _input_conversion(measured: list[Measured]) -> tuple[MappingCosts | None, dict[str, Any]]:
    """The plugin's input conversion stage (``<Extra>`` Convert, FP32/U8 -> FP16 on the stick) as a mapping
    cost at the graph input: ms + ms per million input elements, least squares over the networks."""
    elems, ms = [], []
    for m in measured:
        inputs = m.network.types == T.INPUT
        elems.append(float(m.network.out_elems[inputs].sum()) / 1e6)
        ms.append(sum(r.time_ms for r in m.inserted))
    e, t = np.asarray(elems), np.asarray(ms)
    if not t.any():
        return None, {"skipped": "no conversion stage in the reports"}
    if np.ptp(e) > 0 and len(e) >= 2:
        slope, icpt = np.polyfit(e, t, 1)
        if slope < 0 or icpt < 0:
            slope, icpt = float(t.sum() / e.sum()), 0.0
    else:
        slope, icpt = float(t.sum() / max(e.sum(), 1e-12)), 0.0
    coef = (round(float(icpt), 5), round(float(slope), 5), 0.0)
    origin = (f"input conversion stage (<Extra> Convert) of {len(t)} measured networks: {coef[0]} ms + "
              f"{coef[1]} ms per million input elements")
    table = {t_.label: coef for t_ in LayerType if t_ != T.INPUT}
    return MappingCosts({}, table, {}, origin), {"ms": coef[0], "ms_per_melem": coef[1], "networks": len(t)}


def _build(measured: list[Measured], published: Platform | None, overhead_ms: float, extra_meta: Mapping[str, Any],
           conv_kind: str = "mixed") -> tuple[Platform, dict[str, Any]]:
    mapping, mrep = _mapping(measured, published.mapping if published is not None else None)
    ls = layer_samples(measured, mapping)
    # layer_samples spreads inserted stages over layout-breaking layers; take the measured groups' own times
    ls.time_ms, shave = _own_times(measured, mapping, ls)
    models, lrep = _layer_models(ls, overhead_ms, _kinds(measured), published.layers if published is not None else {},
                                 shave, conv_kind)
    costs, crep = _input_conversion(measured)
    mapping = MappingModel(mapping.rules, costs, mapping.folds, mapping.strides)
    meta = dict(extra_meta)
    if overhead_ms > 0:  # the per-stage cost on every executed layer (none when the data choose 0)
        meta["overhead"] = {"scale": 1.0, "per_layer_ms": overhead_ms, "per_network_ms": 0.0}
    plat = Platform("ncs2", models, mapping, "", meta)
    return plat, {"mapping": mrep, "layers": lrep, "input_conversion": crep}


def _own_times(measured: list[Measured], mapping: MappingModel, ls: LayerSamples) -> tuple[np.ndarray, np.ndarray]:
    """Per executed layer of ``ls``: the summed recorded time of its group (inserted stages left out), and
    whether the group's layer ran as a SHAVE software stage."""
    out, sw = [], []
    for m in measured:
        mp = mapping.apply(m.network)
        t = np.array([m.records[n].time_ms for n in m.network.names])
        owner = np.searchsorted(mp.kept, mp.fused_into)
        out.append(np.bincount(owner, weights=t, minlength=len(mp.kept)))
        sw.append(np.array([m.records[m.network.names[i]].exec_kind == "shave" for i in mp.kept]))
    t = np.concatenate(out)
    if t.shape != ls.time_ms.shape:
        raise FitDataError("internal: mapped layers and samples disagree")
    return t, np.concatenate(sw)


def _network_errors(plat: Platform, measured: list[Measured]) -> dict[str, float]:
    """Relative error of the estimated device time against each report's total."""
    return {m.config_id: float(estimate(m.network, plat).device_ms / _total(m) - 1.0) for m in measured}


def _total(m: Measured) -> float:
    if m.e2e_ms:
        return float(m.e2e_ms)
    return float(sum(r.time_ms for r in m.records.values()) + sum(r.time_ms for r in m.inserted))


def _choose_overhead(measured: list[Measured], published: Platform | None) -> float:
    """The per-layer overhead whose fitted platform has the smallest mean absolute network error, among those
    no larger than the fastest executed stage: every stage pays it, so none can take less."""
    floor = min((r.time_ms for m in measured for r in [*m.records.values(), *m.inserted] if r.time_ms > 0),
                default=0.0)
    best = None
    for c in [c for c in OVERHEAD_GRID if c <= floor]:
        plat, _ = _build(measured, published, float(c), {}, conv_kind="refined")
        err = float(np.mean(np.abs(list(_network_errors(plat, measured).values()))))
        if best is None or err < best[0] - 1e-9:
            best = (err, float(c))
    return best[1] if best else 0.0


def fit_ncs2(measured: list[Measured], published: Platform | None = None, meta: Mapping[str, Any] | None = None,
             overhead_ms: float | None = None, conv_kind: str = "mixed") -> Ncs2Fit:
    """Fit the ncs2 platform on ``measured`` networks (see the module docstring).

    ``published``: the published ANNETTE ncs2 platform, for the types the measurements lack and the fusion
    rules of pairs they never show. ``overhead_ms``: the per-layer overhead (default: chosen on the data).
    """
    if not measured:
        raise FitDataError("no measured networks to fit the ncs2 platform on")
    c = _choose_overhead(measured, published) if overhead_ms is None else float(overhead_ms)
    plat, rep = _build(measured, published, c, meta or {}, conv_kind)
    rep["per_layer_ms"] = c
    rep["in_sample"] = _network_errors(plat, measured)
    rep["networks"] = [m.config_id for m in measured]
    return Ncs2Fit(plat, rep)


def _type_errors(est: Any, m: Measured) -> dict[str, tuple[float, float]]:
    """Per executed type of ``m`` (as the estimate ``est`` of it maps it): (estimated ms, measured ms)."""
    mp = est.mapped
    t_meas = np.array([m.records[n].time_ms for n in m.network.names])
    owner = np.searchsorted(mp.kept, mp.fused_into)
    meas = np.bincount(owner, weights=t_meas, minlength=len(mp.kept))
    out: dict[str, list[float]] = {}
    for lab, te, tm in zip(mp.network.type_labels(), est.mapped_time_ms, meas):
        if lab == "Input":
            continue
        acc = out.setdefault(lab, [0.0, 0.0])
        acc[0] += float(te)
        acc[1] += float(tm)
    return {k: (v[0], v[1]) for k, v in out.items()}


def leave_one_network_out(measured: list[Measured], published: Platform | None = None,
                          progress: Callable[[str], None] | None = None, conv_kind: str = "mixed") -> dict[str, Any]:
    """Fit on all networks but one, estimate the one left out; per network and per layer type.

    Returns ``{"networks": {name: {"estimated_ms", "measured_ms", "error"}}, "types": {type: {"estimated_ms",
    "measured_ms", "error"}}}``; a type's figures are summed over the networks left out.
    """
    def folds() -> Iterator[tuple[Measured, Platform]]:
        for k, m in enumerate(measured):
            if progress:
                progress(f"leave out {m.config_id}")
            fit = fit_ncs2(measured[:k] + measured[k + 1:], published, conv_kind=conv_kind)
            per_layer[m.config_id] = fit.report["per_layer_ms"]
            yield m, fit.platform

    per_layer: dict[str, float] = {}
    out = _scored(folds())
    for name, v in out["networks"].items():
        v["per_layer_ms"] = per_layer[name]
    return out


def _scored(pairs: Iterable[tuple[Measured, Platform]]) -> dict[str, Any]:
    """Each (network, platform) pair's estimated device time against the report total; per layer type summed
    over the networks (see `leave_one_network_out` for the layout)."""
    nets: dict[str, Any] = {}
    types: dict[str, list[float]] = {}
    for m, plat in pairs:
        est = estimate(m.network, plat)
        nets[m.config_id] = {"estimated_ms": est.device_ms, "measured_ms": _total(m),
                             "error": est.device_ms / _total(m) - 1.0}
        for lab, (te, tm) in _type_errors(est, m).items():
            acc = types.setdefault(lab, [0.0, 0.0])
            acc[0] += te
            acc[1] += tm
    return {"networks": nets,
            "types": {k: {"estimated_ms": v[0], "measured_ms": v[1], "error": (v[0] / v[1] - 1.0) if v[1] else None}
                      for k, v in types.items()}}


def published_platform(reference: str | os.PathLike) -> Platform:
    """The published ANNETTE ncs2 model from the original release's data folder (refined roofline + ov.json)."""
    from ..platform.annette_compat import layers_from_annette, mapping_from_annette
    ref = os.fspath(reference)
    return Platform("ncs2-published",
                    layers_from_annette(os.path.join(ref, "models", "layer", "ncs2-ref_roofline.json")),
                    mapping_from_annette(os.path.join(ref, "models", "mapping", "ov.json")),
                    "published ANNETTE ncs2 model")


def published_errors(measured: list[Measured], published: Platform) -> dict[str, Any]:
    """The published model's per-network and per-type error on the same networks (no fitting)."""
    return _scored((m, published) for m in measured)
