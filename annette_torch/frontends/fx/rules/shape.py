"""fx rules for shape and layout ops: flatten, reshape / view, squeeze, transpose / permute, roll, concat and
stack, split / chunk / unbind, indexing, shape queries, and the ops that export to nothing (dropout,
stochastic depth, identity, ``contiguous``, dtype casts)."""

from __future__ import annotations

import operator
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ....ir import transpose_slow
from ..registry import _FUNCTION_NAMES, _FUNCTIONS, _METHODS, _MODULES, _reg
from ..values import T, _arg, _dim, _NoRule, _prod, _ShapeError, _tup, _TV, _x
from ..walker import _Walker


def _passthrough(w: _Walker, fn, args, kwargs):
    return _x(args, kwargs)


def _roll(w: _Walker, fn, args, kwargs):
    """A cyclic shift, as ONNX writes it: per shifted dimension, its two pieces sliced off and concatenated in
    the other order (every element copied)."""
    x = _x(args, kwargs)
    shifts, dims = _arg(args, kwargs, 1, "shifts"), _arg(args, kwargs, 2, "dims")
    if dims is None or (isinstance(dims, (tuple, list)) and not dims):
        raise _NoRule("roll of the flattened tensor")
    shifts, dims = _tup(shifts, 1), _tup(dims, 1)
    if len(shifts) != len(dims):
        raise _ShapeError(f"roll: {len(shifts)} shifts for {len(dims)} dimensions")
    for sh, d in zip(shifts, dims):
        d = _dim(int(d), len(x.shape))
        n = x.shape[d]
        k = int(sh) % n if n else 0
        if not k:
            continue
        head, tail = list(x.shape), list(x.shape)
        head[d], tail[d] = k, n - k
        a = w.emit(T.SLICE, (x,), tuple(head))
        b = w.emit(T.SLICE, (x,), tuple(tail))
        x = w.emit(T.CONCAT, (a, b), x.shape)
    return x


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


def _expand(w: _Walker, fn, args, kwargs):
    """``expand`` / ``expand_as``: the broadcast tensor written out, as ONNX's Expand is read (a copy, ``Concat``)."""
    x = _x(args, kwargs)
    if fn == "expand_as":
        out = tuple(_arg(args, kwargs, 1, "other").shape)
    else:
        sizes = [int(v) for v in _shape_args(args, kwargs, "size")]
        lead = len(sizes) - len(x.shape)
        if lead < 0:
            raise _ShapeError(f"expand to {sizes}: fewer dimensions than the tensor's {list(x.shape)}")
        out = tuple(x.shape[i - lead] if v == -1 and i >= lead else v for i, v in enumerate(sizes))
        if any(v < 0 for v in out) or any(d != 1 and d != out[lead + i] for i, d in enumerate(x.shape)):
            raise _ShapeError(f"cannot expand {list(x.shape)} to {sizes}")
    return w.emit(T.CONCAT, (x,), out)


def _repeat(w: _Walker, fn, args, kwargs):
    """``repeat`` / ``tile``: copies of the tensor side by side (``Concat``)."""
    x = _x(args, kwargs)
    reps = [int(v) for v in _shape_args(args, kwargs, "repeats" if fn == "repeat" else "dims")]
    if fn == "repeat" and len(reps) < len(x.shape):
        raise _ShapeError(f"repeat {reps}: fewer repeats than the tensor's dimensions {list(x.shape)}")
    reps = [1] * (len(x.shape) - len(reps)) + reps
    shape = (1,) * (len(reps) - len(x.shape)) + tuple(x.shape)
    return w.emit(T.CONCAT, (x,), tuple(a * b for a, b in zip(shape, reps)))


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
    perm = list(range(len(s)))
    perm[a], perm[b] = b, a
    return w.emit(T.TRANSPOSE, (x,), tuple(s), slow=transpose_slow(x.shape, perm))


def _channel_shuffle(w: _Walker, fn, args, kwargs):
    """``nn.ChannelShuffle`` / ``F.channel_shuffle``: the view, transpose and view back ShuffleNet writes by hand
    (and the mapping pass runs as one ``ChannelShuffle`` where the runtime does)."""
    x = _x(args, kwargs)
    g = int(fn.groups if isinstance(fn, nn.ChannelShuffle) else _arg(args, kwargs, 1, "groups"))
    if len(x.shape) < 2 or g < 1 or x.shape[1] % g:
        raise _ShapeError(f"channel_shuffle: {g} groups do not divide the channels of {list(x.shape)}")
    n, c, rest = x.shape[0], x.shape[1], tuple(x.shape[2:])
    v = w.emit(T.RESHAPE, (x,), (n, g, c // g) + rest)
    perm = [0, 2, 1] + list(range(3, 3 + len(rest)))
    v = w.emit(T.TRANSPOSE, (v,), (n, c // g, g) + rest, slow=transpose_slow(v.shape, perm))
    return w.emit(T.RESHAPE, (v,), x.shape)


def _t(w: _Walker, fn, args, kwargs):
    x = _x(args, kwargs)
    return w.emit(T.TRANSPOSE, (x,), x.shape[::-1], slow=transpose_slow(x.shape, range(len(x.shape))[::-1]))


def _permute(w: _Walker, fn, args, kwargs):
    x = _x(args, kwargs)
    dims = _shape_args(args, kwargs, "dims")
    r = len(x.shape)
    dims = [_dim(d, r) for d in dims]
    if sorted(dims) != list(range(r)):
        raise _ShapeError(f"permute dims {list(dims)} are not a permutation of {r} dimensions")
    return w.emit(T.TRANSPOSE, (x,), tuple(x.shape[d] for d in dims), slow=transpose_slow(x.shape, dims))


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
    """Split / chunk / unbind: one Slice layer (as ONNX's Split) whose output shape is the first piece's; a
    `LayerType.PICK` along the leading axis (``qkv.unbind(0)``: contiguous parts of the input)."""
    s = x.shape
    shapes = [s[:d] + ((n,) if keep else ()) + s[d + 1:] for n in sizes]
    if not shapes:
        return ()
    layer = w.emit(T.PICK if d == 0 and len(s) >= 2 else T.SLICE, (x,), shapes[0]).layer
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
    # one entry of the leading axis, the rest whole (``qkv[i]``): a contiguous part of the input
    pick = len(s) >= 2 and type(idx[0]) is int and all(type(i) is slice and i.indices(n) == (0, n, 1)
                                                       for i, n in zip(idx[1:], s[1:]))
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
    return w.emit(T.PICK if pick else T.SLICE, (x,), tuple(out))


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
        return w.emit(T.TRANSPOSE, (x,), x.shape[::-1], slow=transpose_slow(x.shape, range(len(x.shape))[::-1]))
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


# ------------------------------------------------------------------------------------------------------
# registration

_reg(_MODULES, (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout,
                nn.Identity), _passthrough)
_reg(_FUNCTIONS, (F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout),
     _passthrough)
_reg(_METHODS, ("contiguous", "clone", "detach", "float", "to", "type_as", "cpu", "requires_grad_"), _passthrough)
_reg(_FUNCTION_NAMES, ("stochastic_depth", "drop_path"), _passthrough)  # (torchvision, timm): identity in eval
_reg(_FUNCTIONS, (torch.roll,), _roll, T.CONCAT)
_reg(_METHODS, ("roll",), _roll)
_reg(_MODULES, (nn.Flatten,), _flatten_module, T.FLATTEN)
_reg(_FUNCTIONS, (torch.flatten,), _flatten_function(0), T.FLATTEN)
_reg(_METHODS, ("flatten",), _flatten_function(0))
_reg(_MODULES, (nn.Unflatten,), _unflatten_module, T.RESHAPE)
_reg(_FUNCTIONS, (torch.reshape,), _reshape, T.RESHAPE)
_reg(_METHODS, ("view", "reshape"), _reshape)
_reg(_METHODS, ("view_as", "reshape_as"), _view_as)
_reg(_METHODS, ("expand", "expand_as"), _expand)
_reg(_FUNCTIONS, (torch.tile,), lambda w, fn, a, k: _repeat(w, "tile", a, k), T.CONCAT)
_reg(_METHODS, ("repeat", "tile"), _repeat)
_reg(_FUNCTIONS, (torch.squeeze,), _squeeze, T.RESHAPE)
_reg(_METHODS, ("squeeze",), _squeeze)
_reg(_FUNCTIONS, (torch.unsqueeze,), _unsqueeze, T.RESHAPE)
_reg(_METHODS, ("unsqueeze",), _unsqueeze)
_reg(_FUNCTIONS, (torch.transpose, torch.swapaxes), _transpose, T.TRANSPOSE)
_reg(_METHODS, ("transpose", "swapaxes"), _transpose)
_reg(_FUNCTIONS, (torch.t,), _t, T.TRANSPOSE)
_reg(_MODULES, (nn.ChannelShuffle,), _channel_shuffle, T.TRANSPOSE)
_reg(_FUNCTIONS, (F.channel_shuffle, F.native_channel_shuffle), _channel_shuffle, T.TRANSPOSE)
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
