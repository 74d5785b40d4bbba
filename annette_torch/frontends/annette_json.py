"""Front end for the original ANNETTE graph JSON format (NHWC shapes, batch -1) -> `Network` (NCHW).

Format: ``{"name", "layers": {name: {"type", "parents", "children", "input_shape", "output_shape",
"kernel_shape": [kh, kw, cin_per_group, cout], "strides": [1, sh, sw, 1], "pads": [0, top, left, 0, 0,
bottom, right, 0], "dilations", "pooling_type"}}}``. Depthwise and grouped convolutions stored as ``Conv``
are recognised from ``kernel_shape[2]`` (input channels per group) being smaller than the input channels.

Every field is checked before conversion and a malformed one is a `ModelLoadError` naming the layer and the
field: shapes are lists of integers (``-1`` for the batch; a ``0`` or a rank-1 shape, which exporters write
for unknown shapes, means "unusable" and the neighbour's shape is taken, as in ANNETTE), kernels, strides
and dilations are positive, pads non-negative, ``parents`` name layers of the graph, and the graph has no
cycle. Sizes beyond `ir.MAX_ELEMS` elements are refused.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any, Mapping

from ..errors import ModelLoadError, read_json_file
from ..ir import (
    MAX_ELEMS,
    MAX_WINDOW,
    IRError,
    LayerType,
    Network,
    NetworkBuilder,
    conv_type,
    topological_order,
)

__all__ = ["from_annette_json"]

log = logging.getLogger(__name__)
T = LayerType

_SIMPLE: dict[str, LayerType] = {
    "DataInput": T.INPUT, "Input": T.INPUT, "BatchNorm": T.BATCH_NORM, "Relu": T.RELU, "Relu6": T.RELU6,
    "LeakyRelu": T.LEAKY_RELU, "Sigmoid": T.SIGMOID, "Tanh": T.TANH, "Softplus": T.SOFTPLUS, "Swish": T.SILU,
    "HardSwish": T.HARDSWISH, "HardSigmoid": T.HARDSIGMOID, "Gelu": T.GELU, "Add": T.ADD, "Mul": T.MUL,
    "Sub": T.SUB, "Div": T.DIV, "RealDiv": T.DIV, "Concat": T.CONCAT, "Flatten": T.FLATTEN,
    "Reshape": T.RESHAPE, "Squeeze": T.RESHAPE, "Unsqueeze": T.RESHAPE, "Transpose": T.TRANSPOSE,
    "Softmax": T.SOFTMAX, "Pad": T.PAD, "Slice": T.SLICE, "Dropout": T.DROPOUT, "LRN": T.LRN, "Clip": T.CLIP,
    "Resize": T.RESIZE, "ResizeNearestNeighbor": T.RESIZE, "ResizeBilinear": T.RESIZE, "Upsample": T.RESIZE,
    "ReduceMean": T.REDUCE_MEAN, "FullyConnected": T.FULLY_CONNECTED, "MatMul": T.FULLY_CONNECTED,
}
_CONV = {"Conv", "Conv1d", "DepthwiseConv", "ConvTranspose", "ConvTranspose2d"}
_POOL = {"Pool", "Pool1d"}


def _nchw(shape: Any) -> list[int] | None:
    """NHWC (or N,L,C / N,C) list with batch -1 -> NCHW-ordered list; None when unusable (validated before)."""
    if not isinstance(shape, list) or not shape or isinstance(shape[0], list):
        return None
    s = [1 if x == -1 else int(x) for x in shape]
    if any(x <= 0 for x in s) or len(s) < 2:
        return None
    if len(s) == 2:
        return s
    return [s[0], s[-1], *s[1:-1]]


def _hw(v: Any, default: int) -> tuple[int, int]:
    """(h, w) from an NHWC-style 4-list ``[1, h, w, 1]``, a 3-list (1-D) or 2-list."""
    if not isinstance(v, list) or not v:
        return (default, default)
    v = [int(x) for x in v]
    if len(v) >= 4:
        return (v[1], v[2])
    if len(v) == 3:
        return (v[1], 1)
    return (v[0], v[1]) if len(v) == 2 else (v[0], v[0])


def _pads(v: Any) -> tuple[int, int]:
    """Total padding per spatial axis from ANNETTE's 8-entry (begin NHWC, end NHWC) list."""
    if not isinstance(v, list) or len(v) < 8:
        return (0, 0)
    v = [int(x) for x in v]
    return (v[1] + v[5], v[2] + v[6])


# --------------------------------------------------------------------------------------------------
# validation



class _Bad(Exception):
    """A malformed field (the message says why); turned into a `ModelLoadError` naming graph and layer."""


def _integer(x: Any, what: str) -> int:
    """An integer field value (a float only when integral); NaN, infinities, bools and strings are refused."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise _Bad(f"{what} holds {x!r} ({type(x).__name__}), expected integers")
    if isinstance(x, float):
        if not math.isfinite(x) or x != int(x):
            raise _Bad(f"{what} holds {x!r}, expected integers")
        x = int(x)
    return x


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_shape(v: Any, what: str) -> None:
    """A tensor shape: absent, or a list of integers (-1: batch, 0: unknown), or a list of such lists."""
    if v is None:
        return
    if not isinstance(v, list):
        raise _Bad(f"{what} is {_show(v)} ({type(v).__name__}), expected a list of integers")
    if v and all(isinstance(x, list) for x in v):  # one shape per output
        for x in v:
            if any(isinstance(e, list) for e in x):
                raise _Bad(f"{what} is nested too deeply: {_show(v)}")
            _check_shape(x, what)
        return
    if any(isinstance(x, str) for x in v):
        raise _Bad(f"{what} {v} holds placeholders: this is a benchmark template, fill it first")
    dims = [_integer(x, what) for x in v]
    total = 1
    for d in dims:
        if d < -1:
            raise _Bad(f"{what} {_show(v)} has a negative dimension {d}")
        total *= max(d, 1)
    if total > MAX_ELEMS:
        raise _Bad(f"{what} {_show(v)} has more than 2^50 elements; no network has tensors this large")


def _check_window(v: Any, what: str, lengths: tuple[int, ...], low: int) -> None:
    """A kernel / stride / dilation / pad list: absent or empty, or ``lengths`` integers in [low, 2^24]."""
    if v is None:
        return
    if not isinstance(v, list):
        raise _Bad(f"{what} is {_show(v)} ({type(v).__name__}), expected a list of integers")
    if not v:
        return
    if any(isinstance(x, str) for x in v):
        raise _Bad(f"{what} {v} holds placeholders: this is a benchmark template, fill it first")
    if len(v) not in lengths:
        raise _Bad(f"{what} {_show(v)} has {len(v)} entries, expected " + " or ".join(map(str, lengths)))
    for x in v:
        x = _integer(x, what)
        if x < low:
            raise _Bad(f"{what} {_show(v)} holds {x}: " + ("values must be positive" if low > 0 else
                                                           "values must not be negative"))
        if x > MAX_WINDOW:
            raise _Bad(f"{what} {_show(v)} holds {x}, more than 2^24")


def _check_layer(key: str, L: Mapping[str, Any], layers: Mapping[str, Any]) -> None:
    """Every field of one layer that the conversion reads."""
    typ = L.get("type")
    if not isinstance(typ, str) or not typ:
        raise _Bad(f"'type' is {_show(typ)}, expected a layer type name such as \"Conv\"")
    for field in ("parents", "children"):
        v = L.get(field)
        if v is None:
            continue
        if not isinstance(v, list) or not all(isinstance(p, str) for p in v):
            raise _Bad(f"'{field}' is {_show(v)}, expected a list of layer names")
    for p in L.get("parents") or []:
        if p.split(":")[0] not in layers:
            raise _Bad(f"parent {p!r} is not a layer of the graph")
    _check_shape(L.get("input_shape"), "'input_shape'")
    _check_shape(L.get("output_shape"), "'output_shape'")
    conv = typ in _CONV
    _check_window(L.get("kernel_shape"), "'kernel_shape'", (2, 3, 4) if conv else (1, 2, 3, 4), 1)
    _check_window(L.get("strides"), "'strides'", (1, 2, 3, 4), 1)
    _check_window(L.get("dilations"), "'dilations'", (1, 2, 3, 4), 1)
    _check_window(L.get("pads"), "'pads'", (2, 4, 6, 8), 0)
    pool = L.get("pooling_type")
    if pool is not None and not isinstance(pool, str):
        raise _Bad(f"'pooling_type' is {_show(pool)}, expected \"MAX\" or \"AVG\"")


def _check_graph(data: Any, gname: str) -> Mapping[str, Mapping[str, Any]]:
    """The validated ``layers`` object; raises `ModelLoadError` naming the first malformed field."""
    layers = data.get("layers") if isinstance(data, Mapping) else None
    if not isinstance(layers, Mapping) or not layers:
        raise ModelLoadError(f"{gname}: not an ANNETTE graph (no 'layers' object)")
    name = data.get("name")
    if name is not None and not isinstance(name, str):
        raise ModelLoadError(f"{gname}: 'name' is {_show(name)}, expected a string")
    for k, v in layers.items():
        if not isinstance(k, str):
            raise ModelLoadError(f"{gname}: layer name {k!r} is not a string")
        if not isinstance(v, Mapping) or "type" not in v:
            raise ModelLoadError(f"{gname}: layer {k!r} has no 'type'")
        try:
            _check_layer(k, v, layers)
        except _Bad as e:
            raise ModelLoadError(f"{gname}: layer {k!r}: {e}") from None
    return layers


def _topo_order(layers: Mapping[str, Mapping[str, Any]], gname: str) -> list[str]:
    """Kahn's order over ``parents`` (validated to name layers); a cycle is a `ModelLoadError`."""
    keys = list(layers)
    index = {k: i for i, k in enumerate(keys)}
    parents = [[index[p.split(":")[0]] for p in (v.get("parents") or []) if p.split(":")[0] in index]
               for v in layers.values()]
    order = topological_order(parents)
    if len(order) != len(keys):
        stuck = sorted(set(keys) - {keys[i] for i in order})[:5]
        raise ModelLoadError(f"{gname}: graph has a cycle through layers {stuck}")
    return [keys[i] for i in order]


def from_annette_json(source: str | os.PathLike | Mapping[str, Any], name: str | None = None) -> Network:
    """Read an ANNETTE graph (path or already-parsed dict) into a `Network`.

    Raises `ModelLoadError` for a missing or unreadable file and for any malformed field (see the module
    docstring); nothing else for bad input.
    """
    if isinstance(source, Mapping):
        data: Any = source
        default_name = data.get("name")
        default_name = default_name if isinstance(default_name, str) and default_name else "graph"
    else:
        path = os.fspath(source)
        try:
            data = read_json_file(path, ModelLoadError)
        except RecursionError:
            raise ModelLoadError(f"{path}: JSON nested too deeply to be an ANNETTE graph") from None
        default_name = os.path.splitext(os.path.basename(path))[0]
    layers = _check_graph(data, name or default_name)

    b = NetworkBuilder(name or data.get("name") or default_name)
    unknown: set[str] = set()
    notes: list[str] = []
    for key in _topo_order(layers, b.name):
        L = layers[key]
        try:
            _add_layer(b, key, L, layers, unknown, notes)
        except IRError as e:
            raise ModelLoadError(f"{b.name}: layer {key!r}: {e}") from None
    if unknown:
        log.warning("%s: unsupported layer types estimated from tensor sizes only: %s", b.name,
                    ", ".join(sorted(unknown)))
    for n in notes:
        log.info("%s: %s", b.name, n)
    return b.build()


def _add_layer(b: NetworkBuilder, key: str, L: Mapping[str, Any], layers: Mapping[str, Any],
               unknown: set[str], notes: list[str]) -> None:
    typ = str(L["type"])
    inputs = [b.index(p.split(":")[0]) for p in (L.get("parents") or []) if p.split(":")[0] in layers]
    out = _nchw(L.get("output_shape"))
    ins = _nchw(L.get("input_shape"))
    if ins is None and inputs:
        ins = list(b.out_shape(inputs[0]))
    if out is None:
        if ins is None:
            if typ in ("DataInput", "Input"):
                raise IRError("input layer without a usable output_shape")
            notes.append(f"{key}: no usable shapes; treated as a 1-element tensor")
            out = ins = [1, 1]
        else:
            notes.append(f"{key}: output_shape {L.get('output_shape')} unusable; input shape used")
            out = ins
    if typ in _CONV and ins is None and len(L.get("kernel_shape") or []) >= 3 and len(out) == 4:
        # a first convolution without input_shape: its input follows from the kernel and the strides
        sh, sw = _hw(L.get("strides"), 1)
        ins = [out[0], int(L["kernel_shape"][2]), out[2] * sh, out[3] * sw]
        notes.append(f"{key}: no input_shape; input {ins} inferred from kernel and strides")
    if ins is None:
        if typ in _CONV or typ in _POOL:
            raise IRError("no input_shape and no parent to take it from")
        ins = out
    if typ in _CONV:
        ks = [int(x) for x in (L.get("kernel_shape") or [1, 1, ins[1], out[1]])]
        kh, kw = (ks[0], ks[1]) if len(ks) >= 4 else (ks[0], 1)
        c_in, c_out = ins[1], out[1]
        if typ.startswith("ConvTranspose"):
            t, groups = T.CONV_TRANSPOSE, 1
        elif typ == "DepthwiseConv":
            t, groups = T.DEPTHWISE_CONV, c_in
        else:
            cpg = ks[2] if len(ks) >= 4 else ks[1]
            if 0 < cpg < c_in and c_in % cpg == 0:
                groups = c_in // cpg
            else:
                if cpg != c_in:
                    notes.append(f"{key}: kernel expects {cpg} input channels, input_shape says {c_in}; kernel used")
                    c_in = cpg
                    ins = [ins[0], cpg, *ins[2:]]
                groups = 1
            t = conv_type(c_in, c_out, groups)
        b.add(t, key, inputs, out, in_shape=ins, kernel=(kh, kw), stride=_hw(L.get("strides"), 1),
              padding=_pads(L.get("pads")), dilation=_hw(L.get("dilations"), 1), groups=groups)
    elif typ in _POOL:
        kh, kw = _hw(L.get("kernel_shape"), 1)
        kind = str(L.get("pooling_type", "MAX")).upper()
        spatial_in = ins[2:] if len(ins) > 2 else [1]
        spatial_out = out[2:] if len(out) > 2 else [1]
        if all(x == 1 for x in spatial_out) and (kh * kw >= _prod(spatial_in) or kh * kw == 1):
            b.add(T.GLOBAL_POOL, key, inputs, out, in_shape=ins, kernel=tuple(spatial_in + [1])[:2],
                  pool=kind.lower())
        else:
            b.add(T.MAX_POOL if kind == "MAX" else T.AVG_POOL, key, inputs, out, in_shape=ins, kernel=(kh, kw),
                  stride=_hw(L.get("strides"), 1), padding=_pads(L.get("pads")), pool=kind.lower())
    elif typ in ("FullyConnected", "MatMul"):
        b.add(T.FULLY_CONNECTED, key, inputs, [out[0], _prod(out[1:])], in_shape=[ins[0], _prod(ins[1:])])
    elif typ == "Concat" and len(inputs) > 1 and len(out) == 4:
        # the output of a channel concatenation follows from its inputs (some graphs store it wrongly)
        shapes = [b.out_shape(i) for i in inputs]
        if all(s[2:] == tuple(out[2:]) for s in shapes) and sum(s[1] for s in shapes) != out[1]:
            notes.append(f"{key}: output channels {out[1]} do not add up from the inputs; "
                         f"{sum(s[1] for s in shapes)} used")
            out = [out[0], sum(s[1] for s in shapes), *out[2:]]
        b.add(T.CONCAT, key, inputs, out, in_shape=ins)
    elif typ in _SIMPLE:
        kw = {"mode": "bilinear"} if typ == "ResizeBilinear" else {}  # (TF's op names say the interpolation)
        b.add(_SIMPLE[typ], key, inputs, out, in_shape=ins, **kw)
    else:
        unknown.add(typ)
        b.add(T.UNKNOWN, key, inputs, out, in_shape=ins, op=typ)


def _prod(v: list[int]) -> int:
    r = 1
    for x in v:
        r *= int(x)
    return r
