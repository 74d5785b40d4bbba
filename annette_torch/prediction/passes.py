"""The prediction passes, in order: each reads the `Run` and what earlier passes left, and adds its part.

    map_layers -> place_layers -> layer_models -> weight_residency -> fused_work -> slow_paths
    -> runtime_overhead -> host_layers -> switches -> drop_inputs

A pass whose platform piece is absent (no cache model, no operator support, ...) leaves the run as it is.
The same list serves one network (`estimate`), a stack of many (`estimate_many`) and the blocks of a
latency table; only the `Run`'s options differ.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..ir import LayerType, Network
from ..mapping import MappedNetwork
from ..models.base import layer_bytes
from ..models.calibration import ramp_share
from ..models.roofline import roofline_ms
from ..platform import Platform
from ..platform.platform import CONST, VECTOR, VECTOR_ACT, vector_rows
from ..platform.tables import ModelTables
from .original import original_layer_models
from .state import RUNS_MS, Run

__all__ = ["PASSES", "run", "layer_times", "model_times", "map_layers", "place_layers", "layer_models",
           "weight_residency", "fused_work", "slow_paths", "runtime_overhead", "host_layers", "switches", "drop_inputs"]

_INPUT, _DEPTHWISE = int(LayerType.INPUT), int(LayerType.DEPTHWISE_CONV)


def map_layers(r: Run) -> None:
    """The toolchain's fusions, folds and stride rewrites (`MappingModel.apply`), unless given."""
    if r.mapped is None:
        r.mapped = r.platform.mapping.apply(r.network, light=r.light)


def place_layers(r: Run) -> None:
    """Where each executed layer runs, on a platform with operator support (`OperatorSupport.place`)."""
    if r.platform.support is not None and r.placement is None:
        r.placement = r.platform.support.place(r.executed)


def model_times(tables: ModelTables, net: Network, rows: np.ndarray | None = None, on_host: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per layer (all, or ``rows``): its time under its type's layer model (its host model where ``on_host``,
    a mask over the same layers), that model's index, the bytes it moves and its weights' bytes.

    Plain rooflines are costed for all layers at once, then the other models' rows (`ModelTables.special_times`:
    the tree ensembles of all of them in one walk, refined, statistical and mixed models in one program).
    """
    types = net.types if rows is None else net.types[rows]
    mi = tables.model_of_type[types]
    if on_host is not None:
        assert tables.host_of_type is not None
        mi = np.where(on_host, tables.host_of_type[types], mi)
    ops, weights = (net.ops, net.weights) if rows is None else (net.ops[rows], net.weights[rows])
    elems = net.in_elems + net.out_elems if rows is None else net.in_elems[rows] + net.out_elems[rows]
    wbytes = weights * tables.weight_bytes[mi]
    byts = layer_bytes(elems, wbytes, tables.act_bytes[mi])
    t = roofline_ms(ops, byts, tables.op_s[mi], tables.bandwidth[mi])
    return tables.special_times(net, rows, mi, ops, byts, t), mi, byts, wbytes


def layer_models(r: Run) -> None:
    """Each executed layer's time under its type's layer model (`model_times`), a host-run layer's under the
    host's (kept aside for `host_layers`: the passes between are the accelerator's)."""
    if r.platform.original_semantics:  # the original ANNETTE release's numbers, defects included
        r.time_ms, r.model, r.layer_bytes, r.weight_bytes = original_layer_models(r.platform, r.executed)
        return
    on_host = r.placement.on_host if r.moves else None  # type: ignore[union-attr]
    r.time_ms, r.model, r.layer_bytes, r.weight_bytes = model_times(r.platform.tables, r.executed, on_host=on_host)
    if on_host is not None:
        r.host_ms = r.time_ms[on_host]


def weight_residency(r: Run) -> None:
    """With a cache model: weighted layers pay for the weights their network's traffic pushed out of the
    caches (the traffic of the network a block belongs to when ``context_bytes`` gives it)."""
    cache = r.platform.cache
    if cache is None:
        return
    assert r.layer_bytes is not None and r.weight_bytes is not None and r.time_ms is not None
    if r.context_bytes is not None:
        traffic: float | np.ndarray = r.context_bytes
    else:
        seg = r.executed_segments
        traffic = (np.full(len(r.layer_bytes), float(r.layer_bytes.sum())) if seg is None
                   else np.bincount(seg, weights=r.layer_bytes)[seg])
    r.time_ms = cache.apply(r.time_ms, r.executed.types, r.weight_bytes, traffic)


def fused_work(r: Run) -> None:
    """With mapping costs: each executed layer also carries its fused layers' work, the reorders the
    toolchain inserts at graph inputs and outputs (``input_reorders`` / ``output_reorders``) and, with layout
    costs, those between the blocked and the plain layout on its output tensor."""
    costs = r.platform.mapping.costs
    if costs is None:
        return
    assert r.mapped is not None and r.time_ms is not None
    reorders = None
    if r.input_reorders or r.output_reorders:
        reorders = costs.inserted_ms(r.executed, inputs=r.input_reorders, outputs=r.output_reorders)
    if costs.has_layout:
        layout = costs.layout_ms(r.executed, outputs=r.output_reorders)
        reorders = layout if reorders is None else reorders + layout
    t = r.time_ms + r.mapped.fused_ms
    if reorders is not None:
        t = t + reorders
        if r.platform.reorder_scale is not None:  # (kept apart for `runtime_overhead`)
            r.reorder_ms = reorders
    r.time_ms = t


def slow_paths(r: Run) -> None:
    """With ``slow_ns``: each executed layer also pays for its work on the runtime's slow path (the ``slow``
    column, e.g. multiply-adds with subnormal attention probabilities), at the platform's price per unit."""
    ms = r.platform.slow_ms
    if ms is None:
        return
    slow = r.executed.cols["slow"]
    if slow.any():
        assert r.time_ms is not None
        r.time_ms = r.time_ms + slow * ms[r.executed.types]


def runtime_overhead(r: Run) -> None:
    """A CPU runtime's fitted per-layer scale and cost (depthwise layers scaled apart; none for a layer run in
    place, `RUNS_MS`; its share for a layer below the overhead's ramp) and per-inference cost (on the graph
    input); the reorders in a layer's time at ``reorder_scale`` where the platform has one."""
    oh = r.platform.overhead
    if oh is None:
        return
    assert r.time_ms is not None
    scale, per_layer, per_net, dw_scale = oh
    types = r.executed.types
    is_input = types == _INPUT
    scales = np.where(types == _DEPTHWISE, dw_scale, scale)
    if r.platform.kind_scales:  # per layer kind, a factor on the scale (kernel or vector entries last)
        factor = np.ones(len(types))
        cols = r.executed.cols
        for t, k, f in r.platform.kind_scales:
            m = types == t
            if k == VECTOR:
                m &= vector_rows(cols)
            elif k == VECTOR_ACT:
                m &= vector_rows(cols) & r.mapped.activated()  # type: ignore[union-attr]
            elif k == CONST:
                m &= r.executed.n_inputs == 1
            elif k is not None:
                m &= (cols["kh"] == k[0]) & (cols["kw"] == k[1])
            factor[m] = f
        scales = scales * factor
    share = ramp_share(r.time_ms, r.platform.per_layer_ramp_ms)  # (1 unless a layer is below the ramp)
    scaled = r.time_ms * scales
    if r.reorder_ms is not None:  # reorders at their own factor, not their layer's
        scaled += r.reorder_ms * (scale * r.platform.reorder_scale - scales)  # type: ignore[operator]
    t = np.maximum(scaled + np.where(is_input | (r.time_ms < RUNS_MS), 0.0, per_layer * share), 0.0)
    t[is_input & (r.executed.n_inputs == 0)] += per_net
    r.time_ms = t


def host_layers(r: Run) -> None:
    """Layers the accelerator cannot run take their time under the host's layer models (`layer_models`; model
    indices counted on after the accelerator's, see `Platform.model_labels`)."""
    if r.host_ms is not None:
        assert r.placement is not None and r.time_ms is not None
        r.time_ms[r.placement.on_host] = r.host_ms


def switches(r: Run) -> None:
    """A layer reading a tensor from the other side also waits for its transfer."""
    if r.moves:
        assert r.placement is not None and r.time_ms is not None
        r.time_ms = r.time_ms + r.placement.switch_ms


def drop_inputs(r: Run) -> None:
    """A block's Input layer is the previous block's output: it costs nothing unless ``count_input``."""
    if not r.count_input:
        assert r.time_ms is not None
        r.time_ms = np.where(r.executed.types == _INPUT, 0.0, r.time_ms)


#: every pass, in order
PASSES: tuple[Callable[[Run], None], ...] = (map_layers, place_layers, layer_models, weight_residency, fused_work,
                                             slow_paths, runtime_overhead, host_layers, switches, drop_inputs)


def run(platform: Platform, network: Network, segments: np.ndarray | None = None, n: int = 1,
        mapped: MappedNetwork | None = None, passes: Sequence[Callable[[Run], None]] = PASSES, **options: object) -> Run:
    """Run the passes on ``network`` (a stack of ``n`` networks given ``segments``); ``options`` are `Run`'s
    (``light``, ``context_bytes``, ``input_reorders``, ``output_reorders``, ``count_input``); ``mapped``:
    the network already mapped by ``platform``'s mapping model."""
    r = Run(platform, network, segments, n, mapped=mapped, **options)  # type: ignore[arg-type]
    for p in passes:
        p(r)
    return r


def layer_times(platform: Platform, mapped: MappedNetwork, **options: object) -> tuple[np.ndarray, np.ndarray]:
    """Per executed layer of an already mapped network: its time in ms and the index of its model."""
    r = run(platform, mapped.source, mapped=mapped, **options)
    assert r.time_ms is not None and r.model is not None
    return r.time_ms, r.model
