"""Operator support and host fallback: which executed layers the accelerator runs and which its host runs.

Part of a platform's mapping model, as in the toolchains it reproduces (DNNDK / Vitis AI partition a graph
into DPU kernels and CPU ops; OpenVINO's HETERO plugin sends layers the MYRIAD plugin lacks to the CPU). A
platform file's ``support`` section declares, per layer type the accelerator executes, the parameter ranges
it accepts (`ATTRS`: kernel, stride, dilation, channels, ...) and the activations it can fuse; `OperatorSupport`
checks them over all executed layers at once (`OperatorSupport.supported`) and places every layer
(`OperatorSupport.place`):

* a layer of a declared type whose parameters are in range runs on the accelerator;
* shape-only layers (`NEUTRAL_TYPES`: Input, Reshape, Flatten, Dropout, and Unknown layers, which are flagged)
  never move: they stay on the accelerator's books and cost what the platform's layer models say;
* every other layer runs on the host, costed by the host's own layer models (`Platform`'s ``support.host``);
* every tensor that crosses between accelerator and host costs a switch (`Switch`): a fixed time (another
  accelerator launch, a plugin request) plus its bytes over the transfer bandwidth, once per tensor and
  direction, carried by the first layer that reads it on the other side. Shape-only layers pass their
  producer's side on; graph inputs belong to neither side.

Fused activations: the toolchains fuse only activations the accelerator can apply; an activation it lacks
is not fused but stays a layer of its own, which then runs on the host. `OperatorSupport.blocked_pairs` gives
the (primary, activation) type pairs a platform's fusion rules must therefore not fuse (see
`MappingModel.blocking`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..errors import PlatformError
from ..ir import ELEMENTWISE_TYPES, INT_COLUMNS, LayerType, Network
from .costs import _type_of as _type

__all__ = ["OperatorSupport", "TypeSupport", "Switch", "Placement", "ATTRS", "NEUTRAL_TYPES"]

T = LayerType
_N_TYPES = max(LayerType) + 1
_INPUT, _UNKNOWN = int(T.INPUT), int(T.UNKNOWN)  # (comparing with a plain int is faster than with the enum member)
#: Layers that never move to the host: graph inputs, shape-only views and layers of unknown type (flagged).
NEUTRAL_TYPES = (T.INPUT, T.RESHAPE, T.FLATTEN, T.BLOCKED_RESHAPE, T.DROPOUT, T.UNKNOWN)
#: Types declared by the type they specialise where a declaration does not list them (a pick of the leading
#: axis is the slice a support table names)
DECLARED_AS = {T.PICK: T.SLICE}
#: Declarable parameter ranges ``[min, max]`` and the IR columns each bounds (every listed column must lie in
#: the range): ``dilation_x_c_in`` is the larger dilation times the input channels (the DPU's line-buffer
#: limit); ``h_out`` / ``w_out`` the output size (``[1, 1]``: a mean over the whole feature map).
ATTRS: dict[str, tuple[str, ...]] = {
    "kernel": ("kh", "kw"), "stride": ("sh", "sw"), "dilation": ("dh", "dw"), "c_in": ("c_in",),
    "c_out": ("c_out",), "groups": ("groups",), "dilation_x_c_in": ("dilation_x_c_in",), "h_out": ("h_out",),
    "w_out": ("w_out",),
}
#: Layer types a support entry may list as fusable activations.
ACTIVATION_TYPES = frozenset(ELEMENTWISE_TYPES)


def _number(d: Mapping[str, Any], key: str, where: str, positive: bool = False) -> float:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0 or (positive and v == 0):
        raise PlatformError(f"{where}.{key}: expected a finite number {'> 0' if positive else '>= 0'}, got {v!r}")
    return float(v)


def _column(net: Network, name: str) -> np.ndarray:
    if name == "dilation_x_c_in":
        return np.maximum(net.dh, net.dw).astype(np.float64) * net.c_in
    return net.cols[name]


@dataclass(frozen=True)
class TypeSupport:
    """What the accelerator accepts of one layer type: ``ranges`` (attribute -> (min, max), `ATTRS`), whether
    the kernel must be square, and the activations it fuses (None: any the fusion rules fuse)."""

    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    square: bool = False
    activations: tuple[str, ...] | None = None

    @classmethod
    def from_dict(cls, d: Any, where: str) -> "TypeSupport":
        if not isinstance(d, Mapping):
            raise PlatformError(f"{where}: expected an object of parameter ranges (known: {', '.join(ATTRS)}, "
                                "square, activations)")
        ranges: dict[str, tuple[float, float]] = {}
        for k, v in d.items():
            if k in ("square", "activations"):
                continue
            if k not in ATTRS:
                raise PlatformError(f"{where}.{k}: unknown parameter (known: {', '.join(ATTRS)}, square, "
                                    "activations)")
            ok = (isinstance(v, (list, tuple)) and len(v) == 2
                  and all(not isinstance(x, bool) and isinstance(x, (int, float)) and np.isfinite(x) for x in v)
                  and v[0] <= v[1])
            if not ok:
                raise PlatformError(f"{where}.{k}: expected [min, max] with min <= max, got {v!r}")
            ranges[k] = (float(v[0]), float(v[1]))
        square = d.get("square", False)
        if not isinstance(square, bool):
            raise PlatformError(f"{where}.square: expected true or false, got {square!r}")
        acts = d.get("activations")
        if acts is not None:
            if not isinstance(acts, list):
                raise PlatformError(f"{where}.activations: expected a list of activation type names")
            for a in acts:
                if _type(a, f"{where}.activations") not in ACTIVATION_TYPES:
                    raise PlatformError(f"{where}.activations: {a!r} is not an activation type")
            acts = tuple(acts)
        return cls(ranges, square, acts)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {k: [_plain(lo), _plain(hi)] for k, (lo, hi) in self.ranges.items()}
        if self.square:
            d["square"] = True
        if self.activations is not None:
            d["activations"] = list(self.activations)
        return d


def _plain(v: float) -> int | float:
    return int(v) if float(v).is_integer() else v


@dataclass(frozen=True)
class Switch:
    """Cost of one tensor crossing between accelerator and host: ``ms`` + bytes / ``bandwidth`` (B/s), the
    tensor's elements at ``bit_act`` bits."""

    ms: float
    bandwidth: float
    bit_act: float
    origin: str = ""

    @classmethod
    def from_dict(cls, d: Any, where: str) -> "Switch":
        if not isinstance(d, Mapping):
            raise PlatformError(f"{where}: expected an object with ms, bandwidth, bit_act")
        return cls(_number(d, "ms", where), _number(d, "bandwidth", where, positive=True),
                   _number(d, "bit_act", where, positive=True), str(d.get("origin", "")))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"ms": self.ms, "bandwidth": self.bandwidth, "bit_act": self.bit_act}
        if self.origin:
            d["origin"] = self.origin
        return d


@dataclass(frozen=True)
class Placement:
    """Where each layer of a mapped network executes and what crossing between the sides costs.

    ``on_host``: per layer, runs on the host; ``flagged``: per layer, of a type nobody declared (Unknown: kept
    on the accelerator, costed from its tensor sizes); ``switch_ms``: per layer, the switches it waits for (on
    the first layer reading a crossing tensor); ``switches``: number of crossings.
    """

    on_host: np.ndarray
    flagged: np.ndarray
    switch_ms: np.ndarray
    switches: int

    @property
    def moves(self) -> bool:
        """Whether anything runs on the host or crosses sides (else times are the accelerator's alone)."""
        return bool(self.on_host.any()) or self.switches > 0

    def accelerator_part(self, time_ms: np.ndarray) -> np.ndarray:
        """Per layer, the accelerator's share of ``time_ms`` (the layer times predicted with this placement): 0
        for a host-run layer, the layer's time less the switches it waits for otherwise. What remains
        (``time_ms`` less this) is host and switch time, which no end-to-end model scales."""
        return np.where(self.on_host, 0.0, time_ms - self.switch_ms)


class OperatorSupport:
    """A platform's operator-support declaration (see the module docstring): ``accelerator`` maps type labels
    to `TypeSupport`; ``switch`` prices a crossing; ``origin`` cites where the declaration comes from."""

    def __init__(self, accelerator: Mapping[str, TypeSupport], switch: Switch, origin: str = "") -> None:
        self.accelerator = dict(accelerator)
        self.switch = switch
        self.origin = origin
        self._declared = np.zeros(_N_TYPES, dtype=bool)
        self._square = np.zeros(_N_TYPES, dtype=bool)
        # bounds per type and bounded column (only the columns some entry bounds; IR columns first, derived
        # ones last): one comparison of a (columns, layers) matrix checks every range of every layer
        used = {c for ts in self.accelerator.values() for a in ts.ranges for c in ATTRS[a]}
        self._rows = [i for i, c in enumerate(INT_COLUMNS) if c in used]
        self._derived = sorted(used - set(INT_COLUMNS))
        cols = [INT_COLUMNS[i] for i in self._rows] + self._derived
        self._lo = np.full((_N_TYPES, len(cols)), -np.inf)
        self._hi = np.full((_N_TYPES, len(cols)), np.inf)
        for label, ts in self.accelerator.items():
            t = _type(label, "support.accelerator")
            self._declared[t] = True
            self._square[t] = ts.square
            for a, (lo, hi) in ts.ranges.items():
                for c in ATTRS[a]:
                    self._lo[t, cols.index(c)], self._hi[t, cols.index(c)] = lo, hi
        for t, like in DECLARED_AS.items():
            if not self._declared[t] and self._declared[like]:
                self._declared[t], self._square[t] = True, self._square[like]
                self._lo[t], self._hi[t] = self._lo[like], self._hi[like]
        self._neutral = np.zeros(_N_TYPES, dtype=bool)
        self._neutral[list(NEUTRAL_TYPES)] = True
        # (per bounded column, per type: gathered by type as (columns, layers), contiguous)
        self._lo_t, self._hi_t = np.ascontiguousarray(self._lo.T), np.ascontiguousarray(self._hi.T)
        self._row_index = np.array(self._rows, dtype=np.intp)

    # ------------------------------------------------------------------------------------------------
    def supported(self, net: Network) -> np.ndarray:
        """Per layer of ``net``: its type is declared and its parameters lie in the declared ranges."""
        types = net.types
        ok = self._declared[types]
        if self._lo.shape[1]:
            if net.matrix is not None:  # the bounded IR columns are rows of the network's matrix: one take
                v = net.matrix[self._row_index]
            else:
                v = np.array([net.cols[INT_COLUMNS[i]] for i in self._rows]).reshape(len(self._rows), len(net))
            if self._derived:  # float rows below the integer ones (as a stack of both would make them)
                k = len(self._rows)
                w = np.empty((k + len(self._derived), len(net)))
                w[:k] = v
                for j, c in enumerate(self._derived):
                    w[k + j] = _column(net, c)
                v = w
            ok &= ((v >= self._lo_t[:, types]) & (v <= self._hi_t[:, types])).all(axis=0)
        sq = self._square[types]
        if sq.any():
            ok &= ~sq | (net.kh == net.kw)
        return ok

    def blocked_pairs(self) -> list[tuple[LayerType, LayerType]]:
        """(primary type, activation type) pairs the toolchain does not fuse: the primary's declared
        activations leave them out."""
        out = []
        for label, ts in self.accelerator.items():
            if ts.activations is None:
                continue
            allowed = {LayerType.from_label(a) for a in ts.activations}
            p = LayerType.from_label(label)
            out.extend((p, a) for a in sorted(ACTIVATION_TYPES) if a not in allowed)
        return out

    def place(self, net: Network) -> Placement:
        """Place every layer of a mapped network (see the module docstring), vectorised over layers and edges."""
        n = len(net)
        types = net.types
        neutral = self._neutral[types]
        on_host = ~neutral & ~self.supported(net)
        flagged = types == _UNKNOWN
        if not on_host.any() or not net.edges.size:
            return Placement(on_host, flagged, np.zeros(n), 0)
        # sides: 0 accelerator, 1 host, 2 neither (graph inputs and what only they feed)
        side = on_host.astype(np.int8)
        src, dst = net.edges[:, 0], net.edges[:, 1]
        graph_input = types == _INPUT
        graph_input[dst] = False  # (an Input read from another layer is a block's)
        side[graph_input] = 2
        shape_only = neutral & ~graph_input
        if shape_only.any():  # they take their producer's side (chains of them are short)
            side[shape_only] = -1
            while True:
                sel = (side[dst] == -1) & (side[src] != -1)
                if not sel.any():
                    break
                side[dst[sel]] = side[src[sel]]
            side[side == -1] = 2
        cross = ((side[src] ^ side[dst]) == 1).nonzero()[0]  # 0 -> 1 or 1 -> 0 (2 and either: 2, 3 or 0)
        if not cross.size:
            return Placement(on_host, flagged, np.zeros(n), 0)
        # one transfer per tensor and direction, carried by the first layer reading it on the other side
        reader = np.full(n, n)
        np.minimum.at(reader, src[cross], dst[cross])
        cs = (reader < n).nonzero()[0]
        cd = reader[cs]
        sw = self.switch
        cost = sw.ms + net.out_elems[cs] * (sw.bit_act / 8.0 / sw.bandwidth * 1e3)
        switch_ms = np.bincount(cd, weights=cost, minlength=n)
        return Placement(on_host, flagged, switch_ms, int(cs.size))

    # ------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.origin:
            d["origin"] = self.origin
        d["accelerator"] = {k: v.to_dict() for k, v in self.accelerator.items()}
        d["switch"] = self.switch.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "support") -> "OperatorSupport":
        """Validate the ``accelerator`` and ``switch`` parts of a ``support`` section (the host's layer models
        are the platform's to read); errors name ``where`` and the field."""
        if not isinstance(d, Mapping):
            raise PlatformError(f"{where}: expected an object with accelerator, host, switch")
        acc = d.get("accelerator")
        if not isinstance(acc, Mapping):
            raise PlatformError(f"{where}.accelerator: expected an object of layer type -> parameter ranges")
        entries = {}
        for k, v in acc.items():
            _type(k, f"{where}.accelerator")
            entries[k] = TypeSupport.from_dict(v, f"{where}.accelerator.{k}")
        if "switch" not in d:
            raise PlatformError(f"{where}.switch: missing (cost of a tensor crossing between accelerator and host)")
        return cls(entries, Switch.from_dict(d["switch"], f"{where}.switch"), str(d.get("origin", "")))

    def __repr__(self) -> str:
        return f"OperatorSupport({len(self.accelerator)} accelerator types, switch {self.switch.ms} ms)"
