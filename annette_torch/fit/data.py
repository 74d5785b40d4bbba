"""Training data for the model generator, read from the measurement store.

Every stored configuration is rebuilt into its benchmark `Network` (suites are deterministic), so each
measured layer gets the same IR features the estimator will see. Two views come out of it:

* fusion examples: for every producer -> consumer edge that a toolchain could fuse, the (group-head type,
  consumer type, attributes) and whether the toolchain did fuse it (from the matcher's fused flags);
* layer samples: after applying a mapping model, one row per executed layer with its features and the
  measured time of its fused group; plus the cost of toolchain-inserted nodes per configuration.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from ..bench.records import FUSED, INSERTED, NOT_FUSED, LayerRecord
from ..bench.store import Store
from ..errors import AnnetteError
from ..ir import MERGE_TYPES, LayerType, Network
from ..mapping import (ACTIVATIONS, GROUP_ATTRS, MappedNetwork, MappingModel, apply_folds, hardswish_groups,
                       pad_consumers, shuffle_groups, swish_diamonds)
from ..mapping.layout import VIEW_TYPES

#: layers of several inputs a toolchain may fuse into the group of one of their producers: a residual Add or a
#: gating Mul (`MERGE_TYPES` are all merges), and a batched product of two activations (OpenVINO runs attention's
#: scores, softmax and context product as one node)
JOINING_TYPES = (LayerType.ADD, LayerType.MUL, LayerType.MATMUL)
#: views (`mapping.layout.VIEW_TYPES`), left out of a fused group's type beside another fused type
_VIEWS = {int(t) for t in VIEW_TYPES}
_ACTIVATION_IDS = {int(t) for t in ACTIVATIONS}

__all__ = ["Measured", "load_measured", "FusionExamples", "fusion_examples", "LayerSamples", "layer_samples",
           "FitDataError", "learned_folds", "learned_strides", "JOINING_TYPES"]

log = logging.getLogger(__name__)


class FitDataError(AnnetteError):
    """The store holds too little (or no) usable data for what is being fitted."""


@dataclass
class Measured:
    """One measured configuration: its network and per-layer records (inserted nodes separate)."""

    suite: str
    config_id: str
    network: Network
    records: dict[str, LayerRecord]
    inserted: list[LayerRecord]
    e2e_ms: float | None = None
    #: the configuration's parameters (what its suite builds it from, what measures it again)
    params: dict[str, Any] = field(default_factory=dict)


def load_measured(store: Store, platform: str, suites: Iterable[str] | None = None) -> list[Measured]:
    """All successfully measured configurations of ``platform`` whose suite can rebuild its network."""
    from ..bench.suites import SUITES

    wanted = set(suites) if suites is not None else None
    groups: dict[tuple[str, str], tuple[dict, list[LayerRecord]]] = {}
    for suite, cid, params, rec in store.layer_records(platform):
        if wanted is not None and suite not in wanted:
            continue
        groups.setdefault((suite, cid), (params, []))[1].append(rec)
    e2e = store.e2e_medians(platform)
    out: list[Measured] = []
    skipped: set[str] = set()
    for (suite, cid), (params, recs) in groups.items():
        if suite not in SUITES:
            skipped.add(suite)
            continue
        net = SUITES[suite].build(params)
        layers = {r.layer: r for r in recs if r.fused != INSERTED}
        if not set(net.names) <= set(layers):
            log.debug("%s/%s: records do not cover the network; skipped", suite, cid)
            continue
        out.append(Measured(suite, cid, net, layers, [r for r in recs if r.fused == INSERTED], e2e.get((suite, cid)),
                            params))
    if skipped:
        log.info("suites without a builder skipped: %s", ", ".join(sorted(skipped)))
    return out


@dataclass
class FusionExamples:
    """Per candidate edge: head type, consumer type, their integer columns and whether it was fused."""

    head_type: np.ndarray
    sec_type: np.ndarray
    head_cols: dict[str, np.ndarray]
    sec_cols: dict[str, np.ndarray]
    fused: np.ndarray
    sec_result: np.ndarray  # executed type of the group the consumer joined (e.g. a pool fused into a conv)

    def __post_init__(self) -> None:
        for a in GROUP_ATTRS:  # (examples that do not record a group attribute: nothing absorbed before)
            self.head_cols.setdefault(a, np.zeros(len(self.fused), dtype=np.int64))

    def __len__(self) -> int:
        return len(self.fused)


def _heads(m: Measured) -> np.ndarray:
    """Per layer of ``m``: the row of the layer whose executed node ran it (itself unless fused)."""
    idx = {n: i for i, n in enumerate(m.network.names)}
    head = np.arange(len(m.network))
    for i, name in enumerate(m.network.names):
        r = m.records[name]
        if r.fused == FUSED and r.fused_into in idx:
            head[i] = idx[r.fused_into]
    return head


#: share of the measured patterns run as one node at or above which the mapping model folds them
#: (`annette_torch.mapping.folds`)
FOLD_RATE = 0.95


def learned_folds(measured: list[Measured]) -> tuple[tuple[str, ...], dict[str, object]]:
    """The pattern folds the toolchain's records support (see `annette_torch.mapping.folds`).

    ``swish`` when (nearly) every measured ``x * sigmoid(x)`` ran its Sigmoid and Mul in one node (OpenVINO:
    inside the conv; ONNX Runtime: a QuickGelu on the Mul); ``hardswish`` when (nearly) every measured
    written-out hard-swish ran as one node of its own, apart from its input's producer (OpenVINO: one
    element-wise ``Subgraph``; ONNX Runtime runs four nodes); ``shuffle`` when (nearly) every measured channel
    shuffle ran as one node on its last view, the view and transpose with no node of their own (OpenVINO's
    ``ShuffleChannels``; ONNX Runtime runs a Reshape, a Transpose and a Reshape); ``pad`` when (nearly) every
    measured Pad read by a convolution alone ran no node of its own (ONNX Runtime's ``PadFusion``).
    Returns the folds and a report.
    """
    together = total = 0
    hs_total = hs_one = hs_alone = 0
    sh_total = sh_one = 0
    pad_total = pad_in = 0
    for m in measured:
        pc = pad_consumers(m.network)
        if pc.size:  # no node of its own (the matcher charges a vanished node's layer to its producer)
            pad_total += len(pc)
            pad_in += sum(m.records[m.network.names[p]].fused != NOT_FUSED for p in pc[:, 0])
        sig, mul = swish_diamonds(m.network)
        g = hardswish_groups(m.network)
        sg = shuffle_groups(m.network)
        names = m.network.names
        for v, t, b in sg:  # one node of its own, on the last view
            sh_total += 1
            sh_one += m.records[names[b]].fused == NOT_FUSED and all(
                m.records[names[i]].fused != NOT_FUSED for i in (v, t))
        if not sig.size and not len(g):
            continue
        head = _heads(m)
        if sig.size:
            together += int((head[sig] == head[mul]).sum())
            total += sig.size
        for k in range(len(g)):
            rows = np.append(g.members[g.member_group == k], g.survivor[k])
            one = bool((head[rows] == head[rows[0]]).all())
            hs_total += 1
            hs_one += one
            hs_alone += one and head[rows[0]] != head[g.x[k]]
    folds: list[str] = []
    report: dict[str, object] = {}
    if not total:
        report["swish"] = "no measured x * sigmoid(x)"
    else:
        rate = together / total
        folds += ["swish"] if rate >= FOLD_RATE else []
        report["swish"] = {"diamonds": total, "one_node_rate": round(rate, 3)}
    if not hs_total:
        report["hardswish"] = "no measured x * relu6(x + 3) / 6"
    else:
        alone = hs_alone / hs_total
        folds += ["hardswish"] if alone >= FOLD_RATE else []
        report["hardswish"] = {"groups": hs_total, "one_node_rate": round(hs_one / hs_total, 3),
                               "own_node_rate": round(alone, 3)}
    if not sh_total:
        report["shuffle"] = "no measured channel shuffle"
    else:
        folds += ["shuffle"] if sh_one / sh_total >= FOLD_RATE else []
        report["shuffle"] = {"shuffles": sh_total, "one_node_rate": round(sh_one / sh_total, 3)}
    if not pad_total:
        report["pad"] = "no measured Pad read by a convolution alone"
    else:
        folds += ["pad"] if pad_in / pad_total >= FOLD_RATE else []
        report["pad"] = {"pads": pad_total, "no_node_rate": round(pad_in / pad_total, 3)}
    return tuple(folds), report


#: ``stride_prop`` time ratio (stride-2 path's 3x3 conv over the stride-1 path's) below which a stride passed
#: the middle layer: a quarter of the pixels computed gives ~0.25-0.4, no propagation ~1
STRIDE_RATIO = 0.6
#: fewest ``stride_prop`` configurations per middle layer for a verdict
MIN_STRIDE_CONFIGS = 3


def learned_strides(measured: list[Measured]) -> tuple[tuple[str, ...] | None, dict[str, object]]:
    """Whether the toolchain propagates strides (`annette_torch.mapping.strides`) and through which layer
    types, from the ``stride_prop`` suite: per middle layer, the median ratio of the 3x3 conv's time on the
    stride-2 path to the same conv's on the stride-1 path. None (no propagation) unless the plain path
    (``mid="none"``) shows it. Returns the pass-through type labels (or None) and a report."""
    ratios: dict[str, list[float]] = {}
    for m in measured:
        if m.suite != "stride_prop":
            continue
        a, b = m.records.get("convA"), m.records.get("convB")
        if a is None or b is None or a.time_ms <= 0 or b.time_ms <= 0:
            continue
        net = m.network
        mid = LayerType(int(net.types[net.index("midA")])).label if "midA" in net.names else "none"
        ratios.setdefault(mid, []).append(a.time_ms / b.time_ms)
    report: dict[str, object] = {k: {"configs": len(v), "median_ratio": round(float(np.median(v)), 3)}
                                 for k, v in sorted(ratios.items())}
    base = ratios.get("none", [])
    if len(base) < MIN_STRIDE_CONFIGS:
        report["verdict"] = "too few stride_prop measurements with no middle layer"
        return None, report
    if float(np.median(base)) >= STRIDE_RATIO:
        report["verdict"] = "no propagation"
        return None, report
    through = sorted(k for k, v in ratios.items()
                     if k != "none" and len(v) >= MIN_STRIDE_CONFIGS and float(np.median(v)) < STRIDE_RATIO)
    report["verdict"] = "propagates"
    report["through"] = through
    return tuple(through), report


def _activated(p: int, h: int, head: np.ndarray, types: np.ndarray, edges: np.ndarray) -> int:
    """1 when the group headed by ``h`` applied an activation on its way to ``p`` (`mapping.GROUP_ATTRS`): a layer
    of `mapping.ACTIVATIONS` among ``p`` and the group's layers before it, else 0."""
    j, seen = p, 0
    while j != h and seen <= len(types):
        if int(types[j]) in _ACTIVATION_IDS:
            return 1
        into = edges[edges[:, 1] == j, 0]
        into = into[head[into] == h]
        if not into.size:
            break
        j, seen = int(into[0]), seen + 1
    return 0


def fusion_examples(measured: list[Measured], folds: tuple[str, ...] = ()) -> FusionExamples:
    """Edges a toolchain could fuse (single-consumer producer, single-input consumer) and what it did.

    ``folds``: the mapping model's pattern folds, applied first (a folded swish is one SiLU layer); a layer
    a fold pins (a folded hard-swish) gives no example with its producer.
    """
    ht, st, hrows, srows, fz, act = [], [], [], [], [], []
    for m in measured:
        net, recs = m.network, m.records
        head = _heads(m)
        types, edges = net.types, net.edges
        out_deg, in_deg = net.n_outputs, net.n_inputs
        pinned = np.zeros(len(net), dtype=bool)
        if folds:
            f = apply_folds(net, folds)
            if f.any:
                # a folded group is one layer: the node that ran any of it ran the survivor
                types, edges, pinned, head = f.types, f.edges, f.pinned, f.absorber[head]
                out_deg = np.bincount(edges[:, 0], minlength=len(net))
                in_deg = np.bincount(edges[:, 1], minlength=len(net))
        for p, s in edges:
            if out_deg[p] != 1 or pinned[s] or recs[net.names[s]].fused not in (FUSED, NOT_FUSED):
                continue
            if types[p] == LayerType.INPUT or head[p] == s:
                # (a producer absorbed by its consumer, e.g. ONNX Runtime's x * sigmoid(x) -> QuickGelu on the Mul:
                # a fusion backwards, which a rule "head + consumer" cannot express)
                continue
            h = head[p]
            if in_deg[s] != 1:
                # a joining layer (e.g. a residual Add) joins at most one of its producers: an example only
                # for that producer if it did, for every eligible producer if it did not
                if types[s] not in JOINING_TYPES or (head[s] != s and head[s] != h):
                    continue
            for q in ((h, p) if h != p and head[s] != h and types[p] != types[h] else (h,)):
                # a consumer left out of its producer's group is also a "no" for the producer's own type: the
                # mapping's first round pairs a layer with its consumer before the layer joins a group, e.g.
                # OpenVINO's channel shuffle, whose transpose joins the Concat and whose last view does not
                ht.append(types[q])
                st.append(types[s])
                hrows.append({c: net.cols[c][q] for c in net.cols})
                srows.append({c: net.cols[c][s] for c in net.cols})
                fz.append(head[s] == h)
                # (the producer's own type: a group of one)
                act.append(_activated(p, h, head, types, edges) if q == h else 0)
    if not fz:
        raise FitDataError("no fusion examples: measure multi-layer suites first (e.g. conv_bn_relu, conv_pool, "
                           "residual, dwsep, conv_act)")
    cols = list(hrows[0])
    head_cols = {c: np.array([r[c] for r in hrows]) for c in cols}
    head_cols["activated"] = np.array(act, dtype=np.int64)
    return FusionExamples(np.array(ht), np.array(st), head_cols,
                          {c: np.array([r[c] for r in srows]) for c in cols}, np.array(fz, dtype=bool),
                          np.array(st))


@dataclass
class LayerSamples:
    """Executed layers (after a mapping model) with their features and measured group time."""

    network: Network  # all mapped layers of all configurations stacked (see `Network.concat`)
    time_ms: np.ndarray
    config: np.ndarray  # index into `configs`
    configs: list[Measured]
    inserted_ms: np.ndarray  # per configuration: summed time of toolchain-inserted nodes
    #: per configuration: the part of ``inserted_ms`` at a graph input (see `inserted_at_input`)
    inserted_input_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: per executed layer: the type of the layers fused into it (BatchNorm ignored next to another type;
    #: -1 none, -2 several types) and their summed output elements
    fused_type: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    fused_elems: np.ndarray = field(default_factory=lambda: np.zeros(0))
    extra: dict = field(default_factory=dict)
    #: per configuration: the time of all its inserted nodes, and of those at its graph input (`_boundary`)
    all_inserted_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    graph_input_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))


def layer_samples(measured: list[Measured], mapping: MappingModel) -> LayerSamples:
    """Map every measured network with ``mapping`` and attach the measured time to each executed layer.

    A fused group's time is the sum of its members' recorded times (the toolchain's survivor carries it),
    so a mapping model that disagrees with the toolchain still yields consistent totals. With mapping
    costs, the work of the fused layers (`MappingCosts.fused_ms`) is taken off the group's time: the layer
    models learn the executing layer alone (never below a quarter of the group's time).
    """
    mapped_nets, times, cfg, ftype, felems = [], [], [], [], []
    inserted = np.zeros(len(measured))
    inserted_in = np.zeros(len(measured))
    all_ins = np.array([sum(r.time_ms for r in m.inserted) for m in measured])
    at_input = np.zeros(len(measured))
    by_layout = mapping.costs is not None and mapping.costs.has_layout
    for k, m in enumerate(measured):
        mp = mapping.apply(m.network)
        t_orig = np.array([m.records[n].time_ms for n in m.network.names])
        owner = np.searchsorted(mp.kept, mp.fused_into)
        t = np.bincount(owner, weights=t_orig, minlength=len(mp.kept))
        if mapping.costs is not None:
            t = np.maximum(t - mp.fused_ms, 0.25 * t)
        ft, fe = _fused_summary(mp.source, owner, mp)
        inputs = [n for n, ty in zip(m.network.names, m.network.types) if ty == LayerType.INPUT]
        ins = m.inserted
        at_input[k] = sum(r.time_ms for r in ins if _boundary(r, inputs, ()))
        breakers = np.flatnonzero(layout_breakers(mp.network))
        if breakers.size and not by_layout:
            # reorders around plain-layout layers inside the graph are their cost, not the graph ends' (with
            # layout costs, every reorder but the graph input's is theirs: `mapping_costs_fit.fit_layout`)
            outputs = [m.network.names[i] for i in np.flatnonzero(m.network.n_outputs == 0)]
            inner = [r for r in ins if not _boundary(r, inputs, outputs)]
            e = mp.network.out_elems[breakers].astype(np.float64)
            t = t.copy()
            t[breakers] += sum(r.time_ms for r in inner) * e / max(e.sum(), 1.0)
            ins = [r for r in ins if _boundary(r, inputs, outputs)]
        mapped_nets.append(mp.network)
        times.append(t)
        cfg.append(np.full(len(mp.kept), k))
        ftype.append(ft)
        felems.append(fe)
        inserted[k] = sum(r.time_ms for r in ins)
        inserted_in[k] = sum(r.time_ms for r in ins if inserted_at_input(r, inputs))
    if not mapped_nets:
        raise FitDataError("no measured configurations to fit layer models on")
    big, _ = Network.concat(mapped_nets)
    # the mapped networks carry given derived quantities (fused groups): keep them
    big.set_derived({key: np.concatenate([getattr(n, key) for n in mapped_nets])
                     for key in ("ops", "weights", "in_elems", "out_elems")})
    return LayerSamples(big, np.concatenate(times), np.concatenate(cfg), measured, inserted, inserted_in,
                        np.concatenate(ftype), np.concatenate(felems), all_inserted_ms=all_ins,
                        graph_input_ms=at_input)


def inserted_at_input(rec: LayerRecord, inputs: Iterable[str]) -> bool:
    """Whether an inserted node converts a graph input (``inputs``: the network's input layer names): ONNX
    Runtime's ``ReorderInput``, or a node named after an input layer (OpenVINO's ``x_abcd_acdb_conv``)."""
    return rec.layer_type.lower() == "reorderinput" or any(rec.node.startswith(f"{n}_") for n in inputs)


#: Layers a runtime runs in the plain layout between blocked-layout convs (ONNX Runtime's NCHWc): the
#: reorders it inserts around them inside a graph are charged to them (spread by output size).
LAYOUT_BREAKERS = (LayerType.SLICE, LayerType.RESHAPE, LayerType.TRANSPOSE, LayerType.FLATTEN,
                   LayerType.BLOCKED_RESHAPE, LayerType.PICK)


def layout_breakers(net: Network) -> np.ndarray:
    """Mask of the layers that break a blocked layout: `LAYOUT_BREAKERS` and broadcasting merges (a
    squeeze-excite gate times a feature map: ONNX Runtime's NCHWc kernels take same-shape operands only)."""
    merge = np.isin(net.types, MERGE_TYPES) & (net.n_inputs > 1)
    broadcast = merge & (net.in_elems < net.n_inputs * net.out_elems)
    return np.isin(net.types, LAYOUT_BREAKERS) | broadcast


def _boundary(rec: LayerRecord, inputs: Iterable[str], outputs: Iterable[str]) -> bool:
    """Whether an inserted node sits at a graph end, where a graph has reorders inside too: at an input as
    `inserted_at_input` says, except that ONNX Runtime names only the first ``ReorderInput`` it creates (the
    graph input's, first in topological order) plainly and later ones ``ReorderInput_token_<n>``; at an
    output when named after an output layer (OpenVINO's ``<layer>_acdb_abcd_<layer>/sink_port_0``)."""
    if any(rec.node.startswith(f"{n}_") for n in outputs):
        return True
    return inserted_at_input(rec, inputs) and not rec.node.startswith("ReorderInput_token_")


def _fused_summary(net: Network, owner: np.ndarray, mp: MappedNetwork) -> tuple[np.ndarray, np.ndarray]:
    """Per executed layer: the single type fused into it (see `LayerSamples.fused_type`) and its elements
    (the types after the pattern folds; a folded layer counts as part of what it was folded into)."""
    kept, ltypes = mp.kept, mp.layer_types
    ftype = np.full(len(kept), -1, dtype=np.int64)
    felems = np.zeros(len(kept))
    gone = np.setdiff1d(np.flatnonzero(~mp.folded), kept)
    for j in np.unique(owner[gone]):
        rows = gone[owner[gone] == j]
        types = set(int(t) for t in ltypes[rows])
        if len(types) > 1:
            types.discard(int(LayerType.BATCH_NORM))
        if len(types) > 1:  # a view beside a copy moves nothing itself (a channel shuffle: the transpose copies)
            types -= _VIEWS
        if len(types) == 1:
            ftype[j] = types.pop()
            felems[j] = net.out_elems[rows[ltypes[rows] == ftype[j]]].sum()
        else:
            ftype[j] = -2
    return ftype, felems
