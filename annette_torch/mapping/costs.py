"""What the toolchain executes beyond the surviving layers: work of fused layers and inserted reorders.

Part of a platform's mapping model (``mapping.costs`` in the platform file), fitted from benchmark data:

* ``fused_ns``: a layer fused into its producer is not free when it computes per element (SiLU, GELU,
  Sigmoid, Tanh evaluate an exponential per output element inside the convolution's epilogue; a folded
  BatchNorm or a ReLU costs next to nothing). Per fused layer type: ns per output element, carried by the
  layer that executes it.
* ``inserted_input`` / ``inserted_output``: layout reorders a toolchain adds where a graph input enters a
  layer that runs in a blocked layout (OpenVINO's ``x_abcd_acdb_conv``), or where such a layer writes a graph
  output. Per type of that layer: ``ms`` + ``ms_per_melem`` x tensor elements / 1e6 + ``ms_per_mpixel`` x
  tensor pixels (n h w; 0 for one channel, which every layout stores alike) / 1e6 (a narrow tensor, e.g. an
  RGB image, reorders ~3x slower per element). The
  fitted mean over configurations: a reorder that is inserted only sometimes is costed by how often it is.
* ``layout``: reorders between the blocked and the plain layout inside a graph and at its outputs
  (`annette_torch.mapping.layout`), per direction (``to_plain``, ``to_blocked``): the same three coefficients,
  on the reordered tensor, and ``ms_per_melem_over`` per million elements beyond ``over_melem`` million (a
  tensor that outgrows the caches reorders at memory speed: ONNX Runtime on one Xeon core 0.28 ns per element
  up to ~8M elements, 0.5 at 50M). Where given, they replace ``inserted_output`` (a graph output is reordered when
  its layer runs blocked, whatever its type) and the layer models learn the layers without the reorders
  around them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..errors import PlatformError
from ..ir import LayerType, Network
from .layout import layout_reorders

__all__ = ["MappingCosts", "COEFS", "LAYOUT_SIDES", "LAYOUT_COEFS", "narrow_pixels"]

_N_TYPES = max(LayerType) + 1
_INPUT = int(LayerType.INPUT)  # (comparing with a plain int is faster than with the enum member)
#: coefficients of an inserted reorder: fixed ms, ms per million elements, ms per million pixels
COEFS = ("ms", "ms_per_melem", "ms_per_mpixel")
#: the directions of a layout reorder (`annette_torch.mapping.layout.layout_reorders`)
LAYOUT_SIDES = ("to_plain", "to_blocked")
#: a layout reorder's coefficients: `COEFS`, then ms per million elements beyond ``over_melem`` million
LAYOUT_COEFS = COEFS + ("ms_per_melem_over", "over_melem")


def _type_of(label: Any, where: str) -> LayerType:
    if not isinstance(label, str):
        raise PlatformError(f"{where}: expected a layer type name, got {label!r}")
    try:
        return LayerType.from_label(label)
    except KeyError:
        raise PlatformError(f"{where}: unknown layer type {label!r}") from None


def _number(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
        raise PlatformError(f"{where}: expected a finite number >= 0, got {v!r}")
    return float(v)


def narrow_pixels(net: Network, rows: np.ndarray) -> np.ndarray:
    """Pixels (n h w) of each layer's output tensor; 0 for one channel (the same in every layout)."""
    c = net.c_out[rows]
    return np.where(c > 1, net.out_elems[rows] / np.maximum(c, 1), 0.0)


@dataclass
class MappingCosts:
    """Fused-layer work and inserted-reorder cost per layer type (plain data; see the module docstring)."""

    fused_ns: dict[str, float] = field(default_factory=dict)
    inserted_input: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    inserted_output: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    origin: str = ""
    layout: dict[str, tuple[float, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._fused = np.zeros(_N_TYPES)
        for lab, v in self.fused_ns.items():
            self._fused[_type_of(lab, "mapping.costs.fused_ns")] = v
        self._in = np.zeros((_N_TYPES, 3))
        self._out = np.zeros((_N_TYPES, 3))
        for table, arr in ((self.inserted_input, self._in), (self.inserted_output, self._out)):
            for lab, coef in table.items():
                arr[_type_of(lab, "mapping.costs.inserted")] = coef
        # (a direction given with `COEFS` only has no term beyond a size)
        self.layout = {k: tuple(map(float, v)) + (0.0,) * (len(LAYOUT_COEFS) - len(v)) for k, v in self.layout.items()}
        self._layout = np.array([self.layout.get(side, (0.0,) * len(LAYOUT_COEFS)) for side in LAYOUT_SIDES])

    @property
    def empty(self) -> bool:
        return not (self._fused.any() or self._in.any() or self._out.any() or self.has_layout)

    @property
    def has_layout(self) -> bool:
        """Whether layout reorders are costed (`layout_ms`; graph outputs then by layout, not by type)."""
        return bool(self.layout)

    def layout_ms(self, net: Network, outputs: bool = True) -> np.ndarray:
        """Per layer of a mapped network: ms of the layout reorders of its output tensor (graph outputs with
        ``outputs``); zeros without `layout`."""
        t = np.zeros(len(net))
        if not self.has_layout:
            return t
        for coef, mask in zip(self._layout, layout_reorders(net, outputs=outputs)):
            rows = np.flatnonzero(mask)
            if rows.size:
                over = np.maximum(net.out_elems[rows] * 1e-6 - coef[4], 0.0)
                t[rows] += self._cost(np.broadcast_to(coef[:3], (rows.size, 3)), net, rows) + coef[3] * over
        return t

    def fused_ms(self, types: np.ndarray, out_elems: np.ndarray, owner: np.ndarray, n_owners: int) -> np.ndarray:
        """Per executing layer: ms of the fused layers it carries.

        ``types``/``out_elems``: the fused (absorbed) layers; ``owner``: the index of the executing layer of
        each.
        """
        return np.bincount(owner, weights=out_elems * self._fused[types] * 1e-6, minlength=n_owners)

    def inserted_ms(self, net: Network, inputs: bool = True, outputs: bool = True) -> np.ndarray:
        """Per layer of a mapped network: ms of the reorders at graph inputs (on the Input layer) and outputs."""
        types = net.types
        rows, coefs = [], []  # the Input layers feeding an edge (once per edge), then the output layers
        if inputs and net.edges.size:
            src, dst = net.edges[:, 0], net.edges[:, 1]
            sel = (types[src] == _INPUT).nonzero()[0]
            if sel.size:
                rows.append(src[sel])
                coefs.append(self._in[types[dst[sel]]])
        if outputs and not self.has_layout:  # (with layout costs, `layout_ms` prices the graph outputs)
            out = ((net.n_outputs == 0) & (types != _INPUT)).nonzero()[0]
            rows.append(out)
            coefs.append(self._out[types[out]])
        if not rows:
            return np.zeros(len(net))
        r = rows[0] if len(rows) == 1 else np.concatenate(rows)
        coef = coefs[0] if len(coefs) == 1 else np.concatenate(coefs)
        # one cost call for both kinds; bincount adds in this order from 0, as np.add.at into zeros would (the
        # two kinds' rows are apart: an output layer is no Input layer)
        return np.bincount(r, weights=self._cost(coef, net, r), minlength=len(net))

    @staticmethod
    def _cost(coef: np.ndarray, net: Network, rows: np.ndarray) -> np.ndarray:
        e = net.out_elems[rows]
        return coef[:, 0] + (coef[:, 1] * e + coef[:, 2] * narrow_pixels(net, rows)) * 1e-6

    # ------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "fused_ns": {k: float(v) for k, v in self.fused_ns.items()},
            "inserted_input": {k: dict(zip(COEFS, map(float, v))) for k, v in self.inserted_input.items()},
            "inserted_output": {k: dict(zip(COEFS, map(float, v))) for k, v in self.inserted_output.items()},
        }
        if self.layout:
            d["layout"] = {k: dict(zip(LAYOUT_COEFS, map(float, v))) for k, v in self.layout.items()}
        if self.origin:
            d["origin"] = self.origin
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "mapping.costs") -> "MappingCosts":
        """Validate plain data; errors name ``where`` and the field."""
        if not isinstance(d, Mapping):
            raise PlatformError(f"{where}: expected an object with fused_ns, inserted_input, inserted_output")
        fused = d.get("fused_ns", {})
        if not isinstance(fused, Mapping):
            raise PlatformError(f"{where}.fused_ns: expected an object of type -> ns per element")
        f = {}
        for k, v in fused.items():
            _type_of(k, f"{where}.fused_ns")
            f[k] = _number(v, f"{where}.fused_ns.{k}")
        tables = []
        for key in ("inserted_input", "inserted_output"):
            tab = d.get(key, {})
            if not isinstance(tab, Mapping):
                raise PlatformError(f"{where}.{key}: expected an object of type -> {{{', '.join(COEFS)}}}")
            out = {}
            for k, v in tab.items():
                _type_of(k, f"{where}.{key}")
                if not isinstance(v, Mapping):
                    raise PlatformError(f"{where}.{key}.{k}: expected an object with {', '.join(COEFS)}")
                out[k] = tuple(_number(v.get(c), f"{where}.{key}.{k}.{c}") for c in COEFS)
            tables.append(out)
        lay = d.get("layout", {})
        if not isinstance(lay, Mapping):
            raise PlatformError(f"{where}.layout: expected an object of direction -> {{{', '.join(COEFS)}}}")
        layout = {}
        for k, v in lay.items():
            if k not in LAYOUT_SIDES:
                raise PlatformError(f"{where}.layout: unknown direction {k!r} (known: {', '.join(LAYOUT_SIDES)})")
            if not isinstance(v, Mapping):
                raise PlatformError(f"{where}.layout.{k}: expected an object with {', '.join(COEFS)}")
            layout[k] = tuple(_number(v.get(c, 0.0 if c not in COEFS else None), f"{where}.layout.{k}.{c}")
                              for c in LAYOUT_COEFS)
        return cls(f, tables[0], tables[1], str(d.get("origin", "")), layout)
