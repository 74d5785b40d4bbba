"""``annette adapt``: a platform for this machine or board in minutes. The layer and mapping models of a
shipped (or given) platform file are kept; only its network-level terms are refitted, from a few end-to-end
latencies: measured here on calibration networks (CPU runtimes), or given by the user (boards).

Measured here, per-kind scales from a short micro-kernel sweep compete as well (`kind_sweep`: the kinds
carrying the networks' time, each at its measured over modelled time; the terms are then refitted on top).
From given latencies of a device whose runtime differs from the base platform's (a phone against a server
CPU), per-kind scales compete as well (`kind_fit`: one factor per kind of layer, which can change a ranking);
and where the latencies are of NAS-Bench-201 cells, which cell semantics the device's runtime follows
(`nb201.SEMANTICS`: what it computes of edges fed by zeros or not reaching the output). Every candidate is
judged by its leave-one-out error on the latencies alone; the lowest wins.

Why this works: across CPUs the layer and mapping models rank networks alike (Spearman >= 0.99 on a foreign
CPU) while the machine's speed does not transfer; a scale, a per-layer and a per-inference cost absorb most of
the difference. Two refits compete: the base file's own network-level model times one factor (the machine is
uniformly faster or slower; all that one or two networks can support) and the terms fitted afresh (as many as
the networks support); the fresh terms are kept only when their leave-one-out error is clearly lower (by
more than its standard error), so a few noisy measurements do not buy terms they cannot pin down.
"""

from __future__ import annotations

import csv
import logging
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..errors import AnnetteError, check_writable
from ..ir import LayerType, Network
from ..platform import Platform
from ..types import PlatformLike

__all__ = ["adapt", "AdaptResult", "AdaptError", "read_latencies", "given_latencies", "measure_until_stable",
           "DEFAULT_NETWORKS", "MIN_ROWS"]

log = logging.getLogger(__name__)

#: networks measured by default (`calibrate.adaptation_networks`: ten calibration networks and four large ones):
#: enough for the CPU terms and the level of large CNNs, about 90 s on 2 cores with the micro-kernel sweep
DEFAULT_NETWORKS = 14
#: fewest usable latencies a board adaptation takes
MIN_ROWS = 3
#: measurement rounds per network (the fastest round's median counts, as in ``annette calibrate``)
ROUNDS = 3
#: ... and at most this many, for networks whose two fastest rounds still differ by more than `STABLE`
MAX_ROUNDS = 8
STABLE = 0.03
#: further rounds start only within this many seconds of measuring (adapt stays within 2 minutes on 2 cores)
MEASURE_BUDGET_S = 60.0
#: a median spread above this is reported: the machine's speed moved while measuring
NOISY = 0.10
#: fewest given latencies from which per-kind scales compete
KIND_MIN_ROWS = 5
#: how the printed expected error was measured: networks left out one at a time, or a family at a time
CHECKS = ("leave-one-out", "leave-one-family-out")
#: the families (`family`) of convolutional networks, whose expected error `AdaptResult.expected` pools
CONVOLUTIONAL = ("plain", "mobile", "grouped")


def _in_words(errors: dict[str, float]) -> str:
    """``{"plain": 0.092, ...}`` as ``plain 9.2%, ...``."""
    return ", ".join(f"{k} {v:.1%}" for k, v in errors.items())


class AdaptError(AnnetteError):
    """Bad input to ``annette adapt``: an unmeasurable platform, a malformed latencies CSV, too few rows."""


@dataclass
class AdaptResult:
    """The adapted platform, where it was written, and how well it fits the networks it was adapted on."""

    platform: Platform
    path: str | None
    base: str
    names: list[str]
    measured_ms: np.ndarray
    before_ms: np.ndarray
    after_ms: np.ndarray
    #: out-of-sample MAPE of the refit (`check`: what a network outside the adaptation set can expect); nan
    #: below 3
    loo_mape: float
    terms: tuple[str, ...]
    seconds: float
    source: str = field(default="measured")
    #: measured here: per network, how much slower its second-fastest round was than its fastest (None: given)
    spread: np.ndarray | None = None
    #: per-kind factors on the scale, where they won (`kind_fit`); None: not fitted
    kind_scales: dict[str, float] | None = None
    #: NAS-Bench-201 cells: the cell semantics the device's runtime follows (`nb201.SEMANTICS`); None: not chosen
    semantics: str | None = None
    #: how `loo_mape` was measured (`CHECKS`): each network predicted without itself, or without its family
    check: str = "leave-one-out"
    #: with the leave-one-family-out check: per family (`family`), the mean error of its networks predicted by
    #: a fit on the other families (what a network of that family can expect); None otherwise
    family_mape: dict[str, float] | None = None
    #: with `network_loo`: each network's family (`family`), in the order of `names`
    families: tuple[str, ...] | None = None
    #: per network, its error predicted by the refit's form fitted on all the other networks (leave-one-out:
    #: what a network like the adaptation networks can expect, `expected`); None: not measured
    network_loo: np.ndarray | None = None
    #: measured here: per conditionally fused pair checked on micro-kernels (``"Conv+HardSwish"``), the input
    #: channel alignment from which the runtime fused it, + `kind_sweep.NARROW` where it also fused every input
    #: narrower than one block (`kind_sweep.fused_from`, `kind_sweep.fusion_words`; the file's rules for it follow)
    fusions: dict[str, float] | None = None

    @property
    def median_spread(self) -> float | None:
        """The median of `spread` (None: the latencies were given)."""
        return None if self.spread is None else float(np.median(self.spread))

    @property
    def noisy(self) -> bool:
        """Whether the machine's speed moved while measuring (median spread above `NOISY`)."""
        return self.median_spread is not None and self.median_spread > NOISY

    @property
    def mape_before(self) -> float:
        """MAPE of the base file on the adaptation networks."""
        return float(np.mean(np.abs(self.before_ms / self.measured_ms - 1)))

    @property
    def mape_after(self) -> float:
        """MAPE of the adapted file on the same networks (in sample)."""
        return float(np.mean(np.abs(self.after_ms / self.measured_ms - 1)))

    def by_family(self) -> str:
        """`family_mape` in words (``plain 9.2%, mobile 13.7%``); empty without it."""
        return _in_words(self.family_mape or {})

    def expected(self) -> dict[str, float]:
        """What a convolutional network (the `CONVOLUTIONAL` families) and a network with attention can expect:
        the mean leave-one-out error of the adaptation networks of that kind (`network_loo`). Reported apart as
        the accuracy benchmark reports classic and transformer-era networks: one average would promise a CNN the
        error of attention and the reverse. Why leave-one-out, not the family check that chose the terms: a
        network of a family the adaptation networks span is predicted by a fit that saw its family. After 14
        adaptations on one machine (two CPU runtimes), classic networks' MAPE was 0.3-2.8 points below this
        figure, 0.1-3.6 below the leave-one-family-out one (`unlike`); this one was the closer in 10. Empty
        without `network_loo`."""
        return self._pooled(self.network_loo)

    def unlike(self) -> dict[str, float]:
        """As `expected`, for a network of a family unlike all the adaptation networks': each network's error
        predicted from the other families (`family_mape`'s errors, pooled by kind). Empty without the family
        check."""
        if not self.family_mape or self.families is None:
            return {}
        return self._pooled(np.array([self.family_mape[g] for g in self.families]))

    def _pooled(self, errors: np.ndarray | None) -> dict[str, float]:
        """Per network ``errors`` pooled by kind: the mean over the networks of `CONVOLUTIONAL` families, and of
        attention ones, where the set holds that kind."""
        if errors is None or self.families is None:
            return {}
        fam = np.asarray(self.families)
        out = {}
        for label, members in (("convolutional", CONVOLUTIONAL), ("attention", ("attention",))):
            sel = np.isin(fam, members)
            if sel.any():
                out[label] = float(np.mean(errors[sel]))
        return out

    def by_kind(self, unlike: bool = False) -> str:
        """`expected` (or `unlike`) in words (``convolutional 5.6%, attention 9.0%``); empty without it."""
        return _in_words(self.unlike() if unlike else self.expected())

    def fitted(self) -> str:
        """What the refit changed, in words."""
        from ..models.calibration import TYPE_GROUPS

        scales = ", ".join(f"{k} x{v:.2f}" for k, v in (self.kind_scales or {}).items())
        if self.terms[:1] == ("micro-kernel scales",):
            rest = self.terms[1:]
            level = "one factor on the base file's network-level model"
            if len(rest) == 2 and rest[0] == "scale" and rest[1] in TYPE_GROUPS:  # (a type group's own factor)
                level += f" and one on its {rest[1]} layers ({', '.join(TYPE_GROUPS[rest[1]])})"
            elif rest != ("scale",):
                level = ", ".join(rest)
            text = f"per-kind scales from micro-kernels measured here ({scales}), then {level}"
            if self.fusions:
                from .kind_sweep import fusion_words

                text += "; fusions checked on micro-kernels: " + ", ".join(
                    f"{k} {fusion_words(v)}" for k, v in self.fusions.items())
        elif self.kind_scales:
            text = f"one factor and per-kind scales ({scales})"
        elif self.terms == ("scale",):
            text = "the base file's network-level model times one factor"
        else:
            text = ", ".join(self.terms)
        if self.semantics is not None:
            text += f"; NAS-Bench-201 cells as a runtime of semantics {self.semantics!r} computes them"
            if self.semantics == "eager-folded":
                text += (" (constant cells priced as folded: none was measured; measure one, e.g. "
                         "nb201:|none~0|+|none~0|none~1|+|none~0|none~1|none~2|, to tell)")
        return text

    def table(self) -> str:
        """Measured against predicted, before and after, one line per network."""
        w = max((len(n) for n in self.names), default=7)
        lines = [f"{'network':<{w}}  {'measured':>10}  {'before':>10}  {'after':>10}  {'error':>7}"]
        for n, m, b, a in zip(self.names, self.measured_ms, self.before_ms, self.after_ms):
            lines.append(f"{n:<{w}}  {m:10.4f}  {b:10.4f}  {a:10.4f}  {100 * (a / m - 1):+6.1f}%")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"AdaptResult({self.platform.name!r} from {self.base}: {len(self.names)} networks, MAPE "
                f"{self.mape_before:.1%} -> {self.mape_after:.1%}, {self.check} {self.loo_mape:.1%})")


# ------------------------------------------------------------------------------------------------------
# the latencies CSV (boards)


def _row_network(spec: str, shape: tuple[int, ...] | None) -> tuple[Network, bool]:
    """The network of a model named by a string, and whether it is a built-in space's candidate
    ``SPACE:ARCH[:CLASSES]`` (``nb201``, ``nb101``, ``mbv2``: `space_network`, named after it; the space name
    before the first colon decides, so a user's module of that name is written with its package); else a
    file, zoo name or ``module:callable``."""
    from ..frontends.spec import load_model
    from ..search.spaces.registry import space_network

    net = space_network(spec, shape)
    if net is not None:
        return net, True
    return load_model(spec, shape), False


def read_latencies(path: str | os.PathLike) -> list[tuple[str, Network, float]]:
    """Rows ``model,input_shape,latency_ms`` -> (name, network, ms). ``model``: a zoo name, an ``.onnx`` path,
    an ANNETTE ``.json`` graph, ``module:callable`` or a search-space candidate ``SPACE:ARCH[:CLASSES]``
    (e.g. ``nb201:|nor_conv_3x3~0|+...|:100``); ``input_shape`` like ``1,3,224,224`` (or empty where the model
    fixes it). Any malformed row is one `AdaptError` naming the file and the line."""
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise AdaptError(f"{p}: no such latencies file")
    try:
        with open(p, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
            header = rows and list(rows[0]) or []
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise AdaptError(f"{p}: cannot read the latencies CSV ({e})") from None
    need = {"model", "input_shape", "latency_ms"}
    if not rows:
        raise AdaptError(f"{p}: no rows (expected a header model,input_shape,latency_ms and one row per network)")
    if not need <= set(header):
        raise AdaptError(f"{p}: columns {', '.join(sorted(need - set(header)))} missing "
                         "(expected model,input_shape,latency_ms)")
    base = os.path.dirname(os.path.abspath(p))
    out = []
    for line, row in enumerate(rows, start=2):
        where = f"{p}, line {line}"
        spec = (row.get("model") or "").strip()
        if not spec:
            raise AdaptError(f"{where}: empty model")
        try:
            ms = float(row.get("latency_ms") or "")
        except ValueError:
            raise AdaptError(f"{where}: latency_ms {row.get('latency_ms')!r} is not a number") from None
        if not math.isfinite(ms) or ms <= 0:
            raise AdaptError(f"{where}: latency_ms must be a positive number of milliseconds, got {ms:g}")
        shape_text = (row.get("input_shape") or "").strip().strip("()[]")
        shape = None
        if shape_text:
            try:
                shape = tuple(int(v) for v in shape_text.replace("x", ",").split(","))
            except ValueError:
                raise AdaptError(f"{where}: input_shape {row.get('input_shape')!r} is not like 1,3,224,224") from None
            if not shape or any(v <= 0 for v in shape):
                raise AdaptError(f"{where}: input_shape {row.get('input_shape')!r} needs positive sizes")
        if spec.lower().endswith((".onnx", ".json")) and not os.path.isabs(spec):
            spec = os.path.join(base, spec)  # files are relative to the CSV
        try:
            net, candidate = _row_network(spec, shape)
        except AnnetteError as e:
            raise AdaptError(f"{where}: {e}") from None
        out.append((net.name if candidate else row["model"].strip(), net, ms))
    if len(out) < MIN_ROWS:
        raise AdaptError(f"{p}: {len(out)} usable row(s); adapting needs at least {MIN_ROWS} measured networks")
    return out


def given_latencies(pairs: Iterable[Any]) -> list[tuple[str, Network, float]]:
    """The Python form of the latencies: ``(model, latency_ms)`` pairs, or ``(model, latency_ms, input_shape)``
    -> (name, network, ms). ``model``: a `Network`, an ``nn.Module`` (with ``input_shape``), or a string as
    in the CSV's model column (zoo name, file, ``module:callable``, ``SPACE:ARCH[:CLASSES]``). A malformed
    entry is one `AdaptError` naming its position."""
    from ..estimator import to_network

    out = []
    for i, item in enumerate(pairs):
        where = f"latencies[{i}]"
        if isinstance(item, (str, bytes)) or not isinstance(item, Sequence) or len(item) not in (2, 3):
            raise AdaptError(f"{where}: expected (model, latency_ms) or (model, latency_ms, input_shape), "
                             f"got {_short(item)}")
        model, ms_value = item[0], item[1]
        shape = None
        if len(item) == 3 and item[2] is not None:
            try:
                shape = tuple(int(v) for v in item[2])
            except (TypeError, ValueError):
                raise AdaptError(f"{where}: input_shape {_short(item[2])} is not like (1, 3, 224, 224)") from None
            if not shape or any(v <= 0 for v in shape):
                raise AdaptError(f"{where}: input_shape {shape} needs positive sizes")
        if isinstance(ms_value, bool) or not isinstance(ms_value, (int, float, np.integer, np.floating)):
            raise AdaptError(f"{where}: latency_ms {_short(ms_value)} is not a number")
        ms = float(ms_value)
        if not math.isfinite(ms) or ms <= 0:
            raise AdaptError(f"{where}: latency_ms must be a positive number of milliseconds, got {ms:g}")
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(model, torch.nn.Module) and shape is None:
            raise AdaptError(f"{where}: an nn.Module needs its input shape: give (module, latency_ms, input_shape)")
        try:
            if isinstance(model, str):
                net, candidate = _row_network(model.strip(), shape)
                name = net.name if candidate else model.strip()
            else:
                net = to_network(model, shape)
                name = net.name if isinstance(model, Network) else f"{type(model).__name__}-{i}"
        except AnnetteError as e:
            raise AdaptError(f"{where}: {e}") from None
        out.append((name, net, ms))
    if len(out) < MIN_ROWS:
        raise AdaptError(f"adapt: {len(out)} latencies given; adapting needs at least {MIN_ROWS} measured networks")
    return out


def _short(value: Any) -> str:
    """A value for an error line: its repr, cut to 60 characters."""
    r = repr(value)
    return r if len(r) <= 60 else r[:57] + "..."


# ------------------------------------------------------------------------------------------------------
# fitting


def _cpu_terms(n: int, per_layer: str = "executed_layers") -> tuple[str, ...]:
    """The network-level terms a CPU refit can support with ``n`` networks (two more networks than terms, so that
    every leave-one-out fit still has one more network than terms); ``per_layer``: the base file's per-layer
    term (`_per_layer_term`)."""
    from .calibrate_network import CPU_TERMS
    if n >= 2 * len(CPU_TERMS):
        return tuple(per_layer if t == "executed_layers" else t for t in CPU_TERMS)
    return ("layers", per_layer, "constant")[: max(1, min(3, n - 2))]  # n - 2: leave-one-out can judge them


def _per_layer_term(base: Any) -> str:
    """The calibration term of the base file's per-layer cost: ``ramped_layers`` where a layer below the ramp pays
    its share of it (`models.calibration.RAMP_MS`), else ``executed_layers``."""
    return "ramped_layers" if base.per_layer_ramp_ms else "executed_layers"


def _board_terms(n: int) -> tuple[str, ...]:
    from .calibrate_network import ZCU102_TERMS
    if n >= 2 * len(ZCU102_TERMS):
        return tuple(ZCU102_TERMS)
    return ("layers", "constant")[: max(1, min(2, n - 2))]


def _prior(base: Any, cpu: bool) -> dict[str, float]:
    """The base file's own network-level coefficients, as calibration terms: its ``overhead`` (CPU) or its
    ``end_to_end`` model (board); a bare layer sum when it has neither."""
    if not cpu:
        return dict(base.end_to_end.coef) if base.end_to_end is not None else {"layers": 1.0}
    if base.overhead is None:
        return {"layers": 1.0}
    scale, per_layer, per_network, dw_scale = base.overhead
    prior = {"layers": scale, _per_layer_term(base): per_layer, "constant": per_network}
    if dw_scale != scale:
        prior["depthwise"] = dw_scale - scale
    group = _group_factor(base)
    if group is not None:  # a type group's own scale (`calibrate.overhead_entry`)
        prior[group[0]] = scale * (group[1] - 1.0)
    return prior


def _group_factor(base: Any) -> tuple[str, float] | None:
    """(term, factor) when the base file's ``kind_scales`` give exactly the types of one of `TYPE_GROUPS` one
    factor, as ``annette calibrate`` writes such a term; else None."""
    from ..models.calibration import TYPE_GROUP_IDS

    factors = {t: f for t, k, f in base.kind_scales if k is None}
    for group, ids in TYPE_GROUP_IDS.items():
        if set(factors) == ids and len(set(factors.values())) == 1:
            return group, float(next(iter(factors.values())))
    return None


def _fit_scaled(terms: list[dict[str, float]], y: np.ndarray, prior: dict[str, float], names: Sequence[str],
                cpu: bool, fixed: tuple[str, ...] = (), group: str | None = None) -> Any:
    """The base file's network-level model times one factor: the machine or board is uniformly faster or
    slower (the ``fixed`` terms kept as they are). Relative least squares (robust on a CPU, as
    `fit_cpu_calibration`); exact through one network.

    With ``group`` (one of `TYPE_GROUPS`), that group's layers get a coefficient of their own beside the factor,
    where some network has their time and three networks or more pin the two, unless it would run them below
    `MIN_DEPTHWISE_SCALE` of the others. Why: on another CPU the attention-era kinds (products of two
    activations, softmax, layer norm) change speed unlike convolutions; one factor fitted on networks with and
    without them is set by both and right for neither (the AMD EPYC openvino-cpu file on the Intel Xeon VM,
    after its micro-kernel sweep: vision transformers 5-37% high, which took the one factor and every CNN 6%
    low)."""
    from ..models.calibration import Calibration
    from .calibrate_network import CPU_LOSS, MIN_DEPTHWISE_SCALE, fit_calibration

    scaled = Calibration({t: c for t, c in prior.items() if t not in fixed})
    rest = y - np.array([sum(prior.get(f, 0.0) * t.get(f, 0.0) for f in fixed) for t in terms])
    use = ("layers", group) if group is not None and len(y) >= 3 and any(t.get(group, 0.0) > 0 for t in terms) \
        else ("layers",)
    rows = [{"layers": scaled.predict(t), **{g: t.get(g, 0.0) for g in use[1:]}} for t in terms]
    if len(y) == 1:
        c = {"layers": float(rest[0] / rows[0]["layers"])}
    else:
        c = fit_calibration(rows, rest, use, loss=CPU_LOSS if cpu else None, signed=use[1:]).coef
    coef = {t: v if t in fixed else c["layers"] * v for t, v in prior.items()}
    for key in use[1:]:  # (the group's own coefficient)
        g = coef.get(key, 0.0) + c[key]
        if coef.get("layers", 0.0) <= 0 or coef["layers"] + g < MIN_DEPTHWISE_SCALE * coef["layers"]:
            return _fit_scaled(terms, y, prior, names, cpu, fixed)  # (its layers at the common factor)
        coef[key] = g
    return Calibration(coef, None, tuple(names))


def family(net: Network) -> str:
    """The architecture family of a network, from its layer types: ``attention`` (MatMul of activations or
    LayerNorm), ``mobile`` (depthwise convolutions: inverted residuals, squeeze-excitation), ``grouped``
    (grouped convolutions) or ``plain`` (plain and residual CNNs, fully connected heads, NAS cells)."""
    present = set(np.unique(np.asarray(net.types)).tolist())
    if present & {int(LayerType.MATMUL), int(LayerType.LAYER_NORM)}:
        return "attention"
    if int(LayerType.DEPTHWISE_CONV) in present:
        return "mobile"
    if int(LayerType.GROUP_CONV) in present:
        return "grouped"
    return "plain"


def _loo(fit: Callable[[list[dict[str, float]], np.ndarray], Any], terms: list[dict[str, float]],
         y: np.ndarray, groups: Sequence[str] | None = None) -> np.ndarray:
    """Absolute relative error of each network predicted by ``fit`` on all the others (with ``groups``: on the
    networks of the other families only, leave-one-family-out)."""
    fits: dict[tuple[int, ...], Any] = {}  # a family's networks share one training set: fitted once
    out = []
    for i in range(len(y)):
        keep = tuple(j for j in range(len(y)) if j != i and (groups is None or groups[j] != groups[i]))
        if keep not in fits:
            fits[keep] = fit([terms[j] for j in keep], y[list(keep)])
        out.append(fits[keep].predict(terms[i]) / y[i] - 1)
    return np.abs(out)


def _family_groups(groups: Sequence[str] | None, n: int, need: int) -> Sequence[str] | None:
    """``groups`` when a leave-one-family-out check is possible (two families or more, and every family's
    complement holds ``need`` networks), else None (leave-one-out)."""
    if groups is None or len(set(groups)) < 2:
        return None
    sizes = {g: sum(1 for h in groups if h == g) for g in set(groups)}
    return groups if all(n - k >= need for k in sizes.values()) else None


def _fit(terms: list[dict[str, float]], y: np.ndarray, use: tuple[str, ...], names: Sequence[str],
         cpu: bool, prior: dict[str, float], groups: Sequence[str] | None = None, fresh: bool = True,
         fixed: tuple[str, ...] = (), group: str | None = None
         ) -> tuple[Any, float, tuple[str, ...], str, np.ndarray | None, Callable[[], np.ndarray | None]]:
    """The refit: the base model scaled by one factor, or the terms ``use`` fitted afresh. The fresh fit wins
    only when its out-of-sample error is lower by more than its own standard error (the one-standard-error
    rule: more parameters need clear evidence). With the networks' ``groups`` (`family`) the out-of-sample
    error is leave-one-family-out: each network predicted by a fit on the other families, so that a term
    which fits one family and no other loses (within a family, leave-one-out approves it). Below 3 networks:
    the scaled base model. Returns the `Calibration`, its out-of-sample MAPE (nan below 3 networks), what
    was fitted (``("scale",)`` or the terms), which check measured the error (`CHECKS`), each network's
    out-of-sample error (None below 3 networks) and a function giving, the same form fitted on all networks but
    one, each network's leave-one-out error (`AdaptResult.network_loo`; the same array with that check).
    Without ``fresh``: the scaled base model, judged by the check the fresh fit would have had, and with
    ``group`` (one of `TYPE_GROUPS`) the scaled base model with that group's layers at a factor of their own as
    well, kept where the check's error is lower (``("scale", group)``). ``fixed``: terms of the base model the
    scaling keeps as they are."""
    from .calibrate_network import CPU_LOSS, CPU_SIGNED_TERMS, SIGNED_TERMS, fit_calibration, fit_cpu_calibration

    scaled = _fit_scaled(terms, y, prior, names, cpu, fixed)
    few = len(y) < 3 or len(y) < len(use) + 2  # too few networks to judge a fresh fit

    def done(cal: Any, how: tuple[str, ...], fit: Callable[..., Any], errors: np.ndarray | None,
             groups: Sequence[str] | None) -> tuple[Any, float, tuple[str, ...], str, np.ndarray | None,
                                                    Callable[[], np.ndarray | None]]:
        def loo() -> np.ndarray | None:  # (on request, of the refit kept; a CPU fit measured its own on the way)
            if groups is None or errors is None:
                return errors
            return np.abs(cal.loo_errors) if cal.loo_errors is not None else _loo(fit, terms, y)
        return cal, cal.loo_mape, how, CHECKS[groups is not None], errors, loo

    plain = lambda t, m: _fit_scaled(t, m, prior, (), cpu, fixed)  # noqa: E731  (the scaled file, refitted)
    if few or not fresh:
        groups = _family_groups(groups, len(y), 1 if few else len(use) + 2)
        errors = _loo(plain, terms, y, groups) if len(y) >= 3 else None
        scaled.loo_mape = float(np.mean(errors)) if errors is not None else float("nan")
        if group is not None and errors is not None and any(t.get(group, 0.0) > 0 for t in terms):
            grouped = lambda t, m: _fit_scaled(t, m, prior, (), cpu, fixed, group)  # noqa: E731
            err_g = _loo(grouped, terms, y, groups)
            both = _fit_scaled(terms, y, prior, names, cpu, fixed, group)
            if np.mean(err_g) < scaled.loo_mape and both.coef.get(group, 0.0) != scaled.coef.get(group, 0.0):
                both.loo_mape = float(np.mean(err_g))
                return done(both, ("scale", group), grouped, err_g, groups)
        return done(scaled, ("scale",), plain, errors, groups)
    groups = _family_groups(groups, len(y), len(use) + 2)  # (a fit takes two networks more than terms)
    if cpu and use in {_cpu_terms(10**6, t) for t in ("executed_layers", "ramped_layers")}:  # (flat or ramped)
        refit: Callable[..., Any] = lambda t, m, n=(): fit_cpu_calibration(t, m, n)  # noqa: E731
    else:
        loss, signed = (CPU_LOSS, CPU_SIGNED_TERMS) if cpu else (None, SIGNED_TERMS)
        refit = lambda t, m, n=(): fit_calibration(t, m, use, n, loss=loss, signed=signed)  # noqa: E731
    err_scaled = _loo(plain, terms, y, groups)
    err_fresh = _loo(refit, terms, y, groups)
    scaled.loo_mape = float(np.mean(err_scaled))
    se_fresh = float(np.std(err_fresh, ddof=1) / np.sqrt(len(y)))
    if np.mean(err_fresh) + se_fresh >= scaled.loo_mape - 1e-9:  # within one standard error (or a tie)
        return done(scaled, ("scale",), plain, err_scaled, groups)
    fresh = refit(terms, y, names)
    fresh.loo_mape = float(np.mean(err_fresh))
    return done(fresh, tuple(use), refit, err_fresh, groups)


def _not_worse(swept: np.ndarray | None, unswept: np.ndarray | None) -> bool:
    """Whether the networks' out-of-sample errors with the swept factors (``swept``) are no worse than without
    (``unswept``) by more than the standard error of their paired difference. Why: the factors are measured on
    micro-kernels, not fitted on these networks (the one-standard-error rule that holds fresh terms back has no
    parameters to count here), and a mean over 14 networks moves by tenths of a point with the sweep's noise: two
    openvino-cpu adaptations on one machine left the sweep out, and such a file predicted 15 classic networks 7.0%
    off and 13 transformer-era ones 15.0%, where one that kept it predicted them 5.3% and 7.1% off."""
    if swept is None or unswept is None:
        return swept is not None
    d = swept - unswept
    se = float(np.std(d, ddof=1) / np.sqrt(len(d))) if len(d) > 1 else 0.0
    return float(np.mean(d)) <= se


def _group_term(prior: dict[str, float]) -> str:
    """The type group (`TYPE_GROUPS`) whose layers may get a factor of their own in a refit: the base file's own
    where it has one (a file holds one group's factor), else ``tokens`` (the attention-era kinds and transposes)."""
    from ..models.calibration import TYPE_GROUPS

    return next((g for g in TYPE_GROUPS if prior.get(g)), "tokens")


def _swept_prior(prior: dict[str, float], terms: Sequence[dict[str, float]], swept: Sequence[dict[str, float]],
                 per_layer: str) -> dict[str, float]:
    """``prior`` with its per-layer cost times the swept kinds' mean factor (the networks' layer time with the
    factors over without them). Why: the per-layer cost is what a network run pays per layer beyond the
    layer models, which were fitted to profiled layers: a dispatch, or, negative, the profiler's own time
    per node; on a CPU whose layers run k times slower it is about k times as large too (kept at the base
    file's, it took 3 us per layer too few off this AMD EPYC's small networks: ShuffleNetV2 +27%)."""
    before = sum(t.get("layers", 0.0) for t in terms)
    if per_layer not in prior or before <= 0:
        return prior
    return {**prior, per_layer: prior[per_layer] * sum(t.get("layers", 0.0) for t in swept) / before}


def _with_factors(raw: Platform, factors: dict[str, float]) -> Platform:
    """``raw`` (a platform without network-level overhead) with each kind of ``factors`` at that factor times
    its layer model."""
    from .kind_sweep import apply_factors

    d = raw.to_dict()
    d["overhead"] = {"scale": 1.0, "per_layer_ms": 0.0, "per_network_ms": 0.0}
    apply_factors(d, factors)
    return Platform.from_dict(d, raw.name)


def _sweeper(runtime: str, progress: bool) -> Callable[[Platform, Sequence[Any]], dict[str, float]]:
    """The micro-kernel sweep of `kind_sweep` on ``runtime``: the kinds carrying the networks' time."""
    from .kind_sweep import measure_factors

    def run(raw: Platform, ests: Sequence[Any]) -> dict[str, float]:
        say = (lambda msg: print(f"adapt: {msg}", file=sys.stderr)) if progress else None
        try:
            return measure_factors(raw, runtime, ests, progress=say)
        except AnnetteError as e:  # the networks are measured: adapt without the sweep rather than not at all
            log.warning("adapt: the micro-kernel sweep failed (%s); adapted without per-kind scales", e)
            return {}
    return run


def _nb201_cells(names: Sequence[str]) -> list[tuple[str, int]] | None:
    """(arch, classes) of each row when all are NAS-Bench-201 candidates (named ``nb201#INDEX[:CLASSES]`` by
    `space_network`), else None."""
    from ..search.spaces import nb201

    out = []
    for name in names:
        head, sep, rest = name.partition("#")
        index, _, classes = rest.partition(":")
        if head != "nb201" or not sep or not index.isdigit() or (classes and not classes.isdigit()):
            return None
        out.append((nb201.index_to_arch(int(index)), int(classes) if classes else 10))
    return out


#: the cell semantics assumed of a device until its latencies show another (`nb201.SEMANTICS`): of the
#: benchmark's networks, a runtime computes at least what reaches the output (on a phone's TensorFlow Lite
#: and an eager CPU alike, it ranks the cells better than the pruned networks do)
DEFAULT_SEMANTICS = "reach"
#: the semantics adapt chooses between (`nb201.SEMANTICS`): ``all`` (dead code computed, constants folded) is
#: no runtime's: one that keeps dead code has no optimiser to fold a constant either, and eager PyTorch runs the
#: benchmark's ``none`` edges as multiplies by zero, which every cell with one shows (a fifth of the cells tell
#: ``reach`` from ``all``); a Xeon Silver 4114 from 10 cells: Spearman 0.91 -> 0.92, MAPE 15% -> 13%
ADAPT_SEMANTICS = ("reach", "pruned", "eager")
#: another semantics replaces the default only when its leave-one-out errors are lower by this many standard
#: errors of the paired difference (ten latencies tell semantics apart only through the cells they differ on;
#: a wrong switch to one that computes more costs far more than it gains: ``eager`` prices a constant network,
#: which a phone runs in microseconds, as a computed one)
SWITCH_SE = 1.0
#: a measured constant cell (one whose output cannot depend on its input) below this share of the median
#: of the other cells shows a device that folds constants: ``eager`` is then no candidate
FOLDED_SHARE = 0.1


def _constant_evidence(cells: Sequence[tuple[str, int]], y: np.ndarray) -> bool | None:
    """Whether the measured cells show the device folding a constant network (True), computing one (False),
    or neither (None: no measured cell is a constant)."""
    from ..search.spaces import nb201

    const = np.array([nb201.cell_edges(a, "reach")[1] for a, _ in cells])
    if not const.any():
        return None
    others = y[~const] if (~const).any() else y
    return bool(np.all(y[const] < FOLDED_SHARE * float(np.median(others))))


def _fit_kind_scales(base: Platform, raw: Platform, names: Sequence[str], nets: Sequence[Network],
                     y: np.ndarray) -> tuple[float, Any, Any, str | None, list[Network]]:
    """The best per-kind refit by leave-one-out: (LOO MAPE, `KindFit`, `KindData`, semantics, networks).
    NAS-Bench-201 rows are rebuilt under each cell semantics (`DEFAULT_SEMANTICS` unless another is clearly
    better, `SWITCH_SE`); the networks of the winner are returned. ``eager`` is no candidate where a measured
    constant cell ran in microseconds, and becomes ``eager-folded`` where no measured cell was a constant: a
    device that folds constants, priced as computing them, would be ~1000x off on those cells, and ten
    latencies without a constant cannot rule that out (priced as folded, an eager device's are 100% low)."""
    from ..estimator import estimate
    from . import kind_fit

    assert base.overhead is not None
    scale, per_layer, per_net, dw = base.overhead
    variants: dict[str | None, list[Network]] = {None: list(nets)}
    cells = _nb201_cells(names)
    folds: bool | None = None
    if cells is not None:
        from ..search.spaces import nb201
        folds = _constant_evidence(cells, y)
        order = [DEFAULT_SEMANTICS] + [s for s in ADAPT_SEMANTICS if s != DEFAULT_SEMANTICS
                                       and not (folds and s == "eager")]
        variants = {sem: [nb201.build_network(a, num_classes=c, semantics=sem) for a, c in cells] for sem in order}
    fits: dict[str | None, tuple[np.ndarray, float, Any]] = {}
    for sem, vnets in variants.items():
        data = kind_fit.kind_data([estimate(n, raw) for n in vnets], scale, dw, ramp_ms=base.per_layer_ramp_ms)
        fits[sem] = _best_lambda(data, y, per_layer, per_net, False)
    sem = next(iter(variants))
    for other in list(variants)[1:]:  # semantics compared with one model (the same number of terms)
        diff = fits[other][0] - fits[sem][0]
        if np.mean(diff) < -SWITCH_SE * np.std(diff, ddof=1) / np.sqrt(len(diff)) - 1e-12:
            sem = other
    err, lam, data = fits[sem]
    chosen = variants[sem]
    const = False
    if sem == "eager" and folds is None:  # (no measured cell differs between the two)
        sem = "eager-folded"
    elif sem in (None, "eager"):  # a per-inference cost where no network is a constant (it would be all of a
        # constant's latency, which few latencies show: a phone runs one in microseconds)
        err_c, lam_c, _ = _best_lambda(data, y, per_layer, per_net, True)
        if np.mean(err_c) < np.mean(err):
            err, lam, const = err_c, lam_c, True
    fit = kind_fit.fit_kinds(data, y, per_layer, per_net, lam, const)
    return float(np.mean(err)), fit, data, sem, chosen


def _best_lambda(data: Any, y: np.ndarray, per_layer: float, per_net: float,
                 constant: bool) -> tuple[np.ndarray, float, Any]:
    """(leave-one-out errors, ridge weight, data) of the `kind_fit.LAMBDAS` weight with the lowest mean."""
    from . import kind_fit

    errs = {lam: kind_fit.loo_kinds(data, y, per_layer, per_net, lam, constant) for lam in kind_fit.LAMBDAS}
    lam = min(errs, key=lambda v: float(np.mean(errs[v])))
    return errs[lam], lam, data


def measure_until_stable(nets: Sequence[Any], once: Callable[[Any], float], rounds: int = ROUNDS,
                         max_rounds: int = MAX_ROUNDS, budget_s: float = MEASURE_BUDGET_S,
                         clock: Callable[[], float] = time.perf_counter,
                         tick: Callable[[int, float], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each network's fastest of at least ``rounds`` interleaved measurements (``once(net)`` -> ms), and its
    spread: how much slower its second-fastest round was.

    Another machine's work only adds time, so a network is measured in further rounds (all of them
    interleaved, up to ``max_rounds``, while ``budget_s`` seconds of measuring remain) until its two fastest
    rounds agree within `STABLE`: the fastest is then a quiet moment's latency, not a lucky outlier.
    ``tick(i, ms)`` is called after every measurement (progress).
    """
    n = len(nets)
    times: list[list[float]] = [[] for _ in range(n)]
    start = clock()
    todo = list(range(n))
    for r in range(max(1, int(max_rounds))):
        if r >= rounds and (not todo or clock() - start > budget_s):
            break
        for i in (range(n) if r < rounds else todo):
            ms = float(once(nets[i]))
            times[i].append(ms)
            if tick is not None:
                tick(i, ms)
        todo = [i for i in range(n) if _spread(times[i]) > STABLE]
    best = np.array([min(t) for t in times])
    spread = np.array([_spread(t) for t in times])
    return best, spread


def _spread(times: Sequence[float]) -> float:
    """The second-fastest of ``times`` relative to the fastest, minus 1 (0 for a single time)."""
    if len(times) < 2:
        return 0.0
    a, b = sorted(times)[:2]
    return b / a - 1.0


def _measure_here(runtime: str, progress: bool) -> Callable[[Sequence[Network]], tuple[np.ndarray, np.ndarray]]:
    from ..validate import measure_latency

    def measure(nets: Sequence[Network]) -> tuple[np.ndarray, np.ndarray]:
        import tempfile

        from tqdm import tqdm

        with tempfile.TemporaryDirectory(prefix="annette-adapt-") as tmp:
            # each network exported once, not once per round (the torch exports of the transformer-era and
            # classic-family networks took 8 s a round); on disk, not in memory (a VGG head is 300 MB)
            files = _export_once(nets, tmp, progress)
            bar = tqdm(total=ROUNDS * len(nets), desc=f"measuring on {runtime}", unit="net", disable=not progress)
            with bar:
                def tick(i: int, ms: float) -> None:
                    if bar.n >= bar.total:  # a further round for the networks that are not yet stable
                        bar.total += 1
                    bar.update()

                def once(path: str) -> float:
                    with open(path, "rb") as f:
                        model = f.read()
                    return measure_latency(model, runtime, runs=30, repeats=1, warmup=5).median_ms
                return measure_until_stable(files, once, tick=tick)
    return measure


def _export_once(nets: Sequence[Any], folder: str, progress: bool) -> list[str]:
    """The ONNX file (in ``folder``) of what `measure_latency` measures for each network (`measurable`)."""
    from tqdm import tqdm

    from ..validate.measure import onnx_bytes
    from .calibration_modern import measurable

    files = []
    for i, net in enumerate(tqdm(nets, desc="exporting", unit="net", disable=not progress, leave=False)):
        path = os.path.join(folder, f"{i}.onnx")
        with open(path, "wb") as f:
            f.write(onnx_bytes(measurable(net)))
        files.append(path)
    return files


def adapt(platform: PlatformLike, networks: int = DEFAULT_NETWORKS,
          latencies: str | os.PathLike | Iterable[Any] | None = None,
          out: str | os.PathLike | None = None, measure: Callable[[Sequence[Network]], np.ndarray] | None = None,
          progress: bool = False, save: bool = True,
          sweep: bool | Callable[[Platform, Sequence[Any]], dict[str, float]] | None = None) -> AdaptResult:
    """Adapt ``platform`` (a name or a file) to this machine or to a board.

    Without ``latencies``: measure ``networks`` calibration networks end to end on this machine (a CPU
    runtime platform: ``ort-cpu`` or ``openvino-cpu``; never the accuracy benchmark's validation networks; of
    the families, those that together hold most of the layer types the file models, `calibrate.covering`, and
    from 3 networks on some large ones, `calibrate.adaptation_networks`) and
    refit the per-network overhead: the base file's network-level model times one factor, or scale,
    per-executed-layer and per-inference cost fitted afresh (fewer terms for fewer networks) where their
    leave-one-out error is lower by more than its standard error (`AdaptResult.terms` is ``("scale",)``
    for the first). With ``latencies`` (a CSV, see `read_latencies`, or ``(model, latency_ms)`` pairs, see
    `given_latencies`): refit the platform's end-to-end model on the user's figures (a board such as
    ``zcu102`` or ``ncs2``). ``measure`` replaces the measurement (a function
    networks -> ms, for tests and other runtimes). The result is written to ``out`` (default: the platform's
    name in the user's platform folder, where the name then finds it) unless ``save`` is False.

    ``sweep`` (measured here only): per-kind scales from a short micro-kernel sweep of the kinds that carry the
    networks' time (`kind_sweep`), kept unless the refit on top of them predicts the networks left out worse
    (`_not_worse`).
    None: swept when the networks are measured here (no ``measure``); True / False: always / never; or a
    function (raw platform, the networks' `Estimate`s by it) -> {kind: factor} (tests; a sweep measured once).
    """
    from ..estimator import estimate
    from ..platform import load_platform
    from ..platform.machine import machine_description, machine_fingerprint
    from .calibrate import MEASURABLE, _validation_hashes, adaptation_networks, large_count, modelled_types
    from .calibrate import overhead_entry
    from .calibrate import user_platform_file, without_overhead
    from .kind_sweep import FUSES

    t0 = time.perf_counter()
    base = load_platform(platform)
    base_file = base.source or base.name
    if out is not None:
        check_writable(os.fspath(out))
    spread: np.ndarray | None = None  # measured here: each network's spread between its two fastest rounds
    if latencies is None:
        runtime = base.name
        if measure is None and runtime not in MEASURABLE:
            raise AdaptError(f"adapt: platform {base.name!r} cannot be measured on this machine (measurable: "
                             f"{', '.join(MEASURABLE)}); give the latencies you measured on the board with "
                             "--latencies FILE.csv")
        if int(networks) < 1:
            raise AdaptError(f"adapt: --networks must be >= 1, got {networks}")
        nets = adaptation_networks(int(networks), exclude_hashes=_validation_hashes(), cover=modelled_types(base))
        names = [n.name for n in nets]
        if measure is None:
            y, spread = _measure_here(runtime, progress)(nets)
        else:
            y = np.asarray(measure(nets), dtype=np.float64)
        source = f"{len(nets)} calibration networks measured on {machine_description()}"
    else:
        if isinstance(latencies, (str, os.PathLike)):
            rows = read_latencies(latencies)
            source = f"{len(rows)} latencies from {os.fspath(latencies)}"
        else:
            rows = given_latencies(latencies)
            source = f"{len(rows)} latencies given in Python"
        names, nets, y = [r[0] for r in rows], [r[1] for r in rows], np.array([r[2] for r in rows])
    if not np.all(np.isfinite(y) & (y > 0)):
        raise AdaptError("adapt: a measured latency is not a positive number")
    before = np.array([estimate(n, base).latency_ms for n in nets])
    semantics = None
    cells = _nb201_cells(names) if latencies is not None and base.overhead is not None else None
    if cells is not None:  # a device's NAS-Bench-201 cells: as its runtime computes them (`DEFAULT_SEMANTICS`)
        from ..search.spaces import nb201
        semantics = DEFAULT_SEMANTICS
        nets = [nb201.build_network(a, num_classes=c, semantics=semantics) for a, c in cells]

    # a CPU file carries its network-level terms as an `overhead` folded into the layer times; a board file as
    # an `end_to_end` model on top of them (the whole-application latency)
    cpu = base.end_to_end is None and (base.overhead is not None or latencies is None)
    raw = without_overhead(base) if cpu else base
    ests = [estimate(n, raw) for n in nets]
    terms = [e.terms for e in ests]
    # layers the accelerator leaves to its host, and the switches to them, are not calibrated: the refit
    # explains what remains of each latency
    y_fit = y - np.array([e.host_ms + e.switch_ms for e in ests])
    if np.any(y_fit <= 0):
        bad = names[int(np.argmin(y_fit))]
        raise AdaptError(f"adapt: the latency given for {bad} is below the time {base.name} predicts for its "
                         "host-run layers and switches alone")
    per_layer_term = _per_layer_term(base)
    use = _cpu_terms(len(y), per_layer_term) if cpu else _board_terms(len(y))
    if cells is not None:  # (built as `DEFAULT_SEMANTICS`, which folds constants)
        # a runtime that folds constants runs a constant network in microseconds: a per-inference cost fitted
        # on networks that compute would be all of such a network's latency
        use = tuple(t for t in use if t != "constant") or ("layers",)
    # a term no network has (depthwise time among plain cells) is not fitted: any coefficient fits it
    use = tuple(t for t in use if t == "layers" or any(row.get(t, 0.0) for row in terms))
    groups = [family(n) for n in nets]
    candidates, prior = use, _prior(base, cpu)
    fixed: tuple[str, ...] = ()
    if cpu and latencies is not None:
        # another device's latencies on a CPU file: its layers run at their own speed, a runtime's call is no
        # slower for it (a constant network folded by the runtime stays microseconds, not 20x them), and a
        # layer costs no less than nothing (a negative per-layer term of the file, times a device's factor,
        # took 5-9 ms off a 10 ms NAS-Bench-201 cell of a phone)
        prior[per_layer_term] = max(prior.get(per_layer_term, 0.0), 0.0)
        fixed = ("constant",)
    cal, loo, use, check, errors, net_loo = _fit(terms, y_fit, candidates, names, cpu, prior, groups, fixed=fixed)
    factors = None  # measured here: per-kind scales from micro-kernels, unless they predict left-out networks worse
    if cpu and latencies is None and (sweep is True or callable(sweep) or (sweep is None and measure is None)):
        sweeper = sweep if callable(sweep) else _sweeper(base.name, progress)
        # micro-kernels like the calibration networks' layers: the large networks (`large_count`) pin the level, and
        # by their time alone they would pick the kinds and weigh a kind's suites (VGG's classifier took the fully
        # connected factor of a transformer's token projections from 1.16 to 1.25 on the Intel Xeon VM)
        found = sweeper(raw, ests[: len(ests) - large_count(len(ests))])
        if found:
            swept = [estimate(n, _with_factors(raw, found)).terms for n in nets]
            # the sweep measured what differs by kind: on top of it only the base file's terms times one
            # factor (terms fitted afresh on ten networks overfit it: a 0.8 ms constant, large CNNs 12-27% low)
            fit_s = _fit(swept, y_fit, candidates, names, cpu, _swept_prior(prior, terms, swept, per_layer_term),
                         groups, fresh=False, fixed=fixed, group=_group_term(prior))
            if fit_s[3] == check and _not_worse(fit_s[4], errors):
                (cal, loo, use, check, errors, net_loo), factors = fit_s, found
    kinds = None
    if cpu and latencies is not None and base.overhead is not None and len(y) >= KIND_MIN_ROWS:
        kinds = _fit_kind_scales(base, raw, names, nets, y_fit)
        # the per-kind refit must predict left-out networks better, with a per-layer cost a file can hold
        if not kinds[0] < loo or kinds[1].g * kinds[1].per_layer < -1.0:
            kinds = None
    family_mape = None
    if kinds is None and check == CHECKS[1] and errors is not None:
        fam = np.asarray(groups)
        family_mape = {g: float(np.mean(errors[fam == g])) for g in dict.fromkeys(groups)}
    d = raw.to_dict()
    origin = f"adapted with annette adapt from {base_file} on {source}"
    kind_scales = fusions = None
    if kinds is not None:
        loo, kfit, kdata, semantics, nets = kinds
        check, net_loo = CHECKS[0], lambda: None  # (the per-kind fit's own leave-one-out, its mean)
        scale, _, _, dw = base.overhead  # type: ignore[misc]
        entry: dict[str, Any] = {"scale": kfit.g * scale, "per_layer_ms": kfit.g * kfit.per_layer,
                                 "per_network_ms": kfit.per_network}
        if dw != scale:
            entry["depthwise_scale"] = kfit.g * dw
        if base.per_layer_ramp_ms:
            entry["per_layer_ramp_ms"] = base.per_layer_ramp_ms
        entry["kind_scales"] = kfit.kind_scales(kdata)
        d["overhead"] = {**entry, "origin": origin + " (per-kind scales)", "fitted_on": list(names)}
        kind_scales = {k: round(v, 4) for k, v in kfit.factors.items()}
        d["description"] = (f"{base.name} adapted from {base_file} on {source}: one factor and per-kind scales"
                            + (f"; NAS-Bench-201 cells of semantics {semantics!r}" if semantics else ""))
        use = ("scale", *kdata.kinds)
    elif cpu:
        d["overhead"] = overhead_entry(cal, origin)
        if factors:  # the swept kinds' factors, times a type group's own (`calibrate.overhead_entry`)
            from .kind_sweep import apply_factors
            apply_factors(d, factors)
            kind_scales = {k: round(v, 4) for k, v in factors.items() if not k.startswith(FUSES)}
            fusions = {k[len(FUSES):]: v for k, v in factors.items() if k.startswith(FUSES)} or None
            use = ("micro-kernel scales", *use)
        if latencies is None:
            d["fingerprint"] = machine_fingerprint(1)
            d["description"] = (f"{base.name} adapted to {machine_description()} (1 thread) from {base_file}: "
                                "its layer and mapping models, network-level terms refitted on "
                                f"{len(y)} networks measured here")
    else:
        cal.predicts = (base.end_to_end.predicts if base.end_to_end is not None else
                        "end-to-end latency as the user measured it") + f"; {origin}"
        d["end_to_end"] = cal.to_dict()
        d["description"] = f"{base.description.split(chr(10))[0]}; end-to-end model refitted on {source}"
    d["adapted"] = {"from": base_file, "networks": names, "measured_ms": [float(v) for v in y],
                    "loo_mape": None if math.isnan(loo) else loo, "terms": list(use)}
    if semantics is not None:
        d["adapted"]["nb201_semantics"] = semantics
    if spread is not None:
        d["adapted"]["round_spread"] = [round(float(v), 4) for v in spread]
    path = None if not save else os.fspath(out) if out is not None else user_platform_file(base.name)
    adapted = Platform.from_dict(d, path or base.name)
    if path is not None:
        adapted.save(path)
        adapted.source = os.path.abspath(path)
    after = np.array([estimate(n, adapted).latency_ms for n in nets])
    loo_errors = net_loo()  # (of the refit kept)
    res = AdaptResult(adapted, path, base_file, names, y, before, after, loo, tuple(use),
                      time.perf_counter() - t0, "measured" if latencies is None else "given", spread, kind_scales,
                      semantics, check, family_mape, None if loo_errors is None else tuple(groups), loo_errors,
                      fusions)
    if res.noisy:
        log.warning("adapt: this machine's speed moved while measuring (a network's two fastest rounds differ by "
                    "%.0f%% at the median); the adapted file may be off by as much: run 'annette adapt' again "
                    "when the machine is quieter", 100 * res.median_spread)
    return res
