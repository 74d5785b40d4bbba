"""IR -> ONNX back end: `to_onnx` writes a layer `Network` as an ONNX model with ``onnx.helper`` only (no
torch on the benchmark hot path); `node_layers` maps its nodes back to the layers.

Contract with the runners and the matcher:

* one ONNX node per IR layer; the node's name **and** its (first) output tensor name are the layer's name;
  graph inputs are named after the ``Input`` layers; graph outputs are the layers nobody consumes (``Input``
  layers excepted), in layer order;
* a few layers need helper nodes; each helper node is named ``<layer>/<role>`` and the node named
  ``<layer>`` always produces the layer's output:

  - ``FullyConnected`` is a ``Gemm`` (``transB=1``). Its input is used as it is when the producer's tensor
    is already 2-D (``[N, K]``: a graph input of shape ``(N, K, 1, 1)`` in the IR, a ``Flatten``, another
    ``Gemm``); only when the producer is 4-D a ``Flatten`` node ``<layer>/flatten`` (axis 1) is inserted.
    Over the rows of a token tensor (a layer recorded with its full shape, e.g. ``(batch, tokens, features)``)
    it is what ``torch.onnx`` writes for ``nn.Linear``: ``MatMul`` with the transposed weight
    (``<layer>/matmul``) and ``Add`` of the bias (``<layer>``);
  - ``MatMul`` (a batched product of two activations, IR: in ``(batch, K, M, 1)``, out ``(batch, N, M, 1)``)
    is one ``MatMul`` node on the producers' full shapes; when the second operand is stored ``(..., N, K)``
    (the keys of ``q k^T``: attribute ``trans_b``, else inferred from the shapes) a ``Transpose`` node
    ``<layer>/transpose_b`` swaps its last two axes first, as ``torch.onnx`` writes ``q @ k.transpose(-2, -1)``;
  - ``Softmax`` runs over axis 1, or the layer's ``axis`` attribute (``-1`` for attention scores);
  - ``Resize`` is torch's ``nearest`` (asymmetric, floor), or with ``mode`` ``bilinear`` / ``linear`` ONNX's
    ``linear`` with ``half_pixel`` coordinates (``F.interpolate(..., align_corners=False)``);
  - ``SiLU`` is ``Mul(x, Sigmoid(x))``: nodes ``<layer>/sigmoid`` and ``<layer>``;
  - ``GELU`` is the ``Gelu`` op from opset 20; below that its Erf form ``0.5 * x * (1 + erf(x / sqrt 2))``:
    nodes ``<layer>/div``, ``<layer>/erf``, ``<layer>/add``, ``<layer>/mul`` and ``<layer>`` (the final x 0.5);
  - ``Mul``/``Sub``/``Div`` of more than two inputs chain binary nodes ``<layer>/0``, ``<layer>/1``, ...
    (``Add`` of many inputs is one ``Sum`` node);
  - a layer that needs a 4-D input but gets a 2-D tensor reshapes it first (``<layer>/reshape``).

  `node_layers(model)` maps every node name to its layer; the map is also stored in the model's metadata
  (``annette:helpers``, JSON ``{helper node: layer}``);
* weights come from `annette_torch.bench.export.weights` (deterministic per seed and layer name);
  initializers are named ``<layer>/W``, ``<layer>/B``, ...
* attributes come from the IR columns (`annette_torch.bench.export.geometry`), so ONNX shape inference always
  gives the IR's shapes; tensor ranks follow `annette_torch.bench.export.plan`.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ...ir import LayerType, Network
from .geometry import conv_transpose_attrs, matmul_trans_b, permutation, window_attrs
from .plan import CONV, MERGE, ExportError, Layer, Plan, tile_repeats, where
from .weights import check_size, layer_params

__all__ = ["to_onnx", "node_layers"]

T = LayerType
_BINARY_OP = {T.ADD: "Add", T.MUL: "Mul", T.SUB: "Sub", T.DIV: "Div"}
_MIN_OPSET = 13


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
    plan = Plan(net)
    check_size(net)
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


def node_layers(model: onnx.ModelProto) -> dict[str, str]:
    """Map every node name of a `to_onnx` model to the IR layer it belongs to (helper nodes included)."""
    props = {p.key: p.value for p in model.metadata_props}
    helpers = json.loads(props.get("annette:helpers", "{}"))
    return {n.name: helpers.get(n.name, n.name) for n in model.graph.node}


def _check_names(names: list[str], net: Network) -> None:
    """Raise `ExportError` when two tensors (initializers, node outputs, graph inputs) share a name."""
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ExportError(f"network {net.name!r}: tensor name {n!r} is used twice (a layer name clashes with "
                              "another layer or with a helper/weight name such as '<layer>/W'); rename the layer")
        seen.add(n)


def _version() -> str:
    """The package version written as the model's ``producer_version``."""
    try:
        from ... import __version__
        return __version__
    except ImportError:  # pragma: no cover
        return ""


def _value_info(name: str, shape: Sequence[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [int(s) for s in shape])


class _OnnxExporter:
    """Collects the nodes, initializers and helper-node owners of one model, one layer at a time."""

    def __init__(self, net: Network, plan: Plan, opset: int, seed: int) -> None:
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
        if self.plan.rank[p] != 2:  # (a layer reading a 5-D tensor, a pick ``qkv[i]``, reads it as it is)
            return src
        shape = self.net.out_shape(p)
        return self.node("Reshape", [src, self.const(f"{role}_shape", np.array(shape, np.int64))], role)

    # -- per layer ----------------------------------------------------------------------------------
    def layer(self, i: int) -> None:
        """Add the node(s) of layer ``i`` (nothing for an ``Input`` layer) with the builder for its type."""
        net, plan = self.net, self.plan
        t = LayerType(int(net.types[i]))
        if t == T.INPUT:
            return
        self.layer_name = net.names[i]
        ps = plan.parents[i]
        x = net.names[ps[0]]
        if plan.rank[i] == 4 and t not in MERGE and t not in (T.CONCAT, T.RESHAPE, T.MATMUL):
            x = self.input4d(i, ps[0])
        _NODES[t](self, plan.layer(i, layer_params(net, plan, i, self.seed)), x)

    def same_rank(self, i: int) -> list[str]:
        ps = self.plan.parents[i]
        if len({self.plan.rank[p] for p in ps}) == 1:
            return [self.net.names[p] for p in ps]
        return [self.input4d(i, p, f"reshape{j}") for j, p in enumerate(ps)]


# ------------------------------------------------------------------------------------------------------
# node builders: builder(exporter, layer, x) adds the node(s) of one layer whose first input tensor is x


def _conv(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    a = window_attrs(ex.net, layer.i)
    ex.node("Conv", [x, ex.const("W", layer.params["W"]), ex.const("B", layer.params["B"])],
            kernel_shape=list(a["kernel"]), strides=list(a["strides"]), pads=list(a["pads"]),
            dilations=list(a["dilations"]), group=max(int(ex.net.groups[layer.i]), 1))


def _conv_transpose(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    kw = conv_transpose_attrs(ex.net, layer.i)
    ex.node("ConvTranspose", [x, ex.const("W", layer.params["W"]), ex.const("B", layer.params["B"])], **kw)


def _pool(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    a = window_attrs(ex.net, layer.i, allow_ceil=True)
    kw = dict(kernel_shape=list(a["kernel"]), strides=list(a["strides"]), pads=list(a["pads"]))
    if a["ceil"]:
        kw["ceil_mode"] = 1
    if a["dilations"] != (1, 1):
        if layer.t == T.AVG_POOL and ex.opset < 19:
            raise ExportError(f"{where(ex.net, layer.i)}: a dilated AveragePool needs opset 19 or newer")
        kw["dilations"] = list(a["dilations"])
    ex.node("MaxPool" if layer.t == T.MAX_POOL else "AveragePool", [x], **kw)


def _global_pool(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    kind = str(ex.net.attr("pool", layer.i) or "avg")
    ex.node("GlobalMaxPool" if kind == "max" else "GlobalAveragePool", [x])


def _fully_connected(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    """A ``Gemm``; its producer's tensor as it is when 2-D, else through a ``<layer>/flatten`` node."""
    net, plan, i, p = ex.net, ex.plan, layer.i, layer.parents[0]
    n, k = int(net.n[i]), int(net.c_in[i])
    if len(layer.dst) > 2 and net.attr("shape", i) is not None:
        _rows(ex, layer, x, k)
        return
    if int(net.h_in[i]) * int(net.w_in[i]) != 1:
        raise ExportError(f"{where(net, i)}: a FullyConnected layer over rows (input {list(net.in_shape(i))}, "
                          "an ONNX MatMul with batch dimensions) cannot be exported")
    src = plan.shape(p)
    if src[0] != n or math.prod(src[1:]) != k:
        raise ExportError(f"{where(net, i)}: input {list(net.in_shape(i))} does not match its producer "
                          f"{net.names[p]!r} of shape {list(net.out_shape(p))}")
    flat = net.names[p]
    if plan.rank[p] != 2:
        flat = ex.node("Flatten", [flat], "flatten", axis=1)
    ex.node("Gemm", [flat, ex.const("W", layer.params["W"]), ex.const("B", layer.params["B"])], transB=1)


def _rows(ex: _OnnxExporter, layer: Layer, x: str, k: int) -> None:
    """A fully connected layer over the last axis of a token tensor: ``MatMul`` with ``W^T``, then ``Add`` of B
    (none for a layer with attribute ``bias`` False)."""
    if layer.src[-1] != k or layer.src[:-1] != layer.dst[:-1]:
        raise ExportError(f"{where(ex.net, layer.i)}: input {list(layer.src)} does not match output "
                          f"{list(layer.dst)} of a fully connected layer over {k} features")
    if ex.net.attr("bias", layer.i) is False:  # nn.Linear(..., bias=False): the MatMul alone (LeViT's)
        ex.node("MatMul", [x, ex.const("W", np.ascontiguousarray(layer.params["W"].T))])
        return
    mm = ex.node("MatMul", [x, ex.const("W", np.ascontiguousarray(layer.params["W"].T))], "matmul")
    ex.node("Add", [mm, ex.const("B", layer.params["B"])])


def _matmul(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    """A batched product of two activations on their full shapes (a ``<layer>/transpose_b`` for ``q k^T``)."""
    a_shape, b_shape = (ex.plan.shape(p) for p in layer.parents)
    b_name = ex.net.names[layer.parents[1]]
    trans = matmul_trans_b(ex.net, layer.i, layer.dst, a_shape, b_shape)
    if trans:
        perm = list(range(len(b_shape)))
        perm[-2:] = perm[-1], perm[-2]
        b_name = ex.node("Transpose", [b_name], "transpose_b", perm=perm)
    ex.node("MatMul", [x, b_name])


def _softmax(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    axis = ex.net.attr("axis", layer.i)
    ex.node("Softmax", [x], axis=1 if axis is None else int(axis))


def _batch_norm(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    ex.node("BatchNormalization", [x] + [ex.const(k, layer.params[k]) for k in ("scale", "bias", "mean", "var")],
            epsilon=1e-5)


def _layer_norm(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    if ex.opset < 17:
        raise ExportError(f"{where(ex.net, layer.i)}: LayerNormalization needs opset 17 or newer")
    ex.node("LayerNormalization", [x, ex.const("scale", layer.params["scale"]), ex.const("bias", layer.params["bias"])],
            axis=-1, epsilon=1e-5)


def _one(op: str, **attrs: Any) -> Callable[[_OnnxExporter, Layer, str], None]:
    """The builder of a layer that is one ``op`` node with fixed attributes."""
    def build(ex: _OnnxExporter, layer: Layer, x: str) -> None:
        ex.node(op, [x], **attrs)
    return build


def _relu6(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    ex.node("Clip", [x, ex.const("min", np.array(0.0, np.float32)), ex.const("max", np.array(6.0, np.float32))])


def _clip(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    lo, hi = ex.net.attr("clip_min", layer.i), ex.net.attr("clip_max", layer.i)
    ins = [x, "" if lo is None else ex.const("min", np.array(lo, np.float32)),
           "" if hi is None else ex.const("max", np.array(hi, np.float32))]
    while ins[-1] == "":
        ins.pop()
    ex.node("Clip", ins)


def _leaky_relu(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    ex.node("LeakyRelu", [x], alpha=float(ex.net.attr("alpha", layer.i) or 0.01))


def _silu(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    sig = ex.node("Sigmoid", [x], "sigmoid")
    ex.node("Mul", [x, sig])


def _gelu(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    """The ``Gelu`` op from opset 20; below that its Erf form."""
    if ex.opset >= 20:
        ex.node("Gelu", [x])
        return
    d = ex.node("Div", [x, ex.const("sqrt2", np.array(math.sqrt(2.0), np.float32))], "div")
    e = ex.node("Erf", [d], "erf")
    a = ex.node("Add", [e, ex.const("one", np.array(1.0, np.float32))], "add")
    m = ex.node("Mul", [x, a], "mul")
    ex.node("Mul", [m, ex.const("half", np.array(0.5, np.float32))])


def _lrn(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    ex.node("LRN", [x], size=int(ex.net.attr("size", layer.i) or 5))


def _merge(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    """A binary op with a constant (one input), of two inputs, or chained (``Sum`` for ``Add``) over more."""
    op = _BINARY_OP[layer.t]
    ins = ex.same_rank(layer.i)
    if len(ins) == 1:
        ex.node(op, [ins[0], ex.const("C", layer.params["C"])])
    elif len(ins) == 2:
        ex.node(op, ins)
    elif layer.t == T.ADD:
        ex.node("Sum", ins)
    else:
        acc = ins[0]
        for j, other in enumerate(ins[1:-1]):
            acc = ex.node(op, [acc, other], str(j))
        ex.node(op, [acc, ins[-1]])


def _concat(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    """A concatenation along the channels; of one input to a larger output, its copies side by side (a broadcast
    or tiling: ``Tile``)."""
    reps = tile_repeats(layer)
    if reps is not None:
        ex.node("Tile", [x, ex.const("repeats", np.array(reps, np.int64))])
    else:
        ex.node("Concat", ex.same_rank(layer.i), axis=1)


def _reshape(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    ex.node("Reshape", [x, ex.const("shape", np.array(layer.dst, np.int64))])


def _flatten(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    """``Flatten`` (axis 1), or a ``Reshape`` to the output where it merges leading axes (`Layer.flattens_leading`)."""
    if layer.flattens_leading:
        _reshape(ex, layer, x)
    else:
        ex.node("Flatten", [x], axis=1)


def _transpose(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    ex.node("Transpose", [x], perm=permutation(ex.net, layer.i, layer.src, layer.dst))


def _resize(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    """torch's "nearest" (asymmetric coordinates, floor) or "bilinear" (half-pixel): what torch.onnx writes for
    F.interpolate."""
    src, dst = layer.src, layer.dst
    if str(ex.net.attr("mode", layer.i) or "nearest") in ("bilinear", "linear"):
        kw = dict(mode="linear", coordinate_transformation_mode="half_pixel")
    else:
        kw = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    scales = np.array([o / s for s, o in zip(src, dst)], np.float32)
    exact = all(math.floor(s * float(f)) == o for s, o, f in zip(src, dst, scales))
    if exact:
        ex.node("Resize", [x, "", ex.const("scales", scales)], **kw)
    else:
        ex.node("Resize", [x, "", "", ex.const("sizes", np.array(dst, np.int64))], **kw)


def _pad(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    diff = [o - s for s, o in zip(layer.src, layer.dst)]
    begin = [d // 2 for d in diff]
    end = [d - b for d, b in zip(diff, begin)]
    ex.node("Pad", [x, ex.const("pads", np.array(begin + end, np.int64))], mode="constant")


def _pick(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    """One entry of the leading axis (``qkv[i]`` of a fused projection) is a Gather; pieces of it keeping the
    axis (a split along it) a Slice."""
    if tuple(layer.dst) != tuple(layer.src[1:]):
        return _slice(ex, layer, x)
    index = int(ex.net.attr("index", layer.i) or 0)
    ex.node("Gather", [x, ex.const("index", np.array(index, np.int64))], axis=0)


def _slice(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    src, dst = layer.src, layer.dst
    if len(src) != len(dst) or any(o > s for s, o in zip(src, dst)):
        raise ExportError(f"{where(ex.net, layer.i)}: output {list(ex.net.out_shape(layer.i))} is no slice of "
                          f"input {list(ex.net.out_shape(layer.parents[0]))}")
    ex.node("Slice", [x, ex.const("starts", np.zeros(len(dst), np.int64)), ex.const("ends", np.array(dst, np.int64)),
                      ex.const("axes", np.arange(len(dst), dtype=np.int64))])


def _reduce_mean(ex: _OnnxExporter, layer: Layer, x: str) -> None:
    src, dst = layer.src, layer.dst
    axes = [a for a, (s, o) in enumerate(zip(src, dst)) if o == 1 and s != 1]
    if len(src) != len(dst) or not axes or any(o not in (1, s) for s, o in zip(src, dst)):
        raise ExportError(f"{where(ex.net, layer.i)}: output {list(ex.net.out_shape(layer.i))} is no mean over "
                          f"axes of input {list(ex.net.out_shape(layer.parents[0]))}")
    if ex.opset >= 18:
        ex.node("ReduceMean", [x, ex.const("axes", np.array(axes, np.int64))], keepdims=1)
    else:
        ex.node("ReduceMean", [x], axes=axes, keepdims=1)


#: The node builder of every exportable layer type but ``Input``.
_NODES: dict[LayerType, Callable[[_OnnxExporter, Layer, str], None]] = {
    **{t: _conv for t in CONV},
    T.CONV_TRANSPOSE: _conv_transpose,
    T.MAX_POOL: _pool,
    T.AVG_POOL: _pool,
    T.GLOBAL_POOL: _global_pool,
    T.FULLY_CONNECTED: _fully_connected,
    T.BATCH_NORM: _batch_norm,
    T.LAYER_NORM: _layer_norm,
    T.RELU: _one("Relu"),
    T.SIGMOID: _one("Sigmoid"),
    T.TANH: _one("Tanh"),
    T.HARDSWISH: _one("HardSwish"),
    T.SOFTPLUS: _one("Softplus"),
    T.HARDSIGMOID: _one("HardSigmoid", alpha=1.0 / 6.0, beta=0.5),  # torch's relu6(x + 3) / 6 (ONNX's alpha: 0.2)
    T.SOFTMAX: _softmax,
    T.MATMUL: _matmul,
    T.DROPOUT: _one("Dropout"),
    T.FLATTEN: _flatten,
    T.RELU6: _relu6,
    T.CLIP: _clip,
    T.LEAKY_RELU: _leaky_relu,
    T.SILU: _silu,
    T.GELU: _gelu,
    T.LRN: _lrn,
    **{t: _merge for t in MERGE},
    T.CONCAT: _concat,
    T.RESHAPE: _reshape,
    T.TRANSPOSE: _transpose,
    T.RESIZE: _resize,
    T.PAD: _pad,
    T.SLICE: _slice,
    T.PICK: _pick,
    T.REDUCE_MEAN: _reduce_mean,
}
