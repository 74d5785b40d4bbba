"""Network-level calibration: fit a platform's scale and overhead terms from end-to-end latencies alone.

For boards where only whole-network figures exist (the ZCU102's published model-zoo latencies), the
end-to-end time is modelled as a non-negative combination of terms computed from an estimate:

* ``layers``: the layer models' total (the accelerator's time, scaled),
* ``depthwise``: the part of it spent in depthwise convolutions (they use the accelerator poorly),
* ``cpu_tail``: millions of elements processed after the last convolution / fully connected layer
  (outputs read back and post-processed on the host CPU, e.g. SSD box decoding, large global pools),
* ``constant``: per-inference overhead (task launch, pre-processing),
* ``weights``: millions of weights the network's layers other than fully connected ones load per inference.
  The DPU fetches every layer's weights from DDR; the published layer models are rooflines, whose
  max(compute, memory) hides that fetch behind compute-bound layers (a fully connected layer is memory-bound:
  its model charges its weights already). Fitted on the ZCU102 figures it is ~0.045 ms per million INT8
  weights (~22 GB/s, the board's DDR4 bandwidth), and it lowers the leave-one-out error from 9.9% to 6.9%,
* ``executed_layers``: the number of executed (fused) layers, for runtimes with a per-node cost
  (ONNX Runtime, OpenVINO on a CPU). It may be negative: layer models fitted on *profiled* per-node times
  carry the profiler's own cost per node (~3 us with ONNX Runtime), which an unprofiled inference lacks.

On a measured CPU the ``depthwise`` and type-group terms may be negative too (`CPU_SIGNED_TERMS`): the
depthwise layer models, fitted on micro-kernels, are too low for layers inside a network on one CPU (AMD EPYC:
1.2-1.4x slower inside) and too high on another (an Intel Xeon with AVX-512), so their scale is fitted apart
from the other layers' whenever the calibration networks contain some (the MobileNetV2-space ones do) and the
separate scale lowers the leave-one-out error. So is the time of one group of attention-era layers
(`TYPE_GROUPS`, the one that lowers the leave-one-out error most, or none): ONNX Runtime on an Intel Xeon runs
the token-mixing layers (``tokens``) ~1.5x slower inside a network than as micro-kernels (leave-one-out 5.7% ->
3.4%; the 15 transformer-era calibration networks came out 10-16% low without it); OpenVINO runs the
attention core (``attention``: scores, softmax, context; it fuses them) ~0.45x its micro-kernels' time
(5.4% -> 5.3%).

Coefficients come from bounded least squares on relative error (non-negative except the ``SIGNED_TERMS``);
the leave-one-out error is what a network outside the calibration set can expect. Measured CPUs use a
robust loss (`CPU_LOSS`): a few calibration networks the layer models miss by 30-80% (OpenVINO's odd
channel counts at large resolutions, 1024-channel graph inputs) would otherwise set the scale of all others.
"""

from __future__ import annotations

import csv
import logging
import os
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import AnnetteError
from ..ir import LayerType, Network
from ..models.calibration import SIGNED_TERMS, TERMS, TYPE_GROUPS, Calibration
from ..types import PlatformLike

__all__ = ["TERMS", "ZCU102_TERMS", "CPU_TERMS", "SIGNED_TERMS", "CPU_SIGNED_TERMS", "CPU_LOSS", "Calibration", "fit_calibration", "leave_one_out", "fit_cpu_calibration", "loo_report",
           "fix_caffe_depthwise", "load_published_zcu102"]

log = logging.getLogger(__name__)

#: the terms used for the ZCU102 (board figures) and for CPU runtimes measured here
ZCU102_TERMS = ("layers", "depthwise", "cpu_tail", "constant", "weights")
CPU_TERMS = ("layers", "depthwise", "executed_layers", "constant")
#: ... and on a measured CPU also the depthwise and type-group time (see the module docstring); ``layers`` plus
#: such a term, those layers' own scale, must stay above `MIN_DEPTHWISE_SCALE` of ``layers`` or the term is
#: dropped
CPU_SIGNED_TERMS = ("executed_layers", "ramped_layers", "depthwise", *TYPE_GROUPS)
MIN_DEPTHWISE_SCALE = 0.25
#: scipy ``least_squares`` loss and its scale (relative error) for the CPU calibration: residuals beyond
#: ~5 % count linearly, not quadratically (soft L1, convex: one optimum), so outliers do not drag the fit
CPU_LOSS = ("soft_l1", 0.05)


def _matrix(terms: Sequence[dict[str, float]], use: Sequence[str]) -> np.ndarray:
    return np.array([[t[k] for k in use] for t in terms], dtype=np.float64)


def fit_calibration(terms: Sequence[dict[str, float]], measured_ms: Sequence[float],
                    use: Sequence[str] = ZCU102_TERMS, names: Sequence[str] = (),
                    loss: tuple[str, float] | None = None, signed: Sequence[str] = SIGNED_TERMS) -> Calibration:
    """Coefficients minimising the relative error over the networks; non-negative except the ``signed`` terms.

    ``loss``: (scipy ``least_squares`` loss, scale), e.g. `CPU_LOSS`; None = plain least squares.
    """
    from scipy.optimize import least_squares, lsq_linear  # fitting only: a calibrated platform needs numpy

    y = np.asarray(measured_ms, dtype=np.float64)
    if len(y) < len(use) + 1:
        raise AnnetteError(f"calibration needs more networks ({len(y)}) than terms ({len(use)}) plus one")
    A = _matrix(terms, use) / y[:, None]
    lower = np.array([-np.inf if k in signed else 0.0 for k in use])
    upper = np.full(len(use), np.inf)
    coef = lsq_linear(A, np.ones(len(y)), bounds=(lower, upper), method="bvls").x
    if loss is not None and loss[0] != "linear":
        start = np.clip(coef, lower + 1e-12, None)  # least_squares wants a start strictly inside the bounds
        coef = least_squares(lambda c: A @ c - 1.0, start, bounds=(lower, upper), loss=loss[0],
                             f_scale=loss[1]).x
    return Calibration(dict(zip(use, map(float, coef))), fitted_on=tuple(names))


def leave_one_out(terms: Sequence[dict[str, float]], measured_ms: Sequence[float],
                  use: Sequence[str] = ZCU102_TERMS, loss: tuple[str, float] | None = None,
                  fit: Callable[[list[dict[str, float]], np.ndarray], "Calibration"] | None = None) -> np.ndarray:
    """Relative error of each network when the calibration is fitted on all the others (by ``fit(terms, y)``,
    default `fit_calibration` with ``use`` and ``loss``)."""
    y = np.asarray(measured_ms, dtype=np.float64)
    fit = fit or (lambda t, m: fit_calibration(t, m, use, loss=loss))
    errs = np.empty(len(y))
    for i in range(len(y)):
        keep = [j for j in range(len(y)) if j != i]
        cal = fit([terms[j] for j in keep], y[keep])
        errs[i] = cal.predict(terms[i]) / y[i] - 1
    return errs


def _has(terms: Sequence[dict[str, float]], key: str) -> bool:
    """Whether some network has time (or a count) in the term ``key``."""
    return any(t.get(key, 0.0) > 0 for t in terms)


def _fit_cpu(terms: Sequence[dict[str, float]], y: np.ndarray, names: Sequence[str] = (),
             depthwise: bool = True, group: str | None = None, ramped: bool = False) -> Calibration:
    """`CPU_TERMS` under `CPU_LOSS`; the depthwise term (and the ``group`` term, one of `TYPE_GROUPS`) only if
    asked, where the networks have such time and those layers' resulting scale stays sane (else their time
    takes the common scale); with ``ramped`` the per-layer cost is ramped (``ramped_layers`` for
    ``executed_layers``)."""
    use = [("ramped_layers" if ramped and k == "executed_layers" else k) for k in CPU_TERMS
           if k != "depthwise" or (depthwise and _has(terms, "depthwise"))]
    if group is not None and _has(terms, group):
        use.append(group)
    while True:
        cal = fit_calibration(terms, y, use, names, loss=CPU_LOSS, signed=CPU_SIGNED_TERMS)
        c = cal.coef  # a term whose layers would run below `MIN_DEPTHWISE_SCALE` of the common scale is dropped
        odd = [k for k in ("depthwise", *TYPE_GROUPS)
               if k in c and c["layers"] + c[k] < MIN_DEPTHWISE_SCALE * c["layers"]]
        if not odd:
            return cal
        use.remove(odd[0])


def fit_cpu_calibration(terms: Sequence[dict[str, float]], measured_ms: Sequence[float],
                        names: Sequence[str] = ()) -> Calibration:
    """A measured CPU's calibration: `CPU_TERMS` under `CPU_LOSS`, with its leave-one-out MAPE set.

    The depthwise and type-group terms stay only when they lower the leave-one-out error: the depthwise scale is
    fitted mostly on the calibration set's few depthwise-heavy networks, and on one runtime (ONNX Runtime on an
    Intel Xeon) it fitted those better and every other network worse (validation MAPE 5.3% without it, 6.7%
    with it).
    """
    y = np.asarray(measured_ms, dtype=np.float64)
    # a type-group term on top of `CPU_TERMS` only with two networks per term (as `adapt` asks of its terms)
    groups = [g for g in TYPE_GROUPS if _has(terms, g)] if len(y) >= 2 * (len(CPU_TERMS) + 1) else []
    ramps = (False, True) if all("ramped_layers" in t for t in terms) else (False,)
    options = [(dw, g, r) for r in ramps for g in [None, *groups]
               for dw in ((False, True) if _has(terms, "depthwise") else (False,))]

    def loo_of(o: tuple[bool, str | None, bool]) -> np.ndarray:
        fit = lambda t, m: _fit_cpu(t, m, depthwise=o[0], group=o[1], ramped=o[2])  # noqa: E731
        return leave_one_out(terms, y, fit=fit)

    errors = {o: loo_of(o) for o in options}
    loo = {o: float(np.mean(np.abs(e))) for o, e in errors.items()}
    best = min(options, key=loo.__getitem__)  # a tie keeps the simpler term set, listed first
    cal = _fit_cpu(terms, y, names, depthwise=best[0], group=best[1], ramped=best[2])
    cal.loo_mape, cal.loo_errors = loo[best], errors[best]
    return cal


def fix_caffe_depthwise(net: Network, published_gops: float) -> Network:
    """Caffe graphs may store depthwise convolutions as full ones (kernel [k, k, C, C]); when the graph's
    operations exceed the model's published count by far, treat square same-width k>1 convs as depthwise."""
    if net.total_ops / 1e9 < 1.5 * published_gops:
        return net
    cand = (net.types == LayerType.CONV) & (net.c_in == net.c_out) & (net.kh > 1)
    types, cols = net.types.copy(), {k: v.copy() for k, v in net.cols.items()}
    types[cand] = LayerType.DEPTHWISE_CONV
    cols["groups"][cand] = cols["c_in"][cand]
    fixed = Network(net.name, net.names, types, cols, net.edges, net.attrs)
    log.info("%s: %d convolutions treated as depthwise (%.2f -> %.2f GOPs; published %.2f)", net.name,
             int(cand.sum()), net.total_ops / 1e9, fixed.total_ops / 1e9, published_gops)
    return fixed


def load_published_zcu102(calibration_dir: str | os.PathLike | None = None,
                          table: str | os.PathLike | None = None) -> list[tuple[str, Network, float]]:
    """(graph name, network, published end-to-end ms) for the ZCU102 model-zoo latencies: the calibration
    table in ``calibration_dir``, or ``table`` (a CSV with the same ``graph``, ``zoo_model`` and
    ``e2e_latency_ms_1thread`` columns, e.g. the accuracy benchmark's hold-out rows)."""
    from ..bench.suites import reference_dir
    from ..frontends.annette_json import from_annette_json

    ref = reference_dir()
    if ref is None:
        raise AnnetteError("reference data not found (../shared/annette-reference and ../shared/calibration)")
    if table is not None:
        path = os.fspath(table)
    else:
        if calibration_dir is None:
            calibration_dir = os.path.join(os.path.dirname(str(ref)), "calibration")
        path = os.path.join(str(calibration_dir), "zcu102_dnndk_e2e_published.csv")
    if not os.path.isfile(path):
        raise AnnetteError(f"{path}: published ZCU102 latencies not found")
    out = []
    with open(path, encoding="utf-8") as f:
        for row in csv.DictReader(f):
            gops = float(row["zoo_model"].rsplit("_", 1)[1].rstrip("G"))
            net = from_annette_json(os.path.join(str(ref), "graphs", f"{row['graph']}.json"))
            out.append((row["graph"], fix_caffe_depthwise(net, gops), float(row["e2e_latency_ms_1thread"])))
    return out


def loo_report(platform: PlatformLike = "zcu102-dnndk", use: Sequence[str] = ZCU102_TERMS) -> dict[str, Any]:
    """Leave-one-out report of the ZCU102 calibration: per network measured, uncalibrated, calibrated."""
    from ..estimator import estimate
    from ..platform import load_platform

    plat = load_platform(platform)
    data = load_published_zcu102()
    ests = [estimate(net, plat) for _, net, _ in data]
    terms = [e.terms for e in ests]
    y = np.array([m for _, _, m in data])
    host = np.array([e.host_ms + e.switch_ms for e in ests])
    if host.any():  # the calibration explains the DPU's part; host-run layers add their own time
        raise AnnetteError("loo_report: a calibration network runs layers on the host; the published end-to-end "
                           "latencies calibrate a DPU that runs the whole network")
    loo = leave_one_out(terms, y, use)
    full = fit_calibration(terms, y, use, [g for g, _, _ in data])
    full.loo_mape = float(np.mean(np.abs(loo)))
    raw = np.array([e.device_ms for e in ests])
    return {
        "calibration": full,
        "rows": [{"graph": g, "measured_ms": m, "layer_model_ms": float(r), "loo_pred_ms": float(m * (1 + e)),
                  "loo_error": float(e)} for (g, _, m), r, e in zip(data, raw, loo)],
        "uncalibrated_mape": float(np.mean(np.abs(raw / y - 1))),
        "loo_mape": full.loo_mape,
        "in_sample_mape": float(np.mean([abs(full.predict(t) / m - 1) for t, m in zip(terms, y)])),
    }
