"""Graph generator back ends: a layer `Network` -> ONNX model (``to_onnx``) or ``torch.nn.Module`` (``to_module``).

``to_onnx`` builds the model with ``onnx.helper`` only (no torch on the benchmark hot path). Contract with the
runners and the matcher:

* one ONNX node per IR layer; the node's name **and** its (first) output tensor name are the layer's name;
  graph inputs are named after the ``Input`` layers; graph outputs are the layers nobody consumes (``Input``
  layers excepted), in layer order;
* a few layers need helper nodes; each helper node is named ``<layer>/<role>`` and the node named
  ``<layer>`` always produces the layer's output:

  - ``FullyConnected`` is a ``Gemm`` (``transB=1``). Its input is used as it is when the producer's tensor
    is already 2-D (``[N, K]``: a graph input of shape ``(N, K, 1, 1)`` in the IR, a ``Flatten``, another
    ``Gemm``); only when the producer is 4-D a ``Flatten`` node ``<layer>/flatten`` (axis 1) is inserted;
  - ``SiLU`` is ``Mul(x, Sigmoid(x))``: nodes ``<layer>/sigmoid`` and ``<layer>``;
  - ``GELU`` is the ``Gelu`` op from opset 20; below that its Erf form ``0.5 * x * (1 + erf(x / sqrt 2))``:
    nodes ``<layer>/div``, ``<layer>/erf``, ``<layer>/add``, ``<layer>/mul`` and ``<layer>`` (the final x 0.5);
  - ``Mul``/``Sub``/``Div`` of more than two inputs chain binary nodes ``<layer>/0``, ``<layer>/1``, ...
    (``Add`` of many inputs is one ``Sum`` node);
  - a layer that needs a 4-D input but gets a 2-D tensor reshapes it first (``<layer>/reshape``).

  `node_layers(model)` maps every node name to its layer; the map is also stored in the model's metadata
  (``annette:helpers``, JSON ``{helper node: layer}``);
* weights are random float32 drawn per layer from ``numpy.random.default_rng([seed, crc32(layer name)])``
  (He-scaled normal weights, small biases; BatchNorm scale/bias/mean random, variance in [0.5, 1.5]): the
  same network, seed and layer name give the same numbers on every machine, and one layer's weights do
  not depend on the rest of the network. Initializers are named ``<layer>/W``, ``<layer>/B``, ...
* attributes come from the IR columns: kernel, stride, dilation, groups; total padding per axis split
  into ``begin = total // 2`` and ``end = total - begin``. Where the IR's padding does not reproduce its
  output size (a ceil-mode pool, an ANNETTE graph with SAME padding stored as 0), ``ceil_mode`` or the
  padding that produces the IR's output size is used (SAME_UPPER style), so ONNX shape inference always
  gives the IR's shapes.

Tensor ranks: the IR folds every tensor into NCHW. Exported tensors are 4-D, except graph inputs of shape
``(N, C, 1, 1)`` feeding no spatial layer (exported as ``[N, C]``), and the outputs of ``FullyConnected``
and ``Flatten`` (and ``Reshape`` to ``(N, C, 1, 1)``), which are 2-D like the ONNX front end reads them.

``to_module`` builds an ``nn.Module`` whose ``forward`` walks the same graph with the same weights (same
``seed``), for users who export through torch; for supported layers it computes what the ONNX model does.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import math
import zlib
from typing import Any, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..errors import AnnetteError
from ..ir import LayerType, Network, to_nchw

__all__ = ["to_onnx", "to_module", "node_layers", "ExportError", "EXPORTABLE"]

log = logging.getLogger(__name__)
T = LayerType


class ExportError(AnnetteError):
    """A network cannot be exported (unsupported layer type, inconsistent shapes, bad opset)."""


#: Layer types `to_onnx` can export.
EXPORTABLE = frozenset({
    T.INPUT, T.CONV, T.DEPTHWISE_CONV, T.GROUP_CONV, T.CONV_TRANSPOSE, T.FULLY_CONNECTED, T.MAX_POOL, T.AVG_POOL,
    T.GLOBAL_POOL, T.BATCH_NORM, T.RELU, T.RELU6, T.LEAKY_RELU, T.SIGMOID, T.SILU, T.HARDSWISH, T.HARDSIGMOID,
    T.GELU, T.TANH, T.ADD, T.MUL, T.SUB, T.DIV, T.CONCAT, T.RESHAPE, T.FLATTEN, T.TRANSPOSE, T.RESIZE, T.PAD,
    T.SOFTMAX, T.SOFTPLUS, T.CLIP, T.LRN, T.SLICE, T.DROPOUT, T.REDUCE_MEAN, T.LAYER_NORM,
})
_CONV = (T.CONV, T.DEPTHWISE_CONV, T.GROUP_CONV)
#: Layers whose ONNX op needs a 4-D (N, C, H, W) input.
_NEEDS_4D = frozenset(_CONV + (T.CONV_TRANSPOSE, T.MAX_POOL, T.AVG_POOL, T.GLOBAL_POOL, T.LRN, T.RESIZE))
_MERGE = (T.ADD, T.MUL, T.SUB, T.DIV)
_BINARY_OP = {T.ADD: "Add", T.MUL: "Mul", T.SUB: "Sub", T.DIV: "Div"}
_SIMPLE_ACT = {T.RELU: "Relu", T.SIGMOID: "Sigmoid", T.TANH: "Tanh", T.HARDSWISH: "HardSwish",
               T.SOFTPLUS: "Softplus"}
_MIN_OPSET = 13
_MAX_PROTO_BYTES = 2_000_000_000  # protobuf's 2 GB limit for one serialized model


# ------------------------------------------------------------------------------------------------------
# plan shared by both back ends: topological order, parents, ranks, window attributes


def _label(net: Network, i: int) -> str:
    return LayerType(int(net.types[i])).label


def _where(net: Network, i: int) -> str:
    return f"network {net.name!r}: layer {net.names[i]!r} ({_label(net, i)})"


class _Plan:
    """Per-layer facts both back ends need, computed once: order, parents, consumers, output ranks."""

    def __init__(self, net: Network) -> None:
        n = len(net)
        self.net = net
        self.parents: list[list[int]] = [[] for _ in range(n)]
        self.children: list[list[int]] = [[] for _ in range(n)]
        for s, d in net.edges.tolist():
            self.parents[d].append(s)
            self.children[s].append(d)
        self.order = self._topo()
        for i in range(n):
            if not net.names[i]:
                raise ExportError(f"network {net.name!r}: layer {i} has an empty name")
            t = LayerType(int(net.types[i]))
            if t not in EXPORTABLE:
                raise ExportError(f"{_where(net, i)}: layer type {t.label} cannot be exported "
                                  f"(exportable: {', '.join(sorted(x.label for x in EXPORTABLE))})")
            if t == T.INPUT and self.parents[i]:
                raise ExportError(f"{_where(net, i)}: an Input layer has producers")
            if t != T.INPUT and not self.parents[i]:
                raise ExportError(f"{_where(net, i)}: no producing layer (only Input layers may have none)")
            if t not in _MERGE and t != T.CONCAT and len(self.parents[i]) > 1:
                raise ExportError(f"{_where(net, i)}: {len(self.parents[i])} producers for a one-input layer")
        self.rank = [4] * n
        for i in self.order:
            self.rank[i] = self._rank(i)
        self.outputs = [i for i in range(n) if not self.children[i] and net.types[i] != T.INPUT]
        if not self.outputs:
            raise ExportError(f"network {net.name!r} has no layer besides its inputs")

    def _topo(self) -> list[int]:
        """Kahn's order, lowest ready index first: the IR's own order whenever that is topological."""
        n = len(self.net)
        indeg = [len(p) for p in self.parents]
        ready = [i for i in range(n) if indeg[i] == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for c in self.children[i]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    heapq.heappush(ready, c)
        if len(order) != n:
            stuck = [self.net.names[i] for i in range(n) if indeg[i] > 0][:5]
            raise ExportError(f"network {self.net.name!r} has a cycle through layers {stuck}")
        return order

    def _rank(self, i: int) -> int:
        net = self.net
        t = LayerType(int(net.types[i]))
        full = net.attr("shape", i)
        if full is not None:
            return len(full)
        if t not in (T.RESHAPE, T.TRANSPOSE, T.FLATTEN) and any(self.rank[p] > 4 for p in self.parents[i]):
            raise ExportError(f"{_where(net, i)}: a {t.label} layer cannot read a tensor of more than 4 "
                              "dimensions (only Reshape, Flatten and Transpose can)")
        flat_out = int(net.h_out[i]) == 1 and int(net.w_out[i]) == 1
        if t == T.INPUT:
            spatial_use = any(net.types[c] in _NEEDS_4D for c in self.children[i])
            return 2 if flat_out and not spatial_use else 4
        if t in (T.FULLY_CONNECTED, T.FLATTEN):
            return 2
        if t == T.RESHAPE:
            return 2 if flat_out else 4
        if t in _NEEDS_4D:
            return 4
        r = max(self.rank[p] for p in self.parents[i])
        return r if flat_out else 4

    def source_shape(self, i: int) -> tuple[int, ...]:
        """Shape of layer ``i``'s first input as the layer reads it: the producer's full shape above rank 4,
        else 4-D for a 4-D layer (a 2-D producer is viewed as (N, C, 1, 1)) and 2-D for a 2-D one."""
        p = self.parents[i][0]
        if self.rank[p] > 4:
            return self.shape(p)
        s = self.net.out_shape(p)
        return s if self.rank[i] == 4 else s[:2]

    def shape(self, i: int) -> tuple[int, ...]:
        """Exported output tensor shape of layer ``i`` (rank 2 or 4; a Reshape / Transpose to 5-D keeps its
        full shape, as in ShuffleNet's channel shuffle)."""
        full = self.net.attr("shape", i)
        if full is not None:
            return tuple(full)
        s = self.net.out_shape(i)
        return s[:2] if self.rank[i] == 2 else s


def _window(where: str, size_in: int, size_out: int, k: int, s: int, d: int, total: int, ceil: bool,
            refit: bool) -> int:
    """Total padding making a sliding window (floor or ``ceil`` mode) produce ``size_out`` from ``size_in``.

    The IR's padding ``total`` when it fits; with ``refit`` the smallest padding that fits (SAME-like), up to
    ``2 * (effective kernel - 1)`` (more would only add windows of zeros). Raises `ExportError` otherwise.
    """
    eff = d * (k - 1) + 1
    s = max(s, 1)

    def out(t: int) -> int:
        num = size_in + t - eff
        return (-(-num // s) if ceil else num // s) + 1

    if out(total) == size_out:
        return total
    if refit:
        for t in range(0, 2 * (eff - 1) + 1):
            if out(t) == size_out:
                log.debug("%s: padding %d does not give output size %d from %d; using %d", where, total,
                          size_out, size_in, t)
                return t
    raise ExportError(f"{where}: kernel {k}, stride {s}, dilation {d} cannot turn size {size_in} into "
                      f"{size_out} (padding {total} gives {out(total)})")


def _split(total: int) -> tuple[int, int]:
    return total // 2, total - total // 2


def _window_attrs(net: Network, i: int, allow_ceil: bool = False) -> dict[str, Any]:
    """kernel / strides / pads (ONNX order: begins then ends) / dilations / ceil of a window layer."""
    where = _where(net, i)
    k = (int(net.kh[i]), int(net.kw[i]))
    s = (max(int(net.sh[i]), 1), max(int(net.sw[i]), 1))
    d = (max(int(net.dh[i]), 1), max(int(net.dw[i]), 1))
    if min(k) < 1:
        raise ExportError(f"{where}: kernel {list(k)} is not positive")
    axes = ((int(net.h_in[i]), int(net.h_out[i]), k[0], s[0], d[0], int(net.ph[i])),
            (int(net.w_in[i]), int(net.w_out[i]), k[1], s[1], d[1], int(net.pw[i])))
    # one ceil flag serves both axes; preference: the IR's padding (floor, then ceil mode), then refitted
    attempts = [(False, False), (True, False), (False, True), (True, True)]
    last: ExportError | None = None
    for ceil, refit in attempts:
        if ceil and not allow_ceil:
            continue
        try:
            th, tw = (_window(where, *ax, ceil=ceil, refit=refit) for ax in axes)
            break
        except ExportError as e:
            last = e
    else:
        assert last is not None
        raise last
    (hb, he), (wb, we) = _split(th), _split(tw)
    return dict(kernel=k, strides=s, dilations=d, pads=(hb, wb, he, we), ceil=bool(ceil))


# ------------------------------------------------------------------------------------------------------
# deterministic weights, shared by to_onnx and to_module


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(name.encode("utf-8"))])


def _normal(rng: np.random.Generator, shape: Sequence[int], std: float) -> np.ndarray:
    return (rng.standard_normal(tuple(int(s) for s in shape), dtype=np.float32) * np.float32(std))


def _params(net: Network, plan: _Plan, i: int, seed: int) -> dict[str, np.ndarray]:
    """The constant tensors of layer ``i`` (weights, biases, shape operands), by role."""
    t = LayerType(int(net.types[i]))
    name = net.names[i]
    c_in, c_out = int(net.c_in[i]), int(net.c_out[i])
    if t in _CONV or t == T.CONV_TRANSPOSE:
        g = max(int(net.groups[i]), 1)
        if c_in % g or c_out % g:
            raise ExportError(f"{_where(net, i)}: {c_in} input and {c_out} output channels do not split into "
                              f"{g} groups")
        kh, kw = int(net.kh[i]), int(net.kw[i])
        rng = _rng(seed, name)
        if t == T.CONV_TRANSPOSE:
            w = _normal(rng, (c_in, c_out // g, kh, kw), math.sqrt(2.0 / max(c_in // g * kh * kw, 1)))
        else:
            w = _normal(rng, (c_out, c_in // g, kh, kw), math.sqrt(2.0 / max(c_in // g * kh * kw, 1)))
        return {"W": w, "B": _normal(rng, (c_out,), 0.01)}
    if t == T.FULLY_CONNECTED:
        rng = _rng(seed, name)
        return {"W": _normal(rng, (c_out, c_in), math.sqrt(2.0 / max(c_in, 1))), "B": _normal(rng, (c_out,), 0.01)}
    if t == T.BATCH_NORM:
        rng = _rng(seed, name)
        c = int(net.c_out[i])
        return {"scale": rng.uniform(0.5, 1.5, c).astype(np.float32), "bias": _normal(rng, (c,), 0.1),
                "mean": _normal(rng, (c,), 0.1), "var": rng.uniform(0.5, 1.5, c).astype(np.float32)}
    if t == T.LAYER_NORM:
        rng = _rng(seed, name)
        last = plan.shape(i)[-1]
        return {"scale": rng.uniform(0.5, 1.5, last).astype(np.float32), "bias": _normal(rng, (last,), 0.1)}
    if t in _MERGE and len(plan.parents[i]) == 1:
        # x (op) constant: a per-channel constant, away from zero (safe for Div)
        rng = _rng(seed, name)
        shape = (1, c_out) if plan.rank[i] == 2 else (1, c_out, 1, 1)
        return {"C": rng.uniform(0.5, 1.5, shape).astype(np.float32)}
    return {}


def _check_size(net: Network, plan: _Plan) -> None:
    total = 0.0
    for i in range(len(net)):
        t = net.types[i]
        if t in _CONV or t in (T.CONV_TRANSPOSE, T.FULLY_CONNECTED):
            total += float(net.weights[i]) + float(net.c_out[i])
    if total * 4 > _MAX_PROTO_BYTES:
        raise ExportError(f"network {net.name!r}: {total * 4 / 1e9:.1f} GB of weights exceed the 2 GB limit of "
                          "one ONNX protobuf")


# ------------------------------------------------------------------------------------------------------
# ONNX


def to_onnx(net: Network, opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """Export ``net`` as an ONNX model with random weights (see the module docstring for the naming contract).

    ``opset`` may be 13 up to the installed onnx package's newest (``LayerNorm`` needs 17, ``GELU`` uses the
    ``Gelu`` op from 20 on). The model's IR version is the lowest that supports ``opset``, so older runtimes
    load it. Raises `ExportError` (an `AnnetteError`) naming the layer for an unsupported layer type or
    inconsistent shapes.
    """
    newest = onnx.defs.onnx_opset_version()
    if not isinstance(opset, (int, np.integer)) or not _MIN_OPSET <= int(opset) <= newest:
        raise ExportError(f"opset must be an integer from {_MIN_OPSET} to {newest}, got {opset!r}")
    opset = int(opset)
    plan = _Plan(net)
    _check_size(net, plan)
    ex = _OnnxExporter(net, plan, opset, seed)
    for i in plan.order:
        ex.layer(i)
    graph = helper.make_graph(
        ex.nodes, net.name,
        inputs=[_value_info(net.names[i], plan.shape(i)) for i in plan.order if net.types[i] == T.INPUT],
        outputs=[_value_info(net.names[i], plan.shape(i)) for i in plan.outputs],
        initializer=ex.inits)
    _check_names([*(t.name for t in ex.inits), *(o for n in ex.nodes for o in n.output),
                  *(net.names[i] for i in plan.order if net.types[i] == T.INPUT)], net)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="annette-torch", producer_version=_version())
    model.ir_version = helper.OP_SET_ID_VERSION_MAP.get(("ai.onnx", opset), onnx.IR_VERSION)
    helper.set_model_props(model, {"annette:network": net.name, "annette:seed": str(seed),
                                   "annette:helpers": json.dumps(ex.helpers, sort_keys=True)})
    return model


def _check_names(names: list[str], net: Network) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ExportError(f"network {net.name!r}: tensor name {n!r} is used twice (a layer name clashes with "
                              "another layer or with a helper/weight name such as '<layer>/W'); rename the layer")
        seen.add(n)


def node_layers(model: onnx.ModelProto) -> dict[str, str]:
    """Map every node name of a `to_onnx` model to the IR layer it belongs to (helper nodes included)."""
    props = {p.key: p.value for p in model.metadata_props}
    helpers = json.loads(props.get("annette:helpers", "{}"))
    return {n.name: helpers.get(n.name, n.name) for n in model.graph.node}


def _version() -> str:
    try:
        from .. import __version__
        return __version__
    except ImportError:  # pragma: no cover
        return ""


def _value_info(name: str, shape: Sequence[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [int(s) for s in shape])


class _OnnxExporter:
    def __init__(self, net: Network, plan: _Plan, opset: int, seed: int) -> None:
        self.net, self.plan, self.opset, self.seed = net, plan, opset, seed
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[TensorProto] = []
        self.helpers: dict[str, str] = {}
        self.layer_name = ""

    # -- helpers ------------------------------------------------------------------------------------
    def node(self, op: str, inputs: Sequence[str], role: str | None = None, **attrs: Any) -> str:
        """Add a node; the layer's own node when ``role`` is None, else helper ``<layer>/<role>``."""
        name = self.layer_name if role is None else f"{self.layer_name}/{role}"
        if role is not None:
            self.helpers[name] = self.layer_name
        self.nodes.append(helper.make_node(op, list(inputs), [name], name=name, **attrs))
        return name

    def const(self, role: str, value: np.ndarray) -> str:
        name = f"{self.layer_name}/{role}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def input4d(self, i: int, p: int, role: str = "reshape") -> str:
        """Producer ``p``'s tensor as seen by layer ``i``, reshaped to 4-D when it is 2-D."""
        src = self.net.names[p]
        if self.plan.rank[p] == 4:
            return src
        shape = self.net.out_shape(p)
        return self.node("Reshape", [src, self.const(f"{role}_shape", np.array(shape, np.int64))], role)

    # -- per layer ----------------------------------------------------------------------------------
    def layer(self, i: int) -> None:
        net, plan = self.net, self.plan
        t = LayerType(int(net.types[i]))
        if t == T.INPUT:
            return
        self.layer_name = net.names[i]
        ps = plan.parents[i]
        x = net.names[ps[0]]
        if plan.rank[i] == 4 and t not in _MERGE and t not in (T.CONCAT, T.RESHAPE):
            x = self.input4d(i, ps[0])
        src = plan.source_shape(i)
        dst = plan.shape(i)
        params = _params(net, plan, i, self.seed)
        if t in _CONV:
            a = _window_attrs(net, i)
            self.node("Conv", [x, self.const("W", params["W"]), self.const("B", params["B"])],
                      kernel_shape=list(a["kernel"]), strides=list(a["strides"]), pads=list(a["pads"]),
                      dilations=list(a["dilations"]), group=max(int(net.groups[i]), 1))
        elif t == T.CONV_TRANSPOSE:
            kw = _conv_transpose_attrs(net, i)
            self.node("ConvTranspose", [x, self.const("W", params["W"]), self.const("B", params["B"])], **kw)
        elif t in (T.MAX_POOL, T.AVG_POOL):
            a = _window_attrs(net, i, allow_ceil=True)
            kw = dict(kernel_shape=list(a["kernel"]), strides=list(a["strides"]), pads=list(a["pads"]))
            if a["ceil"]:
                kw["ceil_mode"] = 1
            if a["dilations"] != (1, 1):
                if t == T.AVG_POOL and self.opset < 19:
                    raise ExportError(f"{_where(net, i)}: a dilated AveragePool needs opset 19 or newer")
                kw["dilations"] = list(a["dilations"])
            self.node("MaxPool" if t == T.MAX_POOL else "AveragePool", [x], **kw)
        elif t == T.GLOBAL_POOL:
            kind = str(net.attr("pool", i) or "avg")
            self.node("GlobalMaxPool" if kind == "max" else "GlobalAveragePool", [x])
        elif t == T.FULLY_CONNECTED:
            self.fully_connected(i, ps[0])
        elif t == T.BATCH_NORM:
            self.node("BatchNormalization", [x] + [self.const(k, params[k]) for k in ("scale", "bias", "mean", "var")],
                      epsilon=1e-5)
        elif t == T.HARDSIGMOID:  # torch's definition relu6(x + 3) / 6 (ONNX's default alpha is 0.2)
            self.node("HardSigmoid", [x], alpha=1.0 / 6.0, beta=0.5)
        elif t in _SIMPLE_ACT:
            self.node(_SIMPLE_ACT[t], [x])
        elif t == T.RELU6:
            self.node("Clip", [x, self.const("min", np.array(0.0, np.float32)),
                               self.const("max", np.array(6.0, np.float32))])
        elif t == T.CLIP:
            lo, hi = net.attr("clip_min", i), net.attr("clip_max", i)
            ins = [x, "" if lo is None else self.const("min", np.array(lo, np.float32)),
                   "" if hi is None else self.const("max", np.array(hi, np.float32))]
            while ins[-1] == "":
                ins.pop()
            self.node("Clip", ins)
        elif t == T.LEAKY_RELU:
            self.node("LeakyRelu", [x], alpha=float(net.attr("alpha", i) or 0.01))
        elif t == T.SILU:
            sig = self.node("Sigmoid", [x], "sigmoid")
            self.node("Mul", [x, sig])
        elif t == T.GELU:
            if self.opset >= 20:
                self.node("Gelu", [x])
            else:
                d = self.node("Div", [x, self.const("sqrt2", np.array(math.sqrt(2.0), np.float32))], "div")
                e = self.node("Erf", [d], "erf")
                a = self.node("Add", [e, self.const("one", np.array(1.0, np.float32))], "add")
                m = self.node("Mul", [x, a], "mul")
                self.node("Mul", [m, self.const("half", np.array(0.5, np.float32))])
        elif t == T.SOFTMAX:
            self.node("Softmax", [x], axis=1)
        elif t == T.LRN:
            self.node("LRN", [x], size=int(net.attr("size", i) or 5))
        elif t == T.DROPOUT:
            self.node("Dropout", [x])
        elif t in _MERGE:
            self.merge(i, t, params)
        elif t == T.CONCAT:
            self.node("Concat", self.same_rank(i), axis=1)
        elif t == T.FLATTEN:
            self.node("Flatten", [x], axis=1)
        elif t == T.RESHAPE:
            self.node("Reshape", [x, self.const("shape", np.array(plan.shape(i), np.int64))])
        elif t == T.TRANSPOSE:
            self.node("Transpose", [x], perm=_perm(net, i, src, dst))
        elif t == T.RESIZE:
            self.resize(x, src, dst)
        elif t == T.PAD:
            diff = [o - s for s, o in zip(src, dst)]
            begin = [d // 2 for d in diff]
            end = [d - b for d, b in zip(diff, begin)]
            self.node("Pad", [x, self.const("pads", np.array(begin + end, np.int64))], mode="constant")
        elif t == T.SLICE:
            if len(src) != len(dst) or any(o > s for s, o in zip(src, dst)):
                raise ExportError(f"{_where(net, i)}: output {list(net.out_shape(i))} is no slice of input "
                                  f"{list(net.out_shape(ps[0]))}")
            self.node("Slice", [x, self.const("starts", np.zeros(len(dst), np.int64)),
                                self.const("ends", np.array(dst, np.int64)),
                                self.const("axes", np.arange(len(dst), dtype=np.int64))])
        elif t == T.REDUCE_MEAN:
            axes = [a for a, (s, o) in enumerate(zip(src, dst)) if o == 1 and s != 1]
            if len(src) != len(dst) or not axes or any(o not in (1, s) for s, o in zip(src, dst)):
                raise ExportError(f"{_where(net, i)}: output {list(net.out_shape(i))} is no mean over axes of "
                                  f"input {list(net.out_shape(ps[0]))}")
            if self.opset >= 18:
                self.node("ReduceMean", [x, self.const("axes", np.array(axes, np.int64))], keepdims=1)
            else:
                self.node("ReduceMean", [x], axes=axes, keepdims=1)
        elif t == T.LAYER_NORM:
            if self.opset < 17:
                raise ExportError(f"{_where(net, i)}: LayerNormalization needs opset 17 or newer")
            self.node("LayerNormalization", [x, self.const("scale", params["scale"]),
                                             self.const("bias", params["bias"])], axis=-1, epsilon=1e-5)
        else:  # pragma: no cover - EXPORTABLE and the branches above agree
            raise AssertionError(t)

    def same_rank(self, i: int) -> list[str]:
        ps = self.plan.parents[i]
        if len({self.plan.rank[p] for p in ps}) == 1:
            return [self.net.names[p] for p in ps]
        return [self.input4d(i, p, f"reshape{j}") for j, p in enumerate(ps)]

    def merge(self, i: int, t: LayerType, params: dict) -> None:
        ins = self.same_rank(i)
        if len(ins) == 1:
            self.node(_BINARY_OP[t], [ins[0], self.const("C", params["C"])])
        elif len(ins) == 2:
            self.node(_BINARY_OP[t], ins)
        elif t == T.ADD:
            self.node("Sum", ins)
        else:
            acc = ins[0]
            for j, other in enumerate(ins[1:-1]):
                acc = self.node(_BINARY_OP[t], [acc, other], str(j))
            self.node(_BINARY_OP[t], [acc, ins[-1]])

    def fully_connected(self, i: int, p: int) -> None:
        net, plan = self.net, self.plan
        n, k = int(net.n[i]), int(net.c_in[i])
        if int(net.h_in[i]) * int(net.w_in[i]) != 1:
            raise ExportError(f"{_where(net, i)}: a FullyConnected layer over rows (input {list(net.in_shape(i))}, "
                              "an ONNX MatMul with batch dimensions) cannot be exported")
        src = plan.shape(p)
        if src[0] != n or math.prod(src[1:]) != k:
            raise ExportError(f"{_where(net, i)}: input {list(net.in_shape(i))} does not match its producer "
                              f"{net.names[p]!r} of shape {list(net.out_shape(p))}")
        x = net.names[p]
        if plan.rank[p] != 2:
            x = self.node("Flatten", [x], "flatten", axis=1)
        params = _params(net, plan, i, self.seed)
        self.node("Gemm", [x, self.const("W", params["W"]), self.const("B", params["B"])], transB=1)

    def resize(self, x: str, src: Sequence[int], dst: Sequence[int]) -> None:
        # torch's "nearest" (asymmetric coordinates, floor): what torch.onnx writes for F.interpolate
        kw = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        scales = np.array([o / s for s, o in zip(src, dst)], np.float32)
        exact = all(math.floor(s * float(f)) == o for s, o, f in zip(src, dst, scales))
        if exact:
            self.node("Resize", [x, "", self.const("scales", scales)], **kw)
        else:
            self.node("Resize", [x, "", "", self.const("sizes", np.array(dst, np.int64))], **kw)


def _conv_transpose_attrs(net: Network, i: int) -> dict[str, Any]:
    where = _where(net, i)
    k = (int(net.kh[i]), int(net.kw[i]))
    s = (max(int(net.sh[i]), 1), max(int(net.sw[i]), 1))
    d = (max(int(net.dh[i]), 1), max(int(net.dw[i]), 1))
    pads, out_pad = [], []
    for ax, (size_in, size_out, total) in enumerate(((int(net.h_in[i]), int(net.h_out[i]), int(net.ph[i])),
                                                      (int(net.w_in[i]), int(net.w_out[i]), int(net.pw[i])))):
        full = s[ax] * (size_in - 1) + d[ax] * (k[ax] - 1) + 1
        extra = size_out - (full - total)  # output_padding needed with this padding
        if extra < 0 or extra >= max(s[ax], d[ax]):
            total = max(full - size_out, 0)
            extra = size_out - (full - total)
        if extra < 0 or extra >= max(s[ax], d[ax]):
            raise ExportError(f"{where}: kernel {k[ax]}, stride {s[ax]} cannot turn size {size_in} into {size_out}")
        pads.append(_split(total))
        out_pad.append(extra)
    kw: dict[str, Any] = dict(kernel_shape=list(k), strides=list(s), dilations=list(d),
                              pads=[pads[0][0], pads[1][0], pads[0][1], pads[1][1]],
                              group=max(int(net.groups[i]), 1))
    if any(out_pad):
        kw["output_padding"] = out_pad
    return kw


def _perm(net: Network, i: int, src: Sequence[int], dst: Sequence[int]) -> list[int]:
    """A permutation of ``src``'s axes giving the exported shape ``dst`` (or, when that is the folded IR shape,
    a tensor folding to it; a non-trivial permutation first)."""
    r = len(src)
    want = tuple(dst) if len(dst) == r else net.out_shape(i)
    best = None
    for perm in itertools.permutations(range(r)):
        got = tuple(src[a] for a in perm)
        if (got if len(want) == r else to_nchw(got)) == want:
            if list(perm) != list(range(r)):
                return list(perm)
            best = list(perm)
    if best is None:
        raise ExportError(f"{_where(net, i)}: no transpose of {list(src)} has the shape {list(want)}")
    return best


# ------------------------------------------------------------------------------------------------------
# torch


def to_module(net: Network, seed: int = 0):
    """An ``nn.Module`` whose ``forward`` follows ``net``'s graph, with the weights `to_onnx` uses (same seed).

    ``forward`` takes one tensor per ``Input`` layer, in the network's order, shaped as in the ONNX export
    (``module.input_shapes``), and returns the output of the layer nobody consumes, or a tuple of them in
    layer order. Layers with weights are submodules named after the layer (``.`` replaced by ``_``;
    ``module.layer_names`` maps a submodule name back); the others are torch functions. The module is in
    eval mode. Raises `ExportError` for the layer types `to_onnx` rejects.

    Asymmetric padding (odd totals) is an explicit ``F.pad`` before the layer; for an average pool this
    counts the padded zeros, where ONNX's ``AveragePool`` (``count_include_pad=0``) does not.
    """
    import torch  # lazily: the benchmark hot path (to_onnx) needs no torch
    from torch import nn
    import torch.nn.functional as F

    plan = _Plan(net)
    _check_size(net, plan)
    steps: list[tuple[int, list[int], Any]] = []
    modules: dict[str, nn.Module] = {}
    buffers: dict[str, np.ndarray] = {}
    layer_names: dict[str, str] = {}

    def tensor(a: np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(a))

    def attr_name(i: int) -> str:
        a = net.names[i].replace(".", "_") or f"layer{i}"
        while a in modules or a in buffers or a in layer_names and layer_names[a] != net.names[i]:
            a += "_"
        layer_names[a] = net.names[i]
        return a

    for i in plan.order:
        t = LayerType(int(net.types[i]))
        if t == T.INPUT:
            continue
        ps = plan.parents[i]
        params = _params(net, plan, i, seed)
        to4 = plan.rank[i] == 4 and plan.rank[ps[0]] == 2 and t not in _MERGE and t != T.CONCAT \
            and t not in (T.FULLY_CONNECTED, T.FLATTEN, T.RESHAPE)
        pre = tuple(net.out_shape(ps[0])) if to4 else None
        src = plan.source_shape(i)
        dst = plan.shape(i)
        fn: Any
        if t in _CONV or t in (T.MAX_POOL, T.AVG_POOL):
            a = _window_attrs(net, i, allow_ceil=t not in _CONV)
            hb, wb, he, we = a["pads"]
            sym = hb == he and wb == we
            pad = (hb, wb) if sym else (0, 0)
            if t in _CONV:
                m = nn.Conv2d(int(net.c_in[i]), int(net.c_out[i]), a["kernel"], a["strides"], pad, a["dilations"],
                              max(int(net.groups[i]), 1), bias=True)
                with torch.no_grad():
                    m.weight.copy_(tensor(params["W"]))
                    m.bias.copy_(tensor(params["B"]))
                fill = 0.0
            elif t == T.MAX_POOL:
                m = nn.MaxPool2d(a["kernel"], a["strides"], pad, a["dilations"], ceil_mode=a["ceil"])
                fill = float("-inf")
            else:
                m = nn.AvgPool2d(a["kernel"], a["strides"], pad, ceil_mode=a["ceil"], count_include_pad=False)
                fill = 0.0
            modules[attr_name(i)] = m
            fn = _Call(m) if sym else _Padded(m, (wb, we, hb, he), fill)
        elif t == T.CONV_TRANSPOSE:
            kw = _conv_transpose_attrs(net, i)
            hb, wb, he, we = kw["pads"]
            m = nn.ConvTranspose2d(int(net.c_in[i]), int(net.c_out[i]), kw["kernel_shape"], kw["strides"],
                                   (hb, wb) if (hb, wb) == (he, we) else 0, kw.get("output_padding", 0),
                                   kw["group"], True, kw["dilations"])
            with torch.no_grad():
                m.weight.copy_(tensor(params["W"]))
                m.bias.copy_(tensor(params["B"]))
            modules[attr_name(i)] = m
            fn = _Call(m) if (hb, wb) == (he, we) else _Cropped(m, (hb, he, wb, we))
        elif t == T.FULLY_CONNECTED:
            m = nn.Linear(int(net.c_in[i]), int(net.c_out[i]))
            with torch.no_grad():
                m.weight.copy_(tensor(params["W"]))
                m.bias.copy_(tensor(params["B"]))
            modules[attr_name(i)] = m
            fn = _Call(m) if plan.rank[ps[0]] == 2 else _Flattened(m, torch)
        elif t == T.BATCH_NORM:
            c = int(net.c_out[i])
            m = nn.BatchNorm2d(c, eps=1e-5) if plan.rank[i] == 4 else nn.BatchNorm1d(c, eps=1e-5)
            with torch.no_grad():
                m.weight.copy_(tensor(params["scale"]))
                m.bias.copy_(tensor(params["bias"]))
                m.running_mean.copy_(tensor(params["mean"]))
                m.running_var.copy_(tensor(params["var"]))
            modules[attr_name(i)] = m
            fn = _Call(m)
        elif t == T.LAYER_NORM:
            m = nn.LayerNorm(int(dst[-1]), eps=1e-5)
            with torch.no_grad():
                m.weight.copy_(tensor(params["scale"]))
                m.bias.copy_(tensor(params["bias"]))
            modules[attr_name(i)] = m
            fn = _Call(m)
        elif t in _TORCH_ACT:
            m = _TORCH_ACT[t](nn, net, i)
            modules[attr_name(i)] = m
            fn = _Call(m)
        elif t == T.GLOBAL_POOL:
            m = nn.AdaptiveMaxPool2d(1) if str(net.attr("pool", i) or "avg") == "max" else nn.AdaptiveAvgPool2d(1)
            modules[attr_name(i)] = m
            fn = _Call(m)
        elif t == T.CLIP:
            lo, hi = net.attr("clip_min", i), net.attr("clip_max", i)
            fn = _Fn(torch.clamp, min=None if lo is None else float(lo), max=None if hi is None else float(hi))
        elif t in _MERGE:
            op = {T.ADD: torch.add, T.MUL: torch.mul, T.SUB: torch.sub, T.DIV: torch.div}[t]
            if len(ps) == 1:
                b = attr_name(i) + "_C"
                buffers[b] = params["C"]
                fn = _WithBuffer(op, b)
            else:
                fn = _Chain(op)
        elif t == T.CONCAT:
            fn = _Cat(torch)
        elif t == T.FLATTEN:
            fn = _Fn(torch.flatten, 1)
        elif t == T.RESHAPE:
            fn = _Method("reshape", tuple(int(v) for v in dst))
        elif t == T.TRANSPOSE:
            fn = _Method("permute", tuple(_perm(net, i, src, dst)))
        elif t == T.RESIZE:
            if src[:2] != dst[:2]:
                raise ExportError(f"{_where(net, i)}: to_module resizes spatial dimensions only")
            fn = _Fn(F.interpolate, size=(int(dst[2]), int(dst[3])), mode="nearest")
        elif t == T.PAD:
            diff = [o - s_ for s_, o in zip(src, dst)]
            flat: list[int] = []
            for d in reversed(diff):
                flat += [d // 2, d - d // 2]
            fn = _Fn(F.pad, tuple(flat))
        elif t == T.SLICE:
            if len(src) != len(dst) or any(o > s_ for s_, o in zip(src, dst)):
                raise ExportError(f"{_where(net, i)}: output {list(net.out_shape(i))} is no slice of input "
                                  f"{list(net.out_shape(ps[0]))}")
            fn = _Slice(tuple(int(d) for d in dst))
        elif t == T.REDUCE_MEAN:
            axes = [a for a, (s_, o) in enumerate(zip(src, dst)) if o == 1 and s_ != 1]
            if not axes:
                raise ExportError(f"{_where(net, i)}: output {list(net.out_shape(i))} is no mean over axes of "
                                  f"input {list(net.out_shape(ps[0]))}")
            fn = _Method("mean", tuple(axes), keepdim=True)
        else:  # pragma: no cover - EXPORTABLE and the branches above agree
            raise AssertionError(t)
        steps.append((i, ps, (pre, fn)))

    inputs = [i for i in plan.order if net.types[i] == T.INPUT]
    cls = _module_class(nn, _arg_names([net.names[i] for i in inputs]))
    return cls(net, plan, steps, modules, {k: tensor(v) for k, v in buffers.items()}, layer_names, inputs)


# small picklable callables (closures would do, but these print readably in a debugger)
class _Fn:
    def __init__(self, f, *args, **kwargs) -> None:
        self.f, self.args, self.kwargs = f, args, kwargs

    def __call__(self, root, xs):
        return self.f(xs[0], *self.args, **self.kwargs)


class _Method:
    def __init__(self, name: str, *args, **kwargs) -> None:
        self.name, self.args, self.kwargs = name, args, kwargs

    def __call__(self, root, xs):
        return getattr(xs[0], self.name)(*self.args, **self.kwargs)


class _Slice:
    def __init__(self, dst: tuple[int, ...]) -> None:
        self.dst = dst

    def __call__(self, root, xs):
        return xs[0][tuple(slice(0, d) for d in self.dst)]


class _Chain:
    def __init__(self, op) -> None:
        self.op = op

    def __call__(self, root, xs):
        acc = xs[0]
        for x in xs[1:]:
            acc = self.op(acc, x)
        return acc


class _WithBuffer:
    def __init__(self, op, buffer: str) -> None:
        self.op, self.buffer = op, buffer

    def __call__(self, root, xs):
        return self.op(xs[0], getattr(root, self.buffer))


class _Cat:
    def __init__(self, torch) -> None:
        self.cat = torch.cat

    def __call__(self, root, xs):
        return self.cat(list(xs), 1)


class _Call:
    def __init__(self, m) -> None:
        self.m = m

    def __call__(self, root, xs):
        return self.m(xs[0])


class _Flattened(_Call):
    def __init__(self, m, torch) -> None:
        super().__init__(m)
        self.flatten = torch.flatten

    def __call__(self, root, xs):
        return self.m(self.flatten(xs[0], 1))


class _Padded(_Call):
    def __init__(self, m, pads, fill: float) -> None:
        super().__init__(m)
        import torch.nn.functional as F
        self.pad, self.pads, self.fill = F.pad, pads, fill

    def __call__(self, root, xs):
        return self.m(self.pad(xs[0], self.pads, value=self.fill))


class _Cropped(_Call):
    def __init__(self, m, pads) -> None:
        super().__init__(m)
        self.pads = pads

    def __call__(self, root, xs):
        hb, he, wb, we = self.pads
        y = self.m(xs[0])
        return y[:, :, hb:y.shape[2] - he, wb:y.shape[3] - we]


def _act_factories() -> dict[LayerType, Any]:
    return {
        T.RELU: lambda nn, net, i: nn.ReLU(),
        T.RELU6: lambda nn, net, i: nn.ReLU6(),
        T.LEAKY_RELU: lambda nn, net, i: nn.LeakyReLU(float(net.attr("alpha", i) or 0.01)),
        T.SIGMOID: lambda nn, net, i: nn.Sigmoid(),
        T.SILU: lambda nn, net, i: nn.SiLU(),
        T.HARDSWISH: lambda nn, net, i: nn.Hardswish(),
        T.HARDSIGMOID: lambda nn, net, i: nn.Hardsigmoid(),
        T.GELU: lambda nn, net, i: nn.GELU(),
        T.TANH: lambda nn, net, i: nn.Tanh(),
        T.SOFTPLUS: lambda nn, net, i: nn.Softplus(),
        T.SOFTMAX: lambda nn, net, i: nn.Softmax(dim=1),
        T.LRN: lambda nn, net, i: nn.LocalResponseNorm(int(net.attr("size", i) or 5)),
        T.DROPOUT: lambda nn, net, i: nn.Dropout(),
    }


_TORCH_ACT = _act_factories()
_MODULE_CLASSES: dict[tuple[str, ...], type] = {}


def _arg_names(names: list[str]) -> tuple[str, ...]:
    """``forward`` argument names: the input layers' names where they are identifiers, else ``x0``, ``x1``..."""
    import keyword

    out: list[str] = []
    for k, n in enumerate(names):
        a = n if n.isidentifier() and not keyword.iskeyword(n) and n not in ("self",) else f"x{k}"
        out.append(a if a not in out else f"x{k}")
    return tuple(out) if len(set(out)) == len(out) else tuple(f"x{k}" for k in range(len(names)))


def _module_class(nn, arg_names: tuple[str, ...]) -> type:
    """The module class whose ``forward`` takes the named arguments ``arg_names`` (torch.fx needs named
    arguments, not ``*args``)."""
    cls = _MODULE_CLASSES.get(arg_names)
    if cls is not None:
        return cls

    class NetworkModule(nn.Module):
        """A `Network` as an ``nn.Module`` (built by `annette_torch.bench.export.to_module`)."""

        def __init__(self, net, plan, steps, modules, buffers, layer_names, inputs) -> None:
            super().__init__()
            for k, m in modules.items():
                self.add_module(k, m)
            for k, b in buffers.items():
                self.register_buffer(k, b)
            self.network_name = net.name
            self.layer_names = layer_names
            self.input_shapes = [tuple(plan.shape(i)) for i in inputs]
            self._inputs = inputs
            self._steps = steps
            self._outputs = plan.outputs
            self.eval()

        def _run(self, xs):
            env = dict(zip(self._inputs, xs))
            for i, ps, (pre, fn) in self._steps:
                args = [env[p] for p in ps]
                if pre is not None:
                    args[0] = args[0].reshape(pre)
                env[i] = fn(self, args)
            outs = tuple(env[i] for i in self._outputs)
            return outs[0] if len(outs) == 1 else outs

    args = ", ".join(arg_names)
    scope: dict[str, Any] = {}
    exec(f"def forward(self, {args}):\n    return self._run(({args}{',' if len(arg_names) == 1 else ''}))\n",
         scope)
    NetworkModule.forward = scope["forward"]
    _MODULE_CLASSES[arg_names] = NetworkModule
    return NetworkModule
