"""fx rules for activations and normalisation: ReLU family, clip / hardtanh / clamp, leaky ReLU, the
shape-preserving unary ops (sigmoid, softmax, GELU, ...), BatchNorm and LayerNorm."""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from ....ir import LayerType
from ..registry import _FUNCTIONS, _KNOWN_TYPES, _METHODS, _MODULES, _reg
from ..values import T, _arg, _NoRule, _ShapeError, _TV, _x
from ..walker import _Walker


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


# ------------------------------------------------------------------------------------------------------
# registration

_UNARY_MODULES = {
    T.RELU: (nn.ReLU,), T.LEAKY_RELU: (nn.PReLU,), T.SIGMOID: (nn.Sigmoid,),
    T.SILU: (nn.SiLU,), T.HARDSWISH: (nn.Hardswish,), T.HARDSIGMOID: (nn.Hardsigmoid,), T.GELU: (nn.GELU,),
    T.TANH: (nn.Tanh,), T.SOFTMAX: (nn.Softmax, nn.Softmax2d, nn.LogSoftmax), T.SOFTPLUS: (nn.Softplus,),
    T.LRN: (nn.LocalResponseNorm,), T.ELEMENTWISE: (nn.ELU, nn.SELU, nn.CELU, nn.LogSigmoid, nn.Threshold),
}
_UNARY_FUNCTIONS = {
    T.RELU: (F.relu, F.relu_, torch.relu, torch.relu_), T.RELU6: (F.relu6,),
    T.LEAKY_RELU: (F.prelu,), T.SIGMOID: (F.sigmoid, torch.sigmoid),
    T.SILU: (F.silu,), T.HARDSWISH: (F.hardswish,), T.HARDSIGMOID: (F.hardsigmoid,), T.GELU: (F.gelu,),
    T.TANH: (F.tanh, torch.tanh), T.SOFTMAX: (F.softmax, torch.softmax, F.log_softmax, torch.log_softmax),
    T.SOFTPLUS: (F.softplus,), T.LRN: (F.local_response_norm,),
    T.BATCH_NORM: (F.batch_norm,), T.LAYER_NORM: (F.layer_norm, F.rms_norm),
}
_UNARY_METHODS = {
    T.RELU: ("relu", "relu_"), T.SIGMOID: ("sigmoid", "sigmoid_"), T.TANH: ("tanh", "tanh_"),
    T.SOFTMAX: ("softmax", "log_softmax"),
}
for _t, _keys in _UNARY_MODULES.items():
    _reg(_MODULES, _keys, _same(_t), _t)
for _t, _keys in _UNARY_FUNCTIONS.items():
    _reg(_FUNCTIONS, _keys, _same(_t), _t)
for _t, _keys in _UNARY_METHODS.items():
    _reg(_METHODS, _keys, _same(_t))
_reg(_MODULES, (nn.Hardtanh, nn.ReLU6), _hardtanh_module, T.CLIP)
_reg(_FUNCTIONS, (F.hardtanh,), _hardtanh_function, T.CLIP)
_reg(_FUNCTIONS, (torch.clamp, torch.clip), _clamp, T.CLIP)
_reg(_METHODS, ("clamp", "clamp_", "clip", "clip_"), _clamp)
_reg(_MODULES, (nn.LeakyReLU,), _leaky_module, T.LEAKY_RELU)
_reg(_FUNCTIONS, (F.leaky_relu, F.leaky_relu_), _leaky_function, T.LEAKY_RELU)
_reg(_MODULES, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d), _bn_module, T.BATCH_NORM)
_reg(_MODULES, (nn.LayerNorm, nn.RMSNorm), _layer_norm_module, T.LAYER_NORM)
# group and instance norms: per-sample statistics like a LayerNorm (what it costs), over channel groups
_reg(_MODULES, (nn.GroupNorm, nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d), _same(T.LAYER_NORM),
     T.LAYER_NORM)
_reg(_FUNCTIONS, (F.group_norm, F.instance_norm), _same(T.LAYER_NORM), T.LAYER_NORM)
_KNOWN_TYPES[nn.ReLU6] = T.RELU6  # runs the Hardtanh rule, but is a layer type of its own
