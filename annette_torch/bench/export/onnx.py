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
    ``Gemm``); only when the producer is 4-D a ``Flatten`` node ``<layer>/flatten`` (axis 1) is inserted;
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
from typing import Any, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ...ir import LayerType, Network
from .geometry import conv_transpose_attrs, permutation, window_attrs
from .plan import CONV, MERGE, ExportError, Plan, where
from .weights import check_size, layer_params

__all__ = ["to_onnx", "node_layers"]

T = LayerType
_BINARY_OP = {T.ADD: "Add", T.MUL: "Mul", T.SUB: "Sub", T.DIV: "Div"}
_SIMPLE_ACT = {T.RELU: "Relu", T.SIGMOID: "Sigmoid", T.TANH: "Tanh", T.HARDSWISH: "HardSwish",
               T.SOFTPLUS: "Softplus"}
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
        if self.plan.rank[p] == 4:
            return src
        shape = self.net.out_shape(p)
        return self.node("Reshape", [src, self.const(f"{role}_shape", np.array(shape, np.int64))], role)

    # -- per layer ----------------------------------------------------------------------------------
    def layer(self, i: int) -> None:
        """Add the node(s) of layer ``i`` (nothing for an ``Input`` layer)."""
        net, plan = self.net, self.plan
        t = LayerType(int(net.types[i]))
        if t == T.INPUT:
            return
        self.layer_name = net.names[i]
        ps = plan.parents[i]
        x = net.names[ps[0]]
        if plan.rank[i] == 4 and t not in MERGE and t not in (T.CONCAT, T.RESHAPE):
            x = self.input4d(i, ps[0])
        src = plan.source_shape(i)
        dst = plan.shape(i)
        params = layer_params(net, plan, i, self.seed)
        if t in CONV:
            a = window_attrs(net, i)
            self.node("Conv", [x, self.const("W", params["W"]), self.const("B", params["B"])],
                      kernel_shape=list(a["kernel"]), strides=list(a["strides"]), pads=list(a["pads"]),
                      dilations=list(a["dilations"]), group=max(int(net.groups[i]), 1))
        elif t == T.CONV_TRANSPOSE:
            kw = conv_transpose_attrs(net, i)
            self.node("ConvTranspose", [x, self.const("W", params["W"]), self.const("B", params["B"])], **kw)
        elif t in (T.MAX_POOL, T.AVG_POOL):
            a = window_attrs(net, i, allow_ceil=True)
            kw = dict(kernel_shape=list(a["kernel"]), strides=list(a["strides"]), pads=list(a["pads"]))
            if a["ceil"]:
                kw["ceil_mode"] = 1
            if a["dilations"] != (1, 1):
                if t == T.AVG_POOL and self.opset < 19:
                    raise ExportError(f"{where(net, i)}: a dilated AveragePool needs opset 19 or newer")
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
        elif t in MERGE:
            self.merge(i, t, params)
        elif t == T.CONCAT:
            self.node("Concat", self.same_rank(i), axis=1)
        elif t == T.FLATTEN:
            self.node("Flatten", [x], axis=1)
        elif t == T.RESHAPE:
            self.node("Reshape", [x, self.const("shape", np.array(plan.shape(i), np.int64))])
        elif t == T.TRANSPOSE:
            self.node("Transpose", [x], perm=permutation(net, i, src, dst))
        elif t == T.RESIZE:
            self.resize(x, src, dst)
        elif t == T.PAD:
            diff = [o - s for s, o in zip(src, dst)]
            begin = [d // 2 for d in diff]
            end = [d - b for d, b in zip(diff, begin)]
            self.node("Pad", [x, self.const("pads", np.array(begin + end, np.int64))], mode="constant")
        elif t == T.SLICE:
            if len(src) != len(dst) or any(o > s for s, o in zip(src, dst)):
                raise ExportError(f"{where(net, i)}: output {list(net.out_shape(i))} is no slice of input "
                                  f"{list(net.out_shape(ps[0]))}")
            self.node("Slice", [x, self.const("starts", np.zeros(len(dst), np.int64)),
                                self.const("ends", np.array(dst, np.int64)),
                                self.const("axes", np.arange(len(dst), dtype=np.int64))])
        elif t == T.REDUCE_MEAN:
            axes = [a for a, (s, o) in enumerate(zip(src, dst)) if o == 1 and s != 1]
            if len(src) != len(dst) or not axes or any(o not in (1, s) for s, o in zip(src, dst)):
                raise ExportError(f"{where(net, i)}: output {list(net.out_shape(i))} is no mean over axes of "
                                  f"input {list(net.out_shape(ps[0]))}")
            if self.opset >= 18:
                self.node("ReduceMean", [x, self.const("axes", np.array(axes, np.int64))], keepdims=1)
            else:
                self.node("ReduceMean", [x], axes=axes, keepdims=1)
        elif t == T.LAYER_NORM:
            if self.opset < 17:
                raise ExportError(f"{where(net, i)}: LayerNormalization needs opset 17 or newer")
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
            raise ExportError(f"{where(net, i)}: a FullyConnected layer over rows (input {list(net.in_shape(i))}, "
                              "an ONNX MatMul with batch dimensions) cannot be exported")
        src = plan.shape(p)
        if src[0] != n or math.prod(src[1:]) != k:
            raise ExportError(f"{where(net, i)}: input {list(net.in_shape(i))} does not match its producer "
                              f"{net.names[p]!r} of shape {list(net.out_shape(p))}")
        x = net.names[p]
        if plan.rank[p] != 2:
            x = self.node("Flatten", [x], "flatten", axis=1)
        params = layer_params(net, plan, i, self.seed)
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
