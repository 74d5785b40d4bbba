"""Interpreter of the original ANNETTE benchmark graph templates: fill placeholders from a config, compute the
shapes layer by layer (SAME or VALID padding) and convert the filled graph to a `Network`."""

from __future__ import annotations

import ast
import copy
import json
import math
import operator
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ...ir import Network
from .base import SuiteError, config_id, plain_value
from .reference import resolve_reference

__all__ = ["from_annette_template"]


#: arithmetic a placeholder expression may use (``/`` divides as integers)
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Div: operator.floordiv}


def _fill_value(v: Any, config: Mapping[str, Any]) -> Any:
    """A template value with placeholders replaced: ``"channels"`` -> config value, ``"2*channels"`` -> evaluated."""
    if isinstance(v, list):
        return [_fill_value(x, config) for x in v]
    if isinstance(v, dict):
        return {k: _fill_value(x, config) for k, x in v.items()}
    if not isinstance(v, str):
        return v
    if v in config:
        return plain_value(config[v])
    try:
        tree = ast.parse(v, mode="eval").body
    except SyntaxError:
        return v
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    if not names or not names <= set(config):
        return v

    def ev(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            return config[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(v)

    try:
        return int(ev(tree))
    except (ValueError, TypeError, ZeroDivisionError):
        return v


def _spatial(v: Any, rank: int, default: int) -> list[int]:
    """Per-spatial-axis values from an NHWC-style list ``[1, a, b, 1]`` / ``[1, a, 1]``."""
    n_sp = rank - 2
    if isinstance(v, list) and len(v) == rank:
        vals = v[1:-1]
    elif isinstance(v, list) and len(v) == n_sp:
        vals = v
    else:
        vals = [default] * n_sp
    return [int(x) if isinstance(x, (int, np.integer)) else default for x in vals]


def _window_out(size: int, k: int, s: int, d: int, padding: str) -> tuple[int, int]:
    """(output size, total padding) of a sliding window under SAME or VALID padding."""
    eff = d * (k - 1) + 1
    if padding == "same":
        out = -(-size // s)
        return out, max((out - 1) * s + eff - size, 0)
    out = (size - eff) // s + 1
    if out < 1:
        raise SuiteError(f"kernel {k} (dilation {d}) does not fit size {size} with VALID padding")
    return out, 0


def _pads8(totals: list[int]) -> list[int]:
    """ANNETTE's 8-entry pads (NHWC begins, NHWC ends) from total padding per spatial axis (1 or 2 axes)."""
    t = list(totals) + [0] * (2 - len(totals))
    b = [x // 2 for x in t]
    e = [x - x // 2 for x in t]
    return [0, b[0], b[1], 0, 0, e[0], e[1], 0]


#: Placeholder values used when the config does not give them (paper35k.csv has no stride/dilation columns).
_TEMPLATE_DEFAULTS = {"batch_size": 1, "stride": 1, "dilation": 1}


def from_annette_template(path: str | os.PathLike, config: Mapping[str, Any], padding: str = "same",
                          name: str | None = None) -> Network:
    """Fill an original ANNETTE benchmark template with ``config`` and convert it to a `Network`.

    ``path`` is a template file or a template name of the reference data (``"conv2d"``, ``"dw-conv2d"``,
    ``"annette_convnet"``...). Every string value equal to a config key (``"channels"``, ``"k_size"``,
    ``"width"``, ``"height"``, ``"filters"``, ``"stride"``, ``"batch_size"``, ``"dilation"``) or an arithmetic
    expression of config keys (``"2*channels"``) is replaced; ``batch_size``, ``stride`` and ``dilation``
    default to 1. The templates leave the other shapes at -1;
    they are computed layer by layer: convolutions and pools with ``padding="same"`` (output
    ``ceil(size / stride)``, the padding TensorFlow's SAME adds, split begin = total // 2) as the original
    ANNETTE generator built them — the templates' all-zero ``pads`` were never used, and the multi-layer
    template's three parallel convolutions with kernels kxk, 1xk and kx1 only add up with SAME — or
    ``"valid"``; a pool kernel of -1 is a global pool; ``FullyConnected``/``MatMul`` flatten their input;
    ``Concat`` adds channels; other layers keep their input's shape. Shapes given by the template that
    contradict this are replaced.

    The templates list the input as ``[batch_size, width, height, channels]`` in NHWC positions, so the
    network's H (NCHW index 2) is the config's ``width`` and W is ``height`` — as in the original generator's
    TensorFlow placeholder. Raises `SuiteError` for a missing file, a placeholder the config does not fill,
    or a shape that cannot be computed.
    """
    if padding not in ("same", "valid"):
        raise SuiteError(f"padding must be 'same' or 'valid', got {padding!r}")
    p = resolve_reference(path, "graphs/templates", ".json")
    try:
        with open(p, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SuiteError(f"cannot read template {p}: {e}") from None
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, dict) or not layers:
        raise SuiteError(f"{p}: not an ANNETTE graph template (no 'layers' object)")
    config = {**_TEMPLATE_DEFAULTS, **config}
    filled = {k: _fill_value(copy.deepcopy(v), config) for k, v in layers.items()}
    order = _template_order(filled, p)
    out_shapes: dict[str, list[int]] = {}
    for key in order:
        try:
            out_shapes[key] = _template_layer(filled[key], out_shapes, padding)
        except SuiteError as e:
            raise SuiteError(f"template {p.name}, layer {key!r}: {e}") from None
    from ...frontends.annette_json import from_annette_json

    net_name = name or f"{data.get('name') or p.stem}-{config_id(config)}"
    return from_annette_json({"name": net_name, "layers": filled}, name=net_name)


def _template_order(layers: dict, p: Path) -> list[str]:
    """Layer keys parents first (depth-first); `SuiteError` on a cycle."""
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(k: str, stack: tuple) -> None:
        if state.get(k) == 2:
            return
        if state.get(k) == 1:
            raise SuiteError(f"template {p.name}: cycle through {k!r}")
        state[k] = 1
        for par in layers[k].get("parents") or []:
            par = str(par).split(":")[0]
            if par in layers:
                visit(par, stack + (k,))
        state[k] = 2
        order.append(k)

    for k in layers:
        visit(k, ())
    return order


def _ints(shape: Any, what: str) -> list[int]:
    """A filled shape as ints; `SuiteError` when it is no list or a placeholder is left."""
    if not isinstance(shape, list) or not shape:
        raise SuiteError(f"{what} {shape!r} is not a shape")
    bad = [x for x in shape if isinstance(x, str)]
    if bad:
        raise SuiteError(f"placeholder(s) {bad} in {what} are not in the config")
    return [int(x) for x in shape]


def _template_layer(L: dict, out_shapes: dict, padding: str) -> list[int]:
    """Compute (and write into ``L``) the NHWC input/output shapes and pads of one template layer."""
    typ = str(L.get("type"))
    if typ in ("DataInput", "Input"):
        shp = _ints(L.get("output_shape"), "input shape")
        if any(x <= 0 for x in shp[1:]):
            raise SuiteError(f"input shape {shp} has unfilled (-1) dimensions")
        L["output_shape"] = shp
        return shp
    parents = [str(q).split(":")[0] for q in (L.get("parents") or []) if str(q).split(":")[0] in out_shapes]
    if not parents:
        raise SuiteError("no parent to take the input shape from")
    ins = list(out_shapes[parents[0]])
    rank = len(ins)
    n = ins[0]
    if typ in ("DepthwiseConv1d",):
        typ = L["type"] = "DepthwiseConv"
    if typ in ("Conv", "Conv1d", "DepthwiseConv", "ConvTranspose", "ConvTranspose2d", "Pool", "Pool1d"):
        if rank < 3:
            raise SuiteError(f"{typ} needs a spatial input, got shape {ins}")
        spatial = ins[1:-1]
        c_in = ins[-1]
        strides = _spatial(L.get("strides"), rank, 1)
        dil = _spatial(L.get("dilations"), rank, 1)
        ks = L.get("kernel_shape")
        pool = typ.startswith("Pool")
        if pool:
            kern = _spatial(ks, rank, 1)
            if any(k == -1 for k in kern) or (isinstance(ks, list) and -1 in ks[1:-1]):  # global pool
                L["kernel_shape"] = [1, *spatial, 1] if rank == 4 else [1, spatial[0], 1]
                L["strides"] = [1] * rank
                L["pads"] = _pads8([0] * len(spatial))
                out = [n, *([1] * len(spatial)), c_in]
                L["input_shape"], L["output_shape"] = ins, out
                return out
            c_out = c_in
        else:
            ks = _ints(ks, "kernel_shape")
            n_sp = rank - 2
            kern = ks[:n_sp] if len(ks) >= n_sp + 2 else ks[:1] + [1] * (n_sp - 1)
            if typ == "DepthwiseConv":
                c_out = c_in if ks[-1] in (1, c_in) else ks[-1]
            else:
                c_out = ks[-1]
        out_sp, totals = [], []
        for size, k, s, d in zip(spatial, kern, strides, dil):
            if typ.startswith("ConvTranspose"):
                o = size * s if padding == "same" else (size - 1) * s + d * (k - 1) + 1
                totals.append(max((size - 1) * s + d * (k - 1) + 1 - o, 0))
                out_sp.append(o)
            else:
                o, t = _window_out(size, k, s, d, padding)
                out_sp.append(o)
                totals.append(t)
        L["pads"] = _pads8(totals)
        out = [n, *out_sp, c_out]
    elif typ in ("FullyConnected", "MatMul"):
        ins = [n, math.prod(ins[1:])]
        f = (L.get("output_shape") or [None, None])[-1]
        if isinstance(f, str) or not isinstance(f, int) or f <= 0:
            raise SuiteError(f"output features {f!r} unknown (fill 'filters')")
        out = [n, f]
    elif typ == "Flatten":
        out = [n, math.prod(ins[1:])]
    elif typ == "Concat":
        shapes = [out_shapes[q] for q in parents]
        if any(len(s) != rank or s[:-1] != ins[:-1] for s in shapes):
            raise SuiteError(f"cannot concatenate shapes {shapes} along channels")
        out = [*ins[:-1], sum(s[-1] for s in shapes)]
    else:
        out = list(ins)
    L["input_shape"], L["output_shape"] = ins, out
    return out
