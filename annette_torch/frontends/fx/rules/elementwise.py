"""fx rules for element-wise arithmetic: add, mul, sub and div between tensors (broadcast) or with scalars;
the other element-wise math (exp, log, sqrt, pow, erf, neg, abs, ELU, ...), comparisons, ``where`` and
``masked_fill`` as one ``Elementwise`` layer each, as the ONNX front end reads their exports."""

from __future__ import annotations

import operator
from typing import Callable

import torch
import torch.nn.functional as F

from ....ir import LayerType
from ..registry import _FUNCTIONS, _METHODS, _reg
from ..values import T, _arg, _broadcast, _NoRule, _TV
from ..walker import _Walker


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


def _elementwise(dtype: torch.dtype | None = None) -> Callable:
    """An ``Elementwise`` layer reading every tensor argument, of their broadcast shape (``dtype``: its values'
    type where not float, e.g. a comparison's bool that a ``where`` reads)."""
    def rule(w: _Walker, fn, args, kwargs):
        tvs = [v for v in (*args, *kwargs.values()) if type(v) is _TV]
        if not tvs or (fn in (torch.where, "where") and len(args) + len(kwargs) == 1):
            raise _NoRule("no tensor operand, or where(condition): the indices")
        out = w.emit(T.ELEMENTWISE, tvs, _broadcast([v.shape for v in tvs]))
        out.dtype = dtype
        return out
    return rule


def _square(w: _Walker, fn, args, kwargs):
    """``square``: the ``x * x`` it exports to."""
    return _binary(T.MUL)(w, fn, (args[0], args[0]), kwargs)


# ------------------------------------------------------------------------------------------------------
# registration

_BINARY = {
    T.ADD: ((operator.add, operator.iadd, torch.add), ("add", "add_")),
    T.MUL: ((operator.mul, operator.imul, torch.mul, torch.multiply), ("mul", "mul_", "multiply")),
    T.SUB: ((operator.sub, operator.isub, torch.sub, torch.subtract), ("sub", "sub_", "subtract")),
    T.DIV: ((operator.truediv, operator.itruediv, torch.div, torch.divide, torch.true_divide),
            ("div", "div_", "divide", "true_divide")),
}
for _t, (_fns, _meths) in _BINARY.items():
    _reg(_FUNCTIONS, _fns, _binary(_t), _t)
    _reg(_METHODS, _meths, _binary(_t))

_UNARY_FUNCTIONS = (torch.exp, torch.exp2, torch.expm1, torch.log, torch.log2, torch.log10, torch.log1p, torch.sqrt,
                    torch.rsqrt, torch.abs, torch.neg, torch.negative, torch.reciprocal, torch.erf, torch.erfc,
                    torch.sin, torch.cos, torch.tan, torch.asin, torch.acos, torch.atan, torch.sinh, torch.cosh,
                    torch.sign, torch.floor, torch.ceil, torch.round, torch.pow,
                    torch.maximum, torch.minimum, torch.where, torch.cumsum, torch.masked_fill, operator.pow,
                    operator.neg, operator.abs, F.elu, F.selu, F.celu, F.logsigmoid, F.threshold)
_UNARY_METHODS = ("exp", "exp_", "log", "log_", "log1p", "sqrt", "sqrt_", "rsqrt", "abs", "abs_", "neg", "neg_",
                  "reciprocal", "erf", "sin", "cos", "tan", "asin", "acos", "atan", "sign", "floor", "ceil", "round",
                  "pow", "pow_",
                  "maximum", "minimum", "where", "cumsum", "masked_fill", "masked_fill_")
_COMPARE_FUNCTIONS = (operator.gt, operator.lt, operator.ge, operator.le, operator.eq, operator.ne, torch.gt,
                      torch.lt, torch.ge, torch.le, torch.eq, torch.ne, torch.logical_not, torch.logical_and,
                      torch.logical_or, torch.isnan, operator.invert, operator.and_, operator.or_)
_COMPARE_METHODS = ("gt", "lt", "ge", "le", "eq", "ne", "logical_not", "logical_and", "logical_or", "isnan")
_reg(_FUNCTIONS, _UNARY_FUNCTIONS, _elementwise(), T.ELEMENTWISE)
_reg(_METHODS, _UNARY_METHODS, _elementwise())
_reg(_FUNCTIONS, _COMPARE_FUNCTIONS, _elementwise(torch.bool), T.ELEMENTWISE)
_reg(_METHODS, _COMPARE_METHODS, _elementwise(torch.bool))
_reg(_FUNCTIONS, (torch.square,), _square, T.MUL)
_reg(_METHODS, ("square",), _square)
