"""A short micro-kernel sweep on this machine that rescales a platform file's layer models per kind of layer.

Why: the speed ratio between two CPUs differs by layer kind. The AMD EPYC ``ort-cpu`` file on an Intel Xeon VM:
convolutions, pooling and fully connected layers run ~1.6x its models, products of two activations ~1.2x. One
factor on the whole file cannot serve a CNN and a transformer at once, and ten end-to-end latencies cannot
pin down a factor per kind. A few micro-kernels of the kinds that carry the adaptation networks' time can:
each kind's factor is the median of measured over modelled time of its layers (`sweep_factors`).

`annette adapt` uses the factors as per-kind scales (``overhead.kind_scales``) and keeps them only where the
network-level refit on top of them predicts the networks left out better (`fit.adapt`).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from typing import Callable, Sequence

import numpy as np

from ..ir import LayerType, Network
from ..platform import Platform

__all__ = ["KIND_SUITES", "VECTOR_SUITE", "TOKEN_ROWS", "CONFIGS", "MAX_KINDS", "TIME_SHARE", "MIN_LAYERS", "BUDGET_S",
           "sweep_plan", "sweep_factors"]

log = logging.getLogger(__name__)

#: per layer kind: the micro-kernel suite whose primary layers are of that kind (kinds that compute; a view or
#: copy such as Reshape runs another kernel in a suite than in a network: the AMD EPYC file's Reshape model is
#: 3.6x short of the ``heads`` suite on the Intel Xeon and 25x over a vision transformer's). A fully connected layer has two:
#: a classifier's (one row per image: memory-bound, `VECTOR_SUITE`) and a transformer's (a row per token:
#: compute-bound; on the Intel Xeon against the AMD EPYC file ~1.9x and ~1.3x), swept in proportion to the
#: networks' time in each
KIND_SUITES: dict[str, str] = {
    "Conv": "conv", "DepthwiseConv": "dwconv", "GroupConv": "gconv", "FullyConnected": "linear",
    "MatMul": "matmul", "MaxPool": "maxpool", "AvgPool": "avgpool", "Add": "add", "Concat": "concat",
    "Softmax": "softmax", "LayerNorm": "layernorm", "GELU": "gelu",
}
VECTOR_SUITE = "fc"
#: fully connected layers with fewer rows (batch x tokens) than this are a classifier's
TOKEN_ROWS = 8
#: configurations measured per kind (per suite of a kind)
CONFIGS = 12
#: at most this many kinds are swept: those that carry the most of the networks' predicted time ...
MAX_KINDS = 8
#: ... until they carry this share of it
TIME_SHARE = 0.95
#: a kind's factor needs this many measured layers (per suite)
MIN_LAYERS = 5
#: seconds the sweep may take in all (the rest of `annette adapt` takes about a minute)
BUDGET_S = 60.0


def sweep_plan(platform: Platform, nets: Sequence[Network]) -> dict[str, dict[str, float]]:
    """What to sweep for ``nets``: {kind: {suite: weight}} for the kinds with suites (`KIND_SUITES`) that carry
    the most of the networks' predicted time, largest first, until `TIME_SHARE` of it (at most `MAX_KINDS`); a
    kind's suites weighted by its time in the layers each stands for (fully connected: `TOKEN_ROWS`)."""
    from ..estimator import estimate

    share: dict[str, float] = {}
    vector = [0.0, 0.0]  # fully connected time in classifier rows, in all
    fc = int(LayerType.FULLY_CONNECTED)
    for net in nets:
        e = estimate(net, platform)
        total = max(e.latency_ms, 1e-12)
        for kind, ms in e.by_type().items():
            share[kind] = share.get(kind, 0.0) + ms / total / len(nets)
        rows = np.asarray(net.cols["n"] * net.cols["h_in"] * net.cols["w_in"], np.float64)
        is_fc = (net.types == fc) & (e.time_ms > 0)
        vector[0] += float(e.time_ms[is_fc & (rows < TOKEN_ROWS)].sum()) / total
        vector[1] += float(e.time_ms[is_fc].sum()) / total
    plan: dict[str, dict[str, float]] = {}
    covered = 0.0
    for kind, s in sorted(share.items(), key=lambda kv: -kv[1]):
        if covered >= TIME_SHARE or len(plan) >= MAX_KINDS:
            break
        if kind in KIND_SUITES:
            plan[kind] = {KIND_SUITES[kind]: 1.0}
            if kind == "FullyConnected" and vector[1] > 0:
                v = vector[0] / vector[1]
                plan[kind] = {k: w for k, w in ((KIND_SUITES[kind], 1.0 - v), (VECTOR_SUITE, v)) if w > 0.05}
        covered += s
    return plan


def sweep_factors(raw: Platform, runtime: str, plan: dict[str, dict[str, float]], configs: int = CONFIGS,
                  budget_s: float = BUDGET_S, progress: Callable[[str], None] | None = None) -> dict[str, float]:
    """Per kind of ``plan`` (`sweep_plan`): the median of measured over modelled time (by ``raw``, a platform
    without network-level overhead) of that kind's layers in ``configs`` micro-kernels of each of its suites,
    measured here on ``runtime`` (``ort-cpu`` or ``openvino-cpu``), the suites' medians averaged by their
    weights; a suite with fewer than `MIN_LAYERS` measured layers does not count. The measurements go to a
    temporary store: they are this adaptation's alone."""
    from ..bench.store import Store
    from ..bench.suites import SUITES
    from ..bench.sweep import run_sweep
    from ..prediction.passes import model_times
    from .calibrate import suite_options
    from .data import layer_samples, load_measured

    runner, kw = ("ort-cpu", {"threads": 1}) if runtime == "ort-cpu" else ("openvino", {"device": "CPU", "threads": 1})
    t0 = time.perf_counter()
    factors: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="annette-adapt-") as tmp, Store(os.path.join(tmp, "m.sqlite")) as st:
        for kind, suites in plan.items():
            t = int(LayerType.from_label(kind))
            medians: dict[str, float] = {}
            for suite in suites:
                left = budget_s - (time.perf_counter() - t0)
                if left <= 0:
                    break
                if progress:
                    progress(f"micro-kernels of {kind}: suite {suite}")
                cfgs = SUITES[suite].configs(n=configs, seed=0, options=suite_options(runtime, suite))
                res = run_sweep(st, runtime, suite, cfgs, runner, kw, iterations=20, warmup=3, budget_s=left,
                                progress=False)
                if res.interrupted:
                    raise KeyboardInterrupt
                measured = load_measured(st, runtime, suites=[suite])
                if not measured:
                    continue
                ls = layer_samples(measured, raw.mapping)
                rows = np.flatnonzero((ls.network.types == t) & (ls.time_ms > 0))
                pred = model_times(raw.tables, ls.network, rows)[0] if len(rows) else np.zeros(0)
                ok = pred > 0
                if ok.sum() >= MIN_LAYERS:
                    medians[suite] = float(np.median(ls.time_ms[rows][ok] / pred[ok]))
                else:
                    log.info("adapt: %d measured %s layers in suite %s, too few for a factor", int(ok.sum()), kind,
                             suite)
            if medians:
                w = sum(suites[k] for k in medians)
                factors[kind] = sum(suites[k] * m for k, m in medians.items()) / w
    return factors
