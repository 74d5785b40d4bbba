"""A short micro-kernel sweep on this machine that rescales a platform file's layer models per kind of layer.

Why: the speed ratio between two CPUs differs by layer kind. The AMD EPYC ``ort-cpu`` file on an Intel Xeon VM:
convolutions and pooling run ~1.4-1.6x its models, a transformer's projections ~1.3x, products of two
activations ~1.0-1.1x. One factor on the whole file cannot serve a CNN and a transformer at once, and ten
end-to-end latencies cannot pin down a factor per kind. A few micro-kernels of the kinds that carry the
adaptation networks' time can, chosen like those networks' layers (`pick_configs`): each kind's factor is the
median of measured over modelled time of its layers (`sweep_factors`). A fully connected layer gets two: a
classifier's matrix-vector product (`VECTOR_KIND`, memory-bound) and a transformer's rows run at ratios of their
own (the Intel Xeon VM against the AMD EPYC openvino-cpu file: ~1.8-2.1x and ~1.1x). A convolution gets one
per square kernel size that carries the networks' time (`KERNEL_KINDS`: ``DepthwiseConv 3x3``): on an AMD EPYC
without AVX-512 against the AMD EPYC ``ort-cpu`` file, depthwise 3x3 micro-kernels ran ~2.1x its model, 7x7 ones
~2.9x, and one depthwise factor set the mobile networks 8-25% high; the type's factor, their mean weighted by
the networks' time, serves its other kernels.

Every activation the file models is swept too (`ACT_CONFIGS` each, like the networks' layers of it where they
hold it): an element-wise kernel's speed ratio between two CPUs is its own (ONNX Runtime on the Intel Xeon against
the AMD EPYC file: HardSigmoid ~1.9x, Relu6 ~2.1x, where convolutions run ~1.5x; on an AMD EPYC without AVX-512:
SiLU ~3.5x, Softplus ~1.2x, convolutions ~2.6x). After the sweep the network-level factor is ~1 (the swept kinds
carry the machine's speed), so an activation left to the networks' latencies keeps the base file's speed:
EfficientNet-B0's SiLU layers priced 1.3 ms where 3.3 were profiled, YOLOv4's Softplus 0.69 s for 0.92.

The plan is measured `ROUNDS` times over, a configuration's fastest round counting: a co-tenant's spell on a
shared 2-core VM slowed some kinds' micro-kernels of one sweep 1.5x (Conv 3x3 x4.45 where the next sweep found
x2.57) and the adapted file went from 5% to 12% MAPE.

A file with a cache model (`annette_torch.models.cache`) also gets a few ``cold_weights`` micro-kernels in the
DRAM regime: a large fully connected layer after a pool streaming hundreds of MB, the traffic of AlexNet's or
VGG's classifier. Their measured over predicted time (`COLD_KEY`) rescales the file's weight-streaming
bandwidths (`scale_cache`): a warm micro-kernel shows a CPU's compute, not its memory (the AMD EPYC file streams
FC weights at 37 GB/s, the Intel Xeon VM at ~13: AlexNet 30% short after adapting without it). The same micro-kernels
with a ReLU after the layer give a classifier layer that runs its activation inside a factor of its own
(`VECTOR_ACT_KIND`).

The reorders the runtime inserts in these micro-kernels, over what the file's mapping costs price, give the
reorders a factor of their own (`reorder_factor`: a copy runs at the machine's memory speed, not at the factor
of the layer it follows), and a fusion the file makes only under conditions (a convolution's HardSwish) is
checked on micro-kernels of the pair (`rule_checks`, `fused_from`).

`annette adapt` uses the factors as per-kind scales (``overhead.kind_scales``) and keeps them unless the
network-level refit on top of them predicts the networks left out worse (`fit.adapt._not_worse`).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ..bench.suites.layers import ACT_TYPES
from ..ir import MERGE_TYPES, LayerType
from ..mapping.layout import ALIGN
from ..platform import Platform
from ..platform.platform import CONST, VECTOR, VECTOR_ACT, vector_rows
from .kind_fit import kind_of

if TYPE_CHECKING:
    from ..bench.sweep import MeasuringProcess
    from ..estimator import Estimate

__all__ = ["KIND_SUITES", "VECTOR_SUITE", "ACT_SUITE", "ACT_KINDS", "ACT_CONFIGS", "MIN_ACT_ELEMENTS",
           "CONFIGS", "ROUNDS", "MAX_KINDS", "TIME_SHARE", "MIN_LAYERS", "BUDGET_S", "POOL", "NEAREST", "Target",
           "features", "sweep_plan", "pick_configs", "sweep_factors", "measure_factors", "activation_kinds", "COLD_KEY",
           "COLD_SUITE", "COLD_CONFIGS", "MIN_COLD_WEIGHT_MB", "MIN_COLD_FLUSH_MB", "streams_weights", "cold_configs",
           "apply_factors", "scale_cache", "fastest", "VECTOR_KIND", "VECTOR_ACT_KIND", "VECTOR_ACT_SUITE",
           "KERNEL_KINDS", "kind_type", "CONST_SUITE",
           "CONST_KINDS", "ONE_OP", "REORDER_KEY", "reorder_factor", "RULE_SUITES", "RULE_BASES", "RULE_CHANNELS",
           "FUSES", "NEVER", "NARROW", "rule_checks", "fused_from", "checked_rules", "fusion_words"]

log = logging.getLogger(__name__)

#: per layer kind: the micro-kernel suite whose primary layers are of that kind. Only kinds that compute: a view
#: or copy such as Reshape runs another kernel in a suite than in a network (the AMD EPYC file's Reshape model is
#: 3.6x short of the ``heads`` suite on the Intel Xeon and 25x over a vision transformer's). A fully connected
#: layer has two suites: a classifier's (one row per image: memory-bound, `VECTOR_SUITE`) and a transformer's (a
#: row per token: compute-bound; on the Intel Xeon against the AMD EPYC file ~1.9x and ~1.3x), swept in
#: proportion to the networks' time in each
KIND_SUITES: dict[str, str] = {
    "Conv": "conv", "DepthwiseConv": "dwconv", "GroupConv": "gconv", "FullyConnected": "linear",
    "MatMul": "matmul", "MaxPool": "maxpool", "AvgPool": "avgpool", "Add": "add", "Concat": "concat",
    "Softmax": "softmax", "LayerNorm": "layernorm", "GELU": "gelu", "ConvTranspose": "convtranspose",
    "ReduceMean": "reduce",
}
VECTOR_SUITE = "fc"
#: the activations' suite, and per activation kind its ``act`` value there (GELU has a token suite of its own)
ACT_SUITE = "act"
ACT_KINDS: dict[str, str] = {t.label: name for name, t in ACT_TYPES.items() if t.label not in KIND_SUITES}
#: configurations measured per activation kind (and per kind of `CONST_KINDS`)
ACT_CONFIGS = 6
#: element-wise layers with a constant operand (one input: hard-swish's ``x + 3``, an input normalisation), per
#: kind their ``op`` in `CONST_SUITE`: a kernel of their own, whose speed the two-input suites do not show (the AMD
#: EPYC ``ort-cpu`` file prices a 1.25M-element constant Sub 1.13 ms, a file calibrated on an AMD EPYC without
#: AVX-512, 2.5x slower elsewhere, 0.17 ms)
CONST_SUITE = "eltwise_const"
CONST_KINDS: dict[str, str] = {f"{t.label} {CONST}": t.label.lower() for t in MERGE_TYPES}
#: per kind of one element-wise op (`ACT_KINDS`, `CONST_KINDS`): its suite and the configuration key and value that
#: select the op there
ONE_OP: dict[str, tuple[str, str, str]] = {**{k: (ACT_SUITE, "act", v) for k, v in ACT_KINDS.items()},
                                          **{k: (CONST_SUITE, "op", v) for k, v in CONST_KINDS.items()}}
#: the types with a const kind: their own suite's layers (and targets) are those with two inputs
_HAS_CONST = {t.label for t in MERGE_TYPES}
#: an activation micro-kernel with fewer elements takes about the profiler's 1 us resolution
MIN_ACT_ELEMENTS = 16384
#: the key of the weight-streaming factor among the factors (not a layer type), its suite and configurations: fully
#: connected layers with at least `MIN_COLD_WEIGHT_MB` of weights after a pool streaming `MIN_COLD_FLUSH_MB` or more
COLD_KEY = "cold weights"
#: the factor of the reorders the mapping costs add (`reorder_factor`), written as ``overhead.reorder_scale``
REORDER_KEY = "reorders"
#: a convolution type's suite of itself plus an activation, for checking a conditional fusion rule (`rule_checks`)
RULE_SUITES = {"Conv": "conv_act", "DepthwiseConv": "dw_act"}
#: per checked pair, this many configurations of its suite, each measured with every input-channel count of
#: `RULE_CHANNELS`: narrower than one block of the blocked kernels (`layout.ALIGN`), then of each alignment from
#: odd to 64. Why set, not drawn: the suite's channel counts are mostly multiples of 8 or odd, and ONNX
#: Runtime on an AMD EPYC without AVX-512 fused a HardSwish into every convolution of 4k input channels (12, 20,
#: 36 too) and of fewer than 8, into a depthwise one of 4k channels; twelve drawn micro-kernels had told 4k from
#: 8k apart nowhere. The key prefix of a pair's finding (``"fuses Conv+HardSwish"``: `fused_from`)
RULE_BASES = 2
RULE_CHANNELS = (3, 6, 51, 18, 30, 12, 20, 36, 24, 64)
FUSES = "fuses "
#: `fused_from`'s value for a pair fused in no micro-kernel (above any `c_in_align`, at most 6)
NEVER = 7
#: added to a `fused_from` value where the runtime also fused every layer narrower than one block (fewer input
#: channels than `layout.ALIGN`, which blocked kernels read as they are: ONNX Runtime's convolution of an image)
NARROW = 0.5
COLD_SUITE = "cold_weights"
COLD_CONFIGS = 4
MIN_COLD_WEIGHT_MB = 64
MIN_COLD_FLUSH_MB = 96
#: the kind a classifier's fully connected layers get their own factor under (`Platform` kind scales)
VECTOR_KIND = f"FullyConnected {VECTOR}"
#: ... those that run their activation inside (`MappedNetwork.activated`), swept apart with a ReLU, which both runtimes
#: fuse: on the ``fc_act`` suite, or with a cache model as `cold_configs` with and without it. OpenVINO on an AMD EPYC
#: with AVX-512 ran AlexNet's classifier layers with their ReLU at 1.4-1.8x the time of the same layers alone
#: (AlexNet 23% short, VGG-11 12% after adapting without it)
VECTOR_ACT_KIND = f"FullyConnected {VECTOR_ACT}"
VECTOR_ACT_SUITE = "fc_act"
#: the types swept per square kernel size (kinds ``"Conv 3x3"``; `Platform` kind scales)
KERNEL_KINDS = ("Conv", "DepthwiseConv", "GroupConv")
#: configurations measured per kind (per suite of a kind)
CONFIGS = 12
#: times the sweep measures its plan, one round after the other; a configuration's fastest round counts
ROUNDS = 2
#: at most this many kinds are swept: those that carry the most of the networks' predicted time ...
MAX_KINDS = 16
#: ... until they carry this share of it. Why so near all: a kind left out keeps the base file's speed, which the
#: network-level factor (~1 after the sweep) does not move. With ten kinds and 95% on an AMD EPYC without
#: AVX-512, the ``ort-cpu`` file's group convolutions and concatenations ran ~2.0x and ~2.4x the base model
#: (RegNetX-400MF -9.2%); sweeping them adds ~2 s
TIME_SHARE = 0.995
#: a kind's factor needs this many measured layers (per suite)
MIN_LAYERS = 5
#: seconds the sweep may take in all (the rest of `annette adapt` takes about a minute)
BUDGET_S = 60.0
#: seconds one configuration's timed runs may take (a slow one gets fewer, as `annette calibrate --quick`)
CONFIG_S = 0.25
#: configurations drawn per suite to pick from, and how many nearest each network layer votes for
POOL = 300
NEAREST = 3


@dataclass
class Target:
    """The layers a suite's micro-kernels stand for: their share of the kind's predicted time (``weight``), and
    per layer its features (`features`) and predicted time."""

    weight: float
    features: np.ndarray
    times: np.ndarray


#: a suite's configurations stand for no layers in particular: `pick_configs` spreads over the suite
NO_TARGET = Target(1.0, np.zeros((0, 2)), np.zeros(0))


def features(ops: Any, act: Any, weights: Any) -> np.ndarray:
    """Where a layer (or a micro-kernel) sits among its kind: log10 of its operations and of the elements it
    reads and writes (activations and weights), one row each."""
    ops, act, weights = (np.asarray(v, np.float64) for v in (ops, act, weights))
    return np.stack([np.log10(ops + 1.0), np.log10(act + weights + 1.0)], axis=-1)


def kind_type(kind: str) -> tuple[str, int | None]:
    """The layer type of a swept kind and its square kernel size if it has one (``"Conv 3x3"``: Conv, 3)."""
    label, _, kernel = kind.partition(" ")
    k = kernel.partition("x")[0]
    return label, int(k) if label in KERNEL_KINDS and k.isdigit() else None


def _suites(kind: str) -> tuple[str, ...]:
    """The suites of ``kind`` (`KIND_SUITES` of its type; a fully connected layer's token suite, then
    `VECTOR_SUITE`; `ACT_SUITE` for an activation, `CONST_SUITE` for an op with a constant operand)."""
    if kind in ONE_OP:
        return (ONE_OP[kind][0],)
    if kind == VECTOR_ACT_KIND:  # (or, with a cache model, `cold_configs` with and without the activation)
        return (VECTOR_ACT_SUITE, COLD_SUITE)
    label = kind_type(kind)[0]
    return (KIND_SUITES[label], VECTOR_SUITE) if label == "FullyConnected" else (KIND_SUITES[label],)


def activation_kinds(platform: Platform) -> tuple[str, ...]:
    """The activation kinds (`ACT_KINDS`) ``platform`` has a layer model of."""
    return tuple(k for k in ACT_KINDS if k in platform.layers)


def _has_configs(kind: str) -> bool:
    """Whether ``kind``'s suite has configurations of it: a kernel kind's suite sweeps its kernel size (AlexNet's
    ``Conv 11x11`` has none; its type's factor covers it)."""
    from ..bench.suites import SUITES

    label, k = kind_type(kind)
    kernels = SUITES[KIND_SUITES[label]].space.get("k") if k is not None else None
    return kernels is None or k in kernels


def _select(kind: str) -> Callable[[dict], bool] | None:
    """Which of its suite's configurations stand for ``kind``: a kernel kind's of that kernel, an element-wise
    op's own (`ONE_OP`), large enough to time."""
    k = kind_type(kind)[1]
    if k is not None:
        return lambda c: c.get("k") == k
    if kind == VECTOR_ACT_KIND:
        return lambda c: c["act"] == "relu"
    if kind not in ONE_OP:
        return None
    _, key, value = ONE_OP[kind]
    return lambda c: c[key] == value and c["c"] * c["h"] * c["w"] >= MIN_ACT_ELEMENTS


def sweep_plan(estimates: Sequence[Estimate], elementwise: Sequence[str] = (),
               cold: bool = False) -> dict[str, dict[str, Target]]:
    """What to sweep for the networks of ``estimates`` (by a platform without network-level overhead): {kind: {suite:
    `Target`}} for the kinds with suites (`KIND_SUITES`) that carry the most of the networks' predicted time,
    largest first, until `TIME_SHARE` of it (at most `MAX_KINDS`); a fully connected layer's suites by the time of
    token rows and of classifier rows (`platform.VECTOR_ROWS`), a convolution (`KERNEL_KINDS`) per square kernel
    size its suite sweeps (``"Conv 3x3"``). Then each kind of ``elementwise`` (`ONE_OP`: `activation_kinds` of the
    file, `CONST_KINDS`), like the networks' layers of it where they hold it. With ``cold`` (the file has a cache
    model, whose streaming bandwidths the ``cold_weights`` micro-kernels rescale), a classifier with
    `MIN_COLD_WEIGHT_MB` of weights or more is left to them: VGG's 400 MB head, streamed from memory at ~2.5x the
    AMD EPYC file's time on the Intel Xeon VM, would set the factor of every classifier (it took the single fully
    connected factor of an earlier sweep from 1.16 to 1.46)."""
    share: dict[str, float] = {}
    # (kind, suite) -> (features, relative times) per network
    layers: dict[tuple[str, str], list[tuple[np.ndarray, np.ndarray]]] = {}
    for e in estimates:
        total = max(e.latency_ms, 1e-12) * len(estimates)
        for kind, ms in e.by_type().items():
            if kind not in KERNEL_KINDS:  # (those by kernel below)
                share[kind] = share.get(kind, 0.0) + ms / total
        ex, t = e.mapped.network, e.mapped_time_ms / total
        labels = np.asarray(ex.type_labels(), dtype=object)
        vector = vector_rows(ex.cols)
        fused_act = vector & e.mapped.activated()
        streamed = cold & streams_weights(ex.weights)
        feats = features(ex.ops, np.asarray(ex.in_elems, np.float64) + ex.out_elems, ex.weights)
        kh, kw = ex.cols["kh"], ex.cols["kw"]
        one_input = ex.n_inputs == 1
        for kind in (*KIND_SUITES, *ONE_OP):
            label = kind_type(kind)[0]
            sel = (labels == label) & (t > 0)
            if kind in CONST_KINDS:  # (a constant operand: a kernel of its own, apart from the type's suite)
                sel &= one_input
            elif label in _HAS_CONST:
                sel &= ~one_input
            if kind in KERNEL_KINDS:  # one kind per square kernel (other kernels: the type's factor alone)
                for k in np.unique(kh[sel & (kh == kw)]).tolist():
                    part = sel & (kh == k) & (kw == k)
                    kk = kind_of(kind, k, k)
                    share[kk] = share.get(kk, 0.0) + float(t[part].sum())
                    layers.setdefault((kk, _suites(kind)[0]), []).append((feats[part], t[part]))
                continue
            parts = (sel & ~vector, sel & vector & ~streamed & ~fused_act) if kind == "FullyConnected" else (sel,)
            for suite, part in zip(_suites(kind), parts):
                layers.setdefault((kind, suite), []).append((feats[part], t[part]))
            acted = sel & fused_act if kind == "FullyConnected" else None
            if acted is not None and acted.any():
                share[VECTOR_ACT_KIND] = share.get(VECTOR_ACT_KIND, 0.0) + float(t[acted].sum())
                share[kind] -= float(t[acted].sum())
                # (with a cache model: measured as `cold_configs` with and without the activation, `sweep_factors`)
                suite = COLD_SUITE if cold else VECTOR_ACT_SUITE
                layers.setdefault((VECTOR_ACT_KIND, suite), []).append((feats[acted], t[acted]))

    def targets(kind: str) -> dict[str, Target]:  # per suite of ``kind``: its layers, weighted by their time
        found = {}
        for su in _suites(kind):
            held = layers.get((kind, su), [])
            times = np.concatenate([b for _, b in held]) if held else np.zeros(0)
            if times.sum() > 0:
                found[su] = Target(float(times.sum()), np.concatenate([a for a, _ in held]), times)
        w = sum(x.weight for x in found.values())
        return {su: Target(x.weight / w, x.features, x.times) for su, x in found.items() if x.weight / w > 0.05}

    plan: dict[str, dict[str, Target]] = {}
    covered = 0.0
    for kind, s in sorted(share.items(), key=lambda kv: -kv[1]):
        if covered >= TIME_SHARE or len(plan) >= MAX_KINDS:
            break
        if kind_type(kind)[0] in KIND_SUITES and _has_configs(kind):
            plan[kind] = targets(kind)
        covered += s
    for kind in elementwise:  # like the networks' layers of it where they hold it
        if kind in ONE_OP:
            plan[kind] = targets(kind) or {_suites(kind)[0]: NO_TARGET}
    return plan


def pick_configs(suite: Any, target: Target, n: int, options: dict[str, Any] | None,
                 pool: int = POOL, select: Callable[[dict], bool] | None = None) -> list[dict]:
    """``n`` configurations of ``suite`` like ``target``'s layers: of `POOL` drawn (those ``select`` keeps),
    those nearest (in `features`) to the layers that carry most of the target's time, each layer voting for its
    `NEAREST` nearest."""
    cands = suite.configs(n=pool, seed=0, options=options)
    if select is not None:
        cands = [c for c in cands if select(c)]
    if suite.cost is None or not len(target.times) or len(cands) <= n:
        return cands[:n]
    cf = features(*suite.costs(cands))
    d = np.linalg.norm(target.features[:, None, :] - cf[None, :, :], axis=-1)  # layers x candidates
    votes = np.zeros(len(cands))
    nearest = np.argsort(d, axis=1)[:, :NEAREST]
    np.add.at(votes, nearest, target.times[:, None])
    order = np.argsort(-votes, kind="stable")
    return [cands[i] for i in order[:n]]


def streams_weights(weights: Any) -> Any:
    """Whether layers of ``weights`` weights (f32) hold `MIN_COLD_WEIGHT_MB` or more: the weights-from-memory
    regime of the ``cold_weights`` micro-kernels."""
    return 4.0 * np.asarray(weights, np.float64) >= MIN_COLD_WEIGHT_MB * 2**20


def cold_configs(n: int = COLD_CONFIGS, act: str | None = None) -> list[dict]:
    """``n`` ``cold_weights`` configurations in the DRAM regime (`MIN_COLD_WEIGHT_MB`, `MIN_COLD_FLUSH_MB`); with
    ``act``, the fully connected layer followed by that activation."""
    from ..bench.suites import SUITES
    cands = SUITES[COLD_SUITE].configs(n=POOL, seed=0, options={"act": act} if act else None)
    return [c for c in cands if c["layer"] == "fc" and c["flush"] >= MIN_COLD_FLUSH_MB
            and streams_weights(c["c"] * c["f"])][:n]


def apply_factors(d: dict[str, Any], factors: dict[str, float]) -> None:
    """Put swept ``factors`` into the platform dict ``d`` (which has an ``overhead``): each kind's factor times
    the kind scale the overhead holds already (a type group's own), the reorders' as ``reorder_scale``, the
    checked fusions into the mapping's rules (`checked_rules`), the weight-streaming one into the cache model
    (`scale_cache`)."""
    ks = dict(d["overhead"].get("kind_scales") or {})
    # (a kernel or vector kind replaces its type's scale: it starts from it)
    d["overhead"]["kind_scales"] = {**ks, **{k: f * ks.get(k, ks.get(k.split(" ")[0], 1.0))
                                             for k, f in factors.items() if k not in (COLD_KEY, REORDER_KEY)
                                             and not k.startswith(FUSES)}}
    if REORDER_KEY in factors:
        d["overhead"]["reorder_scale"] = factors[REORDER_KEY]
    found = {k: f for k, f in factors.items() if k.startswith(FUSES)}
    if found and isinstance(d.get("mapping"), dict):
        d["mapping"] = {**d["mapping"], "rules": checked_rules(d["mapping"].get("rules", []), found)}
    scale_cache(d, factors)


def scale_cache(d: dict[str, Any], factors: dict[str, float]) -> None:
    """In the platform dict ``d``, divide the cache model's streaming bandwidths by the weight-streaming factor
    of ``factors`` (`COLD_KEY`) over the classifier's fully connected kind's (`VECTOR_KIND`, else the type's: a
    per-kind scale multiplies a layer's time with its streaming floor, the product is the measured factor)."""
    cold = factors.get(COLD_KEY)
    cache = d.get("cache")
    if not cold or not isinstance(cache, dict):
        return
    cache = d["cache"] = dict(cache)  # (a platform's to_dict shares its meta's objects)
    ratio = cold / _vector_factor(factors)
    for key in ("stream_bandwidth", "dram_bandwidth"):
        if isinstance(cache.get(key), dict):
            cache[key] = {t: bw / ratio for t, bw in cache[key].items()}
    cache["origin"] = (f"{cache.get('origin', '')}; streaming bandwidths / {ratio:.2f}: large fully connected "
                       "layers measured here after hundreds of MB of traffic").lstrip("; ")


def _vector_factor(factors: dict[str, float]) -> float:
    """The classifier rows' factor among swept ``factors``: `VECTOR_KIND`'s, else the fully connected type's."""
    return factors.get(VECTOR_KIND, factors.get("FullyConnected", 1.0))


def _cold_factor(raw: Platform, runtime: str, st: Any, runner: Any, kw: Any, budget_s: float,
                 process: MeasuringProcess | None = None, act: str | None = None) -> float | None:
    """Measured over predicted (``raw``, in its cache model's context) time of the fully connected layer of
    `cold_configs` (with ``act``: followed by that activation); None when too few ran."""
    from ..bench.sweep import run_sweep
    from ..estimator import estimate
    from .data import load_measured

    key = f"{runtime} {act}" if act else runtime
    res = run_sweep(st, key, COLD_SUITE, cold_configs(act=act), runner, kw, iterations=10, warmup=2,
                    budget_s=budget_s, progress=False, process=process)
    if res.interrupted:
        raise KeyboardInterrupt
    ratios = []
    for m in load_measured(st, key, suites=[COLD_SUITE]):
        rec = m.records.get("w")
        pred = {r["name"]: r["time_ms"] for r in estimate(m.network, raw).table()}.get("w", 0.0)
        if rec is not None and rec.time_ms > 0 and pred > 0:
            ratios.append(rec.time_ms / pred)
    return float(np.median(ratios)) if len(ratios) >= 2 else None


def fastest(store: Any, keys: Sequence[str], suite: str) -> list[Any]:
    """The configurations of ``suite`` measured under the store's platform ``keys`` (one per round), each from
    its fastest round (least time over its layers; `data.Measured`)."""
    from .data import load_measured

    best: dict[str, Any] = {}
    for key in keys:
        for m in load_measured(store, key, suites=[suite]):
            was = best.get(m.config_id)
            if was is None or _total(m) < _total(was):
                best[m.config_id] = m
    return list(best.values())


def _total(m: Any) -> float:
    """A measured configuration's time over all its layers."""
    return sum(r.time_ms for r in m.records.values())


def sweep_factors(raw: Platform, runtime: str, plan: dict[str, dict[str, Target]], configs: int = CONFIGS,
                  budget_s: float = BUDGET_S, progress: Callable[[str], None] | None = None,
                  cold: bool = False, rounds: int = ROUNDS, fusions: bool = False) -> dict[str, float]:
    """Per kind of ``plan`` (`sweep_plan`): the median of measured over modelled time (by ``raw``, a platform
    without network-level overhead) of that kind's layers in ``configs`` micro-kernels of each of its suites
    (`pick_configs`: those like the networks' layers), measured here on ``runtime`` (``ort-cpu`` or
    ``openvino-cpu``), the suites' medians averaged by their weights; a suite with fewer than `MIN_LAYERS`
    measured layers does not count. The plan is measured ``rounds`` times over, each layer's fastest time counts
    (`fastest`). A convolution type swept by kernel (`KERNEL_KINDS`) and not as a whole
    also gets a factor for its other kernels: its kernels' mean, weighted by the networks' time. Also the
    reorders' factor (`REORDER_KEY`, `reorder_factor`) and, with ``fusions``, once over, ``raw``'s conditional
    fusions (`FUSES` keys, `rule_checks`). The measurements go to a temporary store: they are this
    adaptation's alone."""
    from ..bench.store import Store
    from ..bench.suites import SUITES, config_id
    from ..bench.sweep import measuring_process, run_sweep
    from ..prediction.passes import model_times
    from .calibrate import suite_options, sweep_runner
    from .data import layer_samples, load_measured

    runner, kw = sweep_runner(runtime)
    t0 = time.perf_counter()
    factors: dict[str, float] = {}
    picked = {(kind, suite): pick_configs(SUITES[suite], target, ACT_CONFIGS if kind in ONE_OP else configs,
                                          suite_options(runtime, suite), select=_select(kind))
              for kind, suites in plan.items() for suite, target in suites.items() if suite != COLD_SUITE}
    keys = [runtime if r == 0 else f"{runtime} round {r + 1}" for r in range(rounds)]
    with tempfile.TemporaryDirectory(prefix="annette-adapt-") as tmp, Store(os.path.join(tmp, "m.sqlite")) as st, \
            measuring_process(runner, kw) as process:  # one for all the suites

        def measure(key: str, suite: str, cfgs: list[dict], what: str, iterations: int = 20, warmup: int = 3
                    ) -> bool:
            """Measure ``cfgs`` of ``suite`` under the store key ``key``; False once the budget is spent."""
            left = budget_s - (time.perf_counter() - t0)
            if left <= 0:
                return False
            if progress:
                progress(f"{what}: suite {suite}")
            res = run_sweep(st, key, suite, cfgs, runner, kw, iterations=iterations, warmup=warmup, budget_s=left,
                            progress=False, max_s=CONFIG_S, process=process)
            if res.interrupted:
                raise KeyboardInterrupt
            return True

        for r, key in enumerate(keys):  # the whole plan once per round: a slow spell of the machine hits one
            for (kind, suite), cfgs in picked.items():
                if not measure(key, suite, cfgs, f"micro-kernels of {kind}" + (f" (round {r + 1})" if r else "")):
                    break
        for key, (suite, act) in (rule_checks(raw) if fusions else {}).items():
            # (one round: a fusion does not change with the machine's load)
            bases = pick_configs(SUITES[suite], NO_TARGET, RULE_BASES, suite_options(runtime, suite),
                                 select=lambda c, a=act: c["act"] == a)
            set_c = SUITES[suite].filter([{**b, "c": c} for b in bases for c in RULE_CHANNELS])  # (feasible ones)
            cfgs = [dict(c, config_id=config_id(c)) for c in set_c]
            if not measure(f"{runtime} {key}", suite, cfgs, f"fusions of {'+'.join(_pair(key))}", 5, 1):
                break
            k = fused_from(load_measured(st, f"{runtime} {key}", suites=[suite]), *_pair(key))
            if k is not None:
                factors[key] = k
        samples = {suite: layer_samples(m, raw.mapping) if (m := fastest(st, keys, suite)) else None
                   for suite in {su for _, su in picked}}
        for kind, suites in plan.items():
            label, kernel = kind_type(kind)
            t = int(LayerType.from_label(label))
            medians: dict[str, float] = {}
            for suite in suites:
                ls = samples.get(suite)
                if ls is None:
                    continue
                of_kind = (ls.network.types == t) & (ls.time_ms > 0)
                if kind in CONST_KINDS:
                    of_kind &= ls.network.n_inputs == 1
                if kernel is not None:
                    of_kind &= (ls.network.kh == kernel) & (ls.network.kw == kernel)
                rows = np.flatnonzero(of_kind)
                pred = model_times(raw.tables, ls.network, rows)[0] if len(rows) else np.zeros(0)
                ok = pred > 0
                if ok.sum() >= MIN_LAYERS:
                    medians[suite] = float(np.median(ls.time_ms[rows][ok] / pred[ok]))
                else:
                    log.info("adapt: %d measured %s layers in suite %s, too few for a factor", int(ok.sum()), kind,
                             suite)
            if kind == "FullyConnected" and len(medians) == 2:  # a classifier's and a transformer's, each its own
                factors[kind], factors[VECTOR_KIND] = medians[KIND_SUITES[kind]], medians[VECTOR_SUITE]
            elif medians:
                w = sum(suites[k].weight for k in medians)
                factors[kind] = sum(suites[k].weight * m for k, m in medians.items()) / w
        reorders = reorder_factor(raw, [ls for ls in samples.values() if ls is not None])
        if reorders is not None:
            factors[REORDER_KEY] = reorders
        left = budget_s - (time.perf_counter() - t0)
        if cold and left > 0:
            if progress:
                progress("micro-kernels of weights streamed from memory: suite cold_weights")
            f = _cold_factor(raw, runtime, st, runner, kw, left, process)
            if f is not None:
                factors[COLD_KEY] = f
            left = budget_s - (time.perf_counter() - t0)
            if f is not None and COLD_SUITE in plan.get(VECTOR_ACT_KIND, {}) and left > 0:
                # a classifier layer with its activation: the plain one's factor times what the activation adds
                # where it costs most, in the streamed layers of AlexNet's and VGG's heads (OpenVINO on an AMD EPYC
                # with AVX-512: x1.4-1.8 there, x1.1 on warm micro-kernels of a few MB)
                fa = _cold_factor(raw, runtime, st, runner, kw, left, process, act="relu")
                if fa is not None:
                    factors[VECTOR_ACT_KIND] = _vector_factor(factors) * fa / f
    for label in KERNEL_KINDS:
        by_kernel = {k: f for k, f in factors.items() if kind_type(k)[0] == label and k != label}
        if by_kernel and label not in factors:
            w = np.array([sum(float(x.times.sum()) for x in plan[k].values()) for k in by_kernel])
            f = np.array(list(by_kernel.values()))
            factors[label] = float(np.average(f, weights=w) if w.sum() > 0 else f.mean())
    return factors


def rule_checks(raw: Platform) -> dict[str, tuple[str, str]]:
    """The pairs of a convolution type (`RULE_SUITES`) and an activation that ``raw``'s mapping fuses only under
    conditions (a decision tree learned on the file's machine), as {``FUSES`` + "Conv+HardSwish": (suite, its
    ``act`` value)}. Why: where a runtime fuses can depend on the CPU (its blocked kernels' channel multiple).
    The AMD EPYC ``ort-cpu`` file's tree left a stride-1 convolution's HardSwish apart below 52 pixels wide;
    ONNX Runtime on an AMD EPYC without AVX-512 fused it wherever the input channels were a multiple of 4 or
    fewer than 8 (an image's): MobileNetV3-small 6% high."""
    act_of = {int(t): k for k, t in ACT_TYPES.items()}
    out = {}
    for rule in raw.mapping.rules:
        if not rule.when or len(rule.primary) != 1 or len(rule.secondary) != 1 or rule.primary[0] not in RULE_SUITES:
            continue
        act = act_of.get(int(LayerType.from_label(rule.secondary[0])))
        if act is not None:
            out[_pair_key([rule.primary[0], rule.secondary[0]])] = (RULE_SUITES[rule.primary[0]], act)
    return out


def _pair_key(pair: Sequence[str]) -> str:
    """The factors' key of a checked (primary, secondary) pair (``"fuses Conv+HardSwish"``; `_pair` reads it)."""
    return FUSES + "+".join(pair)


def _pair(key: str) -> list[str]:
    """The (primary, secondary) pair of a `_pair_key`."""
    return key[len(FUSES):].split("+")


def fused_from(measured: Sequence[Any], primary: str, secondary: str) -> float | None:
    """The least input-channel alignment of a ``primary`` layer (``c_in_align``: log2 of the largest power of two
    up to 64 dividing its input channels) from which the runtime fused each ``secondary`` reading one in the
    ``measured`` configurations of one block's width or more (`layout.ALIGN`), below which it fused none: 0 all
    fused, `NEVER` none, that of the blocked kernels where the measurements allow it; plus `NARROW` where it also
    fused every narrower layer that alignment leaves apart. None where no threshold tells them apart (or none was
    measured). Why the alignment: a runtime fuses an activation into its blocked kernels, which take whole blocks
    of input channels, and a narrower input as it is (ONNX Runtime on an AMD EPYC without AVX-512: HardSwish fused
    into every convolution of 4k input channels or fewer than 8, into every depthwise one of 4k channels)."""
    from ..bench.records import FUSED, NOT_FUSED
    from ..mapping import attr_values

    p, s = int(LayerType.from_label(primary)), int(LayerType.from_label(secondary))
    wide, narrow = [], []
    for m in measured:
        net = m.network
        align = attr_values(net.cols, "c_in_align")
        for a, b in net.edges.tolist():
            flag = m.records[net.names[b]].fused
            if net.types[a] == p and net.types[b] == s and flag in (FUSED, NOT_FUSED):
                (wide if net.cols["c_in"][a] >= ALIGN else narrow).append((int(align[a]), flag == FUSED))
    fits = [k for k in range(NEVER + 1) if wide and all((a >= k) == f for a, f in wide)]
    block = int(np.log2(ALIGN))  # (of the thresholds the measurements allow, the blocked kernels' channel multiple)
    if not fits:
        return None
    k = block if block in fits else fits[0] if any(f for _, f in wide) else NEVER
    # (narrow layers all fused where the alignment alone would leave some apart: fused as they are)
    return k + (NARROW if narrow and all(f for _, f in narrow) and any(a < k for a, _ in narrow) else 0.0)


def checked_rules(rules: list[dict[str, Any]], found: dict[str, float]) -> list[dict[str, Any]]:
    """``rules`` (a platform dict's ``mapping.rules``) with each checked pair's conditional rules (``found``:
    `FUSES` keys, `fused_from` values) replaced by one rule fusing it from that input-channel alignment on, and
    one fusing it below one block's input channels where `NARROW` says so; dropped where it fused nowhere."""
    out, done = [], set()
    for r in rules:
        key = _pair_key([*r["primary"], *r["secondary"]])
        v = found.get(key) if r.get("when") else None
        if v is None:
            out.append(r)
            continue
        if key not in done:
            k, narrow = _finding(v)
            conditions: list[list[dict[str, Any]]] = []  # (a rule per list; an empty list: fused always)
            if k < NEVER:
                conditions.append([{"layer": "primary", "attr": "c_in_align", "op": ">=", "value": k}] if k else [])
            if narrow:
                conditions.append([{"layer": "primary", "attr": "c_in", "op": "<", "value": ALIGN}])
            for i, when in enumerate(conditions):
                out.append({"name": "+".join(_pair(key)) + (" (narrow)" if i else ""), "primary": r["primary"],
                            "secondary": r["secondary"], **({"result": r["result"]} if r.get("result") else {}),
                            **({"when": when} if when else {}),
                            "origin": f"as the micro-kernels annette adapt measured fused it (was: "
                                      f"{r.get('origin', '')})"})
        done.add(key)
    return out


def _finding(v: float) -> tuple[int, bool]:
    """A `fused_from` finding ``v`` as (the input-channel alignment it fuses from, whether narrower inputs fuse
    too: `NARROW`)."""
    return int(v), v - int(v) == NARROW


def fusion_words(v: float) -> str:
    """Where a `fused_from` finding ``v`` fuses, in words (``"where the input channels are a multiple of 4 or
    fewer than 8"``)."""
    k, narrow = _finding(v)
    where = ("never" if k >= NEVER else "always" if k == 0 else
             f"where the input channels are a multiple of {2 ** k}")
    if narrow:
        where = (f"where the input channels are fewer than {ALIGN}" if k >= NEVER else
                 f"{where} or fewer than {ALIGN}")
    return where


def reorder_factor(raw: Platform, samples: Sequence[Any]) -> float | None:
    """The median, over the measured micro-kernels whose reorders ``raw``'s mapping costs price (at graph inputs
    and outputs, and between layouts), of the time of the nodes the runtime inserted over that price; None with
    fewer than `MIN_LAYERS` such configurations. Why apart from the kinds: a reorder is a copy at the machine's
    memory speed. An AMD EPYC without AVX-512 ran the AMD EPYC ``ort-cpu`` file's convolutions and SiLU 2.6x and
    3.5x its models and EfficientNet-B0's reorders ~0.9x; priced at the factor of the SiLU or Mul they follow,
    they came out 2.9 ms where 1.0 ms were profiled."""
    costs = raw.mapping.costs
    if costs is None:
        return None
    ratios = []
    for ls in samples:
        n_cfg = len(ls.configs)
        if ls.all_inserted_ms.size != n_cfg:
            continue
        per_layer = costs.inserted_ms(ls.network) + costs.layout_ms(ls.network)
        pred = np.bincount(ls.config, weights=per_layer, minlength=n_cfg)
        ok = (pred > 0) & (ls.all_inserted_ms > 0)
        ratios.extend((ls.all_inserted_ms[ok] / pred[ok]).tolist())
    return float(np.median(ratios)) if len(ratios) >= MIN_LAYERS else None


def measure_factors(raw: Platform, runtime: str, estimates: Sequence[Estimate],
                    progress: Callable[[str], None] | None = None) -> dict[str, float]:
    """`sweep_factors` of the `sweep_plan` of ``estimates`` (the networks estimated by ``raw``), of the
    activations ``raw`` models and the ops with a constant operand, and of weights streamed from memory where
    ``raw`` has a cache model; with the reorders' factor and the checked fusions."""
    cold = raw.cache is not None
    return sweep_factors(raw, runtime, sweep_plan(estimates, (*activation_kinds(raw), *CONST_KINDS), cold),
                         progress=progress, cold=cold, fusions=True)
