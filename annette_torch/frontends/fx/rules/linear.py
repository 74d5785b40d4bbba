"""fx rules for the layers with weights: convolutions (transposed too), fully connected layers, matrix
products and embeddings."""

from __future__ import annotations

import operator
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from ....ir import LayerType, conv_type
from ..registry import _FUNCTIONS, _METHODS, _MODULES, _reg
from ..values import T, _arg, _broadcast, _fold2, _NoRule, _prod, _ShapeError, _tup, _TV, _x
from ..walker import _Walker


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


def _embedding_module(w: _Walker, m, args, kwargs):
    x = _x(args, kwargs)
    w.unknown["Embedding"] = w.unknown.get("Embedding", 0) + 1
    return w.emit(T.UNKNOWN, (x,), x.shape + (m.embedding_dim,), op="Embedding")


# ------------------------------------------------------------------------------------------------------
# registration

_reg(_MODULES, (nn.Conv1d, nn.Conv2d, nn.Conv3d), _conv_module, T.CONV)
_reg(_MODULES, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d), _conv_transpose_module,
     T.CONV_TRANSPOSE)
_reg(_FUNCTIONS, (F.conv1d,), _conv_function(1), T.CONV)
_reg(_FUNCTIONS, (F.conv2d,), _conv_function(2), T.CONV)
_reg(_MODULES, (nn.Linear,), _linear_module, T.FULLY_CONNECTED)
_reg(_FUNCTIONS, (F.linear,), _linear_function, T.FULLY_CONNECTED)
_reg(_FUNCTIONS, (torch.matmul, operator.matmul, torch.mm, torch.bmm), _matmul, T.MATMUL)
_reg(_METHODS, ("matmul", "mm", "bmm"), _matmul)
_reg(_MODULES, (nn.Embedding,), _embedding_module)
