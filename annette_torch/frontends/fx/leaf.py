"""Layers of one fx node without a rule, recovered from the ONNX export of that call alone.

A function torch.fx leaves as a leaf (``torch.fx.wrap``: torchvision's shifted-window attention, stochastic
depth), a library module fx does not trace into, or a method with no rule would otherwise be one ``Unknown``
layer, or fail the whole network. Instead the call is wrapped in a small module, exported on zeros at the
node's own shapes (parameters and other constants as zeros too: shapes, not values, decide the layers), read
by the ONNX front end, and its layers are spliced into the network in place of the node. Calls with the same
target and shapes are exported once per process.
"""

from __future__ import annotations

import io
import logging
import warnings
from typing import Any

import numpy as np
import torch
import torch.nn as nn
from torch.fx import Node

from ...ir import INT_COLUMNS, LayerType, Network
from .values import _first_line, _quiet_stdout, _TV

log = logging.getLogger(__package__)

#: Calls whose tensors hold more elements than this are not exported (the export runs the call on zeros).
MAX_ELEMS = 1 << 26
#: (target, argument structure) -> the call's network, its output shapes and their dtypes (None: float32) (None:
#: it cannot be exported)
_CACHE: dict[Any, tuple[Network, list[tuple[int, ...]], list[Any]] | None] = {}


class _Call(nn.Module):
    """Calls ``fn`` with the node's arguments, activation tensors taken from ``forward``'s inputs and the
    constant tensors from zero buffers of their shapes."""

    def __init__(self, fn: Any, args: Any, kwargs: dict, method: str | None) -> None:
        super().__init__()
        self.fn, self.method = fn, method
        self.template, self.n_inputs, consts = _template((args, kwargs), [0], [])
        for i, shape in enumerate(consts):
            self.register_buffer(f"c{i}", torch.zeros(shape))
        self.outputs: list[tuple[int, ...]] = []
        self.dtypes: list[Any] = []  # (a comparison's bool output must stay bool for the call reading it)

    def forward(self, *xs: torch.Tensor) -> Any:
        args, kwargs = _fill(self.template, xs, self)
        res = getattr(args[0], self.method)(*args[1:], **kwargs) if self.method else self.fn(*args, **kwargs)
        tensors = [t for t in (res if isinstance(res, (tuple, list)) else (res,)) if isinstance(t, torch.Tensor)]
        self.outputs = [tuple(t.shape) for t in tensors]
        self.dtypes = [None if t.dtype == torch.float32 else t.dtype for t in tensors]
        return res


def _template(a: Any, counter: list[int], consts: list[tuple[int, ...]]) -> tuple[Any, int, list]:
    """``a`` with each activation tensor replaced by ("in", i) and each constant tensor by ("const", j)."""
    def walk(x: Any) -> Any:
        if type(x) is _TV:
            if x.layer >= 0:
                counter[0] += 1
                return ("__in__", counter[0] - 1)
            consts.append(tuple(x.shape))
            return ("__const__", len(consts) - 1)
        if isinstance(x, (tuple, list)):
            return type(x)(walk(v) for v in x) if type(x) in (tuple, list) else tuple(walk(v) for v in x)
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        return x
    out = walk(a)
    return out, counter[0], consts


def _fill(template: Any, xs: tuple, module: nn.Module) -> Any:
    def walk(x: Any) -> Any:
        if isinstance(x, tuple) and len(x) == 2 and x[0] in ("__in__", "__const__") and isinstance(x[1], int):
            return xs[x[1]] if x[0] == "__in__" else getattr(module, f"c{x[1]}")
        if isinstance(x, (tuple, list)):
            return type(x)(walk(v) for v in x)
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        return x
    return walk(template)


def _key(node: Node, fn: Any, args: Any, kwargs: dict) -> Any:
    """What the exported layers depend on: the call's target and its arguments, tensors by shape."""
    def walk(x: Any) -> Any:
        if type(x) is _TV:
            return ("T", x.layer >= 0, tuple(x.shape), x.dtype)
        if isinstance(x, (tuple, list)):
            return tuple(walk(v) for v in x)
        if isinstance(x, dict):
            return tuple(sorted((k, walk(v)) for k, v in x.items()))
        return x if isinstance(x, (int, float, str, bool, type(None))) else repr(x)
    target = type(fn) if isinstance(fn, nn.Module) else node.target
    return (node.op, target, id(fn) if isinstance(fn, nn.Module) else None, walk(args), walk(kwargs))


def recover(walker: Any, node: Node, fn: Any, args: tuple, kwargs: dict, partial: bool = False) -> Any | None:
    """The node's output value with its layers spliced into ``walker``'s network, or None when the call cannot
    be exported (or has several tensor outputs, or is too large), or when its export reads as ``Unknown``
    layers too unless ``partial``: the caller then keeps one ``Unknown`` layer (or fails)."""
    ins = [v for v in _tvs((args, kwargs)) if v.layer >= 0]
    if not ins or sum(int(np.prod(v.shape)) for v in _tvs((args, kwargs))) > MAX_ELEMS:
        return None
    try:
        key = _key(node, fn, args, kwargs)
        hash(key)
    except TypeError:
        key = None
    hit = _CACHE.get(key) if key is not None else None
    if hit is None and (key is None or key not in _CACHE):
        hit = _export(node, fn, args, kwargs, ins)
        if key is not None:
            _CACHE[key] = hit
    if hit is None:
        return None
    net, outputs, dtypes = hit
    if len(outputs) != 1 or (not partial and LayerType.UNKNOWN in net.types):
        return None
    layer = _splice(walker, net, [v.layer for v in ins])
    return None if layer is None else _TV(layer, outputs[0], dtypes[0])


def _tvs(a: Any) -> list[_TV]:
    if type(a) is _TV:
        return [a]
    if isinstance(a, (tuple, list)):
        return [t for v in a for t in _tvs(v)]
    if isinstance(a, dict):
        return [t for v in a.values() for t in _tvs(v)]
    return []


def _export(node: Node, fn: Any, args: tuple, kwargs: dict, ins: list[_TV]
            ) -> tuple[Network, list[tuple[int, ...]], list[Any]] | None:
    """Export the call on zeros and read it (None when either fails)."""
    import onnx

    from ..onnx import from_onnx
    method = node.target if node.op == "call_method" else None
    call = _Call(fn, args, kwargs, method).eval()
    buf = io.BytesIO()
    quiet = logging.getLogger("annette_torch.frontends.onnx")  # (the caller reports what stays Unknown)
    level = quiet.level
    try:
        with torch.no_grad(), warnings.catch_warnings(), _quiet_stdout():
            warnings.simplefilter("ignore")
            torch.onnx.export(call, tuple(torch.zeros(v.shape, dtype=v.dtype or torch.float32) for v in ins), buf,
                              dynamo=False, opset_version=17)
        quiet.setLevel(logging.ERROR)
        net = from_onnx(onnx.load_from_string(buf.getvalue()), name=node.name)
    except Exception as e:  # noqa: BLE001 - the call stays one Unknown layer
        log.debug("node %s: its ONNX export failed (%s: %s)", node.name, type(e).__name__, _first_line(e))
        return None
    finally:
        quiet.setLevel(level)
    return net, call.outputs, call.dtypes


def _splice(walker: Any, net: Network, inputs: list[int]) -> int | None:
    """Add ``net``'s layers to the walker's network, its graph inputs read from ``inputs``; returns the layer
    that writes its output (None: the export's output is not one layer)."""
    graph_inputs = np.flatnonzero((net.types == LayerType.INPUT) & (net.n_inputs == 0)).tolist()
    if len(graph_inputs) != len(inputs):
        return None
    sinks = np.flatnonzero(net.n_outputs == 0).tolist()
    if len(sinks) != 1:
        return None
    at = dict(zip(graph_inputs, inputs))
    parents: dict[int, list[int]] = {}
    for s, d in net.edges.tolist():
        parents.setdefault(d, []).append(s)
    b, base = walker.b, walker.name
    ops = net.attrs.get("op")
    dims = net.attrs.get("dims")
    for i in range(len(net)):
        if i in at:
            continue
        c = {k: int(net.cols[k][i]) for k in INT_COLUMNS}
        kw: dict[str, Any] = {}
        if walker.module is not None:
            kw["module"] = walker.module
        elif walker.scope is not None:
            kw["scope"] = walker.scope
        if ops is not None and net.types[i] == LayerType.UNKNOWN:
            kw["op"] = ops[i]
            walker.unknown[str(ops[i])] = walker.unknown.get(str(ops[i]), 0) + 1
        if dims is not None and dims[i] is not None:
            kw["dims"] = dims[i]
        at[i] = b.add(LayerType(int(net.types[i])), f"{base}.{net.names[i]}", [at[p] for p in parents.get(i, [])],
                      (c["n"], c["c_out"], c["h_out"], c["w_out"]), in_shape=(c["n"], c["c_in"], c["h_in"], c["w_in"]),
                      kernel=(c["kh"], c["kw"]), stride=(c["sh"], c["sw"]), padding=(c["ph"], c["pw"]),
                      dilation=(c["dh"], c["dw"]), groups=c["groups"], slow=c["slow"], **kw)
    return at[sinks[0]]
