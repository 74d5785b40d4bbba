"""fx rules for pooling and spatial resampling: max / average / adaptive pooling, mean and amax reductions
(global pooling over all spatial dimensions), resize (upsample, interpolate) and padding."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from ....ir import LayerType
from ..registry import _FUNCTIONS, _METHODS, _MODULES, _reg
from ..values import T, _arg, _broadcast, _dim, _fold2, _NoRule, _prod, _ShapeError, _tup, _TV, _x
from ..walker import _to_meta, _Walker


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
        return w.emit(T.REDUCE_MEAN, (x,), out)  # (a max over tokens or channels too, as ONNX ReduceMax is read)
    return rule


def _reduction(w: _Walker, fn, args, kwargs):
    """Any other reduction (sum, norm, variance, max / min with their indices, ...): one ``ReduceMean`` layer of
    the result's shape (found on the meta device), as the ONNX front end reads ReduceSum, ReduceL2, ArgMax."""
    x = _x(args, kwargs)
    other = _arg(args, kwargs, 1, "other")
    if type(other) is _TV:  # torch.max(a, b): element by element
        return w.emit(T.ELEMENTWISE, (x, other), _broadcast([x.shape, other.shape]))
    margs, mkwargs = _to_meta(args), _to_meta(kwargs)
    try:
        res = getattr(margs[0], fn)(*margs[1:], **mkwargs) if isinstance(fn, str) else fn(*margs, **mkwargs)
    except Exception as e:  # noqa: BLE001 - torch's own argument check: the walker reports the shapes
        raise _ShapeError(str(e).splitlines()[0]) from None
    outs = list(res) if isinstance(res, tuple) else [res]
    if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
        raise _NoRule("not a tensor result")
    d, r = _arg(args, kwargs, 1, "dim"), len(x.shape)
    if fn in ("max", torch.max) and d is not None and r >= 3 and {_dim(v, r) for v in _tup(d, 1)} == set(range(2, r)):
        y = _reduce("max")(w, fn, args, kwargs)  # (over the spatial axes: a global max pooling, as ONNX is read)
    else:
        y = w.emit(T.REDUCE_MEAN, (x,), tuple(outs[0].shape))
    if len(outs) == 1:
        return y
    vals = [y] + [_TV(y.layer, tuple(o.shape), None if o.dtype == torch.float32 else o.dtype) for o in outs[1:]]
    return type(res)(vals) if hasattr(res, "_fields") else tuple(vals)  # (values, indices) of max / min


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


# ------------------------------------------------------------------------------------------------------
# registration

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
_reg(_FUNCTIONS, (torch.mean,), _reduce("avg"), T.REDUCE_MEAN)
_reg(_METHODS, ("mean",), _reduce("avg"))
_reg(_FUNCTIONS, (torch.amax,), _reduce("max"))
_reg(_METHODS, ("amax",), _reduce("max"))
_REDUCTIONS = ("sum", "nansum", "prod", "amin", "logsumexp", "norm", "var", "std", "argmax", "argmin", "max", "min",
               "all", "any", "topk", "kthvalue", "median")
_reg(_FUNCTIONS, tuple(getattr(torch, n) for n in _REDUCTIONS), _reduction, T.REDUCE_MEAN)
_reg(_METHODS, _REDUCTIONS, _reduction)
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
