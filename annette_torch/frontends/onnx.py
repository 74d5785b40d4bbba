"""ONNX front end: an ONNX model (file or ``ModelProto``) -> `Network`.

Every ONNX node becomes one IR layer named after the node (or its first output when unnamed); edges follow
tensors from producer to consumer. Graph inputs become ``Input`` layers. Shapes come from ONNX's own shape
inference (``onnx.shape_inference.infer_shapes``), never from hand-written rules.

Decisions worth knowing:

* Constants are not layers and not edges: initializers (also those listed as graph inputs), ``Constant``
  nodes, ``Shape``/``Size`` nodes (shapes are static here) and every node whose inputs are all constants
  (e.g. ``Transpose`` of a weight, ``Gather`` on a shape). Small constant computations are evaluated
  (``onnx.reference``) so that shape inference sees the values that the shape arithmetic of dynamic-shape
  exports produces once ``input_shape`` fixes the input (ONNX's own data propagation covers only part of it).
* ``Identity`` is skipped (its consumers connect to its producer), and so is the ``Add`` of a constant bias
  over the features of a ``FullyConnected`` layer it alone reads (how torch exports ``nn.Linear`` on a tensor of
  rank 3 or more: ``MatMul`` + ``Add``): the layer carries its bias, as ``Gemm``, the fx front end's ``Linear``
  and the runtimes (which fuse the two) have it.
* ``Gemm`` and ``MatMul`` with a constant second operand are ``FullyConnected``; ``MatMul`` (or ``Gemm``)
  of two activations is ``MatMul``. For both, ``c_in`` is the reduced dimension K and ``c_out`` is N, so
  ``ops = 2 * out_elems * c_in`` is the true 2 x MACs count. Rank-2 products ``[M, K] x [K, N]`` are stored
  as rows in N: in ``(M, K, 1, 1)``, out ``(M, N, 1, 1)``; products with batch dimensions
  ``[B..., M, K] x [K, N]`` as in ``(prod(B), K, M, 1)``, out ``(prod(B), N, M, 1)`` (features in C, rows
  in H; element counts are exact).
* ``Clip`` is ``Relu6`` only when its bounds are exactly 0 and 6 (attributes before opset 11, constant
  inputs from opset 11); otherwise ``Clip``.
* ``ReduceMean``/``ReduceMax`` over all spatial axes are ``GlobalPool``; any other reduction (sum, L2 norm,
  max over tokens, arg max, ...) is ``ReduceMean``. ``Squeeze``/``Unsqueeze`` are ``Reshape``; ``Split`` is
  ``Slice`` (its layer's output shape is the first output's), ``Pick`` along the leading axis, as is a
  ``Gather`` of one entry of it (``qkv[i]``); ``PRelu`` is ``LeakyRelu``; ``LogSoftmax`` is
  ``Softmax``; ``Sum`` is ``Add``; ``Expand``/``Tile`` of an activation are ``Concat`` (a copy); other
  element-wise math (``Exp``, ``Sqrt``, ``Pow``, ``Erf``, ``Where``, comparisons, ``Elu``...) is ``Elementwise``.
* Spatial attributes of 1-D and 3-D operators are folded like shapes (see `ir.to_nchw`): a 1-D kernel
  ``k`` is ``(k, 1)``; a 3-D kernel ``(kd, kh, kw)`` is ``(kd * kh, kw)`` so that operation counts stay exact.
* Any other op is an ``Unknown`` layer keeping its output shape, with attribute ``op``; every layer carries
  ``op`` (its ONNX op type). One warning lists the unknown op types. An unknown op whose output shape ONNX
  cannot infer gets its input's shape (said in the same warning) and shape inference is rerun past it.
"""

from __future__ import annotations

import logging
import math
import os
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto, helper, numpy_helper

from ..errors import ModelLoadError
from ..ir import (
    MAX_ELEMS,
    MASK_SCAN_LIMIT,
    MAX_WINDOW,
    IRError,
    LayerType,
    Network,
    NetworkBuilder,
    check_size,
    conv_type,
    to_nchw,
    subnormal_share,
    transpose_slow,
)

__all__ = ["from_onnx"]

log = logging.getLogger(__name__)
T = LayerType

#: Constants with more elements than this are hidden from shape inference as typed graph inputs, so that
#: inference does not copy the weights (shape data such as Reshape targets is always far smaller).
_BIG_CONST = 4096

#: Ops whose layer takes the inferred output shape and needs nothing else.
_SIMPLE: dict[str, LayerType] = {
    "Relu": T.RELU, "LeakyRelu": T.LEAKY_RELU, "PRelu": T.LEAKY_RELU, "Sigmoid": T.SIGMOID,
    "HardSigmoid": T.HARDSIGMOID, "HardSwish": T.HARDSWISH, "Tanh": T.TANH, "Gelu": T.GELU,
    "Softplus": T.SOFTPLUS, "Softmax": T.SOFTMAX, "LogSoftmax": T.SOFTMAX,
    "Add": T.ADD, "Sum": T.ADD, "Sub": T.SUB, "Mul": T.MUL, "Div": T.DIV, "Concat": T.CONCAT,
    "Reshape": T.RESHAPE, "Squeeze": T.RESHAPE, "Unsqueeze": T.RESHAPE, "Flatten": T.FLATTEN,
    "Transpose": T.TRANSPOSE, "Resize": T.RESIZE, "Upsample": T.RESIZE, "Pad": T.PAD, "Slice": T.SLICE,
    "Split": T.SLICE, "Dropout": T.DROPOUT, "LRN": T.LRN, "BatchNormalization": T.BATCH_NORM,
    "LayerNormalization": T.LAYER_NORM, "GroupNormalization": T.LAYER_NORM, "InstanceNormalization": T.LAYER_NORM,
    "RMSNormalization": T.LAYER_NORM,
    "DepthToSpace": T.TRANSPOSE, "SpaceToDepth": T.TRANSPOSE,  # (pixel shuffles: a reshape-transpose-reshape copy)
    # a broadcast or tiling of an activation writes its output like a concatenation of copies
    "Expand": T.CONCAT, "Tile": T.CONCAT,
    **{op: T.ELEMENTWISE for op in ("Exp", "Log", "Sqrt", "Pow", "Erf", "Neg", "Abs", "Reciprocal", "Sin", "Cos",
                                    "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
                                    "Sign", "Floor", "Ceil", "Round", "Elu", "Selu", "Celu", "ThresholdedRelu",
                                    "Where", "CumSum", "Max", "Min", "Mod", "Equal", "Greater", "Less",
                                    "GreaterOrEqual", "LessOrEqual", "Not", "And", "Or", "Xor")},
}
#: reductions over some axes (``ReduceMean`` / ``ReduceMax`` over all spatial axes are a ``GlobalPool``)
_REDUCE = frozenset({"ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceSumSquare", "ReduceL1", "ReduceL2",
                     "ReduceLogSumExp", "ReduceProd", "ArgMax", "ArgMin", "TopK"})
#: Ops with their own conversion below.
_SPECIAL = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "MaxPool", "AveragePool", "GlobalAveragePool",
                      "GlobalMaxPool", "Clip", "Einsum", "Gather"}) | _REDUCE
_SUPPORTED = frozenset(_SIMPLE) | _SPECIAL | {"Identity", "Cast", "Constant"}
#: Ops whose empty output (a zero dimension) is dropped: a slice of nothing, read by a concat or a reshape.
_EMPTY_OK = frozenset({"Slice", "Split", "Gather", "Reshape", "Transpose", "Concat"})
#: Ops whose outputs are constants whatever their inputs (shapes are static once the input shape is).
_ALWAYS_CONST = frozenset({"Constant", "Shape", "Size"})
#: ops that move a tensor's values without changing them (a mask's share of subnormal logits passes through)
_VALUE_KEEPING = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Expand"})


def from_onnx(model: str | os.PathLike | onnx.ModelProto, input_shape: Sequence[int] | None = None,
              name: str | None = None) -> Network:
    """Convert an ONNX model (a file path or a loaded ``ModelProto``) into a `Network`.

    The arguments come in `trace`'s order. ``input_shape`` replaces the shape of the first graph input, e.g.
    to fix a dynamic batch dimension: it may change the batch and dynamic dimensions, not a static one; every
    graph input must have a static shape after that. ``name`` defaults to the file's stem (or the graph's
    name for a ``ModelProto``). The given ``ModelProto`` is not modified.

    Raises `ModelLoadError` for a missing, truncated or non-ONNX file, names that are not UTF-8, a dynamic,
    negative or absurdly large input shape (more than `ir.MAX_ELEMS` elements), an ``input_shape`` that
    contradicts a static dimension, malformed attributes of a converted node (zero strides or kernels,
    negative pads, wrong lengths), or a supported node whose output shape cannot be inferred.
    """
    proto, base_dir, default_name = _load(model)
    _check_text(proto, default_name)
    graph = proto.graph
    net_name = name or default_name or graph.name or "onnx_model"

    inits = {t.name: t for t in graph.initializer}
    first_input = next((vi.name for vi in graph.input if vi.name not in inits), None)
    if first_input is None:
        raise ModelLoadError(f"ONNX model {net_name!r} has no graph input (all inputs are initializers)")

    # one sweep: which tensors are constants, which nodes become layers, which of those are unsupported
    consts = set(inits)
    layer_nodes: list[onnx.NodeProto] = []
    const_nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        ins = [i for i in node.input if i]
        if node.op_type in _ALWAYS_CONST or all(i in consts for i in ins):
            consts.update(o for o in node.output if o)
            const_nodes.append(node)
        else:
            layer_nodes.append(node)
    unsupported = [n for n in layer_nodes if n.op_type not in _SUPPORTED]
    values = _Constants(inits, const_nodes, base_dir)

    inf_model = _inference_model(proto, inits, first_input, input_shape)
    for vi in inf_model.graph.input:
        shp = _tensor_shape(vi)
        if vi.name in inits or _static(shp):
            continue
        what = f"ONNX model {net_name!r}: input {vi.name!r} has a dynamic, symbolic, zero or negative " \
               f"dimension ({_show(shp)})"
        if vi.name != first_input:
            raise ModelLoadError(f"{what}; input_shape only sets the first input ({first_input!r}): export the "
                                 "model with static input shapes")
        example = tuple(d if d else 1 for d in shp) if shp else (1, 3, 224, 224)
        raise ModelLoadError(f"{what}; pass a static input shape, e.g. input_shape={example}")
    guessed: list[str] = []  # unknown-op nodes whose output shape was assumed equal to the input shape
    shapes = _infer_static(inf_model, const_nodes, unsupported, consts, values, guessed)

    b = NetworkBuilder(net_name)
    producer: dict[str, int] = {}
    for vi in graph.input:
        if vi.name not in inits:
            try:
                check_size(shapes[vi.name], "shape")
                producer[vi.name] = b.add(T.INPUT, vi.name, [], shapes[vi.name], dims=_dims_attr(shapes[vi.name]))
            except IRError as e:
                raise ModelLoadError(f"ONNX model {net_name!r}: input {vi.name!r}: {e}") from None

    readers = Counter(i for n in layer_nodes for i in n.input if i) + Counter(o.name for o in graph.output)
    linear: set[int] = set()  # FullyConnected layers, whose bias Add (if any) they carry
    unknown_ops: Counter[str] = Counter()
    gelu_input, gelu_inner = _gelu_patterns(layer_nodes, consts, {o.name for o in graph.output})
    slow = _SlowPaths(consts, values, const_nodes, shapes, {o.domain if o.domain != "ai.onnx" else "": o.version
                                                            for o in proto.opset_import})
    for node in layer_nodes:
        op = node.op_type
        outs = [o for o in node.output if o]
        lname = node.name or (outs[0] if outs else op)
        if id(node) in gelu_inner:
            continue
        acts = [i for i in node.input if i and i not in consts]
        if id(node) in gelu_input:  # the last node of a written-out GELU: one GELU layer reading its input
            x = gelu_input[id(node)]
            producer[outs[0]] = b.add(T.GELU, lname, [producer[x]], shapes[outs[0]], in_shape=shapes[x], op="Gelu",
                                      dims=_dims_attr(shapes[outs[0]]))
            continue
        for i in acts:
            if i not in producer:
                raise ModelLoadError(f"ONNX node {lname!r} ({op}) reads tensor {i!r}, which no earlier node, graph "
                                     f"input or initializer defines (graph not topologically sorted?)")
        if op in ("Identity", "Cast"):  # (a cast of values is no layer, as the fx front end reads .to / .float)
            if outs:
                producer[outs[0]] = producer[acts[0]]
                slow.follow(node, acts)
            continue
        if op == "Add" and outs and len(acts) == 1 and producer[acts[0]] in linear and readers[acts[0]] == 1 \
                and _bias_of(node, acts[0], shapes):
            producer[outs[0]] = producer[acts[0]]
            slow.follow(node, acts)
            continue
        out_shape = shapes.get(outs[0]) if outs else None
        if out_shape is not None and 0 in tuple(out_shape) and op in _EMPTY_OK:  # an empty piece (a roll by 0):
            consts.update(outs)  # nothing to compute; its readers take their other inputs
            continue
        parents = [producer[i] for i in acts]
        x_shape = shapes.get(acts[0])
        in_shape = x_shape if _static(x_shape) else None
        out_shape = shapes.get(outs[0]) if outs else None
        try:
            kind, kw = _convert(node, consts, values, shapes, in_shape, out_shape)
        except _BadAttr as e:
            raise ModelLoadError(f"ONNX node {lname!r} ({op}): {e}") from None
        if kind == T.UNKNOWN:
            unknown_ops[_op_label(node)] += 1
            if not _static(out_shape):
                if in_shape is None:
                    raise ModelLoadError(f"cannot infer the output shape of ONNX node {lname!r} ({op}) nor of its "
                                         f"input {acts[0]!r}")
                out_shape = in_shape
                if lname not in guessed:
                    guessed.append(lname)
        elif not _static(out_shape):
            raise ModelLoadError(f"cannot infer a static output shape for ONNX node {lname!r} ({op}): shape "
                                 f"inference gave {_show(out_shape)}")
        kw.setdefault("in_shape", in_shape)
        kw.setdefault("out_shape", out_shape)
        units = slow.follow(node, acts, kind, shapes)
        if units:
            kw["slow"] = units
        if _static(out_shape) and (len(out_shape) != 4 or tuple(kw["out_shape"]) != tuple(out_shape)):
            kw["dims"] = tuple(int(d) for d in out_shape)  # the tensor's own shape, for display
        try:
            check_size(kw["in_shape"] or kw["out_shape"], "input shape")
            check_size(kw["out_shape"], "output shape")
            idx = b.add(kind, lname, parents, op=_op_label(node), **kw)
        except IRError as e:
            raise ModelLoadError(f"ONNX node {lname!r} ({op}): {e}") from None
        for o in outs:
            producer[o] = idx
        if kind == T.FULLY_CONNECTED:
            linear.add(idx)

    net = b.build()
    if unknown_ops:
        listed = ", ".join(f"{op} ({k})" for op, k in sorted(unknown_ops.items()))
        msg = f"ONNX model {net_name!r}: {sum(unknown_ops.values())} layer(s) of unsupported op types mapped to " \
              f"Unknown: {listed}"
        if guessed:
            msg += f"; output shape could not be inferred for {', '.join(repr(g) for g in guessed)}, " \
                   "assumed equal to the input shape"
        log.warning(msg)
    return net


def _bias_of(node: onnx.NodeProto, x: str, shapes: dict) -> bool:
    """Whether ``node`` (an ``Add`` reading activation ``x``) adds a constant that varies along the last axis
    only: one value per output feature of the layer writing ``x``."""
    other = [i for i in node.input if i and i != x]
    xs, cs = shapes.get(x), shapes.get(other[0]) if len(other) == 1 else None
    if not _static(xs) or cs is None or not _static(cs) or len(cs) > len(xs) or not len(xs):
        return False
    return math.prod(cs) == xs[-1] and (not len(cs) or cs[-1] == xs[-1])


# --------------------------------------------------------------------------------------------------
# loading and shape inference


def _load(model) -> tuple[onnx.ModelProto, str | None, str | None]:
    """The ModelProto, the folder for external data and a default network name."""
    if isinstance(model, onnx.ModelProto):
        proto, base_dir, stem = model, None, None
    elif isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.exists():
            raise ModelLoadError(f"ONNX file not found: {str(path)!r}")
        if not path.is_file():
            raise ModelLoadError(f"not a file: {str(path)!r}")
        try:
            # weights stored as external data are not needed (only their shapes are)
            proto = onnx.load(str(path), load_external_data=False)
        except DecodeError as e:
            raise ModelLoadError(f"{str(path)!r} is not a valid ONNX model (truncated or corrupt protobuf: {e})") \
                from None
        except OSError as e:
            raise ModelLoadError(f"cannot read ONNX file {str(path)!r}: {e}") from None
        base_dir, stem = str(path.parent), path.stem
    else:
        raise TypeError(f"from_onnx expects a path or an onnx.ModelProto, got {type(model).__name__}")
    if not proto.HasField("graph") or proto.ir_version <= 0 or not (proto.graph.node or proto.graph.input):
        where = "the given ModelProto" if stem is None else repr(str(model))
        raise ModelLoadError(f"{where} is not an ONNX model (no graph, IR version or nodes)")
    return proto, base_dir, stem


def _check_text(proto: onnx.ModelProto, stem: str | None) -> None:
    """Raise `ModelLoadError` naming the first name (graph, node, tensor, attribute) that is not UTF-8 text
    (protobuf hands such a field back as bytes, and copying it would fail later with a traceback)."""
    where = "the given ModelProto" if stem is None else repr(stem)
    g = proto.graph

    def check(values, what: str) -> None:
        try:
            ok = all(isinstance(v, str) for v in values)
        except UnicodeDecodeError:
            ok = False
        if not ok:
            raise ModelLoadError(f"ONNX model {where}: {what} is not valid UTF-8 text (corrupt file?)")

    check([g.name], "the graph name")
    for k, vi in enumerate((*g.input, *g.output, *g.value_info)):
        check([vi.name], f"the name of graph value #{k}")
    for k, t in enumerate(g.initializer):
        check([t.name, *(e.key for e in t.external_data), *(e.value for e in t.external_data)],
              f"the name of initializer #{k}")
    for k, node in enumerate(g.node):
        check([node.name, node.op_type, node.domain], f"the name, op type or domain of node #{k}")
        check([*node.input, *node.output], f"a tensor name of node #{k} ({node.op_type})")
        check([a.name for a in node.attribute], f"an attribute name of node #{k} ({node.op_type})")
    check([o.domain for o in proto.opset_import], "the domain of an opset import")
    check([f.name for f in proto.functions], "the name of a function")


def _numel(dims) -> int:
    return math.prod(int(d) for d in dims)


def _inference_model(proto: onnx.ModelProto, inits: dict, first_input: str,
                     input_shape: Sequence[int] | None) -> onnx.ModelProto:
    """A copy of the model for shape inference: big constants become typed inputs, the input shape is set."""
    g = proto.graph
    m = onnx.ModelProto()
    m.ir_version = proto.ir_version
    m.opset_import.extend(proto.opset_import)
    m.functions.extend(proto.functions)
    ng = m.graph
    ng.name = g.name
    big = {n for n, t in inits.items() if _numel(t.dims) > _BIG_CONST}
    declared = set()
    for vi in g.input:
        declared.add(vi.name)
        if vi.name in big:
            t = inits[vi.name]
            ng.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        else:
            ng.input.append(vi)
    for t in g.initializer:
        if t.name not in big:
            ng.initializer.append(t)
        elif t.name not in declared:
            ng.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    ng.sparse_initializer.extend(g.sparse_initializer)
    for node in g.node:
        t = _constant_tensor(node) if node.op_type == "Constant" else None
        if t is not None and _numel(t.dims) > _BIG_CONST:
            ng.input.append(helper.make_tensor_value_info(node.output[0], t.data_type, list(t.dims)))
        else:
            ng.node.append(node)
    ng.output.extend(g.output)

    if input_shape is None:
        ng.value_info.extend(g.value_info)
        return m
    try:
        dims = [int(d) for d in input_shape]
    except (TypeError, ValueError):
        raise ModelLoadError(f"input_shape must be a sequence of positive integers, got {input_shape!r}") from None
    if not dims or any(d <= 0 for d in dims):
        raise ModelLoadError(f"input_shape must be a sequence of positive integers, got {list(input_shape)!r}")
    if math.prod(dims) > MAX_ELEMS:
        raise ModelLoadError(f"input_shape {dims} has more than 2^50 elements; no network has tensors this large")
    vi = next(v for v in ng.input if v.name == first_input)
    tt = vi.type.tensor_type
    if tt.HasField("shape") and len(tt.shape.dim) != len(dims):
        raise ModelLoadError(f"input_shape {dims} has {len(dims)} dimensions but model input {first_input!r} has "
                             f"{len(tt.shape.dim)}")
    if tt.HasField("shape"):
        model_dims = _tensor_shape(vi) or ()
        clash = [i for i, (m_, d) in enumerate(zip(model_dims, dims)) if i > 0 and m_ and m_ > 0 and m_ != d]
        if clash:
            i = clash[0]
            raise ModelLoadError(f"input_shape {dims} conflicts with model input {first_input!r} of static shape "
                                 f"{_show(model_dims)}: dimension {i} is {dims[i]} in input_shape but {model_dims[i]} "
                                 "in the model (only the batch dimension and dynamic dimensions can be set)")
    tt.ClearField("shape")
    for d in dims:
        tt.shape.dim.add().dim_value = d
    if not tt.elem_type:
        tt.elem_type = TensorProto.FLOAT
    # shapes recorded for the old input shape would contradict the new one: let inference redo them
    for out in ng.output:
        if out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")
    return m


def _infer(m: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(m, check_type=False, strict_mode=False, data_prop=True)
    except Exception as e:  # onnx raises several unrelated types (InferenceError, ValidationError, RuntimeError)
        raise ModelLoadError(f"ONNX shape inference failed: {e}") from None


def _tensor_shape(vi: onnx.ValueInfoProto) -> tuple | None:
    """Dims of a typed tensor (None for unknown ones), or None when the rank is unknown or it is no tensor."""
    if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim)


def _collect_types(g: onnx.GraphProto) -> tuple[dict[str, tuple | None], dict[str, int]]:
    """Shape (see `_tensor_shape`) and element type of every typed tensor of a graph."""
    shapes: dict[str, tuple | None] = {}
    elems: dict[str, int] = {}
    for vi in (*g.input, *g.value_info, *g.output):
        if not vi.type.HasField("tensor_type"):
            continue
        elems[vi.name] = vi.type.tensor_type.elem_type
        shp = _tensor_shape(vi)
        if shp is not None or vi.name not in shapes:
            shapes[vi.name] = shp
    for t in g.initializer:
        shapes[t.name] = tuple(int(d) for d in t.dims)
        elems[t.name] = t.data_type
    return shapes, elems


def _static(shape) -> bool:
    return shape is not None and all(d is not None and d > 0 for d in shape)


def _show(shape) -> str:
    if shape is None:
        return "no shape"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _infer_static(m: onnx.ModelProto, const_nodes: list, unsupported: list, consts: set, values: "_Constants",
                  guessed: list) -> dict[str, tuple | None]:
    """Shapes of all tensors: ONNX shape inference, rerun on ``m`` (modified in place) while it makes progress.

    Between runs, (1) constant computations on now static shapes (``Shape -> Gather -> Div -> Slice`` chains
    of dynamic-shape exports, which ONNX's data propagation only partly evaluates) are folded into
    initializers, and (2) unsupported ops that shape inference cannot handle get their input's shape
    (their names are appended to ``guessed``).
    """
    opsets = {o.domain if o.domain != "ai.onnx" else "": o.version for o in m.opset_import}
    pending = [n for n in const_nodes if n.op_type != "Constant" and _foldable(n)]
    tried: set[str] = set()
    while True:
        shapes, elems = _collect_types(_infer(m).graph)
        folded = _fold_constants(pending, shapes, values, opsets)
        fixes = []
        for node in unsupported:
            outs = [o for o in node.output if o]
            acts = [i for i in node.input if i and i not in consts]
            if outs and acts and outs[0] not in tried and not _static(shapes.get(outs[0])) \
                    and _static(shapes.get(acts[0])):
                tried.add(outs[0])
                fixes.append((outs[0], elems.get(acts[0]) or TensorProto.FLOAT, shapes[acts[0]]))
                guessed.append(node.name or outs[0])
        if not folded and not fixes:
            return shapes
        g = m.graph
        if folded:
            keep = [n for n in g.node if not any(o in folded for o in n.output)]
            del g.node[:]
            g.node.extend(keep)
            g.initializer.extend(folded.values())
        if fixes:
            names = {f[0] for f in fixes}
            outputs = {o.name: o for o in g.output}
            keep_vi = [vi for vi in g.value_info if vi.name not in names]
            del g.value_info[:]
            g.value_info.extend(keep_vi)
            for tname, elem, shp in fixes:
                vi = helper.make_tensor_value_info(tname, elem, list(shp))
                if tname in outputs:
                    outputs[tname].type.CopyFrom(vi.type)
                else:
                    g.value_info.append(vi)


# --------------------------------------------------------------------------------------------------
# constants


def _constant_tensor(node: onnx.NodeProto) -> TensorProto | None:
    for a in node.attribute:
        if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
            return a.t
    return None


class _Constants:
    """Values of constant tensors: initializers, Constant nodes and folded computations (read lazily)."""

    def __init__(self, inits: dict, const_nodes: list, base_dir: str | None) -> None:
        self._inits = inits
        self._nodes = {n.output[0]: n for n in const_nodes if n.op_type == "Constant" and n.output}
        self._base = base_dir or ""
        self.values: dict[str, np.ndarray] = {}

    def get(self, name: str, limit: int | None = None) -> np.ndarray | None:
        """The value of constant ``name``; None if unknown, unreadable or (with ``limit``) too large."""
        v = self.values.get(name)
        if v is not None:
            return v
        try:
            if name in self._inits:
                t = self._inits[name]
                if limit is not None and _numel(t.dims) > limit:
                    return None
                v = numpy_helper.to_array(t, self._base)
            elif name in self._nodes:
                attr = self._nodes[name].attribute
                if not attr or attr[0].type == onnx.AttributeProto.SPARSE_TENSOR:
                    return None
                if attr[0].type == onnx.AttributeProto.TENSOR:
                    if limit is not None and _numel(attr[0].t.dims) > limit:
                        return None
                    v = numpy_helper.to_array(attr[0].t, self._base)
                else:
                    raw = helper.get_attribute_value(attr[0])
                    v = np.asarray(raw, np.float32 if attr[0].type in (onnx.AttributeProto.FLOAT,
                                                                         onnx.AttributeProto.FLOATS) else None)
            else:
                return None
        except Exception:  # unreadable external data or an exotic encoding: treat the value as unknown
            return None
        if limit is not None and v.size > limit:
            return None
        if v.size <= _BIG_CONST:
            self.values[name] = v
        return v


def _foldable(node: onnx.NodeProto) -> bool:
    """Whether a constant node may be evaluated at load time (deterministic, no subgraphs)."""
    if node.op_type.startswith("Random") or node.op_type in ("Multinomial", "Bernoulli"):
        return False
    return not any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


def _fold_constants(pending: list, shapes: dict, values: _Constants, opsets: dict) -> dict[str, TensorProto]:
    """Evaluate the pending constant nodes whose inputs are known and small; removes them from ``pending``."""
    folded: dict[str, TensorProto] = {}
    rest = []
    for node in pending:
        outs = _fold_node(node, shapes, values, opsets)
        if outs is None:
            rest.append(node)
            continue
        for name, v in outs.items():
            values.values[name] = v
            folded[name] = numpy_helper.from_array(v, name)
    pending[:] = rest
    return folded


def _fold_node(node: onnx.NodeProto, shapes: dict, values: _Constants, opsets: dict,
               limit: int = _BIG_CONST) -> dict | None:
    """The outputs of constant ``node`` evaluated (inputs and outputs of at most ``limit`` elements), or None."""
    op = node.op_type
    if op in ("Shape", "Size"):
        shp = shapes.get(node.input[0])
        if not _static(shp):
            return None
        if op == "Size":
            return {node.output[0]: np.array(math.prod(shp), np.int64)}
        a = _attrs(node)
        return {node.output[0]: np.array(shp[slice(a.get("start", 0), a.get("end", len(shp)))], np.int64)}
    feeds = {}
    for i in node.input:
        if i:
            v = values.get(i, limit=limit)
            if v is None:
                return None
            feeds[i] = v
    try:
        from onnx.reference import ReferenceEvaluator

        res = ReferenceEvaluator(node, opsets=opsets).run(None, feeds)
        out = {}
        for name, v in zip(node.output, res):
            if not name:
                continue
            if not isinstance(v, np.ndarray) or v.size > limit:
                return None
            numpy_helper.from_array(v, name)  # representable as an initializer
            out[name] = v
    except Exception:  # an op the reference evaluator lacks, or odd values: leave it to shape inference
        return None
    return out


# --------------------------------------------------------------------------------------------------
# per-op conversion


class _SlowPaths:
    """A layer's work on a runtime's slow path (`ir.SLOW_UNITS`), returned by `follow`: a transpose's
    element-wise copies (`ir.transpose_slow`), and the subnormal values of masked attention: logits offset by a
    mask constant in `SUBNORMAL_LOGITS`, the softmax probabilities made from them, the MatMul reading those."""

    def __init__(self, consts: set[str], values: "_Constants", const_nodes: list, shapes: dict,
                 opsets: dict) -> None:
        self.consts, self.values, self.shapes, self.opsets = consts, values, shapes, opsets
        self.made_by = {o: n for n in const_nodes if _foldable(n) for o in n.output if o}
        self.tried: set[str] = set()
        self.logits: dict[str, float] = {}  # tensor -> share of elements offset into the subnormal band
        self.probs: dict[str, float] = {}  # tensor -> share of subnormal softmax outputs

    def _value(self, name: str, depth: int = 0) -> np.ndarray | None:
        """A constant's value, computing the constant nodes that make it (a mask built from shapes and
        comparisons) where the loader did not fold it (it folds small constants only)."""
        v = self.values.get(name, limit=MASK_SCAN_LIMIT)
        if v is not None or name not in self.made_by or name in self.tried or depth > 64:
            return v
        self.tried.add(name)
        node = self.made_by[name]
        for i in node.input:
            if i:
                self._value(i, depth + 1)
        self.values.values.update(_fold_node(node, self.shapes, self.values, self.opsets, MASK_SCAN_LIMIT) or {})
        return self.values.values.get(name)

    def _band_share(self, name: str) -> float:
        v = self._value(name)
        return 0.0 if v is None else subnormal_share(v)

    def follow(self, node: onnx.NodeProto, acts: list[str], kind: LayerType | None = None,
               shapes: dict | None = None) -> int:
        op, outs = node.op_type, [o for o in node.output if o]
        if kind == T.TRANSPOSE and shapes and acts and _static(shapes.get(acts[0])):
            x = shapes[acts[0]]
            if op == "Transpose":
                perm = _attrs(node).get("perm") or list(range(len(x)))[::-1]
            elif op == "Einsum":  # one operand, its indices permuted
                eq = _attrs(node)["equation"]
                lhs, rhs = (eq.decode() if isinstance(eq, bytes) else eq).replace(" ", "").split("->")
                perm = [lhs.index(c) for c in rhs]
            else:
                perm = list(range(len(x)))
            perm = [int(p) % len(x) for p in perm]
            if sorted(perm) == list(range(len(x))):
                self.follow_values(op, acts, outs)
                return transpose_slow(x, perm)
        return self.follow_values(op, acts, outs, node, kind, shapes)

    def follow_values(self, op: str, acts: list[str], outs: list[str], node: onnx.NodeProto | None = None,
                      kind: LayerType | None = None, shapes: dict | None = None) -> int:
        """Subnormal values through ``node``: the shares its outputs carry, its slow work on them."""
        if not outs or not (self.logits or self.probs or op == "Add"):
            return 0
        if op in _VALUE_KEEPING and acts:
            for table in (self.logits, self.probs):
                if acts[0] in table:
                    table[outs[0]] = table[acts[0]]
            return 0
        if op == "Add":
            assert node is not None
            share = max([self.logits.get(i, 0.0) for i in acts]
                        + [self._band_share(i) for i in node.input if i and i in self.consts])
            if share > 0:
                self.logits[outs[0]] = share
            return 0
        if kind == T.SOFTMAX and acts and acts[0] in self.logits:
            share = self.probs[outs[0]] = self.logits[acts[0]]
            return round(share * _numel(shapes[outs[0]])) if shapes else 0
        if kind == T.MATMUL and op == "MatMul" and shapes and node is not None:
            share = max((self.probs.get(i, 0.0) for i in acts), default=0.0)
            if share > 0:
                k = shapes[node.input[0]][-1]
                return round(share * _numel(shapes[outs[0]]) * int(k))
        return 0


def _op_label(node: onnx.NodeProto) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def _attrs(node: onnx.NodeProto) -> dict:
    out = {}
    for a in node.attribute:
        try:
            v = helper.get_attribute_value(a)
        except ValueError:  # an attribute of undefined type
            v = None
        out[a.name] = v.decode(errors="replace") if isinstance(v, bytes) else v
    return out


class _BadAttr(Exception):
    """A malformed attribute or operand list of a node (the message says which); a `ModelLoadError` later."""




def _int_attr(a: dict, key: str, default: int, low: int) -> int:
    v = a.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= MAX_WINDOW:
        raise _BadAttr(f"attribute {key}={v!r}: expected an integer from {low} to 2^24")
    return v


def _ints_attr(a: dict, key: str, n: int, low: int, default: int) -> list[int]:
    """A per-axis integer list attribute of length ``n`` (the default when absent), each in [low, 2^24]."""
    v = a.get(key)
    if v is None:
        return [default] * n
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise _BadAttr(f"attribute {key}={v!r}: expected a list of integers")
    if len(v) != n:
        raise _BadAttr(f"attribute {key}={v!r} has {len(v)} entries, expected {n}")
    bad = [x for x in v if not low <= x <= MAX_WINDOW]
    if bad:
        raise _BadAttr(f"attribute {key}={v!r} holds {bad[0]}: values must be " +
                       ("positive" if low > 0 else "non-negative") + " and at most 2^24")
    return v


def _float_attr(a: dict, key: str, default: float | None) -> float | None:
    v = a.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        raise _BadAttr(f"attribute {key}={v!r}: expected a finite number")
    return float(v)


def _operands(node: onnx.NodeProto, n: int) -> None:
    if len(node.input) < n or not all(node.input[:n]):
        raise _BadAttr(f"needs {n} inputs, has {len([i for i in node.input if i])}")


def _fold_axes(vals: Sequence[int], fill: int, combine=math.prod) -> tuple[int, int]:
    """Spatial per-axis values folded to (h, w) the way `to_nchw` folds the spatial dimensions."""
    v = [int(x) for x in vals]
    if not v:
        return (fill, fill)
    if len(v) == 1:
        return (v[0], fill)
    if len(v) == 2:
        return (v[0], v[1])
    return (int(combine(v[:-1])), v[-1])


def _window_attrs(a: dict, x: Sequence[int], out: Sequence[int], kernel: Sequence[int]) -> None:
    """Check kernel, strides, dilations, pads and auto_pad of a sliding-window op against its input rank."""
    nsp = len(kernel)
    if nsp != len(x) - 2 or len(out) != len(x):
        raise _BadAttr(f"a {nsp}-D kernel {list(kernel)} does not fit input {_show(x)} / output {_show(out)}")
    _ints_attr(a, "kernel_shape", nsp, 1, 1) if "kernel_shape" in a else None
    if any(not isinstance(k, int) or k < 1 or k > MAX_WINDOW for k in kernel):
        raise _BadAttr(f"kernel {list(kernel)}: sizes must be positive")
    _ints_attr(a, "strides", nsp, 1, 1)
    _ints_attr(a, "dilations", nsp, 1, 1)
    _ints_attr(a, "pads", 2 * nsp, 0, 0)
    auto_pad = a.get("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise _BadAttr(f"attribute auto_pad={auto_pad!r}: expected NOTSET, SAME_UPPER, SAME_LOWER or VALID")


def _early_window_check(node: onnx.NodeProto, a: dict, x: Sequence[int]) -> None:
    """The window attributes of a Conv / ConvTranspose / pool that need no output shape."""
    if node.op_type in ("Conv", "ConvTranspose"):
        _operands(node, 2)
        _int_attr(a, "group", 1, 1)
    elif not isinstance(a.get("kernel_shape"), list):
        raise _BadAttr("attribute kernel_shape is missing or not a list of integers")
    nsp = len(x) - 2
    if nsp < 1:
        raise _BadAttr(f"input {_show(x)} has no spatial dimension")
    _ints_attr(a, "kernel_shape", nsp, 1, 1)
    _ints_attr(a, "strides", nsp, 1, 1)
    _ints_attr(a, "dilations", nsp, 1, 1)
    _ints_attr(a, "pads", 2 * nsp, 0, 0)
    if node.op_type == "ConvTranspose":
        _ints_attr(a, "output_padding", nsp, 0, 0)


def _window(a: dict, x: Sequence[int], out: Sequence[int], kernel: Sequence[int]) -> dict:
    """kernel / stride / total padding / dilation of a sliding-window op, folded to two axes."""
    _window_attrs(a, x, out, kernel)
    nsp = len(kernel)
    s = list(a.get("strides") or [1] * nsp)
    d = list(a.get("dilations") or [1] * nsp)
    auto_pad = a.get("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad == "NOTSET":
        p = list(a.get("pads") or [0] * 2 * nsp)
        tot = [p[i] + p[i + nsp] for i in range(nsp)]
    else:  # SAME_* / VALID: the padding that produces the inferred output size
        tot = [max((out[2 + i] - 1) * s[i] + (kernel[i] - 1) * d[i] + 1 - x[2 + i], 0) for i in range(nsp)]
    return dict(kernel=_fold_axes(kernel, 1), stride=_fold_axes(s, 1), padding=_fold_axes(tot, 0, sum),
                dilation=_fold_axes(d, 1))


#: ops of a GELU written out in elementwise operations (exporters below opset 20: ``0.5 x (1 + erf(x / sqrt 2))``
#: and the tanh form ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``)
_GELU_OPS = frozenset({"Div", "Mul", "Add", "Pow", "Sub"})


def _gelu_patterns(nodes: Sequence[onnx.NodeProto], consts: set[str], graph_outputs: set[str]
                   ) -> tuple[dict[int, str], set[int]]:
    """Written-out GELUs: (id of each one's last node -> its input tensor, ids of its other nodes).

    From each Erf or Tanh node, the elementwise nodes feeding it back to one tensor x, and those after it that
    read only x, constants and the group's own results, form the group; it is a GELU when exactly one of its
    results leaves it. The runtimes fuse the group into one GELU (ONNX Runtime's GeluFusion, OpenVINO), and
    the fx front end reads ``nn.GELU`` as one layer: so does this one.
    """
    made = {o: n for n in nodes for o in n.output if o}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for n in nodes:
        for i in n.input:
            if i and i not in consts:
                readers.setdefault(i, []).append(n)
    last_of: dict[int, str] = {}
    inner: set[int] = set()
    for core in nodes:
        if core.op_type not in ("Erf", "Tanh") or id(core) in inner:
            continue
        group, roots, todo = {id(core): core}, set(), [i for i in core.input if i and i not in consts]
        while todo and len(group) <= 12:  # back to x through elementwise producers
            t = todo.pop()
            p = made.get(t)
            acts = [i for i in p.input if i and i not in consts] if p is not None else []
            if p is None or p.op_type not in _GELU_OPS or not acts or len(readers.get(t, [])) > 1:
                roots.add(t)  # (x itself is read twice: inside the erf / tanh and by the final product)
            elif id(p) not in group:
                group[id(p)] = p
                todo.extend(acts)
        if len(roots) != 1:
            continue
        (x,) = roots
        inside = {o for n in group.values() for o in n.output} | {x}
        frontier = list(core.output)
        while frontier and len(group) <= 12:  # on through the nodes reading only x, constants and the group
            t = frontier.pop()
            for r in readers.get(t, []):
                if id(r) in group or r.op_type not in _GELU_OPS:
                    continue
                if all(i in inside or i in consts for i in r.input if i):
                    group[id(r)] = r
                    inside.update(r.output)
                    frontier.extend(r.output)
        leaving = [n for n in group.values()
                   if any(o in graph_outputs or any(id(r) not in group for r in readers.get(o, [])) for o in n.output)]
        if len(leaving) != 1 or len(group) < 4:
            continue
        last_of[id(leaving[0])] = x
        inner.update(k for k in group if k != id(leaving[0]))
    return last_of, inner


def _need(shape, node: onnx.NodeProto, what: str):
    if not _static(shape):
        raise ModelLoadError(f"cannot infer a static shape for the {what} of ONNX node "
                             f"{node.name or node.output[0]!r} ({node.op_type}): got {_show(shape)}")
    return shape


def _matmul_shapes(a: Sequence[int], b: Sequence[int], out: Sequence[int], trans_a: bool = False):
    """(in_shape, out_shape) of a matrix product with c_in = K and c_out = N (see the module docstring)."""
    k = a[0] if trans_a else a[-1]
    m = (a[1] if trans_a else a[-2]) if len(a) >= 2 else 1
    n = b[-1] if len(b) >= 2 else 1
    if len(out) >= 3:
        batch = _numel(out) // max(m * n, 1)
        return (batch, k, m, 1), (batch, n, m, 1)
    return (m, k), (m, n)


def _dims_attr(shape: Any) -> tuple[int, ...] | None:
    """The ``dims`` attribute of a layer writing a tensor of ``shape``: its real shape where the NCHW columns
    fold it (rank other than 4), for display; None otherwise."""
    return tuple(int(d) for d in shape) if shape is not None and len(shape) != 4 else None


def _leading_axis(axis: object, shape: Sequence[int] | None) -> bool:
    """Whether ``axis`` is the leading axis of a tensor of rank >= 2 of ``shape`` (a `LayerType.PICK`)."""
    if shape is None or len(shape) < 2 or isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        return False
    return int(axis) in (0, -len(shape))


def _convert(node, consts, values, shapes, in_shape, out_shape):
    """Layer type and `NetworkBuilder.add` keywords for one node (shapes default to the tensors')."""
    op = node.op_type
    if op in _SIMPLE:
        kw: dict = {}
        if op == "Split" and _leading_axis(_attrs(node).get("axis", 0), shapes.get(node.input[0])):
            return T.PICK, kw  # (pieces of the leading axis: contiguous parts of the input)
        if op == "LeakyRelu":
            kw["alpha"] = _float_attr(_attrs(node), "alpha", 0.01)
        elif op in ("Resize", "Upsample"):  # the interpolation taps follow it (`ir.resize_taps`)
            kw["mode"] = str(_attrs(node).get("mode") or "nearest")
        return _SIMPLE[op], kw
    if op not in _SPECIAL:
        return T.UNKNOWN, {}
    a = _attrs(node)
    if op == "Clip":
        lo, hi = _float_attr(a, "min", None), _float_attr(a, "max", None)
        dynamic = False
        for pos, key in ((1, "lo"), (2, "hi")):
            if len(node.input) > pos and node.input[pos]:
                if node.input[pos] not in consts:
                    dynamic = True
                    continue
                v = values.get(node.input[pos])
                if v is None or v.size != 1:
                    dynamic = True
                    continue
                if key == "lo":
                    lo = float(v.reshape(-1)[0])
                else:
                    hi = float(v.reshape(-1)[0])
        if not dynamic and lo == 0.0 and hi == 6.0:
            return T.RELU6, {}
        return T.CLIP, {"clip_min": lo, "clip_max": hi}
    x = _need(in_shape, node, "input")
    if op in ("Conv", "ConvTranspose", "MaxPool", "AveragePool"):
        _early_window_check(node, a, x)  # before the output shape, which bad attributes leave uninferred
    out = _need(out_shape, node, "output")
    if op in ("Conv", "ConvTranspose"):
        _operands(node, 2)
        w = _need(shapes.get(node.input[1]), node, "weight")
        groups = _int_attr(a, "group", 1, 1)
        kernel = list(a.get("kernel_shape") or w[2:])
        _window_attrs(a, x, out, kernel)
        if op == "ConvTranspose":
            _ints_attr(a, "output_padding", len(kernel), 0, 0)
        if op == "Conv":
            kw = _window(a, x, out, kernel)
            return conv_type(int(x[1]), int(out[1]), groups), dict(groups=groups, **kw)
        nsp = len(kernel)
        s = list(a.get("strides") or [1] * nsp)
        d = list(a.get("dilations") or [1] * nsp)
        if a.get("pads") and a.get("auto_pad", "NOTSET") in ("NOTSET", "") and "output_shape" not in a:
            p = list(a["pads"])
            tot = [p[i] + p[i + nsp] for i in range(nsp)]
        else:  # derived from the inferred output size (auto_pad, output_shape)
            op_ = list(a.get("output_padding") or [0] * nsp)
            tot = [max(s[i] * (x[2 + i] - 1) + op_[i] + (kernel[i] - 1) * d[i] + 1 - out[2 + i], 0)
                   for i in range(nsp)]
        return T.CONV_TRANSPOSE, dict(kernel=_fold_axes(kernel, 1), stride=_fold_axes(s, 1),
                                      padding=_fold_axes(tot, 0, sum), dilation=_fold_axes(d, 1), groups=groups)
    if op in ("MaxPool", "AveragePool"):
        if not isinstance(a.get("kernel_shape"), list):
            raise _BadAttr("attribute kernel_shape is missing or not a list of integers")
        kw = _window(a, x, out, list(a["kernel_shape"]))
        return (T.MAX_POOL if op == "MaxPool" else T.AVG_POOL), kw
    if op in ("GlobalAveragePool", "GlobalMaxPool"):
        _, _, h, wd = to_nchw(x)
        return T.GLOBAL_POOL, dict(kernel=(h, wd), pool="avg" if op == "GlobalAveragePool" else "max")
    if op in _REDUCE:
        if op in ("ArgMax", "ArgMin", "TopK"):  # (TopK: the k largest along an axis, as a reduction to k)
            return T.REDUCE_MEAN, {}
        axes = a.get("axes")
        if axes is not None and (not isinstance(axes, list) or not all(isinstance(i, int) for i in axes)):
            raise _BadAttr(f"attribute axes={axes!r}: expected a list of integers")
        if axes is None and len(node.input) > 1 and node.input[1]:
            v = values.get(node.input[1]) if node.input[1] in consts else None
            axes = None if v is None else [int(i) for i in v.reshape(-1)]
        r = len(x)
        spatial = list(range(2, r))
        if op in ("ReduceMean", "ReduceMax") and axes is not None and r >= 3 \
                and sorted({int(i) % r for i in axes}) == spatial:
            _, _, h, wd = to_nchw(x)
            return T.GLOBAL_POOL, dict(kernel=(h, wd), pool="avg" if op == "ReduceMean" else "max")
        return T.REDUCE_MEAN, {}  # (any reduction: it reads every element once)
    if op in ("Gemm", "MatMul"):
        _operands(node, 2)
        _int_attr(a, "transA", 0, 0)
        _int_attr(a, "transB", 0, 0)
        a_shape = _need(shapes.get(node.input[0]), node, "first operand")
        b_shape = _need(shapes.get(node.input[1]), node, "second operand")
        trans_a = op == "Gemm" and bool(a.get("transA", 0))
        if op == "Gemm" and a.get("transB", 0):
            b_shape = tuple(reversed(b_shape))
        ins, outs = _matmul_shapes(a_shape, b_shape, out, trans_a)
        kind = T.FULLY_CONNECTED if node.input[1] in consts else T.MATMUL
        return kind, dict(in_shape=ins, out_shape=outs)
    if op == "Gather":  # picking along an axis (a head of a fused q/k/v tensor) is a slice; a table lookup is not
        if node.input[0] in consts:
            return T.UNKNOWN, {}
        index = values.get(node.input[1]) if len(node.input) > 1 else None
        scalar = index is not None and np.ndim(index) == 0
        return (T.PICK if scalar and _leading_axis(a.get("axis", 0), shapes.get(node.input[0])) else T.SLICE), {}
    if op == "Einsum":
        return _einsum(a, node, shapes, out)
    raise AssertionError(op)


def _einsum(a: dict, node, shapes, out: Sequence[int]):
    """An Einsum of two tensors that contracts an index: a (batched) matrix product with batch = the indices
    both operands and the output keep, m / n = the output indices of one operand only, k = the contracted ones;
    of one tensor: a permutation (a copy) or a reduction. The fx front end reads ``torch.einsum`` alike."""
    eq = a.get("equation")
    if isinstance(eq, bytes):
        eq = eq.decode()
    if not isinstance(eq, str) or "->" not in eq or "..." in eq:
        return T.UNKNOWN, {}
    lhs, rhs = eq.replace(" ", "").split("->")
    terms = lhs.split(",")
    if len(terms) != len(node.input):
        raise _BadAttr(f"equation {eq!r} names {len(terms)} operands, the node has {len(node.input)}")
    size: dict[str, int] = {}
    for term, name in zip(terms, node.input):
        shape = _need(shapes.get(name), node, "operand")
        if len(shape) != len(term):
            raise _BadAttr(f"equation {eq!r}: operand {term!r} has {len(shape)} dimensions")
        for c, d in zip(term, shape):
            size[c] = max(size.get(c, 1), int(d))
    if len(terms) == 1:
        return (T.TRANSPOSE if sorted(rhs) == sorted(terms[0]) else T.REDUCE_MEAN), {}
    if len(terms) != 2:
        return T.UNKNOWN, {}
    ta, tb = terms
    prod = (lambda idx: int(np.prod([size[c] for c in idx], dtype=np.int64)))
    batch = prod([c for c in rhs if c in ta and c in tb])
    m, n = prod([c for c in rhs if c in ta and c not in tb]), prod([c for c in rhs if c in tb and c not in ta])
    k_idx = [c for c in ta if c in tb and c not in rhs]
    if not k_idx:
        return T.MUL, {}
    return T.MATMUL, dict(in_shape=(batch, prod(k_idx), m, 1), out_shape=(batch, n, m, 1))  # pragma: no cover - _SPECIAL and the branches above agree
