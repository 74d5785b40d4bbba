"""torch.fx front end: ``nn.Module`` + input shape -> `Network`, without running the model.

The module is traced symbolically once (``torch.fx.Tracer``, the tracer behind ``symbolic_trace``; the
`GraphModule` code generation that ``symbolic_trace`` adds is skipped because nothing here executes the
graph). The graph is then walked once, computing each node's output shape with analytic rules looked up
by module class, function object or method name. There is no forward pass: the analytic path performs no
torch operation at all.

Nodes without an analytic rule are evaluated alone on the ``meta`` device (shapes only, no data) and
become ``Unknown`` layers carrying ``op=<name>``; one warning lists them. Modules whose ``forward`` cannot
be traced symbolically (control flow on tensor values) are exported to ONNX and read by the ONNX front end;
inputs larger than 256 per spatial dimension are exported at small probe sizes and scaled back by ONNX shape
inference, so the fallback never needs the memory of a full-size forward pass when the probes carry over.

Mapping to layer types follows what the ONNX front end produces for an ONNX export of the same model, with
layers named after the module's qualified name (``layer1.0.conv1``, attribute ``module``; a module called
twice gives ``layer1.0.relu`` and ``layer1.0.relu_1``) or, for functions and methods, after the fx node
(``add_3``, attribute ``scope``: the module whose ``forward`` made the call). Conventions shared with the
ONNX front end: products with batch dimensions ``[B..., M, K] x [K, N]`` store ``(prod(B), K, M, 1) ->
(prod(B), N, M, 1)``; ``clamp(0, 6)`` is ``Relu6``; a mean or amax over all spatial dimensions is a
``GlobalPool``; ``split``/``chunk``/``unbind`` are one ``Slice`` layer carrying the first piece's shape;
squeeze/unsqueeze/view/reshape are ``Reshape``. Unlike the exporter, BatchNorm is kept as a layer (fusing
it is the mapping pass's job). Ops that export to nothing (dropout, identity, ``contiguous``, dtype casts)
produce no layer; shape queries (``x.size(0)``, ``x.shape[2]``) evaluate to Python ints; tensors that
depend only on parameters, constants and shapes (``zeros_like``) are folded, as the exporter does.
"""

from __future__ import annotations

import copy
import io
import logging
import math
import operator
import os
import warnings
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.fx import Node, Tracer

from ..errors import ModelLoadError
from ..ir import MAX_ELEMS, IRError, LayerType, Network, NetworkBuilder, conv_type

__all__ = ["trace"]

log = logging.getLogger(__name__)
T = LayerType


def trace(module: nn.Module, input_shape: Sequence[int] | Sequence[Sequence[int]],
          name: str | None = None) -> Network:
    """Convert ``module`` called on tensors of ``input_shape`` into a layer `Network`.

    ``input_shape`` is one shape (``(1, 3, 224, 224)``) or one shape per ``forward`` argument. Shapes are
    derived analytically; the model is never run. If ``torch.fx`` cannot trace ``forward`` (e.g. an ``if``
    on a tensor value) the module is exported to ONNX (which runs it once on zeros; large inputs are run at
    a small probe size and scaled back by ONNX shape inference) and converted by `annette_torch.from_onnx`;
    a warning says when ``forward`` branched on tensor values. Raises `ModelLoadError` for a bad shape, a non-module, or a model that
    neither path can read.
    """
    if not isinstance(module, nn.Module):
        raise ModelLoadError(f"trace() needs a torch.nn.Module, got {type(module).__name__}; "
                             "for an ONNX file use annette_torch.from_onnx")
    shapes = _parse_shapes(input_shape)
    cls = type(module).__name__
    name = name or cls
    try:
        graph = Tracer().trace(module)
    except Exception as e:  # noqa: BLE001 - any tracing failure means: try the ONNX route
        return _onnx_fallback(module, shapes, name, f"{type(e).__name__}: {_first_line(e)}")
    walker = _Walker(module, shapes, name)
    try:
        net = walker.run(graph)
    except _NeedsOnnx as e:
        return _onnx_fallback(module, shapes, name, str(e))
    if walker.unknown:
        ops = ", ".join(f"{op} (x{n})" if n > 1 else op for op, n in walker.unknown.items())
        log.warning("trace(%s): no layer model type for %d node(s), typed Unknown (shapes from the meta "
                    "device): %s", cls, sum(walker.unknown.values()), ops)
    return net


# ------------------------------------------------------------------------------------------------------
# values flowing through the walk


class _TV:
    """A tensor: the layer producing it (-1 for a constant: parameter, buffer, folded value) and shape."""

    __slots__ = ("layer", "shape", "dtype")

    def __init__(self, layer: int, shape: tuple[int, ...], dtype: torch.dtype | None = None) -> None:
        self.layer = layer
        self.shape = shape
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Tensor{list(self.shape)}"


class _ShapeError(Exception):
    """The model cannot run on the given shapes (a user mistake): becomes a `ModelLoadError`."""


class _NoRule(Exception):
    """An analytic rule does not cover this call: evaluate the node on the meta device instead."""


class _NeedsOnnx(Exception):
    """A node cannot be evaluated on the meta device: convert the whole model through ONNX."""


def _load(a: Any, env: dict) -> Any:
    t = type(a)
    if t is Node:
        return env[a]
    if t is tuple or t is list:
        return t(_load(x, env) for x in a)
    if t is dict:
        return {k: _load(v, env) for k, v in a.items()}
    if t is slice:
        return slice(_load(a.start, env), _load(a.stop, env), _load(a.step, env))
    if isinstance(a, (tuple, list)):  # fx's immutable_list, torch.Size
        return tuple(_load(x, env) for x in a)
    if isinstance(a, dict):  # fx's immutable_dict
        return {k: _load(v, env) for k, v in a.items()}
    return a


def _has_tv(a: Any) -> bool:
    t = type(a)
    if t is _TV:
        return True
    if t is tuple or t is list:
        return any(_has_tv(x) for x in a)
    if t is dict:
        return any(_has_tv(x) for x in a.values())
    return False


def _tvs(a: Any, out: list) -> list:
    t = type(a)
    if t is _TV:
        out.append(a)
    elif t is tuple or t is list:
        for x in a:
            _tvs(x, out)
    elif t is dict:
        for x in a.values():
            _tvs(x, out)
    return out


def _arg(args: tuple, kwargs: dict, i: int, key: str, default: Any = None) -> Any:
    if len(args) > i:
        return args[i]
    return kwargs.get(key, default)


def _x(args: tuple, kwargs: dict) -> _TV:
    x = args[0] if args else kwargs.get("input")
    if type(x) is not _TV:
        raise _NoRule("first argument is not a tensor")
    return x


def _prod(xs) -> int:
    p = 1
    for v in xs:
        p *= v
    return p


def _tup(v: Any, n: int) -> tuple:
    if isinstance(v, (tuple, list)):
        v = tuple(v)
        return v * n if len(v) == 1 else v
    return (v,) * n


def _dim(d: int, rank: int) -> int:
    if not -rank <= d < max(rank, 1):
        raise _ShapeError(f"dimension {d} out of range for a {rank}-D tensor")
    return d + rank if d < 0 else d


def _fold2(v: tuple, fill: int) -> tuple[int, int]:
    """Per-spatial-dim values -> the IR's (h, w): 1-D (v, fill); 3-D (v0*v1, v2) for kernels."""
    if len(v) == 1:
        return (v[0], fill)
    return (v[-2], v[-1])


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    if len(shapes) == 1:
        return shapes[0]
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for s in shapes:
        off = rank - len(s)
        for i, d in enumerate(s):
            o = out[off + i]
            if o == 1:
                out[off + i] = d
            elif d != 1 and d != o:
                raise _ShapeError(f"shapes {' and '.join(str(list(x)) for x in shapes)} do not broadcast")
    return tuple(out)


# ------------------------------------------------------------------------------------------------------
# the walk


_PURE_MODULES = {"_operator", "operator", "builtins", "math"}


class _Walker:
    def __init__(self, root: nn.Module, shapes: list[tuple[int, ...]], name: str) -> None:
        self.root = root
        self.shapes = shapes
        self.b = NetworkBuilder(name)
        self.unknown: dict[str, int] = {}
        self.meta_modules: dict[str, nn.Module] = {}
        self.name = ""  # layer name of the node being converted
        self.module: str | None = None  # its qualified module name (call_module nodes)
        self.scope: str | None = None  # qualified name of the module whose forward() calls a function

    # -- layer creation -----------------------------------------------------------------------------
    def emit(self, t: LayerType, tvs: Sequence[_TV], shape: tuple[int, ...], in_shape: Sequence[int] | None = None,
             ir_out: Sequence[int] | None = None, name: str | None = None, **kw: Any) -> _TV:
        """Add a layer fed by the non-constant tensors ``tvs``; all-constant inputs fold to a constant."""
        inputs = [v.layer for v in tvs if v.layer >= 0]
        if not inputs:
            return _TV(-1, shape)
        if in_shape is None:
            for v in tvs:
                if v.layer >= 0:
                    in_shape = v.shape
                    break
        if self.module is not None:
            kw["module"] = self.module
        elif self.scope is not None:
            kw["scope"] = self.scope
        idx = self.b.add(t, name or self.name, inputs, shape if ir_out is None else ir_out,
                         in_shape=in_shape, **kw)
        return _TV(idx, shape)

    # -- main loop ----------------------------------------------------------------------------------
    def run(self, graph) -> Network:
        env: dict[Node, Any] = {}
        shapes = iter(self.shapes)
        n_placeholders = 0
        for node in graph.nodes:
            op = node.op
            if op == "placeholder":
                shape = next(shapes, None)
                if shape is None:
                    if node.args:  # forward() argument with a default value
                        env[node] = node.args[0]
                        continue
                    raise ModelLoadError(f"{self.b.name}: forward() takes more inputs than the "
                                         f"{len(self.shapes)} shape(s) given (no shape for {node.target!r})")
                n_placeholders += 1
                env[node] = _TV(self.b.input(str(node.target).lstrip("*"), shape), shape)
                continue
            if op == "output":
                continue
            if op == "get_attr":
                v = _fetch_attr(self.root, node.target)
                env[node] = _TV(-1, tuple(v.shape), v.dtype) if isinstance(v, torch.Tensor) else v
                continue
            args = _load(node.args, env)
            kwargs = _load(node.kwargs, env) if node.kwargs else {}
            env[node] = self.call(node, op, args, kwargs)
        if n_placeholders < len(self.shapes):
            raise ModelLoadError(f"{self.b.name}: {len(self.shapes)} input shapes given but forward() takes "
                                 f"{n_placeholders} tensor input(s)")
        return self.b.build()

    def call(self, node: Node, op: str, args: tuple, kwargs: dict) -> Any:
        target = node.target
        if op == "call_module":
            mod = self.root.get_submodule(target)
            rule = _module_rule(type(mod))
            self.name, self.module, self.scope, fn = target, target, None, mod
        else:
            if op == "call_function":
                if not _has_tv(args) and not _has_tv(kwargs):
                    if getattr(target, "__module__", None) in _PURE_MODULES:
                        return target(*args, **kwargs)  # arithmetic on sizes
                    return self.meta(node, op, args, kwargs, const=True)  # factory call: a constant
                if target in _CONST_FUNCTIONS:
                    return self.meta(node, op, args, kwargs, const=True)
                rule = _FUNCTIONS.get(target)
            else:  # call_method
                if type(args[0]) is not _TV:
                    return getattr(args[0], target)(*args[1:], **kwargs)
                if target in _CONST_METHODS:
                    return self.meta(node, op, args, kwargs, const=True)
                rule = _METHODS.get(target)
            stack = node.meta.get("nn_module_stack")
            self.name, self.module, fn = node.name, None, target
            self.scope = next(reversed(stack.values()))[0] if stack else None
        if rule is None:
            return self.meta(node, op, args, kwargs)
        try:
            return rule(self, fn, args, kwargs)
        except _ShapeError as e:
            raise self.shape_error(node, args, str(e)) from None
        except IRError as e:
            raise self.shape_error(node, args, str(e)) from None
        except ModelLoadError:
            raise
        except Exception as e:  # noqa: BLE001 - a variant the rule does not cover
            log.debug("trace: no analytic rule for node %s (%s: %s); using the meta device",
                      node.name, type(e).__name__, e)
            return self.meta(node, op, args, kwargs)

    def shape_error(self, node: Node, args: tuple, msg: str) -> ModelLoadError:
        shapes = [list(v.shape) for v in _tvs(args, [])]
        what = (f"layer {node.target!r} ({type(self.root.get_submodule(node.target)).__name__})"
                if node.op == "call_module" else f"node {node.name!r} ({_op_name(node, self.root)})")
        inputs = ", ".join(str(s) for s in self.shapes)
        return ModelLoadError(f"{self.b.name}: {what} cannot take input shape(s) "
                              f"{', '.join(str(s) for s in shapes)}: {msg} (check input_shape={inputs})")

    # -- fallback: evaluate one node on the meta device ------------------------------------------------
    def meta(self, node: Node, op: str, args: tuple, kwargs: dict, const: bool = False) -> Any:
        ins = [] if const else _tvs((args, kwargs), [])
        margs, mkwargs = _to_meta(args), _to_meta(kwargs)
        try:
            with torch.device("meta"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if op == "call_module":
                    res = self.meta_module(node.target)(*margs, **mkwargs)
                elif op == "call_function":
                    res = node.target(*margs, **mkwargs)
                else:
                    res = getattr(margs[0], node.target)(*margs[1:], **mkwargs)
        except NotImplementedError as e:
            raise _NeedsOnnx(f"node {node.name!r} ({_op_name(node, self.root)}) has no shape rule and cannot run "
                             f"on the meta device: {_first_line(e)}") from e
        except ModelLoadError:
            raise
        except Exception as e:  # noqa: BLE001 - torch's own shape check: the user's shapes are wrong
            raise self.shape_error(node, args, _first_line(e)) from None
        outs = _meta_tensors(res, [])
        if not outs:
            return res  # a Python value (e.g. numel())
        if not any(v.layer >= 0 for v in ins):
            return _from_meta(res, -1)
        opname = _op_name(node, self.root)
        t = _KNOWN_TYPES.get(type(self.root.get_submodule(node.target)) if op == "call_module" else node.target,
                             T.UNKNOWN)
        if t == T.UNKNOWN:
            self.unknown[opname] = self.unknown.get(opname, 0) + 1
        layer = self.emit(t, ins, tuple(outs[0].shape), op=opname if t == T.UNKNOWN else None).layer
        return _from_meta(res, layer)

    def meta_module(self, target: str) -> nn.Module:
        m = self.meta_modules.get(target)
        if m is None:
            mod = self.root.get_submodule(target)
            # deep-copy the module with its parameters and buffers replaced by meta tensors (no weight copy)
            memo: dict[int, Any] = {}
            for p in mod.parameters():
                memo[id(p)] = nn.Parameter(torch.empty_like(p, device="meta"), requires_grad=p.requires_grad)
            for buf in mod.buffers():
                memo[id(buf)] = torch.empty_like(buf, device="meta")
            m = copy.deepcopy(mod, memo).to("meta")
            self.meta_modules[target] = m
        return m


def _to_meta(a: Any) -> Any:
    t = type(a)
    if t is _TV:
        return torch.empty(a.shape, dtype=a.dtype or torch.float32, device="meta")
    if t is tuple or t is list:
        return t(_to_meta(x) for x in a)
    if t is dict:
        return {k: _to_meta(v) for k, v in a.items()}
    return a


def _meta_tensors(a: Any, out: list) -> list:
    if isinstance(a, torch.Tensor):
        out.append(a)
    elif isinstance(a, (tuple, list)):
        for x in a:
            _meta_tensors(x, out)
    elif isinstance(a, dict):
        for x in a.values():
            _meta_tensors(x, out)
    return out


def _from_meta(a: Any, layer: int) -> Any:
    if isinstance(a, torch.Tensor):
        return _TV(layer, tuple(a.shape), a.dtype if a.dtype != torch.float32 else None)
    if isinstance(a, torch.Size):
        return a
    if isinstance(a, (tuple, list)):
        vals = tuple(_from_meta(x, layer) for x in a)
        if type(a) is tuple or type(a) is list:
            return vals
        try:  # keep named results (torch.return_types.max(...).values, namedtuples)
            return type(a)(*vals) if hasattr(a, "_fields") else type(a)(vals)
        except Exception:  # noqa: BLE001
            return vals
    if isinstance(a, dict):
        return {k: _from_meta(v, layer) for k, v in a.items()}
    return a


def _fetch_attr(root: nn.Module, target: str) -> Any:
    obj: Any = root
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _op_name(node: Node, root: nn.Module) -> str:
    if node.op == "call_module":
        return type(root.get_submodule(node.target)).__name__
    if node.op == "call_method":
        return str(node.target)
    return getattr(node.target, "__name__", str(node.target))


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__


# ------------------------------------------------------------------------------------------------------
# analytic rules: rule(walker, module | function | method name, args, kwargs) -> value


def _same(t: LayerType) -> Callable:
    def rule(w: _Walker, fn, args, kwargs):
        x = _x(args, kwargs)
        return w.emit(t, (x,), x.shape)
    return rule


def _clip_core(w: _Walker, x: _TV, lo: Any, hi: Any) -> _TV:
    if type(lo) is _TV or type(hi) is _TV:
        raise _NoRule("tensor bounds")
    lo = None if lo is None else float(lo)
    hi = None if hi is None else float(hi)
    if lo == 0.0 and hi == 6.0:  # as the ONNX front end reads Clip(0, 6)
        return w.emit(T.RELU6, (x,), x.shape)
    return w.emit(T.CLIP, (x,), x.shape, clip_min=lo, clip_max=hi)


def _hardtanh_module(w: _Walker, m, args, kwargs):
    if type(m) is nn.ReLU6:
        x = _x(args, kwargs)
        return w.emit(T.RELU6, (x,), x.shape)
    return _clip_core(w, _x(args, kwargs), m.min_val, m.max_val)


def _hardtanh_function(w: _Walker, fn, args, kwargs):
    return _clip_core(w, _x(args, kwargs), _arg(args, kwargs, 1, "min_val", -1.0),
                      _arg(args, kwargs, 2, "max_val", 1.0))


def _clamp(w: _Walker, fn, args, kwargs):
    return _clip_core(w, _x(args, kwargs), _arg(args, kwargs, 1, "min"), _arg(args, kwargs, 2, "max"))


def _leaky_module(w: _Walker, m, args, kwargs):
    x = _x(args, kwargs)
    return w.emit(T.LEAKY_RELU, (x,), x.shape, alpha=float(m.negative_slope))


def _leaky_function(w: _Walker, fn, args, kwargs):
    x = _x(args, kwargs)
    return w.emit(T.LEAKY_RELU, (x,), x.shape, alpha=float(_arg(args, kwargs, 1, "negative_slope", 0.01)))


def _passthrough(w: _Walker, fn, args, kwargs):
    return _x(args, kwargs)


def _binary(t: LayerType) -> Callable:
    def rule(w: _Walker, fn, args, kwargs):
        a = args[0] if args else kwargs.get("input")
        b = _arg(args, kwargs, 1, "other")
        tvs = [v for v in (a, b) if type(v) is _TV]
        if not tvs:
            raise _NoRule("no tensor operand")
        shape = _broadcast([v.shape for v in tvs]) if len(tvs) > 1 else tvs[0].shape
        return w.emit(t, tvs, shape)
    return rule


def _check_rank(x: _TV, nd: int, what: str, channels: int | None = None) -> None:
    r = len(x.shape)
    dims = {1: "L", 2: "H, W", 3: "D, H, W"}[nd]
    if r != nd + 2:
        hint = " (input_shape must include the batch dimension)" if r == nd + 1 else ""
        raise _ShapeError(f"{what} expects a {nd + 2}-D input [N, C, {dims}], got {r}-D{hint}")
    if channels is not None and x.shape[1] != channels:
        raise _ShapeError(f"{what} expects {channels} input channels, got {x.shape[1]}")


def _conv_core(w: _Walker, x: _TV, cin: int, cout: int, k: tuple, st: tuple, pad: Any, dil: tuple,
               groups: int, transposed: bool = False, out_pad: tuple = (), out_size: Any = None) -> _TV:
    nd = len(k)
    _check_rank(x, nd, "ConvTranspose" if transposed else "Conv", cin)
    spatial = x.shape[2:]
    if isinstance(pad, str):
        if pad == "valid":
            pad = (0,) * nd
            total = (0,) * nd
        else:  # 'same' (stride 1): output size = input size
            total = tuple(d * (kk - 1) for d, kk in zip(dil, k))
            pad = None
    else:
        pad = _tup(pad, nd)
        total = tuple(2 * p for p in pad)
    if transposed:
        if out_size is not None:
            out = tuple(int(v) for v in tuple(out_size)[-nd:])
        else:
            out = tuple((i - 1) * s - 2 * p + d * (kk - 1) + op + 1
                        for i, s, p, d, kk, op in zip(spatial, st, pad, dil, k, out_pad))
    elif pad is None:
        out = tuple(spatial)
    else:
        out = tuple((i + 2 * p - d * (kk - 1) - 1) // s + 1 for i, s, p, d, kk in zip(spatial, st, pad, dil, k))
    if any(o <= 0 for o in out):
        raise _ShapeError(f"spatial size {list(spatial)} is too small for kernel {list(k)} (output {list(out)})")
    kern = (k[0], 1) if nd == 1 else (_prod(k[:-1]), k[-1])
    t = T.CONV_TRANSPOSE if transposed else conv_type(cin, cout, groups)
    return w.emit(t, (x,), (x.shape[0], cout) + out, kernel=kern, stride=_fold2(st, 1),
                  padding=_fold2(total, 0), dilation=_fold2(dil, 1), groups=groups)


def _conv_module(w: _Walker, m, args, kwargs):
    x = _x(args, kwargs)
    return _conv_core(w, x, m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding, m.dilation,
                      m.groups)


def _conv_transpose_module(w: _Walker, m, args, kwargs):
    x = _x(args, kwargs)
    return _conv_core(w, x, m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding, m.dilation,
                      m.groups, transposed=True, out_pad=m.output_padding,
                      out_size=_arg(args, kwargs, 1, "output_size"))


def _conv_function(nd: int) -> Callable:
    def rule(w: _Walker, fn, args, kwargs):
        x = _x(args, kwargs)
        weight = _arg(args, kwargs, 1, "weight")
        if type(weight) is not _TV or weight.layer >= 0 or len(weight.shape) != nd + 2:
            raise _NoRule("weight is not a parameter")
        groups = _arg(args, kwargs, 6, "groups", 1)
        return _conv_core(w, x, weight.shape[1] * groups, weight.shape[0], weight.shape[2:],
                          _tup(_arg(args, kwargs, 3, "stride", 1), nd), _arg(args, kwargs, 4, "padding", 0),
                          _tup(_arg(args, kwargs, 5, "dilation", 1), nd), groups)
    return rule


def _linear_core(w: _Walker, x: _TV, fin: int, fout: int, t: LayerType = T.FULLY_CONNECTED) -> _TV:
    s = x.shape
    if not s or s[-1] != fin:
        raise _ShapeError(f"expects {fin} input features in the last dimension, got shape {list(s)}")
    out = s[:-1] + (fout,)
    if len(s) <= 2:
        return w.emit(t, (x,), out)
    # [B..., M, F] as the ONNX front end stores MatMul: features in C, rows in H, batch dims in N, so that
    # ops = 2 * out_elems * c_in and weights = c_in * c_out
    nb = _prod(s[:-2])
    return w.emit(t, (x,), out, in_shape=(nb, fin, s[-2], 1), ir_out=(nb, fout, s[-2], 1))


def _linear_module(w: _Walker, m, args, kwargs):
    return _linear_core(w, _x(args, kwargs), m.in_features, m.out_features)


def _linear_function(w: _Walker, fn, args, kwargs):
    x = _x(args, kwargs)
    weight = _arg(args, kwargs, 1, "weight")
    if type(weight) is not _TV or weight.layer >= 0 or len(weight.shape) != 2:
        raise _NoRule("weight is not a parameter")
    return _linear_core(w, x, weight.shape[1], weight.shape[0])


def _matmul(w: _Walker, fn, args, kwargs):
    a, b = args[0] if args else kwargs["input"], _arg(args, kwargs, 1, "other")
    if type(a) is not _TV or type(b) is not _TV:
        raise _NoRule("matmul operand is not a tensor")
    sa, sb = a.shape, b.shape
    if b.layer < 0 and len(sb) == 2 and a.layer >= 0:  # activation x weight: a fully connected layer
        return _linear_core(w, a, sb[0], sb[1])
    a2 = (1,) + sa if len(sa) == 1 else sa
    b2 = sb + (1,) if len(sb) == 1 else sb
    if a2[-1] != b2[-2]:
        raise _ShapeError(f"matmul of {list(sa)} and {list(sb)}: inner dimensions {a2[-1]} and {b2[-2]} differ")
    batch = _broadcast([a2[:-2], b2[:-2]]) if (len(a2) > 2 or len(b2) > 2) else ()
    out = batch + ((a2[-2],) if len(sa) > 1 else ()) + ((b2[-1],) if len(sb) > 1 else ())
    nb, m, k, n = _prod(batch), a2[-2], a2[-1], b2[-1]
    return w.emit(T.MATMUL, (a, b), out, in_shape=(nb, k, m, 1), ir_out=(nb, n, m, 1))


def _bn_module(w: _Walker, m, args, kwargs):
    x = _x(args, kwargs)
    if len(x.shape) < 2 or x.shape[1] != m.num_features:
        raise _ShapeError(f"expects {m.num_features} channels in dimension 1, got shape {list(x.shape)}")
    return w.emit(T.BATCH_NORM, (x,), x.shape)


def _layer_norm_module(w: _Walker, m, args, kwargs):
    x = _x(args, kwargs)
    ns = tuple(m.normalized_shape)
    if tuple(x.shape[-len(ns):]) != ns:
        raise _ShapeError(f"normalized_shape {list(ns)} does not match the trailing dimensions of {list(x.shape)}")
    return w.emit(T.LAYER_NORM, (x,), x.shape)


def _pool_out(i: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    num = i + 2 * p - d * (k - 1) - 1
    o = (-(-num // s) if ceil else num // s) + 1
    if ceil and (o - 1) * s >= i + p:
        o -= 1
    return o


def _pool_core(w: _Walker, x: _TV, t: LayerType, nd: int, k, st, pad, dil, ceil: bool) -> _TV:
    if len(x.shape) not in (nd + 1, nd + 2):
        raise _ShapeError(f"{nd}-D pooling expects a {nd + 2}-D input, got shape {list(x.shape)}")
    k = _tup(k, nd)
    st = _tup(st if st is not None and st != [] and st != () else k, nd)
    pad, dil = _tup(pad, nd), _tup(dil, nd)
    spatial = x.shape[-nd:]
    out = tuple(_pool_out(i, kk, s, p, d, ceil) for i, kk, s, p, d in zip(spatial, k, st, pad, dil))
    if any(o <= 0 for o in out):
        raise _ShapeError(f"spatial size {list(spatial)} is too small for pooling kernel {list(k)}")
    return w.emit(t, (x,), x.shape[:-nd] + out, kernel=_fold2(k, 1), stride=_fold2(st, 1),
                  padding=_fold2(tuple(2 * p for p in pad), 0), dilation=_fold2(dil, 1))


def _pool_module(t: LayerType, nd: int) -> Callable:
    def rule(w: _Walker, m, args, kwargs):
        if getattr(m, "return_indices", False):
            raise _NoRule("return_indices")
        return _pool_core(w, _x(args, kwargs), t, nd, m.kernel_size, m.stride, m.padding,
                          getattr(m, "dilation", 1), m.ceil_mode)
    return rule


def _max_pool_function(nd: int) -> Callable:
    def rule(w: _Walker, fn, args, kwargs):
        if _arg(args, kwargs, 6, "return_indices", False):
            raise _NoRule("return_indices")
        return _pool_core(w, _x(args, kwargs), T.MAX_POOL, nd, _arg(args, kwargs, 1, "kernel_size"),
                          _arg(args, kwargs, 2, "stride"), _arg(args, kwargs, 3, "padding", 0),
                          _arg(args, kwargs, 4, "dilation", 1), _arg(args, kwargs, 5, "ceil_mode", False))
    return rule


def _avg_pool_function(nd: int) -> Callable:
    def rule(w: _Walker, fn, args, kwargs):
        return _pool_core(w, _x(args, kwargs), T.AVG_POOL, nd, _arg(args, kwargs, 1, "kernel_size"),
                          _arg(args, kwargs, 2, "stride"), _arg(args, kwargs, 3, "padding", 0), 1,
                          _arg(args, kwargs, 4, "ceil_mode", False))
    return rule


def _adaptive_core(w: _Walker, x: _TV, kind: str, nd: int, size: Any) -> _TV:
    if len(x.shape) not in (nd + 1, nd + 2):
        raise _ShapeError(f"{nd}-D adaptive pooling expects a {nd + 2}-D input, got shape {list(x.shape)}")
    spatial = x.shape[-nd:]
    size = tuple(i if o is None else int(o) for o, i in zip(_tup(size, nd), spatial))
    if all(o == 1 for o in size):
        kern = (spatial[0], 1) if nd == 1 else (_prod(spatial[:-1]), spatial[-1])
        return w.emit(T.GLOBAL_POOL, (x,), x.shape[:-nd] + size, kernel=kern, pool=kind)
    # PyTorch's adaptive windows; exact when the input size is a multiple of the output size
    st = tuple(max(i // o, 1) for i, o in zip(spatial, size))
    k = tuple(-(-i // o) for i, o in zip(spatial, size))
    t = T.MAX_POOL if kind == "max" else T.AVG_POOL
    return w.emit(t, (x,), x.shape[:-nd] + size, kernel=_fold2(k, 1), stride=_fold2(st, 1))


def _adaptive_module(kind: str, nd: int) -> Callable:
    def rule(w: _Walker, m, args, kwargs):
        if getattr(m, "return_indices", False):
            raise _NoRule("return_indices")
        return _adaptive_core(w, _x(args, kwargs), kind, nd, m.output_size)
    return rule


def _adaptive_function(kind: str, nd: int) -> Callable:
    def rule(w: _Walker, fn, args, kwargs):
        if _arg(args, kwargs, 2, "return_indices", False):
            raise _NoRule("return_indices")
        return _adaptive_core(w, _x(args, kwargs), kind, nd, _arg(args, kwargs, 1, "output_size"))
    return rule


def _flatten_core(w: _Walker, x: _TV, start: int, end: int) -> _TV:
    s = x.shape
    if not s:
        return w.emit(T.FLATTEN, (x,), (1,))
    a, b = _dim(start, len(s)), _dim(end, len(s))
    out = s[:a] + (_prod(s[a:b + 1]),) + s[b + 1:]
    return w.emit(T.FLATTEN, (x,), out)


def _flatten_module(w: _Walker, m, args, kwargs):
    return _flatten_core(w, _x(args, kwargs), m.start_dim, m.end_dim)


def _flatten_function(default_start: int) -> Callable:
    def rule(w: _Walker, fn, args, kwargs):
        return _flatten_core(w, _x(args, kwargs), _arg(args, kwargs, 1, "start_dim", default_start),
                             _arg(args, kwargs, 2, "end_dim", -1))
    return rule


def _resolve_shape(x: _TV, shape: Sequence[Any]) -> tuple[int, ...]:
    shape = list(shape)
    if any(type(v) is not int for v in shape):
        if not all(isinstance(v, (int, np.integer)) for v in shape):
            raise _NoRule("shape is not static")
        shape = [int(v) for v in shape]
    total = _prod(x.shape)
    if shape.count(-1) > 1:
        raise _ShapeError(f"shape {shape} has more than one -1")
    if -1 in shape:
        known = _prod(v for v in shape if v != -1)
        if known <= 0 or total % known:
            raise _ShapeError(f"cannot reshape {list(x.shape)} ({total} elements) into {shape}")
        shape[shape.index(-1)] = total // known
    if _prod(shape) != total:
        raise _ShapeError(f"cannot reshape {list(x.shape)} ({total} elements) into {shape}")
    return tuple(shape)


def _shape_args(args: tuple, kwargs: dict, key: str = "shape") -> Sequence[Any]:
    rest = args[1:]
    if len(rest) == 1 and isinstance(rest[0], (tuple, list)):
        return rest[0]
    if not rest:
        return kwargs.get(key, kwargs.get("size", ()))
    return rest


def _reshape(w: _Walker, fn, args, kwargs):
    x = _x(args, kwargs)
    return w.emit(T.RESHAPE, (x,), _resolve_shape(x, _shape_args(args, kwargs)))


def _view_as(w: _Walker, fn, args, kwargs):
    x, other = _x(args, kwargs), _arg(args, kwargs, 1, "other")
    return w.emit(T.RESHAPE, (x,), _resolve_shape(x, other.shape))


def _unflatten_module(w: _Walker, m, args, kwargs):
    x = _x(args, kwargs)
    d = _dim(m.dim, len(x.shape))
    return w.emit(T.RESHAPE, (x,), _resolve_shape(x, x.shape[:d] + tuple(m.unflattened_size) + x.shape[d + 1:]))


def _squeeze(w: _Walker, fn, args, kwargs):
    x = _x(args, kwargs)
    d = _arg(args, kwargs, 1, "dim")
    s = x.shape
    if d is None:
        out = tuple(v for v in s if v != 1)
    else:
        dims = {_dim(v, len(s)) for v in _tup(d, 1)}
        out = tuple(v for i, v in enumerate(s) if not (i in dims and v == 1))
    return w.emit(T.RESHAPE, (x,), out)


def _unsqueeze(w: _Walker, fn, args, kwargs):
    x = _x(args, kwargs)
    d = _dim(_arg(args, kwargs, 1, "dim"), len(x.shape) + 1)
    return w.emit(T.RESHAPE, (x,), x.shape[:d] + (1,) + x.shape[d:])


def _transpose(w: _Walker, fn, args, kwargs):
    x = _x(args, kwargs)
    s = list(x.shape)
    a, b = _dim(_arg(args, kwargs, 1, "dim0"), len(s)), _dim(_arg(args, kwargs, 2, "dim1"), len(s))
    s[a], s[b] = s[b], s[a]
    return w.emit(T.TRANSPOSE, (x,), tuple(s))


def _t(w: _Walker, fn, args, kwargs):
    x = _x(args, kwargs)
    return w.emit(T.TRANSPOSE, (x,), x.shape[::-1])


def _permute(w: _Walker, fn, args, kwargs):
    x = _x(args, kwargs)
    dims = _shape_args(args, kwargs, "dims")
    r = len(x.shape)
    dims = [_dim(d, r) for d in dims]
    if sorted(dims) != list(range(r)):
        raise _ShapeError(f"permute dims {list(dims)} are not a permutation of {r} dimensions")
    return w.emit(T.TRANSPOSE, (x,), tuple(x.shape[d] for d in dims))


def _cat(stack: bool) -> Callable:
    def rule(w: _Walker, fn, args, kwargs):
        xs = args[0] if args else kwargs.get("tensors")
        d = _arg(args, kwargs, 1, "dim", 0)
        if not isinstance(xs, (tuple, list)) or not xs or any(type(v) is not _TV for v in xs):
            raise _NoRule("tensors are not a list of tensors")
        first = xs[0].shape
        r = len(first) + (1 if stack else 0)
        d = _dim(d, r)
        for v in xs[1:]:
            s = v.shape
            if len(s) != len(first) or (stack and s != first) or \
                    (not stack and any(a != b for i, (a, b) in enumerate(zip(s, first)) if i != d)):
                raise _ShapeError(f"cannot {'stack' if stack else 'concatenate'} "
                                  f"{', '.join(str(list(v.shape)) for v in xs)} along dimension {d}")
        if stack:
            out = first[:d] + (len(xs),) + first[d:]
        else:
            out = first[:d] + (sum(v.shape[d] for v in xs),) + first[d + 1:]
        return w.emit(T.CONCAT, xs, out, axis=d)
    return rule


def _pieces(w: _Walker, x: _TV, d: int, sizes: list[int], keep: bool = True) -> tuple:
    """Split / chunk / unbind: one Slice layer (as ONNX's Split) whose output shape is the first piece's."""
    s = x.shape
    shapes = [s[:d] + ((n,) if keep else ()) + s[d + 1:] for n in sizes]
    if not shapes:
        return ()
    layer = w.emit(T.SLICE, (x,), shapes[0]).layer
    return tuple(_TV(layer, shape, x.dtype) for shape in shapes)


def _split(w: _Walker, fn, args, kwargs):
    x = _x(args, kwargs)
    sz = _arg(args, kwargs, 1, "split_size_or_sections", kwargs.get("split_size"))
    d = _dim(_arg(args, kwargs, 2, "dim", 0), len(x.shape))
    n = x.shape[d]
    if isinstance(sz, int):
        sizes = [min(sz, n - i) for i in range(0, n, sz)] if sz > 0 else []
    else:
        sizes = [int(v) for v in sz]
        if sum(sizes) != n:
            raise _ShapeError(f"split sizes {sizes} do not sum to dimension {d} of size {n}")
    return _pieces(w, x, d, sizes)


def _chunk(w: _Walker, fn, args, kwargs):
    x = _x(args, kwargs)
    chunks = _arg(args, kwargs, 1, "chunks")
    d = _dim(_arg(args, kwargs, 2, "dim", 0), len(x.shape))
    n = x.shape[d]
    size = -(-n // chunks)
    return _pieces(w, x, d, [min(size, n - i) for i in range(0, n, size)])


def _unbind(w: _Walker, fn, args, kwargs):
    x = _x(args, kwargs)
    d = _dim(_arg(args, kwargs, 1, "dim", 0), len(x.shape))
    return _pieces(w, x, d, [1] * x.shape[d], keep=False)


def _getitem(w: _Walker, fn, args, kwargs):
    x, idx = args
    if type(x) is not _TV:
        return x[idx]
    idx = idx if isinstance(idx, tuple) else (idx,)
    if any(type(i) not in (int, slice, type(None), type(Ellipsis)) for i in idx):
        raise _NoRule("advanced indexing")
    s = x.shape
    n_real = sum(1 for i in idx if type(i) in (int, slice))
    if n_real > len(s):
        raise _ShapeError(f"too many indices for a {len(s)}-D tensor")
    if Ellipsis in idx:
        e = idx.index(Ellipsis)
        idx = idx[:e] + (slice(None),) * (len(s) - n_real) + idx[e + 1:]
    out: list[int] = []
    d = 0
    for i in idx:
        if i is None:
            out.append(1)
        elif type(i) is int:
            if not -s[d] <= i < s[d]:
                raise _ShapeError(f"index {i} is out of bounds for dimension {d} of size {s[d]}")
            d += 1
        else:
            out.append(len(range(*i.indices(s[d]))))
            d += 1
    out.extend(s[d:])
    return w.emit(T.SLICE, (x,), tuple(out))


def _getattr(w: _Walker, fn, args, kwargs):
    x, attr = args[0], args[1]
    if type(x) is not _TV:
        return getattr(x, attr)
    if attr == "shape":
        return torch.Size(x.shape)
    if attr == "ndim":
        return len(x.shape)
    if attr == "dtype":
        return x.dtype or torch.float32
    if attr == "T":
        return w.emit(T.TRANSPOSE, (x,), x.shape[::-1])
    if attr == "data":
        return x
    raise _NoRule(f"attribute {attr}")


def _size(w: _Walker, fn, args, kwargs):
    x = _x(args, kwargs)
    d = _arg(args, kwargs, 1, "dim")
    return torch.Size(x.shape) if d is None else x.shape[_dim(d, len(x.shape))]


def _ndim(w: _Walker, fn, args, kwargs):
    return len(_x(args, kwargs).shape)


def _numel(w: _Walker, fn, args, kwargs):
    return _prod(_x(args, kwargs).shape)


def _reduce(kind: str) -> Callable:
    """mean / amax: over all spatial dimensions a global pooling (as ONNX ReduceMean/ReduceMax are read)."""
    def rule(w: _Walker, fn, args, kwargs):
        x = _x(args, kwargs)
        d = _arg(args, kwargs, 1, "dim")
        keep = _arg(args, kwargs, 2, "keepdim", False)
        s, r = x.shape, len(x.shape)
        dims = set(range(r)) if d is None or d == () or d == [] else {_dim(v, r) for v in _tup(d, 1)}
        out = tuple(1 if i in dims else v for i, v in enumerate(s)) if keep else \
            tuple(v for i, v in enumerate(s) if i not in dims)
        if r >= 3 and dims == set(range(2, r)):
            kern = (s[2], 1) if r == 3 else (_prod(s[2:-1]), s[-1])
            return w.emit(T.GLOBAL_POOL, (x,), out, kernel=kern, pool=kind)
        if kind != "avg":
            raise _NoRule("a max over non-spatial dimensions")
        return w.emit(T.REDUCE_MEAN, (x,), out)
    return rule


def _resize_core(w: _Walker, x: _TV, size: Any, scale: Any, mode: str | None) -> _TV:
    nd = len(x.shape) - 2
    if nd < 1:
        raise _ShapeError(f"interpolation expects a 3-D to 5-D input, got shape {list(x.shape)}")
    spatial = x.shape[2:]
    if size is not None:
        out = tuple(int(v) for v in _tup(size, nd))
    elif scale is not None:
        out = tuple(int(math.floor(i * float(f))) for i, f in zip(spatial, _tup(scale, nd)))
    else:
        raise _NoRule("neither size nor scale_factor")
    if len(out) != nd or any(o <= 0 for o in out):
        raise _ShapeError(f"bad interpolation output size {list(out)} for input {list(x.shape)}")
    return w.emit(T.RESIZE, (x,), x.shape[:2] + out, mode=mode)


def _upsample_module(w: _Walker, m, args, kwargs):
    return _resize_core(w, _x(args, kwargs), m.size, m.scale_factor, m.mode)


def _interpolate(w: _Walker, fn, args, kwargs):
    return _resize_core(w, _x(args, kwargs), _arg(args, kwargs, 1, "size"), _arg(args, kwargs, 2, "scale_factor"),
                        _arg(args, kwargs, 3, "mode", "nearest"))


def _pad_core(w: _Walker, x: _TV, pad: Sequence[int], mode: str | None) -> _TV:
    pad = [int(p) for p in pad]
    if len(pad) % 2 or len(pad) // 2 > len(x.shape):
        raise _ShapeError(f"padding {pad} does not fit a {len(x.shape)}-D tensor")
    out = list(x.shape)
    totals = []
    for i in range(len(pad) // 2):
        d = len(out) - 1 - i
        out[d] += pad[2 * i] + pad[2 * i + 1]
        totals.append(pad[2 * i] + pad[2 * i + 1])
        if out[d] <= 0:
            raise _ShapeError(f"padding {pad} leaves dimension {d} of {list(x.shape)} empty")
    totals += [0] * (2 - len(totals))
    return w.emit(T.PAD, (x,), tuple(out), padding=(totals[1], totals[0]), mode=mode)


def _pad_module(w: _Walker, m, args, kwargs):
    return _pad_core(w, _x(args, kwargs), m.padding, _PAD_MODES.get(type(m), "constant"))


def _pad_function(w: _Walker, fn, args, kwargs):
    return _pad_core(w, _x(args, kwargs), _arg(args, kwargs, 1, "pad"), _arg(args, kwargs, 2, "mode", "constant"))


def _embedding_module(w: _Walker, m, args, kwargs):
    x = _x(args, kwargs)
    w.unknown["Embedding"] = w.unknown.get("Embedding", 0) + 1
    return w.emit(T.UNKNOWN, (x,), x.shape + (m.embedding_dim,), op="Embedding")


# ------------------------------------------------------------------------------------------------------
# dispatch tables

_MODULES: dict[type, Callable] = {}
_FUNCTIONS: dict[Any, Callable] = {}
_METHODS: dict[str, Callable] = {}
#: Layer type of a module class / function when its shape had to come from the meta device.
_KNOWN_TYPES: dict[Any, LayerType] = {}


def _reg(table: dict, keys: Sequence[Any], rule: Callable, t: LayerType | None = None) -> None:
    for k in keys:
        table[k] = rule
        if t is not None and table is not _METHODS:
            _KNOWN_TYPES[k] = t


_UNARY_MODULES = {
    T.RELU: (nn.ReLU,), T.LEAKY_RELU: (nn.PReLU,), T.SIGMOID: (nn.Sigmoid,),
    T.SILU: (nn.SiLU,), T.HARDSWISH: (nn.Hardswish,), T.HARDSIGMOID: (nn.Hardsigmoid,), T.GELU: (nn.GELU,),
    T.TANH: (nn.Tanh,), T.SOFTMAX: (nn.Softmax, nn.Softmax2d, nn.LogSoftmax), T.SOFTPLUS: (nn.Softplus,),
    T.LRN: (nn.LocalResponseNorm,),
}
_UNARY_FUNCTIONS = {
    T.RELU: (F.relu, F.relu_, torch.relu, torch.relu_), T.RELU6: (F.relu6,),
    T.LEAKY_RELU: (F.prelu,), T.SIGMOID: (F.sigmoid, torch.sigmoid),
    T.SILU: (F.silu,), T.HARDSWISH: (F.hardswish,), T.HARDSIGMOID: (F.hardsigmoid,), T.GELU: (F.gelu,),
    T.TANH: (F.tanh, torch.tanh), T.SOFTMAX: (F.softmax, torch.softmax, F.log_softmax, torch.log_softmax),
    T.SOFTPLUS: (F.softplus,), T.LRN: (F.local_response_norm,),
    T.BATCH_NORM: (F.batch_norm,), T.LAYER_NORM: (F.layer_norm,),
}
_UNARY_METHODS = {
    T.RELU: ("relu", "relu_"), T.SIGMOID: ("sigmoid", "sigmoid_"), T.TANH: ("tanh", "tanh_"),
    T.SOFTMAX: ("softmax", "log_softmax"),
}
_BINARY = {
    T.ADD: ((operator.add, operator.iadd, torch.add), ("add", "add_")),
    T.MUL: ((operator.mul, operator.imul, torch.mul, torch.multiply), ("mul", "mul_", "multiply")),
    T.SUB: ((operator.sub, operator.isub, torch.sub, torch.subtract), ("sub", "sub_", "subtract")),
    T.DIV: ((operator.truediv, operator.itruediv, torch.div, torch.divide, torch.true_divide),
            ("div", "div_", "divide", "true_divide")),
}

for _t, _keys in _UNARY_MODULES.items():
    _reg(_MODULES, _keys, _same(_t), _t)
for _t, _keys in _UNARY_FUNCTIONS.items():
    _reg(_FUNCTIONS, _keys, _same(_t), _t)
for _t, _keys in _UNARY_METHODS.items():
    _reg(_METHODS, _keys, _same(_t))
for _t, (_fns, _meths) in _BINARY.items():
    _reg(_FUNCTIONS, _fns, _binary(_t), _t)
    _reg(_METHODS, _meths, _binary(_t))

_reg(_MODULES, (nn.Hardtanh, nn.ReLU6), _hardtanh_module, T.CLIP)
_reg(_FUNCTIONS, (F.hardtanh,), _hardtanh_function, T.CLIP)
_reg(_FUNCTIONS, (torch.clamp, torch.clip), _clamp, T.CLIP)
_reg(_METHODS, ("clamp", "clamp_", "clip", "clip_"), _clamp)
_reg(_MODULES, (nn.LeakyReLU,), _leaky_module, T.LEAKY_RELU)
_reg(_FUNCTIONS, (F.leaky_relu, F.leaky_relu_), _leaky_function, T.LEAKY_RELU)
_reg(_MODULES, (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout,
                nn.Identity), _passthrough)
_reg(_FUNCTIONS, (F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout),
     _passthrough)
_reg(_METHODS, ("contiguous", "clone", "detach", "float", "to", "type_as", "cpu", "requires_grad_"), _passthrough)

_reg(_MODULES, (nn.Conv1d, nn.Conv2d, nn.Conv3d), _conv_module, T.CONV)
_reg(_MODULES, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d), _conv_transpose_module,
     T.CONV_TRANSPOSE)
_reg(_FUNCTIONS, (F.conv1d,), _conv_function(1), T.CONV)
_reg(_FUNCTIONS, (F.conv2d,), _conv_function(2), T.CONV)
_reg(_MODULES, (nn.Linear,), _linear_module, T.FULLY_CONNECTED)
_reg(_FUNCTIONS, (F.linear,), _linear_function, T.FULLY_CONNECTED)
_reg(_FUNCTIONS, (torch.matmul, operator.matmul, torch.mm, torch.bmm), _matmul, T.MATMUL)
_reg(_METHODS, ("matmul", "mm", "bmm"), _matmul)
_reg(_MODULES, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d), _bn_module, T.BATCH_NORM)
_reg(_MODULES, (nn.LayerNorm,), _layer_norm_module, T.LAYER_NORM)
_reg(_MODULES, (nn.MaxPool1d,), _pool_module(T.MAX_POOL, 1), T.MAX_POOL)
_reg(_MODULES, (nn.MaxPool2d,), _pool_module(T.MAX_POOL, 2), T.MAX_POOL)
_reg(_MODULES, (nn.AvgPool1d,), _pool_module(T.AVG_POOL, 1), T.AVG_POOL)
_reg(_MODULES, (nn.AvgPool2d,), _pool_module(T.AVG_POOL, 2), T.AVG_POOL)
_reg(_FUNCTIONS, (F.max_pool1d,), _max_pool_function(1), T.MAX_POOL)
_reg(_FUNCTIONS, (F.max_pool2d,), _max_pool_function(2), T.MAX_POOL)
_reg(_FUNCTIONS, (F.avg_pool1d,), _avg_pool_function(1), T.AVG_POOL)
_reg(_FUNCTIONS, (F.avg_pool2d,), _avg_pool_function(2), T.AVG_POOL)
_reg(_MODULES, (nn.AdaptiveAvgPool1d,), _adaptive_module("avg", 1), T.AVG_POOL)
_reg(_MODULES, (nn.AdaptiveAvgPool2d,), _adaptive_module("avg", 2), T.AVG_POOL)
_reg(_MODULES, (nn.AdaptiveMaxPool1d,), _adaptive_module("max", 1), T.MAX_POOL)
_reg(_MODULES, (nn.AdaptiveMaxPool2d,), _adaptive_module("max", 2), T.MAX_POOL)
_reg(_FUNCTIONS, (F.adaptive_avg_pool1d,), _adaptive_function("avg", 1), T.AVG_POOL)
_reg(_FUNCTIONS, (F.adaptive_avg_pool2d,), _adaptive_function("avg", 2), T.AVG_POOL)
_reg(_FUNCTIONS, (F.adaptive_max_pool1d,), _adaptive_function("max", 1), T.MAX_POOL)
_reg(_FUNCTIONS, (F.adaptive_max_pool2d,), _adaptive_function("max", 2), T.MAX_POOL)
_reg(_MODULES, (nn.Flatten,), _flatten_module, T.FLATTEN)
_reg(_FUNCTIONS, (torch.flatten,), _flatten_function(0), T.FLATTEN)
_reg(_METHODS, ("flatten",), _flatten_function(0))
_reg(_MODULES, (nn.Unflatten,), _unflatten_module, T.RESHAPE)
_reg(_FUNCTIONS, (torch.reshape,), _reshape, T.RESHAPE)
_reg(_METHODS, ("view", "reshape"), _reshape)
_reg(_METHODS, ("view_as", "reshape_as"), _view_as)
_reg(_FUNCTIONS, (torch.squeeze,), _squeeze, T.RESHAPE)
_reg(_METHODS, ("squeeze",), _squeeze)
_reg(_FUNCTIONS, (torch.unsqueeze,), _unsqueeze, T.RESHAPE)
_reg(_METHODS, ("unsqueeze",), _unsqueeze)
_reg(_FUNCTIONS, (torch.transpose, torch.swapaxes), _transpose, T.TRANSPOSE)
_reg(_METHODS, ("transpose", "swapaxes"), _transpose)
_reg(_FUNCTIONS, (torch.t,), _t, T.TRANSPOSE)
_reg(_METHODS, ("t",), _t)
_reg(_FUNCTIONS, (torch.permute,), _permute, T.TRANSPOSE)
_reg(_METHODS, ("permute",), _permute)
_reg(_FUNCTIONS, (torch.cat, torch.concat, torch.concatenate), _cat(False), T.CONCAT)
_reg(_FUNCTIONS, (torch.stack,), _cat(True), T.CONCAT)
_reg(_FUNCTIONS, (torch.split,), _split)
_reg(_METHODS, ("split",), _split)
_reg(_FUNCTIONS, (torch.chunk,), _chunk)
_reg(_METHODS, ("chunk",), _chunk)
_reg(_FUNCTIONS, (torch.unbind,), _unbind)
_reg(_METHODS, ("unbind",), _unbind)
_reg(_FUNCTIONS, (operator.getitem,), _getitem, T.SLICE)
_reg(_FUNCTIONS, (getattr,), _getattr)
_reg(_METHODS, ("size",), _size)
_reg(_METHODS, ("dim",), _ndim)
_reg(_METHODS, ("numel",), _numel)
_reg(_FUNCTIONS, (torch.mean,), _reduce("avg"), T.REDUCE_MEAN)
_reg(_METHODS, ("mean",), _reduce("avg"))
_reg(_FUNCTIONS, (torch.amax,), _reduce("max"))
_reg(_METHODS, ("amax",), _reduce("max"))
#: Calls whose result depends on a tensor's shape only: constants once shapes are static (ONNX folds them).
_CONST_FUNCTIONS = frozenset({torch.zeros_like, torch.ones_like, torch.empty_like, torch.full_like,
                              torch.rand_like, torch.randn_like, torch.randint_like})
_CONST_METHODS = frozenset({"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"})
_reg(_MODULES, (nn.Upsample,), _upsample_module, T.RESIZE)
_reg(_FUNCTIONS, (F.interpolate, F.upsample), _interpolate, T.RESIZE)
_PAD_MODES: dict[type, str] = {
    nn.ZeroPad1d: "constant", nn.ZeroPad2d: "constant", nn.ConstantPad1d: "constant",
    nn.ConstantPad2d: "constant", nn.ReflectionPad1d: "reflect", nn.ReflectionPad2d: "reflect",
    nn.ReplicationPad1d: "replicate", nn.ReplicationPad2d: "replicate", nn.CircularPad1d: "circular",
    nn.CircularPad2d: "circular",
}
_reg(_MODULES, tuple(_PAD_MODES), _pad_module, T.PAD)
_reg(_FUNCTIONS, (F.pad,), _pad_function, T.PAD)
_reg(_MODULES, (nn.Embedding,), _embedding_module)

_RULE_CACHE: dict[type, Callable | None] = {}


def _module_rule(cls: type) -> Callable | None:
    """The rule of a module class or of its nearest registered base class (e.g. ReLU6 -> Hardtanh)."""
    try:
        return _RULE_CACHE[cls]
    except KeyError:
        pass
    rule = None
    for base in cls.__mro__:
        rule = _MODULES.get(base)
        if rule is not None:
            if base in _KNOWN_TYPES and cls not in _KNOWN_TYPES:
                _KNOWN_TYPES[cls] = _KNOWN_TYPES[base]
            break
    _RULE_CACHE[cls] = rule
    return rule


# ------------------------------------------------------------------------------------------------------
# input shapes and the ONNX fallback


def _parse_shapes(input_shape: Any) -> list[tuple[int, ...]]:
    def is_int(v: Any) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

    def one(s: Any) -> tuple[int, ...]:
        if isinstance(s, np.ndarray):
            s = s.tolist()
        if not isinstance(s, (tuple, list, torch.Size)) or not all(is_int(v) for v in s):
            raise ModelLoadError(f"input_shape must be a sequence of ints such as (1, 3, 224, 224), got {s!r}")
        if len(s) == 0:
            raise ModelLoadError("input_shape is empty; give the full input shape such as (1, 3, 224, 224)")
        if any(v <= 0 for v in s):
            raise ModelLoadError(f"input_shape {list(s)} has a zero or negative dimension; "
                                 "all dimensions (batch included) must be positive")
        if math.prod(int(v) for v in s) > MAX_ELEMS:
            raise ModelLoadError(f"input_shape {list(s)} has more than 2^50 elements; no network has tensors "
                                 "this large")
        return tuple(int(v) for v in s)

    if isinstance(input_shape, np.ndarray):
        input_shape = input_shape.tolist()
    if not isinstance(input_shape, (tuple, list, torch.Size)):
        raise ModelLoadError(f"input_shape must be a shape such as (1, 3, 224, 224) or a list of shapes, "
                             f"got {type(input_shape).__name__}")
    if len(input_shape) == 0:
        raise ModelLoadError("input_shape is empty; give the full input shape such as (1, 3, 224, 224)")
    if all(is_int(v) for v in input_shape):
        return [one(input_shape)]
    return [one(s) for s in input_shape]


#: Input dimensions (after batch and channels) up to this size are exported as they are; larger ones are
#: exported at two small probe sizes and ONNX shape inference scales the graph back to the full size.
_PROBE_ABOVE = 256
#: A full-size forward pass is refused when its activations would take more than this share of free memory.
_MEMORY_SHARE = 0.5
#: Activation bytes of a forward pass per input byte, assumed where no probe export measured them (a CNN's
#: feature maps add up to several times its input: 9x for a conv-relu-conv network).
_ACTIVATIONS_PER_INPUT = 8.0


def _onnx_fallback(module: nn.Module, shapes: list[tuple[int, ...]], name: str, fx_error: str) -> Network:
    """The network of a module torch.fx cannot trace, from its ONNX export (run on zeros).

    Inputs no larger than `_PROBE_ABOVE` after batch and channels are exported as they are. Larger ones are
    exported at two small probe sizes (congruent to the real size modulo 64) with those dimensions dynamic,
    and ONNX shape inference fixes the real size; when the two probes give different networks (shapes baked
    into the trace) the full size is exported, unless its activations cannot fit in memory.
    """
    cls = type(module).__name__
    log.warning("trace(%s): torch.fx cannot trace forward() (%s); exporting to ONNX instead", cls, fx_error)
    branches: set[str] = set()
    try:
        probes = _probe_shapes(shapes)
        net = None
        if probes is not None:
            net, need_bytes = _probed_network(module, shapes, probes, branches)
            if net is None:
                _check_memory(cls, shapes, need_bytes)
        if net is None:
            net = _exported_network(module, shapes, shapes, (), branches)
    except _NoRoom:
        raise
    except Exception as e:  # noqa: BLE001 - report both failures as one user-facing error
        raise ModelLoadError(
            f"cannot convert {cls}: torch.fx failed ({fx_error}) and the ONNX fallback failed too "
            f"({type(e).__name__}: {_first_line(e)}). Export the model yourself with torch.onnx.export and "
            f"load the file with annette_torch.from_onnx, or make forward() traceable by torch.fx "
            f"(no Python control flow on tensor values)") from e
    if branches:
        log.warning("trace(%s): forward() has Python control flow on tensors (%s); the ONNX export fixed each "
                    "branch to the path all-zero inputs take, so other inputs may run other layers", cls,
                    "; ".join(sorted(branches)))
    net.name = name
    return net


def _probe_shapes(shapes: list[tuple[int, ...]]) -> list[list[tuple[int, ...]]] | None:
    """Two smaller stand-ins for ``shapes`` (dims after batch and channels above `_PROBE_ABOVE` shrunk to
    128..255, keeping their remainder modulo 64), or None when every input is small enough as it is."""
    if all(d <= _PROBE_ABOVE for s in shapes for d in s[2:]):
        return None
    return [[tuple(d if i < 2 or d <= _PROBE_ABOVE else base + d % 64 for i, d in enumerate(s)) for s in shapes]
            for base in (128, 192)]


def _probed_network(module: nn.Module, shapes: list[tuple[int, ...]], probes: list[list[tuple[int, ...]]],
                    branches: set[str]) -> tuple[Network | None, float | None]:
    """The network at ``shapes`` from exports at the probe shapes, or (None, activation bytes at full size as
    far as the probes tell) when the probes fail or disagree."""
    try:  # the exporter's own input names (a static export at the first probe), so that layers keep them
        names = _export(module, probes[0], None, None, branches)[1]
    except Exception as e:
        log.debug("ONNX export at probe shapes %s failed: %s: %s", probes[0], type(e).__name__, _first_line(e))
        return None, None
    if len(names) != len(shapes):  # an unused forward argument: names and shapes would not pair up
        return None, None
    nets: list[Network] = []
    for probe in probes:
        dynamic = [tuple(i for i, (d, p) in enumerate(zip(s, ps)) if d != p) for s, ps in zip(shapes, probe)]
        try:
            nets.append(_exported_network(module, probe, shapes, dynamic, branches, names))
        except Exception as e:
            log.debug("ONNX export at probe shapes %s failed: %s: %s", probe, type(e).__name__, _first_line(e))
            return None, None
    if _same_network(nets[0], nets[1]):
        return nets[0], None
    log.debug("the probe exports differ (sizes baked into the trace); exporting at the full size")
    return None, max(float(n.out_elems.sum()) for n in nets) * 4.0


def _exported_network(module: nn.Module, export_shapes: list[tuple[int, ...]], shapes: list[tuple[int, ...]],
                      dynamic: Sequence[tuple[int, ...]], branches: set[str],
                      names: list[str] | None = None) -> Network:
    """Export on zeros of ``export_shapes`` (``dynamic`` dims per input, named ``names``, left symbolic) and
    convert at ``shapes``."""
    from .onnx import from_onnx

    axes = {n: {i: f"{n}_d{i}" for i in dims} for n, dims in zip(names or [], dynamic) if dims}
    proto, inputs = _export(module, export_shapes, names if axes else None, axes or None, branches)
    if axes:
        _set_input_shapes(proto, inputs, shapes)
    return from_onnx(proto)


def _export(module: nn.Module, export_shapes: list[tuple[int, ...]], names: list[str] | None,
            axes: dict | None, branches: set[str]) -> tuple[Any, list[str]]:
    """The ONNX export on zeros of ``export_shapes`` and its graph input names; where ``forward`` branched on
    a tensor value is added to ``branches``."""
    import onnx

    buf = io.BytesIO()
    args = tuple(torch.zeros(s) for s in export_shapes)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.onnx.export(module, args, buf, dynamo=False, opset_version=17, input_names=names,
                          dynamic_axes=axes)
    for w in caught:
        if issubclass(w.category, torch.jit.TracerWarning) and "Python boolean" in str(w.message):
            branches.add(f"{os.path.basename(w.filename)}:{w.lineno}")
    proto = onnx.load_from_string(buf.getvalue())
    inits = {t.name for t in proto.graph.initializer}
    return proto, [vi.name for vi in proto.graph.input if vi.name not in inits]


def _set_input_shapes(proto: Any, names: list[str], shapes: list[tuple[int, ...]]) -> None:
    """Give the graph inputs their full shapes and drop shapes recorded for the probe sizes."""
    g = proto.graph
    by_name = dict(zip(names, shapes))  # graph inputs in forward's order
    for vi in g.input:
        if vi.name in by_name:
            tt = vi.type.tensor_type
            tt.ClearField("shape")
            for d in by_name[vi.name]:
                tt.shape.dim.add().dim_value = int(d)
    del g.value_info[:]
    for out in g.output:
        if out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")


def _same_network(a: Network, b: Network) -> bool:
    return (a.names == b.names and np.array_equal(a.types, b.types) and np.array_equal(a.edges, b.edges)
            and all(np.array_equal(a.cols[c], b.cols[c]) for c in a.cols) and a.attrs == b.attrs)


class _NoRoom(ModelLoadError):
    """A full-size forward pass whose activations cannot fit in memory (reported as it is)."""


def _free_memory_bytes() -> float | None:
    """Memory available to this process (Linux ``MemAvailable``), or None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _check_memory(cls: str, shapes: list[tuple[int, ...]], need_bytes: float | None) -> None:
    """Refuse a full-size forward pass whose activations cannot fit in memory (one error line)."""
    input_bytes = 4.0 * sum(_prod(s) for s in shapes)
    need = input_bytes + need_bytes if need_bytes else _ACTIVATIONS_PER_INPUT * input_bytes
    free = _free_memory_bytes()
    if free is not None and need > _MEMORY_SHARE * free:
        shown = " and ".join(str(tuple(s)) for s in shapes)
        raise _NoRoom(
            f"cannot convert {cls} at input shape {shown}: torch.fx cannot trace it, the ONNX export at small "
            f"probe sizes did not carry over to this size, and a forward pass at this size needs at least "
            f"{need / 2**30:.1f} GiB of activations ({free / 2**30:.1f} GiB free). Use a smaller input shape, "
            "or export the model to ONNX yourself (torch.onnx.export with dynamic_axes) and load the file")
_KNOWN_TYPES[nn.ReLU6] = T.RELU6
