"""fx rules for element-wise arithmetic: add, mul, sub and div between tensors (broadcast) or with scalars."""

from __future__ import annotations

import operator
from typing import Callable

import torch

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
