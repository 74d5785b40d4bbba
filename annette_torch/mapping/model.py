"""Mapping pass: reproduce the layer fusions of a platform's toolchain on a `Network`, vectorised.

A rule fuses a *primary* layer with its only consumer (the *secondary*) when their types match and the
rule's conditions hold; the fused layer takes the rule's *result* type (e.g. Conv + MaxPool -> ConvPool)
and keeps the primary's shapes and operations, while its output becomes the secondary's output. Rules
apply repeatedly, so chains collapse (Conv -> BatchNorm -> Relu -> MaxPool becomes one ConvPool).
All candidate pairs of a round are found with array operations over the edge list.

Before the rules, a model may *fold* patterns of several layers that the toolchain executes as one layer
of another type (`annette_torch.mapping.folds`): ``swish`` turns ``Mul(x, Sigmoid(x))`` -- how exporters
write ``nn.SiLU`` -- into one SiLU layer, ``hardswish`` turns ``x * relu6(x + 3) / 6`` into one HardSwish
layer that stays a node of its own; pairwise rules could not express either (x has two consumers).

Before the folds, a model may propagate strides (``strides``: `annette_torch.mapping.strides`): a
toolchain computes only the pixels a strided 1x1 convolution reads, which changes shapes, not layers.
"""

from __future__ import annotations

import itertools
import logging
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import PlatformError
from ..ir import INT_COLUMNS, LayerType, Network
from .costs import MappingCosts
from .layout import blocked_types, map_kernel_types
from .folds import FOLDS, apply_folds, hardswish_groups, may_fold, swish_diamonds
from .strides import propagate_strides

__all__ = ["FusionRule", "Condition", "MappingModel", "MappedNetwork", "expand_types", "FOLDS", "swish_diamonds",
           "hardswish_groups", "apply_folds", "ACTIVATIONS", "GROUP_ATTRS"]

log = logging.getLogger(__name__)

#: Fusion rounds of one mapping pass: each round extends every fusion chain by one link, and a toolchain's
#: chains are a few layers long; a pass that still finds fusions after this many warns.
MAX_FUSION_ROUNDS = 64
#: Group names usable in rules besides the type labels.
TYPE_GROUPS: dict[str, tuple[LayerType, ...]] = {
    "Pool": (LayerType.MAX_POOL, LayerType.AVG_POOL, LayerType.GLOBAL_POOL),
    "AnyConv": (LayerType.CONV, LayerType.GROUP_CONV, LayerType.DEPTHWISE_CONV),
}
_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
        ">=": operator.ge}
#: Derived attributes a condition may test: the channel counts' alignment, log2 of the largest power of two
#: (<= 64) dividing them (``c_align``: dividing both). Runtimes pick blocked-layout kernels, and fuse more
#: into them, only for aligned counts (ONNX Runtime fuses a HardSwish into a depthwise conv only when its
#: channels are a multiple of 8, on an AMD EPYC without AVX-512 of 4).
ALIGN_ATTRS = {"c_in_align": ("c_in",), "c_out_align": ("c_out",), "c_align": ("c_in", "c_out")}
#: Layer types that are activations: a fused layer that applied one computes ``act(...)``, so what it fuses next
#: comes after it
ACTIVATIONS = (LayerType.RELU, LayerType.RELU6, LayerType.LEAKY_RELU, LayerType.SIGMOID, LayerType.SILU,
               LayerType.HARDSWISH, LayerType.HARDSIGMOID, LayerType.GELU, LayerType.TANH, LayerType.SOFTPLUS)
#: Attributes of the primary's fused group a condition may test (primary only): ``activated``, 1 when the group
#: has already absorbed an activation. ONNX Runtime and OpenVINO fuse a residual Add into the convolution before it
#: as ``act(conv + z)``: after a BatchNorm, never after a ReLU (NAS-Bench-101 cells sum activated paths).
GROUP_ATTRS = ("activated",)
#: Attributes a condition may test: the integer columns of the IR, `ALIGN_ATTRS` and `GROUP_ATTRS`.
CONDITION_ATTRS = INT_COLUMNS + tuple(ALIGN_ATTRS) + GROUP_ATTRS
_IS_ACTIVATION = np.zeros(max(int(t) for t in LayerType) + 1, dtype=bool)
_IS_ACTIVATION[[int(t) for t in ACTIVATIONS]] = True


def attr_values(cols: Mapping[str, np.ndarray], attr: str) -> np.ndarray:
    """Values of the condition attribute ``attr`` (`CONDITION_ATTRS`) over the layers of the columns ``cols``."""
    if attr in ALIGN_ATTRS:
        g = np.int64(64)
        for c in ALIGN_ATTRS[attr]:
            g = np.gcd(np.maximum(np.asarray(cols[c]), 1).astype(np.int64), g)
        return np.log2(g).astype(np.int64)
    return np.asarray(cols[attr])


def expand_types(labels: str | Sequence[str], where: str) -> tuple[LayerType, ...]:
    """Type labels (or group names such as ``Pool``) -> layer types; errors name ``where``."""
    if isinstance(labels, str):
        labels = [labels]
    out: list[LayerType] = []
    for lab in labels:
        if not isinstance(lab, str):
            raise PlatformError(f"{where}: expected a layer type name, got {lab!r}")
        if lab in TYPE_GROUPS:
            out.extend(TYPE_GROUPS[lab])
            continue
        try:
            out.append(LayerType.from_label(lab))
        except KeyError:
            raise PlatformError(f"{where}: unknown layer type {lab!r}") from None
    return tuple(out)


@dataclass(frozen=True)
class Condition:
    """``<layer>.<attr> <op> <value>``, e.g. the secondary's kernel height == 2."""

    layer: str  # "primary" or "secondary"
    attr: str
    op: str
    value: float

    def holds(self, net: Network, rows: np.ndarray, group: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """Whether the condition holds for the layers ``rows`` (``group``: per layer, the `GROUP_ATTRS` of the
        fused group it heads; none absorbed anything without it)."""
        if self.attr in GROUP_ATTRS:
            values = group[self.attr][rows] if group is not None else np.zeros(len(rows), dtype=np.int64)
            return _OPS[self.op](values, self.value)
        cols = {c: net.cols[c][rows] for c in ALIGN_ATTRS.get(self.attr, (self.attr,))}
        return _OPS[self.op](attr_values(cols, self.attr), self.value)

    @classmethod
    def from_dict(cls, d: Any, where: str) -> "Condition":
        if not isinstance(d, Mapping):
            raise PlatformError(f"{where}: expected an object with layer, attr, op, value")
        layer, attr, op, value = d.get("layer"), d.get("attr"), d.get("op"), d.get("value")
        if layer not in ("primary", "secondary"):
            raise PlatformError(f"{where}.layer: must be 'primary' or 'secondary', got {layer!r}")
        if attr not in CONDITION_ATTRS:
            raise PlatformError(f"{where}.attr: unknown attribute {attr!r} (known: {', '.join(CONDITION_ATTRS)})")
        if attr in GROUP_ATTRS and layer != "primary":
            raise PlatformError(f"{where}.attr: {attr!r} is an attribute of the primary's fused group; layer must be "
                                "'primary'")
        if op not in _OPS:
            raise PlatformError(f"{where}.op: unknown comparison {op!r} (known: {' '.join(_OPS)})")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PlatformError(f"{where}.value: expected a number, got {value!r}")
        return cls(layer, attr, op, float(value))

    def to_dict(self) -> dict[str, Any]:
        v = int(self.value) if float(self.value).is_integer() else self.value
        return {"layer": self.layer, "attr": self.attr, "op": self.op, "value": v}


@dataclass(frozen=True)
class FusionRule:
    """Fuse a primary of one of ``primary`` types with its only consumer of one of ``secondary`` types."""

    name: str
    primary: tuple[str, ...]
    secondary: tuple[str, ...]
    result: str | None = None  # None: the primary keeps its type
    when: tuple[Condition, ...] = ()
    origin: str = ""
    #: the secondary may have further inputs (e.g. a residual Add fused into the convolution feeding it)
    multi_input: bool = False
    _types: tuple[tuple[LayerType, ...], tuple[LayerType, ...], LayerType | None] = field(
        default=None, compare=False, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        where = f"mapping.rules[{self.name}]"
        p = expand_types(self.primary, f"{where}.primary")
        s = expand_types(self.secondary, f"{where}.secondary")
        r = expand_types(self.result, f"{where}.result")[0] if self.result else None
        object.__setattr__(self, "_types", (p, s, r))

    @classmethod
    def from_dict(cls, d: Any, where: str) -> "FusionRule":
        if not isinstance(d, Mapping):
            raise PlatformError(f"{where}: expected an object")
        for k in ("name", "primary", "secondary"):
            if k not in d:
                raise PlatformError(f"{where}.{k}: missing")
        when = d.get("when", [])
        if not isinstance(when, list):
            raise PlatformError(f"{where}.when: expected a list of conditions")
        as_tuple = (lambda v: (v,) if isinstance(v, str) else tuple(v))
        for k in ("primary", "secondary"):
            if not isinstance(d[k], (str, list)) or not d[k]:
                raise PlatformError(f"{where}.{k}: expected a type name or a non-empty list of them")
        return cls(name=str(d["name"]), primary=as_tuple(d["primary"]), secondary=as_tuple(d["secondary"]),
                   result=d.get("result"),
                   when=tuple(Condition.from_dict(c, f"{where}.when[{i}]") for i, c in enumerate(when)),
                   origin=str(d.get("origin", "")), multi_input=_flag(d, "multi_input", where))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "primary": list(self.primary), "secondary": list(self.secondary)}
        if self.result:
            d["result"] = self.result
        if self.when:
            d["when"] = [c.to_dict() for c in self.when]
        if self.multi_input:
            d["multi_input"] = True
        if self.origin:
            d["origin"] = self.origin
        return d


def _flag(d: Mapping[str, Any], key: str, where: str) -> bool:
    v = d.get(key, False)
    if not isinstance(v, bool):
        raise PlatformError(f"{where}.{key}: expected true or false, got {v!r}")
    return v


@dataclass
class MappedNetwork:
    """The network as the toolchain executes it, plus where each original layer went.

    ``network`` holds the surviving layers (shapes of the primary, output size of the last fused layer);
    ``kept`` maps its rows to original rows; ``fused_into`` gives, per original layer, the original row of
    the layer that executes it (itself when not fused).
    """

    network: Network
    kept: np.ndarray
    fused_into: np.ndarray
    rules_applied: np.ndarray  # per original layer: index of the rule that absorbed it, -1 if none (or folded)
    #: per original layer: its type after the pattern folds (a folded swish's Mul is a SiLU)
    layer_types: np.ndarray
    #: per original layer: whether a pattern fold merged it into another (a swish's Sigmoid)
    folded: np.ndarray
    #: the network with the toolchain's shape rewrites (stride propagation) applied; its rows are the
    #: original layers (the input network itself when the model rewrites nothing)
    source: Network
    #: per executed layer: ms of the fused layers it carries (`MappingCosts.fused_ms`; zeros without costs)
    fused_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: per original layer: 1 once the group it heads absorbed an activation (the fusion rounds' ``activated``)
    group_activated: np.ndarray | None = None

    def activated(self) -> np.ndarray:
        """Per executed layer: whether it absorbed an activation layer (its kernel applies it: a runtime may run
        such a fused kernel at another speed, the ``"FullyConnected vector act"`` kind)."""
        if self.group_activated is None:
            return np.zeros(len(self.kept), dtype=bool)
        return self.group_activated[self.kept] > 0


class MappingModel:
    """An ordered list of fusion rules; ``apply`` runs them to a fixed point, vectorised over edges.

    ``costs`` (optional): what fused layers and inserted reorders still cost (`MappingCosts`); ``apply``
    gives each executing layer's fused-layer time (`MappedNetwork.fused_ms`), the prediction passes add both.
    ``folds``: pattern folds (`FOLDS`) applied before the rules. ``strides``: None when the toolchain does not
    propagate strides, else the layer types a stride passes through (`annette_torch.mapping.strides`).
    ``kernel_types``: layers get the type of the kernel a runtime runs for them: a view of a convolution's feature
    map, which reorders it, is a ``BlockedReshape``; without layout costs, a resize of one is a ``BlockedResize``
    and a pool of a plain tensor a ``PlainMaxPool`` / ``PlainAvgPool`` (`layout.map_kernel_types`).
    """

    def __init__(self, rules: Sequence[FusionRule] = (), costs: MappingCosts | None = None,
                 folds: Sequence[str] = (), strides: Sequence[str] | None = None,
                 kernel_types: bool = False) -> None:
        unknown = sorted(set(folds) - set(FOLDS))
        if unknown:
            raise PlatformError(f"mapping.folds: unknown fold(s) {', '.join(map(repr, unknown))} "
                                f"(known: {', '.join(FOLDS)})")
        self.rules = list(rules)
        self.costs = costs if costs is not None and not costs.empty else None
        self.folds = tuple(f for f in FOLDS if f in folds)
        self.strides = None if strides is None else tuple(strides)
        self.kernel_types = bool(kernel_types)
        self._through = None if strides is None else expand_types(list(strides), "mapping.strides.through")
        n_types = max(LayerType) + 1
        # table[k, p, s] = index of the k-th rule (in rule order) fusing type p with type s, -1 past the last:
        # a pair fuses by the first of its rules whose conditions hold (a decision tree gives one rule per leaf)
        per_pair: dict[tuple[int, int], list[int]] = {}
        for i, rule in enumerate(self.rules):
            p, s, _ = rule._types
            for a, b in itertools.product(p, s):
                per_pair.setdefault((int(a), int(b)), []).append(i)
        depth = max((len(v) for v in per_pair.values()), default=1)
        self._table = np.full((depth, n_types, n_types), -1, dtype=np.int64)
        for (p, s), idx in per_pair.items():
            self._table[: len(idx), p, s] = idx
        self._result = np.array([int(r._types[2]) if r._types[2] is not None else -1 for r in self.rules] or [-1])
        self._multi = np.array([r.multi_input for r in self.rules] or [False])
        self._conditional = np.array([bool(r.when) for r in self.rules] or [False])
        self._any_multi, self._any_conditional = bool(self._multi.any()), bool(self._conditional.any())
        #: (primary, secondary) type pairs no rule may fuse (set by `blocking`)
        self.blocked: tuple[tuple[LayerType, LayerType], ...] = ()

    def blocking(self, pairs: Sequence[tuple[LayerType, LayerType]]) -> "MappingModel":
        """This model, except that no rule fuses a secondary of the second type into a primary of the first
        for the given pairs (an accelerator that cannot apply an activation leaves it a layer of its own,
        `annette_torch.mapping.support`); ``self`` when no rule would fuse any of them."""
        hit = [(p, s) for p, s in pairs if (self._table[:, p, s] >= 0).any()]
        if not hit:
            return self
        out = MappingModel(self.rules, self.costs, self.folds, self.strides, self.kernel_types)
        for p, s in hit:
            out._table[:, p, s] = -1
        out.blocked = tuple(hit)
        return out

    @classmethod
    def from_dict(cls, d: Any, where: str = "mapping") -> "MappingModel":
        if not isinstance(d, Mapping):
            raise PlatformError(f"{where}: expected an object with 'rules'")
        rules = d.get("rules", [])
        if not isinstance(rules, list):
            raise PlatformError(f"{where}.rules: expected a list")
        costs = MappingCosts.from_dict(d["costs"], f"{where}.costs") if d.get("costs") is not None else None
        folds = d.get("folds", [])
        if not isinstance(folds, list) or not all(isinstance(f, str) for f in folds):
            raise PlatformError(f"{where}.folds: expected a list of fold names (known: {', '.join(FOLDS)})")
        strides = d.get("strides")
        if strides is not None:
            through = strides.get("through") if isinstance(strides, Mapping) else None
            if not isinstance(through, list) or not all(isinstance(t, str) for t in through):
                raise PlatformError(f"{where}.strides: expected an object with 'through', a list of layer type "
                                    "names")
            strides = through
        kernel_types = d.get("kernel_types", False)
        if not isinstance(kernel_types, bool):
            raise PlatformError(f"{where}.kernel_types: expected true or false, got {kernel_types!r}")
        return cls([FusionRule.from_dict(r, f"{where}.rules[{i}]") for i, r in enumerate(rules)], costs, folds,
                   strides, kernel_types)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"rules": [r.to_dict() for r in self.rules]}
        if self.folds:
            d["folds"] = list(self.folds)
        if self.strides is not None:
            d["strides"] = {"through": list(self.strides)}
        if self.kernel_types:
            d["kernel_types"] = True
        if self.costs is not None:
            d["costs"] = self.costs.to_dict()
        return d

    def _match(self, net: Network, s_: np.ndarray, d_: np.ndarray, types: np.ndarray, out_deg: np.ndarray,
               in_deg: np.ndarray, pinned: np.ndarray | None,
               group: Mapping[str, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The edges ``s_ -> d_`` that fuse now (positions, in no particular order: each fuses once, and what
        follows depends on the set alone) and the index of the first rule that fuses each."""
        found: list[tuple[np.ndarray, np.ndarray]] = []
        pending = (out_deg[s_] == 1).nonzero()[0]
        if pinned is not None:
            pending = pending[~pinned[d_[pending]]]
        for table in self._table:
            rk = table[types[s_[pending]], types[d_[pending]]]
            hit = (rk >= 0).nonzero()[0]
            if not hit.size:
                break
            pending, rk = pending[hit], rk[hit]
            ok = in_deg[d_[pending]] == 1
            if self._any_multi:
                ok |= self._multi[rk]
            conditional = ok & self._conditional[rk] if self._any_conditional else None
            if conditional is not None and conditional.any():
                for ri in sorted(set(rk[conditional].tolist())):  # (each rule's pairs are its own: any order)
                    sel = (conditional & (rk == ri)).nonzero()[0]
                    ps, ds = s_[pending[sel]], d_[pending[sel]]
                    for c in self.rules[ri].when:
                        ok[sel] &= c.holds(net, ps if c.layer == "primary" else ds, group)
            found.append((pending[ok], rk[ok]))
            pending = pending[~ok]
        if len(found) == 1:
            return found[0]
        if not found:
            return pending[:0], pending[:0]
        return np.concatenate([e for e, _ in found]), np.concatenate([r for _, r in found])

    def apply(self, net: Network, light: bool = False) -> MappedNetwork:
        """Fuse ``net`` as the toolchain would; the input network is not modified.

        Three steps: the stride rewrites and pattern folds (`_Fusion.start`), the fusion rounds (`_fuse`), and
        the executed network (`_executed`). ``light`` skips names and extra attributes of the result (batch
        scoring needs neither).
        """
        if self._through is not None:
            net = propagate_strides(net, self._through)
        f = _Fusion.start(net, self.folds)
        if self.rules and f.src.size:
            self._fuse(net, f)
        return self._executed(net, f, light)

    def _fuse(self, net: Network, f: "_Fusion") -> None:
        """The fusion rounds: each extends every chain by one link. Round one looks at every edge; later rounds
        only at the edges leaving a layer that has just absorbed its consumer (nothing else changed)."""
        n = len(net)
        out_deg = np.bincount(f.src, minlength=n)
        in_deg = np.bincount(f.dst, minlength=n)
        src, dst = f.src.copy(), f.dst.copy()  # (contracted in place below)
        types, tail, absorber = f.types, f.tail, f.absorber
        out_elems = net.out_elems
        is_sec = np.zeros(n, dtype=bool)  # this round's secondaries (cleared at the end of the round)
        act = None  # edges to examine this round (None: all)
        for _ in range(MAX_FUSION_ROUNDS):
            s_, d_ = (src, dst) if act is None else (src[act], dst[act])
            cand, rr = self._match(net, s_, d_, types, out_deg, in_deg, f.pinned, {"activated": f.activated})
            if not cand.size:
                break
            p, sec = s_[cand], d_[cand]
            if self._any_multi and self._multi[rr].any():
                # a multi-input secondary joins one producer: the last one in layer order (only a multi-input
                # secondary can have several: the others have one input)
                order = np.lexsort((-p, sec))
                p, sec, rr = p[order], sec[order], rr[order]
                first = np.ones(sec.size, dtype=bool)
                first[1:] = sec[1:] != sec[:-1]
                p, sec, rr = p[first], sec[first], rr[first]
            # a layer absorbed in this round cannot absorb in it too: chains grow one link per round
            is_sec[sec] = True
            keep = ~is_sec[p]
            if not keep.all():
                is_sec[sec] = False
                p, sec, rr = p[keep], sec[keep], rr[keep]
                if not p.size:
                    break
                is_sec[sec] = True
            res = self._result[rr]
            f.activated[p] |= f.activated[sec] | _IS_ACTIVATION[f.layer_types[sec]]
            types[p] = np.where(res >= 0, res, types[p])
            tail[p] = tail[sec]
            f.rule_of[sec] = rr
            absorber[sec] = p
            out_deg[p] = out_deg[sec]
            # contract: drop primary->secondary edges, the secondary's consumers now read the primary, and a
            # multi-input secondary's other inputs now feed the primary (no duplicates can arise: a primary has
            # exactly one consumer, the secondary)
            into = is_sec[dst].nonzero()[0]
            dst[into] = absorber[dst[into]]
            other = into[src[into] != dst[into]]
            if other.size:
                np.add.at(in_deg, dst[other], 1)
                np.add.at(f.extra_in, dst[other], out_elems[tail[src[other]]])
            live = (src != dst).nonzero()[0]
            src, dst = src[live], dst[live]
            # the secondaries' consumers: the only edges leaving a primary now (its one edge was to the secondary)
            act = is_sec[src].nonzero()[0]
            src[act] = absorber[src[act]]
            is_sec[sec] = False
        else:
            log.warning("mapping of %r stopped after %d fusion rounds with fusions left: chains longer than "
                        "that stay partly unfused", net.name, MAX_FUSION_ROUNDS)
        f.src, f.dst = src, dst

    def _executed(self, net: Network, f: "_Fusion", light: bool) -> MappedNetwork:
        """The executed network: the surviving layers, each computing what its primary computes and writing what
        its last secondary writes, with the work of its fused layers (`MappingCosts.fused_ms`)."""
        n = len(net)
        root = f.absorber  # resolve chains of absorption to the surviving layer
        while True:
            nxt = f.absorber[root]
            if (nxt == root).all():
                break
            root = nxt
        alive = root == np.arange(n)
        kept = alive.nonzero()[0]
        new_index = np.full(n, -1, dtype=np.int64)
        new_index[kept] = np.arange(kept.size)
        if light:
            names, attrs = [""] * kept.size, {}
        else:
            pick = _picker(kept.tolist())
            names, attrs = pick(net.names), {k: pick(v) for k, v in net.attrs.items()}
        edges = new_index[np.column_stack([f.src, f.dst])] if f.src.size else np.zeros((0, 2), np.int64)
        derived = {"ops": net.ops[kept], "weights": net.weights[kept],
                   "in_elems": net.in_elems[kept] + f.extra_in[kept], "out_elems": net.out_elems[f.tail[kept]]}
        if net.matrix is not None:
            out = Network.from_matrix(net.name, names, f.types[kept], net.matrix[:, kept], edges, attrs, derived,
                                      check=False)
        else:
            out = Network(net.name, names, f.types[kept], {c: v[kept] for c, v in net.cols.items()}, edges, attrs)
            out.set_derived(derived)
        by_layout = self.costs is not None and self.costs.has_layout
        if by_layout:  # layers whose kernel differs in the blocked layout
            bt = blocked_types(out)
            if bt is not None:
                out.types[:] = bt  # (a fresh array of this network, nothing derived from it yet)
        if self.kernel_types:  # views that reorder a feature map; without layout costs, resizes of one, plain pools
            kt = map_kernel_types(out, without_layout=not by_layout)
            if kt is not None:
                out.types[:] = kt
        fused = np.zeros(kept.size)
        if self.costs is not None:
            gone = (~alive & ~f.folded).nonzero()[0]
            fused = self.costs.fused_ms(f.layer_types[gone], net.out_elems[gone], new_index[root[gone]], kept.size)
        return MappedNetwork(out, kept, root, f.rule_of, f.layer_types, f.folded, net, fused, f.activated)


def _picker(rows: list[int]) -> Callable[[Sequence[Any]], list[Any]]:
    """A function taking the entries ``rows`` of a list (one C call instead of a Python loop)."""
    if len(rows) == 1:
        return lambda v: [v[rows[0]]]
    get = operator.itemgetter(*rows)
    return lambda v: list(get(v)) if rows else []


@dataclass
class _Fusion:
    """The state of one mapping: per original layer its (fused) type, the layer its output now comes from
    (``tail``), the layer that absorbed it, the rule that did, the elements extra inputs add; the live edges."""

    types: np.ndarray
    tail: np.ndarray
    absorber: np.ndarray
    rule_of: np.ndarray
    extra_in: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    layer_types: np.ndarray
    folded: np.ndarray
    pinned: np.ndarray | None
    #: per layer: 1 once the group it heads has absorbed an activation (`GROUP_ATTRS`)
    activated: np.ndarray

    @classmethod
    def start(cls, net: Network, folds: Sequence[str]) -> "_Fusion":
        """Nothing fused yet; the pattern folds applied (e.g. a swish's Mul becomes a SiLU reading x alone, the
        Sigmoid and its two edges are gone)."""
        n = len(net)
        f = cls(net.types.copy(), np.arange(n), np.arange(n), np.full(n, -1, dtype=np.int64), np.zeros(n),
                net.edges[:, 0], net.edges[:, 1], net.types, np.zeros(n, dtype=bool), None, np.zeros(n, dtype=np.int64))
        if folds and may_fold(net, folds):
            fo = apply_folds(net, folds)
            if fo.any:  # (apply_folds' arrays are this call's own; only the types stay as the folds left them)
                f.layer_types, f.folded, f.types = fo.types, fo.folded, fo.types.copy()
                f.absorber, f.extra_in = fo.absorber, fo.extra_in
                f.src, f.dst = fo.edges[:, 0], fo.edges[:, 1]
                f.pinned = fo.pinned if fo.pinned.any() else None
        return f
